"""Hash joins on integer keys: numba build/probe kernels returning row index pairs.

The build side gets an open-addressing table (linear probing, power-of-two capacity, at most
half full) whose slots hold a key and its group: the build rows of equal keys are grouped
contiguously in row order (a count, a prefix sum and a placement pass), so a repeated key is
paired by copying a run of rows, never by walking a chain of scattered ones. Probing counts
the matches of every probe row (or chunk of rows), a prefix sum places them, and a parallel
pass writes the pairs, so the output is ordered by probe row, then build row: the same for any
thread count. Unique, densely spread build keys skip the hashing (an array of build rows
indexed by key); membership tests against a table much smaller than the probe go through a
filter of tag bits first; large inputs are radix-partitioned into cache-sized tables.
Against unique, dense build keys a probe whose sampled rows all match (foreign keys) is paired
in one pass, each chunk of probe rows at its own rows' places, with no count pass. When the
build keys repeat but the probe keys are unique and dense, the build rows look up their probe
rows in such an array instead and the pairs are put in probe order. Row numbers
are int32 while both sides have at most 2**31 rows (:func:`pair_dtype`): half the bytes of
the pairs written here and read again by every gather of a joined column.

The kernels' loops index rows, slots and output places with unsigned integers: numba tests a
signed index for being negative (and wraps it round the array's end) on every access, which
made the probing and pairing loops 3-5x slower.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["hash_join", "matched", "pair_dtype", "HOW"]

HOW = ("inner", "left", "semi", "anti")


# kernels at module level so numba can cache them on disk (cache=True)
@njit(inline="always", cache=True)
def slot_of(key, mask):  # type: ignore[no-untyped-def]
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64((h >> np.uint64(29)) & np.uint64(mask))


@njit(inline="always", cache=True)
def _uslot(key, mask):  # type: ignore[no-untyped-def]
    # slot_of as an unsigned index: numba wraps a signed index that may be negative round
    # the array's end, a compare and select on every access of the probing loops
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return (h >> np.uint64(29)) & np.uint64(mask)


@njit(inline="always", cache=True)
def find(k, table, mask):  # type: ignore[no-untyped-def]
    s = _uslot(k, mask)
    while table[s, 1] != -1:
        if table[s, 0] == k:
            return table[s, 1]
        s = (s + np.uint64(1)) & np.uint64(mask)
    return -1


@njit(inline="always", cache=True)
def _matches(g, bounds, outer):  # type: ignore[no-untyped-def]
    # rows of key group g (-1: none); an outer join keeps one row
    c = bounds[g + 1] - bounds[g] if g != -1 else 0
    return c if c > 0 or not outer else 1


# inputs of at most this many rows are processed on the calling thread: waking the thread
# pool costs more than their work (about 0.1-0.3 ms), and far more on a busy machine, where a
# parallel region waits for every worker to get a core (measured: a median of 5 ms a launch
# with 2 cores and a load of 6)
_SERIAL_ROWS = 1 << 17
# the chunked two-pass kernels of the direct lookup count per chunk of this many rows, then
# write each chunk's pairs from its offset on, so both passes run on all threads
_CHUNK = 1 << 14


@njit(inline="always", cache=True)
def _count_row(i, probe, valid, table, mask, bounds, outer, counts, hit):  # type: ignore[no-untyped-def]
    if valid is None:
        j = find(probe[i], table, mask)
    else:
        j = find(probe[i], table, mask) if valid[i] else -1
    hit[i] = j
    counts[i] = _matches(j, bounds, outer)


@njit(parallel=True, nogil=True, cache=True)
def count(probe, valid, table, bounds, outer, counts, hit):  # type: ignore[no-untyped-def]
    # one lookup per probe row: its key group is kept for the fill pass. The outputs come
    # from NumPy: its large allocations are huge-page backed, numba's fault in 4 KiB pages
    mask = table.shape[0] - 1
    if probe.shape[0] <= _SERIAL_ROWS:
        for i in range(probe.shape[0]):
            _count_row(i, probe, valid, table, mask, bounds, outer, counts, hit)
    else:
        for i in prange(probe.shape[0]):
            _count_row(i, probe, valid, table, mask, bounds, outer, counts, hit)


@njit(inline="always", cache=True)
def _fill_row(i, hit, bounds, rows, offsets, left, right):  # type: ignore[no-untyped-def]
    # (unsigned places and build rows: no wrap-around test per access, see _uslot)
    o = np.uint64(offsets[i])
    g = hit[i]
    if g == -1:
        if o < np.uint64(offsets[i + 1]):  # outer row without a match
            left[o] = i
            right[o] = -1
    else:
        for t in range(np.uint64(bounds[g]), np.uint64(bounds[g + 1])):
            left[o] = i
            right[o] = rows[t]
            o += np.uint64(1)


@njit(parallel=True, nogil=True, cache=True)
def fill(hit, bounds, rows, offsets, left, right):  # type: ignore[no-untyped-def]
    # each probe row's pairs: its key group's build rows, a contiguous run of rows
    if hit.shape[0] <= _SERIAL_ROWS:
        for i in range(hit.shape[0]):
            _fill_row(i, hit, bounds, rows, offsets, left, right)
    else:
        for i in prange(hit.shape[0]):
            _fill_row(i, hit, bounds, rows, offsets, left, right)


@njit(inline="always", cache=True)
def _contains_row(i, probe, valid, table, mask, out):  # type: ignore[no-untyped-def]
    if valid is None:
        out[i] = find(probe[i], table, mask) != -1
    else:
        out[i] = valid[i] and find(probe[i], table, mask) != -1


@njit(parallel=True, nogil=True, cache=True)
def contains(probe, valid, table, out):  # type: ignore[no-untyped-def]
    # whether each probe row has a match: one byte per row, not count + first hit (16)
    mask = table.shape[0] - 1
    if probe.shape[0] <= _SERIAL_ROWS:
        for i in range(probe.shape[0]):
            _contains_row(i, probe, valid, table, mask, out)
    else:
        for i in prange(probe.shape[0]):
            _contains_row(i, probe, valid, table, mask, out)


_TAG_MULT = 0xD6E8FEB86659FD93  # a second odd multiplier: tag bits independent of the slot


@njit(nogil=True, cache=True)
def set_tags(table, tags, shift):  # type: ignore[no-untyped-def]
    # one bit per key of the table (a one-hash Bloom filter), from its top hash bits
    for s in range(table.shape[0]):
        if table[s, 1] != -1:
            t = (np.uint64(table[s, 0]) * np.uint64(_TAG_MULT)) >> np.uint64(shift)
            tags[t >> np.uint64(6)] |= np.uint64(1) << (t & np.uint64(63))


@njit(inline="always", cache=True)
def _tagged_row(i, probe, valid, table, mask, tags, shift, out):  # type: ignore[no-untyped-def]
    k = probe[i]
    t = (np.uint64(k) * np.uint64(_TAG_MULT)) >> np.uint64(shift)
    tagged = ((tags[t >> np.uint64(6)] >> (t & np.uint64(63))) & np.uint64(1)) != 0
    if valid is not None:
        tagged = tagged and valid[i]
    out[i] = tagged and find(k, table, mask) != -1


@njit(parallel=True, nogil=True, cache=True)
def contains_tagged(probe, valid, table, tags, shift, out):  # type: ignore[no-untyped-def]
    # contains(), the table looked at only for keys whose tag bit is set: a probe key
    # without a match is mostly answered by one bit of a filter 16x smaller than the table,
    # and without the mispredicted branches of the probing loop
    mask = table.shape[0] - 1
    if probe.shape[0] <= _SERIAL_ROWS:
        for i in range(probe.shape[0]):
            _tagged_row(i, probe, valid, table, mask, tags, shift, out)
    else:
        for i in prange(probe.shape[0]):
            _tagged_row(i, probe, valid, table, mask, tags, shift, out)


@njit(nogil=True, cache=True)
def set_bits(keys, lo, bits):  # type: ignore[no-untyped-def]
    # bit (key - lo) of the bitmap for every key (serial: words are shared between keys)
    for i in range(keys.shape[0]):
        v = np.uint64(keys[i] - lo)
        bits[v >> np.uint64(6)] |= np.uint64(1) << (v & np.uint64(63))


@njit(inline="always", cache=True)
def _bitmap_row(i, probe, valid, lo, span, bits, out):  # type: ignore[no-untyped-def]
    v = np.uint64(probe[i] - lo)
    found = v < span and (
        (bits[v >> np.uint64(6)] >> (v & np.uint64(63))) & np.uint64(1)) != 0
    if valid is None:
        out[i] = found
    else:
        out[i] = found and valid[i]


@njit(parallel=True, nogil=True, cache=True)
def in_bitmap(probe, valid, lo, span, bits, out):  # type: ignore[no-untyped-def]
    # whether each probe key's bit is set; unsigned, so keys below lo fall past the span
    if probe.shape[0] <= _SERIAL_ROWS:
        for i in range(probe.shape[0]):
            _bitmap_row(i, probe, valid, lo, span, bits, out)
    else:
        for i in prange(probe.shape[0]):
            _bitmap_row(i, probe, valid, lo, span, bits, out)


@njit(nogil=True, cache=True)
def fill_direct(keys, lo, pos):  # type: ignore[no-untyped-def]
    # pos[key - lo] = its build row; False at the first repeated key (not a unique key)
    for j in range(keys.shape[0]):
        v = keys[j] - lo
        if pos[v] != -1:
            return False
        pos[v] = j
    return True


@njit(nogil=True, cache=True)
def _direct_count_rows(a, e, probe, valid, lo, span, pos, hit):  # type: ignore[no-untyped-def]
    # pos[span] is -1 and the unsigned key - lo is clamped to span, so keys outside the build
    # keys' range find nothing without a branch; valid None (every probe key non-null)
    # compiles without its loads, hit None without keeping each row's build row. Rows are
    # counted by an unsigned index: numba wraps a signed one that may be negative round the
    # array's end, a compare and select on every load (measured on one thread, 1e7 probe
    # rows against 1e3 keys: 30-35 ms with a signed index, 6-8 ms unsigned)
    m = 0
    for i in range(np.uint64(a), np.uint64(e)):
        j = pos[min(np.uint64(probe[i] - lo), span)]
        if valid is not None:
            j = j if valid[i] else -1
        if hit is not None:
            hit[i] = j
        m += j >= 0
    return m


@njit(parallel=True, nogil=True, cache=True)
def direct_count(probe, valid, lo, span, pos, counts, hit):  # type: ignore[no-untyped-def]
    # matches per chunk of probe rows (and, unless hit is None, each row's build row)
    n = probe.shape[0]
    if n <= _SERIAL_ROWS:
        for c in range(counts.shape[0]):
            counts[c] = _direct_count_rows(c * _CHUNK, min(n, (c + 1) * _CHUNK), probe, valid,
                                           lo, span, pos, hit)
        return
    for c in prange(counts.shape[0]):
        counts[c] = _direct_count_rows(c * _CHUNK, min(n, (c + 1) * _CHUNK), probe, valid, lo,
                                       span, pos, hit)


@njit(inline="always", cache=True)
def _direct_row(i, probe, valid, lo, span, pos, hit):  # type: ignore[no-untyped-def]
    # row i's build row, -1 for none: from hit (kept by the count pass) unless it is None,
    # then from pos again
    if hit is not None:
        return np.int64(hit[i])
    j = np.int64(pos[min(np.uint64(probe[i] - lo), span)])
    if valid is not None:
        j = j if valid[i] else np.int64(-1)
    return j


@njit(nogil=True, cache=True)
def _direct_fill_rows(i, e, o, end, probe, valid, lo, span, pos, hit, left, right):  # type: ignore[no-untyped-def]
    # pairs of rows i to e into places o to end (unsigned indices, as in the count pass).
    # A chunk whose every row matches (a probe of keys that all exist: foreign keys, skewed
    # keys drawn from the build side) is written by a flat loop that vectorises; a chunk
    # without a match writes nothing; else every row is written at the next free place,
    # which advances only on a match (no unpredictable branch), and the rows stop at the
    # last match, so nothing is written past end
    i, e, o, end = np.uint64(i), np.uint64(e), np.uint64(o), np.uint64(end)
    if end - o == e - i:
        for t in range(e - i):
            left[o + t] = i + t
            right[o + t] = _direct_row(i + t, probe, valid, lo, span, pos, hit)
        return
    while o < end:
        j = _direct_row(i, probe, valid, lo, span, pos, hit)
        left[o] = i
        right[o] = j
        o += np.uint64(j >= 0)
        i += np.uint64(1)


@njit(parallel=True, nogil=True, cache=True)
def direct_fill(probe, valid, lo, span, pos, hit, offsets, left, right):  # type: ignore[no-untyped-def]
    # chunk c's pairs from offsets[c] on
    chunks = offsets.shape[0] - 1
    n = probe.shape[0]
    if n <= _SERIAL_ROWS:
        for c in range(chunks):
            _direct_fill_rows(c * _CHUNK, min(n, (c + 1) * _CHUNK), offsets[c], offsets[c + 1],
                              probe, valid, lo, span, pos, hit, left, right)
        return
    for c in prange(chunks):
        _direct_fill_rows(c * _CHUNK, min(n, (c + 1) * _CHUNK), offsets[c], offsets[c + 1],
                          probe, valid, lo, span, pos, hit, left, right)


@njit(nogil=True, cache=True)
def _direct_place_rows(a, e, probe, valid, lo, span, pos, left, right):  # type: ignore[no-untyped-def]
    # pairs of rows a to e at places a on (a probe row pairs at most once, so a chunk's
    # pairs fit in its own rows' places); returns how many. A flat loop writes every row (a
    # chunk of foreign keys, all matching, is then done); a chunk with a miss is written
    # again by the cursor loop, its keys now in cache (the last place may get a non-match,
    # past the count: never past row e - 1, so never into the next chunk)
    a, e = np.uint64(a), np.uint64(e)
    m = np.uint64(0)
    for i in range(a, e):
        j = _direct_row(i, probe, valid, lo, span, pos, None)
        left[i] = i
        right[i] = j
        m += np.uint64(j >= 0)
    if m == e - a:
        return m
    o = a
    for i in range(a, e):
        j = _direct_row(i, probe, valid, lo, span, pos, None)
        left[o] = i
        right[o] = j
        o += np.uint64(j >= 0)
    return m


@njit(parallel=True, nogil=True, cache=True)
def direct_place(probe, valid, lo, span, pos, counts, left, right):  # type: ignore[no-untyped-def]
    # chunk c's pairs from place c * _CHUNK on, their number into counts[c]: one pass over
    # the probe keys where count-then-fill reads them twice (and, past L1, writes and reads
    # each row's build row between the passes)
    n = probe.shape[0]
    if n <= _SERIAL_ROWS:
        for c in range(counts.shape[0]):
            counts[c] = _direct_place_rows(c * _CHUNK, min(n, (c + 1) * _CHUNK), probe, valid,
                                           lo, span, pos, left, right)
        return
    for c in prange(counts.shape[0]):
        counts[c] = _direct_place_rows(c * _CHUNK, min(n, (c + 1) * _CHUNK), probe, valid, lo,
                                       span, pos, left, right)


@njit(nogil=True, cache=True)
def _move_chunk(c, counts, offsets, left, right, out_left, out_right):  # type: ignore[no-untyped-def]
    a, o = np.uint64(c * _CHUNK), np.uint64(offsets[c])
    for t in range(np.uint64(counts[c])):
        out_left[o + t] = left[a + t]
        out_right[o + t] = right[a + t]


@njit(parallel=True, nogil=True, cache=True)
def compact_chunks(counts, offsets, left, right, out_left, out_right):  # type: ignore[no-untyped-def]
    # chunk c's counts[c] pairs at places c * _CHUNK on to offsets[c] on, in new arrays
    if counts.shape[0] * _CHUNK <= _SERIAL_ROWS:
        for c in range(counts.shape[0]):
            _move_chunk(c, counts, offsets, left, right, out_left, out_right)
        return
    for c in prange(counts.shape[0]):
        _move_chunk(c, counts, offsets, left, right, out_left, out_right)


@njit(inline="always", cache=True)
def _lookup_row(i, probe, valid, lo, span, pos, right):  # type: ignore[no-untyped-def]
    j = np.int64(pos[min(np.uint64(probe[i] - lo), span)])
    if valid is None:
        right[i] = j
    else:
        right[i] = j if valid[i] else -1


@njit(parallel=True, nogil=True, cache=True)
def direct_lookup(probe, valid, lo, span, pos, right):  # type: ignore[no-untyped-def]
    # each probe row's build row, -1 for none (a left join's pairs against unique keys)
    if probe.shape[0] <= _SERIAL_ROWS:
        for i in range(probe.shape[0]):
            _lookup_row(i, probe, valid, lo, span, pos, right)
    else:
        for i in prange(probe.shape[0]):
            _lookup_row(i, probe, valid, lo, span, pos, right)


# -- rank join: unique build keys too sparse for an array of rows, dense enough for a bitmap --
@njit(inline="always", cache=True)
def _popcount(x):  # type: ignore[no-untyped-def]
    # set bits of a uint64 (SWAR: no loop, no table)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(nogil=True, cache=True)
def rank_index(keys, lo, bits, before, row_of):  # type: ignore[no-untyped-def]
    # before[w]: the keys in the bitmap's words before w; row_of[r]: the build row of the
    # r-th smallest key. False where a key repeats (the bitmap then holds fewer keys)
    total = 0
    for w in range(bits.shape[0]):
        before[w] = total
        total += _popcount(bits[w])
    if total != keys.shape[0]:  # (row_of has one entry more, left as it is)
        return False
    for j in range(keys.shape[0]):
        v = np.uint64(keys[j] - lo)
        w = v >> np.uint64(6)
        below = bits[w] & ((np.uint64(1) << (v & np.uint64(63))) - np.uint64(1))
        row_of[before[w] + _popcount(below)] = j
    return True


@njit(inline="always", cache=True)
def _rank_bit(k, lo, span, bits):  # type: ignore[no-untyped-def]
    # (position, 1 if key k is a build key else 0): a key outside the range reads bit
    # ``span``, never set, so there is no branch and the loop vectorises
    v = min(np.uint64(k - lo), span)
    return v, (bits[v >> np.uint64(6)] >> (v & np.uint64(63))) & np.uint64(1)


@njit(inline="always", cache=True)
def _rank_find(k, lo, span, bits, before, row_of):  # type: ignore[no-untyped-def]
    # the build row of key k, -1 for none: its bit, then the keys set below it (row_of has
    # one entry past the keys, read by a key above them all), without a branch
    v, hit = _rank_bit(k, lo, span, bits)
    w = v >> np.uint64(6)
    r = before[w] + _popcount(bits[w] & ((np.uint64(1) << (v & np.uint64(63))) - np.uint64(1)))
    return (np.int64(row_of[r]) + 1) * np.int64(hit) - 1


@njit(parallel=True, nogil=True, cache=True)
def rank_rows(keys, lo, bits, before, row_of, right):  # type: ignore[no-untyped-def]
    # the build rows of ``keys``, all build keys (their bits are set)
    for i in prange(keys.shape[0]):
        v = np.uint64(keys[i] - lo)
        w = v >> np.uint64(6)
        below = bits[w] & ((np.uint64(1) << (v & np.uint64(63))) - np.uint64(1))
        right[i] = row_of[before[w] + _popcount(below)]


@njit(inline="always", cache=True)
def _rank_lookup_row(i, probe, valid, lo, span, bits, before, row_of, right):  # type: ignore[no-untyped-def]
    j = _rank_find(probe[i], lo, span, bits, before, row_of)
    if valid is None:
        right[i] = j
    else:
        right[i] = j if valid[i] else -1


@njit(parallel=True, nogil=True, cache=True)
def rank_lookup(probe, valid, lo, span, bits, before, row_of, right):  # type: ignore[no-untyped-def]
    # each probe row's build row, -1 for none (a left join's pairs against unique keys)
    if probe.shape[0] <= _SERIAL_ROWS:
        for i in range(probe.shape[0]):
            _rank_lookup_row(i, probe, valid, lo, span, bits, before, row_of, right)
    else:
        for i in prange(probe.shape[0]):
            _rank_lookup_row(i, probe, valid, lo, span, bits, before, row_of, right)


# -- radix-partitioned join for large inputs: per-partition hash tables that fit in cache ---
@njit(parallel=True, nogil=True, cache=True)
def radix_histogram(keys, bits, part, hist):  # type: ignore[no-untyped-def]
    # each row's partition (the top bits of its key hash) into part, and per chunk of rows
    # (one row of hist each) how many rows fall in each partition
    n = keys.shape[0]
    chunks = hist.shape[0]
    for c in prange(chunks):
        for i in range(np.uint64(c * n // chunks), np.uint64((c + 1) * n // chunks)):
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
        for i in range(np.uint64(c * n // chunks), np.uint64((c + 1) * n // chunks)):
            q = part[i]
            o = np.uint64(at[q])
            order[o] = i
            grouped[o] = keys[i]
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
def _group_keys(keys, table, group, sizes):  # type: ignore[no-untyped-def]
    # slots interleave (key, its group) so a probe touches one cache line. Groups number the
    # distinct keys in order of first row: group[j] is row j's, sizes[g] counts group g's
    # rows; returns the number of groups
    mask = np.uint64(table.shape[0] - 1)
    groups = 0
    for j in range(keys.shape[0]):
        k = keys[j]
        s = _uslot(k, mask)
        while table[s, 1] != -1 and table[s, 0] != k:
            s = (s + np.uint64(1)) & mask
        if table[s, 1] == -1:
            table[s, 0] = k
            table[s, 1] = groups
            groups += 1
        g = np.uint64(table[s, 1])
        group[j] = g
        sizes[g] += 1
    return groups


@njit(inline="always", cache=True)
def _place_rows(group, groups, sizes, bounds, rows):  # type: ignore[no-untyped-def]
    # rows grouped by key, in row order within a group: group g's are
    # rows[bounds[g]:bounds[g + 1]], so a key repeated on the build side is paired by copying
    # a run of rows, not by following a chain of scattered ones (sizes: used up as cursors)
    bounds[0] = 0
    for g in range(groups):
        bounds[g + 1] = bounds[g] + sizes[g]
        sizes[g] = bounds[g]
    if groups == group.shape[0]:  # distinct keys: group g is row g
        for j in range(group.shape[0]):
            rows[j] = j
        return
    for j in range(group.shape[0]):
        g = np.uint64(group[j])
        rows[np.uint64(sizes[g])] = j
        sizes[g] += 1


@njit(nogil=True, cache=True)
def build_table(bkeys, table, group, sizes, bounds, rows):  # type: ignore[no-untyped-def]
    # the whole build side into arrays NumPy allocated (huge-page backed: a large table
    # allocated inside numba faults in 4 KiB pages)
    groups = _group_keys(bkeys, table, group, sizes)
    _place_rows(group, groups, sizes, bounds, rows)


@njit(nogil=True, cache=True)
def build_set(keys, table):  # type: ignore[no-untyped-def]
    # the table alone (membership tests): each distinct key once, its slot's value >= 0
    mask = np.uint64(table.shape[0] - 1)
    for j in range(keys.shape[0]):
        k = keys[j]
        s = _uslot(k, mask)
        while table[s, 1] != -1 and table[s, 0] != k:
            s = (s + np.uint64(1)) & mask
        table[s, 0] = k
        table[s, 1] = 0


def _capacity(m: int) -> int:
    return 1 << max(4, (2 * m - 1).bit_length())


@njit(inline="always", cache=True)
def _local_table(keys):  # type: ignore[no-untyped-def]
    # hash table of one cache-sized radix partition's build keys, rows grouped by key
    m = keys.shape[0]
    capacity = 16
    while capacity < 2 * m:
        capacity *= 2
    table = np.full((capacity, 2), -1, dtype=np.int64)
    group = np.empty(m, dtype=np.int64)
    sizes = np.zeros(m, dtype=np.int64)
    bounds = np.empty(m + 1, dtype=np.int64)
    rows = np.empty(m, dtype=np.int64)
    groups = _group_keys(keys, table, group, sizes)
    _place_rows(group, groups, sizes, bounds, rows)
    return table, bounds, rows, capacity - 1


@njit(parallel=True, nogil=True, cache=True)
def radix_count(pkeys, pstart, bkeys, bstart, outer, totals):  # type: ignore[no-untyped-def]
    # pairs each partition will produce (an outer join's unmatched probe row: one)
    for q in prange(pstart.shape[0] - 1):
        table, bounds, _, mask = _local_table(bkeys[bstart[q] : bstart[q + 1]])
        c = 0
        for i in range(np.uint64(pstart[q]), np.uint64(pstart[q + 1])):
            c += _matches(find(pkeys[i], table, mask), bounds, outer)
        totals[q] = c


@njit(parallel=True, nogil=True, cache=True)
def radix_fill(pkeys, porder, pstart, bkeys, border, bstart, outer, offsets, left, right):  # type: ignore[no-untyped-def]
    # each partition's pairs from its offset on, by probe row, then build row
    for q in prange(pstart.shape[0] - 1):
        b0 = bstart[q]
        table, bounds, rows, mask = _local_table(bkeys[b0 : bstart[q + 1]])
        border_q = border[b0 : bstart[q + 1]]
        o = np.uint64(offsets[q])  # unsigned places and rows (see _uslot)
        for i in range(np.uint64(pstart[q]), np.uint64(pstart[q + 1])):
            g = find(pkeys[i], table, mask)
            if g == -1:
                if outer:
                    left[o] = porder[i]
                    right[o] = -1
                    o += np.uint64(1)
                continue
            for t in range(np.uint64(bounds[g]), np.uint64(bounds[g + 1])):
                left[o] = porder[i]
                right[o] = border_q[np.uint64(rows[t])]
                o += np.uint64(1)


def _radix_join(p: np.ndarray, b: np.ndarray, outer: bool,
                rows: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Inner or left join by radix partitions of about 1024 build rows (tables that stay in
    L2: measured 3-4x faster than 4096 rows here); pairs ordered by partition, then probe
    row, then build row (any thread count). Pairs are counted per partition, not per probe
    row, so no count array as long as the probe is written. Row numbers of dtype ``rows``
    (:func:`pair_dtype`), the partitions' row orders included."""
    bits = int(min(14, max(4, np.ceil(np.log2(max(len(b), 1) / 1024)))))
    porder, border = np.empty(len(p), rows), np.empty(len(b), rows)
    pkeys, bkeys = np.empty(len(p), np.int64), np.empty(len(b), np.int64)
    pstart = radix_partition(p, bits, porder, pkeys)
    bstart = radix_partition(b, bits, border, bkeys)
    totals = np.empty(len(pstart) - 1, dtype=np.int64)
    radix_count(pkeys, pstart, bkeys, bstart, outer, totals)
    offsets = np.zeros(len(totals) + 1, dtype=np.int64)
    np.cumsum(totals, out=offsets[1:])
    left = np.empty(int(offsets[-1]), dtype=rows)
    right = np.empty(int(offsets[-1]), dtype=rows)
    radix_fill(pkeys, porder, pstart, bkeys, border, bstart, outer, offsets, left, right)
    return left, right


# inputs at least this large (build rows, probe rows) take the radix-partitioned path
# (below 512k build rows one table is as fast; a big build side is partitioned even for a
# small probe: its groups of equal keys then stay in cache, measured 2-3x faster for a
# 1.5M-row build side of repeated keys)
RADIX_MIN = (1 << 19, 1 << 14)
# an inner join probing this many rows estimates from a sample how many match; when fewer
# than _SCREEN_FRACTION do, it first finds which (a byte per row) and pairs only those: a
# 6M-row probe that keeps 15% then writes 6 MB, not 144 MB of counts, first hits and
# offsets, and a radix join partitions a sixth of the rows
_SCREEN_ROWS = 1 << 16
_SCREEN_FRACTION = 0.4


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
        Row indices of dtype :func:`pair_dtype` ``(len(probe), len(build))``: int32 while
        both sides have at most 2**31 rows, else int64. Ordered by probe row, then build row;
        inner and left joins of large inputs (``RADIX_MIN``) are radix-partitioned and
        ordered by partition first, except against unique, densely spread build keys
        (``_DIRECT_SPAN``), which are looked up by key and stay in probe order, as do
        inner joins of unique, densely spread probe keys without nulls against build keys
        that repeat (the build rows looked up in an array of probe rows, then put in probe
        order).
    """
    if how not in HOW:
        raise ValueError(f"how={how!r}: expected one of {HOW}")
    for name, keys in (("probe", probe), ("build", build)):
        if keys.ndim != 1 or not np.issubdtype(keys.dtype, np.integer):
            raise TypeError(f"{name} keys: need a 1-D integer array, got {keys.dtype} {keys.shape}")
    p = probe.astype(np.int64, copy=False)
    b = build.astype(np.int64, copy=False)
    rows = pair_dtype(len(p), len(b))
    if build_valid is not None:  # null build keys never match: leave them out of the table
        kept = np.flatnonzero(build_valid)
        b = b[kept]
    key_range = _key_range(b)
    if how in ("semi", "anti"):  # the probe rows with / without a match: one byte per row
        if len(b) > 4 * len(p) and not _bitmap_fits(key_range, len(b)):
            b = b[_contains(b, _key_set(p))]  # only the build keys some probe row has
            key_range = _key_range(b)
        hit_mask = _member(p, b, probe_valid, key_range)
        found = _mask_rows(hit_mask, how == "semi", rows)
        return found, np.full(len(found), -1, dtype=rows)
    pairs = _direct_join(p, probe_valid, b, how == "left", key_range, rows)
    if pairs is None and RANK_JOIN:
        pairs = _rank_join(p, probe_valid, b, how == "left", key_range, rows)
    if pairs is None and how == "inner" and probe_valid is None:
        pairs = _swapped_direct(p, b, rows)
    left, right = pairs if pairs is not None else _hashed_join(p, probe_valid, b, how,
                                                                 key_range, rows)
    if build_valid is not None:  # back to the caller's build rows
        hit = right >= 0
        right[hit] = kept[right[hit]]
    return left, right


# both sides of at most this many rows get int32 row numbers (-1 and every row fit)
_NARROW_ROWS = 1 << 31
# pairs as int32 where the rows allow it: a join whose every probe row matches writes a pair
# per row and every joined column's gather reads it back, half of those bytes row numbers at
# int64 (see docs/sql.md)
NARROW_PAIRS = True


def pair_dtype(n_probe: int, n_build: int) -> np.dtype:
    """The dtype of :func:`hash_join`'s row numbers for sides of ``n_probe`` and ``n_build``
    rows: int32 when both have at most 2**31 rows (``NARROW_PAIRS``), else int64."""
    if NARROW_PAIRS and max(n_probe, n_build) <= _NARROW_ROWS:
        return np.dtype(np.int32)
    return np.dtype(np.int64)


def _hashed_join(p: np.ndarray, valid: np.ndarray | None, b: np.ndarray, how: str,
                 key_range: tuple[int, int] | None,
                 dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Inner or left join by hashing: screened by a match mask first when a sample says few
    probe rows match, radix-partitioned for large inputs, else one table. Row numbers of
    ``dtype``."""
    rows = table = groups = None
    if how == "inner" and len(p) >= _SCREEN_ROWS and (
            _match_fraction(p, valid, b) < _SCREEN_FRACTION):
        if _bitmap_fits(key_range, len(b)):
            hit_mask = _member(p, b, valid, key_range)
        else:  # the table that answers the screen also pairs the rows
            table, groups = _hash_table(b)
            hit_mask = _contains(p, table, valid)
        rows = _mask_rows(hit_mask, True, dtype)  # pair the matching rows only
        p, valid = p[rows], None
    big = len(b) >= RADIX_MIN[0] and len(p) >= RADIX_MIN[1]
    if big and (valid is None or how == "inner"):
        some = None if valid is None else _mask_rows(valid, True, dtype)
        left, right = _radix_join(p if some is None else p[some], b, how == "left", dtype)
        if some is not None:
            left = some[left]
    else:
        if table is None:
            table, groups = _hash_table(b)
        left, right = _plain_join(p, valid, table, groups, how == "left", dtype)
    if rows is not None:  # back to the caller's probe rows
        left = rows[left]
    return left, right


# unique build keys spanning at most this many values per key (primary keys: TPC-H's
# customer, part, supplier and order keys) are looked up in an array of build rows indexed
# by key instead of a hash table: one load per probe row, measured 7x faster for 6M
# lineitem rows against 1.5M orders and 30x for 227k orders against 150k customers
_DIRECT_SPAN = 4
# lookup arrays (int32) of at most this many keys stay in a core's L1 cache (32 kB) and are
# read again by the fill pass; past it each row's build row is kept between the passes:
# 1e7 probe rows against 1e5 keys over 2e5 values (800 kB) took 42 ms looking up again,
# 25 ms kept
_DIRECT_CACHED = 1 << 13


def _direct_join(p: np.ndarray, valid: np.ndarray | None, b: np.ndarray, outer: bool,
                 key_range: tuple[int, int] | None,
                 rows: np.dtype | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Inner or left join against unique, densely spread build keys by an array of build
    rows indexed by key (pairs ordered by probe row, row numbers of dtype ``rows``, by
    default :func:`pair_dtype`); ``None`` when the build keys repeat or spread too wide for
    it."""
    rows = pair_dtype(len(p), len(b)) if rows is None else rows
    if key_range is None or len(b) >= 2**31 or key_range[1] > _DIRECT_SPAN * len(b):
        return None
    lo, span = key_range
    pos = np.full(span + 1, -1, dtype=np.int32)  # pos[span]: the miss of keys out of range
    if not fill_direct(b, lo, pos):
        return None
    uspan = np.uint64(span)
    if outer:
        right = np.empty(len(p), dtype=rows)
        direct_lookup(p, valid, lo, uspan, pos, right)
        return np.arange(len(p), dtype=rows), right
    if len(p) >= _PLACE_ROWS and _sample_matches(p, valid, lo, span, pos):
        return _direct_placed(p, valid, lo, uspan, pos, rows)
    # a lookup array in cache is read again by the fill pass; a larger one once, each
    # row's build row kept for the fill pass (4 bytes a row instead of a second cache miss)
    hit = None if span < _DIRECT_CACHED else np.empty(len(p), dtype=np.int32)
    counts = np.empty(-(-len(p) // _CHUNK), dtype=np.int64)
    direct_count(p, valid, lo, uspan, pos, counts, hit)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    left = np.empty(int(offsets[-1]), dtype=rows)
    right = np.empty(int(offsets[-1]), dtype=rows)
    direct_fill(p, valid, lo, uspan, pos, hit, offsets, left, right)
    return left, right


# probes of at least this many rows whose sampled rows (about _SAMPLE of them) all match
# (foreign keys: every row of a fact table has its dimension row) are paired in one pass,
# at the places of their own rows (:func:`direct_place`), not counted first (the count pass
# read the keys a second time; docs/sql.md has the measurements)
_PLACE_ROWS = 1 << 16
_SAMPLE = 4096
PLACE_DIRECT = True


def _sample_matches(p: np.ndarray, valid: np.ndarray | None, lo: int, span: int,
                    pos: np.ndarray) -> bool:
    """Whether every one of about :data:`_SAMPLE` evenly spaced probe rows has a build row
    (``pos``: the build rows indexed by key - lo, ``pos[span]`` -1)."""
    if not PLACE_DIRECT:
        return False
    step = max(1, len(p) // _SAMPLE)
    # key - lo wraps round for keys far below lo: unsigned, they fall past the span
    at = np.minimum((p[::step] - lo).view(np.uint64), np.uint64(span))
    found = pos[at] >= 0
    if valid is not None:
        found &= valid[::step].astype(bool, copy=False)
    return bool(found.all())


def _direct_placed(p: np.ndarray, valid: np.ndarray | None, lo: int, uspan: np.uint64,
                   pos: np.ndarray, rows: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The key-indexed inner join in one pass (:func:`direct_place`): every chunk of probe
    rows paired at its own rows' places; returned as they are when every row matched, else
    each chunk's pairs moved to their places in new arrays (still ordered by probe row)."""
    counts = np.empty(-(-len(p) // _CHUNK), dtype=np.int64)
    left, right = np.empty(len(p), dtype=rows), np.empty(len(p), dtype=rows)
    direct_place(p, valid, lo, uspan, pos, counts, left, right)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if offsets[-1] == len(p):
        return left, right
    out_left = np.empty(int(offsets[-1]), dtype=rows)
    out_right = np.empty(int(offsets[-1]), dtype=rows)
    compact_chunks(counts, offsets, left, right, out_left, out_right)
    return out_left, out_right


# an inner join whose build keys repeat (or spread too wide for a key-indexed array) looks
# its build rows up in an array of the probe rows when the probe keys are unique and dense
# and the probe has at most this many times the build's rows (the array, 4 to 16 bytes a
# probe row, then weighs at most about twice the build side's hash table): 5e4 keys that
# repeat against 1e5 unique ones joined in 0.4 ms instead of 2.0-3.1 ms (one thread)
_SWAP_SIDES = 4
SWAP_DIRECT = True


def _swapped_direct(p: np.ndarray, b: np.ndarray,
                    rows: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """Inner join of probe keys ``p`` (no nulls) and build keys ``b`` through a key-indexed
    array of the probe rows (:func:`_direct_join` with the sides swapped), the pairs then put
    in probe row order (a stable counting sort: each probe row's build rows stay in build
    order, as the other paths give them); ``None`` when the probe is too long against the
    build, or its keys repeat or spread too wide."""
    if not SWAP_DIRECT or not len(b) or not len(p) or len(p) > _SWAP_SIDES * len(b):
        return None
    # (repeated probe keys stop the array's fill at the first repeat: no test beforehand)
    pairs = _direct_join(b, None, p, False, _key_range(p), rows)
    if pairs is None:
        return None
    by_build, found = pairs  # build rows ascending, each with its one probe row
    left, right = np.empty_like(found), np.empty_like(by_build)
    by_probe_row(found, by_build, np.zeros(len(p) + 1, dtype=np.int64), left, right)
    return left, right


@njit(nogil=True, cache=True)
def by_probe_row(probe_rows, build_rows, starts, left, right):  # type: ignore[no-untyped-def]
    # pairs (probe_rows[t], build_rows[t]) stably ordered by probe row into left, right
    # (starts: len(probe) + 1 zeros, used up as cursors)
    for t in range(np.uint64(probe_rows.shape[0])):
        starts[np.uint64(probe_rows[t]) + np.uint64(1)] += 1
    for i in range(1, starts.shape[0]):
        starts[i] += starts[i - 1]
    for t in range(np.uint64(probe_rows.shape[0])):
        i = np.uint64(probe_rows[t])
        o = np.uint64(starts[i])
        left[o] = i
        right[o] = build_rows[t]
        starts[i] = o + np.uint64(1)


def _mask_rows(mask: np.ndarray, want: bool, dtype: np.dtype) -> np.ndarray:
    """The rows where ``mask`` is ``want`` as ``dtype``: ``np.flatnonzero`` (one thread,
    SIMD counting: measured 3x faster on 5M rows than counting and placing them per chunk
    on two busy cores) and a conversion of the rows found."""
    return np.flatnonzero(mask if want else ~mask).astype(dtype, copy=False)


RANK_JOIN = True  # unique build keys within a bitmap's reach: looked up by rank (_rank_join)


def _rank_join(p: np.ndarray, valid: np.ndarray | None, b: np.ndarray, outer: bool,
               key_range: tuple[int, int] | None,
               rows: np.dtype | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Inner or left join against unique build keys at most :data:`_BITMAP_SPAN` values
    apart on average, too sparse for :func:`_direct_join`'s array of rows (a year of
    order keys: 227k keys over 6M values): a key's build row is found from its bit
    and the count of bits set below it (a prefix count per 64-bit word), so a lookup reads
    span / 8 + span / 16 bytes that stay in cache, with no hashing and no probing loop.
    Pairs ordered by probe row (row numbers of dtype ``rows``, by default
    :func:`pair_dtype`); ``None`` when the keys repeat, the range is too wide, or the probe
    too short to pay for the bitmap."""
    rows = pair_dtype(len(p), len(b)) if rows is None else rows
    if key_range is None or len(b) >= 2**31:
        return None
    lo, span = key_range
    # at most _BITMAP_SPAN values per key, and a bitmap of fewer words than probe rows:
    # building and counting it then costs less than the probe pass (a few probe rows against
    # sparse keys go to a hash table, whose size follows the keys, not their range)
    if span > _BITMAP_SPAN * len(b) or span // 64 > len(p):
        return None
    words = span // 64 + 1  # bit ``span`` (never set) is where keys out of range look
    bits = np.zeros(words, dtype=np.uint64)
    set_bits(b, lo, bits)
    before = np.empty(words, dtype=np.int32)
    row_of = np.zeros(len(b) + 1, dtype=np.int32)  # row_of[len(b)]: read past the last key
    if not rank_index(b, lo, bits, before, row_of):
        return None  # a key repeats
    uspan = np.uint64(span)
    if outer:
        right = np.empty(len(p), dtype=rows)
        rank_lookup(p, valid, lo, uspan, bits, before, row_of, right)
        return np.arange(len(p), dtype=rows), right
    # which rows match (a flat pass that vectorises: a loop that counts or places pairs as
    # it goes does not, measured 10x slower), then the build rows of those alone
    hit = np.empty(len(p), dtype=bool)
    in_bitmap(p, valid, lo, uspan, bits, hit)
    left = _mask_rows(hit, True, rows)
    right = np.empty(len(left), dtype=rows)
    # the matched keys gathered first (NumPy's take): read through ``left`` inside the
    # kernel, they were measured 30x slower
    rank_rows(p[left], lo, bits, before, row_of, right)
    return left, right


def _plain_join(p: np.ndarray, valid: np.ndarray | None, table: np.ndarray,
                groups: tuple[np.ndarray, np.ndarray], outer: bool,
                dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Inner or left join of probe keys ``p`` against one hash table (count, prefix sum,
    fill); pairs ordered by probe row, then build row, of ``dtype``. A null probe key
    matches nothing."""
    # (each row's key group in ``dtype`` too: groups number at most the build rows)
    counts, hit = np.empty(len(p), np.int64), np.empty(len(p), dtype)
    bounds, rows = groups
    count(p, valid, table, bounds, outer, counts, hit)
    offsets = np.zeros(len(p) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    left = np.empty(int(offsets[-1]), dtype=dtype)
    right = np.empty(int(offsets[-1]), dtype=dtype)
    fill(hit, bounds, rows, offsets, left, right)
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
    present = _contains(b, _key_set(keys))
    return float(np.count_nonzero(np.isin(keys, b[present]))) / len(sample)


def matched(probe: np.ndarray, build: np.ndarray) -> np.ndarray:
    """Whether each probe key is among the build keys (``np.isin`` by hashing: a semi join
    that returns its mask). The table is built on the smaller side: with many more build
    keys, they stream through a table of the probe keys, and only the ones found there make
    the table the probe rows look up."""
    p = probe.astype(np.int64, copy=False)
    b = build.astype(np.int64, copy=False)
    key_range = _key_range(b)
    if len(b) > 4 * len(p) and not _bitmap_fits(key_range, len(b)):
        b = b[_contains(b, _key_set(p))]  # only the build keys some probe row has
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
        return _contains(keys, _key_set(b), valid)
    lo, span = key_range
    bits = np.zeros((span + 63) // 64, dtype=np.uint64)
    set_bits(b, lo, bits)
    out = np.empty(len(keys), dtype=bool)
    in_bitmap(keys, valid, lo, np.uint64(span), bits, out)
    return out


def _contains(keys: np.ndarray, table: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Whether each key (a null one: never) is in the hash table; with many more keys than
    slots, through a filter of tag bits first (:func:`contains_tagged`)."""
    out = np.empty(len(keys), dtype=bool)
    capacity = table.shape[0]
    if len(keys) < _TAG_PROBES * capacity:
        contains(keys, valid, table, out)
        return out
    # 16 to 32 bits per key (3% to 6% of the keys without a match pass), up to 4x that
    # while the filter fits half of a core's L1 cache: each key that passes costs a
    # mispredicted branch and a table probe (1e3 keys, 5e6 probe rows on one thread: 2 KB
    # of tags passed 5.9% and took 15-17 ms, 8 KB passed 1.5% and took 9.5-10 ms)
    nbits = max(8 * capacity, min(32 * capacity, _TAG_L1_BITS))
    shift = 64 - (nbits.bit_length() - 1)
    tags = np.zeros(nbits // 64, dtype=np.uint64)
    set_tags(table, tags, shift)
    contains_tagged(keys, valid, table, tags, shift, out)
    return out


# probe keys per table slot from which membership tests go through tag bits (the filter is
# built once from the table's slots)
_TAG_PROBES = 2
_TAG_L1_BITS = 1 << 17  # 16 KB of tag bits


def _hash_table(b: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The open-addressing table of build keys ``b`` (slot: key, group) and its groups
    ``(bounds, rows)``: group ``g``'s build rows are ``rows[bounds[g]:bounds[g + 1]]``."""
    m = len(b)
    table = np.full((_capacity(m), 2), -1, dtype=np.int64)
    bounds = np.empty(m + 1, dtype=np.int64)
    rows = np.empty(m, dtype=np.int64)
    build_table(b, table, np.empty(m, dtype=np.int64), np.zeros(m, dtype=np.int64), bounds,
                rows)
    return table, (bounds, rows)


def _key_set(b: np.ndarray) -> np.ndarray:
    """The open-addressing table of keys ``b`` for membership tests (no rows)."""
    table = np.full((_capacity(len(b)), 2), -1, dtype=np.int64)
    build_set(b, table)
    return table
