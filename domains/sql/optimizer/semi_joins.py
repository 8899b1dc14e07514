"""Semi joins on unique keys as inner joins: ``x IN (SELECT k ... GROUP BY k HAVING ...)``
keeps the left rows whose key is among the subquery's, and since each key appears once on
the right, that is the inner join on the keys with the right's columns dropped. As an inner
join it takes part in join ordering (:mod:`.join_order`): a subquery that keeps few keys is
joined first, before the large tables it filters are joined to each other (the few keys of
groups passing a HAVING filter a large table before it meets another).

The right side is unique on the keys where it is a GROUP BY on a subset of them, a DISTINCT
of them, or one of those under filters, sorts, limits and renames. Only joins whose whole
condition is equalities between left expressions and right columns are rewritten; a NULL
key matches nothing either way.
"""

from __future__ import annotations

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

__all__ = ["semi_to_inner", "unique_on"]


def semi_to_inner(plan: P.Node) -> P.Node:
    """``plan`` with every semi join on unique right keys made an inner join."""
    node = plan.with_inputs(tuple(semi_to_inner(c) for c in plan.inputs))
    if not (isinstance(node, P.Join) and node.kind == "semi" and node.condition is not None):
        return node
    right_names = {f.name for f in node.right.schema}
    left_names = {f.name for f in node.left.schema}
    keys: set[str] = set()
    for t in E.conjuncts(node.condition):
        if not (isinstance(t, E.Call) and t.name == "eq"):
            return node
        a, b = t.args
        if isinstance(a, E.Ref) and a.name in right_names:
            a, b = b, a
        if not (isinstance(b, E.Ref) and b.name in right_names and E.refs(a)
                and E.refs(a) <= left_names):
            return node
        keys.add(b.name)
    if not unique_on(node.right, keys):
        return node
    inner = P.Join("inner", node.left, node.right, node.condition)
    return P.Project(inner, tuple((f.name, E.Ref(f.name, f.type)) for f in node.left.schema))


def unique_on(node: P.Node, names: set[str]) -> bool:
    """Whether no two rows of ``node`` agree on the columns ``names`` (NULLs as equal)."""
    if isinstance(node, P.Aggregate) and node.phase == "complete":
        return {n for n, _ in node.keys} <= names
    if isinstance(node, P.Distinct):
        return {f.name for f in node.schema} <= names
    if isinstance(node, P.Filter | P.Sort | P.Limit):
        return unique_on(node.input, names)
    if isinstance(node, P.Project):
        below = {e.name for n, e in node.exprs if n in names and isinstance(e, E.Ref)}
        return unique_on(node.input, below)
    return False
