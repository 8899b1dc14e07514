"""Subqueries in WHERE, HAVING and SELECT, resolved before the outer query is planned.

- an uncorrelated scalar subquery runs first; its single value becomes a constant;
- ``x [NOT] IN (SELECT ...)`` (uncorrelated) runs first; its values, gathered on every rank,
  become a membership test (an :class:`InSet` node);
- an uncorrelated ``EXISTS`` runs first and becomes TRUE or FALSE;
- ``[NOT] EXISTS (SELECT ... WHERE inner.k = outer.k AND <inner-only terms>)`` becomes the
  membership of ``outer.k`` in the distinct ``inner.k`` of the filtered inner query (a semi
  join; NOT EXISTS an anti join);
- in WHERE, a ``[NOT] EXISTS`` correlated by equalities ``inner.k_i = outer.k_i`` (any
  number), at most one comparison ``inner.c OP outer.x`` (OP one of ``= <> < <= > >=``, the
  ``=`` only as such a key) and terms on the outer query alone becomes a LEFT JOIN with
  ``SELECT k_i, MIN(c), MAX(c) ... GROUP BY k_i`` (TPC-H Q21): some row has ``c <> x`` iff
  ``MIN(c) <> x OR MAX(c) <> x``, ``c < x`` iff ``MIN(c) < x``, ``c > x`` iff ``MAX(c) > x``;
- a correlated scalar aggregate in WHERE becomes a join with a grouped derived table.

Other correlations raise :class:`UnsupportedSQL`.
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
from .table import Column, Table

__all__ = ["InSet", "resolve_subqueries"]

# comparisons with their operands swapped: ``a < b`` is ``b > a``
_FLIP: dict[type, type] = {exp.EQ: exp.EQ, exp.NEQ: exp.NEQ, exp.LT: exp.GT, exp.GT: exp.LT,
                           exp.LTE: exp.GTE, exp.GTE: exp.LTE}


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
    return _valid_values(next(iter(table.columns.values())))


def _valid_values(col: Column) -> tuple[np.ndarray, Column]:
    valid = np.ones(len(col), bool) if col.valid is None else col.valid
    if col.kind == "string":
        return col.dictionary.astype(str)[col.values[valid]], col
    return col.values[valid], col


def _constant(table: Table, node: exp.Expression, name: str | None = None) -> exp.Expression:
    """The value of a one-row result as a literal (NULL without rows); ``name``: which column
    (default: the only one)."""
    if name is None:
        values, col = _single_column(table, node)
    else:
        values, col = _valid_values(table.columns[name])
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
    """The membership test of ``this`` in the subquery's rows ``table`` (the whole result
    on every rank: ``run`` gathers it everywhere, so whether it holds a NULL and whether it
    is empty are the same facts on every rank)."""
    values, col = _single_column(table, node)
    out = InSet(this=this.copy())
    # numbers go to a hash semi join as they are; strings are matched against a dictionary
    out.meta["values"] = np.unique(values) if values.dtype.kind == "O" else values
    out.meta["exists"] = exists
    # IN's three-valued logic: a NULL in the set makes a miss unknown, an empty set is false
    out.meta["has_null"] = len(values) < table.num_rows
    out.meta["empty"] = table.num_rows == 0
    return out


def _correlation(sub: exp.Select):
    """Split a subquery's WHERE into ``(inner-only terms, [(inner column, outer column)]
    equalities, the other terms that refer to the outer query)``."""
    mine = _scope(sub)
    where = sub.args.get("where")
    keep, links, others = [], [], []
    for term in conjuncts(where.this if where else None):
        outside = [c for c in term.find_all(exp.Column) if c.table and c.table not in mine]
        if not outside:
            keep.append(term)
        elif (isinstance(term, exp.EQ) and isinstance(term.this, exp.Column)
              and isinstance(term.expression, exp.Column) and len(outside) == 1):
            inside = term.expression if term.this is outside[0] else term.this
            links.append((inside, outside[0]))
        else:
            others.append(term)
    return keep, links, others


def _tables_of(node: exp.Expression) -> set[str]:
    return {c.table for c in node.find_all(exp.Column)}


def _comparison(term: exp.Expression, mine: set[str]):
    """``(inner side, operator, outer side)`` of ``inner OP outer`` (either way round) whose
    sides refer to the subquery's and to the outer query's tables alone, else None."""
    if type(term) not in _FLIP or term.find(exp.Select):
        return None
    a, b = _tables_of(term.this), _tables_of(term.expression)
    if a and a <= mine and b and not b & mine:
        return term.this, type(term), term.expression
    if b and b <= mine and a and not a & mine:
        return term.expression, _FLIP[type(term)], term.this
    return None


def _existence(sub: exp.Select, run: Callable[[exp.Select], Table]) -> exp.Boolean:
    """An uncorrelated EXISTS: run the subquery (COUNT(*) of a plain one, at most one row of
    a grouped or aggregating one, whose row count is not its input's)."""
    query = sub.copy()
    query.set("order", None)
    plain = not any(query.args.get(k) for k in ("group", "having", "limit", "distinct")) and \
        not any(e.find(exp.AggFunc) for e in query.expressions)
    if plain:
        query.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "n")])
        return exp.Boolean(this=int(_valid_values(run(query).columns["n"])[0][0]) > 0)
    if query.args.get("limit") is None:
        query.set("limit", exp.Limit(expression=exp.Literal.number(1)))
    return exp.Boolean(this=run(query).num_rows > 0)


def _exists(node: exp.Exists, run: Callable[[exp.Select], Table], outer: exp.Select,
            n: int) -> tuple[exp.Expression, bool]:
    """The replacement of an EXISTS node, and whether it added a join to ``outer`` (the
    LEFT JOIN ``_sq{n}``)."""
    sub = node.this
    if not isinstance(sub, exp.Select):
        raise UnsupportedSQL(f"EXISTS of a non-SELECT: {describe(node)}")
    if not _outer_refs(sub):
        return _existence(sub, run), False
    if sub.args.get("group") or sub.args.get("having") or any(
        e.find(exp.AggFunc) for e in sub.expressions
    ):
        raise UnsupportedSQL(f"a correlated EXISTS with GROUP BY, HAVING or aggregates is not "
                             f"supported: {describe(node)}")
    keep, links, others = _correlation(sub)
    if len(links) == 1 and not others:
        inner, outer_key = links[0]
        keys = _inner_query(sub, keep, [inner.copy()])
        keys.set("distinct", exp.Distinct())
        return _in_set(outer_key, run(keys), node, exists=True), False
    mine = _scope(sub)
    filters = [t for t in others if not _tables_of(t) & mine and not t.find(exp.Select)]
    compared = [c for t in others if (c := _comparison(t, mine)) is not None]
    where = outer.args.get("where")
    from_ = outer.args.get("from_") or outer.args.get("from")
    sources = {t.this.alias_or_name for t in [from_, *(outer.args.get("joins") or [])] if t}
    refs = {o.table for _, o in links} | {a for t in others for a in _tables_of(t) - mine}
    if (len(filters) + len(compared) != len(others) or len(compared) > 1
            or compared and compared[0][1] is exp.EQ or not refs <= sources
            or where is None or not any(node is w for w in where.walk())):
        raise UnsupportedSQL(
            f"this correlated EXISTS is not supported (in WHERE: equalities with the outer "
            f"query, at most one comparison inner OP outer, and outer-only terms): "
            f"{describe(node)}")
    test, joined = _bounded_exists(sub, keep, links, compared[0] if compared else None, run,
                                   outer, f"_sq{n}")
    # NULL (no rows in the group, a null x) must read as false: NOT EXISTS is then true
    return exp.case().when(_and([*(f.copy() for f in filters), test]), exp.true()).else_(
        exp.false()), joined


def _bounded_exists(sub: exp.Select, keep: list[exp.Expression], links, compared,
                    run: Callable[[exp.Select], Table], outer: exp.Select,
                    alias: str) -> tuple[exp.Expression, bool]:
    """The condition "some inner row matches the keys ``links`` and has ``inner OP x``"
    (``compared``, or None: any row), from MIN/MAX per key of a derived table LEFT-joined
    to ``outer`` as ``alias`` (or from constants without keys); and whether it joined."""
    items = [exp.alias_(k.copy(), f"k{i}") for i, (k, _) in enumerate(links)]
    bounds: dict[str, type] = {}
    if compared is not None:
        inner, op, x = compared
        bounds = {"mn": exp.Min, "mx": exp.Max}
        if op is not exp.NEQ:  # c < x needs only MIN(c), c > x only MAX(c)
            bounds = {"mn": exp.Min} if op in (exp.LT, exp.LTE) else {"mx": exp.Max}
        items += [exp.alias_(agg(this=inner.copy()), name) for name, agg in bounds.items()]
    if not links:  # no key to join on: one row of aggregates, used as constants
        table = run(_inner_query(sub, keep, items or [
            exp.alias_(exp.Count(this=exp.Star()), "n")]))
        if compared is None:
            return exp.Boolean(this=int(_valid_values(table.columns["n"])[0][0]) > 0), False
        return _bound(op, x, {b: _constant(table, sub, b) for b in bounds}), False
    derived = _inner_query(sub, keep, items)
    derived.set("group", exp.Group(expressions=[k.copy() for k, _ in links]))
    on = _and([exp.EQ(this=o.copy(), expression=exp.column(f"k{i}", table=alias))
               for i, (_, o) in enumerate(links)])
    outer.append("joins", exp.Join(this=exp.Subquery(
        this=derived, alias=exp.TableAlias(this=exp.to_identifier(alias))), side="LEFT", on=on))
    if compared is None:  # a matched key is never null
        return exp.Not(this=exp.Is(this=exp.column("k0", table=alias), expression=exp.Null())), True
    return _bound(op, x, {b: exp.column(b, table=alias) for b in bounds}), True


def _bound(op: type, x: exp.Expression, bounds: dict[str, exp.Expression]) -> exp.Expression:
    """Whether some value c of a group has ``c OP x``, from its MIN (``mn``) and MAX (``mx``)."""
    if op is exp.NEQ:
        return exp.Paren(this=exp.Or(this=exp.NEQ(this=bounds["mn"], expression=x.copy()),
                                     expression=exp.NEQ(this=bounds["mx"], expression=x.copy())))
    return op(this=bounds["mn" if op in (exp.LT, exp.LTE) else "mx"], expression=x.copy())


def _inner_query(sub: exp.Select, keep: list[exp.Expression],
                 items: list[exp.Expression]) -> exp.Select:
    """The subquery with its inner-only WHERE terms and the select list ``items``."""
    out = sub.copy()
    out.set("expressions", items)
    out.set("where", exp.Where(this=_and(keep)) if keep else None)
    for key in ("distinct", "order", "limit"):
        out.set(key, None)
    return out


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
    keep, links, others = _correlation(inner)
    if others or not links or any(c.table not in mine for c in value.find_all(exp.Column)):
        return False
    alias = f"_sq{n}"
    derived = inner.copy()
    derived.set("expressions", [exp.alias_(k.copy(), f"k{i}") for i, (k, _) in enumerate(links)]
                + [exp.alias_(value.copy(), "v")])
    derived.set("where", exp.Where(this=_and(keep)) if keep else None)
    derived.set("group", exp.Group(expressions=[k.copy() for k, _ in links]))
    # an inner join goes before any LEFT JOIN (the planner joins those last)
    joins = list(outer.args.get("joins") or [])
    at = next((i for i, j in enumerate(joins) if j.side == "LEFT"), len(joins))
    joins.insert(at, exp.Join(this=exp.Subquery(
        this=derived, alias=exp.TableAlias(this=exp.to_identifier(alias)))))
    outer.set("joins", joins)
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
    joins = 0  # derived tables added to the FROM clause, named _sq0, _sq1, ...
    for node in targets:
        if isinstance(node, exp.Exists):
            replacement, joined = _exists(node, run, select, joins)
            joins += joined
            node.replace(replacement)
            continue
        sub = node.args["query"] if isinstance(node, exp.In) else node
        inner = sub.this if isinstance(sub, exp.Subquery) else sub
        if not isinstance(inner, exp.Select):
            raise UnsupportedSQL(f"subquery {describe(node)}")
        refs = _outer_refs(inner)
        if refs and isinstance(node, exp.Subquery) and _decorrelate(node, inner, select, joins):
            joins += 1
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
