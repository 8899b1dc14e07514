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
from mpi4py import MPI
from sqlglot import exp

from hpc.backend import Backend

from . import ops, strings
from .expressions import column_key
from .planner import QueryPlan
from .table import Column, settle, settle_columns

__all__ = ["carried_columns", "group_ids", "settle_named"]


def carried_columns(plan: QueryPlan, refs: list[exp.Column]) -> set[str]:
    """Keys of the columns that ``refs`` (every column reference after the scans) reads only
    as a bare output column or a bare GROUP BY key."""
    bare = {id(n) for n in [*(e.unalias() for e in plan.select.expressions), *plan.group]
            if isinstance(n, exp.Column)}
    only_bare: dict[str, bool] = {}
    for c in refs:
        key = column_key(c)
        only_bare[key] = only_bare.get(key, True) and id(c) in bare
    return {k for k, ok in only_bare.items() if ok}


def is_raw(column: Column) -> bool:
    return isinstance(column.dictionary, strings.Entries)


def group_ids(backend: Backend, keys: list[Column],
              comm: Any) -> tuple[Any, int, Any, list[Column]]:
    """Collective over ``comm``. ``(ids, ngroups, first rows, keys)`` of GROUP BY ``keys``
    (see :func:`.aggregate.group_ids`), the keys returned settled where they had to be.

    Raw string keys are first tried as determined by the other keys (``GROUP BY c_custkey,
    c_name``): grouped by those, a raw key that holds one string in every group adds no
    groups and stays raw. Otherwise (over all ranks) the raw keys are settled and grouped
    with the rest."""
    raw = [j for j, c in enumerate(keys) if is_raw(c)]
    others = [c for c in keys if not is_raw(c)]
    if raw and others:
        ids, ngroups, first = _ids(backend, others)
        differ = sum(_differs(ids, first, keys[j]) for j in raw)
        if comm.Get_size() > 1:
            differ = comm.allreduce(differ, op=MPI.SUM)
        if differ == 0:
            return ids, ngroups, first, keys
    if raw:
        keys = [settle(c, comm) if is_raw(c) else c for c in keys]
    return (*_ids(backend, keys), keys)


def _ids(backend: Backend, keys: list[Column]) -> tuple[Any, int, Any]:
    combined = ops.combine_ids(backend, [c.values for c in keys], [c.valid for c in keys])
    return ops.group_ids(backend, combined)


def _differs(ids: np.ndarray, first: np.ndarray, column: Column) -> int:
    """Rows whose string (or null) differs from their group's first row's."""
    from .scan_kernels import differs_in_group

    if len(column) == 0:
        return 0
    offsets, data = strings._buffers(strings._plain(column.dictionary.words))
    valid = np.zeros(0, bool) if column.valid is None else column.valid
    return int(differs_in_group(ids, first, column.values, offsets, data, valid,
                                column.valid is not None))


def settle_named(columns: dict[str, Column], names: list[str], comm: Any) -> dict[str, Column]:
    """Collective. ``columns`` with those ``names`` settled, also where the same column is
    held under another name."""
    chosen = {n: columns[n] for n in names}
    settled = settle_columns(chosen, comm)
    by_id = {id(chosen[n]): settled[n] for n in names}
    return {n: by_id.get(id(c), c) for n, c in columns.items()}
