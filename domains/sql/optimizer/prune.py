"""Projection pushdown: every node keeps only the columns something above it reads, so a
scan reads only those columns from storage."""

from __future__ import annotations

from dataclasses import replace

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

__all__ = ["prune_columns"]


def prune_columns(plan: P.Node) -> P.Node:
    """``plan`` with unread columns dropped at every node."""
    return _prune(plan, {f.name for f in plan.schema})


def _refs(exprs: list[E.Expr]) -> set[str]:
    out: set[str] = set()
    for e in exprs:
        out |= E.refs(e)
    return out


def _prune(node: P.Node, needed: set[str]) -> P.Node:
    if isinstance(node, P.Scan):
        return replace(node, columns=tuple(c for c in node.columns if c[0] in needed))
    if isinstance(node, P.Values):
        return node
    if isinstance(node, P.Output | P.Distinct):
        everything = {f.name for f in node.input.schema}  # DISTINCT compares whole rows
        return node.with_inputs((_prune(node.input, everything),))
    if isinstance(node, P.Project):
        exprs = tuple((n, e) for n, e in node.exprs if n in needed)
        return replace(node, input=_prune(node.input, _refs([e for _, e in exprs])),
                       exprs=exprs)
    if isinstance(node, P.Filter):
        return node.with_inputs((_prune(node.input, needed | E.refs(node.condition)),))
    if isinstance(node, P.Sort):
        return node.with_inputs((_prune(node.input, needed | _refs([k.expr for k in
                                                                     node.keys])),))
    if isinstance(node, P.Exchange):
        return node.with_inputs((_prune(node.input, needed | _refs(P.expressions(node))),))
    if isinstance(node, P.Limit):
        return node.with_inputs((_prune(node.input, needed),))
    if isinstance(node, P.Aggregate):
        aggs = tuple((n, a) for n, a in node.aggregates if n in needed)
        used = _refs([e for _, e in node.keys] + [a for _, a in aggs])
        return replace(node, input=_prune(node.input, used), aggregates=aggs)
    if isinstance(node, P.Window):
        functions = tuple((n, w) for n, w in node.functions if n in needed)
        own = {n for n, _ in node.functions}
        below = (needed - own) | _refs([w for _, w in functions])
        if not functions:
            return _prune(node.input, below)
        return replace(node, input=_prune(node.input, below), functions=functions)
    if isinstance(node, P.SetOp):  # rows match by position: every column stays
        return node.with_inputs(tuple(_prune(c, {f.name for f in c.schema})
                                      for c in node.inputs))
    if isinstance(node, P.Join):
        cond = E.refs(node.condition) if node.condition is not None else set()
        want = needed | cond
        left = {f.name for f in node.left.schema} & want
        right = {f.name for f in node.right.schema} & want
        return node.with_inputs((_prune(node.left, left), _prune(node.right, right)))
    raise TypeError(f"prune_columns: unknown node {type(node).__name__}")
