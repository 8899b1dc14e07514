"""Join ordering: a tree of inner joins is flattened into its relations and conditions and
rebuilt left-deep, greedily: the largest relation (estimated) probes first, then at each
step the smallest relation connected to the joined ones by a condition is joined on
(built into the hash table); a relation connected to none waits until no other is left
(a cross join as late as possible). Outer, semi, anti, mark and single joins keep their
place: their inputs are ordered on their own.
"""

from __future__ import annotations

from typing import Any

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

from .distribute import estimate

__all__ = ["order_joins"]


def order_joins(plan: P.Node, catalog: Any) -> P.Node:
    """``plan`` with every tree of inner joins reordered (``catalog``: row counts and
    :meth:`~hpc.domains.sql.catalog.Catalog.distinct_bound` of join columns)."""
    if _inner(plan):
        leaves: list[P.Node] = []
        terms: list[E.Expr] = []
        _flatten(plan, leaves, terms)
        leaves = [order_joins(leaf, catalog) for leaf in leaves]
        return _greedy(leaves, terms, catalog)
    return plan.with_inputs(tuple(order_joins(c, catalog) for c in plan.inputs))


def _inner(node: P.Node) -> bool:
    return isinstance(node, P.Join) and node.kind == "inner"


def _flatten(node: P.Node, leaves: list[P.Node], terms: list[E.Expr]) -> None:
    if _inner(node):
        assert isinstance(node, P.Join)
        _flatten(node.left, leaves, terms)
        _flatten(node.right, leaves, terms)
        terms += E.conjuncts(node.condition)
    else:
        leaves.append(node)


def _names(node: P.Node) -> set[str]:
    return {f.name for f in node.schema}


def _sources(leaves: list[P.Node]) -> dict[str, tuple[str, str]]:
    """The scanned table and column behind each column name of the leaves."""
    out = {}
    for leaf in leaves:
        for n in P.nodes(leaf):
            if isinstance(n, P.Scan):
                out.update({name: (n.table, col) for name, col, _ in n.columns})
    return out


class _Estimates:
    """Rows of joins: ``|L| |R| / max(distinct keys)`` over the equi-join keys, the distinct
    count of a column bounded by its value range and by the rows of its side."""

    def __init__(self, catalog: Any, sources: dict[str, tuple[str, str]]) -> None:
        self.catalog, self.sources = catalog, sources

    def distinct(self, e: E.Expr, rows: float) -> float:
        if isinstance(e, E.Ref) and e.name in self.sources:
            return max(1.0, min(rows, float(self.catalog.distinct_bound(*self.sources[e.name]))))
        return max(1.0, rows)

    def join(self, left: float, lnames: set[str], right: float, rnames: set[str],
             terms: list[E.Expr]) -> float:
        best = left * right
        for t in terms:
            if isinstance(t, E.Call) and t.name == "eq":
                a, b = t.args
                if E.refs(a) <= rnames and E.refs(b) <= lnames:
                    a, b = b, a
                if E.refs(a) and E.refs(a) <= lnames and E.refs(b) and E.refs(b) <= rnames:
                    keys = max(self.distinct(a, left), self.distinct(b, right))
                    best = min(best, left * right / keys)
        return best


def _joinable(pending: list[E.Expr], have: set[str], mine: set[str]) -> list[E.Expr]:
    """The conditions that join a relation of columns ``mine`` to the joined ``have``."""
    return [t for t in pending if E.refs(t) & mine and E.refs(t) & have
            and E.refs(t) <= have | mine]


def _greedy(leaves: list[P.Node], terms: list[E.Expr], catalog: Any) -> P.Node:
    """Left-deep: the largest relation first, then each time the connected relation whose
    join is estimated smallest."""
    rows_of = catalog.num_rows
    sizes = [estimate(leaf, rows_of) for leaf in leaves]
    names = [_names(leaf) for leaf in leaves]
    est = _Estimates(catalog, _sources(leaves))
    first = max(range(len(leaves)), key=lambda i: (sizes[i], -i))
    tree, have, size = leaves[first], set(names[first]), sizes[first]
    left = [i for i in range(len(leaves)) if i != first]
    pending = list(terms)
    while left:
        conditions = {i: _joinable(pending, have, names[i]) for i in left}
        linked = [i for i in left if conditions[i]]
        if linked:
            pick = min(linked, key=lambda i: (est.join(size, have, sizes[i], names[i],
                                                       conditions[i]), sizes[i], i))
            size = est.join(size, have, sizes[pick], names[pick], conditions[pick])
        else:  # nothing connected: the smallest as a cross join
            pick = min(left, key=lambda i: (sizes[i], i))
            size = size * sizes[pick]
        both = have | names[pick]
        now = [t for t in pending if E.refs(t) <= both]
        pending = [t for t in pending if not E.refs(t) <= both]
        tree = P.Join("inner", tree, leaves[pick], E.conjoin(now))
        have = both
        left.remove(pick)
    rest = E.conjoin(pending)
    return tree if rest is None else P.Filter(tree, rest)
