"""Hash joins on integer keys: a numba build/probe kernel returning row index pairs.

The build side gets an open-addressing table (linear probing, power-of-two capacity, at most
half full) whose slots hold a key and the first/last row of a chain of equal keys, chained in
row order. Probing counts the matches of every probe row, a prefix sum places them, and a
parallel pass writes the pairs, so the output is ordered by probe row, then build row: the same
for any thread count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

__all__ = ["hash_join", "HOW"]

HOW = ("inner", "left", "semi", "anti")
_kernels: dict[str, Any] = {}


# kernels at module level so numba can cache them on disk (cache=True)
@njit(inline="always", cache=True)
def slot_of(key, mask):  # type: ignore[no-untyped-def]
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64((h >> np.uint64(29)) & np.uint64(mask))


@njit(nogil=True, cache=True)
def build(keys, capacity):  # type: ignore[no-untyped-def]
    # slots interleave (key, first row) so a probe touches one cache line per slot
    mask = capacity - 1
    table = np.full((capacity, 2), -1, dtype=np.int64)
    last = np.full(capacity, -1, dtype=np.int64)
    chain = np.full(keys.shape[0], -1, dtype=np.int64)
    for j in range(keys.shape[0]):
        k = keys[j]
        s = slot_of(k, mask)
        while table[s, 1] != -1 and table[s, 0] != k:
            s = (s + 1) & mask
        if table[s, 1] == -1:
            table[s, 0] = k
            table[s, 1] = j
        else:
            chain[last[s]] = j
        last[s] = j
    return table, chain


@njit(inline="always", cache=True)
def find(k, table, mask):  # type: ignore[no-untyped-def]
    s = slot_of(k, mask)
    while table[s, 1] != -1:
        if table[s, 0] == k:
            return table[s, 1]
        s = (s + 1) & mask
    return -1


@njit(parallel=True, nogil=True, cache=True)
def count(probe, valid, table, chain, outer):  # type: ignore[no-untyped-def]
    # one lookup per probe row: its first match is kept for the fill pass
    mask = table.shape[0] - 1
    counts = np.zeros(probe.shape[0], dtype=np.int64)
    hit = np.empty(probe.shape[0], dtype=np.int64)
    for i in prange(probe.shape[0]):
        j = find(probe[i], table, mask) if valid[i] else -1
        hit[i] = j
        c = 0
        while j != -1:
            c += 1
            j = chain[j]
        counts[i] = c if c > 0 or not outer else 1
    return counts, hit


@njit(parallel=True, nogil=True, cache=True)
def fill(hit, chain, offsets, left, right):  # type: ignore[no-untyped-def]
    for i in prange(hit.shape[0]):
        o = offsets[i]
        j = hit[i]
        if j == -1 and o < offsets[i + 1]:  # outer row without a match
            left[o] = i
            right[o] = -1
        while j != -1:
            left[o] = i
            right[o] = j
            o += 1
            j = chain[j]


def _compile() -> dict[str, Any]:
    return {"build": build, "count": count, "fill": fill}


def hash_join(
    probe: np.ndarray,
    build: np.ndarray,
    how: str = "inner",
    probe_valid: np.ndarray | None = None,
    build_valid: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Row index pairs ``(probe_rows, build_rows)`` of the equi-join ``probe.key = build.key``.

    Parameters
    ----------
    probe, build : 1-D integer arrays
        Join keys (any integer dtype; compared as int64).
    how : {"inner", "left", "semi", "anti"}
        ``left`` keeps unmatched probe rows with build row ``-1``; ``semi``/``anti`` return the
        probe rows with / without a match (build rows ``-1``).
    probe_valid, build_valid : bool arrays, optional
        Validity masks: a null key matches nothing (SQL semantics).

    Returns
    -------
    (ndarray, ndarray)
        int64 row indices, ordered by probe row, then build row.
    """
    if how not in HOW:
        raise ValueError(f"how={how!r}: expected one of {HOW}")
    for name, keys in (("probe", probe), ("build", build)):
        if keys.ndim != 1 or not np.issubdtype(keys.dtype, np.integer):
            raise TypeError(f"{name} keys: need a 1-D integer array, got {keys.dtype} {keys.shape}")
    if not _kernels:
        _kernels.update(_compile())
    k = _kernels
    p = probe.astype(np.int64, copy=False)
    b = build.astype(np.int64, copy=False)
    if build_valid is not None:  # null build keys never match: leave them out of the table
        kept = np.flatnonzero(build_valid)
        b = b[kept]
    capacity = 1 << max(4, int(2 * max(len(b), 1) - 1).bit_length())
    table, chain = k["build"](b, capacity)
    valid = np.ones(len(p), dtype=bool) if probe_valid is None else probe_valid  # null: no match
    counts, hit = k["count"](p, valid, table, chain, how == "left")
    if how in ("semi", "anti"):
        rows = np.flatnonzero(counts > 0 if how == "semi" else counts == 0)
        return rows, np.full(len(rows), -1, dtype=np.int64)
    offsets = np.zeros(len(p) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    left = np.empty(int(offsets[-1]), dtype=np.int64)
    right = np.empty(int(offsets[-1]), dtype=np.int64)
    k["fill"](hit, chain, offsets, left, right)
    if build_valid is not None:  # back to the caller's build rows
        hit = right >= 0
        right[hit] = kept[right[hit]]
    return left, right
