"""Semi-join restriction of derived tables ("magic sets"): a grouped subquery that is joined
on one of its GROUP BY columns only needs the groups whose key the other side has.

Decorrelated subqueries are derived tables grouped by their correlation keys (TPC-H Q2, Q17,
Q20, Q21): run as they are, they aggregate a whole fact table, though the outer query keeps a
few thousand keys. When the other side of the join is already known (a filtered scan, or the
joined rows a LEFT JOIN starts from), its distinct keys become ``key IN (<keys>)`` in the
subquery's WHERE, which its scan applies as a hash semi join before any grouping. Dropping
whole groups never changes the rows the join keeps: a group whose key the other side lacks
matches nothing (a NULL key matches nothing either).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlglot import exp

from hpc.backend import to_host

from .exchange import allgather_columns, global_rows
from .expressions import InSet
from .table import Column

__all__ = ["restricted", "MAX_KEYS"]

MAX_KEYS = 1 << 18  # distinct keys over all ranks: more, and the semi join costs what it saves
_MAX_ROWS = 4 * MAX_KEYS  # a bigger other side is not worth deduplicating to find out


def restricted(sub: exp.Select, links: list[tuple[str, Column]], comm: Any) -> exp.Select:
    """Collective. ``sub`` with ``WHERE column IN (<keys>)`` added for each link ``(name,
    other)``: the output column ``name`` of ``sub``, a plain GROUP BY column, is joined by
    equality to ``other`` (integers or dates), whose distinct valid values are the keys.
    Links that do not qualify are skipped; ``sub`` itself is returned when none does.
    Every rank must pass the same links (the plan is the same everywhere)."""
    if sub.args.get("limit") is not None or not sub.args.get("group"):
        return sub  # a LIMIT depends on every group; without groups no key selects rows
    grouped = {g.sql() for g in sub.args["group"].expressions}
    terms = []
    for name, other in links:
        item = next((e for e in sub.expressions if e.alias_or_name == name), None)
        column = None if item is None else item.unalias()
        if (not isinstance(column, exp.Column) or column.sql() not in grouped
                or other.kind not in ("int", "date")):
            continue
        keys = _distinct_keys(other, comm)
        if keys is None:
            continue
        term = InSet(this=column.copy())
        term.meta["values"] = keys
        term.meta["exists"] = False
        terms.append(term)
    return sub.where(*terms) if terms else sub


def _distinct_keys(col: Column, comm: Any) -> np.ndarray | None:
    """Collective. The distinct valid values of ``col`` over all ranks, or None when there
    are too many (the same answer on every rank)."""
    if global_rows(len(col), comm) > _MAX_ROWS:
        return None
    values = to_host(col.values)
    if col.valid is not None:
        values = values[to_host(col.valid)]
    local = np.unique(values).astype(np.int64)
    everyone = allgather_columns({"k": Column(local, "int")}, comm)["k"].values
    keys = np.unique(everyone)
    return keys if len(keys) <= MAX_KEYS else None
