"""A scan filter's bounds of numeric columns by constants, as one kernel pass per column.

TPC-H's scans mostly filter by ranges: ``l_shipdate >= DATE '1994-01-01' AND l_shipdate <
DATE '1995-01-01'``, ``l_discount BETWEEN 0.05 AND 0.07``, ``l_quantity < 24``. Evaluated as
expressions, each comparison writes a boolean array and each AND another. Here the terms
that compare one integer, date or float column with constants are folded into one closed
interval per column and tested in one pass that ANDs into the mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from .expressions import Frame, _days, column_key, evaluate

__all__ = ["Bounds", "split_bounds", "bounds_mask"]

_MIRROR = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}
_KINDS = ("int", "float", "date")


@dataclass
class Bounds:
    """The closed interval ``[lo, hi]`` a column must lie in (floats; integers for integer
    and date columns). A strict bound is the next value inward."""

    key: str
    integral: bool
    lo: float = -math.inf
    hi: float = math.inf

    def tighten(self, op: type, c: float) -> None:
        """AND ``column op c`` into the interval."""
        if isinstance(c, float) and math.isnan(c):  # no value compares true with NaN
            self.lo, self.hi = math.inf, -math.inf
            return
        if op in (exp.GT, exp.GTE, exp.EQ):
            self.lo = max(self.lo, self._above(c, strict=op is exp.GT))
        if op in (exp.LT, exp.LTE, exp.EQ):
            self.hi = min(self.hi, self._below(c, strict=op is exp.LT))

    def _above(self, c: float, strict: bool) -> float:
        if self.integral:
            if math.isinf(c):
                return c if c > 0 or not strict else -math.inf
            return math.floor(c) + 1 if strict else math.ceil(c)
        return math.nextafter(c, math.inf) if strict else c

    def _below(self, c: float, strict: bool) -> float:
        if self.integral:
            if math.isinf(c):
                return c if c < 0 or not strict else math.inf
            return math.ceil(c) - 1 if strict else math.floor(c)
        return math.nextafter(c, -math.inf) if strict else c


def split_bounds(terms: list[exp.Expression], frame: Frame) -> tuple[list[Bounds],
                                                                   list[exp.Expression]]:
    """The terms that bound one numeric column of ``frame`` by constants, folded into
    intervals per column, and the other terms (left to the expression evaluator)."""
    bounds: dict[str, Bounds] = {}
    rest = []
    for term in terms:
        parts = _as_bounds(term, frame)
        if parts is None:
            rest.append(term)
            continue
        for key, op, c in parts:
            col = frame.columns[key]
            b = bounds.setdefault(key, Bounds(key, col.kind != "float"))
            b.tighten(op, c)
    return list(bounds.values()), rest


def _as_bounds(term: exp.Expression, frame: Frame) -> list[tuple[str, type, float]] | None:
    """``[(column, op, constant)]`` when ``term`` is ``column op constant`` (either side) or
    ``column BETWEEN constant AND constant`` on an integer, date or float column."""
    if isinstance(term, exp.Between):
        if term.args.get("symmetric"):
            return None
        low = _bound_of(term.this, term.args.get("low"), frame)
        high = _bound_of(term.this, term.args.get("high"), frame)
        if low is None or high is None:
            return None
        return [(low[0], exp.GTE, low[1]), (high[0], exp.LTE, high[1])]
    op = type(term)
    if op not in _MIRROR:
        return None
    found = _bound_of(term.this, term.expression, frame)
    if found is None:
        found, op = _bound_of(term.expression, term.this, frame), _MIRROR[op]
    return None if found is None else [(found[0], op, found[1])]


def _bound_of(side: Any, other: Any, frame: Frame) -> tuple[str, float] | None:
    """``(column key, constant)`` when ``side`` is a numeric column of the frame and
    ``other`` a constant of a matching kind."""
    if not isinstance(side, exp.Column) or other is None or any(
            True for _ in other.find_all(exp.Column, exp.Subquery, exp.Select)):
        return None
    key = column_key(side)
    col = frame.columns.get(key)
    if (col is None or col.kind not in _KINDS or col.dictionary is not None
            or (col.kind == "int" and col.values.dtype == np.uint64)):
        return None  # uint64: bounds past int64 do not fit the kernel's integer bounds
    try:
        value = evaluate(other, Frame({}, frame.nrows))
    except Exception:  # noqa: BLE001 - not a constant we fold: the evaluator reports it
        return None
    if np.ndim(value.values) or value.valid is not None:
        return None
    if col.kind == "date":
        if value.kind == "text":
            try:
                return key, float(_days(value.text or "", other))
            except Exception:  # noqa: BLE001 - not a date: the evaluator names it
                return None
        return (key, float(value.values)) if value.kind == "date" else None
    if value.kind == "int":
        return key, int(value.values)
    return (key, float(value.values)) if value.kind == "float" else None


def bounds_mask(bounds: list[Bounds], frame: Frame) -> np.ndarray:
    """Rows of ``frame`` inside every interval (a null is outside), one pass per column."""
    from .scan_kernels import and_in_range

    mask = np.empty(frame.nrows, dtype=bool)
    for i, b in enumerate(bounds):
        col = frame.columns[b.key]
        if b.integral:
            info = np.iinfo(col.values.dtype)
            lo, hi = max(b.lo, info.min), min(b.hi, info.max)
            if lo > hi:
                mask[:] = False
                return mask
            and_in_range(col.values, np.int64(lo), np.int64(hi), mask, i == 0)
        else:
            and_in_range(col.values, np.float64(b.lo), np.float64(b.hi), mask, i == 0)
        if col.valid is not None:
            mask &= col.valid
    return mask
