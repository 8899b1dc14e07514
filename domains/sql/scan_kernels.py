"""Numba kernels of the scan path: gathering a filter's survivors, decimal128 to float64, and
sorting a string dictionary (with its duplicates found) straight from Arrow's buffers.

The string sort is an MSD radix sort over 8-byte big-endian words: NumPy sorts all strings by
the high bits of their first word, then runs of equal words are refined (in parallel) by the
next word, and small runs by direct comparison. It gives byte (= UTF-8 code point) order, as
Arrow's sort does, but several times faster on dictionaries of millions of strings (TPC-H
comments).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange
from numba.typed import List

from hpc.jit import serial_below

__all__ = ["gather_parallel", "decimal_to_float", "decimal_gather",
           "sort_strings", "distinct_sorted", "codes_into",
           "differs_in_group", "read_only_list", "group_minmax_strings", "kth_string",
           "kth_value"]

_SMALL = 16  # runs this short are insertion-sorted by direct comparison
_WORDS = 4  # 8-byte words of each string's start carried through the sort

# Large outputs are allocated by the callers with NumPy, not inside the kernels: NumPy asks for
# transparent huge pages, and the page faults of a fresh 48 MB array from numba's allocator
# cost more than the loop that fills it. Gathers and the decimal conversion run on all threads
# (measured 2x faster than one thread on two otherwise idle cores; under MPI each rank has its
# share of the cores, hpc.backend); the dictionary codes of all chunks are one call, the
# chunks spread over the threads (one call per chunk was too short to pay for waking them).


# kernels at module level so numba can cache them on disk (cache=True)
@njit(parallel=True, nogil=True, cache=True)
def gather_parallel(values, index, out):  # type: ignore[no-untyped-def]
    """``out[:] = values[index]`` for a 1-D array and in-range indices (``ndarray.take``,
    faster), on all threads."""
    for i in prange(index.shape[0]):
        out[i] = values[np.uint64(index[i])]  # unsigned: no negative-index wraparound test


@njit(parallel=True, nogil=True, cache=True)
def unscaled_into(out, starts, chunks, strides, factors):  # type: ignore[no-untyped-def]
    """``out[starts[c] + i]`` = value ``i`` of chunk ``c`` (``chunks[c][strides[c] i]``, the
    low word of a decimal128 where the stride is 2) times ``factors[c]``, the chunks spread
    over the threads; returns how many values did not fit int64 (a decimal128 whose high
    word is not the low word's sign, or a product past int64)."""
    bad = 0
    for c in prange(starts.shape[0]):
        words = chunks[np.int64(c)]
        stride, factor, start = strides[c], factors[c], starts[c]
        limit = np.iinfo(np.int64).max // factor
        wrong = 0
        for i in range(words.shape[0] // stride):
            low = words[stride * i]
            if stride == 2:
                wrong += np.int64(words[2 * i + 1] != (low >> 63))
            if factor != 1:
                wrong += np.int64((low > limit) | (low < -limit))
                low = low * factor
            out[start + i] = low
        bad += wrong
    return bad


@njit(parallel=True, nogil=True, cache=True)
def decimal_to_float(words, stride, divisor, out):  # type: ignore[no-untyped-def]
    """Unscaled decimals divided by ``divisor`` into ``out`` in one pass. Value ``i`` is
    ``words[stride * i]``: an integer column's values (``stride`` 1: Parquet's INT32/INT64
    decimals) or the low words of Arrow's decimal128 pairs (``stride`` 2, little-endian);
    returns how many decimal128 values did not fit in 64 bits (then the caller must take
    the slow path)."""
    wide = 0
    for i in prange(out.shape[0]):
        lo = words[stride * i]
        if stride == 2 and words[2 * i + 1] != (lo >> 63):  # high word more than the sign
            wide += 1
        out[i] = lo / divisor
    return wide


@njit(parallel=True, nogil=True, cache=True)
def decimal_gather(chunks, starts, stride, index, order, bounds, divisor,  # type: ignore[no-untyped-def]
                   out):
    """``out[i]`` = row ``index[i]`` of the chunked decimals divided by ``divisor``. Chunk
    ``c`` holds rows ``starts[c]`` on as the ``words`` of :func:`decimal_to_float`; the
    positions ``i`` of its rows are ``order[bounds[c]:bounds[c + 1]]`` (with an empty
    ``order``, ``bounds[c]`` to ``bounds[c + 1]`` themselves: an ascending ``index``). The
    chunks are spread over the threads, each reading its chunks' list entries once (an
    entry read per row contends on the arrays' shared reference counts). Returns how many
    did not fit in 64 bits."""
    wide = 0
    for c in prange(bounds.shape[0] - 1):
        words = chunks[np.int64(c)]  # the parfor index is unsigned; the list takes int64
        base = starts[c]
        for k in range(bounds[c], bounds[c + 1]):
            i = order[k] if order.shape[0] else k
            j = stride * (index[i] - base)
            lo = words[j]
            if stride == 2 and words[j + 1] != (lo >> 63):
                wide += 1
            out[i] = lo / divisor
    return wide


@njit(inline="always", cache=True)
def _word(data, start, length, at):  # type: ignore[no-untyped-def]
    # bytes [at, at + 8) of a string as a big-endian integer, zero padded past its end
    w = np.uint64(0)
    for k in range(8):
        b = np.uint64(data[start + at + k]) if at + k < length else np.uint64(0)
        w = (w << np.uint64(8)) | b
    return w


@njit(inline="always", cache=True)
def _less(offsets, data, a, b, at):  # type: ignore[no-untyped-def]
    # string a < string b, both known equal before byte `at`
    sa, sb = offsets[a], offsets[b]
    la, lb = offsets[a + 1] - sa, offsets[b + 1] - sb
    for p in range(at, min(la, lb)):
        x, y = data[sa + p], data[sb + p]
        if x != y:
            return x < y
    return la < lb


@njit(inline="always", cache=True)
def _equal(offsets, data, a, b):  # type: ignore[no-untyped-def]
    sa, sb = offsets[a], offsets[b]
    la = offsets[a + 1] - sa
    if la != offsets[b + 1] - sb:
        return False
    for p in range(la):
        if data[sa + p] != data[sb + p]:
            return False
    return True


@njit(inline="always", cache=True)
def _before(offsets, data, order, prefix, i, j, at):  # type: ignore[no-untyped-def]
    # the string at position i < the one at position j, both equal before byte `at`: the
    # prefix words they carry first, their bytes only past those
    for k in range(at // 8, prefix.shape[1]):
        if prefix[i, k] != prefix[j, k]:
            return prefix[i, k] < prefix[j, k]
    return _less(offsets, data, order[i], order[j], max(at, 8 * prefix.shape[1]))


@njit(inline="always", cache=True)
def _swap(order, prefix, i, j):  # type: ignore[no-untyped-def]
    order[i], order[j] = order[j], order[i]
    for k in range(prefix.shape[1]):
        prefix[i, k], prefix[j, k] = prefix[j, k], prefix[i, k]


@njit(nogil=True, cache=True)
def _insertion_sort(offsets, data, order, prefix, lo, hi, at):  # type: ignore[no-untyped-def]
    for i in range(lo + 1, hi):
        j = i
        while j > lo and _before(offsets, data, order, prefix, j, j - 1, at):
            _swap(order, prefix, j, j - 1)
            j -= 1


@njit(nogil=True, cache=True)
def _split(offsets, data, order, prefix, lo, hi, end):  # type: ignore[no-untyped-def]
    # a run whose strings agree on bytes [0, end) once zero padded: the ones that end by `end`
    # are prefixes of the others, so they go first (by length); returns where the rest start
    f = lo
    for k in range(lo, hi):
        o = order[k]
        if offsets[o + 1] - offsets[o] <= end:
            _swap(order, prefix, k, f)
            f += 1
    if 1 < f - lo <= _SMALL:
        _insertion_sort(offsets, data, order, prefix, lo, f, end)
    elif f - lo > _SMALL:  # done with: their prefix words are not needed any more
        lengths = np.empty(f - lo, dtype=np.int64)
        for k in range(lo, f):
            lengths[k - lo] = offsets[order[k] + 1] - offsets[order[k]]
        order[lo:f] = order[lo:f][np.argsort(lengths, kind="mergesort")]
    return f


@njit(nogil=True, cache=True)
def _sort_run(offsets, data, order, prefix, keys, lo, hi, at):  # type: ignore[no-untyped-def]
    # sort positions [lo, hi), whose strings share their first `at` bytes; an explicit stack
    # of disjoint runs of at least two rows, so it never holds more than (hi - lo) / 2
    stack = np.empty(((hi - lo) // 2 + 2, 3), dtype=np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2] = lo, hi, at
    top = 1
    words = prefix.shape[1]
    while top:
        top -= 1
        lo, hi, at = stack[top, 0], stack[top, 1], stack[top, 2]
        if hi - lo <= _SMALL:
            _insertion_sort(offsets, data, order, prefix, lo, hi, at)
            continue
        w = at // 8
        same = True
        for i in range(lo, hi):
            if w < words:
                keys[i] = prefix[i, w]
            else:
                o = order[i]
                keys[i] = _word(data, offsets[o], offsets[o + 1] - offsets[o], at)
            same = same and keys[i] == keys[lo]
        if not same:  # a long shared prefix needs no sort, only the next word
            perm = np.argsort(keys[lo:hi])
            order[lo:hi] = order[lo:hi][perm]
            keys[lo:hi] = keys[lo:hi][perm]
            if w + 1 < words:  # the prefix words travel with their strings
                prefix[lo:hi] = prefix[lo:hi][perm]
        i = lo
        while i < hi:
            j = i + 1
            while j < hi and keys[j] == keys[i]:
                j += 1
            if j - i > 1:
                f = _split(offsets, data, order, prefix, i, j, at + 8)
                if j - f > 1:
                    stack[top, 0], stack[top, 1], stack[top, 2] = f, j, at + 8
                    top += 1
            i = j


@njit(parallel=True, nogil=True, cache=True)
def prefix_words(offsets, data, rows, prefix):  # type: ignore[no-untyped-def]
    """The first ``8 * prefix.shape[1]`` bytes of the strings ``rows`` as big-endian
    ``uint64`` words (zero padded)."""
    for i in prange(prefix.shape[0]):
        r = rows[i]
        s, n = offsets[r], offsets[r + 1] - offsets[r]
        for k in range(prefix.shape[1]):
            prefix[i, k] = _word(data, s, n, 8 * k)


@njit(parallel=True, nogil=True, cache=True)
def _gather_rows(rows, index, out):  # type: ignore[no-untyped-def]
    for i in prange(index.shape[0]):
        for k in range(rows.shape[1]):
            out[i, k] = rows[index[i], k]


@njit(parallel=True, nogil=True, cache=True)
def _sort_runs(offsets, data, order, prefix, keys, runs):  # type: ignore[no-untyped-def]
    # runs (start, stop pairs) of equal high bits of the first word, each sorted on its own
    for r in prange(runs.shape[0] // 2):
        _sort_run(offsets, data, order, prefix, keys, runs[2 * r], runs[2 * r + 1], 0)


def sort_strings(offsets: np.ndarray, data: np.ndarray,
                 rows: np.ndarray | None = None) -> np.ndarray:
    """Indices (int64) that sort the strings ``data[offsets[i]:offsets[i + 1]]`` bytewise.

    Parameters
    ----------
    offsets : numpy.ndarray
        ``n + 1`` int32 or int64 offsets into ``data`` (Arrow's string layout).
    data : numpy.ndarray
        The uint8 bytes of the strings.
    rows : numpy.ndarray, optional
        int64 string numbers: sort only these (default: all).

    Returns
    -------
    numpy.ndarray
        The order (of ``rows``' strings: string numbers, not positions in ``rows``); equal
        strings in any order.
    """
    n = len(offsets) - 1 if rows is None else len(rows)
    if n < 2:
        return np.arange(max(n, 0), dtype=np.int64) if rows is None else np.array(
            rows, dtype=np.int64)
    every = rows is None
    rows = np.arange(n, dtype=np.int64) if every else np.asarray(rows, dtype=np.int64)
    with serial_below(n):  # a few strings (a dictionary's): no parallel region to start
        return _sort_strings(offsets, data, rows, every)


def _sort_strings(offsets: np.ndarray, data: np.ndarray, rows: np.ndarray,
                  every: bool) -> np.ndarray:
    # the first 32 bytes of each string move with it (sequential reads, not a cache miss
    # into the string bytes per comparison)
    n = len(rows)
    prefix = np.empty((n, _WORDS), dtype=np.uint64)
    prefix_words(offsets, data, rows, prefix)
    # NumPy's SIMD sort of values (several times faster than its argsort): the first word's
    # high bits with the position in the low ones; runs of equal high bits are sorted after
    bits = np.uint64(int(n - 1).bit_length())
    packed = (prefix[:, 0] >> bits << bits) | np.arange(n, dtype=np.uint64)
    packed.sort()
    at = (packed & ((np.uint64(1) << bits) - np.uint64(1))).astype(np.int64)
    order = at if every else rows[at]
    high = packed >> bits
    moved = np.empty_like(prefix)
    _gather_rows(prefix, at, moved)  # NumPy's row fancy-indexing is several times slower
    starts = np.concatenate([[0], np.flatnonzero(high[1:] != high[:-1]) + 1, [n]])
    long = np.flatnonzero(np.diff(starts) > 1)  # only runs of two or more need work
    if len(long):
        runs = np.stack([starts[long], starts[long + 1]], axis=1).astype(np.int64).ravel()
        _sort_runs(offsets, data, order, moved, np.empty(n, dtype=np.uint64), runs)
    return order


@njit(parallel=True, nogil=True, cache=True)
def distinct_sorted(offsets, data, order, first):  # type: ignore[no-untyped-def]
    """For strings in sorted ``order``: ``first`` True where one differs from the one before
    it."""
    for i in prange(order.shape[0]):
        first[i] = i == 0 or not _equal(offsets, data, order[i - 1], order[i])


@njit(nogil=True, cache=True)
def group_minmax_strings(ids, codes, mask, ngroups, offsets, data, want_max):  # type: ignore[no-untyped-def]  # noqa: E501
    """Per group of ``ids``: the code (into Arrow's ``offsets``/``data``) of the least or,
    with ``want_max``, the greatest string in byte order among the rows where ``mask``, and
    whether the group has one. Needs no sorted dictionary."""
    out = np.zeros(ngroups, dtype=codes.dtype)
    seen = np.zeros(ngroups, dtype=np.bool_)
    for i in range(ids.shape[0]):
        if mask[i]:
            g, c = ids[i], codes[i]
            if not seen[g]:
                out[g] = c
                seen[g] = True
            elif c != out[g]:
                if want_max:
                    better = _less(offsets, data, out[g], c, 0)
                else:
                    better = _less(offsets, data, c, out[g], 0)
                if better:
                    out[g] = c
    return out, seen


@njit(inline="always", cache=True)
def _worse(offsets, data, a, b, want_max):  # type: ignore[no-untyped-def]
    # string a ranks after string b (ascending: a > b; descending: a < b)
    return _less(offsets, data, a, b, 0) if want_max else _less(offsets, data, b, a, 0)


@njit(nogil=True, cache=True)
def kth_string(codes, mask, offsets, data, k, want_max):  # type: ignore[no-untyped-def]
    """The code of the ``k``-th least string (``want_max``: greatest) in byte order among the
    rows where ``mask``, or -1 when fewer rows have one: a heap of the ``k`` best seen, its
    root the worst of them, replaced only by a better string (rare in a long column)."""
    heap = np.empty(k, dtype=np.int64)
    size = 0
    for i in range(codes.shape[0]):
        if not mask[i]:
            continue
        c = np.int64(codes[i])
        if size < k:
            j = size
            heap[j] = c
            size += 1
            while j > 0:
                up = (j - 1) // 2
                if not _worse(offsets, data, heap[j], heap[up], want_max):
                    break
                heap[j], heap[up] = heap[up], heap[j]
                j = up
        elif _worse(offsets, data, heap[0], c, want_max):
            heap[0] = c
            j = 0
            while True:
                a, b = 2 * j + 1, 2 * j + 2
                w = j
                if a < size and _worse(offsets, data, heap[a], heap[w], want_max):
                    w = a
                if b < size and _worse(offsets, data, heap[b], heap[w], want_max):
                    w = b
                if w == j:
                    break
                heap[j], heap[w] = heap[w], heap[j]
                j = w
    return heap[0] if size == k and k > 0 else -1


@njit(nogil=True, cache=True)
def _best_of(values, mask, lo, hi, k, want_max, heap):  # type: ignore[no-untyped-def]
    # the ``k`` best of values[lo:hi] (where ``mask``, if it has rows) in ``heap``, its root
    # the worst of them; returns how many it holds
    size = 0
    masked = mask.shape[0] > 0
    for i in range(lo, hi):
        if masked and not mask[i]:
            continue
        x = values[i]
        if size < k:
            j = size
            heap[j] = x
            size += 1
            while j > 0:
                up = (j - 1) // 2
                if (heap[j] < heap[up]) if want_max else (heap[j] > heap[up]):
                    heap[j], heap[up] = heap[up], heap[j]
                    j = up
                else:
                    break
        elif (x > heap[0]) if want_max else (x < heap[0]):
            heap[0] = x
            j = 0
            while True:
                a, b = 2 * j + 1, 2 * j + 2
                w = j
                if a < size and ((heap[a] < heap[w]) if want_max else (heap[a] > heap[w])):
                    w = a
                if b < size and ((heap[b] < heap[w]) if want_max else (heap[b] > heap[w])):
                    w = b
                if w == j:
                    break
                heap[j], heap[w] = heap[w], heap[j]
                j = w
    return size


@njit(parallel=True, nogil=True, cache=True)
def _best_by_piece(values, mask, k, want_max, pieces, heaps, sizes):  # type: ignore[no-untyped-def]
    n = values.shape[0]
    for p in prange(pieces):
        sizes[p] = _best_of(values, mask, p * n // pieces, (p + 1) * n // pieces, k,
                            want_max, heaps[p])


def kth_value(values: np.ndarray, valid: np.ndarray | None, k: int, want_max: bool
              ) -> Any:
    """The ``k``-th least (``want_max``: greatest) of the integers ``values`` where ``valid``
    (all where None), or None when fewer rows have one.

    Each thread keeps a heap of the ``k`` best of its rows, its root the worst of them and
    replaced only by a better value (rare in a long column), and the heaps' union is then
    selected from. Unlike ``np.partition`` (NumPy 2.4's introselect took 300 ms on 1.5M
    values that are nearly all equal, against 20 ms on distinct ones), its time does not
    depend on how many values are equal."""
    import numba

    if k <= 0:
        return None
    pieces = max(1, min(numba.get_num_threads(), len(values) // max(4 * k, 1 << 14)))
    heaps = np.empty((pieces, k), dtype=values.dtype)
    sizes = np.zeros(pieces, dtype=np.int64)
    mask = np.zeros(0, np.bool_) if valid is None else np.ascontiguousarray(valid, np.bool_)
    _best_by_piece(np.ascontiguousarray(values), mask, k, want_max, pieces, heaps, sizes)
    best = np.concatenate([heaps[p, :sizes[p]] for p in range(pieces)])
    if len(best) < k:
        return None
    at = len(best) - k if want_max else k - 1
    return np.partition(best, at)[at]


@njit(parallel=True, nogil=True, cache=True)
def differs_in_group(ids, first, codes, offsets, data, valid, has_valid):  # type: ignore[no-untyped-def]
    """Rows whose string (``codes`` into Arrow's ``offsets``/``data``; a null where
    ``has_valid`` and not ``valid``) differs from that of their group's first row
    ``first[ids[row]]``: 0 when the column is constant in every group."""
    count = 0
    for r in prange(ids.shape[0]):
        f = first[ids[r]]
        if has_valid and valid[r] != valid[f]:
            count += 1
        elif (not has_valid or valid[r]) and codes[r] != codes[f] and not _equal(
                offsets, data, codes[r], codes[f]):
            count += 1
    return count


def read_only_list(arrays: list[np.ndarray]) -> Any:
    """A numba typed list of read-only views of ``arrays``: one list type whether they came
    from Arrow (read-only buffers) or NumPy, so kernels taking it compile once.

    The list is made and filled by kernels of this module (cached on disk), not by
    ``List.append`` from Python: numba compiles that method anew in every process, once per
    element type (0.3-1.2 s each, paid by the first query of a fresh process)."""
    views = []
    for a in arrays:
        view = a.view()
        view.flags.writeable = False
        views.append(view)
    if not views:
        from numba.typed import List

        return List()
    out = _list_of(views[0])
    for view in views[1:]:
        _push(out, view)
    return out


@njit(nogil=True, cache=True)
def _list_of(first):  # type: ignore[no-untyped-def]
    out = List()
    out.append(first)
    return out


@njit(nogil=True, cache=True)
def _push(out, item):  # type: ignore[no-untyped-def]
    out.append(item)


@njit(parallel=True, nogil=True, cache=True)
def codes_into(out, starts, lookup, bases, chunks):  # type: ignore[no-untyped-def]
    """``out[starts[c] + i] = lookup[bases[c] + chunks[c][i]]``: each chunk's dictionary
    indices turned into codes of the shared dictionary, the chunks (row groups) spread over
    the threads."""
    for c in prange(starts.shape[0]):
        indices = chunks[np.int64(c)]
        start, base = starts[c], bases[c]
        for i in range(indices.shape[0]):
            out[start + i] = lookup[base + indices[i]]
