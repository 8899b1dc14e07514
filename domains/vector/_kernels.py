"""Top-k selection and list-scanning kernels (numba on the CPU, numba.cuda on the GPU).

Every selection keeps, per query, a bounded max-heap of *positions* (rows of the stored
arrays) ordered by ``(score, id)``: the smaller score wins and equal scores are broken by the
smaller id, so the selected set does not depend on the order in which rows are visited (a
sharded search and a single-process search pick the same rows). Scores are "smaller is
better": ``||x||^2 - 2 q.x`` for L2 (``||q||^2`` is added when exact distances are computed)
and ``-q.x`` for inner product and cosine.

The heap helpers are written once as plain Python and compiled for both targets by
:func:`hpc.jit.specialise` (generated modules that numba caches on disk).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numba
import numpy as np
from numba import njit, prange

__all__ = [
    "NO_ID",
    "GPU_KMAX",
    "init_heaps",
    "check_rows",
    "flat_select",
    "flat_collect",
    "collect_merge",
    "merge_parts",
    "blas_single_threaded",
    "serial_when_small",
    "dynamic_schedule",
    "finish_heaps",
    "exact_scores",
    "scan_lists",
    "coarse_lists",
    "search_lists",
    "search_lists_serial",
    "scan_lists_gemm",
    "list_tasks",
    "merge_slots",
    "scan_pq",
    "merge_sorted",
    "kmeans_accumulate",
    "pq_update",
    "assign_to_codes",
    "gpu_kernels",
]

# fast-math without "no infinities / no NaNs": the heaps use +inf as the empty score
_FAST = {"reassoc", "contract", "nsz", "arcp"}
NO_ID = np.iinfo(np.int64).max  # the id of an empty heap slot: loses every tie
CHUNK = 64  # scores tested together (a vectorised count) before any heap work
SCAN_BLOCK = 256  # list rows scored into a buffer before the heap sees them
# nearest lists selected by a bounded heap up to this many, by radix selection above
RADIX_MIN_SELECT = 16
GPU_KMAX = 256  # the largest k the GPU heap kernels take (larger k: a sort-based path)


# ---------------------------------------------------------------------------------------------
# Heap helpers (plain Python; compiled per target)


def _id_of(ids: Any, p: Any) -> Any:
    """The id of stored position ``p`` (empty slots, ``p < 0``, rank last)."""
    if p < 0:
        return NO_ID
    return ids[p]


def _worse(d1: Any, i1: Any, d2: Any, i2: Any) -> bool:
    """True when ``(d1, i1)`` ranks after ``(d2, i2)``."""
    return d1 > d2 or (d1 == d2 and i1 > i2)


def _worse_at(d1: Any, p1: Any, d2: Any, p2: Any, ids: Any) -> bool:
    """:func:`_worse` of two stored positions; the ids are read only on a tie of score."""
    if d1 != d2:
        return d1 > d2
    return _id_of(ids, p1) > _id_of(ids, p2)


def _replace_top(hd: Any, hp: Any, k: int, d: Any, p: Any, ids: Any) -> None:
    """Replace the heap's worst entry by ``(d, p)`` and restore the heap."""
    pos = 0
    while True:
        c = 2 * pos + 1
        if c >= k:
            break
        r = c + 1
        if r < k and _worse_at(hd[r], hp[r], hd[c], hp[c], ids):
            c = r
        if _worse_at(hd[c], hp[c], d, p, ids):
            hd[pos] = hd[c]
            hp[pos] = hp[c]
            pos = c
        else:
            break
    hd[pos] = d
    hp[pos] = p


def _push(hd: Any, hp: Any, k: int, d: Any, p: Any, ids: Any) -> None:
    """Offer ``(d, p)`` to the heap: kept when it beats the current worst entry."""
    if _worse_at(hd[0], hp[0], d, p, ids):
        _replace_top(hd, hp, k, d, p, ids)


def _sift(hd: Any, hp: Any, n: int, start: int, ids: Any) -> None:
    """Sift entry ``start`` down a heap of ``n`` entries."""
    d = hd[start]
    p = hp[start]
    pos = start
    while True:
        c = 2 * pos + 1
        if c >= n:
            break
        r = c + 1
        if r < n and _worse_at(hd[r], hp[r], hd[c], hp[c], ids):
            c = r
        if _worse_at(hd[c], hp[c], d, p, ids):
            hd[pos] = hd[c]
            hp[pos] = hp[c]
            pos = c
        else:
            break
    hd[pos] = d
    hp[pos] = p


def _heapify(hd: Any, hp: Any, n: int, ids: Any) -> None:
    for s in range(n // 2 - 1, -1, -1):
        _sift(hd, hp, n, s, ids)


def _sort_heap(hd: Any, hp: Any, k: int, ids: Any) -> None:
    """Heap sort in place: ascending by ``(d, id)``."""
    for end in range(k - 1, 0, -1):
        d = hd[0]
        p = hp[0]
        hd[0] = hd[end]
        hp[0] = hp[end]
        hd[end] = d
        hp[end] = p
        _sift(hd, hp, end, 0, ids)


def _cpu_heap() -> Any:
    """The heap helpers compiled for the CPU (a generated module, cached on disk)."""
    from hpc.jit import specialise

    helpers = [_id_of, _worse, _worse_at, _replace_top, _push, _sift]
    return specialise("vector_heap", [_heapify, _sort_heap], helpers, target="cpu-serial")


_heap = _cpu_heap()
_c_id_of, _c_worse, _c_worse_at = _heap._id_of, _heap._worse, _heap._worse_at
_c_replace_top, _c_push, _c_sift = _heap._replace_top, _heap._push, _heap._sift
_c_heapify, _c_sort_heap = _heap._heapify, _heap._sort_heap


# ---------------------------------------------------------------------------------------------
# CPU kernels


def init_heaps(*shape: int) -> tuple[np.ndarray, np.ndarray]:
    """Empty heaps of ``shape`` (last axis: k): scores ``+inf``, positions ``-1``."""
    return np.full(shape, np.inf, dtype=np.float32), np.full(shape, -1, dtype=np.int64)


@njit(cache=True, fastmath={"reassoc"})
def _sum_squares(row: np.ndarray) -> float:  # pragma: no cover - compiled
    """``sum(row**2)`` in float64 (each square is exact; the sum may be reordered)."""
    acc = 0.0
    for v in row:
        acc += np.float64(v) * np.float64(v)
    return acc


@njit(cache=True)
def check_rows(a: np.ndarray, normalize: bool, out: np.ndarray) -> tuple[int, int, int, int]:
    """Input rows checked in one pass: ``(rows with a NaN or infinity, the first of them,
    zero rows, the first of them)`` (first: ``-1`` when none). With ``normalize`` each row
    is divided by its norm into ``out`` (float64 sum of squares, its square root rounded to
    float32, a float32 division: what ``a / sqrt(einsum(a, a, dtype=float64))`` gives);
    ``out`` is left alone otherwise and after a bad row.

    A search of one query called ``isfinite``, ``einsum``, ``sqrt``, a comparison and a
    division apart (NumPy): about 9 us a call, as much as the rest of a one-query search's
    Python."""
    n, dim = a.shape
    bad = 0
    first_bad = -1
    for i in range(n):
        hits = 0
        for j in range(dim):
            hits += not np.isfinite(a[i, j])
        if hits:
            if bad == 0:
                first_bad = i
            bad += 1
    if bad or not normalize:
        return bad, first_bad, 0, -1
    zero = 0
    first_zero = -1
    for i in range(n):
        acc = _sum_squares(a[i])
        if acc == 0.0:
            if zero == 0:
                first_zero = i
            zero += 1
            continue
        nf = np.float32(np.sqrt(acc))
        for j in range(dim):
            out[i, j] = a[i, j] / nf
    return 0, -1, zero, first_zero


@njit(cache=True, inline="always")
def _part(n: int, nparts: int, r: int) -> tuple[int, int]:  # pragma: no cover - compiled
    """Rows ``[lo, hi)`` of part ``r`` of ``n`` rows in ``nparts`` (remainder to low parts)."""
    base, extra = divmod(n, nparts)
    lo = r * base + min(r, extra)
    return lo, lo + base + (1 if r < extra else 0)


@njit(parallel=True, cache=True)
def flat_select(
    qs: np.ndarray,
    x: np.ndarray,
    norms: np.ndarray,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    tile: int,
    block: int,
    nparts: int,
    hd: np.ndarray,
    hp: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Exact search: per task (query tile, database part) a GEMM ``qs_t @ x_b.T`` per
    database block, folded at once into the heaps while it is in cache.

    ``qs`` is ``-2 q`` for L2 (the score is then ``||x||^2 + s``) and ``-q`` for inner
    products. ``hd``/``hp`` are ``(nparts, nq, k)``: part ``r`` scans database rows
    ``chunk(n, nparts, r)``; :func:`merge_parts` folds the parts into part 0.
    """
    nq = qs.shape[0]
    n = x.shape[0]
    k = hd.shape[2]
    ntiles = (nq + tile - 1) // tile
    for task in prange(ntiles * nparts):
        t = task // nparts
        r = task % nparts
        q0 = t * tile
        q1 = min(nq, q0 + tile)
        lo, hi = _part(n, nparts, r)
        qt = qs[q0:q1]
        buf = np.empty((q1 - q0, block), dtype=np.float32)
        for x0 in range(lo, hi, block):
            x1 = min(hi, x0 + block)
            nb = x1 - x0
            if nb == block:
                np.dot(qt, x[x0:x1].T, buf)
                s = buf
            else:
                s = np.dot(qt, x[x0:x1].T)
            for row in range(q1 - q0):
                drow = hd[r, q0 + row]
                prow = hp[r, q0 + row]
                top = drow[0]
                top_id = _c_id_of(ids, prow[0])
                srow = s[row]
                if l2:
                    for j in range(nb):
                        srow[j] += norms[x0 + j]
                for j in range(nb):
                    sc = srow[j]
                    if sc <= top and (sc < top or ids[x0 + j] < top_id):
                        p = x0 + j
                        if use_mask and mask[p] == 0:
                            continue
                        _c_replace_top(drow, prow, k, sc, p, ids)
                        top = drow[0]
                        top_id = _c_id_of(ids, prow[0])


@njit(cache=True)
def _compact(
    cd: np.ndarray, cp: np.ndarray, c: int, k: int, slack: float, th: float
) -> tuple[int, float]:  # pragma: no cover - compiled
    """Keep the entries of ``cd[:c]``/``cp[:c]`` scoring at most (the k-th smallest score
    plus ``slack``), packed in order; returns their count and that threshold (float64: no
    rounding of the threshold can drop a row)."""
    if c >= k:
        kth = np.partition(cd[:c].copy(), k - 1)[k - 1]
        th = min(th, np.float64(kth) + slack)
    kept = 0
    for t in range(c):
        if cd[t] <= th:
            cd[kept] = cd[t]
            cp[kept] = cp[t]
            kept += 1
    return kept, th


@njit(parallel=True, cache=True)
def flat_collect(
    qs: np.ndarray,
    x: np.ndarray,
    norms: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    tile: int,
    block: int,
    k: int,
    slack: np.ndarray,
    cd: np.ndarray,
    cp: np.ndarray,
    count: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Exact search, selection by threshold: per task (query tile, database part) a GEMM
    ``qs_t @ x_b.T`` per database block; every row scoring at most the threshold is
    appended to the query's buffer ``(cd, cp)[part, query]`` (``(nparts, nq, cap)``).

    When a buffer is full it is cut to the rows within ``slack[query]`` of its k-th best
    score (:func:`_compact`), which sets the threshold. The GEMM score ``g`` of a row is
    within ``eps`` of its exact score, and ``slack >= 2 eps`` plus the rounding of the exact
    distances: every row of the exact top k has ``g <= (k-th smallest g) + slack``, and the
    k-th smallest ``g`` seen so far only falls, so no such row is ever dropped. No heap is
    kept: a candidate costs one store, a cut ``O(cap)`` per ``cap - k`` candidates.
    ``count[part, query]`` is the buffer's fill, or ``-1`` when it overflowed (more than
    ``cap`` rows within the slack: many near-equal scores; the caller repeats with more).
    ``qs`` is ``-2 q`` for L2 (the score is then ``||x||^2 + s``) and ``-q`` otherwise.
    """
    nq = qs.shape[0]
    n = x.shape[0]
    nparts = cd.shape[0]
    cap = cd.shape[2]
    ntiles = (nq + tile - 1) // tile
    for task in prange(ntiles * nparts):
        t = task // nparts
        r = task % nparts
        q0 = t * tile
        q1 = min(nq, q0 + tile)
        lo, hi = _part(n, nparts, r)
        qt = qs[q0:q1]
        buf = np.empty((q1 - q0, block), dtype=np.float32)
        th = np.full(q1 - q0, np.inf)
        for x0 in range(lo, hi, block):
            x1 = min(hi, x0 + block)
            nb = x1 - x0
            if q1 - q0 == 1:  # one query: a GEMV streams the rows (no GEMM packing)
                np.dot(x[x0:x1], qt[0], buf[0, :nb])
                s = buf
            elif nb == block:
                np.dot(qt, x[x0:x1].T, buf)
                s = buf
            else:
                s = np.dot(qt, x[x0:x1].T)
            for row in range(q1 - q0):
                qi = q0 + row
                c = count[r, qi]
                if c < 0:
                    continue
                srow = s[row]
                if l2:
                    for j in range(nb):
                        srow[j] += norms[x0 + j]
                lim = th[row]
                drow = cd[r, qi]
                prow = cp[r, qi]
                for j in range(nb):
                    sc = srow[j]
                    if sc <= lim:
                        p = x0 + j
                        if use_mask and mask[p] == 0:
                            continue
                        if c == cap:
                            c, lim = _compact(drow, prow, c, k, slack[qi], lim)
                            if c == cap:
                                c = -1
                                break
                        drow[c] = sc
                        prow[c] = p
                        c += 1
                th[row] = lim
                count[r, qi] = c


@njit(parallel=True, cache=True)
def collect_merge(
    cd: np.ndarray, cp: np.ndarray, count: np.ndarray, k: int, slack: np.ndarray,
    out_p: np.ndarray, out_n: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The candidates of every query from the buffers of :func:`flat_collect`: the parts'
    rows within ``slack`` of their joint k-th best score, packed into ``out_p[query]``
    (``-1`` after them), their number in ``out_n`` (``-1``: a buffer overflowed)."""
    nparts, nq, cap = cd.shape
    for q in prange(nq):
        total = 0
        over = False
        for r in range(nparts):
            if count[r, q] < 0:
                over = True
            else:
                total += count[r, q]
        if over:
            out_n[q] = -1
            out_p[q] = -1
            continue
        d = np.empty(total, dtype=np.float32)
        at = 0
        for r in range(nparts):
            for t in range(count[r, q]):
                d[at] = cd[r, q, t]
                out_p[q, at] = cp[r, q, t]
                at += 1
        kept, _ = _compact(d, out_p[q], total, k, slack[q], np.inf)
        out_n[q] = kept
        out_p[q, kept:] = -1


@njit(parallel=True, cache=True)
def merge_parts(hd: np.ndarray, hp: np.ndarray, ids: np.ndarray) -> None:  # pragma: no cover
    """Fold the heaps of parts ``1..`` into part 0 (``hd``/``hp``: ``(nparts, nq, k)``)."""
    nparts, nq, k = hd.shape
    for q in prange(nq):
        for r in range(1, nparts):
            for t in range(k):
                p = hp[r, q, t]
                if p >= 0:
                    _c_push(hd[0, q], hp[0, q], k, hd[r, q, t], p, ids)


@njit(parallel=True, cache=True)
def finish_heaps(hd: np.ndarray, hp: np.ndarray, ids: np.ndarray) -> None:  # pragma: no cover
    """Sort every heap ascending by ``(score, id)``."""
    for q in prange(hd.shape[0]):
        _c_sort_heap(hd[q], hp[q], hd.shape[1], ids)


@njit(cache=True, fastmath=_FAST)
def _exact_one(
    qv: np.ndarray,
    vectors: np.ndarray,
    hrow: np.ndarray,
    ids: np.ndarray,
    l2: bool,
    drow: np.ndarray,
    irow: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`exact_scores` of one query: the positions ``hrow`` re-scored exactly and sorted
    by ``(distance, id)``; the first ``drow.shape[0]`` results are written."""
    k = hrow.shape[0]
    dim = qv.shape[0]
    key = np.empty(k, dtype=np.float64)
    pos = np.empty(k, dtype=np.int64)
    for t in range(k):
        p = hrow[t]
        pos[t] = p
        if p < 0:
            key[t] = np.inf
            continue
        acc = 0.0
        if l2:
            for c in range(dim):
                diff = np.float64(qv[c]) - np.float64(vectors[p, c])
                acc += diff * diff
            key[t] = np.float32(acc)  # the returned value orders the results
        else:
            for c in range(dim):
                acc += np.float64(qv[c]) * np.float64(vectors[p, c])
            key[t] = -np.float32(acc)
    _c_heapify(key, pos, k, ids)  # heap sort by (key, id): O(k log k)
    _c_sort_heap(key, pos, k, ids)
    for t in range(min(k, drow.shape[0])):
        p = pos[t]
        if p < 0:
            irow[t] = -1
            drow[t] = np.inf if l2 else -np.inf
        else:
            irow[t] = ids[p]
            drow[t] = key[t] if l2 else -key[t]


@njit(parallel=True, cache=True)
def exact_scores(
    queries: np.ndarray,
    vectors: np.ndarray,
    hp: np.ndarray,
    ids: np.ndarray,
    l2: bool,
    out_d: np.ndarray,
    out_i: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Exact float64 distances of the selected positions, re-sorted by ``(distance, id)``.

    ``out_d`` gets squared L2 distances (ascending) or inner products (descending); ``out_i``
    the ids, ``-1`` for empty slots.
    """
    for q in prange(hp.shape[0]):
        _exact_one(queries[q], vectors, hp[q], ids, l2, out_d[q], out_i[q])


@njit(cache=True, inline="never")
def _count_le(srow: np.ndarray, c0: int, c1: int, lim: float) -> int:  # pragma: no cover
    """How many of ``srow[c0:c1]`` are ``<= lim`` (a branch-free loop: vectorised; kept out
    of line so the compiler sees it alone)."""
    hits = 0
    for j in range(c0, c1):
        hits += srow[j] <= lim
    return hits


@njit(cache=True, inline="never")
def _fold_row(
    srow: np.ndarray,
    nb: int,
    x0: int,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    drow: np.ndarray,
    prow: np.ndarray,
    b: float,
) -> float:  # pragma: no cover - compiled
    """Offer the scores ``srow[:nb]`` of rows ``x0 ..`` to the heap ``(drow, prow)``; rows
    scoring strictly worse than the bound ``b`` are skipped. Returns the new bound (the
    heap's worst score once it is full, if that is smaller).

    The scores are first tested against the current limit in blocks of ``CHUNK`` (a
    vectorised count); only blocks with a candidate take the scalar heap path, so a row
    costs about one vector compare per ``8`` scores once the bound is tight."""
    k = drow.shape[0]
    top = drow[0]
    top_id = _c_id_of(ids, prow[0])
    lim = min(top, b)
    if _count_le(srow, 0, nb, lim) == 0:
        return b
    for c0 in range(0, nb, CHUNK):
        c1 = min(nb, c0 + CHUNK)
        if _count_le(srow, c0, c1, lim) == 0:
            continue
        for e0 in range(c0, c1, 8):  # the chunk's groups of 8 with a candidate
            e1 = min(c1, e0 + 8)
            hit = False
            for j in range(e0, e1):
                hit |= srow[j] <= lim
            if not hit:
                continue
            for j in range(e0, e1):
                sc = srow[j]
                if sc <= lim and (sc < top or ids[x0 + j] < top_id):
                    p = x0 + j
                    if use_mask and mask[p] == 0:
                        continue
                    _c_replace_top(drow, prow, k, sc, p, ids)
                    top = drow[0]
                    top_id = _c_id_of(ids, prow[0])
                    if prow[0] >= 0 and top < b:  # the heap is full: a bound for the query
                        b = top
                    lim = min(top, b)
    return b


@njit(cache=True, fastmath=_FAST)
def _row_dots(
    qv: np.ndarray, vectors: np.ndarray, lo: int, hi: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[:hi - lo]``: the inner products of query ``qv`` with the stored rows ``lo ..
    hi - 1``, one row at a time, each vectorised over the dimensions.

    Nothing else is in the loop: no heap, no branch on a score, not even the metric (see
    :func:`_dots_to_scores`). With a metric branch in it, the copy of this loop compiled
    into the search kernels (the one a cached kernel runs) kept fewer values in registers
    and streamed cold rows at 34-37 ns a row against 18-20 for the copy compiled alone
    (d = 128, one core), where this form runs at 18-20 in both."""
    dim = qv.shape[0]
    for p in range(lo, hi):
        acc = np.float32(0.0)
        for c in range(dim):
            acc += qv[c] * vectors[p, c]
        out[p - lo] = acc


@njit(cache=True, fastmath=_FAST)
def _dots_to_scores(
    norms: np.ndarray, lo: int, n: int, l2: bool, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Turn the inner products ``out[:n]`` of rows ``lo ..`` into scores in place:
    ``||x||^2 - 2 q.x`` for L2, ``-q.x`` otherwise (smaller is better)."""
    if l2:
        for j in range(n):
            out[j] = norms[lo + j] - np.float32(2.0) * out[j]
    else:
        for j in range(n):
            out[j] = -out[j]


@njit(cache=True)
def _scan_rows(
    qv: np.ndarray,
    vectors: np.ndarray,
    norms: np.ndarray,
    lo: int,
    hi: int,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    drow: np.ndarray,
    prow: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Offer the stored rows ``lo .. hi - 1`` to the heap ``(drow, prow)`` of query ``qv``.

    Per block of ``SCAN_BLOCK`` rows: their inner products into a small buffer
    (:func:`_row_dots`), made scores, then tested against the heap's worst a vector at a
    time (:func:`_fold_row`), only candidates taking the heap's scalar path. Scoring and
    heap work used to share one loop (a compare and push after each dot product, rows four
    at a time up to d = 64): cold lists of d = 128 (1e6 rows, 20 lists a query, one core)
    streamed at 30-37 ns a row that way, 18-20 ns this way (FAISS 27-30 in the same
    process); four rows at a time was no faster here from d = 25 on."""
    sc = np.empty(min(SCAN_BLOCK, max(hi - lo, 0)), dtype=np.float32)
    for x0 in range(lo, hi, SCAN_BLOCK):
        x1 = min(hi, x0 + SCAN_BLOCK)
        _row_dots(qv, vectors, x0, x1, sc)
        _dots_to_scores(norms, x0, x1 - x0, l2, sc)
        _fold_row(sc, x1 - x0, x0, ids, mask, use_mask, drow, prow, np.inf)


@njit(parallel=True, cache=True)
def scan_lists(
    queries: np.ndarray,
    probes: np.ndarray,
    offsets: np.ndarray,
    vectors: np.ndarray,
    norms: np.ndarray,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    hd: np.ndarray,
    hp: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """IVF-Flat: scan the probed inverted lists of every query into its heap (few queries:
    a numba thread per query, rows by :func:`_scan_rows`)."""
    nq, nprobe = probes.shape
    for q in prange(nq):
        for t in range(nprobe):
            lst = probes[q, t]
            if lst >= 0:
                _scan_rows(
                    queries[q], vectors, norms, offsets[lst], offsets[lst + 1], ids, mask,
                    use_mask, l2, hd[q], hp[q],
                )  # fmt: skip


@njit(cache=True)
def _radix_smallest(scores: np.ndarray, ld: np.ndarray, lp: np.ndarray) -> None:
    """The ``ld.shape[0]`` smallest of ``scores`` by ``(score, position)`` into ``(ld, lp)``,
    unordered (positions ascending among equal scores at the cut; ``ld.shape[0] <=
    scores.shape[0]``, no NaN).

    Radix selection on the scores' bits mapped to order-preserving integers (``-0.0`` as
    ``+0.0``): per byte, most significant first, a histogram of the scores still in
    question finds the byte of the cut, until one byte's bucket holds exactly the missing
    count or the cut's value is known. A few passes of compares over the scores, where a
    bounded heap pays a branchy sift per replacement (about ``nsel (1 + ln(n / nsel))`` of
    them). The coarse step of one query (1024 lists, d = 50; the scores are 3.8 us of it):
    32 lists 11.7 us by heap, 9.4 by this; 128 lists 31.7 against 15.0; at 16 lists and
    fewer the heap is as fast (one core, interleaved)."""
    n = scores.shape[0]
    nsel = ld.shape[0]
    bits = scores.view(np.int32)
    keys = np.empty(n, dtype=np.int64)
    for j in range(n):
        b = bits[j] if scores[j] != 0 else np.int32(0)
        if b < 0:
            b = b ^ np.int32(0x7FFFFFFF)
        keys[j] = np.int64(b) + np.int64(1 << 31)
    hist = np.empty(256, dtype=np.int64)
    prefix = np.int64(0)  # the cut's key, byte by byte
    need = nsel  # how many of the keys sharing the prefix are still to take
    limit = np.int64(-1)  # when set: every key below it is taken, exactly nsel of them
    for shift in (24, 16, 8, 0):
        hist[:] = 0
        high = prefix >> (shift + 8)
        for j in range(n):
            if keys[j] >> (shift + 8) == high:
                hist[(keys[j] >> shift) & 255] += 1
        b = 0
        while hist[b] < need:
            need -= hist[b]
            b += 1
        prefix |= np.int64(b) << shift
        if hist[b] == need:
            limit = prefix + (np.int64(1) << shift)
            break
    cnt = 0
    if limit >= 0:
        for j in range(n):
            if keys[j] < limit:
                ld[cnt] = scores[j]
                lp[cnt] = j
                cnt += 1
        return
    for j in range(n):  # below the cut's value, then the first `need` equal to it
        if keys[j] < prefix:
            ld[cnt] = scores[j]
            lp[cnt] = j
            cnt += 1
    for j in range(n):
        if need > 0 and keys[j] == prefix:
            ld[cnt] = scores[j]
            lp[cnt] = j
            cnt += 1
            need -= 1


@njit(cache=True, fastmath=_FAST)
def _coarse_one(
    qv: np.ndarray,
    ct: np.ndarray,
    cnorms: np.ndarray,
    list_ids: np.ndarray,
    l2: bool,
    ld: np.ndarray,
    lp: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The ``ld.shape[0]`` best lists of query ``qv`` into ``(ld, lp)``, sorted by (score,
    list); ``list_ids`` is ``0 .. nlist - 1`` (ties to the lower list, as a flat search).

    ``ct`` holds the centroids as columns (``dim x nlist``): the scores of all lists are
    built one dimension at a time, a multiply-add over ``nlist`` contiguous floats (vector
    wide, no per-list sum across lanes), then selected."""
    dim, nlist = ct.shape
    nsel = ld.shape[0]
    scores = np.empty(nlist, dtype=np.float32)
    if l2:
        scores[:] = cnorms
    else:
        scores[:] = 0.0
    f = np.float32(-2.0) if l2 else np.float32(-1.0)
    for c in range(dim):
        w = f * qv[c]
        for j in range(nlist):
            scores[j] += w * ct[c, j]
    ld[:] = np.inf
    lp[:] = -1
    if nsel <= RADIX_MIN_SELECT or nsel > nlist:
        top = ld[0]
        for j in range(nlist):
            if scores[j] <= top:
                _c_push(ld, lp, nsel, scores[j], j, list_ids)
                top = ld[0]
    else:
        _radix_smallest(scores, ld, lp)
        _c_heapify(ld, lp, nsel, list_ids)
    _c_sort_heap(ld, lp, nsel, list_ids)


@njit(parallel=True, cache=True)
def coarse_lists(
    queries: np.ndarray,
    ct: np.ndarray,
    cnorms: np.ndarray,
    list_ids: np.ndarray,
    l2: bool,
    out_d: np.ndarray,
    out_l: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The ``out_l.shape[1]`` nearest lists of every query, nearest first, with their scores
    (``||c||^2 - 2 q.c`` for L2, ``-q.c`` otherwise), from the centroids as columns ``ct``
    (``dim x nlist``): the coarse step of a few queries without a GEMM's blocks, heaps and
    passes over memory."""
    for q in prange(queries.shape[0]):
        _coarse_one(queries[q], ct, cnorms, list_ids, l2, out_d[q], out_l[q])


@njit(cache=True)
def _search_one(
    qv: np.ndarray,
    ct: np.ndarray,
    cnorms: np.ndarray,
    list_ids: np.ndarray,
    nprobe: int,
    offsets: np.ndarray,
    vectors: np.ndarray,
    norms: np.ndarray,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    kk: int,
    drow: np.ndarray,
    irow: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """One query of :func:`search_lists`: its nearest lists, their rows into a heap of
    ``kk`` (nearest list first: its rows make the heap's bound tight early), then exact
    distances of the heap's rows, sorted."""
    ld = np.empty(nprobe, dtype=np.float32)
    lp = np.empty(nprobe, dtype=np.int64)
    _coarse_one(qv, ct, cnorms, list_ids, l2, ld, lp)
    hd = np.full(kk, np.inf, dtype=np.float32)
    hp = np.full(kk, -1, dtype=np.int64)
    for t in range(nprobe):
        lst = lp[t]
        if lst >= 0:
            _scan_rows(
                qv, vectors, norms, offsets[lst], offsets[lst + 1], ids, mask, use_mask, l2,
                hd, hp,
            )  # fmt: skip
    _exact_one(qv, vectors, hp, ids, l2, drow, irow)


@njit(parallel=True, cache=True)
def search_lists(
    queries: np.ndarray,
    ct: np.ndarray,
    cnorms: np.ndarray,
    list_ids: np.ndarray,
    nprobe: int,
    offsets: np.ndarray,
    vectors: np.ndarray,
    norms: np.ndarray,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    kk: int,
    out_d: np.ndarray,
    out_i: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """IVF-Flat search of a few queries in one kernel, a numba thread per query: coarse
    step (centroids as columns ``ct``, see :func:`coarse_lists`), list scan into a heap of
    ``kk`` and exact re-scoring, the first ``out_d.shape[1]`` results written. One call
    instead of a GEMM, a heap merge, a scan and a re-scoring called apart: for one query
    those calls and their Python cost up to half the time."""
    for q in prange(queries.shape[0]):
        _search_one(
            queries[q], ct, cnorms, list_ids, nprobe, offsets, vectors, norms, ids,
            mask, use_mask, l2, kk, out_d[q], out_i[q],
        )  # fmt: skip


@njit(cache=True)
def search_lists_serial(
    queries: np.ndarray,
    ct: np.ndarray,
    cnorms: np.ndarray,
    list_ids: np.ndarray,
    nprobe: int,
    offsets: np.ndarray,
    vectors: np.ndarray,
    norms: np.ndarray,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    kk: int,
    out_d: np.ndarray,
    out_i: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`search_lists` on the calling thread (one query: no thread pool to wake, no
    thread count to switch)."""
    for q in range(queries.shape[0]):
        _search_one(
            queries[q], ct, cnorms, list_ids, nprobe, offsets, vectors, norms, ids,
            mask, use_mask, l2, kk, out_d[q], out_i[q],
        )  # fmt: skip


@njit(parallel=True, cache=True)
def scan_lists_gemm(
    qs: np.ndarray,
    tasks: np.ndarray,
    pair_query: np.ndarray,
    offsets: np.ndarray,
    vectors: np.ndarray,
    norms: np.ndarray,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    block: int,
    bound: np.ndarray,
    cand_d: np.ndarray,
    cand_p: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """IVF-Flat for many queries: inverted lists scanned by GEMMs of the queries probing
    them against the list's vectors.

    ``tasks[t] = (list, a0, a1)``: the queries ``pair_query[a0:a1]`` (the (query, probe)
    pairs grouped by list) against the vectors of ``list``. A list probed by many queries
    is cut into several tasks (so one long list does not leave the other threads idle),
    see :func:`list_tasks`. The scores go to the heap ``cand[query, thread]`` of the
    running thread, so no two threads write one heap and the heaps take ``nq x threads x
    k`` entries (not one per probe: with ``k = 100`` and ``nprobe = 64`` those would be
    hundreds of megabytes to clear and merge).

    ``bound[query]`` (start: ``+inf``) is the worst score of some *full* heap of the query:
    k rows at least as good exist, so a row scoring strictly worse cannot be in the top k
    and is not offered to any heap of the query. Without it a heap would take a good part
    of the rows of the first lists it sees. Threads share the bounds without locks: a
    stale or overwritten value is still a valid (looser) bound, so the result does not
    depend on the timing, only the work does. ``qs`` is ``-2 q`` (L2) or ``-q``."""
    dim = qs.shape[1]
    for t in prange(tasks.shape[0]):
        tid = numba.get_thread_id()
        lst = tasks[t, 0]
        a0 = tasks[t, 1]
        a1 = tasks[t, 2]
        lo = offsets[lst]
        hi = offsets[lst + 1]
        na = a1 - a0
        if hi == lo or na == 0:
            continue
        ql = np.empty((na, dim), dtype=np.float32)
        for r in range(na):
            ql[r] = qs[pair_query[a0 + r]]
        for x0 in range(lo, hi, block):
            x1 = min(hi, x0 + block)
            nb = x1 - x0
            s = np.dot(ql, vectors[x0:x1].T)
            for r in range(na):
                qi = pair_query[a0 + r]
                srow = s[r]
                if l2:
                    for j in range(nb):
                        srow[j] += norms[x0 + j]
                b = bound[qi]
                nbound = _fold_row(
                    srow, nb, x0, ids, mask, use_mask, cand_d[qi, tid], cand_p[qi, tid], b
                )
                if nbound < b:
                    bound[qi] = nbound


def list_tasks(
    pair_counts: np.ndarray, list_sizes: np.ndarray, threads: int, tile: int = 256
) -> np.ndarray:
    """Local. The tasks of :func:`scan_lists_gemm`: ``(list, first pair, end pair)`` rows,
    the pairs of each list cut into pieces of at most ``tile`` queries and at most about
    ``1 / (8 threads)`` of the total work (``pairs x list size``), but not under 16 queries
    (a GEMM of fewer rows is slow), the largest first.

    ``pair_counts[l]`` is the number of (query, slot) pairs probing list ``l``, which hold
    positions ``sum(pair_counts[:l]) ..`` of the pair arrays.
    """
    counts = np.asarray(pair_counts, dtype=np.int64)
    sizes = np.asarray(list_sizes, dtype=np.int64)
    work = counts * sizes
    cap = max(1, int(work.sum()) // (8 * max(1, threads)))
    per = np.clip(cap // np.maximum(sizes, 1), 16, tile)  # queries per task, by list
    pieces = np.where(counts > 0, -(-counts // per), 0)
    lists = np.repeat(np.arange(counts.shape[0], dtype=np.int64), pieces)
    first_piece = np.concatenate([[0], np.cumsum(pieces)[:-1]])
    piece = np.arange(lists.shape[0], dtype=np.int64) - np.repeat(first_piece, pieces)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    a0 = start[lists] + piece * per[lists]
    a1 = np.minimum(a0 + per[lists], start[lists] + counts[lists])
    order = np.argsort(-(a1 - a0) * sizes[lists], kind="stable")
    return np.ascontiguousarray(np.stack([lists, a0, a1], axis=1)[order])


@njit(parallel=True, cache=True)
def merge_slots(
    cand_d: np.ndarray, cand_p: np.ndarray, ids: np.ndarray, hd: np.ndarray, hp: np.ndarray
) -> None:  # pragma: no cover - compiled
    """The heap of query ``q`` (``hd[q]``, ``hp[q]``, overwritten) from the heaps
    ``cand[q, :, :]`` (one per thread): the first taken as it is, the others folded in."""
    nq, nslot, k = cand_d.shape
    for q in prange(nq):
        hd[q] = cand_d[q, 0]
        hp[q] = cand_p[q, 0]
        for t in range(1, nslot):
            for u in range(k):
                p = cand_p[q, t, u]
                if p >= 0:
                    _c_push(hd[q], hp[q], k, cand_d[q, t, u], p, ids)


@njit(cache=True, fastmath=_FAST)
def _pq_query_table(
    qv: np.ndarray, codebooks: np.ndarray, qtab: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``qtab[s, j] = q_s . codebooks[s, j]``: the query's inner product with every
    codeword of every sub-space."""
    m, ksub, dsub = codebooks.shape
    for s in range(m):
        for j in range(ksub):
            acc = np.float32(0.0)
            for c in range(dsub):
                acc += qv[s * dsub + c] * codebooks[s, j, c]
            qtab[s, j] = acc


@njit(cache=True, fastmath=_FAST)
def _dot32(a: np.ndarray, b: np.ndarray) -> float:  # pragma: no cover - compiled
    """``a . b`` in float32 (vectorised: the sum may be reordered)."""
    acc = np.float32(0.0)
    for c in range(a.shape[0]):
        acc += a[c] * b[c]
    return acc


@njit(cache=True)
def _pq_scan_list(
    table: np.ndarray,
    base: float,
    codes: np.ndarray,
    lo: int,
    hi: int,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    drow: np.ndarray,
    prow: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Offer the PQ-coded rows ``lo .. hi - 1`` to the heap: row ``p`` scores ``base +
    sum_s table[s, codes[p, s]]``, summed in sub-space order.

    Four rows at a time: a row's sum is a chain of ``m`` dependent additions (4 cycles
    each), so one row at a time waits on the adder; four chains overlap and the loads of
    the table and codes are what is left. Compiled without re-association, so every row's
    sum is the same sequence of additions in either loop (a row's score does not depend on
    its place in the list, which differs between shards).

    A row scoring above the heap's worst entry (``top``) cannot enter, and once the heap
    is full most rows are such: they are rejected here, by one comparison, and only the
    others reach :func:`_c_push` (which breaks a tie of score by id, so ``<=``). The push
    is a call that increments and decrements the reference counts of three arrays; made
    for every row it was ~2/3 of the scan (d = 128, m = 16, 128 lists of ~1000 rows: 1.62
    against 0.58 ms a query)."""
    m = table.shape[0]
    k = drow.shape[0]
    base32 = np.float32(base)
    top = drow[0]
    end4 = lo + (hi - lo) // 4 * 4
    for p in range(lo, end4, 4):
        s0 = base32
        s1 = base32
        s2 = base32
        s3 = base32
        for s in range(m):
            s0 += table[s, codes[p, s]]
            s1 += table[s, codes[p + 1, s]]
            s2 += table[s, codes[p + 2, s]]
            s3 += table[s, codes[p + 3, s]]
        if (s0 <= top) | (s1 <= top) | (s2 <= top) | (s3 <= top):
            if s0 <= top and not (use_mask and mask[p] == 0):
                _c_push(drow, prow, k, s0, p, ids)
                top = drow[0]
            if s1 <= top and not (use_mask and mask[p + 1] == 0):
                _c_push(drow, prow, k, s1, p + 1, ids)
                top = drow[0]
            if s2 <= top and not (use_mask and mask[p + 2] == 0):
                _c_push(drow, prow, k, s2, p + 2, ids)
                top = drow[0]
            if s3 <= top and not (use_mask and mask[p + 3] == 0):
                _c_push(drow, prow, k, s3, p + 3, ids)
                top = drow[0]
    for p in range(end4, hi):
        if use_mask and mask[p] == 0:
            continue
        sc = base32
        for s in range(m):
            sc += table[s, codes[p, s]]
        if sc <= top:
            _c_push(drow, prow, k, sc, p, ids)
            top = drow[0]


@njit(parallel=True, cache=True)
def scan_pq(
    queries: np.ndarray,
    probes: np.ndarray,
    coarse: np.ndarray,
    offsets: np.ndarray,
    codes: np.ndarray,
    codebooks: np.ndarray,
    centroids: np.ndarray,
    precomputed: np.ndarray,
    ids: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    l2: bool,
    hd: np.ndarray,
    hp: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """IVF-PQ: asymmetric distances from per-query lookup tables, into the heaps.

    L2 on residuals: ``||q - c - r||^2 = ||q - c||^2 + (||r||^2 + 2 c.r) - 2 q.r``; the middle
    term is ``precomputed[list, m, code]``, ``q.r`` is one table per query and ``||q - c||^2``
    is the coarse distance ``coarse[q, t]``. Inner product: ``q.c + q.r``; its table
    ``-q.r`` does not depend on the list and is built once per query (built per list it
    cost as much as scanning ``2**nbits`` rows of every list).
    """
    nq, nprobe = probes.shape
    m, ksub, dsub = codebooks.shape
    for q in prange(nq):
        drow = hd[q]
        prow = hp[q]
        qtab = np.empty((m, ksub), dtype=np.float32)
        _pq_query_table(queries[q], codebooks, qtab)
        table = np.empty((m, ksub), dtype=np.float32)
        if not l2:
            for s in range(m):
                for j in range(ksub):
                    table[s, j] = -qtab[s, j]
        for t in range(nprobe):
            lst = probes[q, t]
            if lst < 0:
                continue
            if l2:
                for s in range(m):
                    for j in range(ksub):
                        table[s, j] = precomputed[lst, s, j] - np.float32(2.0) * qtab[s, j]
                base = coarse[q, t]
            else:
                base = -_dot32(queries[q], centroids[lst])
            _pq_scan_list(
                table, base, codes, offsets[lst], offsets[lst + 1], ids, mask, use_mask,
                drow, prow,
            )  # fmt: skip


@njit(parallel=True, cache=True)
def merge_sorted(
    ad: np.ndarray, ai: np.ndarray, bd: np.ndarray, bi: np.ndarray, ascending: bool
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Merge two per-query sorted top-k lists (ids ``-1`` last) into the best ``k``.

    Ties of distance go to the smaller id, as in every selection of this module.
    """
    nq, k = ad.shape
    od = np.empty_like(ad)
    oi = np.empty_like(ai)
    for q in prange(nq):
        a = 0
        b = 0
        for t in range(k):
            take_a = True
            if ai[q, a] < 0:
                take_a = False
            elif bi[q, b] >= 0:
                da = ad[q, a] if ascending else -ad[q, a]
                db = bd[q, b] if ascending else -bd[q, b]
                take_a = da < db or (da == db and ai[q, a] < bi[q, b])
            if take_a:
                od[q, t] = ad[q, a]
                oi[q, t] = ai[q, a]
                a += 1
            else:
                od[q, t] = bd[q, b]
                oi[q, t] = bi[q, b]
                b += 1
    return od, oi


@njit(cache=True)
def kmeans_accumulate(
    x: np.ndarray, assign: np.ndarray, sums: np.ndarray, counts: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Add every row of ``x`` into the float64 sum of its cluster (fixed row order)."""
    dim = x.shape[1]
    for i in range(x.shape[0]):
        c = assign[i]
        counts[c] += 1
        for j in range(dim):
            sums[c, j] += x[i, j]


@njit(parallel=True, cache=True, fastmath=_FAST)
def _assign_codes_t(
    residuals: np.ndarray, books_t: np.ndarray, codes: np.ndarray
) -> None:  # pragma: no cover - compiled
    m, dsub, ksub = books_t.shape
    for i in prange(residuals.shape[0]):
        dist = np.empty(ksub, dtype=np.float32)
        for s in range(m):
            dist[:] = 0.0
            for c in range(dsub):
                v = residuals[i, s * dsub + c]
                for j in range(ksub):  # contiguous over the codewords: vectorised
                    diff = v - books_t[s, c, j]
                    dist[j] += diff * diff
            best = dist[0]
            arg = 0
            for j in range(1, ksub):
                if dist[j] < best:
                    best = dist[j]
                    arg = j
            codes[i, s] = arg


def assign_to_codes(residuals: np.ndarray, codebooks: np.ndarray, codes: np.ndarray) -> None:
    """Product quantization: the nearest codeword of every sub-vector (ties: lowest code),
    written into ``codes`` (n x m uint8)."""
    books_t = np.ascontiguousarray(np.transpose(codebooks, (0, 2, 1)))
    _assign_codes_t(residuals, books_t, codes)


@njit(parallel=True, cache=True)
def pq_update(
    residuals: np.ndarray, codes: np.ndarray, codebooks: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Lloyd update of every sub-quantizer at once: each codeword becomes the mean of its
    sub-vectors (fixed row order, float64 sums); a codeword with none keeps its value."""
    m, ksub, dsub = codebooks.shape
    for s in prange(m):
        sums = np.zeros((ksub, dsub), dtype=np.float64)
        counts = np.zeros(ksub, dtype=np.int64)
        for i in range(residuals.shape[0]):
            c = codes[i, s]
            counts[c] += 1
            for j in range(dsub):
                sums[c, j] += residuals[i, s * dsub + j]
        for c in range(ksub):
            if counts[c]:
                for j in range(dsub):
                    codebooks[s, c, j] = sums[c, j] / counts[c]


_blas_lib: list[Any] = []


def _scipy_openblas() -> Any:
    """The OpenBLAS that numba's ``np.dot`` calls (SciPy's), as a ctypes library, or None."""
    if not _blas_lib:
        lib = None
        try:
            import ctypes
            import glob
            from pathlib import Path

            import scipy

            folder = Path(scipy.__file__).resolve().parent.parent / "scipy.libs"
            for path in sorted(glob.glob(str(folder / "libscipy_openblas*.so*"))):
                cand = ctypes.CDLL(path)
                if hasattr(cand, "scipy_openblas_set_num_threads"):
                    lib = cand
                    break
        except Exception:  # another BLAS build: nothing to adjust
            lib = None
        _blas_lib.append(lib)
    return _blas_lib[0]


class blas_single_threaded:  # noqa: N801 - used as a context manager
    """Within the block, each BLAS call runs on its calling thread only.

    The fused kernels call ``sgemm`` from every numba thread on its own tile; a threaded
    BLAS would start its own threads under each of them (oversubscription). The previous
    thread count is restored on exit.
    """

    def __enter__(self) -> blas_single_threaded:
        lib = _scipy_openblas()
        self._prev = None
        if lib is not None:
            self._prev = int(lib.scipy_openblas_get_num_threads())
            lib.scipy_openblas_set_num_threads(1)
        return self

    def __exit__(self, *exc: object) -> None:
        lib = _scipy_openblas()
        if lib is not None and self._prev is not None:
            lib.scipy_openblas_set_num_threads(self._prev)


SERIAL_WORK = 1 << 22  # multiply-adds below which a search runs on the calling thread


class serial_when_small:  # noqa: N801 - used as a context manager
    """Within the block, numba kernels run on the calling thread alone when ``work`` (the
    search's multiply-adds, roughly) is below :data:`SERIAL_WORK`, or when the kernels'
    parallel loops have fewer than two ``tasks`` (one query: its lists are scanned by one
    thread anyway, so waking the others only costs their wake-up).

    Starting the thread pool costs a wake-up per parallel kernel: tens of microseconds on
    an idle machine, milliseconds where other processes share the cores (measured: 5.5
    ms per kernel after 5 ms idle, 2 threads, load 4), while a search of one query does
    about a millisecond of work in 4 to 5 kernels. Numba's thread count is per calling
    thread, so other threads are not affected; it is restored on exit.
    """

    def __init__(self, work: float, tasks: int = 2):
        self.serial = work < SERIAL_WORK or tasks < 2  # one task: nothing to share out
        self._set = False

    def __enter__(self) -> serial_when_small:
        # inside a serial block of this thread already: nothing to switch (numba's thread
        # calls take a lock each, tens of microseconds per search when nested)
        if self.serial and not getattr(_serial_state, "on", False):
            self._prev = numba.get_num_threads()
            if self._prev > 1:
                numba.set_num_threads(1)
                _serial_state.on = self._set = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._set:
            numba.set_num_threads(self._prev)
            _serial_state.on = self._set = False


_serial_state = threading.local()  # .on: a serial_when_small block runs on this thread


class dynamic_schedule:  # noqa: N801 - used as a context manager
    """Within the block, numba hands out the iterations of parallel loops one at a time
    (``set_parallel_chunksize(1)``) instead of in equal shares per thread: the queries of an
    IVF scan differ in cost by the sizes of the lists they probe (skewed data: by tens), and
    equal shares leave a thread idle while another finishes the expensive ones. Nothing to
    do inside a serial block."""

    def __enter__(self) -> dynamic_schedule:
        self._set = not getattr(_serial_state, "on", False)
        if self._set:
            self._prev = numba.get_parallel_chunksize()
            numba.set_parallel_chunksize(1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._set:
            numba.set_parallel_chunksize(self._prev)


def set_threads(n: int | None) -> None:
    """Local. Use ``n`` numba threads (None: leave as is)."""
    if n:
        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))


# ---------------------------------------------------------------------------------------------
# GPU kernels (numba.cuda); under NUMBA_ENABLE_CUDASIM=1 they run on NumPy arrays

cuda: Any = None  # placeholders: the generated kernel module imports numba.cuda and its types
float32: Any = None
int64: Any = None


def _clear_heap(hd: Any, hp: Any, k: int) -> None:
    """An empty heap: scores ``+inf``, positions ``-1``."""
    for t in range(k):
        hd[t] = math.inf
        hp[t] = -1


def _store_heap(out_d: Any, out_p: Any, i: int, s: int, hd: Any, hp: Any, k: int) -> None:
    """Heap ``(hd, hp)`` into candidate slot ``[i, s]``."""
    for t in range(k):
        out_d[i, s, t] = hd[t]
        out_p[i, s, t] = hp[t]


def _gpu_select(st, xnorm, base, ids, mask, use_mask, l2, seg, cand_d, cand_p):  # type: ignore
    """Thread (query i, segment s) keeps the top k of rows ``s*seg ..`` of ``st`` (nb x nq,
    so consecutive threads read consecutive addresses)."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    s = cuda.blockIdx.y
    nb, nq = st.shape
    k = cand_d.shape[2]
    if i >= nq:
        return
    hd = cuda.local.array(GPU_KMAX, float32)
    hp = cuda.local.array(GPU_KMAX, int64)
    _clear_heap(hd, hp, k)
    top = hd[0]
    top_id = _id_of(ids, hp[0])
    stop = min(nb, (s + 1) * seg)
    for j in range(s * seg, stop):
        v = st[j, i]
        sc = xnorm[base + j] - float32(2.0) * v if l2 else -v
        p = base + j
        if sc < top or (sc == top and ids[p] < top_id):
            if use_mask and mask[p] == 0:
                continue
            _replace_top(hd, hp, k, sc, p, ids)
            top = hd[0]
            top_id = _id_of(ids, hp[0])
    _store_heap(cand_d, cand_p, i, s, hd, hp, k)


def _gpu_merge(hd_run, hp_run, cand_d, cand_p, ids):  # type: ignore
    """One thread per query: fold the candidate heaps into the running heap."""
    i = cuda.grid(1)
    nq, nseg, k = cand_d.shape
    if i >= nq:
        return
    hd = cuda.local.array(GPU_KMAX, float32)
    hp = cuda.local.array(GPU_KMAX, int64)
    for t in range(k):
        hd[t] = hd_run[i, t]
        hp[t] = hp_run[i, t]
    for s in range(nseg):
        for t in range(k):
            p = cand_p[i, s, t]
            if p >= 0:
                _push(hd, hp, k, cand_d[i, s, t], p, ids)
    for t in range(k):
        hd_run[i, t] = hd[t]
        hp_run[i, t] = hp[t]


def _gpu_sort(hd_run, hp_run, ids):  # type: ignore
    """One thread per query: heap-sort the running heap ascending by ``(score, id)``."""
    i = cuda.grid(1)
    nq, k = hd_run.shape
    if i >= nq:
        return
    hd = cuda.local.array(GPU_KMAX, float32)
    hp = cuda.local.array(GPU_KMAX, int64)
    for t in range(k):
        hd[t] = hd_run[i, t]
        hp[t] = hp_run[i, t]
    _heapify(hd, hp, k, ids)
    _sort_heap(hd, hp, k, ids)
    for t in range(k):
        hd_run[i, t] = hd[t]
        hp_run[i, t] = hp[t]


def _gpu_scan_lists(
    queries, probes, offsets, vectors, norms, ids, mask, use_mask, l2, cand_d, cand_p
):  # type: ignore  # noqa: E501
    """IVF-Flat: thread (query i, probe t) scans one inverted list into a candidate heap."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y
    nq, nprobe = probes.shape
    k = cand_d.shape[2]
    if i >= nq:
        return
    hd = cuda.local.array(GPU_KMAX, float32)
    hp = cuda.local.array(GPU_KMAX, int64)
    _clear_heap(hd, hp, k)
    lst = probes[i, t]
    if lst >= 0:
        dim = queries.shape[1]
        for p in range(offsets[lst], offsets[lst + 1]):
            if use_mask and mask[p] == 0:
                continue
            acc = float32(0.0)
            for c in range(dim):
                acc += queries[i, c] * float32(vectors[p, c])
            sc = norms[p] - float32(2.0) * acc if l2 else -acc
            _push(hd, hp, k, sc, p, ids)
    _store_heap(cand_d, cand_p, i, t, hd, hp, k)


_gpu: dict[str, Any] = {}


def gpu_kernels() -> dict[str, Any]:
    """Compile (once per machine: a generated module cached on disk) and return the numba.cuda
    kernels: ``select``, ``merge``, ``sort``, ``scan_lists``."""
    if not _gpu:
        from hpc.jit import specialise

        helpers = [
            _id_of,
            _worse_at,
            _replace_top,
            _push,
            _sift,
            _heapify,
            _sort_heap,
            _clear_heap,
            _store_heap,
        ]
        kernels = [_gpu_select, _gpu_merge, _gpu_sort, _gpu_scan_lists]
        module = specialise("vector_heap", kernels, helpers, target="cuda")
        _gpu.update(
            select=module._gpu_select,
            merge=module._gpu_merge,
            sort=module._gpu_sort,
            scan_lists=module._gpu_scan_lists,
        )
    return _gpu
