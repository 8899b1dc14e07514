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

__all__ = ["hash_join", "matched", "HOW"]

HOW = ("inner", "left", "semi", "anti")
_kernels: dict[str, Any] = {}


# kernels at module level so numba can cache them on disk (cache=True)
@njit(inline="always", cache=True)
def slot_of(key, mask):  # type: ignore[no-untyped-def]
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64((h >> np.uint64(29)) & np.uint64(mask))


@njit(inline="always", cache=True)
def find(k, table, mask):  # type: ignore[no-untyped-def]
    s = slot_of(k, mask)
    while table[s, 1] != -1:
        if table[s, 0] == k:
            return table[s, 1]
        s = (s + 1) & mask
    return -1


@njit(inline="always", cache=True)
def _matches(j, chain, outer):  # type: ignore[no-untyped-def]
    # rows on the chain starting at build row j (-1: none); an outer join keeps one row
    c = 0
    while j != -1:
        c += 1
        j = chain[j]
    return c if c > 0 or not outer else 1


@njit(parallel=True, nogil=True, cache=True)
def count(probe, valid, table, chain, outer, counts, hit):  # type: ignore[no-untyped-def]
    # one lookup per probe row: its first match is kept for the fill pass. The outputs come
    # from NumPy: its large allocations are huge-page backed, numba's fault in 4 KiB pages
    mask = table.shape[0] - 1
    for i in prange(probe.shape[0]):
        j = find(probe[i], table, mask) if valid[i] else -1
        hit[i] = j
        counts[i] = _matches(j, chain, outer)


@njit(parallel=True, nogil=True, cache=True)
def contains(probe, valid, table, out):  # type: ignore[no-untyped-def]
    # whether each probe row has a match: one byte per row, not count + first hit (16)
    mask = table.shape[0] - 1
    for i in prange(probe.shape[0]):
        out[i] = valid[i] and find(probe[i], table, mask) != -1


@njit(nogil=True, cache=True)
def set_bits(keys, lo, bits):  # type: ignore[no-untyped-def]
    # bit (key - lo) of the bitmap for every key (serial: words are shared between keys)
    for i in range(keys.shape[0]):
        v = np.uint64(keys[i] - lo)
        bits[v >> np.uint64(6)] |= np.uint64(1) << (v & np.uint64(63))


@njit(parallel=True, nogil=True, cache=True)
def in_bitmap(probe, valid, lo, span, bits, out):  # type: ignore[no-untyped-def]
    # whether each probe key's bit is set; unsigned, so keys below lo fall past the span
    for i in prange(probe.shape[0]):
        v = np.uint64(probe[i] - lo)
        out[i] = valid[i] and v < span and (
            (bits[v >> np.uint64(6)] >> (v & np.uint64(63))) & np.uint64(1)) != 0


@njit(nogil=True, cache=True)
def fill_direct(keys, lo, pos):  # type: ignore[no-untyped-def]
    # pos[key - lo] = its build row; False at the first repeated key (not a unique key)
    for j in range(keys.shape[0]):
        v = keys[j] - lo
        if pos[v] != -1:
            return False
        pos[v] = j
    return True


@njit(parallel=True, nogil=True, cache=True)
def probe_direct(probe, valid, lo, span, pos, hit):  # type: ignore[no-untyped-def]
    # each probe row's build row (-1: none); unsigned, so keys below lo fall past the span
    for i in prange(probe.shape[0]):
        v = np.uint64(probe[i] - lo)
        hit[i] = pos[v] if valid[i] and v < span else -1


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


# -- radix-partitioned join for large inputs: per-partition hash tables that fit in cache ---
@njit(parallel=True, nogil=True, cache=True)
def radix_histogram(keys, bits, part, hist):  # type: ignore[no-untyped-def]
    # each row's partition (the top bits of its key hash) into part, and per chunk of rows
    # (one row of hist each) how many rows fall in each partition
    n = keys.shape[0]
    chunks = hist.shape[0]
    for c in prange(chunks):
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            h = np.uint64(keys[i]) * np.uint64(0x9E3779B97F4A7C15)
            q = np.int64(h >> np.uint64(64 - bits))
            part[i] = q
            hist[c, q] += 1


@njit(parallel=True, nogil=True, cache=True)
def radix_scatter(keys, part, pos, order, grouped):  # type: ignore[no-untyped-def]
    # rows to their partitions, stably: chunk c writes partition q from pos[c, q] on, after
    # the earlier chunks' rows of q; row numbers into order and keys into grouped, so the
    # passes after read keys in order, not scattered
    n = keys.shape[0]
    chunks = pos.shape[0]
    for c in prange(chunks):
        at = pos[c]
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            q = part[i]
            order[at[q]] = i
            grouped[at[q]] = keys[i]
            at[q] += 1


def radix_partition(keys: np.ndarray, bits: int, order: np.ndarray,
                    grouped: np.ndarray) -> np.ndarray:
    """Rows grouped by the top ``bits`` of their key hash, stably (row order kept within a
    partition, whatever the thread count): their row numbers into ``order``, their keys into
    ``grouped``; returns the partition starts. Histogram and scatter both run on all
    threads, each over its own chunk of rows."""
    import numba

    nparts = 1 << bits
    chunks = max(1, min(numba.get_num_threads(), len(keys) // (1 << 16)))
    part = np.empty(len(keys), dtype=np.uint16)  # bits <= 14
    hist = np.zeros((chunks, nparts), dtype=np.int64)
    radix_histogram(keys, bits, part, hist)
    sizes = hist.sum(axis=0)
    start = np.zeros(nparts + 1, dtype=np.int64)
    np.cumsum(sizes, out=start[1:])
    pos = start[:-1] + np.cumsum(hist, axis=0) - hist  # each chunk after the earlier ones
    radix_scatter(keys, part, np.ascontiguousarray(pos), order, grouped)
    return start


@njit(inline="always", cache=True)
def _fill_table(keys, table, last, chain):  # type: ignore[no-untyped-def]
    # slots interleave (key, first row) so a probe touches one cache line; equal keys chain
    # in row order (rows: positions in keys)
    mask = table.shape[0] - 1
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


@njit(nogil=True, cache=True)
def build_table(bkeys, table, last, chain):  # type: ignore[no-untyped-def]
    # the whole build side into arrays NumPy allocated (huge-page backed: a large table
    # allocated inside numba faults in 4 KiB pages)
    _fill_table(bkeys, table, last, chain)


def _capacity(m: int) -> int:
    return 1 << max(4, (2 * m - 1).bit_length())


@njit(inline="always", cache=True)
def _local_table(keys):  # type: ignore[no-untyped-def]
    # hash table of one cache-sized radix partition's build keys
    m = keys.shape[0]
    capacity = 16
    while capacity < 2 * m:
        capacity *= 2
    table = np.full((capacity, 2), -1, dtype=np.int64)
    last = np.full(capacity, -1, dtype=np.int64)
    chain = np.full(max(m, 1), -1, dtype=np.int64)
    _fill_table(keys, table, last, chain)
    return table, chain, capacity - 1


@njit(parallel=True, nogil=True, cache=True)
def radix_count(pkeys, pstart, bkeys, bstart, outer, totals):  # type: ignore[no-untyped-def]
    # pairs each partition will produce (an outer join's unmatched probe row: one)
    for q in prange(pstart.shape[0] - 1):
        table, chain, mask = _local_table(bkeys[bstart[q] : bstart[q + 1]])
        c = 0
        for i in range(pstart[q], pstart[q + 1]):
            c += _matches(find(pkeys[i], table, mask), chain, outer)
        totals[q] = c


@njit(parallel=True, nogil=True, cache=True)
def radix_fill(pkeys, porder, pstart, bkeys, border, bstart, outer, offsets, left, right):  # type: ignore[no-untyped-def]
    # each partition's pairs from its offset on, by probe row, then build row
    for q in prange(pstart.shape[0] - 1):
        b0 = bstart[q]
        table, chain, mask = _local_table(bkeys[b0 : bstart[q + 1]])
        o = offsets[q]
        for i in range(pstart[q], pstart[q + 1]):
            j = find(pkeys[i], table, mask)
            if j == -1 and outer:
                left[o] = porder[i]
                right[o] = -1
                o += 1
            while j != -1:
                left[o] = porder[i]
                right[o] = border[b0 + j]
                o += 1
                j = chain[j]


def _radix_join(p: np.ndarray, b: np.ndarray, outer: bool) -> tuple[np.ndarray, np.ndarray]:
    """Inner or left join by radix partitions of about 1024 build rows (tables that stay in
    L2: measured 3-4x faster than 4096 rows here); pairs ordered by partition, then probe
    row, then build row (any thread count). Pairs are counted per partition, not per probe
    row, so no count array as long as the probe is written."""
    bits = int(min(14, max(4, np.ceil(np.log2(max(len(b), 1) / 1024)))))
    porder, border = np.empty(len(p), np.int64), np.empty(len(b), np.int64)
    pkeys, bkeys = np.empty(len(p), np.int64), np.empty(len(b), np.int64)
    pstart = radix_partition(p, bits, porder, pkeys)
    bstart = radix_partition(b, bits, border, bkeys)
    totals = np.empty(len(pstart) - 1, dtype=np.int64)
    radix_count(pkeys, pstart, bkeys, bstart, outer, totals)
    offsets = np.zeros(len(totals) + 1, dtype=np.int64)
    np.cumsum(totals, out=offsets[1:])
    left = np.empty(int(offsets[-1]), dtype=np.int64)
    right = np.empty(int(offsets[-1]), dtype=np.int64)
    radix_fill(pkeys, porder, pstart, bkeys, border, bstart, outer, offsets, left, right)
    return left, right


# inputs at least this large (build rows, probe rows) take the radix-partitioned path
# (below 512k build rows one table is as fast; a big build side is partitioned even for a
# small probe: its chains of equal keys then stay in cache, measured 2-3x faster for Q13)
RADIX_MIN = (1 << 19, 1 << 14)
# an inner join probing this many rows estimates from a sample how many match; when fewer
# than _SCREEN_FRACTION do, it first finds which (a byte per row) and pairs only those: a
# 6M-row probe that keeps 15% then writes 6 MB, not 144 MB of counts, first hits and
# offsets, and a radix join partitions a sixth of the rows
_SCREEN_ROWS = 1 << 16
_SCREEN_FRACTION = 0.4


def _compile() -> dict[str, Any]:
    return {"build": build_table, "count": count, "fill": fill, "contains": contains,
            "set_bits": set_bits, "in_bitmap": in_bitmap, "fill_direct": fill_direct,
            "probe_direct": probe_direct}


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
        int64 row indices, ordered by probe row, then build row; inner and left joins of
        large inputs (``RADIX_MIN``) are radix-partitioned and ordered by partition first,
        except against unique, densely spread build keys (``_DIRECT_SPAN``), which are
        looked up by key and stay in probe order.
    """
    if how not in HOW:
        raise ValueError(f"how={how!r}: expected one of {HOW}")
    for name, keys in (("probe", probe), ("build", build)):
        if keys.ndim != 1 or not np.issubdtype(keys.dtype, np.integer):
            raise TypeError(f"{name} keys: need a 1-D integer array, got {keys.dtype} {keys.shape}")
    if not _kernels:
        _kernels.update(_compile())
    p = probe.astype(np.int64, copy=False)
    b = build.astype(np.int64, copy=False)
    if build_valid is not None:  # null build keys never match: leave them out of the table
        kept = np.flatnonzero(build_valid)
        b = b[kept]
    key_range = _key_range(b)
    if how in ("semi", "anti"):  # the probe rows with / without a match: one byte per row
        hit_mask = _member(p, b, probe_valid, key_range)
        rows = np.flatnonzero(hit_mask if how == "semi" else ~hit_mask)
        return rows, np.full(len(rows), -1, dtype=np.int64)
    pairs = _direct_join(p, probe_valid, b, how == "left", key_range)
    left, right = pairs if pairs is not None else _hashed_join(p, probe_valid, b, how,
                                                                 key_range)
    if build_valid is not None:  # back to the caller's build rows
        hit = right >= 0
        right[hit] = kept[right[hit]]
    return left, right


def _hashed_join(p: np.ndarray, valid: np.ndarray | None, b: np.ndarray, how: str,
                 key_range: tuple[int, int] | None) -> tuple[np.ndarray, np.ndarray]:
    """Inner or left join by hashing: screened by a match mask first when a sample says few
    probe rows match, radix-partitioned for large inputs, else one table."""
    rows = table = chain = None
    if how == "inner" and len(p) >= _SCREEN_ROWS and (
            _match_fraction(p, valid, b) < _SCREEN_FRACTION):
        if _bitmap_fits(key_range, len(b)):
            hit_mask = _member(p, b, valid, key_range)
        else:  # the table that answers the screen also pairs the rows
            table, chain = _hash_table(b)
            hit_mask = _contains(p, table, valid)
        rows = np.flatnonzero(hit_mask)  # pair the matching rows only
        p, valid = p[rows], None
    big = len(b) >= RADIX_MIN[0] and len(p) >= RADIX_MIN[1]
    if big and (valid is None or how == "inner"):
        some = None if valid is None else np.flatnonzero(valid)
        left, right = _radix_join(p if some is None else p[some], b, how == "left")
        if some is not None:
            left = some[left]
    else:
        if table is None:
            table, chain = _hash_table(b)
        left, right = _plain_join(p, valid, table, chain, how == "left")
    if rows is not None:  # back to the caller's probe rows
        left = rows[left]
    return left, right


# unique build keys spanning at most this many values per key (primary keys: TPC-H's
# customer, part, supplier and order keys) are looked up in an array of build rows indexed
# by key instead of a hash table: one load per probe row, measured 7x faster for 6M
# lineitem rows against 1.5M orders and 30x for 227k orders against 150k customers
_DIRECT_SPAN = 4


def _direct_join(p: np.ndarray, valid: np.ndarray | None, b: np.ndarray, outer: bool,
                 key_range: tuple[int, int] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Inner or left join against unique, densely spread build keys by an array of build
    rows indexed by key (pairs ordered by probe row); ``None`` when the build keys repeat
    or spread too wide for it."""
    if key_range is None or len(b) >= 2**31 or key_range[1] > _DIRECT_SPAN * len(b):
        return None
    lo, span = key_range
    pos = np.full(span, -1, dtype=np.int32)
    if not _kernels["fill_direct"](b, lo, pos):
        return None
    hit = np.empty(len(p), dtype=np.int32)
    ok = np.ones(len(p), dtype=bool) if valid is None else valid
    _kernels["probe_direct"](p, ok, lo, np.uint64(span), pos, hit)
    if outer:
        return np.arange(len(p), dtype=np.int64), hit.astype(np.int64)
    left = np.flatnonzero(hit >= 0)
    return left, hit[left].astype(np.int64)


def _plain_join(p: np.ndarray, valid: np.ndarray | None, table: np.ndarray, chain: np.ndarray,
                outer: bool) -> tuple[np.ndarray, np.ndarray]:
    """Inner or left join of probe keys ``p`` against one hash table (count, prefix sum,
    fill); pairs ordered by probe row, then build row. A null probe key matches nothing."""
    k = _kernels
    valid = np.ones(len(p), dtype=bool) if valid is None else valid
    counts, hit = np.empty(len(p), np.int64), np.empty(len(p), np.int64)
    k["count"](p, valid, table, chain, outer, counts, hit)
    offsets = np.zeros(len(p) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    left = np.empty(int(offsets[-1]), dtype=np.int64)
    right = np.empty(int(offsets[-1]), dtype=np.int64)
    k["fill"](hit, chain, offsets, left, right)
    return left, right


def _match_fraction(p: np.ndarray, valid: np.ndarray | None, b: np.ndarray) -> float:
    """The fraction of probe rows with a match, estimated from about 4096 evenly spaced
    ones without a table of all build keys: a table of the sampled keys, then one pass of
    the build keys through it."""
    step = max(1, len(p) // 4096)
    sample = p[::step]
    keys = sample if valid is None else sample[valid[::step]]
    if len(keys) == 0 or len(b) == 0:
        return 0.0
    present = _contains(b, _hash_table(keys)[0])
    return float(np.count_nonzero(np.isin(keys, b[present]))) / len(sample)


def matched(probe: np.ndarray, build: np.ndarray) -> np.ndarray:
    """Whether each probe key is among the build keys (``np.isin`` by hashing: a semi join
    that returns its mask). The table is built on the smaller side: with many more build
    keys, they stream through a table of the probe keys, and only the ones found there make
    the table the probe rows look up."""
    if not _kernels:
        _kernels.update(_compile())
    p = probe.astype(np.int64, copy=False)
    b = build.astype(np.int64, copy=False)
    key_range = _key_range(b)
    if len(b) > 4 * len(p) and not _bitmap_fits(key_range, len(b)):
        b = b[_contains(b, _hash_table(p)[0])]  # only the build keys some probe row has
        key_range = _key_range(b)
    return _member(p, b, None, key_range)


# build keys spanning at most this many values per key, or at most _BITMAP_BITS values in
# all, answer membership from a bitmap of their range (span / 8 bytes: 750 kB for TPC-H
# SF1's 6M order keys, in cache) instead of a hash table: no hashing, one load per probe key
# (measured 6x faster on 6M probe keys)
_BITMAP_SPAN = 64
_BITMAP_BITS = 1 << 25


def _key_range(b: np.ndarray) -> tuple[int, int] | None:
    """``(lo, span)`` of the build keys (``None`` when there are none)."""
    if len(b) == 0:
        return None
    lo = int(b.min())
    return lo, int(b.max()) - lo + 1


def _bitmap_fits(key_range: tuple[int, int] | None, n: int) -> bool:
    """Whether a bitmap of ``n`` build keys' range is small enough (:data:`_BITMAP_SPAN`)."""
    return key_range is not None and key_range[1] <= max(_BITMAP_SPAN * n, _BITMAP_BITS)


def _member(keys: np.ndarray, b: np.ndarray, valid: np.ndarray | None,
            key_range: tuple[int, int] | None) -> np.ndarray:
    """Whether each key (a null one: never) is among the build keys ``b`` (their
    :func:`_key_range`): a bitmap of their range when it is small, else a hash table."""
    if not _bitmap_fits(key_range, len(b)):
        return _contains(keys, _hash_table(b)[0], valid)
    lo, span = key_range
    bits = np.zeros((span + 63) // 64, dtype=np.uint64)
    _kernels["set_bits"](b, lo, bits)
    out = np.empty(len(keys), dtype=bool)
    ok = np.ones(len(keys), dtype=bool) if valid is None else valid
    _kernels["in_bitmap"](keys, ok, lo, np.uint64(span), bits, out)
    return out


def _contains(keys: np.ndarray, table: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Whether each key (a null one: never) is in the hash table."""
    out = np.empty(len(keys), dtype=bool)
    ok = np.ones(len(keys), dtype=bool) if valid is None else valid
    _kernels["contains"](keys, ok, table, out)
    return out


def _hash_table(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The open-addressing table of build keys ``b`` and its chains of equal keys."""
    capacity = _capacity(len(b))
    table = np.full((capacity, 2), -1, dtype=np.int64)
    chain = np.full(max(len(b), 1), -1, dtype=np.int64)
    _kernels["build"](b, table, np.full(capacity, -1, dtype=np.int64), chain)
    return table, chain
