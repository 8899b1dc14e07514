"""Subqueries in WHERE, HAVING and SELECT, resolved before the outer query is planned.

- an uncorrelated scalar subquery runs first; its single value becomes a constant;
- ``x [NOT] IN (SELECT ...)`` (uncorrelated) runs first; its values, gathered on every rank,
  become a membership test (an :class:`InSet` node);
- ``[NOT] EXISTS (SELECT ... WHERE inner.k = outer.k AND <inner-only terms>)`` becomes the
  membership of ``outer.k`` in the distinct ``inner.k`` of the filtered inner query (a semi
  join; NOT EXISTS an anti join).

Other correlations (a correlated scalar subquery, non-equality correlation) raise
:class:`UnsupportedSQL`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlglot import exp

from .errors import SQLError, UnsupportedSQL, describe
from .expressions import InSet
from .planner import conjuncts, own_nodes
from .table import Table

__all__ = ["InSet", "resolve_subqueries"]


def _scope(select: exp.Select) -> set[str]:
    """Aliases a subquery defines itself (tables, derived tables, WITH tables, at any depth)."""
    names = {t.alias_or_name for t in select.find_all(exp.Table)}
    names |= {s.alias_or_name for s in select.find_all(exp.Subquery) if s.alias_or_name}
    return names


def _outer_refs(select: exp.Select) -> list[exp.Column]:
    mine = _scope(select)
    return [c for c in select.find_all(exp.Column) if c.table and c.table not in mine]


def _single_column(table: Table, node: exp.Expression) -> tuple[np.ndarray, Any]:
    if len(table.columns) != 1:
        raise SQLError(f"subquery must return one column, got {list(table.columns)}: "
                       f"{describe(node)}")
    col = next(iter(table.columns.values()))
    valid = np.ones(len(col), bool) if col.valid is None else col.valid
    if col.kind == "string":
        return col.dictionary.astype(str)[col.values[valid]], col
    return col.values[valid], col


def _constant(table: Table, node: exp.Expression) -> exp.Expression:
    values, col = _single_column(table, node)
    if table.num_rows > 1:
        raise SQLError(f"scalar subquery returned {table.num_rows} rows: {describe(node)}")
    if len(values) == 0:
        return exp.Null()
    v = values[0]
    if col.kind == "string":
        return exp.Literal.string(str(v))
    if col.kind == "date":
        day = dt.date(1970, 1, 1) + dt.timedelta(days=int(v))
        return exp.Cast(this=exp.Literal.string(day.isoformat()), to=exp.DataType.build("date"))
    if col.kind == "bool":
        return exp.Boolean(this=bool(v))
    return exp.Literal.number(repr(v.item()) if col.kind == "float" else int(v))


def _in_set(this: exp.Expression, table: Table, node: exp.Expression, exists: bool) -> InSet:
    values, _ = _single_column(table, node)
    out = InSet(this=this.copy())
    # numbers go to a hash semi join as they are; strings are matched against a dictionary
    out.meta["values"] = np.unique(values) if values.dtype.kind == "O" else values
    out.meta["exists"] = exists
    return out


def _correlation(sub: exp.Select):
    """Split a subquery's WHERE into ``(inner-only terms, [(inner column, outer column)]
    equalities, the first other term that refers to the outer query or None)``."""
    mine = _scope(sub)
    where = sub.args.get("where")
    keep, links = [], []
    for term in conjuncts(where.this if where else None):
        outside = [c for c in term.find_all(exp.Column) if c.table and c.table not in mine]
        if not outside:
            keep.append(term)
        elif (isinstance(term, exp.EQ) and isinstance(term.this, exp.Column)
              and isinstance(term.expression, exp.Column) and len(outside) == 1):
            inside = term.expression if term.this is outside[0] else term.this
            links.append((inside, outside[0]))
        else:
            return keep, links, term
    return keep, links, None


def _exists(node: exp.Exists, run: Callable[[exp.Select], Table]) -> InSet:
    sub = node.this
    if not isinstance(sub, exp.Select):
        raise UnsupportedSQL(f"EXISTS of a non-SELECT: {describe(node)}")
    keep, links, other = _correlation(sub)
    if other is not None:
        raise UnsupportedSQL(f"EXISTS correlated by {describe(other)} is not supported "
                             "(only one equality with the outer query)")
    if len(links) != 1 or sub.args.get("group") or sub.args.get("having"):
        raise UnsupportedSQL(f"this EXISTS is not supported (it needs exactly one equality "
                             f"with the outer query and no GROUP BY): {describe(node)}")
    inner, outer = links[0]
    keys = sub.copy()
    keys.set("expressions", [inner.copy()])
    keys.set("distinct", exp.Distinct())
    keys.set("where", exp.Where(this=_and(keep)) if keep else None)
    keys.set("order", None)
    keys.set("limit", None)
    return _in_set(outer, run(keys), node, exists=True)


def _decorrelate(node: exp.Subquery, inner: exp.Select, outer: exp.Select, n: int) -> bool:
    """Rewrite a correlated scalar aggregate in WHERE, ``x < (SELECT agg(..) FROM .. WHERE
    inner.k = outer.k AND <inner-only terms>)``, as a join with the derived table
    ``SELECT inner.k, agg(..) .. GROUP BY inner.k`` (TPC-H Q2, Q17, Q20). A key with no
    inner rows gives no join row, as the NULL the subquery gives fails the comparison.
    Returns False (leaving the query alone) when the pattern does not apply."""
    where = outer.args.get("where")
    items = inner.expressions
    if (where is None or not any(node is n for n in where.walk()) or len(items) != 1
            or inner.args.get("group") or inner.args.get("having") or inner.args.get("limit")):
        return False
    value = items[0].unalias()
    aggs = [a for a in value.find_all(exp.AggFunc)]
    if not aggs or any(isinstance(a, exp.Count) for a in aggs):
        return False  # COUNT of no rows is 0, not NULL: a join would drop those keys
    mine = _scope(inner)
    keep, links, other = _correlation(inner)
    if other is not None or not links or any(
        c.table not in mine for c in value.find_all(exp.Column)
    ):
        return False
    alias = f"_sq{n}"
    derived = inner.copy()
    derived.set("expressions", [exp.alias_(k.copy(), f"k{i}") for i, (k, _) in enumerate(links)]
                + [exp.alias_(value.copy(), "v")])
    derived.set("where", exp.Where(this=_and(keep)) if keep else None)
    derived.set("group", exp.Group(expressions=[k.copy() for k, _ in links]))
    outer.append("joins", exp.Join(this=exp.Subquery(
        this=derived, alias=exp.TableAlias(this=exp.to_identifier(alias)))))
    node.replace(exp.column("v", table=alias))
    cond = [exp.EQ(this=o.copy(), expression=exp.column(f"k{i}", table=alias))
            for i, (_, o) in enumerate(links)]
    outer.set("where", exp.Where(this=_and([outer.args["where"].this, *cond])))
    return True


def _and(terms: list[exp.Expression]) -> exp.Expression:
    out = terms[0]
    for t in terms[1:]:
        out = exp.And(this=out, expression=t)
    return out


def resolve_subqueries(select: exp.Select, run: Callable[[exp.Select], Table]) -> exp.Select:
    """A copy of ``select`` with its WHERE/HAVING/SELECT subqueries replaced (see the module
    docstring). ``run(subselect)`` answers a subquery on every rank (collective)."""
    select = select.copy()
    targets = [n for n in own_nodes(select)
               if isinstance(n, exp.Exists) or (isinstance(n, exp.In) and n.args.get("query"))
               or (isinstance(n, exp.Subquery) and not isinstance(n.parent, exp.From | exp.Join
                                                                  | exp.In))]
    if not targets:
        return select
    decorrelated: list[exp.Expression] = []
    for node in targets:
        if isinstance(node, exp.Exists):
            node.replace(_exists(node, run))
            continue
        sub = node.args["query"] if isinstance(node, exp.In) else node
        inner = sub.this if isinstance(sub, exp.Subquery) else sub
        if not isinstance(inner, exp.Select):
            raise UnsupportedSQL(f"subquery {describe(node)}")
        refs = _outer_refs(inner)
        if refs and isinstance(node, exp.Subquery) and _decorrelate(node, inner, select,
                                                                   len(decorrelated)):
            decorrelated.append(node)
            continue
        if refs:
            raise UnsupportedSQL(f"correlated subqueries are not supported yet (it refers to "
                                 f"{refs[0].sql()}): {describe(node)}")
        table = run(inner)
        if isinstance(node, exp.In):
            node.replace(_in_set(node.this, table, node, exists=False))
        else:
            node.replace(_constant(table, node))
    return select
