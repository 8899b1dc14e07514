"""Column statistics: value ranges and bytes per value for the optimizer's estimates, from
Parquet footers (row-group statistics and column-chunk sizes, no data read) or, for tables
held in memory, from the values themselves, reduced over the ranks so that every rank plans
alike; and the row groups of a Parquet file whose min/max statistics allow a scan's
predicate to hold (zone maps), so that a scan of data clustered on a column reads only the
row groups a range or equality on it can match."""

from __future__ import annotations

import datetime
import decimal
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from hpc.backend import array_module
from hpc.collectives import allreduce

__all__ = ["parquet_range", "parquet_value_bytes", "memory_ranges", "groups_may_match",
           "ORDERED_KINDS", "Summary", "exact_summary"]

ORDERED_KINDS = ("int", "date", "float")  # kinds whose ranges are kept
_EPOCH = datetime.date(1970, 1, 1)


def _number(v: Any) -> float | None:
    """A statistic in the engine's units (dates as days since 1970-01-01), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float, decimal.Decimal)):
        return float(v)
    if isinstance(v, datetime.datetime):
        return None
    if isinstance(v, datetime.date):
        return float((v - _EPOCH).days)
    return None


def _metadata(files: Sequence[Path]) -> list[Any]:
    import pyarrow.parquet as pq

    return [pq.ParquetFile(f).metadata for f in files]


def parquet_range(files: Sequence[Path], column: str) -> tuple[float, float] | None:
    """``(min, max)`` of ``column`` over every row group of ``files``, from the footers'
    statistics; None where a row group has none (or the values are not numbers or dates)."""
    lo = hi = None
    for meta in _metadata(files):
        j = meta.schema.names.index(column)
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(j).statistics
            if stats is None or not stats.has_min_max:
                return None
            a, b = _number(stats.min), _number(stats.max)
            if a is None or b is None:
                return None
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
    return None if lo is None else (lo, hi)


def parquet_value_bytes(files: Sequence[Path], column: str) -> float | None:
    """Uncompressed bytes per row of ``column`` in ``files``: about a string's length plus
    its 4-byte length for plain strings, the index width plus a share of the dictionary for
    dictionary-encoded ones; None for an empty table."""
    size = rows = 0
    for meta in _metadata(files):
        j = meta.schema.names.index(column)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            size += group.column(j).total_uncompressed_size
            rows += group.num_rows
    return size / rows if rows else None


def memory_ranges(columns: dict[str, Any], comm: Any) -> dict[str, tuple[float, float]]:
    """Collective. ``{name: (min, max)}`` over every rank's values of the numeric and date
    columns of ``columns`` (:class:`~.table.Column` objects; NULL rows included as stored,
    NaN skipped); a column with no value on any rank is left out."""
    names = sorted(n for n, c in columns.items() if c.kind in ORDERED_KINDS)
    lo = np.full(len(names), np.inf)
    hi = np.full(len(names), -np.inf)
    for i, name in enumerate(names):
        values = columns[name].values
        if len(values):
            xp = array_module(values)
            with warnings.catch_warnings():  # all NaN: no range, not a warning
                warnings.simplefilter("ignore", RuntimeWarning)
                floats = values.dtype.kind == "f"
                lo[i] = float(xp.nanmin(values) if floats else values.min())
                hi[i] = float(xp.nanmax(values) if floats else values.max())
    lo = allreduce(lo, "min", comm)
    hi = allreduce(hi, "max", comm)
    return {n: (float(a), float(b)) for n, a, b in zip(names, lo, hi, strict=True)
            if np.isfinite(a) and np.isfinite(b)}


def _comparable(v: Any) -> float | str | None:
    """A literal's or a statistic's value as a number (dates in days) or a string."""
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            return None
    if isinstance(v, str):
        return v
    return _number(v)


_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _compare_allows(op: str, lo: Any, hi: Any, v: Any) -> bool:
    """Whether some value in ``[lo, hi]`` satisfies ``value op v``."""
    if op == "eq":
        return lo <= v <= hi
    if op == "ne":
        return not (lo == hi == v)
    if op == "lt":
        return lo < v
    if op == "le":
        return lo <= v
    if op == "gt":
        return hi > v
    return hi >= v  # ge


class _Zone(NamedTuple):
    """One column chunk's statistics: ``lo``/``hi`` None where it has no min/max (or they
    are not numbers, dates or strings), ``nulls`` None where the NULLs were not counted."""

    lo: Any
    hi: Any
    nulls: int | None
    rows: int


def _zones(meta: Any, j: int) -> list[_Zone | None]:
    """Column ``j``'s statistics in every row group (None: a chunk without any)."""
    out: list[_Zone | None] = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        stats = group.column(j).statistics
        if stats is None:
            out.append(None)
            continue
        lo = hi = None
        if stats.has_min_max:
            lo, hi = _comparable(stats.min), _comparable(stats.max)
            if lo is None or hi is None:
                lo = hi = None
        nulls = stats.null_count if stats.has_null_count else None
        out.append(_Zone(lo, hi, nulls, group.num_rows))
    return out


def _allows(e: Any, g: int, zones_of: Callable[[str], list[_Zone | None] | None]) -> bool:
    """Whether a row of row group ``g`` may satisfy ``e`` (an expression over the file's
    column names), judged by its columns' statistics; True wherever they cannot tell."""
    from .logical import expr as E

    if not isinstance(e, E.Call):
        return True
    if e.name == "and":
        return all(_allows(a, g, zones_of) for a in e.args)
    if e.name == "or":
        return any(_allows(a, g, zones_of) for a in e.args)
    args = e.args
    if e.name in _FLIP and len(args) == 2:
        op, (a, b) = e.name, args
        if isinstance(a, E.Literal):
            a, b, op = b, a, _FLIP[op]
        values = [b]
    elif e.name == "in" and args:
        op, a, values = "eq", args[0], list(args[1:])
    elif e.name in ("is_null", "is_not_null") and len(args) == 1:
        op, a, values = e.name, args[0], []
    else:
        return True
    if not isinstance(a, E.Ref) or a.type.kind == "double":
        return True  # (NaN is outside a double column's statistics but orders above all)
    zones = zones_of(a.name)
    zone = None if zones is None else zones[g]
    if zone is None:
        return True
    if op == "is_null":
        return zone.nulls is None or zone.nulls > 0
    if op == "is_not_null":
        return zone.nulls is None or zone.nulls < zone.rows
    if zone.lo is None:  # every value NULL (no comparison holds), or no min/max written
        return zone.nulls != zone.rows
    for b in values:
        if not isinstance(b, E.Literal):
            return True
        if b.value is None:
            continue  # a comparison with NULL holds for no row
        v = _comparable(b.value) if b.type.kind != "interval" else None
        if v is None or isinstance(v, str) != isinstance(zone.lo, str):
            return True
        if _compare_allows(op, zone.lo, zone.hi, v):
            return True
    return False


def groups_may_match(meta: Any, where: Any, cache: dict[str, Any] | None = None) -> list[int]:
    """The row groups of a Parquet file (its ``pyarrow`` ``FileMetaData``) in which a row may
    satisfy ``where`` (an expression over the file's column names: comparisons, IN lists
    and NULL tests of a column with constants under AND and OR), by the groups' min/max and
    NULL counts. Columns of doubles are not judged (NaN is outside their statistics).
    ``cache``: a dict kept with ``meta`` that keeps each column's statistics once read."""
    cache = {} if cache is None else cache
    index = {name: j for j, name in enumerate(meta.schema.names)}

    def zones_of(name: str) -> list[_Zone | None] | None:
        if name not in index:
            return None
        if name not in cache:
            cache[name] = _zones(meta, index[name])
        return cache[name]

    return [g for g in range(meta.num_row_groups) if _allows(where, g, zones_of)]


class Summary(NamedTuple):
    """A column's exact statistics over whole files: its rows, its NULLs and its least and
    greatest values as Parquet wrote them (``int``, ``decimal.Decimal`` or
    ``datetime.date``; None where every row is NULL)."""

    rows: int
    nulls: int
    lo: Any
    hi: Any


def exact_summary(meta: Any, column: str, extremes: bool = True) -> Summary | None:
    """``column``'s :class:`Summary` in a Parquet file (its ``pyarrow`` ``FileMetaData``),
    from the row groups' statistics alone; None where any row group lacks what it takes (a
    NULL count; with ``extremes``, a min and max where it holds a value, of integers,
    decimals or dates: a double's NaN is outside its statistics, and a string's may be
    truncated). Without ``extremes``, ``lo`` and ``hi`` are None."""
    names = meta.schema.names
    if column not in names:
        return None
    j = names.index(column)
    rows = nulls = 0
    lo = hi = None
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        n = group.num_rows
        rows += n
        if n == 0:
            continue
        stats = group.column(j).statistics
        if stats is None or not stats.has_null_count:
            return None
        nulls += stats.null_count
        if stats.null_count >= n or not extremes:
            continue
        if not stats.has_min_max:
            return None
        a, b = stats.min, stats.max
        exact = (int, decimal.Decimal, datetime.date)
        if not (isinstance(a, exact) and isinstance(b, exact)) or isinstance(
                a, (bool, datetime.datetime)) or isinstance(b, (bool, datetime.datetime)):
            return None
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    return Summary(rows, nulls, lo, hi)
