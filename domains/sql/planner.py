"""From SQL text to a query description the executor runs.

sqlglot parses the query (DuckDB dialect) and qualifies every column with its table alias
(``qualify``: resolves names against the catalog's schema, expands ``*``). This module then
splits the WHERE clause (and inner joins' ON) into conjuncts, factors the terms common to
every branch of an OR (TPC-H Q19's join key), derives per-table filters implied by an OR
(pushed into the scans, the OR itself is kept), classifies conjuncts into scan filters,
equi-join edges and residual filters, and finds the columns each table must read. Anything
outside the supported subset raises :class:`UnsupportedSQL` naming the construct.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlglot import exp, parse_one
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify

from .catalog import Catalog
from .errors import SQLError, UnsupportedSQL, describe, position

__all__ = ["QueryPlan", "Source", "parse", "plan_select", "conjuncts", "aliases_of", "own_nodes"]

_AGGREGATES = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count)


@dataclass
class Source:
    """One table of the FROM clause: its ``alias``, the catalog ``table``, the ``columns`` it
    must read, the ``filters`` pushed into its scan, and for a LEFT JOIN its ``on`` terms."""

    alias: str
    table: str
    columns: list[str] = field(default_factory=list)
    filters: list[exp.Expression] = field(default_factory=list)
    left_join: bool = False
    on: list[exp.Expression] = field(default_factory=list)
    subquery: exp.Select | None = None  # a derived table or a WITH table: run first


@dataclass
class QueryPlan:
    """A qualified SELECT split into the parts the executor runs, in this order: scans
    (with filters), equi-joins (``edges``: pairs of column references), ``residual`` filters
    (applied as soon as their tables are joined), then grouping/aggregation or projection,
    HAVING, ORDER BY and LIMIT."""

    select: exp.Select
    sources: list[Source]
    edges: list[tuple[exp.Column, exp.Column]]
    residual: list[exp.Expression]
    group: list[exp.Expression]
    aggregates: bool
    distinct: bool
    limit: int | None


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """The AND-ed terms of a condition (parentheses removed)."""
    if node is None:
        return []
    node = node.unnest()
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def _disjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = node.unnest()
    if isinstance(node, exp.Or):
        return _disjuncts(node.this) + _disjuncts(node.expression)
    return [node]


def _and(terms: list[exp.Expression]) -> exp.Expression:
    out = terms[0]
    for t in terms[1:]:
        out = exp.And(this=out, expression=t)
    return out


def _or(terms: list[exp.Expression]) -> exp.Expression:
    out = terms[0]
    for t in terms[1:]:
        out = exp.Or(this=out, expression=t)
    return exp.Paren(this=out)


def aliases_of(node: exp.Expression) -> set[str]:
    """Table aliases a term refers to."""
    return {c.table for c in node.find_all(exp.Column) if c.table}


def _factor_or(term: exp.Expression, sources: set[str]) -> list[exp.Expression]:
    """``(a AND b) OR (a AND c)`` -> ``a``, ``(b OR c)``, plus for each table the OR of each
    branch's terms on that table alone (implied, weaker filters a scan can apply)."""
    branches = [conjuncts(b) for b in _disjuncts(term)]
    if len(branches) < 2:
        return [term]
    common = [t for t in branches[0] if all(any(t == u for u in b) for b in branches[1:])]
    rest = [[t for t in b if not any(t == c for c in common)] for b in branches]
    out = list(common)
    if any(not r for r in rest):  # one branch is just the common part: the OR is implied
        return out
    out.append(_or([_and(r) for r in rest]))
    spanned = set().union(*(aliases_of(t) for r in rest for t in r))
    if len(spanned) < 2:  # an OR on one table is that table's filter already
        return out
    for alias in sorted(sources):
        parts = [[t for t in r if aliases_of(t) == {alias}] for r in rest]
        if all(parts):
            out.append(_or([_and(p) for p in parts]))
    return out


def own_nodes(select: exp.Expression) -> Iterator[exp.Expression]:
    """The nodes of a SELECT outside its nested queries (which are planned on their own)."""
    return select.walk(prune=lambda n: n is not select and isinstance(
        n, exp.Select | exp.Subquery | exp.Union))


def _reject_unsupported(select: exp.Expression) -> None:
    if not isinstance(select, exp.Select):
        raise UnsupportedSQL(f"only SELECT statements are supported, got {describe(select)}")
    for key in ("windows", "qualify", "offset"):
        if select.args.get(key):
            raise UnsupportedSQL(f"unsupported clause {key.upper()}{position(select.args[key])}")
    for node in own_nodes(select):
        if isinstance(node, exp.Union):
            raise UnsupportedSQL(f"UNION is not supported: {describe(node)}")
        if isinstance(node, exp.Window):
            raise UnsupportedSQL(f"window functions are not supported: {describe(node)}")
        if isinstance(node, exp.Join) and (node.args.get("using") or node.side == "RIGHT"
                                           or node.side == "FULL" or node.kind == "CROSS"
                                           and node.args.get("on")):
            raise UnsupportedSQL(f"unsupported join {describe(node)}")
    for node in select.find_all(exp.Select):
        if node is not select:
            _reject_unsupported(node)


def parse(sql: str, catalog: Catalog) -> exp.Select:
    try:
        tree = parse_one(sql, dialect="duckdb")
    except ParseError as exc:
        raise SQLError(f"malformed query: {exc.errors[0]['description'] if exc.errors else exc}"
                       f"{_parse_position(exc)}") from None
    if tree is None:
        raise SQLError("empty query")
    _reject_unsupported(tree)
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    for t in tree.find_all(exp.Table):
        if t.name not in catalog.tables and t.name not in ctes:
            raise SQLError(f"unknown table {t.name!r}{position(t)}; tables: {catalog.tables}")
    try:
        return qualify(tree, schema=catalog.schema(), dialect="duckdb", quote_identifiers=False)
    except OptimizeError as exc:
        raise SQLError(f"{exc}") from None


def _parse_position(exc: ParseError) -> str:
    e = exc.errors[0] if exc.errors else {}
    return f" at line {e['line']}, column {e['col']}" if "line" in e else ""


def plan_select(select: exp.Select, ctes: dict[str, exp.Select] | None = None) -> QueryPlan:
    """Split a parsed, qualified SELECT whose WHERE/HAVING subqueries are already resolved
    (:mod:`.subqueries`); FROM items that are derived tables or WITH tables become sources
    that run first. ``ctes``: the WITH tables in scope.

    Raises
    ------
    SQLError
        Malformed query, unknown table or column.
    UnsupportedSQL
        A construct outside the supported subset, named with its position.
    """
    ctes = dict(ctes or {})
    with_ = select.args.get("with_") or select.args.get("with")
    if with_:
        ctes.update({c.alias_or_name: c.this for c in with_.expressions})
    sources: list[Source] = []
    pool: list[exp.Expression] = conjuncts(select.args.get("where") and select.args["where"].this)
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise UnsupportedSQL("a SELECT without FROM is not supported")
    tables = [from_.this] + [j.this for j in select.args.get("joins") or []]
    joins = [None] + list(select.args.get("joins") or [])
    for t, j in zip(tables, joins, strict=True):
        if isinstance(t, exp.Subquery) and isinstance(t.this, exp.Select):
            src = Source(alias=t.alias_or_name, table=t.alias_or_name, subquery=t.this)
        elif isinstance(t, exp.Table) and t.name in ctes:
            src = Source(alias=t.alias_or_name, table=t.name, subquery=ctes[t.name])
        elif isinstance(t, exp.Table):
            src = Source(alias=t.alias_or_name, table=t.name)
        else:
            raise UnsupportedSQL(f"FROM item {describe(t)}: only tables and subqueries")
        on = conjuncts(j.args.get("on")) if j is not None else []
        if j is not None and j.side == "LEFT":  # the joined table's own terms filter its scan
            src.left_join = True
            src.filters = [t for t in on if aliases_of(t) == {src.alias}]
            src.on = [t for t in on if aliases_of(t) != {src.alias}]
        else:
            if sources and any(s.left_join for s in sources):
                raise UnsupportedSQL(f"an inner join after a LEFT JOIN: {describe(j)}")
            pool += on
        sources.append(src)
    names = {s.alias for s in sources}
    terms: list[exp.Expression] = []
    for term in pool:
        terms += _factor_or(term, names) if isinstance(term.unnest(), exp.Or) else [term]
    by_alias = {s.alias: s for s in sources}
    edges: list[tuple[exp.Column, exp.Column]] = []
    residual: list[exp.Expression] = []
    for term in terms:
        refs = aliases_of(term)
        if len(refs) == 1 and not by_alias[next(iter(refs))].left_join:
            by_alias[next(iter(refs))].filters.append(term)
        elif _is_edge(term, by_alias) and not any(by_alias[a].left_join for a in refs):
            edges.append((term.this, term.expression))
        else:
            residual.append(term)
    for src in sources:
        src.columns = sorted({c.name for n in own_nodes(select) if isinstance(n, exp.Column)
                              for c in [n] if c.table == src.alias}
                             | {c.name for t in src.on for c in t.find_all(exp.Column)
                                if c.table == src.alias})
    group = list(select.args["group"].expressions) if select.args.get("group") else []
    has_agg = any(isinstance(n, _AGGREGATES) for n in own_nodes(select))
    limit = None
    if select.args.get("limit") is not None:
        lim = select.args["limit"].expression
        if not isinstance(lim, exp.Literal) or lim.is_string:
            raise UnsupportedSQL(f"LIMIT needs a constant: {describe(lim)}")
        limit = int(lim.this)
    return QueryPlan(select, sources, edges, residual, group, has_agg,
                     bool(select.args.get("distinct")), limit)


def _is_edge(term: exp.Expression, by_alias: dict[str, Source]) -> bool:
    """``a.x = b.y`` between two different tables."""
    return (
        isinstance(term, exp.EQ)
        and isinstance(term.this, exp.Column)
        and isinstance(term.expression, exp.Column)
        and term.this.table != term.expression.table
        and term.this.table in by_alias
        and term.expression.table in by_alias
    )
