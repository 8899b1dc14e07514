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

from hpc.domains.sql.errors import SQLError, position
from hpc.domains.sql.logical.expr import Expr, Ref
from hpc.domains.sql.logical.plan import Field
from sqlglot import exp

__all__ = ["Names", "Scope", "SubqueryHandler"]

# subquery(kind, query, operand, node) -> the expression standing for it, where kind is
# "scalar" (a one-column query used as a value), "exists" or "in" (``operand IN (query)``);
# NOT EXISTS / NOT IN are bound as not(...) of these.
SubqueryHandler = Callable[[str, exp.Expression, "Expr | None", exp.Expression], Expr]


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
    """

    columns: dict[tuple[str, str], Field]
    names: Names
    outer: Scope | None = None
    subquery: SubqueryHandler | None = None
    correlated: dict[tuple[str, str], Field] = field(default_factory=dict)
    aliases: dict[str, Expr] = field(default_factory=dict)
    windows: dict[str, exp.Window] = field(default_factory=dict)

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

    def plan_subquery(self, kind: str, query: exp.Expression, operand: Expr | None,
                      node: exp.Expression) -> Expr:
        if self.subquery is None:
            from hpc.domains.sql.errors import UnsupportedSQL

            raise UnsupportedSQL(f"a subquery is not supported here{position(node)}")
        return self.subquery(kind, query, operand, node)


def describe_scope(scope: Scope) -> dict[str, Any]:
    """The scope's columns as ``{"alias.column": "TYPE"}`` (for error messages and tests)."""
    return {f"{t}.{c}": str(f.type) for (t, c), f in scope.columns.items()}
