"""The window operator's frame kernels on the device, as array programs on ``xp`` (CuPy; NumPy
under the CUDA simulator): the GPU entries beside the numba CPU kernels of
:mod:`.window_kernels` in :data:`hpc.domains.sql.ops.OPS`, same arguments, same results.

- :func:`frame_reduce` and :func:`frame_moments`: the CPU kernels' segment tree, built level
  by level and queried for every row at once, one tree level per step (``O(n log n)`` work
  in ``log n`` steps); each row combines the same nodes in the same order as on the CPU, so
  float sums are the CPU's bit for bit.
- :func:`range_bounds`: one binary search for all rows (``searchsorted``): each position's
  value replaced by its rank among the distinct values, offset by its partition, makes one
  ascending key over all partitions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .window_kernels import MIN, SUM

__all__ = ["frame_reduce", "frame_moments", "range_bounds"]


def _combine(xp: Any, a: Any, b: Any, op: int) -> Any:
    if op == SUM:
        return a + b
    if op == MIN:  # ``a`` where it ties, as the CPU kernel's ``a if a <= b else b``
        return xp.where(a <= b, a, b)
    return xp.where(a >= b, a, b)


def _tree_size(n: int) -> int:
    """The leaf count of the CPU kernels' tree: the least power of two at least ``n``."""
    size = 1
    while size < n:
        size *= 2
    return size


def frame_reduce(xp: Any, values: Any, present: Any, starts: Any, ends: Any, op: int,
                 identity: Any) -> Any:
    """``op`` (SUM, MIN or MAX) of ``values[present]`` over every frame
    ``[starts[r], ends[r])``; ``identity`` where a frame holds no present value (see
    :func:`.window_kernels.frame_reduce`)."""
    n, m = len(values), len(starts)
    size = _tree_size(n)
    tree = xp.full(2 * size, identity, dtype=values.dtype)
    tree[size:size + n] = xp.where(present, values, values.dtype.type(identity))
    h = size // 2
    while h >= 1:  # the nodes [h, 2h) from their children [2h, 4h)
        tree[h:2 * h] = _combine(xp, tree[2 * h:4 * h:2], tree[2 * h + 1:4 * h:2], op)
        h //= 2
    lo = starts.astype(np.int64) + size
    hi = ends.astype(np.int64) + size
    left = xp.full(m, identity, dtype=values.dtype)
    right = xp.full(m, identity, dtype=values.dtype)
    last = 2 * size - 1  # (rows not taking a node read a valid one, unused)
    for _ in range(size.bit_length()):  # the CPU's ``while lo < hi``, a level per step
        active = lo < hi
        take = active & ((lo & 1) == 1)
        left = xp.where(take, _combine(xp, left, tree[xp.minimum(lo, last)], op), left)
        lo = lo + take
        take = active & ((hi & 1) == 1)
        hi = hi - take
        right = xp.where(take, _combine(xp, tree[xp.minimum(hi, last)], right, op), right)
        lo >>= 1
        hi >>= 1
    return _combine(xp, left, right, op)


def _merge(xp: Any, a: tuple[Any, Any, Any], b: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    """Count, mean and sum of squared deviations of two sets combined (Chan et al.), as the
    CPU kernel's ``_merge``: ``a`` where ``b`` is empty, else ``b`` where ``a`` is."""
    na, ma, qa = a
    nb, mb, qb = b
    n = na + nb
    with np.errstate(all="ignore"):
        delta = mb - ma
        mean = ma + delta * nb / n
        m2 = qa + qb + delta * delta * na * nb / n
    keep_a, keep_b = nb == 0, (na == 0) & (nb != 0)
    return (xp.where(keep_a, na, xp.where(keep_b, nb, n)),
            xp.where(keep_a, ma, xp.where(keep_b, mb, mean)),
            xp.where(keep_a, qa, xp.where(keep_b, qb, m2)))


def frame_moments(xp: Any, values: Any, present: Any, starts: Any, ends: Any
                  ) -> tuple[Any, Any, Any]:
    """Count, mean and sum of squared deviations from the mean of ``values[present]`` over
    every frame ``[starts[r], ends[r])`` (see :func:`.window_kernels.frame_moments`)."""
    n, m = len(values), len(starts)
    size = _tree_size(n)
    cnt, mean, m2 = (xp.zeros(2 * size, np.float64) for _ in range(3))
    cnt[size:size + n] = present.astype(np.float64)
    mean[size:size + n] = xp.where(present, values, 0.0)
    h = size // 2
    while h >= 1:
        left = (cnt[2 * h:4 * h:2], mean[2 * h:4 * h:2], m2[2 * h:4 * h:2])
        right = (cnt[2 * h + 1:4 * h:2], mean[2 * h + 1:4 * h:2], m2[2 * h + 1:4 * h:2])
        cnt[h:2 * h], mean[h:2 * h], m2[h:2 * h] = _merge(xp, left, right)
        h //= 2
    lo = starts.astype(np.int64) + size
    hi = ends.astype(np.int64) + size
    acc = tuple(xp.zeros(m, np.float64) for _ in range(3))
    last = 2 * size - 1  # (rows not taking a node read a valid one, unused)
    for _ in range(size.bit_length()):  # one accumulator, the left node first, as the CPU
        active = lo < hi
        take = active & ((lo & 1) == 1)
        at = xp.minimum(lo, last)
        merged = _merge(xp, acc, (cnt[at], mean[at], m2[at]))
        acc = tuple(xp.where(take, new, old) for new, old in zip(merged, acc, strict=True))
        lo = lo + take
        take = active & ((hi & 1) == 1)
        hi = hi - take
        at = xp.minimum(hi, last)
        merged = _merge(xp, acc, (cnt[at], mean[at], m2[at]))
        acc = tuple(xp.where(take, new, old) for new, old in zip(merged, acc, strict=True))
        lo >>= 1
        hi >>= 1
    return acc


def range_bounds(xp: Any, values: Any, lo: Any, hi: Any, targets: Any, ascending: bool,
                 strict: bool) -> Any:
    """For every row ``r``, the first position ``j`` in ``[lo[r], hi[r])`` whose value is at
    or past ``targets[r]`` in the order of ``values`` there (ascending or descending;
    ``strict``: past it); ``hi[r]`` when there is none (see
    :func:`.window_kernels.range_bounds`).

    ``[lo, hi)`` is the row's partition's run of sorted values, the same for every row of
    a partition, and the runs ascend with the positions. A position's key is its run's start
    and then its value's rank among the distinct values (reversed when descending), below
    every rank before its run (a partition's leading NULLs) and above after it: ascending
    over all positions, so one search finds every row's bound in its own run."""
    n = len(values)
    if not len(targets):
        return xp.zeros(0, np.int64)
    distinct = xp.unique(values)
    u = len(distinct)
    rank = xp.searchsorted(distinct, values, side="left").astype(np.int64)
    # a target's first rank at or past it (ranks counted from 1: 0 and u + 1 lie outside)
    if ascending:
        first = xp.searchsorted(distinct, targets, side="right" if strict else "left") + 1
    else:
        rank = u - 1 - rank
        first = u - xp.searchsorted(distinct, targets, side="left" if strict else "right") + 1
    position = xp.arange(n, dtype=np.int64)
    ranked = xp.where(position < lo, 0, xp.where(position < hi, rank + 1, u + 1))
    width = u + 2
    keys = lo.astype(np.int64) * width + ranked
    found = xp.searchsorted(keys, lo.astype(np.int64) * width + first.astype(np.int64),
                            side="left")
    return xp.minimum(xp.maximum(found, lo), hi).astype(np.int64)
