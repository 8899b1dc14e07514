"""GPU kernels (numba.cuda) of the hash join, the group-by hash table and the per-group reductions.

Both hash tables are open-addressing tables of int64 keys with linear probing over a
power-of-two capacity, at least twice the keys, so probe sequences stay short. A slot is claimed
by an atomic compare-and-swap of the key word from the empty marker ``EMPTY`` (the smallest
int64); a key equal to the marker itself lives in one extra slot past the end (index
``capacity``), so every int64 value is a valid key. Every kernel is a grid-stride loop over rows.

Join: the build kernel pushes each build row onto its slot's chain (``head[slot]`` swapped
atomically with the row, the old head stored in ``next[row]``), so chains come out in no
particular order. The probe kernels count the matches of every probe row, the caller scans the
counts, and the fill kernel writes the pairs of each probe row at its offset.

Group-by: each row's key is inserted, the slot is stored per row, and an atomic min keeps the
smallest row per slot: the group's first row, by which the caller numbers the groups.

Written against the module-level ``cuda`` name, so the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) can stand in for a device; kernels compile at their first launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, float64, int64

from hpc.jit import specialise

__all__ = [
    "EMPTY",
    "join_build",
    "join_count",
    "join_fill",
    "group_insert",
    "count_rows",
    "SMALL_GROUPS",
    "small_sum_count_f64",
    "small_sum_count_i64",
    "sum_count",
    "min_rows",
    "max_rows",
]

EMPTY = int(np.iinfo(np.int64).min)  # marks a free key slot


@cuda.jit(device=True)
def _slot(key, mask):  # pragma: no cover - compiled
    # multiply-xor of the two 32-bit halves: each product stays below 2**63, so nothing
    # overflows (the simulator computes with NumPy scalars, which warn on overflow)
    lo = key & 0xFFFFFFFF
    hi = (key >> 32) & 0xFFFFFFFF
    h = (lo * 0x5BD1E995) ^ (hi * 0x1B873593)
    h ^= h >> 29
    return h & mask


@cuda.jit(device=True)
def _insert(table, key, mask):  # pragma: no cover - compiled
    # the slot holding key, claimed by compare-and-swap when the key is new
    if key == EMPTY:
        return mask + 1
    s = _slot(key, mask)
    while True:
        t = table[s]  # a plain read first: a key met before needs no atomic (few hot keys)
        if t == key:
            return s
        if t == EMPTY:
            prev = cuda.atomic.cas(table, s, EMPTY, key)
            if prev == EMPTY or prev == key:
                return s
        s = (s + 1) & mask


@cuda.jit(device=True)
def _find(table, key, mask):  # pragma: no cover - compiled
    # the slot holding key, or -1 (the table is read-only here)
    if key == EMPTY:
        return mask + 1
    s = _slot(key, mask)
    while True:
        t = table[s]
        if t == key:
            return s
        if t == EMPTY:
            return -1
        s = (s + 1) & mask


@cuda.jit
def join_build(keys, valid, use_valid, table, head, nxt):  # pragma: no cover - compiled
    """Insert every valid build row: claim its key's slot, push the row onto the slot's chain."""
    mask = table.shape[0] - 2
    for j in range(cuda.grid(1), keys.shape[0], cuda.gridsize(1)):
        if use_valid and not valid[j]:
            continue  # a null key matches nothing: not in the table
        s = _insert(table, keys[j], mask)
        nxt[j] = cuda.atomic.exch(head, s, j)


@cuda.jit
def join_count(
    keys, valid, use_valid, table, head, nxt, outer, exists, counts, hit
):  # pragma: no cover - compiled
    """Matches of every probe row (``exists``: stop at the first; ``outer``: at least one) and
    its first build row (``hit``, -1 without a match) for the fill pass."""
    mask = table.shape[0] - 2
    for i in range(cuda.grid(1), keys.shape[0], cuda.gridsize(1)):
        j = -1
        if not use_valid or valid[i]:
            s = _find(table, keys[i], mask)
            if s >= 0:
                j = head[s]
        hit[i] = j
        c = 0
        while j != -1:
            c += 1
            if exists:
                break
            j = nxt[j]
        if outer and c == 0:
            c = 1
        counts[i] = c


@cuda.jit
def join_fill(hit, nxt, offsets, left, right):  # pragma: no cover - compiled
    """Write the (probe row, build row) pairs of probe row ``i`` at ``offsets[i]``."""
    for i in range(cuda.grid(1), hit.shape[0], cuda.gridsize(1)):
        o = offsets[i]
        j = hit[i]
        if j == -1 and o < offsets[i + 1]:  # outer row without a match
            left[o] = i
            right[o] = -1
        while j != -1:
            left[o] = i
            right[o] = j
            o += 1
            j = nxt[j]


@cuda.jit
def group_insert(keys, table, first, row_slot):  # pragma: no cover - compiled
    """Slot of every row's key, and the smallest row of each slot (``first``, preset to n)."""
    mask = table.shape[0] - 2
    for i in range(cuda.grid(1), keys.shape[0], cuda.gridsize(1)):
        s = _insert(table, keys[i], mask)
        row_slot[i] = s
        if i < first[s]:  # first only decreases: a stale read costs an atomic, never a result
            cuda.atomic.min(first, s, i)


SMALL_GROUPS = 512  # up to this many groups, blocks reduce in shared memory first


def _small_sum_count(ids, values, valid, use_valid, with_sum, total, counts):  # pragma: no cover
    """Sum and count per group for at most SMALL_GROUPS groups: each block accumulates in
    shared memory, then adds its partials to the global arrays (one global atomic per block
    and group instead of one per row, which few groups would serialise). ``_PART``: the type
    of the sums, bound per version (a template of :func:`hpc.jit.specialise`)."""
    part = cuda.shared.array(SMALL_GROUPS, _PART)
    seen = cuda.shared.array(SMALL_GROUPS, int64)
    ngroups = counts.shape[0]
    for g in range(cuda.threadIdx.x, ngroups, cuda.blockDim.x):
        part[g] = 0
        seen[g] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), ids.shape[0], cuda.gridsize(1)):
        if not use_valid or valid[i]:
            g = ids[i]
            if with_sum:
                cuda.atomic.add(part, g, values[i])
            cuda.atomic.add(seen, g, 1)
    cuda.syncthreads()
    for g in range(cuda.threadIdx.x, ngroups, cuda.blockDim.x):
        if seen[g]:
            if with_sum:
                cuda.atomic.add(total, g, part[g])
            cuda.atomic.add(counts, g, seen[g])


def _small_sum_count_for(part_type: Any) -> Any:
    """The kernel :func:`_small_sum_count` with sums of ``part_type`` (generated, cached)."""
    bind = {"_PART": part_type}
    label = f"sql_small_groups_{part_type}"
    module = specialise(label, [_small_sum_count], bind=bind, target="cuda")
    return module._small_sum_count


_PART = float64  # bound per version
small_sum_count_f64 = _small_sum_count_for(float64)
small_sum_count_i64 = _small_sum_count_for(int64)


@cuda.jit
def count_rows(ids, valid, use_valid, counts):  # pragma: no cover - compiled
    """Rows (valid rows when ``use_valid``) per group."""
    for i in range(cuda.grid(1), ids.shape[0], cuda.gridsize(1)):
        if not use_valid or valid[i]:
            cuda.atomic.add(counts, ids[i], 1)


@cuda.jit
def sum_count(ids, values, valid, use_valid, total, counts):  # pragma: no cover - compiled
    """Sum and count of the valid values per group (float sums in arrival order)."""
    for i in range(cuda.grid(1), ids.shape[0], cuda.gridsize(1)):
        if not use_valid or valid[i]:
            g = ids[i]
            cuda.atomic.add(total, g, values[i])
            cuda.atomic.add(counts, g, 1)


@cuda.jit
def min_rows(ids, values, valid, use_valid, out, seen):  # pragma: no cover - compiled
    """Smallest valid value per group into ``out`` (preset to the dtype's largest value)."""
    for i in range(cuda.grid(1), ids.shape[0], cuda.gridsize(1)):
        if not use_valid or valid[i]:
            g = ids[i]
            cuda.atomic.min(out, g, values[i])
            seen[g] = 1  # every writer stores the same byte


@cuda.jit
def max_rows(ids, values, valid, use_valid, out, seen):  # pragma: no cover - compiled
    """Largest valid value per group into ``out`` (preset to the dtype's smallest value)."""
    for i in range(cuda.grid(1), ids.shape[0], cuda.gridsize(1)):
        if not use_valid or valid[i]:
            g = ids[i]
            cuda.atomic.max(out, g, values[i])
            seen[g] = 1
