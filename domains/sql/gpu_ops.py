"""The GPU versions of the engine's hot operators: hash join, group ids and per-group reductions.

Each function takes the array module ``xp`` first (CuPy on a GPU; NumPy under the CUDA
simulator) and mirrors its CPU counterpart in :mod:`~hpc.domains.sql.join` and
:mod:`~hpc.domains.sql.aggregate`: the same arguments, checks, semantics and result dtypes.
The kernels are in :mod:`~hpc.domains.sql.cuda_kernels`; allocation, scans and the dense
numbering of groups use ``xp``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import cuda_kernels as K
from .aggregate import AGGREGATES
from .join import HOW

__all__ = ["hash_join", "group_ids", "combine_ids", "reduce_groups", "THREADS", "MAX_BLOCKS"]

THREADS = 256  # threads per block: 8 warps, up to 8 resident blocks per SM
MAX_BLOCKS = 2048  # H200: 132 SMs x 8 resident blocks ~ 1056; grid-stride loops do the rest
# dtypes the atomic min/max take natively; others are reduced as int32 / float32 and cast back
_ATOMIC_MINMAX = {np.dtype(t) for t in ("int32", "uint32", "int64", "uint64", "float32", "float64")}


def _blocks(n: int) -> int:
    return max(1, min(MAX_BLOCKS, -(-n // THREADS)))


def _capacity(n: int) -> int:
    """A power of two at least twice ``n`` (and at least 16)."""
    return 1 << max(4, (2 * n - 1).bit_length())


def _mask_or_dummy(xp: Any, valid: Any) -> tuple[Any, bool]:
    # kernels take an array either way; use_valid says whether to read it
    if valid is None:
        return xp.ones(1, dtype=xp.bool_), False
    return xp.asarray(valid, dtype=xp.bool_), True


def _table(xp: Any, n: int) -> Any:
    # key slots plus the slot of the key equal to the empty marker
    return xp.full(_capacity(n) + 1, K.EMPTY, dtype=xp.int64)


def hash_join(
    xp: Any,
    probe: Any,
    build: Any,
    how: str = "inner",
    probe_valid: Any | None = None,
    build_valid: Any | None = None,
) -> tuple[Any, Any]:
    """Local. Row index pairs ``(probe_rows, build_rows)`` of ``probe.key = build.key`` on the GPU.

    Parameters
    ----------
    xp : module
        The array module of the inputs: CuPy, or NumPy under the CUDA simulator.
    probe, build, how, probe_valid, build_valid
        As for the CPU :func:`~hpc.domains.sql.join.hash_join`, on the device.

    Returns
    -------
    (array, array)
        int64 row indices. Pairs are grouped by probe row, in probe row order; the build rows of
        one probe row come in no fixed order (they are chained by atomic exchange), so compare
        with the CPU :func:`~hpc.domains.sql.join.hash_join` as sorted pairs. ``semi`` and
        ``anti`` give the probe rows in ascending order, as on the CPU.

    Raises
    ------
    ValueError
        For an unknown ``how``.
    TypeError
        If a key array is not a 1-D integer array.

    Notes
    -----
    One thread walks the whole chain of its probe row, so a heavily duplicated build key makes
    its probe rows slow threads.
    """
    if how not in HOW:
        raise ValueError(f"how={how!r}: expected one of {HOW}")
    for name, keys in (("probe", probe), ("build", build)):
        if keys.ndim != 1 or not np.issubdtype(keys.dtype, np.integer):
            raise TypeError(f"{name} keys: need a 1-D integer array, got {keys.dtype} {keys.shape}")
    p = probe.astype(xp.int64, copy=False)
    b = build.astype(xp.int64, copy=False)
    n, m = len(p), len(b)
    table = _table(xp, m)
    head = xp.full(len(table), -1, dtype=xp.int64)
    nxt = xp.full(max(m, 1), -1, dtype=xp.int64)
    if m:
        bvalid, use_b = _mask_or_dummy(xp, build_valid)
        K.join_build[_blocks(m), THREADS](b, bvalid, use_b, table, head, nxt)
    counts = xp.zeros(n, dtype=xp.int64)
    hit = xp.full(n, -1, dtype=xp.int64)
    semi = how in ("semi", "anti")
    if n:
        pvalid, use_p = _mask_or_dummy(xp, probe_valid)
        K.join_count[_blocks(n), THREADS](
            p, pvalid, use_p, table, head, nxt, how == "left", semi, counts, hit
        )
    if semi:
        rows = xp.flatnonzero(counts > 0 if how == "semi" else counts == 0).astype(xp.int64)
        return rows, xp.full(len(rows), -1, dtype=xp.int64)
    offsets = xp.zeros(n + 1, dtype=xp.int64)
    if n:
        offsets[1:] = xp.cumsum(counts)
    total = int(offsets[-1])
    left = xp.empty(total, dtype=xp.int64)
    right = xp.empty(total, dtype=xp.int64)
    if total:
        K.join_fill[_blocks(n), THREADS](hit, nxt, offsets, left, right)
    return left, right


def group_ids(xp: Any, keys: Any) -> tuple[Any, int, Any]:
    """Local. Dense group ids of ``keys`` on the GPU, numbered in order of first appearance.

    Parameters
    ----------
    xp : module
        The array module of ``keys``: CuPy, or NumPy under the CUDA simulator.
    keys : 1-D array
        Integer, boolean or float keys; floats group by value (``-0.0`` with ``0.0``).

    Returns
    -------
    ids : int64 array
        The group of every row; group ``g`` is the ``g``-th distinct key met in row order.
    ngroups : int
        The number of groups.
    first : int64 array
        The first row of each group (to read the group's key columns), ascending.

    Notes
    -----
    The same result as the CPU :func:`~hpc.domains.sql.aggregate.group_ids`: the atomic min of
    row indices per slot makes the numbering independent of the thread schedule.
    """
    k = xp.asarray(keys)
    if k.dtype.kind == "f":  # by value: bits of the float64, -0.0 as 0.0
        k = (k.astype(xp.float64) + 0.0).view(xp.int64)
    k = k.astype(xp.int64, copy=False)
    n = len(k)
    if n == 0:
        return xp.zeros(0, xp.int64), 0, xp.zeros(0, xp.int64)
    table = _table(xp, n)
    first = xp.full(len(table), n, dtype=xp.int64)
    row_slot = xp.empty(n, dtype=xp.int64)
    K.group_insert[_blocks(n), THREADS](k, table, first, row_slot)
    used = xp.flatnonzero(first < n)
    firsts = first[used]
    order = xp.argsort(firsts)
    ngroups = len(used)
    slot_id = xp.full(len(table), -1, dtype=xp.int64)
    slot_id[used[order]] = xp.arange(ngroups, dtype=xp.int64)
    return slot_id[row_slot], ngroups, firsts[order]


def combine_ids(xp: Any, columns: list[Any], valids: list[Any | None]) -> Any:
    """Local. One int64 key per row for several key columns, on the GPU: the CPU
    :func:`~hpc.domains.sql.aggregate.combine_ids` with this module's :func:`group_ids`."""
    from .aggregate import combine_ids as combine

    return combine(columns, valids, lambda keys: group_ids(xp, keys))


def _counts(xp: Any, ids: Any, ngroups: int, valid: Any | None) -> Any:
    counts = xp.zeros(ngroups, dtype=xp.int64)
    if len(ids):
        ok, use = _mask_or_dummy(xp, valid)
        if ngroups <= K.SMALL_GROUPS:
            K.small_sum_count_i64[_blocks(len(ids)), THREADS](ids, ids, ok, use, False, counts,
                                                              counts)
        else:
            K.count_rows[_blocks(len(ids)), THREADS](ids, ok, use, counts)
    return counts


def reduce_groups(
    xp: Any, op: str, ids: Any, ngroups: int, values: Any | None, valid: Any | None
) -> tuple[Any, Any | None]:
    """Local. ``(result, result_valid)`` of aggregate ``op`` per group, on the GPU.

    Parameters
    ----------
    xp : module
        The array module of the inputs: CuPy, or NumPy under the CUDA simulator.
    op : {"sum", "count", "min", "max", "avg", "count_distinct"}
        The aggregate.
    ids : int array
        The group of every row, in ``[0, ngroups)``.
    ngroups : int
        The number of groups.
    values : 1-D array or None
        The value column (``count`` without one counts rows).
    valid : bool array or None
        Its validity mask.

    Returns
    -------
    result : array
        int64 sums of integer or boolean values, float64 sums otherwise; float64 averages;
        int64 counts and distinct counts; min and max in the values' dtype (0 for an empty
        group).
    result_valid : bool array or None
        False where a group has no non-null value (``sum``, ``avg``, ``min``, ``max``); None
        for the counts, which are never null.

    Raises
    ------
    ValueError
        For an unknown aggregate, or one other than ``count`` without a value column.

    Notes
    -----
    SQL semantics as the CPU :func:`~hpc.domains.sql.aggregate.reduce_groups`: nulls are
    skipped. Float sums and averages are summed by atomic adds in the order the threads
    arrive, so they agree with the CPU to rounding only; everything else is equal. NaN values
    of ``min``/``max`` follow the device's atomic min/max rather than the CPU's row order.
    """
    if op not in AGGREGATES:
        raise ValueError(f"aggregate {op!r}: expected one of {AGGREGATES}")
    g = xp.asarray(ids).astype(xp.int64, copy=False)
    n = len(g)
    if op == "count":
        return _counts(xp, g, ngroups, None if values is None else valid), None
    if values is None:
        raise ValueError(f"aggregate {op!r} needs a value column")
    v = xp.asarray(values)
    ok, use = _mask_or_dummy(xp, valid)
    if op in ("sum", "avg"):
        integer = v.dtype.kind in "iub"
        acc = xp.int64 if integer and op == "sum" else xp.float64
        total = xp.zeros(ngroups, dtype=acc)
        counts = xp.zeros(ngroups, dtype=xp.int64)
        if n:
            vals = v.astype(acc, copy=False)
            if ngroups <= K.SMALL_GROUPS:
                small = K.small_sum_count_i64 if acc is xp.int64 else K.small_sum_count_f64
                small[_blocks(n), THREADS](g, vals, ok, use, True, total, counts)
            else:
                K.sum_count[_blocks(n), THREADS](g, vals, ok, use, total, counts)
        present = counts > 0
        if op == "avg":
            return xp.where(present, total / xp.maximum(counts, 1), 0.0), present
        return total, present
    if op in ("min", "max"):
        dtype = v.dtype
        work = (
            dtype
            if dtype in _ATOMIC_MINMAX
            else np.dtype(np.float32 if dtype.kind == "f" else np.int32)
        )
        if work.kind == "f":
            start = np.inf if op == "min" else -np.inf
        else:
            info = np.iinfo(work)
            start = info.max if op == "min" else info.min
        out = xp.full(ngroups, start, dtype=work)
        seen = xp.zeros(ngroups, dtype=xp.uint8)
        if n:
            kern = K.min_rows if op == "min" else K.max_rows
            kern[_blocks(n), THREADS](g, v.astype(work, copy=False), ok, use, out, seen)
        present = seen.astype(xp.bool_)
        return xp.where(present, out, 0).astype(dtype, copy=False), present
    # count distinct: distinct (group, value) pairs among the non-null rows, counted per group
    rows = xp.flatnonzero(ok) if use else None
    gk = g if rows is None else g[rows]
    vk = v if rows is None else v[rows]
    vid, nv, _ = group_ids(xp, vk)
    _, _, first = group_ids(xp, gk * max(nv, 1) + vid)
    return _counts(xp, gk[first], ngroups, None), None
