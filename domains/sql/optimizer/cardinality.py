"""Estimated rows and bytes of plan nodes from the catalog's statistics, for choosing how
rows move between ranks (:mod:`.distribute`).

A filter keeps the share its predicate selects: ``column = constant`` one in the column's
distinct values, ``IN`` a few of them, comparisons with constants the share of the column's
value range (Parquet's row-group min/max, or the values held in memory) between the bounds
all comparisons of that column allow together, AND the product of its terms, OR and NOT by
the rules of independent events; what no statistic describes keeps a quarter, all such
terms of one AND together. An equi-join produces ``|L| |R| / max(distinct keys)`` over its
most selective key pair, at least the preserved side of an outer join; a semi join keeps
the share of the left side's distinct keys that the right side's could match (an anti join
the rest). A row's bytes are its
columns' widths, a string column's as the catalog has it from the file.
"""

from __future__ import annotations

import decimal
from typing import Any

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.types import SQLType

__all__ = ["Cardinality", "UNKNOWN_SHARE"]

UNKNOWN_SHARE = 0.25  # rows kept by the terms of an AND no statistic describes, together
_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _fixed_bytes(t: SQLType) -> float:
    """Bytes of a value of type ``t`` in memory (strings: a guess)."""
    if t.kind == "integer":
        return max(1, t.bits // 8)
    if t.kind == "decimal":
        return 16.0 if t.precision > 18 else 8.0
    return {"boolean": 1.0, "date": 4.0, "interval": 16.0, "varchar": 16.0}.get(t.kind, 8.0)


def _constant(e: E.Expr) -> float | None:
    """A literal's value as a number in the catalog's units (dates in days), else None."""
    if not isinstance(e, E.Literal) or e.value is None or isinstance(e.value, bool):
        return None
    if e.type.kind in ("integer", "double", "decimal", "date") and \
            isinstance(e.value, (int, float, decimal.Decimal)):
        return float(e.value)
    return None


def _column(e: E.Expr) -> str | None:
    while isinstance(e, E.Call) and e.name == "cast":  # widening casts keep the order
        e = e.args[0]
    return e.name if isinstance(e, E.Ref) else None


class Cardinality:
    """Row and byte estimates of the nodes of one plan (memoised per node).

    Parameters
    ----------
    catalog : Catalog
        Row counts, distinct-value bounds, value ranges and string widths.
    *plans : Node
        The plans whose scans name the columns (each output name to its table's column).
    """

    def __init__(self, catalog: Any, *plans: P.Node) -> None:
        self.catalog = catalog
        self.sources: dict[str, tuple[str, str]] = {}
        for plan in plans:
            for n in P.nodes(plan):
                if isinstance(n, P.Scan):
                    self.sources.update({name: (n.table, col) for name, col, _ in n.columns})
        self._rows: dict[P.Node, float] = {}

    # -- rows -------------------------------------------------------------------------------
    def rows(self, node: P.Node) -> float:
        """Rows ``node`` is expected to produce over all ranks (at least 1)."""
        found = self._rows.get(node)
        if found is None:
            found = self._rows[node] = max(1.0, self._estimate(node))
        return found

    def _estimate(self, node: P.Node) -> float:
        if isinstance(node, P.Scan):
            return float(self.catalog.num_rows(node.table))
        if isinstance(node, P.Values):
            return float(len(node.rows))
        if isinstance(node, P.SetOp):
            left, right = self.rows(node.left), self.rows(node.right)
            return left + right if node.kind == "union" else left
        if isinstance(node, P.Join):
            return self._join(node)
        inner = self.rows(node.inputs[0]) if node.inputs else 1.0
        if isinstance(node, P.Filter):
            return inner * self.selectivity(node.condition, inner)
        if isinstance(node, P.Aggregate):
            if not node.keys:
                return 1.0
            groups = 1.0
            for _, key in node.keys:
                groups *= self._distinct(key, inner, strings=True) or inner
            return min(inner * 0.1, groups)
        if isinstance(node, P.Distinct):
            return inner * 0.5
        if isinstance(node, P.Limit) and node.limit is not None:
            return min(inner, float(node.limit))
        return inner

    def _join(self, node: P.Join) -> float:
        from .distribute import equi_keys

        left, right = self.rows(node.left), self.rows(node.right)
        if node.kind in ("semi", "anti"):  # the left rows whose keys the right side has
            lk, rk, _ = equi_keys(node)
            found = 1.0
            for a, b in zip(lk, rk, strict=True):
                mine = self._distinct(a, left) or left
                found = min(found, (self._distinct(b, right) or right) / mine)
            return left * found if node.kind == "semi" else left * (1.0 - found)
        if node.kind in ("mark", "single"):
            return left
        if node.condition is None:
            matched = left * right
        else:
            lk, rk, _ = equi_keys(node)
            matched = max(left, right)
            for a, b in zip(lk, rk, strict=True):
                keys = max(self._distinct(a, left) or left, self._distinct(b, right) or right)
                matched = min(matched, left * right / keys)
        if node.kind == "left":
            return max(left, matched)
        if node.kind == "right":
            return max(right, matched)
        if node.kind == "full":
            return max(left + right, matched)
        return matched

    def _distinct(self, e: E.Expr | str, rows: float, strings: bool = False) -> float | None:
        """Distinct values of a scanned column (an expression or its name), at most
        ``rows``; None for another expression. ``strings``: a string column's dictionary
        counts (else only integer value ranges bound it)."""
        name = e if isinstance(e, str) else _column(e)
        if name is None or name not in self.sources:
            return None
        table, column = self.sources[name]
        found = self.catalog.distinct_estimate(table, column) if strings else \
            self.catalog.distinct_bound(table, column)
        return max(1.0, min(rows, float(found)))

    # -- predicates -------------------------------------------------------------------------
    def selectivity(self, condition: E.Expr | None, rows: float) -> float:
        """The share of ``rows`` rows that ``condition`` keeps."""
        share = self._share(condition, rows)
        return UNKNOWN_SHARE if share is None else share

    def _share(self, e: E.Expr | None, rows: float) -> float | None:
        """The share ``e`` keeps, or None where no statistic describes it."""
        if e is None:
            return 1.0
        if isinstance(e, E.Call) and e.name == "and":
            return self._conjunction(E.conjuncts(e), rows)
        if isinstance(e, E.Call) and e.name == "or":
            values = self._one_column_values(e)
            if values is not None:  # x = a OR x = b OR x IN (c, d): as one IN list
                distinct = self._distinct(values[0], rows, strings=True)
                return None if distinct is None else min(1.0, len(values[1]) / distinct)
            missed = 1.0
            for a in e.args:
                share = self._share(a, rows)
                if share is None:
                    return None
                missed *= 1.0 - share
            return 1.0 - missed
        if isinstance(e, E.Call) and e.name == "not":
            share = self._share(e.args[0], rows)
            return None if share is None else 1.0 - share
        return self._conjunction([e], rows)

    def _one_column_values(self, e: E.Expr) -> tuple[str, set[Any]] | None:
        """``(column, constants)`` where ``e`` is an OR of equalities and IN lists of one
        column with constants (mutually exclusive terms: their shares add up), else None."""
        column, values = None, set()
        for t in e.args if isinstance(e, E.Call) and e.name == "or" else (e,):
            if isinstance(t, E.Call) and t.name == "or":
                found = self._one_column_values(t)
                if found is None:
                    return None
                name, more = found
            elif isinstance(t, E.Call) and t.name == "in" and \
                    all(isinstance(v, E.Literal) for v in t.args[1:]):
                name, more = _column(t.args[0]), {v.value for v in t.args[1:]}
            else:
                compared = self._comparison(t)
                if compared is None or compared[1] != "eq":
                    return None
                name, more = compared[0], {compared[2]}
            if name is None or (column is not None and name != column):
                return None
            column = name
            values |= more
        return None if column is None else (column, values)

    def _conjunction(self, terms: list[E.Expr], rows: float) -> float | None:
        share, unknown, described = 1.0, False, False
        bounds: dict[str, list[tuple[str, float]]] = {}  # column: its comparisons
        for t in terms:
            compared = self._comparison(t)
            if compared is not None and compared[1] in ("lt", "le", "gt", "ge"):
                name, op, value = compared
                bounds.setdefault(name, []).append((op, value))
                continue
            found = self._term(t, compared, rows)
            if found is None:
                unknown = True
            else:
                share *= found
                described = True
        for name, ops in bounds.items():
            found = self._range_share(name, ops)
            if found is None:
                unknown = True
            else:
                share *= found
                described = True
        if not described:
            return None
        return share * (UNKNOWN_SHARE if unknown else 1.0)

    def _comparison(self, t: E.Expr) -> tuple[str, str, float | str] | None:
        """``(column, op, constant)`` of ``column op constant`` (either way round)."""
        if not (isinstance(t, E.Call) and t.name in _FLIPPED and len(t.args) == 2):
            return None
        a, b = t.args
        op = t.name
        if isinstance(a, E.Literal):
            a, b, op = b, a, _FLIPPED[op]
        name = _column(a)
        if name is None or name not in self.sources or not isinstance(b, E.Literal):
            return None
        if b.value is None:
            return None
        number = _constant(b)
        if number is None and op in ("lt", "le", "gt", "ge"):
            return None
        return name, op, number if number is not None else str(b.value)

    def _term(self, t: E.Expr, compared: tuple[str, str, Any] | None,
              rows: float) -> float | None:
        if compared is not None:  # eq or ne with a constant
            distinct = self._distinct(compared[0], rows, strings=True)
            if distinct is None:
                return None
            return 1.0 / distinct if compared[1] == "eq" else 1.0 - 1.0 / distinct
        if isinstance(t, E.Call) and t.name == "in" and \
                all(isinstance(v, E.Literal) for v in t.args[1:]):
            distinct = self._distinct(t.args[0], rows, strings=True)
            return None if distinct is None else min(1.0, (len(t.args) - 1) / distinct)
        if isinstance(t, E.Call) and t.name in ("and", "or", "not"):
            return self._share(t, rows)
        return None

    def _range_share(self, name: str, ops: list[tuple[str, float]]) -> float | None:
        """The share of a column's value range that all its comparisons allow together."""
        table, column = self.sources[name]
        found = self.catalog.value_range(table, column)
        if found is None:
            return None
        lo, hi = found
        whole = self.catalog.types().get(table, {}).get(column)
        discrete = whole is not None and whole.kind in ("integer", "date")
        low, high = lo, hi
        for op, value in ops:
            if op == "gt":
                low = max(low, value + 1 if discrete else value)
            elif op == "ge":
                low = max(low, value)
            elif op == "lt":
                high = min(high, value - 1 if discrete else value)
            else:
                high = min(high, value)
        if discrete:
            return max(0.0, min(1.0, (high - low + 1) / (hi - lo + 1)))
        if hi <= lo:
            return 1.0 if low <= lo <= high else 0.0
        return max(0.0, min(1.0, (high - low) / (hi - lo)))

    # -- bytes ------------------------------------------------------------------------------
    def row_bytes(self, node: P.Node) -> float:
        """Bytes of one row of ``node``'s output, about."""
        total = 0.0
        for f in node.schema:
            if f.type.kind == "varchar" and f.name in self.sources:
                total += self.catalog.value_bytes(*self.sources[f.name])
            else:
                total += _fixed_bytes(f.type)
        return max(total, 1.0)

    def bytes(self, node: P.Node) -> float:
        """Bytes of ``node``'s output over all ranks, about."""
        return self.rows(node) * self.row_bytes(node)
