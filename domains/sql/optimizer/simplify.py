"""Expression simplification: constants folded once instead of per row, a DATE column
compared with a TIMESTAMP constant compared as dates (``l_shipdate < DATE '1994-01-01' +
INTERVAL '1' YEAR``: DuckDB's DATE + INTERVAL is a TIMESTAMP, so the column would be
converted row by row), and an integer column compared with a DECIMAL constant compared as
integers (``i > 9223372036854775000.0`` is a DECIMAL(20,1) comparison: beyond 64 bits)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.types import DATE, SQLType

__all__ = ["simplify", "simplify_expr"]

_DAY = 86_400_000_000  # microseconds


def simplify(plan: P.Node) -> P.Node:
    """``plan`` with every expression simplified."""
    plan = plan.with_inputs(tuple(simplify(c) for c in plan.inputs))
    return _map_exprs(plan, simplify_expr)


def _map_exprs(node: P.Node, fn: Any) -> P.Node:
    from dataclasses import replace

    if isinstance(node, P.Filter):
        return replace(node, condition=fn(node.condition))
    if isinstance(node, P.Project):
        return replace(node, exprs=tuple((n, fn(e)) for n, e in node.exprs))
    if isinstance(node, P.Join) and node.condition is not None:
        return replace(node, condition=fn(node.condition))
    if isinstance(node, P.Aggregate):
        return replace(node, keys=tuple((n, fn(e)) for n, e in node.keys),
                       aggregates=tuple((n, fn(a)) for n, a in node.aggregates))
    if isinstance(node, P.Sort):
        return replace(node, keys=tuple(replace(k, expr=fn(k.expr)) for k in node.keys))
    if isinstance(node, P.Window):  # partition and order stay as the node shares them
        functions = []
        for name, w in node.functions:
            args = tuple(fn(a) for a in w.args)
            functions.append((name, replace(w, args=args, filter=fn(w.filter)
                                            if w.filter is not None else None)))
        return replace(node, functions=tuple(functions))
    return node


def simplify_expr(e: E.Expr) -> E.Expr:
    """``e`` with constant subexpressions folded and date comparisons narrowed."""
    return E.transform(e, _rule)


def _rule(e: E.Expr) -> E.Expr | None:
    if isinstance(e, E.Call | E.Case) and e.children and all(
            isinstance(c, E.Literal) for c in e.children) and e.type.kind != "interval":
        return _fold(e)
    if isinstance(e, E.Call) and e.name in _FLIPPED and len(e.args) == 2:
        return _date_comparison(e) or _integer_comparison(e)
    return None


def _fold(e: E.Expr) -> E.Expr | None:
    """The value of a constant expression as a literal (None: leave it, e.g. it raises)."""
    from hpc.domains.sql.physical.evaluate import Batch, evaluate

    from hpc.jit import serial_below

    try:
        with serial_below(1):  # one row: its kernels start no parallel region
            col = evaluate(e, Batch({}, 1))
    except Exception:  # noqa: BLE001 - an error stays where the query runs into it
        return None
    value = _value_of(col, e.type)
    return None if value is _UNKNOWN else E.Literal(value, e.type)


_UNKNOWN = object()


def _value_of(col: Any, t: SQLType) -> Any:
    """Row 0 of a physical column as a literal's value."""
    if col.valid is not None and not bool(col.valid[0]):
        return None
    v = col.values[0]
    kind = t.kind
    if kind == "boolean":
        return bool(v)
    if kind == "integer":
        return int(v)
    if kind == "double":
        return float(v)
    if kind == "decimal":
        return Decimal(int(v)).scaleb(-t.scale)
    if kind in ("date", "timestamp"):
        return int(v)
    if kind == "varchar":
        return str(col.dictionary[int(v)])
    return _UNKNOWN


_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _date_comparison(e: E.Call) -> E.Expr | None:
    """``CAST(d AS TIMESTAMP) op TIMESTAMP c`` as ``d op' DATE c'`` (and mirrored)."""
    a, b = e.args
    name = e.name
    if isinstance(a, E.Literal):
        a, b, name = b, a, _FLIPPED[name]
    if not (isinstance(a, E.Call) and a.name == "cast" and a.type.kind == "timestamp"
            and a.args[0].type == DATE and isinstance(b, E.Literal)
            and b.type.kind == "timestamp" and b.value is not None):
        return None
    day, rest = divmod(int(b.value), _DAY)
    d = a.args[0]
    if rest == 0:  # midnight: the same comparison of days
        return E.Call(name, (d, E.Literal(day, DATE)), e.type)
    # between midnights: d < ts and d <= ts mean d <= day; d > ts and d >= ts mean d > day
    narrowed = {"lt": "le", "le": "le", "gt": "gt", "ge": "gt"}.get(name)
    if narrowed is None:
        return None  # = and <> of a date with a time that is not midnight: leave them
    return E.Call(narrowed, (d, E.Literal(day, DATE)), e.type)



def _integer_comparison(e: E.Call) -> E.Expr | None:
    """``CAST(i AS DECIMAL) op c`` of an integer ``i`` as the comparison of integers that
    keeps the same rows: ``i > 2.5`` is ``i > 2``, ``i = 2.5`` holds for no ``i`` (``i <>
    i``: FALSE, and NULL for a NULL ``i``, as the comparison), ``i < 1e30`` for every one
    (``i = i``). The constant may need more than 64 bits; the integers never do."""
    a, b = e.args
    name = e.name
    if isinstance(a, E.Literal):
        a, b, name = b, a, _FLIPPED[name]
    if not (isinstance(a, E.Call) and a.name == "cast" and a.type.kind == "decimal"
            and a.args[0].type.kind == "integer" and isinstance(b, E.Literal)
            and b.type.kind == "decimal" and b.value is not None):
        return None
    i, c = a.args[0], Decimal(b.value)
    bits = min(i.type.bits, 64)
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1  # the values ``i`` can hold
    floor, ceil = int(c.to_integral_value("ROUND_FLOOR")), int(c.to_integral_value("ROUND_CEILING"))
    lo, hi = {  # the integers i with ``i op c``: [lo, hi] (None: unbounded)
        "gt": (floor + 1, None), "ge": (ceil, None), "lt": (None, ceil - 1),
        "le": (None, floor)}.get(name, (None, None))
    if name in ("eq", "ne"):
        if floor != ceil or not low <= floor <= high:  # no value of i equals c
            return E.Call("ne" if name == "eq" else "eq", (i, i), e.type)
        return E.Call(name, (i, E.Literal(floor, i.type)), e.type)
    lo = None if lo is None or lo <= low else lo
    hi = None if hi is None or hi >= high else hi
    if (lo is not None and (lo > high or (hi is not None and lo > hi))) or (
            hi is not None and hi < low):
        return E.Call("ne", (i, i), e.type)  # no integer
    terms = [E.Call(op, (i, E.Literal(v, i.type)), e.type)
             for op, v in (("ge", lo), ("le", hi)) if v is not None]
    if not terms:
        return E.Call("eq", (i, i), e.type)  # every integer
    return terms[0] if len(terms) == 1 else E.Call("and", tuple(terms), e.type)
