"""Join ordering: a tree of inner joins is flattened into its relations and conditions and
rebuilt.

Up to :data:`DP_RELATIONS` relations connected by conditions, the tree is the cheapest of all
bushy trees without cross joins (dynamic programming over the connected subsets, as DPsub):
the cost of a tree is the sum of its joins' estimated output rows plus the rows of each
join's build side, so a selective dimension chain (supplier joined to one nation) is joined
on its own before a large table probes it. At each join the larger side (estimated) probes
and the smaller is built into the hash table. Beyond that size, or where the relations are
not all connected, the tree is left-deep and greedy: the largest relation probes first, then
at each step the relation whose join is estimated smallest; a relation connected to none
waits until no other is left (a cross join as late as possible). Outer, semi, anti, mark
and single joins keep their place: their inputs are ordered on their own.

Estimates: a relation's rows are the catalog's row counts through fixed selectivities
(:func:`~.distribute.estimate`), except that a filter's equality with a constant keeps one
row in the column's distinct values (``Catalog.distinct_estimate``); a join keeps
``|L| |R| / max(distinct keys)`` over its most selective equality.
"""

from __future__ import annotations

from typing import Any

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

from .distribute import estimate

__all__ = ["order_joins", "DP_RELATIONS"]

DP_RELATIONS = 8  # bushy dynamic programming up to this many relations (3**n / 2 splits)


def order_joins(plan: P.Node, catalog: Any) -> P.Node:
    """``plan`` with every tree of inner joins reordered (``catalog``: row counts and
    :meth:`~hpc.domains.sql.catalog.Catalog.distinct_bound` of join columns)."""
    if _inner(plan):
        leaves: list[P.Node] = []
        terms: list[E.Expr] = []
        _flatten(plan, leaves, terms)
        leaves = [order_joins(leaf, catalog) for leaf in leaves]
        return _bushy(leaves, terms, catalog) or _greedy(leaves, terms, catalog)
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

    def leaf_rows(self, leaf: P.Node) -> float:
        """Rows of a relation: :func:`~.distribute.estimate`, but a filter right above its
        scan that compares a column with a constant keeps ``1 / distinct`` of the rows
        (every other conjunct together a quarter, as the fixed estimate)."""
        rows_of = self.catalog.num_rows
        if not (isinstance(leaf, P.Filter) and isinstance(leaf.input, P.Scan)):
            if isinstance(leaf, P.Project):
                return self.leaf_rows(leaf.input)
            return estimate(leaf, rows_of)
        rows = float(rows_of(leaf.input.table))
        kept, other = rows, False
        for t in E.conjuncts(leaf.condition):
            column = _constant_equality(t)
            if column is not None and column in self.sources:
                kept /= max(1.0, float(self.catalog.distinct_estimate(*self.sources[column])))
            else:
                other = True
        return max(1.0, kept * (0.25 if other else 1.0))

    def distinct(self, e: E.Expr, rows: float) -> float:
        while isinstance(e, E.Call) and e.name == "cast":  # a key widened to its partner's
            e = e.args[0]
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


def _constant_equality(t: E.Expr) -> str | None:
    """The column a conjunct ``column = constant`` compares (either way round), else None."""
    if isinstance(t, E.Call) and t.name == "eq":
        a, b = t.args
        if isinstance(b, E.Ref) and isinstance(a, E.Literal):
            a, b = b, a
        if isinstance(a, E.Ref) and isinstance(b, E.Literal) and b.value is not None:
            return a.name
    return None


def _bushy(leaves: list[P.Node], terms: list[E.Expr], catalog: Any) -> P.Node | None:
    """The cheapest bushy tree of ``leaves`` joined on ``terms`` (see the module's text), or
    None where there are too many relations or they are not all connected."""
    n = len(leaves)
    if n > DP_RELATIONS or n < 2:
        return None
    names = [_names(leaf) for leaf in leaves]
    est = _Estimates(catalog, _sources(leaves))
    sizes = [est.leaf_rows(leaf) for leaf in leaves]
    owner = {name: i for i, ns in enumerate(names) for name in ns}
    masks = []  # the relations each condition reads
    for t in terms:
        m = 0
        for name in E.refs(t):  # a column of no relation here: never placed in a join
            m |= 1 << owner.get(name, n)
        masks.append(m)
    # each pair's most selective equality: 1 / max(distinct) of its two keys
    pair_sel: dict[tuple[int, int], float] = {}
    for t, m in zip(terms, masks, strict=True):
        if bin(m).count("1") != 2 or not (isinstance(t, E.Call) and t.name == "eq"):
            continue
        i, j = (k for k in range(n) if m >> k & 1)
        a, b = t.args
        if not (E.refs(a) <= names[i] and E.refs(b) <= names[j]):
            a, b = b, a
        if not (E.refs(a) <= names[i] and E.refs(b) <= names[j]):
            continue
        sel = 1.0 / max(est.distinct(a, sizes[i]), est.distinct(b, sizes[j]))
        pair_sel[(i, j)] = min(pair_sel.get((i, j), 1.0), sel)

    def rows(subset: int) -> float:
        members = [k for k in range(n) if subset >> k & 1]
        out = 1.0
        for k in members:
            out *= sizes[k]
        for (i, j), sel in pair_sel.items():
            if subset >> i & 1 and subset >> j & 1:
                out *= sel
        return max(out, 1.0)

    full = (1 << n) - 1
    best: dict[int, tuple[float, float, int, int]] = {1 << k: (0.0, sizes[k], 0, 0)
                                                      for k in range(n)}
    for subset in range(1, full + 1):
        if subset in best:
            continue
        choice = None
        low = subset & -subset
        part = (subset - 1) & subset
        while part:  # every split once: the part holding the lowest relation on the left
            if part & low and (subset ^ part) in best and part in best and any(
                    m & part and m & (subset ^ part) and m & ~subset == 0 for m in masks):
                a, b = best[part], best[subset ^ part]
                cost = a[0] + b[0] + min(a[1], b[1])
                if choice is None or cost < choice[0]:
                    choice = (cost, part)
            part = (part - 1) & subset
        if choice is not None:
            size = rows(subset)
            best[subset] = (choice[0] + size, size, choice[1], subset ^ choice[1])
    if full not in best:
        return None

    def build(subset: int) -> tuple[P.Node, set[str]]:
        _, _, a, b = best[subset]
        if a == 0:
            k = subset.bit_length() - 1
            return leaves[k], set(names[k])
        (left, lnames), (right, rnames) = build(a), build(b)
        if best[a][1] < best[b][1]:  # the larger side probes
            left, lnames, right, rnames = right, rnames, left, lnames
        both = lnames | rnames
        now = [t for t, m in zip(terms, masks, strict=True)
               if m & ~subset == 0 and m & a and m & b]
        return P.Join("inner", left, right, E.conjoin(now)), both

    tree, _ = build(full)
    placed = {id(t) for t, m in zip(terms, masks, strict=True)
              if m & ~full == 0 and bin(m).count("1") >= 2}
    rest = E.conjoin([t for t in terms if id(t) not in placed])
    return tree if rest is None else P.Filter(tree, rest)


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
