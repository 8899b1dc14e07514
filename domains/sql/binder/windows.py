"""Binding window functions: ``f(...) OVER (PARTITION BY ... ORDER BY ... frame)`` into a
:class:`~..logical.expr.Window` expression (the SELECT binder then plans it as a window
node).

Ranking (ROW_NUMBER, RANK, DENSE_RANK, PERCENT_RANK, CUME_DIST, NTILE), offsets (LAG,
LEAD), values (FIRST_VALUE, LAST_VALUE, NTH_VALUE, with IGNORE NULLS) and every aggregate,
whose arguments may hold the query's own aggregates (``SUM(SUM(x)) OVER ()``). Named windows
(``WINDOW w AS (...)``, ``OVER w``, ``OVER (w ORDER BY ...)``) are resolved through the
scope. Frames as DuckDB: ROWS or RANGE, UNBOUNDED / n PRECEDING / CURRENT ROW / n FOLLOWING;
the default is the whole partition without ORDER BY, else RANGE from the partition's start
to the current row's last peer.
"""

from __future__ import annotations

import decimal

from hpc.domains.sql.errors import SQLError, UnsupportedSQL, describe, position
from hpc.domains.sql.logical.expr import (
    AGGREGATES,
    WHOLE_PARTITION,
    Aggregate,
    Bound,
    Expr,
    Frame,
    Literal,
    SortKey,
    Window,
    walk,
)
from hpc.domains.sql.logical.types import BIGINT, DOUBLE
from sqlglot import exp

from .expressions import _Binder, _boolean, _handles, unify

__all__ = ["bind_window"]

_RANKING = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank",
            exp.PercentRank: "percent_rank", exp.CumeDist: "cume_dist"}
_VALUES = {exp.FirstValue: "first_value", exp.LastValue: "last_value"}
_DEFAULT_ORDERED = Frame("range", Bound("unbounded_preceding"), Bound("current"))


@_handles(exp.Window)
def bind_window(b: _Binder, node: exp.Window) -> Expr:
    """The :class:`Window` expression of ``node``."""
    if b.in_aggregate is not None:
        raise SQLError(f"a window function inside an aggregate: {describe(node)}")
    if not b.aggregates:
        raise SQLError(f"a window function is not allowed here: {describe(node)}")
    partition_nodes, order_node, spec = _definition(b, node)
    partition = tuple(b.bind(p) for p in partition_nodes)
    order = tuple(b.sort_key(o) for o in (order_node.expressions if order_node else []))
    func, ignore_nulls, condition = node.this, False, None
    if isinstance(func, exp.IgnoreNulls | exp.RespectNulls):
        ignore_nulls = isinstance(func, exp.IgnoreNulls)
        func = func.this
    if isinstance(func, exp.Filter):
        condition, func = func.expression, func.this
        condition = condition.this if isinstance(condition, exp.Where) else condition
    w = _function(b, func, node)
    frame = _frame(b, spec, order, node) if spec is not None else (
        _DEFAULT_ORDERED if order else WHOLE_PARTITION)
    if ignore_nulls and w.name not in ("lag", "lead", "first_value", "last_value",
                                       "nth_value"):
        raise SQLError(f"IGNORE NULLS applies to LAG, LEAD and the value functions: "
                       f"{describe(node)}")
    filt = None
    if condition is not None:
        if w.name not in AGGREGATES:
            raise SQLError(f"FILTER applies to aggregates: {describe(node)}")
        filt = _boolean(_Binder(b.scope, aggregates=False).bind(condition), "FILTER", node)
    out = Window(w.name, w.args, w.type, partition, order, frame, w.params, ignore_nulls,
                 w.distinct, filt)
    for e in out.children:
        if any(isinstance(n, Window) for n in walk(e)):
            raise SQLError(f"window functions cannot be nested: {describe(node)}")
    return out


def _definition(b: _Binder, node: exp.Window
                ) -> tuple[list[exp.Expression], exp.Order | None, exp.WindowSpec | None]:
    """PARTITION BY terms, ORDER BY and frame of ``node``, a named window it refers to
    (``OVER w`` or ``OVER (w ...)``) supplying what it leaves out."""
    partition = list(node.args.get("partition_by") or [])
    order, spec = node.args.get("order"), node.args.get("spec")
    name = node.args.get("alias")
    seen: set[str] = set()
    while name is not None:
        key = name.name if isinstance(name, exp.Identifier) else str(name)
        named = b.scope.windows.get(key)
        if named is None:
            raise SQLError(f"unknown window {key!r}{position(node)}")
        if key in seen:
            raise SQLError(f"window {key!r} refers to itself{position(node)}")
        seen.add(key)
        if partition and named.args.get("partition_by"):
            raise SQLError(f"a window that refers to {key!r} cannot set its PARTITION BY"
                           f"{position(node)}")
        partition = partition or list(named.args.get("partition_by") or [])
        if order is not None and named.args.get("order") is not None:
            raise SQLError(f"a window that refers to {key!r} cannot override its ORDER BY"
                           f"{position(node)}")
        order = order if order is not None else named.args.get("order")
        spec = spec if spec is not None else named.args.get("spec")
        name = named.args.get("alias")
    return partition, order, spec


def _function(b: _Binder, func: exp.Expression, node: exp.Window) -> Window:
    """The function part of a window expression (its partition, order and frame unset)."""
    for cls, name in _RANKING.items():
        if isinstance(func, cls):
            if func.args.get("expressions") or func.args.get("this"):
                raise SQLError(f"{name.upper()}() takes no arguments: {describe(node)}")
            t = DOUBLE if name in ("percent_rank", "cume_dist") else BIGINT
            return Window(name, (), t)
    if isinstance(func, exp.Ntile):
        return Window("ntile", (), BIGINT, params=(_count(b, func.this, "NTILE", 1, node),))
    if isinstance(func, exp.Lag | exp.Lead):
        name = "lag" if isinstance(func, exp.Lag) else "lead"
        x = b.bind(func.this)
        offset = func.args.get("offset")
        k = _count(b, offset, name.upper(), None, node) if offset is not None else 1
        default = func.args.get("default")
        if default is None:
            return Window(name, (x,), x.type, params=(k,))
        t, (x, d) = unify([x, b.bind(default)], name.upper(), node)
        return Window(name, (x, d), t, params=(k,))
    for cls, name in _VALUES.items():
        if isinstance(func, cls):
            x = b.bind(func.this)
            return Window(name, (x,), x.type)
    if isinstance(func, exp.NthValue):
        if func.args.get("from_first") is False:
            raise UnsupportedSQL(f"NTH_VALUE ... FROM LAST is not supported: {describe(node)}")
        x = b.bind(func.this)
        n = _count(b, func.args.get("offset"), "NTH_VALUE", 1, node)
        return Window("nth_value", (x,), x.type, params=(n,))
    b.windowed = func  # its arguments may hold the query's aggregates
    try:
        agg = b.bind(func)
    finally:
        b.windowed = None
    if not isinstance(agg, Aggregate) or agg.name in ("grouping",):
        raise UnsupportedSQL(f"{describe(func)} as a window function is not supported")
    if agg.order:
        raise UnsupportedSQL(f"an ordered aggregate as a window function: {describe(node)}")
    return Window(agg.name, agg.args, agg.type, params=agg.params, distinct=agg.distinct)


def _count(b: _Binder, arg: exp.Expression | None, what: str, least: int | None,
           node: exp.Window) -> int:
    """A constant integer argument (at least ``least`` where given)."""
    e = b.bind(arg) if arg is not None else None
    if not (isinstance(e, Literal) and e.type.kind == "integer" and e.value is not None):
        raise UnsupportedSQL(f"{what} needs a constant integer argument: {describe(node)}")
    if least is not None and e.value < least:
        raise SQLError(f"{what}'s argument must be at least {least}, got {e.value}"
                       f"{position(node)}")
    return int(e.value)


def _frame(b: _Binder, spec: exp.WindowSpec, order: tuple[SortKey, ...],
           node: exp.Window) -> Frame:
    kind = (spec.args.get("kind") or "").lower()
    if kind not in ("rows", "range", "groups"):
        raise UnsupportedSQL(f"{kind.upper() or 'this'} frames are not supported (ROWS, "
                             f"RANGE and GROUPS are): {describe(node)}")
    if kind == "groups" and not order:
        raise SQLError(f"a GROUPS frame needs an ORDER BY: {describe(node)}")
    exclude = _exclusion(spec.args.get("exclude"), node)
    start = _bound(b, spec.args.get("start"), spec.args.get("start_side"), kind, order, node)
    end_node = spec.args.get("end")
    end = Bound("current") if end_node is None else _bound(
        b, end_node, spec.args.get("end_side"), kind, order, node)
    sides = ("unbounded_preceding", "preceding", "current", "following", "unbounded_following")
    if start.side == "unbounded_following" or end.side == "unbounded_preceding" or \
            sides.index(start.side) > sides.index(end.side):
        raise SQLError(f"the frame starts after it ends: {describe(node)}")
    return Frame(kind, start, end, exclude)


_EXCLUSIONS = {"NO OTHERS": "no_others", "CURRENT ROW": "current", "GROUP": "group",
               "TIES": "ties"}


def _exclusion(value: exp.Expression | str | None, node: exp.Window) -> str:
    """A frame's EXCLUDE clause as one of :data:`~.expr.FRAME_EXCLUSIONS`."""
    if value is None:
        return "no_others"
    text = " ".join((value.name if isinstance(value, exp.Expression) else value).upper().split())
    if text not in _EXCLUSIONS:
        raise SQLError(f"unknown frame exclusion EXCLUDE {text}: {describe(node)}")
    return _EXCLUSIONS[text]


def _bound(b: _Binder, value: exp.Expression | str | None, side: str | None, kind: str,
           order: tuple[SortKey, ...], node: exp.Window) -> Bound:
    text = value.upper() if isinstance(value, str) else None
    if text == "UNBOUNDED":
        return Bound("unbounded_preceding" if (side or "").lower() == "preceding"
                     else "unbounded_following")
    if text == "CURRENT ROW":
        return Bound("current")
    if not isinstance(value, exp.Expression):
        raise SQLError(f"malformed window frame: {describe(node)}")
    offset = b.bind(value)
    where = (side or "").lower()
    if not (isinstance(offset, Literal) and offset.value is not None):
        raise UnsupportedSQL(f"a frame offset must be a constant: {describe(node)}")
    if kind in ("rows", "groups"):
        if offset.type.kind != "integer" or offset.value < 0:
            raise SQLError(f"a {kind.upper()} frame offset must be a non-negative integer: "
                           f"{describe(node)}")
        return Bound(where, int(offset.value))
    if len(order) != 1:
        raise SQLError(f"a RANGE frame with an offset needs exactly one ORDER BY key: "
                       f"{describe(node)}")
    key_type = order[0].expr.type
    if key_type.kind in ("date", "timestamp") and offset.type.kind == "interval":
        if any(v < 0 for v in offset.value):
            raise SQLError(f"a RANGE frame's INTERVAL offset must not be negative: "
                           f"{describe(node)}")
        return Bound(where, tuple(int(v) for v in offset.value))
    if key_type.kind not in ("integer", "decimal", "double") or offset.type.kind not in (
            "integer", "decimal", "double"):
        raise UnsupportedSQL(f"a RANGE frame offset over {key_type} ordering is not "
                             f"supported (numeric offsets over numeric keys and INTERVAL offsets "
                             f"over DATE and TIMESTAMP keys are): {describe(node)}")
    if offset.value < 0:
        raise SQLError(f"a RANGE frame offset must not be negative: {describe(node)}")
    if key_type.kind == "double":
        return Bound(where, float(offset.value))
    exact = decimal.Decimal(str(offset.value))
    units = exact.scaleb(key_type.scale if key_type.kind == "decimal" else 0)
    if units != units.to_integral_value():
        raise UnsupportedSQL(f"a RANGE frame offset with more decimals than its ORDER BY key "
                             f"({key_type}): {describe(node)}")
    return Bound(where, exact if key_type.kind == "decimal" else int(exact))
