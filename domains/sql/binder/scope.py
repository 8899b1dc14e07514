"""What names mean while a query is bound: the columns in scope, the enclosing query's scope
(for correlated references) and the allocator of plan-unique column names.

The expression binder (:mod:`.expressions`) resolves a qualified column through
:meth:`Scope.resolve` and hands every subquery it meets to :attr:`Scope.subquery`, a callback
of the SELECT binder (:mod:`.select`), which plans it as a join and returns the expression
that stands for its value (a mark column, a scalar column).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hpc.domains.sql.errors import SQLError, UnsupportedSQL, position
from hpc.domains.sql.logical.expr import Expr, Ref, walk
from hpc.domains.sql.logical.plan import Field
from sqlglot import exp

__all__ = ["Names", "Scope", "SubqueryHandler"]

# subquery(kind, query, operand, node) -> the expression standing for it, where kind is
# "scalar" (a one-column query used as a value), "exists" or "in" (``operand IN (query)``);
# NOT EXISTS / NOT IN are bound as not(...) of these.
SubqueryHandler = Callable[[str, exp.Expression, "Expr | None", exp.Expression], Expr]

# aggregate(node) -> the expression standing for an aggregate of this query's groups that a
# nested query wrote (its arguments read only this query's columns): their columns
AggregateHandler = Callable[[exp.Expression], Expr]


class Names:
    """Plan-unique column names: ``alias.column`` where free, else with a ``#n`` suffix."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def fresh(self, hint: str) -> str:
        name, n = hint, 1
        while name in self._used:
            n += 1
            name = f"{hint}#{n}"
        self._used.add(name)
        return name


@dataclass
class Scope:
    """Columns visible to one SELECT.

    Attributes
    ----------
    columns : dict
        ``(table alias, column name) -> Field`` of the FROM clause's relations.
    names : Names
        The plan's name allocator (shared by nested scopes).
    outer : Scope or None
        The enclosing query's scope: a column not found here is looked up there and
        recorded in ``correlated``.
    subquery : SubqueryHandler or None
        Plans a subquery met in an expression (None: subqueries are not allowed here).
    correlated : dict
        Outer columns this scope's expressions used: ``(alias, column) -> Field``.
    aliases : dict
        SELECT-list aliases usable in GROUP BY / HAVING / ORDER BY: name -> bound expression.
    windows : dict
        The SELECT's named windows (``WINDOW w AS (...)``): name -> their definition.
    aggregate : AggregateHandler or None
        Plans an aggregate of this query's groups written in a nested query (None: this
        scope is not a SELECT's).
    """

    columns: dict[tuple[str, str], Field]
    names: Names
    outer: Scope | None = None
    subquery: SubqueryHandler | None = None
    correlated: dict[tuple[str, str], Field] = field(default_factory=dict)
    aliases: dict[str, Expr] = field(default_factory=dict)
    windows: dict[str, exp.Window] = field(default_factory=dict)
    aggregate: AggregateHandler | None = None

    def child(self, columns: dict[tuple[str, str], Field],
              subquery: SubqueryHandler | None = None) -> Scope:
        """The scope of a query nested in this one."""
        return Scope(columns, self.names, outer=self, subquery=subquery)

    def lookup(self, table: str, name: str) -> Field | None:
        if table:
            return self.columns.get((table, name))
        hits = [f for (_, c), f in self.columns.items() if c == name]
        if len(hits) > 1:
            raise SQLError(f"column {name!r} is ambiguous: qualify it with its table")
        return hits[0] if hits else None

    def resolve(self, node: exp.Column) -> Ref:
        """The plan column a (qualified) SQL column means, here or in an outer scope."""
        table, name = node.table, node.name
        hit = self.lookup(table, name)
        if hit is not None:
            return Ref(hit.name, hit.type)
        scope = self.outer
        while scope is not None:
            hit = scope.lookup(table, name)
            if hit is not None:
                self.correlated[(table, name)] = hit
                inner = self.outer
                while inner is not scope and inner is not None:  # every scope in between
                    inner.correlated[(table, name)] = hit
                    inner = inner.outer
                return Ref(hit.name, hit.type)
            scope = scope.outer
        if not table and name in self.aliases:
            return self.aliases[name]  # type: ignore[return-value]
        where = f"{table}.{name}" if table else name
        raise SQLError(f"unknown column {where}{position(node)}")

    def owner(self, node: exp.Column) -> tuple[int, Scope] | None:
        """How many query levels out ``node`` resolves, and that level's scope (None: not a
        column of any, e.g. a SELECT-list alias). Records nothing."""
        scope: Scope | None = self
        depth = 0
        while scope is not None:
            if scope.lookup(node.table, node.name) is not None:
                return depth, scope
            scope, depth = scope.outer, depth + 1
        return None

    def aggregate_owner(self, node: exp.Expression) -> Scope | None:
        """The enclosing query whose groups the aggregate ``node`` (with its FILTER) belongs
        to, or None for this query's. As in SQL (and DuckDB), an aggregate belongs to the
        innermost query whose columns its arguments read: one reading only an outer query's
        columns aggregates that query's groups."""
        if self.outer is None:
            return None
        levels = []
        for c in node.find_all(exp.Column):
            if _inside_query(c, node):
                continue
            hit = self.owner(c)
            if hit is None or hit[0] == 0:
                return None
            levels.append(hit)
        if not levels:  # COUNT(*), an aggregate of constants: this query's
            return None
        return min(levels, key=lambda h: h[0])[1]

    def outer_aggregate(self, owner: Scope, node: exp.Expression) -> Expr:
        """The value of the aggregate ``node`` of ``owner``'s groups (see
        :meth:`aggregate_owner`), read here as a correlated column of ``owner``."""
        if owner.aggregate is None:
            raise UnsupportedSQL(f"an aggregate of an enclosing query's rows is not supported "
                                 f"here{position(node)}")
        value = owner.aggregate(node)
        columns = {n.name: Field(n.name, n.type) for n in walk(value) if isinstance(n, Ref)}
        scope: Scope | None = self
        while scope is not None and scope is not owner:  # every scope in between reads them
            scope.correlated.update({("", name): f for name, f in columns.items()})
            scope = scope.outer
        return value

    def plan_subquery(self, kind: str, query: exp.Expression, operand: Expr | None,
                      node: exp.Expression) -> Expr:
        if self.subquery is None:
            raise UnsupportedSQL(f"a subquery is not supported here{position(node)}")
        return self.subquery(kind, query, operand, node)


def _inside_query(node: exp.Expression, top: exp.Expression) -> bool:
    """Whether ``node`` sits in a query nested in ``top``."""
    parent = node.parent
    while parent is not None and parent is not top:
        if isinstance(parent, exp.Select | exp.Subquery):
            return True
        parent = parent.parent
    return False


def describe_scope(scope: Scope) -> dict[str, Any]:
    """The scope's columns as ``{"alias.column": "TYPE"}`` (for error messages and tests)."""
    return {f"{t}.{c}": str(f.type) for (t, c), f in scope.columns.items()}
