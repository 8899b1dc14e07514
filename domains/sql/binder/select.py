"""Binding a query into the logical plan: FROM (tables, derived tables, WITH, every join),
WHERE, GROUP BY and aggregates, HAVING, the SELECT list, DISTINCT, ORDER BY, LIMIT/OFFSET.

Nothing runs here. A subquery met in an expression is planned as a join of the plan built
so far with the subquery's plan: a mark join for EXISTS and IN (its boolean column stands
for the predicate), a single join for a scalar subquery. Correlated subqueries are
decorrelated on the way: the correlated conjuncts of a plain subquery's WHERE become the
join's condition; an aggregate subquery correlated by equalities is grouped by its
correlation columns and joined on them (COUNT's empty groups read 0, not NULL); any other
is computed once per distinct value of the outer columns it reads (:mod:`.unnest`:
the dependent join with that domain pushed down through its plan, Neumann and Kemper's
unnesting of arbitrary queries). A subquery reading a column two or more levels out is
decorrelated against the columns of the query it sits in; the outer references it keeps
make that query's plan correlated in turn, decorrelated where that one is joined. An
aggregate in a subquery whose arguments read only an enclosing query's columns (``(SELECT
COUNT(*) FROM u WHERE u.w < MAX(t.x))``) belongs to that query's groups, as in DuckDB: its
Aggregate computes it, and the subquery reads its column. A WHERE conjunct that is a bare
mark then turns its mark join into a semi join, a negated one into an anti join (null-aware
for NOT IN).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from hpc.domains.sql.errors import SQLError, UnsupportedSQL, describe, position
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.types import BIGINT, BOOLEAN, DOUBLE, SQLType, common_type, sum_type
from sqlglot import exp, parse_one
from sqlglot.errors import OptimizeError, ParseError

from . import windows  # noqa: F401  (registers the window function binder)
from .expressions import bind_expression, explicit_nulls, unify
from .scope import Names, Scope
from .unnest import unnest

__all__ = ["bind", "parse"]

Schema = dict[str, dict[str, SQLType]]


def parse(sql: str, schema: Schema) -> exp.Expression:
    """``sql`` parsed (DuckDB dialect) and qualified against ``schema`` (every column carries
    its table alias, ``*`` expanded, USING turned into ON)."""
    from sqlglot.optimizer.qualify import qualify

    try:
        tree = parse_one(sql, dialect="duckdb")
    except ParseError as exc:
        e = exc.errors[0] if exc.errors else {}
        where = f" at line {e['line']}, column {e['col']}" if "line" in e else ""
        raise SQLError(f"malformed query: {e.get('description', exc)}{where}") from None
    if tree is None:
        raise SQLError("empty query")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    for t in tree.find_all(exp.Table):
        if t.name not in schema and t.name not in ctes:
            raise SQLError(f"unknown table {t.name!r}{position(t)}; tables: {sorted(schema)}")
    for node in tree.walk():  # the names the user wrote, before qualify renames them
        if isinstance(node, exp.Select):
            node.meta["output_names"] = [_output_name(e) for e in node.expressions]
    key = tuple((t, tuple((c, str(ty)) for c, ty in cols.items())) for t, cols in schema.items())
    try:
        return qualify(tree, schema=_sqlglot_schema(key), dialect="duckdb",
                       quote_identifiers=False)
    except OptimizeError as exc:
        raise SQLError(str(exc)) from None


@lru_cache(maxsize=32)
def _sqlglot_schema(key: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]) -> Any:
    """sqlglot's schema of the tables ``key`` (names and type names), built once per set of
    tables: normalising every name costs more than a small query's whole execution."""
    from sqlglot.schema import MappingSchema

    return MappingSchema({t: dict(cols) for t, cols in key}, dialect="duckdb")


def _output_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column):
        return node.name
    return node.sql(dialect="duckdb")


def bind(sql: str, schema: Schema) -> P.Node:
    """The logical plan of ``sql`` over tables of ``schema`` (``{table: {column: type}}``).

    Raises
    ------
    SQLError
        A malformed query, an unknown table or column, a type error.
    UnsupportedSQL
        A construct the engine does not implement, named with its line and column.
    """
    tree = parse(sql, schema)
    binder = _Binder(schema, Names())
    node, fields, names = binder.query(tree, None, {})
    return semi_joins(P.Output(_project(node, fields), tuple(names)))


def semi_joins(plan: P.Node) -> P.Node:
    """Mark joins whose mark is a conjunct of the filter above them become semi joins (a
    negated mark: anti joins, null-aware for NOT IN); the conjunct goes. A Project above
    that still passes the mark on (a decorrelated subquery's keeps every column) reads its
    value there: TRUE above a semi join, FALSE above an anti join."""
    return _semi_joins(plan, {})


def _semi_joins(plan: P.Node, removed: dict[str, bool]) -> P.Node:
    plan = plan.with_inputs(tuple(_semi_joins(c, removed) for c in plan.inputs))
    if isinstance(plan, P.Project) and removed:
        have = {f.name for f in plan.input.schema}

        def value(e: E.Expr) -> E.Expr | None:
            if isinstance(e, E.Ref) and e.name in removed and e.name not in have:
                return E.Literal(removed[e.name], BOOLEAN)
            return None

        return P.Project(plan.input, tuple((n, E.transform(e, value)) for n, e in plan.exprs))
    if not isinstance(plan, P.Filter):
        return plan
    terms = E.conjuncts(plan.condition)
    wanted: dict[str, str] = {}
    for t in terms:
        if isinstance(t, E.Ref) and t.type == BOOLEAN:
            wanted[t.name] = "semi"
        elif isinstance(t, E.Call) and t.name == "not" and isinstance(t.args[0], E.Ref):
            wanted[t.args[0].name] = "anti"
    done: set[str] = set()

    def rewrite(node: P.Node) -> P.Node:
        if not (isinstance(node, P.Join) and node.kind == "mark"):
            return node
        left = rewrite(node.left)
        if node.mark in wanted:
            done.add(node.mark)
            removed[node.mark] = wanted[node.mark] == "semi"
            return P.Join(wanted[node.mark], left, node.right, node.condition,
                          null_aware=node.null_aware if wanted[node.mark] == "anti" else 0)
        return node.with_inputs((left, node.right))

    below = rewrite(plan.input)
    if not done:
        return plan
    rest = [t for t in terms if not (
        (isinstance(t, E.Ref) and t.name in done)
        or (isinstance(t, E.Call) and t.name == "not" and isinstance(t.args[0], E.Ref)
            and t.args[0].name in done))]
    condition = E.conjoin(rest)
    return below if condition is None else P.Filter(below, condition)


def _project(node: P.Node, fields: list[P.Field]) -> P.Node:
    """``node`` narrowed to ``fields`` (a Project only where that changes anything)."""
    if [f.name for f in node.schema] == [f.name for f in fields]:
        return node
    return P.Project(node, tuple((f.name, E.Ref(f.name, f.type)) for f in fields))


@dataclass
class _Relation:
    """A bound FROM item or join tree: its plan and its columns by (alias, column)."""

    node: P.Node
    columns: dict[tuple[str, str], P.Field] = field(default_factory=dict)


class _Binder:
    def __init__(self, schema: Schema, names: Names) -> None:
        self.schema = schema
        self.names = names
        # a WITH table's plan, bound once: id of its query -> plan
        self.ctes: dict[int, tuple[P.Node, list[P.Field], list[str]]] = {}

    # -- queries ---------------------------------------------------------------------------
    def query(self, tree: exp.Expression, outer: Scope | None,
              ctes: dict[str, exp.Expression]) -> tuple[P.Node, list[P.Field], list[str]]:
        """A query's plan, its output fields and the names the user sees."""
        if isinstance(tree, exp.Subquery):
            return self.query(tree.this, outer, ctes)
        if isinstance(tree, exp.Union | exp.Intersect | exp.Except):
            return self.set_operation(tree, outer, ctes)
        if not isinstance(tree, exp.Select):
            raise UnsupportedSQL(f"only SELECT statements are supported, got {describe(tree)}")
        return _SelectBinder(self, tree, outer, ctes).bind()

    def set_operation(self, tree: exp.Expression, outer: Scope | None,
                      ctes: dict[str, exp.Expression]
                      ) -> tuple[P.Node, list[P.Field], list[str]]:
        """UNION / INTERSECT / EXCEPT [ALL]: both sides converted to their columns' common
        types; ORDER BY, LIMIT and OFFSET over the result by output name or position."""
        with_ = tree.args.get("with_") or tree.args.get("with")
        if with_:
            ctes = {**ctes, **{c.alias_or_name: c.this for c in with_.expressions}}
        if tree.args.get("side") or tree.args.get("kind"):
            raise UnsupportedSQL(f"this form of set operation is not supported: "
                                 f"{describe(tree)}")
        left, lf, names = self.query(tree.this, outer, ctes)
        right, rf, rnames = self.query(tree.expression, outer, ctes)
        if tree.args.get("by_name"):
            left, lf, right, rf, names = self._by_name(left, lf, names, right, rf, rnames, tree)
        if len(lf) != len(rf):
            raise SQLError(f"{type(tree).__name__.upper()}: the sides have {len(lf)} and "
                           f"{len(rf)} columns{position(tree)}")
        fields, lcols, rcols = [], [], []
        for name, a, b in zip(names, lf, rf, strict=True):
            t = common_type(a.type, b.type)
            if t is None:
                raise SQLError(f"{type(tree).__name__.upper()}: column {name!r} is {a.type} "
                               f"on one side and {b.type} on the other{position(tree)}")
            t = BIGINT if t.kind == "null" else t
            fields.append(P.Field(self.names.fresh(name), t))
            lcols.append((self.names.fresh(name), _converted(E.Ref(a.name, a.type), t)))
            rcols.append((self.names.fresh(name), _converted(E.Ref(b.name, b.type), t)))
        kind = {exp.Union: "union", exp.Intersect: "intersect", exp.Except: "except"}[
            type(tree)]
        node: P.Node = P.SetOp(kind, not tree.args.get("distinct"),
                               P.Project(left, tuple(lcols)), P.Project(right, tuple(rcols)),
                               tuple(fields))
        node = _order_and_limit(node, tree, fields, names)
        return node, fields, names

    def _by_name(self, left: P.Node, lf: list[P.Field], lnames: list[str], right: P.Node,
                 rf: list[P.Field], rnames: list[str], tree: exp.Expression):  # type: ignore
        """``UNION [ALL] BY NAME``: both sides' columns matched by name (case-insensitive),
        the left's first, then the right's others; a column one side lacks is NULL there."""
        if not isinstance(tree, exp.Union):
            raise UnsupportedSQL(f"BY NAME applies to UNION: {describe(tree)}")
        order: list[str] = []
        for n in lnames + rnames:
            if n.lower() not in [o.lower() for o in order]:
                order.append(n)

        def side(node: P.Node, fields: list[P.Field], names: list[str],
                 other: list[P.Field], other_names: list[str]) -> tuple[P.Node, list[P.Field]]:
            by = {n.lower(): f for n, f in zip(names, fields, strict=True)}
            others = {n.lower(): f for n, f in zip(other_names, other, strict=True)}
            cols = []
            for n in order:
                f = by.get(n.lower())
                e: E.Expr = E.Ref(f.name, f.type) if f is not None else E.Literal(
                    None, others[n.lower()].type)
                cols.append((self.names.fresh(n), e))
            out = [P.Field(c, e.type) for c, e in cols]
            return P.Project(node, tuple(cols)), out

        left2, lf2 = side(left, lf, lnames, rf, rnames)
        right2, rf2 = side(right, rf, rnames, lf, lnames)
        return left2, lf2, right2, rf2, order

    def relation(self, item: exp.Expression, outer: Scope | None,
                 ctes: dict[str, exp.Expression]) -> _Relation:
        """A FROM item: a catalog table, a WITH table or a derived table."""
        alias = item.alias_or_name
        if isinstance(item, exp.Table) and item.name in ctes:
            return self.with_table(ctes[item.name], alias, outer, ctes)
        if isinstance(item, exp.Table):
            if item.args.get("db") or item.name not in self.schema:
                raise SQLError(f"unknown table {item.sql(dialect='duckdb')}{position(item)}")
            cols = tuple((self.names.fresh(f"{alias}.{c}"), c, t)
                         for c, t in self.schema[item.name].items())
            scan = P.Scan(item.name, alias, cols)
            return _Relation(scan, {(alias, c): P.Field(n, t) for n, c, t in cols})
        if isinstance(item, exp.Subquery):
            return self.derived(item.this, alias, outer, ctes)
        raise UnsupportedSQL(f"FROM item {describe(item)}: only tables and subqueries")

    def with_table(self, tree: exp.Expression, alias: str, outer: Scope | None,
                   ctes: dict[str, exp.Expression]) -> _Relation:
        """A reference to a WITH table: its plan, bound once per query, under fresh column
        names (a Project renaming them), so every reference reads the same subplan, which
        runs once (the executor computes equal subplans once)."""
        key = id(tree)
        if key not in self.ctes:
            try:  # bound on its own: it must not read the columns of an enclosing query
                self.ctes[key] = self.query(tree, None, ctes)
            except SQLError:
                return self.derived(tree, alias, outer, ctes)
        node, fields, names = self.ctes[key]
        renamed = [P.Field(self.names.fresh(f.name), f.type) for f in fields]
        node = P.Project(_project(node, fields), tuple(
            (r.name, E.Ref(f.name, f.type)) for r, f in zip(renamed, fields, strict=True)))
        columns: dict[tuple[str, str], P.Field] = {}
        for name, f in zip(names, renamed, strict=True):
            columns.setdefault((alias, name), f)
        return _Relation(node, columns)

    def derived(self, tree: exp.Expression, alias: str, outer: Scope | None,
                ctes: dict[str, exp.Expression]) -> _Relation:
        node, fields, names = self.query(tree, outer, ctes)
        columns: dict[tuple[str, str], P.Field] = {}
        for name, f in zip(names, fields, strict=True):
            columns.setdefault((alias, name), f)
        return _Relation(_project(node, fields), columns)


_JOIN_KINDS = {("", ""): "inner", ("", "INNER"): "inner", ("", "CROSS"): "inner",
               ("LEFT", ""): "left", ("LEFT", "OUTER"): "left", ("RIGHT", ""): "right",
               ("RIGHT", "OUTER"): "right", ("FULL", ""): "full", ("FULL", "OUTER"): "full",
               ("", "SEMI"): "semi", ("LEFT", "SEMI"): "semi", ("", "ANTI"): "anti",
               ("LEFT", "ANTI"): "anti"}  # fmt: skip


class _SelectBinder:
    """One SELECT: builds its plan bottom-up in ``self.node``."""

    def __init__(self, binder: _Binder, select: exp.Select, outer: Scope | None,
                 ctes: dict[str, exp.Expression]) -> None:
        self.binder = binder
        self.select = select
        self.outer = outer
        self.ctes = dict(ctes)
        self.node: P.Node = P.Values(((),))
        self.pending: list[tuple[str, tuple]] | None = None
        self._placeholders: dict[tuple[str, str, str], str] = {}  # subquery -> its name
        self.planned: dict[str, E.Expr] = {}  # placeholder -> the planned subquery's value
        self._types: dict[str, SQLType] = {}  # placeholder -> its type
        # aggregates of this query's groups written in its subqueries (their arguments read
        # only this query's columns): computed by this query's Aggregate
        self.outer_aggs: list[tuple[str, E.Aggregate]] = []
        self._clause = ""  # "where", "group": clauses where an aggregate may not appear
        self._grouped = False  # the Aggregate is planned: no aggregate may be added
        self.scope = Scope({}, binder.names, outer=outer, subquery=self._subquery,
                           aggregate=self._outer_aggregate)

    # -- the clauses, in order --------------------------------------------------------------
    def bind(self) -> tuple[P.Node, list[P.Field], list[str]]:
        s = self.select
        self.scope.windows = {w.this.name: w for w in s.args.get("windows") or []}
        with_ = s.args.get("with_") or s.args.get("with")
        if with_:
            if with_.args.get("recursive"):
                raise UnsupportedSQL(f"WITH RECURSIVE is not supported{position(with_)}")
            self.ctes.update({c.alias_or_name: c.this for c in with_.expressions})
        self._from()
        where = s.args.get("where")
        if where is not None:
            self._clause = "where"
            condition = self._bind(where.this)  # first: its subqueries join onto self.node
            self._clause = ""
            _check_boolean(condition, where)
            _no_window(condition, "WHERE", where)
            if any(isinstance(n, E.Aggregate) for n in E.walk(condition)):
                raise SQLError(f"WHERE clause cannot contain aggregates{position(where)}")
            self.node = P.Filter(self.node, condition)
        self.pending = [] if _aggregated(s) else None  # plan their subqueries after grouping
        items = [self._bind(e) for e in s.expressions]
        names = list(s.meta.get("output_names") or [])
        if len(names) != len(items):  # * expanded
            names = [_output_name(e) for e in s.expressions]
        for name, e in zip([e.alias_or_name for e in s.expressions], items, strict=True):
            self.scope.aliases.setdefault(name, e)
        having = s.args.get("having")
        having_expr = self._bind(having.this) if having is not None else None
        if having_expr is not None:
            _no_window(having_expr, "HAVING", having)
        qualify = s.args.get("qualify")
        if qualify is not None:  # bound beside the SELECT list: its aggregates are the same
            items.append(self._bind(qualify.this))
            _check_boolean(items[-1], qualify)
        order = self._order_keys()
        group = s.args.get("group")
        keys, sets = self._grouping(group) if group else ([], None)
        # the subqueries of GROUP BY keys and of aggregates' arguments (SUM((SELECT ...))) are
        # of the rows before grouping
        exprs = items + [k.expr for k in order] + ([having_expr] if having_expr is not None
                                                   else [])
        early = {r for e in exprs for n in E.walk(e) if isinstance(n, E.Aggregate)
                 for r in E.refs(n)}
        if self.pending and (keys or early & {n for n, _ in self.pending}):
            self._clause = "group"
            keys = self._plan_pending(keys, early)
            self._clause = ""
            items = [self._planned_values(e) for e in items]
            having_expr = self._planned_values(having_expr) if having_expr is not None \
                else None
            order = [E.SortKey(self._planned_values(k.expr), k.ascending, k.nulls_first)
                     for k in order]
        aggregated = bool(keys) or bool(self.outer_aggs) or any(
            isinstance(n, E.Aggregate) for e in items + [k.expr for k in order]
            + ([having_expr] if having_expr is not None else []) for n in E.walk(e))
        if aggregated:
            items, having_expr, order = self._aggregate(keys, items, having_expr, order, sets)
        elif having_expr is not None:
            raise SQLError(f"HAVING without GROUP BY or aggregates{position(having)}")
        if having_expr is not None:
            (having_expr,) = self._plan_pending([having_expr])
            self.node = P.Filter(self.node, having_expr)
        items = self._plan_pending(items)
        order = [E.SortKey(e, k.ascending, k.nulls_first) for k, e in
                 zip(order, self._plan_pending([k.expr for k in order]), strict=True)]
        done = self._windows(items + [k.expr for k in order])
        items = done[: len(items)]
        order = [E.SortKey(e, k.ascending, k.nulls_first)
                 for k, e in zip(order, done[len(items):], strict=True)]
        if qualify is not None:
            self.node = P.Filter(self.node, items.pop())
        out = self._output_fields(items, names)
        exprs = [(f.name, e) for f, e in zip(out, items, strict=True)]
        distinct = s.args.get("distinct")
        if distinct is not None and distinct.args.get("on"):
            raise UnsupportedSQL(f"DISTINCT ON is not supported yet{position(distinct)}")
        hidden: list[tuple[str, E.Expr]] = []
        sort_keys: list[E.SortKey] = []
        for k in order:  # ORDER BY an output column, or an expression computed beside them
            match = next((f for f, e in zip(out, items, strict=True) if e == k.expr), None)
            if match is None:
                if distinct is not None:
                    raise SQLError(f"ORDER BY {k.expr} of a SELECT DISTINCT must be an output "
                                   "column")
                name = self.binder.names.fresh("order")
                hidden.append((name, k.expr))
                match = P.Field(name, k.expr.type)
            sort_keys.append(E.SortKey(E.Ref(match.name, match.type), k.ascending,
                                       k.nulls_first))
        self.node = P.Project(self.node, tuple(exprs + hidden))
        if distinct is not None:
            self.node = P.Distinct(self.node)
        if sort_keys:
            self.node = P.Sort(self.node, tuple(sort_keys))
        limit, offset = self._constant(s.args.get("limit")), self._constant(s.args.get("offset"))
        if limit is not None or offset:
            self.node = P.Limit(self.node, limit, offset or 0)
        return self.node, out, names

    def _windows(self, exprs: list[E.Expr]) -> list[E.Expr]:
        """Plan the window functions of ``exprs`` (one window node per partition and order,
        in the order they first appear) and return ``exprs`` reading their columns."""
        found: dict[E.Window, str] = {}
        for e in exprs:
            for n in E.walk(e):
                if isinstance(n, E.Window) and n not in found:
                    found[n] = self.binder.names.fresh(n.name)
        specs: dict[tuple, list[tuple[str, E.Window]]] = {}
        for w, name in found.items():
            specs.setdefault(w.spec, []).append((name, w))
        for (partition, order), functions in specs.items():
            self.node = P.Window(self.node, partition, order, tuple(functions))

        def put(n: E.Expr) -> E.Expr | None:
            return E.Ref(found[n], n.type) if isinstance(n, E.Window) else None

        return [E.transform(e, put) for e in exprs]

    def _output_fields(self, items: list[E.Expr], names: list[str]) -> list[P.Field]:
        """Plan names of the SELECT list: a column passed through keeps its name (the first
        time it appears), a computed one gets a fresh name from the user's."""
        out: list[P.Field] = []
        for e, hint in zip(items, names, strict=True):
            if isinstance(e, E.Ref) and all(f.name != e.name for f in out):
                out.append(P.Field(e.name, e.type))
            else:
                out.append(P.Field(self.binder.names.fresh(hint), e.type))
        return out

    def _bind(self, node: exp.Expression) -> E.Expr:
        return bind_expression(node, self.scope)

    def _constant(self, clause: exp.Expression | None) -> int | None:
        if clause is None:
            return None
        value = clause.expression if isinstance(clause, exp.Limit | exp.Offset) else clause
        if isinstance(value, exp.Literal) and not value.is_string and value.is_int:
            n = int(value.this)
            if n >= 0:
                return n
        raise UnsupportedSQL(f"LIMIT and OFFSET need a non-negative integer constant: "
                             f"{describe(clause)}")

    # -- FROM -------------------------------------------------------------------------------
    def _from(self) -> None:
        s = self.select
        from_ = s.args.get("from_") or s.args.get("from")
        if from_ is None:
            if s.args.get("joins"):
                raise SQLError(f"JOIN without FROM{position(s)}")
            return  # one row of no columns
        rel = self.binder.relation(from_.this, self._through(), self.ctes)
        for j in s.args.get("joins") or []:
            rel = self._join(rel, j)
        self.node = rel.node
        self.scope.columns = rel.columns

    def _through(self) -> Scope | None:
        """The outer scope of a derived table in FROM: the enclosing query's (not this
        SELECT's: a FROM item does not see its siblings), through a scope that records the
        outer columns it reads as this SELECT's, so a subquery whose derived table is
        correlated is correlated too."""
        if self.outer is None:
            return None
        return Scope({}, self.binder.names, outer=self.outer,
                     correlated=self.scope.correlated)

    def _join(self, left: _Relation, j: exp.Join) -> _Relation:
        if j.args.get("using"):
            raise UnsupportedSQL(f"USING is expected to be rewritten as ON: {describe(j)}")
        kind = _JOIN_KINDS.get((j.side or "", j.kind or ""))
        if kind is None or j.args.get("method"):
            raise UnsupportedSQL(f"unsupported join {describe(j)}")
        if j.args.get("on") is not None and (j.kind or "") == "CROSS":
            raise SQLError(f"a CROSS JOIN has no ON condition: {describe(j)}")
        correlation: list[E.Expr] = []
        if isinstance(j.this, exp.Lateral):
            if kind not in ("inner", "left"):
                # invalid SQL, not a gap: the subquery's rows exist only for a left row, so
                # there is nothing to keep for a right row without one (PostgreSQL and DuckDB
                # refuse it alike)
                raise SQLError(f"{kind.upper()} JOIN LATERAL{position(j)}: a LATERAL subquery "
                               "refers to the left side's rows, so it can be joined only by "
                               "INNER, LEFT or CROSS JOIN")
            right, correlation = self._lateral(left, j.this)
        else:
            right = self.binder.relation(j.this, self._through(), self.ctes)
        columns = dict(left.columns)
        if kind not in ("semi", "anti"):
            for key, f in right.columns.items():
                if key in columns:
                    raise SQLError(f"duplicate table alias {key[0]!r}{position(j)}")
                columns[key] = f
        on = j.args.get("on")
        condition = None
        if on is not None:
            scope = Scope({**left.columns, **right.columns}, self.binder.names,
                          outer=self.outer, subquery=None,
                          correlated=self.scope.correlated)  # its outer columns: this query's
            condition = bind_expression(on, scope)
            _check_boolean(condition, on)
            _no_window(condition, "JOIN ... ON", on)
        elif kind != "inner":
            raise SQLError(f"{kind.upper()} JOIN needs an ON condition: {describe(j)}")
        condition = E.conjoin(correlation + ([condition] if condition is not None else []))
        return _Relation(P.Join(kind, left.node, right.node, condition), columns)

    def _lateral(self, left: _Relation, item: exp.Lateral
                 ) -> tuple[_Relation, list[E.Expr]]:
        """``LATERAL (query)``: a derived table that reads the columns of the FROM items
        before it, computed once per distinct value of those it reads (as a correlated
        subquery, :func:`_through_domain`); its rows and the conditions joining them to the
        left rows they belong to."""
        query = item.this.this if isinstance(item.this, exp.Subquery) else item.this
        side = Scope(dict(left.columns), self.binder.names, outer=self._through())
        reading = Scope({}, self.binder.names, outer=side)  # records what it reads of side
        node, fields, names = self.binder.query(query, reading, self.ctes)
        columns: dict[tuple[str, str], P.Field] = {}
        for name, f in zip(names, fields, strict=True):
            columns.setdefault((item.alias_or_name, name), f)
        local = _local_columns(reading.correlated, side, left.node, item)
        if not local:
            return _Relation(_project(node, fields), columns), []
        sub = _through_domain(self.binder.names, node, fields, local, left.node, item)
        return _Relation(sub.node, columns), sub.correlation

    # -- ORDER BY ---------------------------------------------------------------------------
    def _order_keys(self) -> list[E.SortKey]:
        order = self.select.args.get("order")
        if order is None:
            return []
        keys = []
        for o in order.expressions:
            term = o.this
            if isinstance(term, exp.Literal) and term.is_int:  # ORDER BY 2
                i = int(term.this)
                if not 1 <= i <= len(self.select.expressions):
                    raise SQLError(f"ORDER BY {i}: the SELECT list has "
                                   f"{len(self.select.expressions)} columns{position(term)}")
                bound = self._bind(self.select.expressions[i - 1])
            elif isinstance(term, exp.Column) and not term.table and \
                    term.name in self.scope.aliases:  # an output name wins over a column
                bound = self.scope.aliases[term.name]
            else:
                bound = self._bind(term)
            descending = bool(o.args.get("desc"))
            nulls_first = o.args.get("nulls_first")
            explicit = explicit_nulls(o)
            keys.append(E.SortKey(bound, not descending,
                                  bool(nulls_first) if explicit else False))
        return keys

    # -- GROUP BY and aggregates ------------------------------------------------------------
    def _grouping(self, group: exp.Group) -> tuple[list[E.Expr], list[list[int]] | None]:
        """The GROUP BY keys and, for ROLLUP, CUBE and GROUPING SETS, the grouping sets as
        lists of key positions (None: the keys are one plain set). Several terms combine by
        their cross product, as in SQL."""
        keys: list[E.Expr] = []

        def index(node: exp.Expression) -> int:
            bound = self._bind(node)
            _no_window(bound, "GROUP BY", node)
            for i, k in enumerate(keys):
                if k == bound:
                    return i
            keys.append(bound)
            return len(keys) - 1

        def elements(node: exp.Expression) -> list[exp.Expression]:
            if isinstance(node, exp.Tuple):
                return list(node.expressions)
            return [node.this if isinstance(node, exp.Paren) else node]

        parts: list[list[list[int]]] = []
        plain = True
        for g in group.expressions:
            if isinstance(g, exp.Rollup):
                idx = [index(x) for x in g.expressions]
                parts.append([idx[:i] for i in range(len(idx), -1, -1)])
            elif isinstance(g, exp.Cube):
                idx = [index(x) for x in g.expressions]
                parts.append([list(c) for r in range(len(idx), -1, -1)
                              for c in itertools.combinations(idx, r)])
            elif isinstance(g, exp.GroupingSets):
                parts.append([[index(x) for x in elements(s)] for s in g.expressions])
            else:
                parts.append([[index(g)]])
                continue
            plain = False
        if plain:
            return keys, None
        sets: list[list[int]] = [[]]
        for alternatives in parts:
            sets = [a + [i for i in b if i not in a] for a in sets for b in alternatives]
        return keys, sets

    def _aggregate(self, keys: list[E.Expr], items: list[E.Expr], having: E.Expr | None,
                   order: list[E.SortKey],
                   sets: list[list[int]] | None = None):  # type: ignore[no-untyped-def]
        names = self.binder.names
        key_cols: list[tuple[str, E.Expr]] = []
        for k in keys:
            if any(isinstance(n, E.Aggregate) for n in E.walk(k)):
                raise SQLError(f"an aggregate in GROUP BY: {k}")
            if not any(k == e for _, e in key_cols):
                key_cols.append((k.name if isinstance(k, E.Ref) else names.fresh("group"), k))
        aggs: list[tuple[str, E.Aggregate]] = list(self.outer_aggs)

        def collect(node: E.Expr) -> E.Expr | None:
            if isinstance(node, E.Aggregate):
                for inner in node.children:
                    if any(isinstance(n, E.Aggregate) for n in E.walk(inner)):
                        raise SQLError(f"an aggregate inside an aggregate: {node}")
                for name, a in aggs:
                    if a == node:
                        return E.Ref(name, a.type)
                name = names.fresh(node.name)
                aggs.append((name, node))
                return E.Ref(name, node.type)
            return None

        def rewrite(e: E.Expr) -> E.Expr:
            e = _replace_keys(e, key_cols)
            e = E.transform(e, collect)
            allowed = {n for n, _ in key_cols} | {n for n, _ in aggs} | {
                n for n, _ in self.pending or []}
            loose = E.refs(e) - allowed - self._outer_names()
            if loose:
                raise SQLError(f"column {sorted(loose)[0]} must appear in GROUP BY or be used "
                               "in an aggregate")
            return e

        items = [rewrite(e) for e in items]
        having = rewrite(having) if having is not None else None
        # a subquery's operand (HAVING COUNT(*) NOT IN (...)) is evaluated on the groups
        self.pending = [(name, (kind, query, _operand_map(operand, rewrite), node))
                        for name, (kind, query, operand, node) in self.pending or []] \
            if self.pending is not None else None
        order = [E.SortKey(rewrite(k.expr), k.ascending, k.nulls_first) for k in order]
        if sets is None and any(a.name == "grouping" for _, a in aggs):
            sets = [list(range(len(key_cols)))]  # one set: GROUPING() is 0
        if sets is None:
            self.node = P.Aggregate(self.node, tuple(key_cols), tuple(aggs))
        else:
            self.node = self._grouping_sets(key_cols, aggs, sets)
        self._grouped = True
        return items, having, order

    def _grouping_sets(self, key_cols: list[tuple[str, E.Expr]],
                       aggs: list[tuple[str, E.Aggregate]], sets: list[list[int]]) -> P.Node:
        """One aggregate per grouping set, the keys it leaves out NULL, as a UNION ALL whose
        columns have the names the rest of the query reads. Where every aggregate merges
        from partial results (COUNT, SUM, AVG, MIN, MAX, BOOL_AND/OR), the input is grouped
        once by all the keys and each set regroups those rows (see :func:`_rollup_parts`);
        otherwise each set groups the input."""
        names = self.binder.names
        fields = tuple(P.Field(n, e.type) for n, e in key_cols) + tuple(
            P.Field(n, a.type) for n, a in aggs)
        plain = [(n, a) for n, a in aggs if a.name != "grouping"]
        parts = _rollup_parts(plain, names) if len(sets) > 1 else None
        source, keys = self.node, [e for _, e in key_cols]
        if parts is not None:
            finest = tuple((names.fresh(n), e) for n, e in key_cols)
            source = P.Aggregate(self.node, finest, tuple(a for p in parts for a in p[0]))
            keys = [E.Ref(n, e.type) for n, e in finest]
        branches: list[P.Node] = []
        for chosen in sets:
            bkeys = {i: (names.fresh(key_cols[i][0]), keys[i]) for i in sorted(set(chosen))}
            if parts is None:
                baggs = tuple((names.fresh(n), a) for n, a in plain)
                values = [E.Ref(n, a.type) for n, a in baggs]
            else:
                baggs, values = _merged(parts, names)
            grouped = P.Aggregate(source, tuple(bkeys.values()), tuple(baggs))
            cols: list[tuple[str, E.Expr]] = []
            for i, (n, e) in enumerate(key_cols):
                value: E.Expr = E.Ref(bkeys[i][0], e.type) if i in bkeys else E.Literal(
                    None, e.type)
                cols.append((names.fresh(n), value))
            reduced = iter(values)
            for n, a in aggs:
                value = E.Literal(_grouping_bits(a, key_cols, chosen), a.type) \
                    if a.name == "grouping" else next(reduced)
                cols.append((names.fresh(n), value))
            branches.append(P.Project(grouped, tuple(cols)))
        node = branches[0]
        for i, branch in enumerate(branches[1:], 1):
            last = i == len(branches) - 1
            out = fields if last else tuple(P.Field(names.fresh(f.name), f.type)
                                            for f in fields)
            node = P.SetOp("union", True, node, branch, out)
        if len(branches) == 1:
            node = P.Project(node, tuple((f.name, E.Ref(n, f.type)) for f, (n, _) in
                                         zip(fields, node.exprs, strict=True)))
        return node

    def _outer_names(self) -> set[str]:
        return {f.name for f in self.scope.correlated.values()}

    # -- subqueries -------------------------------------------------------------------------
    def _subquery(self, kind: str, query: exp.Expression, operand: E.Expr | None,
                  node: exp.Expression) -> E.Expr:
        """Plan a subquery as a join onto ``self.node``; the expression standing for it. In
        an aggregated query the join waits for the grouping (:meth:`_plan_pending`): the
        expression is a placeholder column until then."""
        if self.pending is not None:
            # the same subquery of the same operand twice (in the SELECT list and in GROUP
            # BY) is one value: one placeholder, so that the two expressions are equal
            same = (kind, query.sql(), str(operand))
            name = self._placeholders.get(same)
            if name is None:
                # bound now for its type and for the aggregates of this query's groups it
                # holds (this query's Aggregate computes them); bound again when planned
                fields = self._prebind(query)
                if kind == "scalar" and len(fields) != 1:
                    raise SQLError(f"a scalar subquery returns {len(fields)} columns, "
                                   f"expected 1{position(node)}")
                name = self.binder.names.fresh("subquery")
                self._placeholders[same] = name
                self._types[name] = fields[0].type if kind == "scalar" else BOOLEAN
                self.pending.append((name, (kind, query, operand, node)))
            return E.Ref(name, self._types[name])
        return self._join_subquery(kind, query, operand, node)

    def _prebind(self, query: exp.Expression) -> list[P.Field]:
        """A subquery's output fields (its plan is discarded)."""
        if isinstance(query, exp.Subquery):
            query = query.this
        _, fields, _ = self.binder.query(query, self.scope, self.ctes)
        return fields

    def _outer_aggregate(self, node: exp.Expression) -> E.Expr:
        """An aggregate of this query's groups written in a nested query (its arguments read
        only this query's columns, :meth:`.Scope.aggregate_owner`): bound here, computed by
        this query's Aggregate, whose column the nested query reads as a correlated one."""
        if self._clause == "where":
            raise SQLError(f"WHERE clause cannot contain aggregates: {describe(node)}")
        if self._clause == "group":
            raise SQLError(f"an aggregate in a subquery of GROUP BY or of an aggregate's "
                           f"argument: {describe(node)}")
        if self.pending is None:
            raise UnsupportedSQL(f"an aggregate of the enclosing query in a subquery of its "
                                 f"{self._clause or 'FROM'} is not supported: "
                                 f"{describe(node)}")
        bound = bind_expression(node, self.scope)

        def register(e: E.Expr) -> E.Expr | None:
            if not isinstance(e, E.Aggregate):
                return None
            for name, a in self.outer_aggs:
                if a == e:
                    return E.Ref(name, a.type)
            if self._grouped:  # every subquery was bound before grouping: not expected
                raise UnsupportedSQL(f"an aggregate of the enclosing query met after its "
                                     f"grouping: {describe(node)}")
            name = self.binder.names.fresh(e.name)
            self.outer_aggs.append((name, e))
            return E.Ref(name, e.type)

        return E.transform(bound, register)

    def _plan_pending(self, items: list[E.Expr], also: set[str] | None = None
                      ) -> list[E.Expr]:
        """Join the subqueries an aggregated query's SELECT list or HAVING used (and those
        named ``also``) onto the grouped rows, and put their columns where the placeholders
        were."""
        for name, args in self.pending or []:
            if any(name in E.refs(e) for e in items) or name in (also or ()):
                self.planned[name] = self._join_subquery(*args)
        self.pending = [(n, a) for n, a in self.pending or [] if n not in self.planned]
        return [self._planned_values(e) for e in items]

    def _planned_values(self, e: E.Expr) -> E.Expr:
        """``e`` with the placeholders of planned subqueries replaced by their values."""
        if not self.planned:
            return e
        return E.transform(e, lambda n: self.planned.get(n.name) if isinstance(n, E.Ref)
                           else None)

    def _join_subquery(self, kind: str, query: exp.Expression, operand: E.Expr | None,
                       node: exp.Expression) -> E.Expr:
        inner = Scope({}, self.binder.names, outer=self.scope)
        sub = _Subquery.bind(self.binder, query, inner, self.ctes, self.node)
        if kind == "scalar":
            if len(sub.fields) != 1:
                raise SQLError(f"a scalar subquery returns {len(sub.fields)} columns, "
                               f"expected 1{position(node)}")
            value = sub.fields[0]
            self.node = sub.join_single(self.node, node)
            return E.Ref(value.name, value.type)
        mark = self.binder.names.fresh("mark")
        condition = list(sub.correlation)
        compared = 0
        if kind == "in" or kind.startswith("any:"):  # x IN (q), x op ANY (q), (a, b) IN (q)
            op = "eq" if kind == "in" else kind[4:]
            operands = operand if isinstance(operand, tuple) else (operand,)
            if len(sub.fields) != len(operands):
                raise SQLError(f"the subquery returns {len(sub.fields)} columns for "
                               f"{len(operands)} values compared{position(node)}")
            for x, f in zip(operands, sub.fields, strict=True):
                assert x is not None
                condition.append(_comparison(op, x, E.Ref(f.name, f.type), node))
            compared = len(operands)
            # a NULL correlation conjunct leaves the row out of the set; only the compared
            # values may make the predicate NULL (the join judges its residual as a whole)
            sides = ({f.name for f in self.node.schema}, {f.name for f in sub.node.schema})
            condition = [t if _key_pair(t, *sides) or _never_null(t) else
                         E.Call("is_true", (t,), BOOLEAN)
                         for t in E.conjuncts(E.conjoin(condition[:-compared]))
                         ] + condition[-compared:]
        self.node = P.Join("mark", self.node, sub.node, E.conjoin(condition), mark=mark,
                           null_aware=compared)
        return E.Ref(mark, BOOLEAN)


# aggregates whose result over a set of groups merges from their results per group
_MERGED_BY = {"count_star": "sum", "count": "sum", "sum": "sum", "min": "min", "max": "max",
              "bool_and": "bool_and", "bool_or": "bool_or"}

# the partial aggregates of one aggregate (over the finest groups), and how a grouping set
# combines them: the merging aggregate of each partial, and the final expression of the
# merged partials
_Parts = tuple[list[tuple[str, E.Aggregate]], list[str], str]


def _rollup_parts(aggs: list[tuple[str, E.Aggregate]], names: Names) -> list[_Parts] | None:
    """Per aggregate, its partials over the finest groups and how to merge them (AVG: a SUM
    and a COUNT, divided at the end); None when one does not merge (DISTINCT, MEDIAN, ...)."""
    out: list[_Parts] = []
    for n, a in aggs:
        if a.distinct or a.order or (a.name not in _MERGED_BY and a.name != "avg"):
            return None
        if a.name == "avg":
            total = E.Aggregate("sum", a.args, sum_type(a.args[0].type), filter=a.filter)
            count = E.Aggregate("count", a.args, BIGINT, filter=a.filter)
            out.append(([(names.fresh(f"{n}.sum"), total), (names.fresh(f"{n}.count"), count)],
                        ["sum", "sum"], "avg"))
        else:
            out.append(([(names.fresh(f"{n}.part"), a)], [_MERGED_BY[a.name]], a.name))
    return out


def _merged(parts: list[_Parts], names: Names
            ) -> tuple[list[tuple[str, E.Aggregate]], list[E.Expr]]:
    """A grouping set's aggregates over the finest groups' partials, and the value of each
    original aggregate from them (a COUNT of no rows is 0, an AVG the SUM over the COUNT)."""
    baggs: list[tuple[str, E.Aggregate]] = []
    values: list[E.Expr] = []
    for partials, merge, name in parts:
        refs = []
        for (pname, p), how in zip(partials, merge, strict=True):
            col = names.fresh(pname)
            baggs.append((col, E.Aggregate(how, (E.Ref(pname, p.type),), p.type)))
            refs.append(E.Ref(col, p.type))
        if name in ("count", "count_star"):
            values.append(E.Call("coalesce", (refs[0], E.Literal(0, BIGINT)), BIGINT))
        elif name == "avg":
            ratio = [E.Call("cast", (r,), DOUBLE) for r in refs]
            values.append(E.Call("div", tuple(ratio), DOUBLE))
        else:
            values.append(refs[0])
    return baggs, values


def _grouping_bits(agg: E.Aggregate, key_cols: list[tuple[str, E.Expr]],
                   chosen: list[int]) -> int:
    """GROUPING(args) in the grouping set ``chosen``: a bit per argument, first the
    highest, 1 where the set leaves that key out."""
    names = [n for n, _ in key_cols]
    bits = 0
    for arg in agg.args:
        if not (isinstance(arg, E.Ref) and arg.name in names):
            raise SQLError(f"GROUPING({arg}): its arguments must be GROUP BY keys")
        bits = (bits << 1) | (names.index(arg.name) not in chosen)
    return bits


def _converted(e: E.Expr, t: SQLType) -> E.Expr:
    return e if e.type == t else E.Call("cast", (e,), t)


def _order_and_limit(node: P.Node, tree: exp.Expression, fields: list[P.Field],
                     names: list[str]) -> P.Node:
    """ORDER BY (output names or positions), LIMIT and OFFSET of a set operation."""
    order = tree.args.get("order")
    lowered = [n.lower() for n in names]
    if order is not None:
        keys = []
        for o in order.expressions:
            term = o.this
            if isinstance(term, exp.Literal) and term.is_int and 1 <= int(term.this) <= len(
                    fields):
                f = fields[int(term.this) - 1]
            elif isinstance(term, exp.Column) and term.name.lower() in lowered:
                f = fields[lowered.index(term.name.lower())]  # names are case-insensitive
            else:
                raise UnsupportedSQL(f"ORDER BY of a set operation names an output column or "
                                     f"position: {describe(term)}")
            keys.append(E.SortKey(E.Ref(f.name, f.type), not o.args.get("desc"),
                                  bool(o.args.get("nulls_first")) if explicit_nulls(o)
                                  else False))
        node = P.Sort(node, tuple(keys))
    limit = tree.args.get("limit")
    offset = tree.args.get("offset")
    if limit is not None or offset is not None:
        def constant(clause: exp.Expression | None) -> int | None:
            if clause is None:
                return None
            value = clause.expression if isinstance(clause, exp.Limit | exp.Offset) else clause
            if isinstance(value, exp.Literal) and value.is_int and int(value.this) >= 0:
                return int(value.this)
            raise UnsupportedSQL(f"LIMIT and OFFSET need a non-negative integer constant: "
                                 f"{describe(clause)}")

        node = P.Limit(node, constant(limit), constant(offset) or 0)
    return node


def _aggregated(select: exp.Select) -> bool:
    """Whether the SELECT groups: GROUP BY, or an aggregate function in its own SELECT list,
    HAVING or ORDER BY (not in a nested query)."""
    if select.args.get("group") or select.args.get("having"):
        return True
    nested = (exp.Select, exp.Subquery)
    parts = select.expressions + [select.args[k] for k in ("order", "qualify")
                                  if select.args.get(k)]
    for part in parts:
        for n in part.walk(prune=lambda n: isinstance(n, nested)):
            if isinstance(n, exp.AggFunc) and not _window_function(n):
                return True
    return _aggregates_in_subqueries(select, parts)


def _aggregates_in_subqueries(select: exp.Select, parts: list[exp.Expression]) -> bool:
    """Whether a query nested in ``parts`` of ``select`` holds an aggregate of ``select``'s
    groups: one whose arguments read only columns of ``select``'s FROM (not of a query in
    between), as :meth:`.Scope.aggregate_owner` decides when it is bound."""
    own = _from_aliases(select)
    for part in parts:
        for agg in part.find_all(exp.AggFunc):
            if _window_function(agg):
                continue
            between: set[str] = set()
            nested, up = False, agg.parent
            while up is not None and up is not select:
                if isinstance(up, exp.Select):
                    nested = True
                    between |= _from_aliases(up)
                up = up.parent
            whole = agg.parent if isinstance(agg.parent, exp.Filter) else agg
            tables = {c.table for c in whole.find_all(exp.Column)}
            if nested and tables and tables <= own and not tables & between:
                return True
    return False


def _from_aliases(select: exp.Select) -> set[str]:
    """The aliases of a SELECT's FROM items and joins."""
    from_ = select.args.get("from_") or select.args.get("from")
    items = ([from_.this] if from_ is not None else []) + [
        j.this for j in select.args.get("joins") or []]
    return {i.alias_or_name for i in items}


def _window_function(node: exp.Expression) -> bool:
    """Whether ``node`` is the function a window applies (``SUM(x) OVER ...``), not an
    aggregate of the query's groups."""
    while isinstance(node.parent, exp.IgnoreNulls | exp.RespectNulls | exp.Filter) and \
            node.arg_key == "this":
        node = node.parent
    return isinstance(node.parent, exp.Window) and node.arg_key == "this"


def _no_window(e: E.Expr, clause: str, node: exp.Expression) -> None:
    if any(isinstance(n, E.Window) for n in E.walk(e)):
        raise SQLError(f"{clause} cannot contain window functions{position(node)}")


@dataclass
class _Subquery:
    """A subquery's plan with its correlated conjuncts pulled out as join conditions."""

    node: P.Node
    fields: list[P.Field]
    correlation: list[E.Expr]
    count_columns: list[P.Field] = field(default_factory=list)

    @classmethod
    def bind(cls, binder: _Binder, query: exp.Expression, scope: Scope,
             ctes: dict[str, exp.Expression], outer: P.Node) -> _Subquery:
        """The subquery ``query`` nested in ``scope``, whose outer rows are ``outer``."""
        if isinstance(query, exp.Subquery):
            query = query.this
        if not isinstance(query, exp.Select):  # a set operation: its outer columns read here
            reading = Scope({}, binder.names, outer=scope.outer)
            node, fields, _ = binder.query(query, reading, ctes)
            local = _local_columns(reading.correlated, scope.outer, outer, query)
            if not local:
                return cls(_project(node, fields), fields, [])
            return _through_domain(binder.names, node, fields, local, outer, query)
        sb = _SelectBinder(binder, query, scope.outer, ctes)
        node, fields, _ = sb.bind()
        if not sb.scope.correlated:
            return cls(_project(node, fields), fields, [])
        return _decorrelate(sb, node, fields, outer)

    def join_single(self, outer: P.Node, where: exp.Expression) -> P.Node:
        """``outer`` joined with this scalar subquery's one value per row."""
        node = P.Join("single", outer, self.node, E.conjoin(self.correlation))
        if self.count_columns:  # COUNT over an empty group is 0, not NULL
            fixes = []
            for f in node.schema:
                e: E.Expr = E.Ref(f.name, f.type)
                if f in self.count_columns:
                    e = E.Call("coalesce", (e, E.Literal(0, BIGINT)), f.type)
                fixes.append((f.name, e))
            node = P.Project(node, tuple(fixes))
        return node


def _local_columns(correlated: dict[tuple[str, str], P.Field], parent: Scope | None,
                   outer_rows: P.Node, where: exp.Expression) -> set[str]:
    """The outer columns a subquery reads (``correlated``) that ``outer_rows``, the plan of
    the query it is nested in (``parent``'s), holds: those it is decorrelated against here.
    Columns of queries further out stay in its plan, which is then correlated with them and
    decorrelated in turn where it is joined (the dependent join pushed further down). A
    column of the parent's FROM that its rows lack was grouped away: an error."""
    have = {f.name for f in outer_rows.schema}
    own = {f.name: key for key, f in parent.columns.items()} if parent is not None else {}
    names = {f.name for f in correlated.values()}
    for name in sorted(names - have):
        if name in own:
            table, column = own[name]
            raise SQLError(f"column {table}.{column} must appear in GROUP BY or be used in an "
                           f"aggregate (read by a subquery{position(where)})")
    return names & have


def _decorrelate(sb: _SelectBinder, node: P.Node, fields: list[P.Field],
                 outer_rows: P.Node) -> _Subquery:
    """Pull a correlated subquery's outer references up into join conditions.

    Two shapes directly: a plain SELECT (no aggregates, LIMIT, DISTINCT, ORDER BY or
    windows) whose outer references sit in WHERE conjuncts, which move into the join
    condition as they are; and an aggregate SELECT without GROUP BY or HAVING whose outer
    references sit in WHERE conjuncts and whose outputs over no rows are NULL or a bare
    COUNT. Such an aggregate correlated by equalities ``inner = outer`` is grouped by the
    inner columns and joined on them; otherwise it is computed for every distinct value of
    the outer columns it reads (those of ``outer_rows``, the plan it is joined to), joined
    to its rows by the moved conditions, and grouped by them. Every other shape goes
    through :func:`_through_domain`. Only the outer columns ``outer_rows`` holds count here
    (:func:`_local_columns`); those of queries further out stay as they are, but a plain
    SELECT's WHERE conjuncts reading them move into the join condition too (the join is
    then the correlated one where it is decorrelated in turn, and its inner side is not).
    """
    outer = _local_columns(sb.scope.correlated, sb.outer, outer_rows, sb.select)
    free = {f.name for f in sb.scope.correlated.values()} - outer
    plan = node
    chain: list[P.Node] = []
    while not isinstance(plan, P.Filter | P.Aggregate | P.Join | P.Scan | P.Values):
        chain.append(plan)  # Project / Sort / Limit / Distinct / Window above the WHERE
        plan = plan.inputs[0]
    aggregate = plan if isinstance(plan, P.Aggregate) else None
    having = isinstance(plan, P.Filter) and isinstance(plan.input, P.Aggregate)
    if having:
        aggregate = plan.input
    if aggregate is not None and any(E.refs(a) & outer for _, a in aggregate.aggregates):
        return _through_domain(sb.binder.names, node, fields, outer, outer_rows, sb.select)
    filt = aggregate.input if aggregate is not None else plan
    terms = E.conjuncts(filt.condition) if isinstance(filt, P.Filter) else []
    movable = outer | free if aggregate is None else outer
    moved = [t for t in terms if E.refs(t) & movable]
    kept = [t for t in terms if not E.refs(t) & movable]
    source = filt.input if isinstance(filt, P.Filter) else filt
    base = source if not kept else P.Filter(source, E.conjoin(kept))
    above = chain + ([plan] if having else [])
    general = having or (aggregate is not None and aggregate.keys) or not isinstance(
        filt, P.Filter) or any(isinstance(n, P.Limit | P.Distinct | P.Sort | P.Window)
                               for n in chain) or any(
        E.refs(e) & outer for n in above for e in P.expressions(n)) or any(
        E.refs(e) & outer for n in P.nodes(base) for e in P.expressions(n))
    if not outer and (general or aggregate is not None or not moved):
        return _Subquery(_project(node, fields), fields, [])  # correlated further out only
    if general:
        return _through_domain(sb.binder.names, node, fields, outer, outer_rows, sb.select)
    if aggregate is None:
        rebuilt = base
        for n in reversed(chain):
            rebuilt = n.with_inputs((rebuilt,))
        return _Subquery(_keep_inputs(rebuilt, moved), fields, moved)
    if not _null_without_rows(chain, aggregate):  # COUNT(*) + 1, COALESCE(SUM(x), 0), ...
        return _through_domain(sb.binder.names, node, fields, outer, outer_rows, sb.select)
    pairs = _inner_outer_pairs(moved, outer)
    if pairs is None:
        return _over_domain(sb, base, aggregate, chain, moved, outer, outer_rows, fields)
    names = sb.binder.names
    keys = tuple((a.name if isinstance(a, E.Ref) else names.fresh("corr"), a) for a, _ in pairs)
    grouped: P.Node = P.Aggregate(base, keys, aggregate.aggregates)
    for n in reversed(chain):  # the Project of the SELECT list, keeping the keys
        if isinstance(n, P.Project):
            extra = tuple((k, E.Ref(k, e.type)) for k, e in keys
                          if k not in {name for name, _ in n.exprs})
            grouped = P.Project(grouped, n.exprs + extra)
        else:
            grouped = n.with_inputs((grouped,))
    condition = [E.Call("eq", (E.Ref(k, e.type), b), BOOLEAN) for (k, e), (_, b)
                 in zip(keys, pairs, strict=True)]
    counts = [P.Field(f.name, f.type) for f in fields
              if _is_count_of(grouped, f.name, aggregate)]
    return _Subquery(grouped, fields, condition, counts)


# functions whose value is NULL when an argument is
_STRICT = frozenset({"add", "sub", "mul", "div", "intdiv", "mod", "neg", "eq", "ne", "lt", "le",
                     "gt", "ge", "cast", "abs", "round", "floor", "ceil", "power", "sqrt", "ln",
                     "log10", "exp", "sign", "lower", "upper", "length", "substring", "trim",
                     "ltrim", "rtrim", "replace", "strpos", "left", "right", "date_trunc",
                     "extract", "date_add", "date_sub", "date_diff"})


def _null_without_rows(chain: list[P.Node], aggregate: P.Aggregate) -> bool:
    """Whether every output of an aggregate subquery without GROUP BY over no rows is NULL or
    a bare COUNT (0): its join to the groups of its correlation columns then gives what a
    missing group must (NULL, or 0 by the COUNT fix). Not so for ``COUNT(*) + 1`` or
    ``COALESCE(SUM(x), 0)``, which need a row for every outer value."""
    counts = {n for n, a in aggregate.aggregates if a.name in ("count", "count_star")}
    others = {n for n, _ in aggregate.aggregates} - counts

    def null_on_empty(e: E.Expr) -> bool:  # NULL when the aggregates are of no rows
        if isinstance(e, E.Ref):
            return e.name in others
        return isinstance(e, E.Call) and e.name in _STRICT and any(
            null_on_empty(a) for a in e.args)

    for n in chain:
        if isinstance(n, P.Project):
            return all(isinstance(e, E.Ref) and e.name in counts or null_on_empty(e)
                       for _, e in n.exprs)
    return True


def _inner_outer_pairs(moved: list[E.Expr],
                       outer: set[str]) -> list[tuple[E.Expr, E.Expr]] | None:
    """``(inner, outer)`` sides of the moved conjuncts when each is ``inner = outer``."""
    pairs = []
    for t in moved:
        if not (isinstance(t, E.Call) and t.name == "eq"):
            return None
        a, b = t.args
        if E.refs(a) & outer and not E.refs(b) & outer:
            a, b = b, a
        if E.refs(a) & outer or not E.refs(b) <= outer:
            return None
        pairs.append((a, b))
    return pairs


def _domain(sb: _SelectBinder, outer: set[str], outer_rows: P.Node
            ) -> tuple[dict[str, P.Field], list[str], dict[str, str], P.Node]:
    """The distinct values of the outer columns a subquery reads, from ``outer_rows`` (the
    plan it is joined to), under fresh names: ``(outer_rows' fields by name, the columns in
    order, their fresh names, the plan of the values)``."""
    have = {f.name: f for f in outer_rows.schema}
    cols = sorted(outer)
    fresh = {c: sb.binder.names.fresh(f"domain.{c}") for c in cols}
    domain = P.Distinct(P.Project(outer_rows, tuple((fresh[c], E.Ref(c, have[c].type))
                                                    for c in cols)))
    return have, cols, fresh, domain


def _over_domain(sb: _SelectBinder, base: P.Node, aggregate: P.Aggregate,
                 chain: list[P.Node], moved: list[E.Expr], outer: set[str],
                 outer_rows: P.Node, fields: list[P.Field]) -> _Subquery:
    """An aggregate subquery computed once per distinct value of the outer columns it reads:
    the inner rows joined to those values by the moved conditions, grouped by them."""
    have, cols, fresh, domain = _domain(sb, outer, outer_rows)

    def put(e: E.Expr) -> E.Expr | None:
        return E.Ref(fresh[e.name], e.type) if isinstance(e, E.Ref) and e.name in fresh \
            else None

    joined = P.Join("inner", base, domain, E.conjoin([E.transform(t, put) for t in moved]))
    keys = tuple((fresh[c], E.Ref(fresh[c], have[c].type)) for c in cols)
    grouped: P.Node = P.Aggregate(joined, keys, aggregate.aggregates)
    for n in reversed(chain):
        if isinstance(n, P.Project):
            grouped = P.Project(grouped, n.exprs + keys)
        else:
            grouped = n.with_inputs((grouped,))
    # a NULL outer value meets no inner row through these conditions: the join's NULL is
    # the aggregate of no rows, as for a missing group
    condition = [E.Call("eq", (E.Ref(fresh[c], have[c].type), E.Ref(c, have[c].type)),
                        BOOLEAN) for c in cols]
    counts = [P.Field(f.name, f.type) for f in fields
              if _is_count_of(grouped, f.name, aggregate)]
    return _Subquery(grouped, fields, condition, counts)


def _through_domain(names: Names, node: P.Node, fields: list[P.Field], outer: set[str],
                    outer_rows: P.Node, where: exp.Expression) -> _Subquery:
    """Any correlated query computed once per distinct value of the outer columns ``outer``
    it reads (:func:`.unnest.unnest`), joined back to the outer rows on them."""
    rebuilt, condition = unnest(names, node, outer, outer_rows, where)
    return _Subquery(rebuilt, fields, condition, [])


def _key_pair(t: E.Expr, left: set[str], right: set[str]) -> bool:
    """Whether ``t`` is an equality of a left expression and a right one (a hash key)."""
    if not (isinstance(t, E.Call) and t.name == "eq"):
        return False
    a, b = (E.refs(x) for x in t.args)
    return bool(a and b) and (a <= left and b <= right or a <= right and b <= left)


def _never_null(t: E.Expr) -> bool:
    return isinstance(t, E.Call) and t.name in ("is_not_distinct", "is_distinct", "is_true",
                                                "is_false", "is_null", "is_not_null")


def _is_count_of(node: P.Node, name: str, aggregate: P.Aggregate) -> bool:
    """Whether output ``name`` is a bare COUNT of ``aggregate`` (an empty group reads 0)."""
    counts = {n for n, a in aggregate.aggregates if a.name in ("count", "count_star")}
    if name in counts:
        return True
    if isinstance(node, P.Project):
        for n, e in node.exprs:
            if n == name and isinstance(e, E.Ref) and e.name in counts:
                return True
    return False


def _keep_inputs(node: P.Node, moved: list[E.Expr]) -> P.Node:
    """A Project under the join keeps the inner columns the moved conditions read."""
    if not isinstance(node, P.Project):
        return node
    have = {n for n, _ in node.exprs}
    needed = set().union(*(E.refs(t) for t in moved)) if moved else set()
    inner = {f.name: f for f in node.input.schema}
    extra = tuple((n, E.Ref(n, inner[n].type)) for n in sorted(needed) if n in inner
                  and n not in have)
    return P.Project(node.input, node.exprs + extra) if extra else node


def _operand_map(operand: E.Expr | tuple | None, fn: Any) -> E.Expr | tuple | None:
    """``fn`` applied to a subquery's operand: none, one expression or a tuple of them."""
    if operand is None:
        return None
    if isinstance(operand, tuple):
        return tuple(fn(x) for x in operand)
    return fn(operand)


def _replace_keys(e: E.Expr, keys: list[tuple[str, E.Expr]]) -> E.Expr:
    """``e`` with every subexpression equal to a GROUP BY key replaced by the key's column."""
    for name, k in keys:
        if e == k:
            return E.Ref(name, k.type)
    if isinstance(e, E.Aggregate):
        return e
    children = e.children
    if not children:
        return e
    new = tuple(_replace_keys(c, keys) for c in children)
    return e.with_children(new) if any(a is not b for a, b in zip(new, children,
                                                                  strict=True)) else e


def _comparison(op: str, a: E.Expr, b: E.Expr, node: exp.Expression) -> E.Expr:
    """``a op b`` with both sides converted to their common type."""
    _, (a, b) = unify([a, b], f"comparison {op}", node)
    return E.Call(op, (a, b), BOOLEAN)


def _check_boolean(e: E.Expr, node: exp.Expression) -> None:
    if e.type.kind not in ("boolean", "null"):
        raise SQLError(f"a condition must be BOOLEAN, got {e.type}{position(node)}")
