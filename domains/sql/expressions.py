"""Vectorised evaluation of (qualified) sqlglot expressions over a frame of columns.

Every operator works on whole columns (NumPy), never row by row. String predicates (``=``,
``<``, ``IN``, ``LIKE``, ``SUBSTRING``) run on the column's small sorted dictionary and map
back through the int32 codes. Nulls follow SQL: arithmetic and comparisons with a null are
null, ``AND``/``OR`` use three-valued logic, a filter keeps rows whose predicate is true.
``date +/- INTERVAL`` and other constant sub-expressions fold to scalars.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
from sqlglot import exp
from sqlglot.generator import Generator

from hpc.backend import array_module, is_device_array

from . import dates, strings
from .errors import SQLError, UnsupportedSQL, describe, position
from .fused_arith import fused_arithmetic
from .table import Column, gather_rows

__all__ = ["Frame", "InSet", "Value", "evaluate", "column_key", "to_column", "predicate_mask",
           "membership"]

_EPOCH = dt.date(1970, 1, 1)


@dataclass
class Frame:
    """Columns of equal length ``nrows``, named ``"alias.column"`` (or internal names)."""

    columns: dict[str, Column]
    nrows: int
    #: values of compound expressions by their SQL text, when set: an expression several
    #: aggregates share (TPC-H Q1's ``l_extendedprice * (1 - l_discount)``) runs once
    memo: dict[str, Any] | None = None

    @property
    def xp(self) -> Any:
        """The array module of the columns: NumPy, or CuPy on the GPU backend."""
        for c in self.columns.values():
            return c.xp
        return np


@dataclass
class Value:
    """An evaluated expression: ``values`` is an array of ``nrows`` or a 0-d scalar;
    ``kind`` as :class:`Column` plus ``"text"`` for a string constant (its ``text``)."""

    values: np.ndarray
    kind: str
    dictionary: np.ndarray | None = None
    valid: np.ndarray | None = None
    text: str | None = None

    @property
    def scalar(self) -> bool:
        return np.ndim(self.values) == 0


class InSet(exp.Expression):
    """``this`` is in a set of values a subquery computed (``meta["values"]``: its distinct
    non-null values, strings for a string column, else numbers or int32 days).

    IN semantics (SQL's three-valued logic): ``meta["has_null"]`` says the set also holds a
    NULL and ``meta["empty"]`` that it holds no row at all; ``x IN <empty>`` is false even for
    a null ``x``, otherwise a null ``x``, or a value not found in a set holding a NULL, gives
    null (so ``NOT IN`` keeps neither). With ``meta["exists"]`` (a semi join from EXISTS) a
    null ``this`` gives false and a miss is false."""

    arg_types = {"this": True}


def _in_set_sql(self: Generator, node: InSet) -> str:  # how EXPLAIN and errors print it
    return f"{self.sql(node, 'this')} IN (<{len(node.meta.get('values', ()))} values>)"


def _register_sql() -> None:
    """Teach sqlglot's generators (the base and DuckDB's) to print InSet."""
    from sqlglot import generator
    from sqlglot.dialects.duckdb import DuckDB

    for gen in (Generator, DuckDB.Generator):
        gen.TRANSFORMS = {**gen.TRANSFORMS, InSet: _in_set_sql}
        getattr(generator, "_DISPATCH_CACHE", {}).pop(gen, None)


_register_sql()


def _in_set(node: InSet, frame: Frame) -> Value:
    v = evaluate(node.this, frame)
    values = node.meta["values"]
    if v.kind == "string":
        hit = _lookup(strings.isin(v.dictionary, values), v.values)
    elif values.dtype.kind in "US":
        raise SQLError(f"type mismatch: {v.kind} IN a subquery of strings: {node.this.sql()}")
    elif is_device_array(v.values):
        hit = array_module(v.values).isin(v.values, array_module(v.values).asarray(values))
    elif values.dtype.kind in "iub" and v.values.dtype.kind in "iub" and not v.scalar:
        from .join import matched  # a semi join: hashing beats np.isin's sort on big sets

        hit = matched(v.values, values)
    else:
        hit = np.isin(v.values, values)
    if node.meta.get("exists"):
        return Value(hit if v.valid is None else hit & v.valid, "bool")
    return membership(hit, v.valid, bool(node.meta.get("has_null")),
                      bool(node.meta.get("empty", False)))


def membership(hit: Any, valid: Any, has_null: bool, empty: bool) -> Value:
    """``x IN (set)`` under three-valued logic from ``hit`` (``x`` equals a non-null member;
    read only where ``x`` is ``valid``, None: everywhere): false for an ``empty`` set (a null
    ``x`` included), true on a hit, null for a null ``x`` or, when the set ``has_null``, a
    miss (``x = NULL`` is unknown), else false."""
    if empty:
        xp = array_module(hit)
        return Value(xp.zeros(np.shape(hit), bool) if np.ndim(hit) else np.bool_(False), "bool")
    known_hit = hit if valid is None else hit & valid
    if has_null:  # only a hit is known: every miss might equal the NULL
        return Value(known_hit, "bool", valid=known_hit)
    return Value(known_hit, "bool", valid=valid)


def column_key(node: exp.Column) -> str:
    """The frame name of a column reference: ``"alias.column"``, or the bare name."""
    return f"{node.table}.{node.name}" if node.table else node.name


def to_column(v: Value, nrows: int, xp: Any = np) -> Column:
    """A full-length column from a value (scalars broadcast on ``xp``'s device; text
    constants get a dictionary)."""
    if v.kind == "text":
        return Column(xp.zeros(nrows, np.int32), "string", np.asarray([v.text], dtype=object))
    values = xp.full(nrows, v.values, dtype=v.values.dtype) if v.scalar else v.values
    valid = v.valid
    if valid is not None and np.ndim(valid) == 0:
        valid = None if bool(valid) else xp.zeros(nrows, bool)
    return Column(values, v.kind, v.dictionary, valid)


def predicate_mask(v: Value, nrows: int, xp: Any = np) -> Any:
    """Rows where a boolean value is true (null counts as false), as a full-length mask."""
    if v.kind != "bool":
        raise SQLError(f"a filter must be boolean, got a {v.kind} expression")
    mask = v.values if v.valid is None else v.values & v.valid
    if np.ndim(mask) == 0:
        return xp.full(nrows, bool(mask), dtype=bool)
    return mask


# ---------------------------------------------------------------------------------------------
def evaluate(node: exp.Expression, frame: Frame) -> Value:
    """Evaluate ``node`` over ``frame``.

    Raises
    ------
    UnsupportedSQL
        For a construct this engine does not evaluate (named, with its position).
    SQLError
        For a type mismatch (e.g. a string compared with a number) or an unknown column.
    """
    handler = _HANDLERS.get(type(node))
    if handler is None:
        raise UnsupportedSQL(f"unsupported expression {describe(node)}")
    key = None
    if frame.memo is not None and isinstance(node, _MEMO):
        key = node.sql()
        if key in frame.memo:
            return frame.memo[key]
    out = handler(node, frame)
    if key is not None:
        frame.memo[key] = out
    if node.args.get("negate"):  # sqlglot's NOT LIKE: Like(negate=True)
        out = Value(~out.values, "bool", valid=out.valid)
    return out


_MEMO = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Case, exp.Cast)  # worth keeping


def _column(node: exp.Column, frame: Frame) -> Value:
    key = column_key(node)
    col = frame.columns.get(key)
    if col is None:
        raise SQLError(f"unknown column {node.sql()}{position(node)}")
    return Value(col.values, col.kind, col.dictionary, col.valid)


def _literal(node: exp.Literal, frame: Frame) -> Value:
    if node.is_string:
        return Value(np.int64(0), "text", text=node.this)
    text = node.this
    if re.fullmatch(r"[+-]?\d+", text):
        return Value(np.int64(int(text)), "int")
    return Value(np.float64(float(text)), "float")


def _null(node: exp.Null, frame: Frame) -> Value:
    return Value(np.int64(0), "int", valid=np.bool_(False))


def _boolean(node: exp.Boolean, frame: Frame) -> Value:
    return Value(np.bool_(bool(node.this)), "bool")


def _days(text: str, node: exp.Expression) -> int:
    try:
        return (dt.date.fromisoformat(text.strip()) - _EPOCH).days
    except ValueError:
        raise SQLError(f"not a date: {text!r} in {describe(node)}") from None


def _cast(node: exp.Cast, frame: Frame) -> Value:
    to = node.to.this
    inner = evaluate(node.this, frame)
    if to == exp.DataType.Type.DATE:
        if inner.kind == "text":
            return Value(np.int32(_days(inner.text or "", node)), "date")
        if inner.kind == "date":
            return inner
    if to in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL):
        if inner.kind in ("int", "float", "bool"):
            return Value(_astype(inner.values, np.float64), "float", valid=inner.valid)
    if to in (exp.DataType.Type.INT, exp.DataType.Type.BIGINT) and inner.kind in ("int", "bool"):
        return Value(_astype(inner.values, np.int64), "int", valid=inner.valid)
    raise UnsupportedSQL(f"unsupported cast {describe(node)}")


def _paren(node: exp.Paren, frame: Frame) -> Value:
    return evaluate(node.this, frame)


def _alias(node: exp.Alias, frame: Frame) -> Value:
    return evaluate(node.this, frame)


def _astype(x: Any, dtype: Any) -> Any:
    """``x`` as ``dtype``: arrays (host or device) converted, host scalars kept scalars."""
    if is_device_array(x) or np.ndim(x):
        return x.astype(dtype, copy=False)
    return np.dtype(dtype).type(x)


def _lookup(table: np.ndarray, codes: Any) -> Any:
    """A per-dictionary-entry host table read through string codes (on the codes' device)."""
    xp = array_module(codes)
    if not len(table):
        return xp.zeros(np.shape(codes), table.dtype)
    if xp is np and np.ndim(codes) == 1:
        return gather_rows(table, codes)  # a kernel on all threads for long columns
    return xp.asarray(table)[codes]


def _and_valid(*values: Value) -> np.ndarray | None:
    from .ops import all_valid

    return all_valid([v.valid for v in values])


# -- arithmetic -------------------------------------------------------------------------------
_INTERVAL_UNITS = {"DAY": "D", "DAYS": "D", "MONTH": "M", "MONTHS": "M", "YEAR": "Y", "YEARS": "Y"}


def _interval(node: exp.Interval) -> tuple[int, str]:
    unit = _INTERVAL_UNITS.get(str(node.unit.name if node.unit else "").upper())
    amount = node.this.this if isinstance(node.this, exp.Literal) else None
    if unit is None or amount is None or not re.fullmatch(r"[+-]?\d+", str(amount).strip()):
        raise UnsupportedSQL(f"unsupported interval {describe(node)}")
    return int(str(amount).strip()), unit


def _shift_dates(days: Any, n: int, unit: str) -> Any:
    """Dates moved by ``n`` days, months or years (a month end clips, as SQL's does)."""
    if unit == "D":
        return _astype(days + np.int32(n), np.int32)
    return _astype(dates.shift_months(days, n if unit == "M" else 12 * n), np.int32)


def _numeric(v: Value, node: exp.Expression) -> None:
    if v.kind not in ("int", "float", "bool"):
        raise SQLError(f"type mismatch: arithmetic on a {v.kind} value in {describe(node)}")


def _decimal(node: exp.Expression) -> Decimal | None:
    """The exact value of constant arithmetic on numeric literals (SQL's literals are
    decimals: ``0.06 + 0.01`` is 0.07, not the float64 sum 0.06999...), else None."""
    if isinstance(node, exp.Literal) and not node.is_string:
        return Decimal(node.this)
    if isinstance(node, exp.Paren | exp.Neg):
        inner = _decimal(node.this)
        return None if inner is None else (-inner if isinstance(node, exp.Neg) else inner)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        a, b = _decimal(node.this), _decimal(node.expression)
        if a is None or b is None or (isinstance(node, exp.Div) and b == 0):
            return None
        if isinstance(node, exp.Add):
            return a + b
        if isinstance(node, exp.Sub):
            return a - b
        return a * b if isinstance(node, exp.Mul) else a / b
    return None


def _arith(node: exp.Binary, frame: Frame) -> Value:
    constant = _decimal(node)
    if constant is not None:
        if constant == constant.to_integral_value() and not isinstance(node, exp.Div) and all(
            "." not in lit.this and "e" not in lit.this.lower()
            for lit in node.find_all(exp.Literal)
        ):
            return Value(np.int64(int(constant)), "int")
        return Value(np.float64(float(constant)), "float")
    if isinstance(node.expression, exp.Interval):
        left = evaluate(node.this, frame)
        if left.kind != "date":
            raise SQLError(f"type mismatch: INTERVAL added to a {left.kind} in {describe(node)}")
        n, unit = _interval(node.expression)
        shifted = _shift_dates(left.values, n if isinstance(node, exp.Add) else -n, unit)
        return Value(shifted, "date", valid=left.valid)
    fused = fused_arithmetic(node, frame)  # several float operations: one pass
    if fused is not None:
        return fused
    a, b = evaluate(node.this, frame), evaluate(node.expression, frame)
    if _null_constant(a) or _null_constant(b):  # x op NULL is NULL, of x's kind
        kind = b.kind if _null_constant(a) and not _null_constant(b) else a.kind
        kind = "int" if kind == "date" and isinstance(node, exp.Sub) else kind
        if kind not in ("int", "float", "date") or (kind == "date" and isinstance(
                node, exp.Mul | exp.Div)):
            raise SQLError(f"type mismatch: arithmetic on a {kind} value in {describe(node)}")
        kind = "float" if isinstance(node, exp.Div) else kind
        zero = np.int32(0) if kind == "date" else np.float64(0) if kind == "float" else np.int64(0)
        return Value(zero, kind, valid=np.bool_(False))
    valid = _and_valid(a, b)
    if isinstance(node, exp.Sub) and a.kind == b.kind == "date":
        return Value(_astype(a.values, np.int64) - b.values, "int", valid=valid)
    if a.kind == "date" and b.kind == "int" and isinstance(node, exp.Add | exp.Sub):
        sign = 1 if isinstance(node, exp.Add) else -1
        return Value(_astype(a.values + sign * b.values, np.int32), "date", valid=valid)
    _numeric(a, node)
    _numeric(b, node)
    x, y = a.values, b.values
    if isinstance(node, exp.Add):
        out = x + y
    elif isinstance(node, exp.Sub):
        out = x - y
    elif isinstance(node, exp.Mul):
        out = x * y
    else:  # real division as DuckDB: IEEE, a zero divisor gives +-inf or NaN
        with np.errstate(divide="ignore", invalid="ignore"):
            out = _astype(x, np.float64) / _astype(y, np.float64)
    kind = "float" if out.dtype.kind == "f" else "int"
    return Value(out, kind, valid=valid)


def _neg(node: exp.Neg, frame: Frame) -> Value:
    v = evaluate(node.this, frame)
    _numeric(v, node)
    return Value(-v.values, v.kind, valid=v.valid)


# -- comparisons ------------------------------------------------------------------------------
_CMP = {
    exp.EQ: np.equal,
    exp.NEQ: np.not_equal,
    exp.GT: np.greater,
    exp.GTE: np.greater_equal,
    exp.LT: np.less,
    exp.LTE: np.less_equal,
}


_ARROW_CMP = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater",
              exp.GTE: "greater_equal", exp.LT: "less", exp.LTE: "less_equal"}


def _text_bound(dictionary: np.ndarray, text: str, op: type) -> tuple[Any, type]:
    """A code threshold equivalent to comparing strings with ``text`` (dictionary sorted)."""
    lo = strings.bound(dictionary, text, "left")
    hi = strings.bound(dictionary, text, "right")
    if op in (exp.EQ, exp.NEQ):
        return (lo if hi > lo else -1), op  # -1: no code equals text
    if op is exp.LT:
        return lo, exp.LT  # codes below the first >= text
    if op is exp.GTE:
        return lo, exp.GTE
    if op is exp.LTE:
        return hi, exp.LT
    return hi, exp.GTE  # GT


def _merged_codes(a: Value, b: Value) -> tuple[np.ndarray, np.ndarray]:
    """Codes of two string values in one shared sorted dictionary."""
    if a.dictionary is b.dictionary or np.array_equal(a.dictionary, b.dictionary):
        return a.values, b.values
    merged = strings.merge([a.dictionary, b.dictionary])
    ra = strings.remap(a.dictionary, merged)
    rb = strings.remap(b.dictionary, merged)
    return _lookup(ra, a.values), _lookup(rb, b.values)


def _null_constant(v: Value) -> bool:
    """Whether ``v`` is the constant NULL (untyped in SQL: it compares with any kind)."""
    return v.valid is not None and np.ndim(v.valid) == 0 and not bool(v.valid) and v.scalar


def _compare(node: exp.Binary, frame: Frame) -> Value:
    a, b = evaluate(node.this, frame), evaluate(node.expression, frame)
    op = type(node)
    if _null_constant(a) or _null_constant(b):  # x op NULL is NULL, whatever x's kind
        return Value(np.bool_(False), "bool", valid=np.bool_(False))
    if b.kind == "string" and a.kind == "text":  # constant on the left: mirror
        mirror = {exp.LT: exp.GT, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.GTE: exp.LTE}
        a, b, op = b, a, mirror.get(op, op)
    valid = _and_valid(a, b)
    if a.kind == "string" and b.kind == "text" and isinstance(a.dictionary, strings.Entries):
        table = strings.compare(a.dictionary, b.text or "", _ARROW_CMP[op])
        return Value(_lookup(table, a.values), "bool", valid=valid)
    if a.kind == "string" and b.kind == "text":
        code, op = _text_bound(a.dictionary, b.text or "", op)
        return Value(_CMP[op](a.values, code), "bool", valid=valid)
    if a.kind == "text" and b.kind == "text":
        return Value(np.bool_(_CMP[op](np.str_(a.text), np.str_(b.text))), "bool")
    if a.kind == "string" and b.kind == "string":
        x, y = _merged_codes(a, b)
        return Value(_CMP[op](x, y), "bool", valid=valid)
    if a.kind == "date" and b.kind == "text":
        b = Value(np.int32(_days(b.text or "", node)), "date")
    comparable = {a.kind, b.kind} <= {"int", "float", "bool"} or a.kind == b.kind
    if not comparable:
        raise SQLError(f"type mismatch: {a.kind} compared with {b.kind} in {describe(node)}")
    return Value(_CMP[op](a.values, b.values), "bool", valid=valid)


def _between(node: exp.Between, frame: Frame) -> Value:
    lo = exp.GTE(this=node.this, expression=node.args["low"])
    hi = exp.LTE(this=node.this, expression=node.args["high"])
    return _logic(exp.And(this=lo, expression=hi), frame)


def _in(node: exp.In, frame: Frame) -> Value:
    """``x IN (a, b, ...)``: three-valued like ``x = a OR x = b OR ...`` (a NULL in the
    list makes a miss null, so ``x NOT IN (1, NULL)`` keeps no row)."""
    if node.args.get("query") is not None:
        raise UnsupportedSQL(f"IN (subquery) is not supported yet: {describe(node)}")
    v = evaluate(node.this, frame)
    items = [evaluate(e, frame) for e in node.expressions]
    if not all(i.scalar and (i.valid is None or np.ndim(i.valid) == 0) for i in items):
        # a list with columns: the OR of the equalities, as SQL defines it
        equal = [exp.EQ(this=node.this.copy(), expression=e.copy()) for e in node.expressions]
        ors = equal[0]
        for e in equal[1:]:
            ors = exp.Or(this=ors, expression=e)
        return _logic(ors, frame) if len(equal) > 1 else _compare(ors, frame)
    has_null = any(i.valid is not None and not bool(i.valid) for i in items)
    items = [i for i in items if i.valid is None or bool(i.valid)]
    xp = array_module(v.values)
    if not items:  # only NULLs: no value is known to be in the list
        hit = xp.zeros(np.shape(v.values), bool) if np.ndim(v.values) else np.bool_(False)
    elif v.kind == "string":
        if any(i.kind != "text" for i in items):
            raise SQLError(f"type mismatch: IN list of a string column in {describe(node)}")
        hit = _lookup(strings.isin(v.dictionary, [i.text for i in items]), v.values)
    elif v.kind == "text":
        if any(i.kind != "text" for i in items):
            raise SQLError(f"type mismatch: string IN a list of numbers in {describe(node)}")
        hit = np.bool_(any(i.text == v.text for i in items))
    else:
        if any(i.kind == "text" for i in items):
            if v.kind != "date":
                raise SQLError(f"type mismatch: {v.kind} IN a list of strings in "
                               f"{describe(node)}")
            items = [Value(np.int32(_days(i.text or "", node)), "date") if i.kind == "text"
                     else i for i in items]
        if any((i.kind == "date") != (v.kind == "date") for i in items):
            raise SQLError(f"type mismatch: {v.kind} IN a list of "
                           f"{'dates' if v.kind != 'date' else 'numbers'} in {describe(node)}")
        listed = np.asarray([i.values for i in items])
        hit = xp.isin(v.values, xp.asarray(listed))
    return membership(hit, v.valid, has_null, False)


def _like(node: exp.Like, frame: Frame) -> Value:
    v, p = evaluate(node.this, frame), evaluate(node.expression, frame)
    if v.kind != "string" or p.kind != "text":
        raise UnsupportedSQL(f"LIKE needs a string column and a constant pattern: {describe(node)}")
    return Value(_lookup(strings.like(v.dictionary, p.text or ""), v.values), "bool",
                 valid=v.valid)


# -- logic ------------------------------------------------------------------------------------
def _bool(v: Value, node: exp.Expression) -> Value:
    if v.kind != "bool":
        raise SQLError(f"type mismatch: {v.kind} used as a condition in {describe(node)}")
    return v


def _logic(node: exp.Connector, frame: Frame) -> Value:
    a = _bool(evaluate(node.this, frame), node)
    b = _bool(evaluate(node.expression, frame), node)
    ta = a.values if a.valid is None else a.values & a.valid  # known true
    tb = b.values if b.valid is None else b.values & b.valid
    if isinstance(node, exp.And):
        fa = ~a.values if a.valid is None else ~a.values & a.valid  # known false
        fb = ~b.values if b.valid is None else ~b.values & b.valid
        if a.valid is None and b.valid is None:
            return Value(a.values & b.values, "bool")
        return Value(ta & tb, "bool", valid=(ta & tb) | fa | fb)
    if a.valid is None and b.valid is None:
        return Value(a.values | b.values, "bool")
    known = ta | tb | ((a.valid if a.valid is not None else True) &
                       (b.valid if b.valid is not None else True))
    return Value(ta | tb, "bool", valid=known)


def _not(node: exp.Not, frame: Frame) -> Value:
    v = _bool(evaluate(node.this, frame), node)
    return Value(~v.values, "bool", valid=v.valid)


def _is(node: exp.Is, frame: Frame) -> Value:
    if not isinstance(node.expression, exp.Null):
        raise UnsupportedSQL(f"unsupported IS {describe(node)}")
    v = evaluate(node.this, frame)
    if v.valid is None:
        return Value(np.bool_(False), "bool")
    return Value(~v.valid, "bool")


def _case(node: exp.Case, frame: Frame) -> Value:
    if node.this is not None:
        raise UnsupportedSQL(f"CASE <operand> WHEN is not supported (use CASE WHEN): "
                             f"{describe(node)}")
    xp = frame.xp
    conditions = [predicate_mask(evaluate(i.this, frame), frame.nrows, xp)
                  for i in node.args["ifs"]]
    results = [evaluate(i.args["true"], frame) for i in node.args["ifs"]]
    default = node.args.get("default")
    results.append(evaluate(default, frame) if default is not None else _null(exp.Null(), frame))
    kinds = {r.kind for r in results if not (r.valid is not None and np.ndim(r.valid) == 0)}
    if not kinds <= {"int", "float", "bool"} and len(kinds) > 1:
        raise UnsupportedSQL(f"CASE results of kinds {sorted(kinds)}: {describe(node)}")
    if kinds - {"int", "float", "bool", "date"}:
        raise UnsupportedSQL(f"CASE with string results is not supported: {describe(node)}")
    n = frame.nrows
    # the first true condition wins: fold the branches from the last to the first
    last = to_column(results[-1], n, xp)
    values = last.values
    valid = xp.ones(n, bool) if last.valid is None else last.valid
    for cond, r in zip(conditions[::-1], results[-2::-1], strict=True):
        values = xp.where(cond, r.values, values)
        valid = xp.where(cond, True if r.valid is None else r.valid, valid)
    kind = "float" if values.dtype.kind == "f" else (kinds.pop() if len(kinds) == 1 else "int")
    return Value(values, kind, valid=None if bool(valid.all()) else valid)


def _extract(node: exp.Extract, frame: Frame) -> Value:
    part = str(node.this.name).upper()
    v = evaluate(node.expression, frame)
    if v.kind != "date" or part not in ("YEAR", "MONTH", "DAY"):
        raise UnsupportedSQL(f"EXTRACT supports YEAR, MONTH, DAY of a date: {describe(node)}")
    year, month, day = dates.civil_from_days(v.values)
    out = {"YEAR": year, "MONTH": month, "DAY": day}[part]
    return Value(_astype(out, np.int64), "int", valid=v.valid)


def _substring(node: exp.Substring, frame: Frame) -> Value:
    v = evaluate(node.this, frame)
    start, length = node.args.get("start"), node.args.get("length")
    s = evaluate(start, frame) if start is not None else Value(np.int64(1), "int")
    n = evaluate(length, frame) if length is not None else None
    if v.kind != "string" or not s.scalar or (n is not None and not n.scalar):
        raise UnsupportedSQL(f"SUBSTRING of a string column by constants: {describe(node)}")
    dictionary, codes = strings.substring(v.dictionary, int(s.values),
                                          None if n is None else int(n.values))
    return Value(v.values if codes is None else _lookup(codes, v.values), "string", dictionary,
                 v.valid)


_HANDLERS: dict[type, Any] = {
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Null: _null,
    exp.Boolean: _boolean,
    exp.Cast: _cast,
    exp.Paren: _paren,
    exp.Alias: _alias,
    exp.Add: _arith,
    exp.Sub: _arith,
    exp.Mul: _arith,
    exp.Div: _arith,
    exp.Neg: _neg,
    exp.Between: _between,
    exp.In: _in,
    exp.Like: _like,
    exp.And: _logic,
    exp.Or: _logic,
    exp.Not: _not,
    exp.Is: _is,
    exp.Case: _case,
    exp.Extract: _extract,
    exp.Substring: _substring,
    InSet: _in_set,
    **{op: _compare for op in _CMP},
}
