"""Carried strings: string columns a query only passes along (an output column, a GROUP BY key
another key determines) keep the raw entries Parquet gave them (:class:`~.strings.Entries`)
through filters and joins, and are sorted into a dictionary once, on the rows that are left.

Sorting a table's dictionary of unique strings and making Python strings of it costs more than
the rest of a query that outputs a few of them (TPC-H Q10's customer names, addresses, phones
and comments: 0.15 s of a 0.45 s query). Raw codes are row references, not values: two codes
may point to equal strings, and codes carry no order. So an operator that compares them, or a
rank other than the one that read them, needs them settled (:func:`.table.settle`); the
exchange does that before shipping, :func:`group_ids` before grouping.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlglot import exp

from hpc.backend import Backend
from hpc.collectives import allreduce

from . import ops
from .expressions import InSet, column_key
from .physical.columns import differing_rows
from .planner import QueryPlan, Source
from .table import Column, settle, settle_columns

__all__ = ["carried_columns", "unsorted_columns", "read_per_entry", "per_entry_top",
           "group_ids", "settle_named"]


def per_entry_top(node: exp.Expression) -> exp.Expression:
    """The outermost of the SUBSTRINGs by constants around ``node``: functions of one string
    computed entry by entry, so raw entries stay raw through them."""
    while (isinstance(node.parent, exp.Substring) and node.parent.this is node
           and all(isinstance(node.parent.args.get(a), exp.Literal | None)
                   for a in ("start", "length"))):
        node = node.parent
    return node


def carried_columns(plan: QueryPlan, refs: list[exp.Column]) -> set[str]:
    """Keys of the columns that ``refs`` (every column reference after the scans) reads only
    as a bare output column or a bare GROUP BY key (perhaps through SUBSTRINGs by constants).
    """
    bare = {id(e.unalias()) for e in plan.select.expressions} | {id(g) for g in plan.group}
    only_bare: dict[str, bool] = {}
    for c in refs:
        key = column_key(c)
        only_bare[key] = only_bare.get(key, True) and id(per_entry_top(c)) in bare
    return {k for k, ok in only_bare.items() if ok}


def read_per_entry(node: exp.Column) -> bool:
    """Whether a column reference is the subject of a predicate decided entry by entry of a
    string dictionary (LIKE, IN a list or a subquery's set, a comparison with constants),
    perhaps through SUBSTRINGs by constants (see :func:`per_entry_top`)."""
    node = per_entry_top(node)
    parent = node.parent

    def text(e: exp.Expression | None) -> bool:
        return isinstance(e, exp.Literal) and e.is_string

    if isinstance(parent, exp.Like):
        return parent.this is node and text(parent.expression)
    if isinstance(parent, InSet):
        return parent.this is node
    if isinstance(parent, exp.In):
        return (parent.this is node and parent.args.get("query") is None
                and all(text(e) for e in parent.expressions))
    if isinstance(parent, exp.Between):
        return parent.this is node and text(parent.args["low"]) and text(parent.args["high"])
    if isinstance(parent, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        return text(parent.expression if parent.this is node else parent.this)
    return False


def unsorted_columns(src: Source, used: set[str], kept_raw: set[str]) -> set[str]:
    """Columns whose dictionaries need not be sorted (see :class:`~.strings.Entries`): those
    only the scan's per-entry string predicates read, and the carried ones (``kept_raw``,
    see :mod:`.carried`) that its filters read only so. Only carried ones when the scan keeps
    no other column, since the filtered frame then carries them all on."""
    refs: dict[str, list[exp.Column]] = {}
    for term in src.filters:
        for col in term.find_all(exp.Column):
            refs.setdefault(col.name, []).append(col)
    keeps_any = any(f"{src.alias}.{c}" in used for c in src.columns)
    out = set()
    for c in src.columns:
        key = f"{src.alias}.{c}"
        per_entry = all(read_per_entry(r) for r in refs.get(c, []))
        if per_entry and (key in kept_raw or (keeps_any and key not in used and c in refs)):
            out.add(c)
    return out


def group_ids(backend: Backend, keys: list[Column],
              comm: Any) -> tuple[Any, int, Any, list[Column]]:
    """Collective over ``comm``. ``(ids, ngroups, first rows, keys)`` of GROUP BY ``keys``
    (see :func:`.aggregate.group_ids`), the keys returned settled where they had to be.

    Raw string keys with few entries for their rows (a flag's few Parquet dictionaries) are
    settled at once. The others are first tried as determined by the remaining keys
    (``GROUP BY c_custkey, c_name``): grouped by those, a raw key that holds one string in
    every group adds no groups and stays raw. Otherwise (over all ranks) the raw keys are
    settled and grouped with the rest."""
    raw = [j for j, c in enumerate(keys) if c.raw]
    if raw:  # raw keys with few entries (Q1's flags) cost little to settle: no check
        sizes = np.array([len(keys[j].dictionary) for j in raw] + [len(keys[0])], np.int64)
        sizes = allreduce(sizes, "sum", comm)  # decided on the totals: alike on every rank
        few = {j for j, entries in zip(raw, sizes[:-1], strict=True)
               if _FEW_ROWS_AN_ENTRY * entries <= sizes[-1]}
        keys = [settle(c, comm) if j in few else c for j, c in enumerate(keys)]
        raw = [j for j in raw if j not in few]
    others = [c for c in keys if not c.raw]
    if raw and others:
        ids, ngroups, first = _ids(backend, others)
        differ = sum(differing_rows(ids, first, keys[j]) for j in raw)
        differ = allreduce(differ, "sum", comm)
        if differ == 0:
            return ids, ngroups, first, keys
    if raw:
        keys = [settle(c, comm) if c.raw else c for c in keys]
    return (*_ids(backend, keys), keys)


_FEW_ROWS_AN_ENTRY = 8  # raw keys with this many rows an entry are settled, not checked


def _ids(backend: Backend, keys: list[Column]) -> tuple[Any, int, Any]:
    combined = ops.combine_ids(backend, [c.values for c in keys], [c.valid for c in keys])
    return ops.group_ids(backend, combined)


def settle_named(columns: dict[str, Column], names: list[str], comm: Any) -> dict[str, Column]:
    """Collective. ``columns`` with those ``names`` settled, also where the same column is
    held under another name."""
    chosen = {n: columns[n] for n in names}
    settled = settle_columns(chosen, comm)
    by_id = {id(chosen[n]): settled[n] for n in names}
    return {n: by_id.get(id(c), c) for n, c in columns.items()}
