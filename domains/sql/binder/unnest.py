"""Unnesting a correlated query: its plan for every distinct value of the outer columns it
reads (the *domain*), the dependent join with the domain pushed down through the plan to
where those columns are read (Neumann and Kemper, "Unnesting Arbitrary Queries", BTW 2015).

The SELECT binder (:mod:`.select`) plans a correlated subquery (or LATERAL derived table)
this way when moving its correlated WHERE conjuncts into the join condition does not do:
GROUP BY, HAVING, DISTINCT, LIMIT, windows, set operations, outer columns read anywhere,
subqueries of its own correlated with it or with a query further out. The result joins the
outer rows on the domain columns with ``IS NOT DISTINCT FROM`` (a NULL outer value is a
domain value too).
"""

from __future__ import annotations

from dataclasses import replace

from hpc.domains.sql.errors import UnsupportedSQL, position
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.types import BIGINT, BOOLEAN, SQLType
from sqlglot import exp

from .scope import Names

__all__ = ["Lifter", "unnest"]


def unnest(names: Names, node: P.Node, outer: set[str], outer_rows: P.Node,
           where: exp.Expression) -> tuple[P.Node, list[E.Expr]]:
    """Any correlated query (GROUP BY, HAVING, DISTINCT, ORDER BY with LIMIT, window
    functions, set operations, outer references anywhere, subqueries of its own correlated
    with this query or further out) computed once per distinct value of the outer columns
    ``outer`` it reads: those values (the *domain*, from ``outer_rows``) are joined into its
    plan where it reads them (:class:`Lifter`, the dependent join of Neumann and Kemper's
    "Unnesting Arbitrary Queries" pushed down), and its rows are joined back to the outer
    rows on the domain columns, NULLs equal (``IS NOT DISTINCT FROM``).

    Parameters
    ----------
    names : Names
        The plan's name allocator.
    node : Node
        The correlated query's plan, reading the outer columns ``outer`` (others of queries
        further out may stay: they are constants here).
    outer : set of str
        The outer columns to decorrelate, all of them columns of ``outer_rows``.
    outer_rows : Node
        The plan the query is joined to, whose distinct values of ``outer`` are the domain.
    where : sqlglot Expression
        The query's SQL, for the position in error messages.

    Returns
    -------
    tuple
        The plan's rows for every domain value, with the domain columns, and the conditions
        joining them to the rows of ``outer_rows`` (one per column of ``outer``).
    """
    have = {f.name: f for f in outer_rows.schema}
    cols = sorted(outer)
    base = {c: names.fresh(f"domain.{c}") for c in cols}
    domain = P.Distinct(P.Project(outer_rows, tuple((base[c], E.Ref(c, have[c].type))
                                                    for c in cols)))
    lifter = Lifter(names, {c: have[c].type for c in cols}, domain, base, where)
    rebuilt = lifter.lift(node, base)
    # NULL outer values are domain values too: their rows are the subquery's for NULL
    condition = [_not_distinct(E.Ref(base[c], have[c].type), E.Ref(c, have[c].type))
                 for c in cols]
    return rebuilt, condition


def _not_distinct(a: E.Expr, b: E.Expr) -> E.Expr:
    return E.Call("is_not_distinct", (a, b), BOOLEAN)


class Lifter:
    """A correlated plan joined to the domain of its outer columns, the join pushed down.

    :meth:`lift` returns ``node``'s rows for every domain value, with the domain columns
    beside them (named by ``cmap``): its outer references read those columns, and every
    operator keeps the domain values apart. A subtree that reads no outer column is joined
    to the domain as it is (its correlated WHERE conjuncts as the condition); GROUP BY,
    DISTINCT, PARTITION BY and set operations gain the domain columns; LIMIT / OFFSET
    become a ROW_NUMBER per domain value; an aggregate without GROUP BY reads its rows
    left-joined to the domain (each aggregate filtered to the rows present), so a domain
    value without rows still has its one row of aggregates (the COUNT bug); a join whose
    sides both read outer columns (or whose padded side does) joins the two sides' domain
    columns too.

    Parameters
    ----------
    names : Names
        The plan's name allocator.
    outer : dict
        The outer columns and their types.
    domain : Node
        Their distinct values, under the names ``base``.
    base : dict
        The domain's column of each outer column.
    where : sqlglot Expression
        The query's SQL, for the position in error messages.
    """

    def __init__(self, names: Names, outer: dict[str, SQLType], domain: P.Node,
                 base: dict[str, str], where: exp.Expression) -> None:
        self.names, self.outer, self.cols = names, outer, sorted(outer)
        self.base_domain, self.base, self.where = domain, base, where
        self._reads: dict[P.Node, bool] = {}  # by the node itself: an id may be reused

    # -- helpers ------------------------------------------------------------------------------
    def fresh(self) -> dict[str, str]:
        """New names for the domain columns (each side of a join has its own)."""
        return {c: self.names.fresh(f"domain.{c}") for c in self.cols}

    def domain(self, cmap: dict[str, str]) -> P.Node:
        if cmap == self.base:
            return self.base_domain
        return P.Project(self.base_domain, tuple((cmap[c], E.Ref(self.base[c], self.outer[c]))
                                                 for c in self.cols))

    def refs(self, cmap: dict[str, str]) -> tuple[E.Expr, ...]:
        return tuple(E.Ref(cmap[c], self.outer[c]) for c in self.cols)

    def carried(self, cmap: dict[str, str]) -> tuple[tuple[str, E.Expr], ...]:
        return tuple((cmap[c], E.Ref(cmap[c], self.outer[c])) for c in self.cols)

    def moved(self, e: E.Expr, cmap: dict[str, str]) -> E.Expr:
        """``e`` reading the domain columns ``cmap`` for the outer columns."""
        return E.transform(e, lambda n: E.Ref(cmap[n.name], n.type) if isinstance(n, E.Ref)
                           and n.name in self.outer else None)

    def reads_expr(self, e: E.Expr | None) -> bool:
        return e is not None and not E.refs(e).isdisjoint(self.outer)

    def columns_read(self, node: P.Node) -> set[str]:
        """The outer columns ``node`` and the nodes below it read."""
        return {c for m in P.nodes(node) for e in P.expressions(m) for c in E.refs(e)
                if c in self.outer}

    def restricted(self, cols: set[str]) -> Lifter:
        """A lifter over the distinct values of the outer columns ``cols`` only (a side of a
        join reading fewer outer columns is computed per value of those)."""
        if set(self.cols) <= cols:
            return self
        base = {c: self.names.fresh(f"domain.{c}") for c in sorted(cols)}
        domain = P.Distinct(P.Project(self.base_domain, tuple(
            (base[c], E.Ref(self.base[c], self.outer[c])) for c in sorted(cols))))
        return Lifter(self.names, {c: self.outer[c] for c in cols}, domain, base, self.where)

    def reads(self, node: P.Node) -> bool:
        """Whether ``node`` or a node below it reads an outer column."""
        known = self._reads.get(node)
        if known is None:
            known = self._reads[node] = any(
                self.reads_expr(e) for e in P.expressions(node)) or any(
                self.reads(c) for c in node.inputs)
        return known

    # -- the dependent join, pushed down -------------------------------------------------------
    def lift(self, n: P.Node, cmap: dict[str, str]) -> P.Node:
        """``n`` for every domain value, the domain columns named by ``cmap`` beside its own."""
        if not self.reads(n):
            return P.Join("inner", n, self.domain(cmap), None)
        if isinstance(n, P.Filter):
            if not self.reads(n.input):  # a WHERE: its correlated conjuncts join the domain
                terms = E.conjuncts(n.condition)
                kept = [t for t in terms if not self.reads_expr(t)]
                source = n.input if not kept else P.Filter(n.input, E.conjoin(kept))
                return P.Join("inner", source, self.domain(cmap), E.conjoin(
                    [self.moved(t, cmap) for t in terms if self.reads_expr(t)]))
            return P.Filter(self.lift(n.input, cmap), self.moved(n.condition, cmap))
        if isinstance(n, P.Project):
            return P.Project(self.lift(n.input, cmap), tuple(
                (k, self.moved(e, cmap)) for k, e in n.exprs) + self.carried(cmap))
        if isinstance(n, P.Aggregate) and n.phase == "complete":
            return self._aggregate(n, cmap)
        if isinstance(n, P.Limit):
            return self._limit(n, cmap)
        if isinstance(n, P.Sort):
            return P.Sort(self.lift(n.input, cmap), tuple(
                replace(k, expr=self.moved(k.expr, cmap)) for k in n.keys))
        if isinstance(n, P.Window):
            partition = self.refs(cmap)
            functions = tuple((k, replace(self.moved(w, cmap), partition=tuple(
                self.moved(e, cmap) for e in w.partition) + partition)) for k, w in n.functions)
            return P.Window(self.lift(n.input, cmap), tuple(
                self.moved(e, cmap) for e in n.partition) + partition, tuple(
                replace(k, expr=self.moved(k.expr, cmap)) for k in n.order), functions)
        if isinstance(n, P.Distinct):  # over the domain columns too
            return P.Distinct(self.lift(n.input, cmap))
        if isinstance(n, P.Join):
            return self._join(n, cmap)
        if isinstance(n, P.SetOp):
            return self._set_operation(n, cmap)
        raise UnsupportedSQL(f"a correlated subquery reading outer columns in "
                             f"{n.describe()} is not supported{position(self.where)}")

    def _aggregate(self, n: P.Aggregate, cmap: dict[str, str]) -> P.Node:
        keys = tuple((k, self.moved(e, cmap)) for k, e in n.keys) + self.carried(cmap)
        aggregates = tuple((k, self.moved(a, cmap)) for k, a in n.aggregates)
        if n.keys:
            return P.Aggregate(self.lift(n.input, cmap), keys, aggregates)  # type: ignore
        # one row per domain value, of no rows where it has none: the input's rows
        # left-joined to every domain value, marked present; the aggregates skip the rest
        inner = self.fresh()
        child = self.lift(n.input, inner)
        marker = self.names.fresh("present")
        present = P.Project(child, tuple((f.name, E.Ref(f.name, f.type)) for f in child.schema)
                            + ((marker, E.Literal(True, BOOLEAN)),))
        on = E.conjoin([_not_distinct(a, b) for a, b in zip(self.refs(cmap), self.refs(inner),
                                                             strict=True)])
        joined = P.Join("left", self.domain(cmap), present, on)
        flag = E.Ref(marker, BOOLEAN)
        aggregates = tuple((k, replace(a, filter=flag if a.filter is None else E.conjoin(
            [flag, a.filter]))) for k, a in aggregates)  # type: ignore[union-attr]
        return P.Aggregate(joined, keys, aggregates)  # type: ignore[arg-type]

    def _limit(self, n: P.Limit, cmap: dict[str, str]) -> P.Node:
        """The first rows of each domain value, in the ORDER BY below the LIMIT."""
        below: P.Node = n.input
        order: tuple[E.SortKey, ...] = ()
        if isinstance(below, P.Sort):
            below, order = below.input, tuple(replace(k, expr=self.moved(k.expr, cmap))
                                              for k in below.keys)
        child = self.lift(below, cmap)
        partition = self.refs(cmap)
        row = self.names.fresh("row")
        numbered = P.Window(child, partition, order, ((row, E.Window(
            "row_number", (), BIGINT, partition=partition, order=order)),))
        number = E.Ref(row, BIGINT)
        keep = [E.Call("gt", (number, E.Literal(n.offset, BIGINT)), BOOLEAN)] \
            if n.offset else []
        if n.limit is not None:
            keep.append(E.Call("le", (number, E.Literal(n.offset + n.limit, BIGINT)),
                               BOOLEAN))
        kept = P.Filter(numbered, E.conjoin(keep)) if keep else numbered  # type: ignore
        return P.Project(kept, tuple((f.name, E.Ref(f.name, f.type)) for f in child.schema))

    def _join(self, n: P.Join, cmap: dict[str, str]) -> P.Node:
        """A join with the domain pushed into the side that reads outer columns, or into both
        (matched on their domain columns) where both read them or the side that reads is
        the one an outer join pads or a semi, anti, mark or single join tests."""
        left, right = self.reads(n.left), self.reads(n.right)
        if not right and n.kind in ("inner", "left", "semi", "anti", "mark", "single"):
            return replace(n, left=self.lift(n.left, cmap), condition=None if n.condition
                           is None else self.moved(n.condition, cmap))
        if not left and n.kind in ("inner", "right"):
            return replace(n, right=self.lift(n.right, cmap), condition=None if n.condition
                           is None else self.moved(n.condition, cmap))
        lmap = cmap if n.kind not in ("right", "full") else self.fresh()
        rmap = cmap if n.kind == "right" else self.fresh()
        lifted_left = self.lift(n.left, lmap)
        right_side: Lifter = self
        if n.kind not in ("right", "full"):  # per value of the outer columns it reads
            right_side = self.restricted(self.columns_read(n.right))
            rmap = right_side.fresh()
        lifted_right = right_side.lift(n.right, rmap)
        marker = ""
        if n.kind == "full":  # a row of one side only: that side's domain values
            marker = self.names.fresh("present")
            lifted_left = P.Project(lifted_left, tuple(
                (f.name, E.Ref(f.name, f.type)) for f in lifted_left.schema) + (
                (marker, E.Literal(True, BOOLEAN)),))
        same = [_not_distinct(E.Ref(lmap[c], t), E.Ref(rmap[c], t))
                for c, t in right_side.outer.items()]
        # the domain conjuncts first: NOT IN's null-aware comparisons are the last ones
        condition = E.conjoin(same + E.conjuncts(
            None if n.condition is None else self.moved(n.condition, lmap)))
        joined = replace(n, left=lifted_left, right=lifted_right, condition=condition)
        if n.kind in ("semi", "anti", "mark"):  # the left's columns: its domain columns
            return joined
        columns = tuple((f.name, E.Ref(f.name, f.type)) for f in n.schema)
        if n.kind == "full":
            flag = E.Call("is_not_null", (E.Ref(marker, BOOLEAN),), BOOLEAN)
            domain: tuple[tuple[str, E.Expr], ...] = tuple(
                (cmap[c], E.Case(((flag, E.Ref(lmap[c], self.outer[c])),),
                                 E.Ref(rmap[c], self.outer[c]), self.outer[c]))
                for c in self.cols)
        else:
            domain = self.carried(cmap)
        return P.Project(joined, columns + domain)

    def _set_operation(self, n: P.SetOp, cmap: dict[str, str]) -> P.Node:
        """Both sides per domain value, the domain columns compared like the others."""
        sides = []
        for side in (n.left, n.right):
            smap = self.fresh()
            sides.append(P.Project(self.lift(side, smap), tuple(
                (f.name, E.Ref(f.name, f.type)) for f in side.schema) + self.carried(smap)))
        fields = n.fields + tuple(P.Field(cmap[c], self.outer[c]) for c in self.cols)
        return P.SetOp(n.kind, n.all, sides[0], sides[1], fields)
