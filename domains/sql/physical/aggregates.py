"""Aggregate functions over dense group ids, with DuckDB's semantics.

:func:`aggregate_column` computes one :class:`~..logical.expr.Aggregate` for every group:
the rows of group ``g`` are those with ``ids == g`` (``0 <= g < ngroups``). NULLs are
skipped; a group with no non-NULL value gives NULL (COUNT gives 0); DISTINCT keeps the
first row of each (group, value) pair. Columns follow the physical contract of
:mod:`.evaluate` (DECIMAL as scaled int64, DATE as int32 days, TIMESTAMP as int64
microseconds, VARCHAR as codes into a sorted dictionary).

Everything is whole-array NumPy (sorts, ``bincount``) or the numba kernels of
:mod:`hpc.domains.sql.aggregate` (per-group sums, minima and maxima); no Python loop runs over
rows or groups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hpc.domains.sql import strings
from hpc.domains.sql.aggregate import combine_ids, group_ids
from hpc.domains.sql.errors import SQLError, UnsupportedSQL
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.types import SQLType
from hpc.domains.sql.table import Column

from .device import kernels
from .device import xp as _xp
from .evaluate import (
    DAY_US,
    _encode,
    _make,
    _rescale,
    null_column,
    physical_kind,
    to_float,
)

__all__ = ["aggregate_column", "fusable", "group_moments", "variance_column"]


def aggregate_column(agg: E.Aggregate, ids: np.ndarray, ngroups: int, args: list[Column],
           arg_types: list[SQLType] | None = None,
           order: list[Column] | None = None, sums: Sums | None = None) -> Column:
    """The aggregate ``agg`` of every group: a column of ``ngroups`` rows.

    Parameters
    ----------
    agg : Aggregate
        The aggregate (its ``name``, ``distinct``, ``params`` and result ``type``).
    ids : array of int64
        The group of every input row, in ``[0, ngroups)``.
    ngroups : int
        The number of groups (groups without rows give NULL, or 0 for COUNT).
    args : list of Column
        The evaluated arguments ``agg.args`` (empty for ``count_star``).
    arg_types : list of SQLType, optional
        Their types (default: the arguments' own ``type``).
    order : list of Column, optional
        STRING_AGG's ORDER BY keys, evaluated: one column per ``agg.order`` term, whose
        direction and NULL placement come from that :class:`~..logical.expr.SortKey`.
        Without it STRING_AGG joins each group's strings in input order.
    sums : tuple of arrays, optional
        For a :func:`fusable` SUM or AVG: its argument's exact sums, counts and overflow
        flags per group, computed beforehand with other such aggregates' in one pass
        (:mod:`.sum_programs`); for ``count_star``: its counts are the rows per group.

    Raises
    ------
    SQLError
        A SUM that overflows 64 bits (HUGEINT and DECIMAL(38, s) sums are held in int64).
    """
    ids = _xp().asarray(ids, dtype=np.int64)
    if agg.name == "count_star":
        if sums is not None:  # the rows of each group, counted with fused sums
            return _make(sums[1], agg.type)
        return _make(np.bincount(ids, minlength=ngroups)[:ngroups], agg.type)
    if not args:
        raise SQLError(f"{agg.name} needs an argument")
    types = list(arg_types) if arg_types is not None else [a.type for a in agg.args]
    col, t = args[0], types[0]
    if t.kind == "null":  # a bare NULL argument: no value to aggregate
        if agg.name == "count":
            return _make(_xp().zeros(ngroups, np.int64), agg.type)
        return null_column(agg.type, ngroups)
    n = len(ids)
    mask = _xp().ones(n, dtype=bool) if col.valid is None else \
        _xp().asarray(col.valid, dtype=bool)
    if agg.distinct and agg.name not in ("min", "max", "bool_and", "bool_or", "first"):
        mask = mask & _first_of_pairs(ids, _key(col, t), mask)
    fn = _REDUCERS.get(agg.name)
    if fn is None:
        raise UnsupportedSQL(f"aggregate {agg.name}")
    if sums is not None:
        return fn(agg, ids, ngroups, col, t, mask, order, sums)
    return fn(agg, ids, ngroups, col, t, mask, order)


Sums = tuple[np.ndarray, np.ndarray, np.ndarray]


def fusable(agg: E.Aggregate) -> bool:
    """Whether ``agg`` is a SUM or AVG of exact integers (or DECIMAL) over every row of its
    group, whose sums :func:`.checked.group_sums_many` computes beside others'."""
    if agg.name not in ("sum", "avg") or agg.distinct or agg.filter is not None:
        return False
    if len(agg.args) != 1 or agg.args[0].type.kind not in ("integer", "decimal"):
        return False
    return agg.name == "avg" or agg.type.kind != "double"  # a DOUBLE SUM sums floats


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def _key(col: Column, t: SQLType) -> np.ndarray:
    """Values that are equal exactly when SQL calls them equal (floats: -0.0 is 0.0, NaNs
    are one value), as integers or floats that sort. Raw strings: the first entry holding
    each string (:func:`~hpc.domains.sql.strings.entry_ids`), no sorted dictionary."""
    v = col.values
    if col.raw:
        return strings.entry_ids(col.dictionary, v)
    if v.dtype.kind == "f":
        v = np.where(np.isnan(v), np.nan, v + 0.0)
        return v.view(np.int64)
    if v.dtype == np.bool_:
        return v.astype(np.int8)
    return v


def _first_of_pairs(ids: np.ndarray, key: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Rows that are the first (in input order) of their (group, key) pair among ``mask``
    (the pairs numbered by hashing, :func:`~hpc.domains.sql.aggregate.group_ids`)."""
    rows = np.flatnonzero(mask)
    out = np.zeros(len(ids), dtype=bool)
    if not len(rows):
        return out
    pairs = combine_ids([ids[rows], key[rows]], [None, None])
    _, _, first = group_ids(pairs)
    out[rows[first]] = True
    return out


def _counts(ids: np.ndarray, mask: np.ndarray, ngroups: int) -> np.ndarray:
    rows = ids if bool(mask.all()) else ids[mask]  # no NULLs: no copy of the ids
    return np.bincount(rows, minlength=ngroups)[:ngroups].astype(np.int64)


def _exact_sum(ids: np.ndarray, values: np.ndarray, mask: np.ndarray, ngroups: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sums, counts, overflowed) of int64 values per group, exactly, on the run's device
    (:func:`.checked.group_sums`; on the GPU the sums of the values' 32-bit halves, exact
    below 2**31 rows)."""
    return kernels().exact_group_sums(_xp(), ids, values, mask, ngroups)


def _group_minmax(ids: np.ndarray, values: np.ndarray, mask: np.ndarray, ngroups: int,
                  want_max: bool) -> tuple[np.ndarray, np.ndarray]:
    """(min or max, has a value) per group over the ``mask`` rows, on the run's device."""
    return kernels().group_minmax(_xp(), ids, values, mask, ngroups, want_max)


def _sorted_groups(ids: np.ndarray, mask: np.ndarray, key: np.ndarray, ngroups: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``mask`` rows sorted by (group, key): (rows, first position of each group in
    ``rows``, rows per group)."""
    rows = np.flatnonzero(mask)
    rows = rows[np.lexsort((key[rows], ids[rows]))]
    counts = np.bincount(ids[rows], minlength=ngroups)[:ngroups].astype(np.int64)
    starts = np.zeros(ngroups, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return rows, starts, counts


# ---------------------------------------------------------------------------------------
# The aggregates
# ---------------------------------------------------------------------------------------

_Reducer = Callable[[E.Aggregate, np.ndarray, int, Column, SQLType, np.ndarray, Any], Column]


def _count(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
           mask: np.ndarray, order: Any) -> Column:
    return _make(_counts(ids, mask, ngroups), agg.type)


def _sum(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
         mask: np.ndarray, order: Any, sums: Sums | None = None) -> Column:
    if t.kind == "double" or agg.type.kind == "double":
        x = to_float(col, t)
        x = np.where(mask, x, 0.0)
        total = np.bincount(ids, weights=x, minlength=ngroups)[:ngroups]
        counts = _counts(ids, mask, ngroups)
        return _make(total, agg.type, counts > 0)
    if t.kind not in ("integer", "decimal", "boolean"):
        raise SQLError(f"SUM of {t}")
    total, counts, overflowed = sums or _exact_sum(
        ids, col.values.astype(np.int64, copy=False), mask, ngroups)
    if bool(overflowed.any()):
        raise SQLError(f"overflow in SUM: the sum does not fit the 64 bits this engine holds "
                       f"{agg.type} in")
    present = counts > 0
    scale = t.scale if t.kind == "decimal" else 0
    if agg.type.kind == "decimal" and agg.type.scale != scale:
        total = _rescale(total, scale, agg.type.scale, present, agg.type, "SUM")
    return _make(total, agg.type, present)


def _avg(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
         mask: np.ndarray, order: Any, sums: Sums | None = None) -> Column:
    if t.kind in ("integer", "decimal"):  # the exact sums count the rows too
        total, counts, overflowed = sums or _exact_sum(
            ids, col.values.astype(np.int64, copy=False), mask, ngroups)
        present = counts > 0
        sums = total.astype(np.float64)
        if bool(overflowed.any()):  # DuckDB sums in 128 bits: fall back to float there
            fsum = np.bincount(ids, weights=np.where(mask, col.values, 0).astype(np.float64),
                               minlength=ngroups)[:ngroups]
            sums = np.where(overflowed, fsum, sums)
        if t.kind == "decimal":
            sums = sums / float(10 ** t.scale)
    else:
        counts = _counts(ids, mask, ngroups)
        present = counts > 0
        x = np.where(mask, to_float(col, t), 0.0)
        sums = np.bincount(ids, weights=x, minlength=ngroups)[:ngroups]
    with np.errstate(all="ignore"):
        mean = sums / np.where(present, counts, 1)
    return _make(mean, agg.type, present)


def _moments(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
             mask: np.ndarray, order: Any) -> Column:
    """Variance and standard deviation, sample and population, by two passes (the mean,
    then the squared deviations from it)."""
    counts, _, ss = group_moments(ids, ngroups, col, t, mask)
    return variance_column(agg.name, agg.type, counts, ss)


def group_moments(ids: np.ndarray, ngroups: int, col: Column, t: SQLType, mask: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group the count of the ``mask`` rows, their mean and their sum of squared
    deviations from it (two passes: no cancellation of sums of squares)."""
    x = np.where(mask, to_float(col, t), 0.0)
    counts = _counts(ids, mask, ngroups)
    with np.errstate(all="ignore"):
        mean = np.bincount(ids, weights=x, minlength=ngroups)[:ngroups] / np.maximum(counts, 1)
        dev = np.where(mask, x - mean[ids], 0.0) if len(ids) else x
        ss = np.bincount(ids, weights=dev * dev, minlength=ngroups)[:ngroups]
    return counts, mean, ss


def variance_column(name: str, t: SQLType, n: np.ndarray, m2: np.ndarray) -> Column:
    """VAR_SAMP / VAR_POP / STDDEV_SAMP / STDDEV_POP (``name``) from counts and sums of
    squared deviations: NULL without enough rows; one value (even NaN) varies by 0, as in
    DuckDB."""
    denom = n - 1 if name.endswith("_samp") else n
    ok = denom > 0
    with np.errstate(all="ignore"):
        var = np.where(n == 1, 0.0, m2 / np.where(ok, denom, 1))
    return _make(np.sqrt(var) if name.startswith("stddev") else var, t, ok)


def _minmax(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
            mask: np.ndarray, order: Any) -> Column:
    v = col.values
    want_max = agg.name == "max"
    if col.raw:  # strings compared by their bytes; the result stays raw (settled above)
        from hpc.domains.sql.scan_kernels import group_minmax_strings
        offsets, data = strings._buffers(strings._plain(col.dictionary.words))
        out, seen = group_minmax_strings(np.asarray(ids, np.int64), np.asarray(v),
                                         np.asarray(mask, bool), ngroups, offsets, data,
                                         want_max)
        return _make(out, agg.type, seen, col.dictionary)
    if v.dtype == np.bool_:
        out, seen = _group_minmax(ids, v.view(np.uint8), mask, ngroups, want_max)
        return _make(out.astype(bool), agg.type, seen)
    if v.dtype.kind == "f":  # DuckDB: NaN is above every number
        nan = np.isnan(v) & mask
        finite = mask & ~nan
        out, _ = _group_minmax(ids, np.where(finite, v, 0.0), finite, ngroups, want_max)
        nans = np.bincount(ids[nan], minlength=ngroups)[:ngroups]
        valid = _counts(ids, mask, ngroups)
        numbers = _counts(ids, finite, ngroups)
        out = np.where((nans > 0) & (want_max | (numbers == 0)), np.nan, out)
        return _make(out, agg.type, valid > 0)
    out, seen = _group_minmax(ids, v, mask, ngroups, want_max)
    return _make(out, agg.type, seen, col.dictionary if col.kind == "string" else None)


def _quantile(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
              mask: np.ndarray, order: Any) -> Column:
    """MEDIAN and QUANTILE_CONT: linear interpolation between the two values around
    ``q (n - 1)`` (DuckDB: ``lo + (hi - lo) d``, for DECIMAL on the scaled integers in
    DOUBLE and truncated; TIMESTAMPs rounded to the microsecond); MEDIAN of VARCHAR is the
    lower middle value."""
    q = float(agg.params[0]) if agg.name == "quantile_cont" else 0.5
    key = col.values  # NumPy sorts NaN after +inf, as DuckDB orders them
    rows, starts, counts = _sorted_groups(ids, mask, key, ngroups)
    present = counts > 0
    pos = q * np.maximum(counts - 1, 0)
    lo_off = np.floor(pos).astype(np.int64)
    hi_off = np.ceil(pos).astype(np.int64)
    frac = pos - lo_off
    if not len(rows):
        return null_column(agg.type, ngroups)
    last = len(rows) - 1
    lo_row = rows[np.minimum(starts + lo_off, last)]
    hi_row = rows[np.minimum(starts + hi_off, last)]
    v = col.values
    if t.kind == "varchar":
        return _make(v[lo_row], agg.type, present, col.dictionary)
    if agg.type.kind == "timestamp":
        us = v.astype(np.int64) * (DAY_US if t.kind == "date" else 1)
        lo, hi = us[lo_row], us[hi_row]
        step = (hi - lo).astype(np.float64) * frac
        step = np.trunc(step) + np.where(np.abs(step - np.trunc(step)) >= 0.5,
                                         np.sign(step), 0)
        return _make(lo + step.astype(np.int64), agg.type, present)
    if agg.type.kind == "decimal":  # DuckDB: lo + (hi - lo) d in DOUBLE, truncated
        lo, hi = v[lo_row].astype(np.int64), v[hi_row].astype(np.int64)
        r = np.trunc(lo.astype(np.float64) + (hi - lo).astype(np.float64) * frac)
        return _make(np.where(frac == 0, lo, r.astype(np.int64)), agg.type, present)
    x = to_float(col, t)
    lo, hi = x[lo_row], x[hi_row]
    with np.errstate(invalid="ignore"):
        r = np.where(frac == 0, lo, lo + (hi - lo) * frac)
    return _make(r, agg.type, present)


def _bool(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
          mask: np.ndarray, order: Any) -> Column:
    counts = _counts(ids, mask, ngroups)
    v = col.values.astype(bool)
    if agg.name == "bool_and":
        misses = _counts(ids, mask & ~v, ngroups)
        return _make(misses == 0, agg.type, counts > 0)
    hits = _counts(ids, mask & v, ngroups)
    return _make(hits > 0, agg.type, counts > 0)


def _first(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
           mask: np.ndarray, order: Any) -> Column:
    """The group's first row, NULL or not (DuckDB's FIRST; a decorrelated scalar subquery
    has one row per group)."""
    groups, first = np.unique(ids, return_index=True)
    rows = np.zeros(ngroups, dtype=np.int64)
    rows[groups] = first
    present = np.zeros(ngroups, dtype=bool)
    present[groups] = True
    valid = present & (mask[rows] if len(mask) else present)
    values = col.values[rows] if len(col.values) else np.zeros(ngroups, col.values.dtype)
    return _make(values, agg.type, valid, col.dictionary if col.kind == "string" else None)


def sort_rank(col: Column, ascending: bool, nulls_first: bool) -> np.ndarray:
    """An int64 key per row that sorts as the ORDER BY term does (NaN above +inf, as
    DuckDB; NULLs first or last)."""
    v = col.values
    if v.dtype.kind == "f":
        v = v + 0.0  # -0.0 ties with 0.0; np.unique puts the NaNs, as one value, last
    _, rank = np.unique(v, return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64) + 1
    if not ascending:
        rank = -rank
    if col.valid is not None:
        big = len(v) + 2
        rank = np.where(col.valid, rank, -big if nulls_first else big)
    return rank


def _string_agg(agg: E.Aggregate, ids: np.ndarray, ngroups: int, col: Column, t: SQLType,
                mask: np.ndarray, order: list[Column] | None) -> Column:
    """The group's strings joined by the separator (``params[0]``) in ORDER BY order (input
    order without one, and among ties)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sep = str(agg.params[0]) if agg.params else ","
    rows = np.flatnonzero(mask)
    keys: list[np.ndarray] = [rows]
    if agg.order:
        if order is None or len(order) != len(agg.order):
            raise SQLError("STRING_AGG with ORDER BY needs its evaluated sort keys")
        for key, c in reversed(list(zip(agg.order, order, strict=True))):
            keys.append(sort_rank(c, key.ascending, key.nulls_first)[rows])
    keys.append(ids[rows])
    rows = rows[np.lexsort(keys)]
    counts = np.bincount(ids[rows], minlength=ngroups)[:ngroups].astype(np.int64)
    offsets = np.zeros(ngroups + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    if col.dictionary is None or len(col.dictionary) == 0:
        words = pa.array([""] * len(rows), pa.string())
    else:
        words = strings.arrow(col.dictionary).take(pa.array(col.values[rows]))
    lists = pa.ListArray.from_arrays(pa.array(offsets), words)
    joined = pc.binary_join(lists, sep)
    out = _encode(joined)
    return Column(out.values, physical_kind(agg.type), out.dictionary,
                  None if bool((counts > 0).all()) else counts > 0)


_REDUCERS: dict[str, _Reducer] = {
    "count": _count, "sum": _sum, "avg": _avg, "min": _minmax, "max": _minmax,
    "stddev_samp": _moments, "stddev_pop": _moments, "var_samp": _moments,
    "var_pop": _moments, "median": _quantile, "quantile_cont": _quantile,
    "string_agg": _string_agg, "bool_and": _bool, "bool_or": _bool, "first": _first,
}
