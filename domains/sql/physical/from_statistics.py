"""Ungrouped MIN, MAX and COUNT over a whole Parquet table, answered from its footers.

``SELECT min(d), max(d), count(*) FROM t`` (a dashboard's first look at a table, a check
before a load) needs no row: Parquet's row groups carry their rows, their NULLs and their
least and greatest values. An aggregate without keys whose input is a scan with no filter
(or a projection of its columns), and whose every aggregate is COUNT(*), COUNT(x) or MIN /
MAX of an integer, DECIMAL or DATE column, is answered from those statistics: the maximum of
a 6M-row integer column took 190 ms of decoding it, and takes well under a millisecond.
Where any row group lacks a statistic, or the table is not in Parquet, the scan runs as
usual. Doubles are left to the scan (NaN orders above every value in SQL and is not in a
footer's min/max) and so are strings (writers may truncate their statistics).

Every rank reads the same footers, so all decide alike and none waits on a scan another
skipped. Rank 0 holds the answer; a partial aggregate's other ranks hold the states of no
rows (a count of 0, a NULL extreme), which the final aggregate merges away.
"""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.partial import state_name
from hpc.domains.sql.table import Column

from .evaluate import literal_column
from .join import Side

__all__ = ["answer_from_statistics"]

_EXTREMES = ("min", "max")
_EXACT_KINDS = ("integer", "decimal", "date")
_EPOCH = datetime.date(1970, 1, 1)


def answer_from_statistics(node: P.Aggregate, catalog: Any, rank: int) -> Side | None:
    """This rank's rows of ``node`` read from its table's Parquet statistics, or None
    where they cannot answer it (see the module's text).

    Parameters
    ----------
    node : Aggregate
        The aggregate; answered only without keys, in the ``"complete"`` or
        ``"partial"`` phase.
    catalog : Catalog
        Where the scanned table's files are (:meth:`~..catalog.Catalog.summary`).
    rank : int
        This rank (rank 0 holds the answer).
    """
    wanted = _wanted(node)
    if wanted is None:
        return None
    table, columns = wanted
    summaries = {}
    extremes = {columns[name] for name, agg in node.aggregates if agg.name in _EXTREMES}
    for column in {c for c in columns.values() if c is not None}:
        found = catalog.summary(table, column, column in extremes)
        if found is None:
            return None
        summaries[column] = found
    whole = None
    if None in columns.values():  # COUNT(*): the rows alone
        whole = catalog.summary(table, None)
        if whole is None:
            return None
    partial = node.phase == "partial"
    if rank != 0 and not partial:  # (a complete aggregate's one row is rank 0's)
        return Side({f.name: _column(None, f.type, 0) for f in node.schema}, 0)
    out: dict[str, Column] = {}
    for name, agg in node.aggregates:
        column = columns[name]
        summary = None if column is None else summaries[column]
        if agg.name in ("count_star", "count"):
            value: Any = whole.rows if summary is None else summary.rows - summary.nulls
            if rank != 0:
                value = 0
            out[state_name(name, "n") if partial else name] = _column(value, agg.type)
        else:
            value = None if rank != 0 or summary is None else (
                summary.lo if agg.name == "min" else summary.hi)
            out[state_name(name, "v") if partial else name] = _column(value, agg.type)
    return Side(out, 1)


def _wanted(node: P.Aggregate) -> tuple[str, dict[str, str | None]] | None:
    """The scanned table and, per aggregate, the table's column it reads (None for
    COUNT(*)); None where the aggregate is not one statistics answer."""
    if node.keys or node.phase not in ("complete", "partial"):
        return None
    scan, renamed = node.input, {}
    if isinstance(scan, P.Project):
        if not all(isinstance(e, E.Ref) for _, e in scan.exprs):
            return None
        renamed = {name: e.name for name, e in scan.exprs}  # type: ignore[union-attr]
        scan = scan.input
    if not isinstance(scan, P.Scan) or scan.prune is not None:
        return None
    sources = {name: source for name, source, _ in scan.columns}
    columns: dict[str, str | None] = {}
    for name, agg in node.aggregates:
        if agg.filter is not None or agg.order or agg.params:
            return None
        if agg.name == "count_star":
            columns[name] = None
            continue
        if len(agg.args) != 1 or not isinstance(agg.args[0], E.Ref):
            return None
        ref = agg.args[0]
        counted = agg.name == "count" and not agg.distinct
        if not counted and (agg.name not in _EXTREMES or ref.type.kind not in _EXACT_KINDS):
            return None
        source = sources.get(renamed.get(ref.name, ref.name))
        if source is None:
            return None
        columns[name] = source
    return scan.table, columns


def _column(value: Any, sql_type: Any, n: int = 1) -> Column:
    """``value`` (a statistic: int, Decimal or date; None for NULL) as ``n`` rows of
    ``sql_type``, in arrays of their own."""
    if isinstance(value, datetime.date):
        value = (value - _EPOCH).days
    lit = literal_column(E.Literal(value, sql_type), n)
    values = np.array(lit.values)
    valid = None if lit.valid is None else np.array(lit.valid)
    return Column(values, lit.kind, lit.dictionary, valid)
