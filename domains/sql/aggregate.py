"""Group-by: keys to dense group ids (a numba hash table, groups numbered in order of first
appearance), then segmented reductions over the ids (sum, count, min, max, mean, count
distinct). Multi-column keys are combined pairwise into one int64 id before hashing."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from hpc.backend import array_module

from .join import slot_of

__all__ = ["group_ids", "combine_ids", "reduce_groups", "AGGREGATES"]

AGGREGATES = ("sum", "count", "min", "max", "avg", "count_distinct")
_kernels: dict[str, Any] = {}


# kernels at module level so numba can cache them on disk (cache=True)
@njit(nogil=True, cache=True)
def factorise_dense(keys, lo, slot_id, ids, first):  # type: ignore[no-untyped-def]
    # keys in [lo, lo + span): a direct table slot_id (span entries of -1) instead of
    # hashing; notes each group's first row as it goes (no second pass). The table, ids
    # and first come from NumPy: its large allocations are huge-page backed, numba's fault
    # in 4 KiB pages. Unsigned indices: no negative-index test per row
    n = 0
    for i in range(np.uint64(keys.shape[0])):
        s = np.uint64(keys[i] - lo)
        g = slot_id[s]
        if g == -1:
            g = n
            slot_id[s] = g
            first[g] = i
            n += 1
        ids[i] = g
    return n


@njit(parallel=True, nogil=True, cache=True)
def factorise_small(keys, lo, span, chunks, ids):  # type: ignore[no-untyped-def]
    # keys in [lo, lo + span) with span small: each of ``chunks`` row ranges, on its thread,
    # notes its first row of every key; the earliest over the chunks numbers the groups in
    # order of first appearance (as factorise_dense does), and a second parallel pass maps
    # the keys to those ids. Returns (groups, first row of each group).
    n = keys.shape[0]
    first = np.full((chunks, span), -1, dtype=np.int64)
    for c in prange(chunks):
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            s = keys[i] - lo
            if first[c, s] == -1:
                first[c, s] = i
    earliest = np.full(span, -1, dtype=np.int64)
    for s in range(span):
        for c in range(chunks):
            if first[c, s] != -1:
                earliest[s] = first[c, s]
                break
    present = np.flatnonzero(earliest >= 0)
    rows = earliest[present]
    order = np.argsort(rows)
    slot_id = np.full(span, -1, dtype=np.int64)
    for g in range(order.shape[0]):
        slot_id[present[order[g]]] = g
    for i in prange(n):
        ids[i] = slot_id[keys[i] - lo]
    return order.shape[0], rows[order]


@njit(parallel=True, nogil=True, cache=True)
def min_max(values):  # type: ignore[no-untyped-def]
    # (min, max) of a non-empty integer column in one pass on all threads
    lo = values[0]
    hi = values[0]
    for i in prange(values.shape[0]):
        v = values[i]
        lo = min(lo, v)
        hi = max(hi, v)
    return lo, hi


@njit(nogil=True, cache=True)
def factorise(keys, ids, slot_key, slot_id, start, n):  # type: ignore[no-untyped-def]
    # open addressing in the caller's tables, rows from `start`, new groups numbered from
    # `n`; stops before a new group would fill the table past half and returns (that row,
    # groups so far), so the caller grows the table: reassigning the tables in here would
    # cost reference counting in the loop (measured 4x slower)
    mask = slot_key.shape[0] - 1
    limit = slot_key.shape[0] // 2
    for i in range(start, keys.shape[0]):
        k = keys[i]
        s = slot_of(k, mask)
        while slot_id[s] != -1 and slot_key[s] != k:
            s = (s + 1) & mask
        if slot_id[s] == -1:
            if n >= limit:
                return i, n
            slot_key[s] = k
            slot_id[s] = n
            n += 1
        ids[i] = slot_id[s]
    return keys.shape[0], n


@njit(nogil=True, cache=True)
def rehash(old_key, old_id, slot_key, slot_id):  # type: ignore[no-untyped-def]
    # the groups of a full table into a larger one
    mask = slot_key.shape[0] - 1
    for j in range(old_key.shape[0]):
        if old_id[j] != -1:
            t = slot_of(old_key[j], mask)
            while slot_id[t] != -1:
                t = (t + 1) & mask
            slot_key[t] = old_key[j]
            slot_id[t] = old_id[j]


@njit(nogil=True, cache=True)
def distinct_count(keys):  # type: ignore[no-untyped-def]
    # a set sized once for every key distinct (at most half full): no rehashing
    capacity = 1 << 4
    while capacity < 2 * keys.shape[0]:
        capacity *= 2
    mask = capacity - 1
    slot_key = np.zeros(capacity, dtype=np.int64)
    used = np.zeros(capacity, dtype=np.bool_)
    n = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        s = slot_of(k, mask)
        while used[s] and slot_key[s] != k:
            s = (s + 1) & mask
        if not used[s]:
            used[s] = True
            slot_key[s] = k
            n += 1
    return n


@njit(parallel=True, nogil=True, cache=True)
def mask_groups(ids, kept, ngroups, out, present):  # type: ignore[no-untyped-def]
    # out: ids where kept, else ngroups; present[g]: some kept row is in group g (written
    # True only: concurrent writes of the same value are benign)
    for i in prange(ids.shape[0]):
        if kept[i]:
            out[i] = ids[i]
            present[ids[i]] = True
        else:
            out[i] = ngroups


@njit(nogil=True, cache=True)
def first_rows(ids, n):  # type: ignore[no-untyped-def]
    first = np.empty(n, dtype=np.int64)
    seen = 0
    for i in range(ids.shape[0]):
        if ids[i] == seen:  # ids are numbered in order of first appearance
            first[seen] = i
            seen += 1
    return first


@njit(nogil=True, cache=True)
def sum_count(ids, values, valid, ngroups, total):  # type: ignore[no-untyped-def]
    # one pass: per-group sum and count of the valid rows
    counts = np.zeros(ngroups, dtype=np.int64)
    for i in range(ids.shape[0]):
        if valid[i]:
            g = ids[i]
            total[g] += values[i]
            counts[g] += 1
    return total, counts


@njit(nogil=True, cache=True)
def minmax(ids, values, valid, ngroups, want_max):  # type: ignore[no-untyped-def]
    out = np.zeros(ngroups, dtype=values.dtype)
    seen = np.zeros(ngroups, dtype=np.bool_)
    for i in range(ids.shape[0]):
        if valid[i]:
            g = ids[i]
            v = values[i]
            if not seen[g] or (v > out[g] if want_max else v < out[g]):
                out[g] = v
                seen[g] = True
    return out, seen


@njit(parallel=True, nogil=True, cache=True)
def pack_column(out, values, lo, span, valid, has_valid, first):  # type: ignore[no-untyped-def]
    # out = out * span + (values - lo) in place (out = values - lo for the first column); a
    # null is span - 1. One pass instead of NumPy's four temporaries of the key column
    for i in prange(values.shape[0]):
        v = np.int64(values[i]) - lo
        if has_valid and not valid[i]:
            v = span - 1
        out[i] = v if first else out[i] * span + v


def _compile() -> dict[str, Any]:
    return {
        "factorise": factorise,
        "factorise_dense": factorise_dense,
        "first_rows": first_rows,
        "minmax": minmax,
        "sum_count": sum_count,
    }


def group_ids(keys: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """``(ids, ngroups, first_rows)``: a dense id per row, ids in order of first appearance,
    and the first row of each group (to read the group's key columns)."""
    if not _kernels:
        _kernels.update(_compile())
    k = np.asarray(keys)
    if np.issubdtype(k.dtype, np.floating):  # by value: bits of the float64, -0.0 as 0.0
        k = (k.astype(np.float64) + 0.0).view(np.int64)
    k = k.astype(np.int64, copy=False)
    kern = _kernels
    if len(k) == 0:
        return np.zeros(0, np.int64), 0, np.zeros(0, np.int64)
    lo, hi = (int(x) for x in min_max(k))
    ids = np.empty(len(k), dtype=np.int64)
    if hi - lo < _SMALL_SPAN and len(k) >= _PARALLEL_ROWS:  # few keys, many rows
        n, first = factorise_small(k, lo, hi - lo + 1, _CHUNKS, ids)
        return ids, int(n), first
    if hi - lo < max(4 * len(k), 1 << 16) and hi - lo < 1 << 26:  # small key range
        first = np.empty(len(k), dtype=np.int64)
        n = kern["factorise_dense"](k, lo, np.full(hi - lo + 1, -1, np.int64), ids, first)
        return ids, int(n), first[:n]
    if len(k) >= _PARTITIONED_ROWS:
        n, first = _factorise_partitioned(k, ids)
        return ids, n, first
    n = _factorise_hashed(k, ids)
    return ids, int(n), kern["first_rows"](ids, n)


@njit(inline="always", cache=True)
def _mix(key):  # type: ignore[no-untyped-def]
    # a 64-bit hash of an int64 key (MurmurHash3's finaliser): its high bits pick the
    # partition, its low bits the slot there
    h = np.uint64(key)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(parallel=True, nogil=True, cache=True)
def _part_counts(keys, shift, parts, pieces, counts):  # type: ignore[no-untyped-def]
    # counts[c, p]: the keys of piece c (rows c n / pieces on) that fall in partition p
    n = keys.shape[0]
    for c in prange(pieces):
        for i in range(c * n // pieces, (c + 1) * n // pieces):
            counts[c, _mix(keys[i]) >> shift] += 1


@njit(parallel=True, nogil=True, cache=True)
def _part_scatter(keys, shift, pieces, at, order, moved):  # type: ignore[no-untyped-def]
    # rows grouped by partition, in row order within each (piece c writes from at[c, p])
    n = keys.shape[0]
    for c in prange(pieces):
        where = at[c].copy()
        for i in range(c * n // pieces, (c + 1) * n // pieces):
            k = keys[i]
            p = _mix(k) >> shift
            order[where[p]] = i
            moved[where[p]] = k
            where[p] += 1


@njit(inline="always", cache=True)
def part_table(rows):  # type: ignore[no-untyped-def]
    # an empty open-addressing table (-1: free) at most half full with ``rows`` entries,
    # and its slot mask
    size = 16
    while size < 2 * rows:
        size *= 2
    return np.full(size, -1, dtype=np.int64), np.uint64(size - 1)


@njit(parallel=True, nogil=True, cache=True)
def _first_in_key_parts(moved, order, starts, first):  # type: ignore[no-untyped-def]
    # per partition (a table that stays in cache), each row's first row with its key
    for p in prange(starts.shape[0] - 1):
        lo, hi = starts[p], starts[p + 1]
        table, mask = part_table(hi - lo)
        for t in range(lo, hi):
            k = moved[t]
            s = _mix(k) & mask
            while True:
                u = table[s]
                if u < 0:
                    table[s] = t
                    first[order[t]] = order[t]
                    break
                if moved[u] == k:
                    first[order[t]] = order[u]
                    break
                s = (s + np.uint64(1)) & mask


@njit(nogil=True, cache=True)
def _number_groups(first, ids, starts):  # type: ignore[no-untyped-def]
    # groups numbered in order of first appearance (a row's first row is never later);
    # starts[g]: group g's first row
    n = 0
    for i in range(first.shape[0]):
        f = first[i]
        if f == i:
            ids[i] = n
            starts[n] = i
            n += 1
        else:
            ids[i] = ids[f]
    return n


_PART_ROWS = 4096  # rows per partition, on average: its table (64 KB) stays in cache ...
# ... up to 256 partitions: more, and the scatter's write streams outrun the caches (2048
# partitions of 6M rows scattered 2.5x slower); a partition's table then fits in L2
_PART_BITS = 8


def _factorise_partitioned(keys: np.ndarray, ids: np.ndarray) -> tuple[int, np.ndarray]:
    """Dense ids numbered in order of first appearance, and each group's first row, on all
    threads: the rows are split by their keys' hash into partitions of a few thousand (a
    counting sort by pieces of rows, each piece on its thread), each partition's keys find
    their first row in a table that stays in cache, and one pass numbers the groups. One
    table for all rows (:func:`_factorise_hashed`) misses the cache on every row once the
    groups are many: 6M rows of 3M groups took 160 ms that way."""
    import numba

    n = len(keys)
    bits = min(max(int(n // _PART_ROWS).bit_length(), 1), _PART_BITS)
    parts = 1 << bits
    shift = np.uint64(64 - bits)
    pieces = max(1, min(numba.get_num_threads(), n // _PART_ROWS))
    counts = np.zeros((pieces, parts), dtype=np.int64)
    _part_counts(keys, shift, parts, pieces, counts)
    # piece c's rows of partition p start after every piece's rows of earlier partitions
    # and the earlier pieces' rows of p
    starts = np.zeros(parts + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=0), out=starts[1:])
    at = starts[:-1] + np.cumsum(counts, axis=0) - counts
    order = np.empty(n, dtype=np.int64)
    moved = np.empty(n, dtype=np.int64)
    _part_scatter(keys, shift, pieces, np.ascontiguousarray(at), order, moved)
    first = np.empty(n, dtype=np.int64)
    _first_in_key_parts(moved, order, starts, first)
    starts_of = np.empty(n, dtype=np.int64)
    groups = int(_number_groups(first, ids, starts_of))
    return groups, starts_of[:groups]


def _factorise_hashed(keys: np.ndarray, ids: np.ndarray) -> int:
    """Dense ids by hashing, in a table sized for the groups a sample expects (growing
    from a small one costs more than the lookups: measured 5x for 72k groups of 357k
    rows), doubled whenever it would pass half full."""
    capacity = _capacity(_expected_groups(keys))
    slot_key = np.zeros(capacity, dtype=np.int64)
    slot_id = np.full(capacity, -1, dtype=np.int64)
    row, n = 0, 0
    while True:
        row, n = factorise(keys, ids, slot_key, slot_id, row, n)
        if row == len(keys):
            return n
        old_key, old_id = slot_key, slot_id
        slot_key = np.zeros(2 * len(old_key), dtype=np.int64)
        slot_id = np.full(2 * len(old_key), -1, dtype=np.int64)
        rehash(old_key, old_id, slot_key, slot_id)


def _expected_groups(keys: np.ndarray) -> int:
    """Groups among ``keys``, estimated from about 16k evenly spaced ones: their distinct
    count, scaled up to the rows when most sampled keys are distinct."""
    step = max(1, len(keys) // 16384)
    sample = keys[::step]
    distinct = int(distinct_count(np.ascontiguousarray(sample)))
    if distinct > len(sample) // 2:  # many distinct: up to one group per row
        return min(len(keys), distinct * step)
    return distinct


def _capacity(groups: int) -> int:
    # a power of two at least twice the groups (the table stays at most half full)
    return 1 << max(10, (2 * groups).bit_length())


def combine_ids(columns: list[np.ndarray], valids: list[np.ndarray | None],
                group: Any = None) -> np.ndarray:
    """One int64 key per row for several key columns, equal exactly when every column is
    equal (a null is its own value, as SQL's GROUP BY treats it).

    Integer columns are packed by arithmetic, ``key * span + (value - lo)``, while the product
    of their value ranges fits in 62 bits (join keys, dictionary codes, dates: no hashing).
    Float columns, and the running key once the next range would overflow, are factorised
    to dense ids first, so no product of cardinalities can overflow. ``group`` is the
    factorising function (default :func:`group_ids`; the GPU's on device arrays)."""
    group = group or group_ids
    if not columns:
        raise ValueError("no key columns")
    if len(columns) == 1 and valids[0] is None and columns[0].dtype.kind in "iu":
        return columns[0]  # one integer column is its own key
    xp = array_module(columns[0])
    combined, span_so_far = None, 1
    for col, valid in zip(columns, valids, strict=True):
        if len(col) == 0:
            return xp.zeros(0, dtype=np.int64)
        lo, span = _value_range(col)
        if lo is None:  # floats, or integers too wide to offset safely
            col, span, _ = group(col)
            lo = 0
        if combined is not None and span_so_far * (span + 1) >= 1 << 62:
            combined, span_so_far, _ = group(combined)  # dense ids: the smallest range
            if span_so_far * (span + 1) >= 1 << 62:  # two huge ranges: their pairs, densely
                col, span, _ = group(col)
                lo = 0
        span += valid is not None  # nulls: one extra value past the range
        combined = _pack(xp, combined, col, lo, span, valid)
        span_so_far *= span
    return combined


def _value_range(col: Any) -> tuple[int | None, int]:
    """``(lo, hi - lo + 1)`` of an integer column whose values can be offset by their
    minimum in int64, else ``(None, 0)``."""
    if col.dtype.kind not in "biu":
        return None, 0
    if isinstance(col, np.ndarray) and col.dtype.kind in "iu" and len(col) >= _PARALLEL_ROWS:
        lo, hi = (int(x) for x in min_max(col))  # one pass, not two
    else:
        lo, hi = int(col.min()), int(col.max())
    if lo < -(1 << 62) or hi >= 1 << 62:
        return None, 0
    return lo, hi - lo + 1


def _pack(xp: Any, combined: Any, col: Any, lo: int, span: int, valid: Any) -> Any:
    """``combined * span + (col - lo)`` (just ``col - lo`` when ``combined`` is None), a
    null as ``span - 1``: one kernel pass on the host, array arithmetic on a device."""
    if xp is np:
        out = np.empty(len(col), dtype=np.int64) if combined is None else combined
        mask = np.ones(1, dtype=bool) if valid is None else valid
        pack_column(out, col, lo, span, mask, valid is not None, combined is None)
        return out
    values = col.astype(np.int64) - lo
    if valid is not None:
        values = xp.where(valid, values, span - 1)
    return values if combined is None else combined * span + values


_SMALL_SPAN = 1 << 12  # key ranges up to this many values: factorise_small
_PARALLEL_ROWS = 1 << 17  # fewer rows: one thread is as fast
_PARTITIONED_ROWS = 1 << 18  # hashed keys from this many rows: partitioned on all threads
_CHUNKS = 16  # slots of factorise_small: fixed, so ids are the same on any thread count


def reduce_groups(
    op: str, ids: np.ndarray, ngroups: int, values: np.ndarray | None, valid: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(result, result_valid)`` of aggregate ``op`` per group. SQL semantics: nulls are
    skipped; a group with no non-null value gives null (``count`` gives 0)."""
    if op not in AGGREGATES:
        raise ValueError(f"aggregate {op!r}: expected one of {AGGREGATES}")
    if not _kernels:
        _kernels.update(_compile())
    n = len(ids)
    ok = np.ones(n, dtype=bool) if valid is None else valid
    if op == "count":
        if values is None or valid is None:
            return np.bincount(ids, minlength=ngroups).astype(np.int64), None
        return np.bincount(ids, weights=ok, minlength=ngroups).astype(np.int64), None
    if values is None:
        raise ValueError(f"aggregate {op!r} needs a value column")
    if op in ("sum", "avg"):
        integer = np.issubdtype(values.dtype, np.integer) or values.dtype == np.bool_
        acc = np.int64 if integer and op == "sum" else np.float64
        v = values.astype(acc, copy=False)
        total, counts = _kernels["sum_count"](ids, v, ok, ngroups, np.zeros(ngroups, acc))
        present = counts > 0
        if op == "avg":
            return np.divide(total, counts, out=np.zeros(ngroups), where=present), present
        return total, present
    if op in ("min", "max"):
        out, seen = _kernels["minmax"](ids, values, ok, ngroups, op == "max")
        return out, seen
    # count distinct: distinct (group, value) pairs among the non-null rows
    pair = combine_ids([ids[ok], values[ok]], [None, None])
    _, _, first = group_ids(pair)
    return np.bincount(ids[ok][first], minlength=ngroups).astype(np.int64), None
