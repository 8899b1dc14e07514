"""Binding of scalar and aggregate expressions: a qualified sqlglot expression to the typed
tree of :mod:`..logical.expr`, with DuckDB's type rules.

:func:`bind_expression` looks the node's class up in a dispatch table (``_HANDLERS``, filled
by the ``@_handles`` decorator); each handler binds its children and builds one node. Every
implicit conversion is made explicit: operands that meet at a common type are wrapped in
``Call("cast", ...)`` (or, for a constant, replaced by a constant of that type), so the
physical layer never guesses a type. DuckDB's literal rules are kept: an integer constant
takes the type of the integer column it meets when its value fits (``tinyint_col + 1`` is
TINYINT), and a string constant takes the type of what it is compared with
(``date_col < '1995-01-01'`` compares DATEs).

Subqueries are handed to :meth:`.scope.Scope.plan_subquery`; window functions and whatever
is not listed here raise :class:`~..errors.UnsupportedSQL` naming the construct and where it
is.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import cache
from typing import Any

from hpc.domains.sql.errors import SQLError, UnsupportedSQL, describe, position
from hpc.domains.sql.logical.expr import Aggregate, Call, Case, Expr, Literal, SortKey
from hpc.domains.sql.logical.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    HUGEINT,
    INTEGER,
    INTERVAL,
    MAX_DECIMAL_PRECISION,
    NULLTYPE,
    SMALLINT,
    TIMESTAMP,
    TINYINT,
    VARCHAR,
    SQLType,
    arithmetic_type,
    common_type,
    decimal,
    sum_type,
)
from sqlglot import exp

from .scope import Scope

__all__ = ["bind_expression", "bind_sort_key", "convert", "unify", "sql_type"]

_Handler = Callable[["_Binder", Any], Expr]
_HANDLERS: dict[type[exp.Expression], _Handler] = {}


def _handles(*classes: type[exp.Expression]) -> Callable[[_Handler], _Handler]:
    """Register the decorated function as the binder of ``classes``."""

    def register(fn: _Handler) -> _Handler:
        for cls in classes:
            _HANDLERS[cls] = fn
        return fn

    return register


def bind_expression(node: exp.Expression, scope: Scope, *, aggregates: bool = True) -> Expr:
    """The typed expression ``node`` means in ``scope``.

    ``aggregates=False`` makes an aggregate function an error (WHERE, GROUP BY, JOIN ON).
    Raises :class:`SQLError` for type errors and unknown columns, :class:`UnsupportedSQL`
    for constructs this engine does not implement."""
    return _Binder(scope, aggregates).bind(node)


def bind_sort_key(node: exp.Ordered, scope: Scope, *, aggregates: bool = True) -> SortKey:
    """An ORDER BY term (sqlglot has already set DuckDB's default NULLS LAST)."""
    return _Binder(scope, aggregates).sort_key(node)


class _Binder:
    """One bind: the scope and whether an aggregate may (still) appear."""

    def __init__(self, scope: Scope, aggregates: bool) -> None:
        self.scope = scope
        self.aggregates = aggregates
        self.in_aggregate: exp.Expression | None = None
        # a window's aggregate function: its arguments may hold the query's aggregates
        self.windowed: exp.Expression | None = None

    def bind(self, node: exp.Expression) -> Expr:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise UnsupportedSQL(f"{describe(node)} is not supported")
        if self._outer_candidate(node):
            owner = self.scope.aggregate_owner(node)
            if owner is not None:  # an aggregate of an enclosing query's groups
                if self.in_aggregate is not None:
                    raise _err(f"aggregate {_name(node)} inside aggregate "
                               f"{_name(self.in_aggregate)}", node)
                return self.scope.outer_aggregate(owner, node)
        return handler(self, node)

    def _outer_candidate(self, node: exp.Expression) -> bool:
        """Whether ``node`` is an aggregate of groups (with its FILTER, not a window's
        function) in a nested query, which may belong to an enclosing query."""
        if self.scope.outer is None or node is self.windowed:
            return False
        if isinstance(node, exp.Filter):
            return isinstance(node.this, exp.AggFunc)
        return isinstance(node, exp.AggFunc) and not (
            isinstance(node.parent, exp.Filter) and node.arg_key == "this")

    def sort_key(self, node: exp.Ordered) -> SortKey:
        nulls_first = bool(node.args.get("nulls_first")) if explicit_nulls(node) else False
        return SortKey(self.bind(node.this), ascending=not node.args.get("desc"),
                       nulls_first=nulls_first)


def explicit_nulls(o: exp.Ordered) -> bool:
    """Whether the ORDER BY term spelled NULLS FIRST/LAST (sqlglot fills the flag in either
    way; DuckDB's default is NULLS LAST for ASC and DESC)."""
    return _spells_nulls(o.args.get("desc"), o.args.get("nulls_first"))


@cache
def _spells_nulls(desc: Any, nulls_first: Any) -> bool:
    """Whether DuckDB's SQL of an ORDER BY term with these flags says NULLS FIRST/LAST: asked
    of a term without its expression (writing out the whole term copies its tree)."""
    term = exp.Ordered(this=exp.Null(), desc=desc, nulls_first=nulls_first)
    text = term.sql(dialect="duckdb").upper()
    return "NULLS FIRST" in text or "NULLS LAST" in text


# ---------------------------------------------------------------------------------------
# Type helpers
# ---------------------------------------------------------------------------------------

_UNIX_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000


def _err(message: str, node: exp.Expression | None) -> SQLError:
    return SQLError(message + (position(node) if node is not None else ""))


def _is_null(e: Expr) -> bool:
    return isinstance(e, Literal) and e.value is None


def _int_literal(e: Expr) -> bool:
    return (isinstance(e, Literal) and e.type.kind == "integer" and e.value is not None)


def _str_literal(e: Expr) -> bool:
    return isinstance(e, Literal) and e.type.kind == "varchar" and e.value is not None


def _fits(value: int, t: SQLType) -> bool:
    return t.kind == "integer" and -(1 << (t.bits - 1)) <= value < (1 << (t.bits - 1))


def _integer_type(value: int) -> SQLType | None:
    """DuckDB's type of an integer constant: INTEGER, else BIGINT, else HUGEINT."""
    for t in (INTEGER, BIGINT, HUGEINT):
        if _fits(value, t):
            return t
    return None


def _parse_date(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d{1,4})-(\d{1,2})-(\d{1,2})\s*", text)
    if not m:
        return None
    try:
        return _dt.date(*map(int, m.groups())).toordinal() - _UNIX_ORDINAL
    except ValueError:
        return None


def _parse_timestamp(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})"
                     r"(?::(\d{2})(?:\.(\d{1,6}))?)?)?\s*", text)
    if not m:
        return None
    y, mo, d, h, mi, s, frac = m.groups()
    try:
        day = _dt.date(int(y), int(mo), int(d)).toordinal() - _UNIX_ORDINAL
        clock = _dt.time(int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None
    micros = int((frac or "0").ljust(6, "0"))
    return day * _DAY_US + ((clock.hour * 60 + clock.minute) * 60 + clock.second) * 10**6 + micros


_BOOL_TEXT = {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}


def _parse_text(text: str, t: SQLType) -> Any:
    """``text`` as a constant of type ``t`` (DuckDB's string-to-``t`` cast), or None."""
    try:
        if t.kind == "date":
            return _parse_date(text)
        if t.kind == "timestamp":
            return _parse_timestamp(text)
        if t.kind == "integer":
            v = int(text.strip())
            return v if _fits(v, t) else None
        if t.kind == "decimal":
            d = Decimal(text.strip())
            if not d.is_finite():
                return None
            d = d.quantize(Decimal(1).scaleb(-t.scale), rounding=ROUND_HALF_UP)
            return d if abs(d) < Decimal(10) ** t.digits() else None
        if t.kind == "double":
            return float(text.strip())
        if t.kind == "boolean":
            return _BOOL_TEXT.get(text.strip().lower())
    except (ValueError, InvalidOperation):
        return None
    return None


def _fold(lit: Literal, t: SQLType) -> Literal | None:
    """The constant ``lit`` converted to ``t`` where that is exact, else None."""
    v = lit.value
    if v is None:
        return Literal(None, t)
    src = lit.type
    if src.kind == "integer" and not isinstance(v, bool):
        if t.kind == "integer":
            return Literal(v, t) if _fits(v, t) else None
        if t.kind == "decimal":
            return Literal(Decimal(v), t) if abs(v) < 10 ** t.digits() else None
        if t.kind == "double":
            return Literal(float(v), t)
    elif src.kind == "decimal":
        if t.kind == "decimal" and t.scale >= src.scale and t.digits() >= src.digits():
            return Literal(v, t)
        if t.kind == "double":
            return Literal(float(v), t)
    elif src.kind == "date" and t.kind == "timestamp":
        return Literal(v * _DAY_US, t)
    return None


def convert(e: Expr, t: SQLType) -> Expr:
    """``e`` as type ``t``: itself, a constant of type ``t`` or ``cast(e)``."""
    if e.type == t or t.kind == "null":
        return e
    if isinstance(e, Literal):
        folded = _fold(e, t)
        if folded is not None:
            return folded
    return Call("cast", (e,), t)


def _implicit(e: Expr, t: SQLType, what: str, node: exp.Expression) -> Expr:
    """``e`` converted implicitly to ``t``: a string constant is parsed as ``t`` (an error
    where it does not parse), anything else converts where ``t`` is its common type with
    ``t``."""
    if e.type == t or t.kind == "null":
        return e
    if _str_literal(e) and t.kind != "varchar":
        value = _parse_text(e.value, t)
        if value is None:
            raise _err(f"{what}: {e} is not a valid {t}", node)
        return Literal(value, t)
    if _int_literal(e) and _fits(e.value, t):
        return Literal(e.value, t)
    if common_type(e.type, t) != t:
        raise _err(f"{what}: cannot convert {e.type} to {t}", node)
    return convert(e, t)


def unify(exprs: Sequence[Expr], what: str, node: exp.Expression) -> tuple[SQLType, list[Expr]]:
    """The common type of ``exprs`` (a comparison's operands, CASE branches, IN values) and
    the expressions converted to it, as DuckDB: integer constants that fit the other
    operands' integer type take it; string constants take the others' type."""
    fixed = [e for e in exprs if not (_int_literal(e) or _str_literal(e))]
    t = NULLTYPE
    for e in fixed:
        u = common_type(t, e.type)
        if u is None:
            raise _err(f"{what}: incompatible types {t} and {e.type}", node)
        t = u
    for e in exprs:
        if _int_literal(e) and not (t.kind == "integer" and _fits(e.value, t)):
            u = common_type(t, e.type)
            if u is None:
                raise _err(f"{what}: incompatible types {t} and {e.type}", node)
            t = u
    if t.kind == "null" and any(_str_literal(e) for e in exprs):
        t = VARCHAR
    return t, [_implicit(e, t, what, node) for e in exprs]


def _param(b: _Binder, node: exp.Expression | None, t: SQLType, what: str,
           parent: exp.Expression) -> Expr:
    """A function argument bound and converted implicitly to parameter type ``t``."""
    if node is None:
        raise _err(f"{what}: missing argument", parent)
    return _implicit(b.bind(node), t, what, parent)


def _numeric(e: Expr, what: str, node: exp.Expression) -> Expr:
    """``e`` checked to be a number; a bare NULL becomes a BIGINT NULL (as DuckDB)."""
    if e.type.kind == "null":
        return Literal(None, BIGINT)
    if not e.type.numeric:
        raise _err(f"{what} needs a number, got {e.type}", node)
    return e


def _of_type(e: Expr, t: SQLType, what: str, node: exp.Expression) -> Expr:
    """``e`` checked to be of type ``t``; a bare NULL becomes a NULL of ``t``."""
    if e.type.kind == "null":
        return Literal(None, t)
    if e.type != t:
        raise _err(f"{what} needs a {t}, got {e.type}", node)
    return e


def _boolean(e: Expr, what: str, node: exp.Expression) -> Expr:
    return _of_type(e, BOOLEAN, what, node)


def _string(e: Expr, what: str, node: exp.Expression) -> Expr:
    return _of_type(e, VARCHAR, what, node)


def _temporal(e: Expr, what: str, node: exp.Expression) -> Expr:
    if not e.type.temporal:
        raise _err(f"{what} needs a DATE or TIMESTAMP, got {e.type}", node)
    return e


def _as_text(e: Expr) -> Expr:
    """``e`` as VARCHAR (CONCAT's and ``||``'s operands)."""
    return Literal(None, VARCHAR) if e.type.kind == "null" else convert(e, VARCHAR)


def _name(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb") if isinstance(node, exp.Expression) else str(node)


# ---------------------------------------------------------------------------------------
# Leaves: columns and constants
# ---------------------------------------------------------------------------------------


@_handles(exp.Column)
def _column(b: _Binder, node: exp.Column) -> Expr:
    if isinstance(node.this, exp.Star):
        raise UnsupportedSQL(f"{describe(node)} is not supported in an expression")
    return b.scope.resolve(node)


@_handles(exp.Paren, exp.Alias)
def _unwrap(b: _Binder, node: exp.Expression) -> Expr:
    return b.bind(node.this)


@_handles(exp.Null)
def _null(b: _Binder, node: exp.Null) -> Expr:
    return Literal(None, NULLTYPE)


@_handles(exp.Boolean)
def _bool(b: _Binder, node: exp.Boolean) -> Expr:
    return Literal(bool(node.this), BOOLEAN)


@_handles(exp.Literal)
def _literal(b: _Binder, node: exp.Literal) -> Expr:
    text = node.this
    if node.is_string:
        return Literal(text, VARCHAR)
    if any(c in text for c in "eE"):
        return Literal(float(text), DOUBLE)
    if "." in text:  # DuckDB: DECIMAL(all digits written, digits after the point)
        whole, frac = text.split(".", 1)
        precision = max(len(whole) + len(frac), 1)
        if precision > MAX_DECIMAL_PRECISION:
            return Literal(float(text), DOUBLE)
        return Literal(Decimal(text), decimal(precision, len(frac)))
    value = int(text)
    t = _integer_type(value)
    if t is None:
        raise UnsupportedSQL(f"integer constant {text} is wider than HUGEINT{position(node)}")
    return Literal(value, t)


_INTERVAL_UNITS = {  # unit -> (months, days, microseconds) per unit
    "year": (12, 0, 0), "quarter": (3, 0, 0), "month": (1, 0, 0), "week": (0, 7, 0),
    "day": (0, 1, 0), "hour": (0, 0, 3_600_000_000), "minute": (0, 0, 60_000_000),
    "second": (0, 0, 1_000_000), "millisecond": (0, 0, 1000), "microsecond": (0, 0, 1),
}
_UNIT_ALIASES = {"years": "year", "y": "year", "yr": "year", "yrs": "year",
                 "quarters": "quarter", "months": "month", "mon": "month", "mons": "month",
                 "weeks": "week", "w": "week", "days": "day", "d": "day", "hours": "hour",
                 "h": "hour", "hr": "hour", "hrs": "hour", "minutes": "minute",
                 "min": "minute", "mins": "minute", "m": "minute", "seconds": "second",
                 "s": "second", "sec": "second", "secs": "second",
                 "milliseconds": "millisecond", "ms": "millisecond",
                 "microseconds": "microsecond", "us": "microsecond"}


@_handles(exp.Interval)
def _interval(b: _Binder, node: exp.Interval) -> Expr:
    value, unit = node.this, node.args.get("unit")
    if not isinstance(value, exp.Literal):
        raise UnsupportedSQL(f"{describe(node)}: only constant intervals are supported")
    text = str(value.this)
    if unit is not None:
        text = f"{text} {unit.name}"
    parts = text.split()
    if not parts or len(parts) % 2:
        raise _err(f"invalid INTERVAL {value.this!r}", node)
    months = days = micros = 0
    for amount, name in zip(parts[::2], parts[1::2], strict=True):
        name = name.lower()
        per = _INTERVAL_UNITS.get(_UNIT_ALIASES.get(name, name))
        if per is None:
            raise _err(f"invalid INTERVAL unit {name!r}", node)
        try:
            n = int(amount)
        except ValueError:
            raise UnsupportedSQL(f"{describe(node)}: only whole numbers of units are "
                                 "supported in an INTERVAL") from None
        months, days, micros = months + n * per[0], days + n * per[1], micros + n * per[2]
    return Literal((months, days, micros), INTERVAL)


# ---------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------

_ARITH = {exp.Add: ("+", "add"), exp.Sub: ("-", "sub"), exp.Mul: ("*", "mul"),
          exp.Div: ("/", "div"), exp.IntDiv: ("//", "intdiv"), exp.Mod: ("%", "mod")}


@_handles(*_ARITH)
def _arithmetic(b: _Binder, node: exp.Binary) -> Expr:
    op, name = _ARITH[type(node)]
    left, right = b.bind(node.this), b.bind(node.expression)
    return _arith(op, name, left, right, node)


def _arith(op: str, name: str, a: Expr, c: Expr, node: exp.Expression) -> Expr:
    kinds = {a.type.kind, c.type.kind}
    what = f"operator {op}"
    if kinds & {"date", "timestamp", "interval"}:
        return _date_arith(op, name, a, c, node)
    if not all(k in ("integer", "decimal", "double", "null") for k in kinds):
        raise _err(f"{what} does not apply to {a.type} and {c.type}", node)
    # NULL takes the other operand's type; integer constants the other integer's type
    if _is_null(a):
        a = Literal(None, c.type if c.type.kind != "null" else INTEGER)
    if _is_null(c):
        c = Literal(None, a.type)
    if _int_literal(a) and c.type.kind == "integer" and _fits(a.value, c.type):
        a = Literal(a.value, c.type)
    if _int_literal(c) and a.type.kind == "integer" and _fits(c.value, a.type):
        c = Literal(c.value, a.type)
    result = arithmetic_type(op, a.type, c.type)
    if result is None:
        raise _err(f"{what} does not apply to {a.type} and {c.type}", node)
    if op == "//" and result.kind == "decimal":
        result = DOUBLE  # DuckDB divides DECIMALs as DOUBLE, then floors
    if op == "*" and result.kind == "decimal":
        # a DECIMAL product multiplies the scaled integers: operands keep their scales
        def operand(e: Expr) -> Expr:
            return e if e.type.kind == "decimal" else convert(e, decimal(e.type.digits(), 0))

        return Call(name, (operand(a), operand(c)), result)
    # + and -: both at the result type (a DECIMAL sum's scale and width); / and a DECIMAL
    # //: DOUBLE; otherwise (integers, DOUBLE, DECIMAL %): the common type
    if op in ("+", "-") or result == DOUBLE:
        operand_type = result
    else:
        operand_type = common_type(a.type, c.type) or result
    return Call(name, (convert(a, operand_type), convert(c, operand_type)), result)


def _date_arith(op: str, name: str, a: Expr, c: Expr, node: exp.Expression) -> Expr:
    """DuckDB: DATE +/- INTEGER is DATE; DATE - DATE is BIGINT days; DATE or TIMESTAMP
    +/- INTERVAL is TIMESTAMP; TIMESTAMP - TIMESTAMP is INTERVAL."""
    ka, kc = a.type.kind, c.type.kind
    bad = _err(f"operator {op} does not apply to {a.type} and {c.type}", node)
    if op == "+" and (ka in ("integer", "interval", "null") and kc in ("date", "timestamp")):
        a, c, ka, kc = c, a, kc, ka  # the date first
    if op in ("*", "/") and "interval" in (ka, kc) and (a.type.numeric or c.type.numeric):
        raise UnsupportedSQL(f"{describe(node)}: INTERVAL {op} number is not supported")
    if op not in "+-" or ka not in ("date", "timestamp", "interval", "null"):
        raise bad
    if ka == "interval" or (ka == "null" and kc == "interval"):
        if kc not in ("interval", "null"):
            raise bad
        return Call(name, (convert(a, INTERVAL), convert(c, INTERVAL)), INTERVAL)
    if kc == "interval":
        if ka == "null":
            raise bad
        return Call("date_add" if op == "+" else "date_sub", (convert(a, TIMESTAMP), c),
                    TIMESTAMP)
    if ka == "date" and (kc == "integer" or kc == "null"):
        if kc == "integer" and not (c.type.bits <= 32 or (_int_literal(c)
                                                           and _fits(c.value, INTEGER))):
            raise bad
        return Call(name, (a, convert(c, INTEGER) if kc == "integer" else
                           Literal(None, INTEGER)), DATE)
    if op == "-" and ka == "null" and kc == "date":
        return Call(name, (Literal(None, DATE), c), BIGINT)
    if op == "-" and ka == kc == "date":
        return Call(name, (a, c), BIGINT)
    if op == "-" and {ka, kc} <= {"date", "timestamp"}:
        return Call(name, (convert(a, TIMESTAMP), convert(c, TIMESTAMP)), INTERVAL)
    raise bad


@_handles(exp.Neg)
def _neg(b: _Binder, node: exp.Neg) -> Expr:
    e = b.bind(node.this)
    if isinstance(e, Literal) and e.type.numeric:  # -5 is a constant, as in DuckDB
        return Literal(-e.value, e.type)
    if e.type.kind == "interval":
        return Call("neg", (e,), INTERVAL)
    e = _numeric(e, "unary -", node)
    return e if _is_null(e) else Call("neg", (e,), e.type)


# ---------------------------------------------------------------------------------------
# Comparisons and logic
# ---------------------------------------------------------------------------------------

_COMPARE = {exp.EQ: ("=", "eq"), exp.NEQ: ("<>", "ne"), exp.LT: ("<", "lt"),
            exp.LTE: ("<=", "le"), exp.GT: (">", "gt"), exp.GTE: (">=", "ge"),
            exp.NullSafeEQ: ("IS NOT DISTINCT FROM", "is_not_distinct"),
            exp.NullSafeNEQ: ("IS DISTINCT FROM", "is_distinct")}


def _compare(name: str, op: str, a: Expr, c: Expr, node: exp.Expression) -> Expr:
    _, (a, c) = unify([a, c], f"comparison {op}", node)
    return Call(name, (a, c), BOOLEAN)


def _query_of(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Subquery | exp.Paren):
        node = node.this
    return node


_NEGATED = {"eq": "ne", "ne": "eq", "lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}


@_handles(*_COMPARE)
def _comparison(b: _Binder, node: exp.Binary) -> Expr:
    op, name = _COMPARE[type(node)]
    right = node.expression
    if isinstance(right, exp.Any | exp.All):
        query = _query_of(right.this)
        if not isinstance(query, exp.Query) or name not in _NEGATED:
            raise UnsupportedSQL(f"{describe(node)}: ANY and ALL need a subquery and one of "
                                 "= <> < <= > >=")
        x = b.bind(node.this)
        if isinstance(right, exp.Any):  # TRUE where some comparison is
            return b.scope.plan_subquery(f"any:{name}", query, x, node)
        # x op ALL (q) = NOT (x negated-op ANY (q)), NULLs included
        found = b.scope.plan_subquery(f"any:{_NEGATED[name]}", query, x, node)
        return Call("not", (found,), BOOLEAN)
    return _compare(name, op, b.bind(node.this), b.bind(right), node)


@_handles(exp.Between)
def _between(b: _Binder, node: exp.Between) -> Expr:
    if node.args.get("symmetric"):
        raise UnsupportedSQL(f"{describe(node)}: BETWEEN SYMMETRIC is not supported")
    x, low, high = b.bind(node.this), b.bind(node.args["low"]), b.bind(node.args["high"])
    return Call("and", (_compare("ge", ">=", x, low, node),
                        _compare("le", "<=", x, high, node)), BOOLEAN)


@_handles(exp.And, exp.Or)
def _connective(b: _Binder, node: exp.Connector) -> Expr:
    name = "and" if isinstance(node, exp.And) else "or"
    args: list[Expr] = []
    for operand in node.flatten(unnest=True):
        e = _boolean(b.bind(operand), name.upper(), operand)
        if isinstance(e, Call) and e.name == name:
            args.extend(e.args)
        else:
            args.append(e)
    return Call(name, tuple(args), BOOLEAN)


@_handles(exp.Not)
def _not(b: _Binder, node: exp.Not) -> Expr:
    inner = node.this
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
        return Call("is_not_null", (b.bind(inner.this),), BOOLEAN)
    return Call("not", (_boolean(b.bind(inner), "NOT", node),), BOOLEAN)


@_handles(exp.Is)
def _is(b: _Binder, node: exp.Is) -> Expr:
    x, what = b.bind(node.this), node.expression
    if isinstance(what, exp.Null):
        return Call("is_null", (x,), BOOLEAN)
    if isinstance(what, exp.Boolean):
        x = _boolean(x, "IS TRUE/FALSE", node)
        return Call("is_true" if what.this else "is_false", (x,), BOOLEAN)
    raise UnsupportedSQL(f"{describe(node)} is not supported")


@_handles(exp.In)
def _in(b: _Binder, node: exp.In) -> Expr:
    query = node.args.get("query")
    if query is not None and isinstance(node.this, exp.Tuple):  # (a, b) IN (SELECT x, y)
        xs = tuple(b.bind(e) for e in node.this.expressions)
        return b.scope.plan_subquery("in", _query_of(query), xs, node)  # type: ignore[arg-type]
    x = b.bind(node.this)
    if query is not None:
        return b.scope.plan_subquery("in", _query_of(query), x, node)
    values = node.expressions
    if not values or node.args.get("unnest") or node.args.get("field"):
        raise UnsupportedSQL(f"{describe(node)}: only IN (list) and IN (subquery) are "
                             "supported")
    _, args = unify([x, *(b.bind(v) for v in values)], "IN", node)
    return Call("in", tuple(args), BOOLEAN)


def _like(b: _Binder, node: exp.Like | exp.ILike, escape: exp.Expression | None) -> Expr:
    name = "like" if isinstance(node, exp.Like) else "ilike"
    what = name.upper()
    args = [_string(b.bind(node.this), what, node), _string(b.bind(node.expression), what,
                                                             node)]
    if escape is not None:
        args.append(_string(b.bind(escape), f"{what} ... ESCAPE", node))
    e: Expr = Call(name, tuple(args), BOOLEAN)
    return Call("not", (e,), BOOLEAN) if node.args.get("negate") else e


@_handles(exp.Like, exp.ILike)
def _like_plain(b: _Binder, node: exp.Like | exp.ILike) -> Expr:
    return _like(b, node, None)


@_handles(exp.Escape)
def _like_escape(b: _Binder, node: exp.Escape) -> Expr:
    if not isinstance(node.this, exp.Like | exp.ILike):
        raise UnsupportedSQL(f"{describe(node)} is not supported")
    return _like(b, node.this, node.expression)


@_handles(exp.StartsWith)
def _starts_with(b: _Binder, node: exp.StartsWith) -> Expr:
    args = (_string(b.bind(node.this), "STARTS_WITH", node),
            _string(b.bind(node.expression), "STARTS_WITH", node))
    return Call("starts_with", args, BOOLEAN)


# ---------------------------------------------------------------------------------------
# CASE, COALESCE, NULLIF, CAST
# ---------------------------------------------------------------------------------------


def _case(b: _Binder, node: exp.Expression, whens: list[tuple[Expr, Expr]],
          default: Expr | None) -> Expr:
    values = [v for _, v in whens] + ([default] if default is not None else [])
    t, values = unify(values, "CASE", node)
    conds = [_boolean(c, "CASE WHEN", node) for c, _ in whens]
    new_default = values[len(whens)] if default is not None else Literal(None, t)
    return Case(tuple(zip(conds, values[:len(whens)], strict=True)), new_default, t)


@_handles(exp.Case)
def _case_expr(b: _Binder, node: exp.Case) -> Expr:
    subject = node.this
    operand = b.bind(subject) if subject is not None else None
    whens: list[tuple[Expr, Expr]] = []
    for arm in node.args.get("ifs") or []:
        cond = b.bind(arm.this)
        if operand is not None:  # simple CASE: CASE x WHEN a ... is x = a
            cond = _compare("eq", "CASE x WHEN", operand, cond, arm)
        whens.append((cond, b.bind(arm.args["true"])))
    default = node.args.get("default")
    return _case(b, node, whens, b.bind(default) if default is not None else None)


@_handles(exp.If)
def _if(b: _Binder, node: exp.If) -> Expr:  # IF(cond, a, b)
    default = node.args.get("false")
    return _case(b, node, [(b.bind(node.this), b.bind(node.args["true"]))],
                 b.bind(default) if default is not None else None)


@_handles(exp.Coalesce)
def _coalesce(b: _Binder, node: exp.Coalesce) -> Expr:
    t, args = unify([b.bind(node.this), *(b.bind(e) for e in node.expressions)], "COALESCE",
                    node)
    return Call("coalesce", tuple(args), t)


@_handles(exp.Nullif)
def _nullif(b: _Binder, node: exp.Nullif) -> Expr:
    a, c = b.bind(node.this), b.bind(node.expression)
    t, (ca, cc) = unify([a, c], "NULLIF", node)
    if a.type.kind == "null":
        return Literal(None, NULLTYPE)
    result: Expr = Call("nullif", (ca, cc), t)
    # DuckDB: the result has the first argument's type (compared at the common type)
    return result if a.type in (t, NULLTYPE) else Call("cast", (result,), a.type)


_DT = exp.DataType.Type
_TYPE_NAMES = {
    _DT.BOOLEAN: BOOLEAN, _DT.TINYINT: TINYINT, _DT.SMALLINT: SMALLINT, _DT.INT: INTEGER,
    _DT.BIGINT: BIGINT, _DT.INT128: HUGEINT, _DT.DOUBLE: DOUBLE, _DT.FLOAT: DOUBLE,
    _DT.DATE: DATE, _DT.TIMESTAMP: TIMESTAMP, _DT.TIMESTAMPNTZ: TIMESTAMP,
    _DT.DATETIME: TIMESTAMP, _DT.TEXT: VARCHAR, _DT.VARCHAR: VARCHAR, _DT.CHAR: VARCHAR,
    _DT.NVARCHAR: VARCHAR, _DT.NCHAR: VARCHAR,
}


def sql_type(dtype: exp.DataType, node: exp.Expression | None = None) -> SQLType:
    """Our type for a sqlglot type name (FLOAT/REAL are DOUBLE here; DECIMAL defaults to
    DuckDB's DECIMAL(18,3))."""
    kind = dtype.this
    if kind in (_DT.DECIMAL, _DT.BIGDECIMAL):
        params = [int(p.this.this if isinstance(p, exp.DataTypeParam) else p.this)
                  for p in dtype.expressions]
        if not params:
            return decimal(18, 3)
        try:
            return decimal(params[0], params[1] if len(params) > 1 else 0)
        except ValueError as e:
            raise _err(f"{e}", node or dtype) from None
    t = _TYPE_NAMES.get(kind)
    if t is None or dtype.expressions and t != VARCHAR:
        raise UnsupportedSQL(f"type {dtype.sql(dialect='duckdb')} is not supported"
                             f"{position(node if node is not None else dtype)}")
    return t


def _castable(src: SQLType, dst: SQLType) -> bool:
    s, d = src.kind, dst.kind
    return (s == d or "null" in (s, d) or "varchar" in (s, d)
            or (src.numeric or s == "boolean") and (dst.numeric or d == "boolean")
            or {s, d} == {"date", "timestamp"})


@_handles(exp.Cast, exp.TryCast)
def _cast(b: _Binder, node: exp.Cast) -> Expr:
    t = sql_type(node.args["to"], node)
    e = b.bind(node.this)
    safe = isinstance(node, exp.TryCast)
    if e.type == t:
        return e
    if not _castable(e.type, t):
        raise _err(f"cannot CAST {e.type} to {t}", node)
    if _str_literal(e) and t.kind != "varchar":  # DATE '1995-01-01' and the like
        value = _parse_text(e.value, t)
        if value is None and not safe:
            raise _err(f"invalid {t} literal {e}", node)
        return Literal(value, t)
    if isinstance(e, Literal):
        folded = _fold(e, t)
        if folded is not None:
            return folded
    return Call("try_cast" if safe else "cast", (e,), t)


# ---------------------------------------------------------------------------------------
# Scalar functions
# ---------------------------------------------------------------------------------------


def _unary_string(name: str, result: SQLType) -> _Handler:
    def bind(b: _Binder, node: exp.Func) -> Expr:
        return Call(name, (_string(b.bind(node.this), name.upper(), node),), result)

    return bind


_handles(exp.Lower)(_unary_string("lower", VARCHAR))
_handles(exp.Upper)(_unary_string("upper", VARCHAR))
_handles(exp.Length)(_unary_string("length", BIGINT))


@_handles(exp.Concat)
def _concat(b: _Binder, node: exp.Concat) -> Expr:
    # DuckDB's CONCAT skips NULLs (and is never NULL); its operands are cast to VARCHAR
    return Call("concat", tuple(_as_text(b.bind(e)) for e in node.expressions), VARCHAR)


@_handles(exp.DPipe)
def _dpipe(b: _Binder, node: exp.DPipe) -> Expr:
    # a || b: NULL when any operand is NULL (unlike CONCAT), bound as
    # CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE concat(a, b) END
    operands: list[exp.Expression] = []
    stack: list[exp.Expression] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.DPipe):
            stack.extend((n.expression, n.this))
        else:
            operands.append(n)
    args = [b.bind(o) for o in operands]
    if any(_is_null(a) for a in args):
        return Literal(None, NULLTYPE)  # as DuckDB: NULL || x is a NULL of no type
    text = tuple(_as_text(a) for a in args)
    nullable = [a for a in text if not isinstance(a, Literal)]
    joined = Call("concat", text, VARCHAR)
    if not nullable:
        return joined
    tests = [Call("is_null", (a,), BOOLEAN) for a in nullable]
    cond = tests[0] if len(tests) == 1 else Call("or", tuple(tests), BOOLEAN)
    return Case(((cond, Literal(None, VARCHAR)),), joined, VARCHAR)


@_handles(exp.Trim)
def _trim(b: _Binder, node: exp.Trim) -> Expr:
    where = str(node.args.get("position") or "BOTH").upper()
    name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(where, "trim")
    args = [_string(b.bind(node.this), name.upper(), node)]
    if node.expression is not None:
        args.append(_string(b.bind(node.expression), name.upper(), node))
    return Call(name, tuple(args), VARCHAR)


@_handles(exp.Substring)
def _substring(b: _Binder, node: exp.Substring) -> Expr:
    args = [_string(b.bind(node.this), "SUBSTRING", node),
            _param(b, node.args.get("start"), BIGINT, "SUBSTRING", node)]
    if node.args.get("length") is not None:
        args.append(_param(b, node.args["length"], BIGINT, "SUBSTRING", node))
    return Call("substring", tuple(args), VARCHAR)


@_handles(exp.Replace)
def _replace(b: _Binder, node: exp.Replace) -> Expr:
    parts = (node.this, node.expression, node.args.get("replacement"))
    return Call("replace", tuple(_param(b, p, VARCHAR, "REPLACE", node) for p in parts),
                VARCHAR)


@_handles(exp.StrPosition)
def _strpos(b: _Binder, node: exp.StrPosition) -> Expr:
    if node.args.get("position") is not None or node.args.get("occurrence") is not None:
        raise UnsupportedSQL(f"{describe(node)}: a start position is not supported")
    args = (_string(b.bind(node.this), "STRPOS", node),
            _string(b.bind(node.args["substr"]), "STRPOS", node))
    return Call("strpos", args, BIGINT)


@_handles(exp.Left, exp.Right)
def _left_right(b: _Binder, node: exp.Left | exp.Right) -> Expr:
    name = "left" if isinstance(node, exp.Left) else "right"
    args = (_string(b.bind(node.this), name.upper(), node),
            _param(b, node.expression, BIGINT, name.upper(), node))
    return Call(name, args, VARCHAR)


# date parts: the spellings sqlglot gives -> DuckDB's names
_PARTS = {p: p for p in ("year", "quarter", "month", "week", "day", "hour", "minute",
                         "second", "millisecond", "microsecond", "epoch", "dow", "doy",
                         "isodow", "isoyear", "decade", "century", "millennium")}
_PARTS.update({"dayofweek": "dow", "dayofyear": "doy", "weekofyear": "week",
               "dayofmonth": "day", "years": "year", "months": "month", "days": "day",
               "hours": "hour", "minutes": "minute", "seconds": "second",
               "weeks": "week", "quarters": "quarter", "weekday": "dow",
               "dayofweekiso": "isodow", "milliseconds": "millisecond",
               "microseconds": "microsecond", "yearofweekiso": "isoyear"})
_TRUNC_PARTS = {"year", "quarter", "month", "week", "day", "hour", "minute", "second",
                "millisecond", "microsecond", "decade", "century", "millennium", "isoyear"}


def _part(unit: exp.Expression | str | None, node: exp.Expression,
          allowed: set[str] | None = None) -> Literal:
    if unit is None:
        raise _err(f"{describe(node)}: missing date part", node)
    text = (unit.name if isinstance(unit, exp.Expression) else unit).lower()
    part = _PARTS.get(text)
    if part is None or (allowed is not None and part not in allowed):
        raise UnsupportedSQL(f"{describe(node)}: date part {text!r} is not supported")
    return Literal(part, VARCHAR)


def _extract_of(part: Literal, e: Expr, node: exp.Expression) -> Expr:
    e = _temporal(e, f"EXTRACT({part.value})", node)
    return Call("extract", (part, e), DOUBLE if part.value == "epoch" else BIGINT)


@_handles(exp.Extract)
def _extract(b: _Binder, node: exp.Extract) -> Expr:
    return _extract_of(_part(node.this, node), b.bind(node.expression), node)


_PART_FUNCTIONS = {exp.Year: "year", exp.Month: "month", exp.Day: "day",
                   exp.Quarter: "quarter", exp.DayOfWeek: "dow", exp.DayOfYear: "doy",
                   exp.DayOfMonth: "day", exp.Hour: "hour", exp.Minute: "minute",
                   exp.Second: "second", exp.Week: "week", exp.WeekOfYear: "week",
                   exp.DayOfWeekIso: "isodow"}


@_handles(*_PART_FUNCTIONS)
def _part_function(b: _Binder, node: exp.Func) -> Expr:  # YEAR(x) is EXTRACT(year FROM x)
    if len([v for v in node.args.values() if v is not None]) != 1:
        raise UnsupportedSQL(f"{describe(node)} is not supported")
    return _extract_of(Literal(_PART_FUNCTIONS[type(node)], VARCHAR), b.bind(node.this), node)


@_handles(exp.TimestampTrunc, exp.DateTrunc)
def _date_trunc(b: _Binder, node: exp.Func) -> Expr:
    part = _part(node.args.get("unit"), node, _TRUNC_PARTS)
    e = _temporal(b.bind(node.this), "DATE_TRUNC", node)
    return Call("date_trunc", (part, e), TIMESTAMP)  # DuckDB: TIMESTAMP, also of a DATE


@_handles(exp.DateDiff)
def _date_diff(b: _Binder, node: exp.DateDiff) -> Expr:
    part = _part(node.args.get("unit"), node, _TRUNC_PARTS)
    start, end = b.bind(node.expression), b.bind(node.this)  # sqlglot: this is the end
    t, (start, end) = unify([start, end], "DATE_DIFF", node)
    if not t.temporal:
        raise _err(f"DATE_DIFF needs DATEs or TIMESTAMPs, got {t}", node)
    return Call("date_diff", (part, start, end), BIGINT)


@_handles(exp.Anonymous)
def _anonymous(b: _Binder, node: exp.Anonymous) -> Expr:
    name = str(node.this).lower()
    args = node.expressions
    if name in ("date_part", "datepart") and len(args) == 2 and isinstance(
            args[0], exp.Literal) and args[0].is_string:
        return _extract_of(_part(args[0].this, node), b.bind(args[1]), node)
    raise UnsupportedSQL(f"function {describe(node)} is not supported")


@_handles(exp.Abs)
def _abs(b: _Binder, node: exp.Abs) -> Expr:
    e = _numeric(b.bind(node.this), "ABS", node)
    return Call("abs", (e,), e.type)


@_handles(exp.Sign)
def _sign(b: _Binder, node: exp.Sign) -> Expr:
    return Call("sign", (_numeric(b.bind(node.this), "SIGN", node),), TINYINT)


@_handles(exp.Round)
def _round(b: _Binder, node: exp.Round) -> Expr:
    e = _numeric(b.bind(node.this), "ROUND", node)
    digits_node = node.args.get("decimals")
    if node.args.get("truncate") is not None:
        raise UnsupportedSQL(f"{describe(node)} is not supported")
    if digits_node is None:
        digits: Expr = Literal(0, INTEGER)
    else:
        digits = _param(b, digits_node, INTEGER, "ROUND", node)
    if e.type.kind != "decimal":
        return Call("round", (e, digits), e.type)  # integers stay integers, DOUBLE DOUBLE
    if not isinstance(digits, Literal) or digits.value is None:
        raise _err("ROUND of a DECIMAL needs a constant number of digits", node)
    # DuckDB: DECIMAL(p, s) rounded to n digits is DECIMAL(p, min(s, max(n, 0)))
    scale = min(e.type.scale, max(digits.value, 0))
    return Call("round", (e, digits), decimal(e.type.precision, scale))


@_handles(exp.Floor, exp.Ceil)
def _floor_ceil(b: _Binder, node: exp.Floor | exp.Ceil) -> Expr:
    name = "floor" if isinstance(node, exp.Floor) else "ceil"
    if node.args.get("decimals") is not None or node.args.get("to") is not None:
        raise UnsupportedSQL(f"{describe(node)}: a number of digits is not supported")
    e = _numeric(b.bind(node.this), name.upper(), node)
    if e.type.kind == "decimal":  # DuckDB: DECIMAL(p, s) -> DECIMAL(p, 0)
        return Call(name, (e,), decimal(e.type.precision, 0))
    return Call(name, (convert(e, DOUBLE),), DOUBLE)  # DuckDB: FLOOR(INTEGER) is DOUBLE


def _double_function(name: str) -> _Handler:
    def bind(b: _Binder, node: exp.Func) -> Expr:
        args = [node.this] + ([node.expression] if name == "power" else [])
        bound = tuple(convert(_numeric(b.bind(a), name.upper(), node), DOUBLE) for a in args)
        return Call(name, bound, DOUBLE)

    return bind


_handles(exp.Pow)(_double_function("power"))
_handles(exp.Sqrt)(_double_function("sqrt"))
_handles(exp.Ln)(_double_function("ln"))
_handles(exp.Exp)(_double_function("exp"))


@_handles(exp.Log)
def _log(b: _Binder, node: exp.Log) -> Expr:
    # DuckDB: LOG(x) is the base-10 logarithm; LOG(10, x) too; LOG10(x) parses as LOG(10, x)
    base, x = node.this, node.expression
    if x is None:
        base, x = None, node.this
    if base is not None and not (isinstance(base, exp.Literal) and base.this == "10"):
        raise UnsupportedSQL(f"{describe(node)}: only base-10 logarithms are supported")
    return Call("log10", (convert(_numeric(b.bind(x), "LOG10", node), DOUBLE),), DOUBLE)


# ---------------------------------------------------------------------------------------
# Aggregates
# ---------------------------------------------------------------------------------------


def _enter_aggregate(b: _Binder, node: exp.Expression) -> None:
    """Check that an aggregate may appear here and mark its arguments as inside it."""
    if node is b.windowed:
        b.windowed = None
        return
    if b.in_aggregate is not None:
        raise _err(f"aggregate {_name(node)} inside aggregate {_name(b.in_aggregate)}", node)
    if not b.aggregates:
        raise _err(f"aggregate {_name(node)} is not allowed here", node)
    b.in_aggregate = node


def _aggregate_args(b: _Binder, node: exp.Expression, what: str
                    ) -> tuple[exp.Expression, bool, tuple[SortKey, ...]]:
    """The argument node, DISTINCT and ORDER BY of an aggregate (bound in aggregate mode)."""
    _enter_aggregate(b, node)
    arg, distinct, order = node.this, False, ()
    if isinstance(arg, exp.Order):
        order = tuple(b.sort_key(k) for k in arg.expressions)
        arg = arg.this
    if isinstance(arg, exp.Distinct):
        if len(arg.expressions) != 1:
            raise UnsupportedSQL(f"{describe(node)}: DISTINCT over several columns is not "
                                 "supported")
        arg, distinct = arg.expressions[0], True
    if arg is None:
        raise _err(f"{what} needs an argument", node)
    return arg, distinct, order


class _AggregateScope:
    """Binds an aggregate's argument with ``in_aggregate`` set, restoring it after."""

    def __init__(self, b: _Binder) -> None:
        self.b, self.saved = b, b.in_aggregate

    def __enter__(self) -> _AggregateScope:
        return self

    def __exit__(self, *exc: object) -> None:
        self.b.in_aggregate = self.saved


def _unordered_argument(b: _Binder, node: exp.AggFunc, name: str) -> tuple[Expr, bool]:
    """The bound argument and DISTINCT of an aggregate that takes no ORDER BY."""
    with _AggregateScope(b):
        arg, distinct, order = _aggregate_args(b, node, name.upper())
        if order:
            raise UnsupportedSQL(f"{describe(node)}: ORDER BY in {name.upper()}")
        return b.bind(arg), distinct


def _numeric_aggregate(name: str, result: Callable[[SQLType], SQLType]) -> _Handler:
    def bind(b: _Binder, node: exp.AggFunc) -> Expr:
        e, distinct = _unordered_argument(b, node, name)
        if name == "sum" and e.type == BOOLEAN:
            e = convert(e, INTEGER)  # DuckDB sums booleans as integers
        e = _numeric(e, name.upper(), node)
        return Aggregate(name, (e,), result(e.type), distinct=distinct)

    return bind


_handles(exp.Sum)(_numeric_aggregate("sum", sum_type))
_handles(exp.Avg)(_numeric_aggregate("avg", lambda t: DOUBLE))
_handles(exp.Stddev, exp.StddevSamp)(_numeric_aggregate("stddev_samp", lambda t: DOUBLE))
_handles(exp.StddevPop)(_numeric_aggregate("stddev_pop", lambda t: DOUBLE))
_handles(exp.Variance)(_numeric_aggregate("var_samp", lambda t: DOUBLE))
_handles(exp.VariancePop)(_numeric_aggregate("var_pop", lambda t: DOUBLE))


def _any_aggregate(name: str) -> _Handler:
    def bind(b: _Binder, node: exp.AggFunc) -> Expr:
        e, distinct = _unordered_argument(b, node, name)
        return Aggregate(name, (e,), e.type, distinct=distinct)

    return bind


_handles(exp.Min)(_any_aggregate("min"))
_handles(exp.Max)(_any_aggregate("max"))
_handles(exp.First)(_any_aggregate("first"))


@_handles(exp.Count)
def _count(b: _Binder, node: exp.Count) -> Expr:
    with _AggregateScope(b):
        if node.this is None or isinstance(node.this, exp.Star):
            _enter_aggregate(b, node)
            return Aggregate("count_star", (), BIGINT)
        arg, distinct, _ = _aggregate_args(b, node, "COUNT")
        e = b.bind(arg)
    return Aggregate("count", (e,), BIGINT, distinct=distinct)


def _bool_aggregate(name: str) -> _Handler:
    def bind(b: _Binder, node: exp.AggFunc) -> Expr:
        with _AggregateScope(b):
            arg, distinct, _ = _aggregate_args(b, node, name.upper())
            e = _boolean(b.bind(arg), name.upper(), node)
        return Aggregate(name, (e,), BOOLEAN, distinct=distinct)

    return bind


_handles(exp.LogicalAnd)(_bool_aggregate("bool_and"))
_handles(exp.LogicalOr)(_bool_aggregate("bool_or"))


def _quantile_type(t: SQLType, what: str, node: exp.Expression,
                   varchar: bool) -> SQLType:
    """DuckDB's MEDIAN / QUANTILE_CONT result: integers interpolate as DOUBLE, DECIMAL and
    DOUBLE keep their type, DATE and TIMESTAMP give TIMESTAMP (MEDIAN of VARCHAR: VARCHAR)."""
    if t.kind in ("integer", "null"):
        return DOUBLE
    if t.kind in ("decimal", "double"):
        return t
    if t.temporal:
        return TIMESTAMP
    if varchar and t == VARCHAR:
        return VARCHAR
    raise _err(f"{what} does not apply to {t}", node)


def _fraction(e: exp.Expression, node: exp.Expression) -> float:
    value = e.this if isinstance(e, exp.Literal) and not e.is_string else None
    try:
        q = float(value) if value is not None else None
    except ValueError:
        q = None
    if q is None or not 0 <= q <= 1:
        raise UnsupportedSQL(f"{describe(node)}: the quantile must be one constant between "
                             "0 and 1")
    return q


@_handles(exp.Median)
def _median(b: _Binder, node: exp.Median) -> Expr:
    with _AggregateScope(b):
        arg, distinct, _ = _aggregate_args(b, node, "MEDIAN")
        e = b.bind(arg)
    if _is_null(e):
        e = Literal(None, BIGINT)
    return Aggregate("median", (e,), _quantile_type(e.type, "MEDIAN", node, True),
                     distinct=distinct)


@_handles(exp.PercentileCont)
def _quantile_cont(b: _Binder, node: exp.PercentileCont) -> Expr:
    if node.expression is None:
        raise UnsupportedSQL(f"{describe(node)} is not supported")
    q = _fraction(node.expression, node)
    with _AggregateScope(b):
        arg, distinct, _ = _aggregate_args(b, node, "QUANTILE_CONT")
        e = b.bind(arg)
    if _is_null(e):
        e = Literal(None, BIGINT)
    return Aggregate("quantile_cont", (e,),
                     _quantile_type(e.type, "QUANTILE_CONT", node, False),
                     distinct=distinct, params=(q,))


@_handles(exp.WithinGroup)
def _within_group(b: _Binder, node: exp.WithinGroup) -> Expr:
    # PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x [DESC])
    func, order = node.this, node.expression
    if not (isinstance(func, exp.PercentileCont) and func.expression is None
            and isinstance(order, exp.Order) and len(order.expressions) == 1):
        raise UnsupportedSQL(f"{describe(node)} is not supported")
    q = _fraction(func.this, node)
    key = order.expressions[0]
    if key.args.get("desc"):
        q = 1.0 - q
    with _AggregateScope(b):
        _enter_aggregate(b, node)
        e = b.bind(key.this)
    if _is_null(e):
        e = Literal(None, BIGINT)
    return Aggregate("quantile_cont", (e,),
                     _quantile_type(e.type, "PERCENTILE_CONT", node, False), params=(q,))


@_handles(exp.GroupConcat)
def _string_agg(b: _Binder, node: exp.GroupConcat) -> Expr:
    sep_node = node.args.get("separator")
    if sep_node is None:
        sep = ","
    elif isinstance(sep_node, exp.Literal) and sep_node.is_string:
        sep = sep_node.this
    else:
        raise UnsupportedSQL(f"{describe(node)}: the separator must be a constant string")
    with _AggregateScope(b):
        arg, distinct, order = _aggregate_args(b, node, "STRING_AGG")
        e = _as_text(b.bind(arg))
    return Aggregate("string_agg", (e,), VARCHAR, distinct=distinct, order=order,
                     params=(sep,))


# ---------------------------------------------------------------------------------------
# Subqueries and unsupported constructs
# ---------------------------------------------------------------------------------------


@_handles(exp.Subquery)
def _scalar_subquery(b: _Binder, node: exp.Subquery) -> Expr:
    return b.scope.plan_subquery("scalar", _query_of(node), None, node)


@_handles(exp.Exists)
def _exists(b: _Binder, node: exp.Exists) -> Expr:
    return b.scope.plan_subquery("exists", _query_of(node.this), None, node)


@_handles(exp.Filter)
def _aggregate_filter(b: _Binder, node: exp.Filter) -> Expr:
    """``agg(...) FILTER (WHERE condition)``: only the rows where the condition is TRUE."""
    agg = b.bind(node.this)
    if not isinstance(agg, Aggregate):
        raise UnsupportedSQL(f"{describe(node)}: FILTER applies to an aggregate")
    where = node.expression.this if isinstance(node.expression, exp.Where) else node.expression
    condition = _boolean(_Binder(b.scope, aggregates=False).bind(where), "FILTER", node)
    return replace(agg, filter=condition)


@_handles(exp.Grouping)
def _grouping(b: _Binder, node: exp.Grouping) -> Expr:
    """``GROUPING(k1, k2, ...)``: which GROUP BY keys the row's grouping set leaves out, a bit
    per key (the first the highest); the SELECT binder gives it its value per set."""
    _enter_aggregate(b, node)
    if not node.expressions:
        raise _err("GROUPING needs at least one GROUP BY key", node)
    with _AggregateScope(b):
        args = tuple(b.bind(x) for x in node.expressions)
    return Aggregate("grouping", args, BIGINT)
