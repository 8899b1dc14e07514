"""Numba kernels of the window operator: aggregates over arbitrary frames by a segment tree
(``O(n log n)`` for any mix of frame sizes, as DuckDB's segment trees), and RANGE frame
bounds by binary search within each row's partition. Compiled once and cached on disk."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["frame_reduce", "frame_moments", "range_bounds", "SUM", "MIN", "MAX"]

SUM, MIN, MAX = 0, 1, 2


@njit(cache=True, nogil=True, inline="always")
def _combine(a, b, op):  # type: ignore[no-untyped-def]
    if op == SUM:
        return a + b
    if op == MIN:
        return a if a <= b else b
    return a if a >= b else b


@njit(cache=True, nogil=True)
def frame_reduce(values, present, starts, ends, op, identity):  # type: ignore[no-untyped-def]
    """``op`` (SUM, MIN or MAX) of ``values[present]`` over every frame
    ``[starts[r], ends[r])``; ``identity`` where a frame holds no present value."""
    n = len(values)
    size = 1
    while size < n:
        size *= 2
    tree = np.full(2 * size, identity, values.dtype)
    for i in range(n):
        if present[i]:
            tree[size + i] = values[i]
    for i in range(size - 1, 0, -1):
        tree[i] = _combine(tree[2 * i], tree[2 * i + 1], op)
    out = np.empty(len(starts), values.dtype)
    for r in range(len(starts)):
        lo = starts[r] + size
        hi = ends[r] + size
        left = identity
        right = identity
        while lo < hi:  # left and right parts kept apart: sums add in row order
            if lo & 1:
                left = _combine(left, tree[lo], op)
                lo += 1
            if hi & 1:
                hi -= 1
                right = _combine(tree[hi], right, op)
            lo >>= 1
            hi >>= 1
        out[r] = _combine(left, right, op)
    return out


@njit(cache=True, nogil=True, inline="always")
def _merge(na, ma, qa, nb, mb, qb):  # type: ignore[no-untyped-def]
    """Count, mean and sum of squared deviations of two sets combined (Chan et al.)."""
    n = na + nb
    if nb == 0:
        return na, ma, qa
    if na == 0:
        return nb, mb, qb
    delta = mb - ma
    return n, ma + delta * nb / n, qa + qb + delta * delta * na * nb / n


@njit(cache=True, nogil=True)
def frame_moments(values, present, starts, ends):  # type: ignore[no-untyped-def]
    """Count, mean and sum of squared deviations from the mean of ``values[present]`` over
    every frame ``[starts[r], ends[r])`` (variances without the cancellation of sums of
    squares)."""
    n = len(values)
    size = 1
    while size < n:
        size *= 2
    cnt = np.zeros(2 * size, np.float64)
    mean = np.zeros(2 * size, np.float64)
    m2 = np.zeros(2 * size, np.float64)
    for i in range(n):
        if present[i]:
            cnt[size + i] = 1.0
            mean[size + i] = values[i]
    for i in range(size - 1, 0, -1):
        cnt[i], mean[i], m2[i] = _merge(cnt[2 * i], mean[2 * i], m2[2 * i],
                                        cnt[2 * i + 1], mean[2 * i + 1], m2[2 * i + 1])
    out_n = np.zeros(len(starts), np.float64)
    out_mean = np.zeros(len(starts), np.float64)
    out_m2 = np.zeros(len(starts), np.float64)
    for r in range(len(starts)):
        lo = starts[r] + size
        hi = ends[r] + size
        an, am, aq = 0.0, 0.0, 0.0
        while lo < hi:
            if lo & 1:
                an, am, aq = _merge(an, am, aq, cnt[lo], mean[lo], m2[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                an, am, aq = _merge(an, am, aq, cnt[hi], mean[hi], m2[hi])
            lo >>= 1
            hi >>= 1
        out_n[r] = an
        out_mean[r] = am
        out_m2[r] = aq
    return out_n, out_mean, out_m2


@njit(cache=True, nogil=True)
def range_bounds(values, lo, hi, targets, ascending, strict):  # type: ignore[no-untyped-def]
    """For every row ``r``, the first position ``j`` in ``[lo[r], hi[r])`` (``values``
    sorted there, ascending or descending) whose value is at or past ``targets[r]`` in that
    order (``strict``: past it); ``hi[r]`` when there is none."""
    out = np.empty(len(targets), np.int64)
    for r in range(len(targets)):
        a = lo[r]
        b = hi[r]
        t = targets[r]
        while a < b:
            mid = (a + b) >> 1
            v = values[mid]
            if ascending:
                before = v <= t if strict else v < t
            else:
                before = v >= t if strict else v > t
            if before:
                a = mid + 1
            else:
                b = mid
        out[r] = a
    return out
