"""The engine's kernels on its backend: the numba CPU kernels for NumPy columns, the
numba.cuda kernels (:mod:`.gpu_ops`) for device columns, and moving tables between host and
device. The engine calls only these, so an operator is written once for both devices."""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

from hpc.backend import Backend, to_host

from . import aggregate, join
from .table import Column, Table

__all__ = ["hash_join", "group_ids", "combine_ids", "reduce_groups", "all_valid",
           "table_on", "columns_on_host"]


def hash_join(backend: Backend, probe: Any, build: Any, how: str = "inner",
              probe_valid: Any = None, build_valid: Any = None) -> tuple[Any, Any]:
    """Row pairs of an equi-join (see :func:`.join.hash_join`) on ``backend``'s device."""
    if backend.is_gpu:
        from . import gpu_ops

        return gpu_ops.hash_join(backend.xp, probe, build, how, probe_valid, build_valid)
    return join.hash_join(probe, build, how, probe_valid, build_valid)


def group_ids(backend: Backend, keys: Any) -> tuple[Any, int, Any]:
    """Dense group ids, group count and first rows (see :func:`.aggregate.group_ids`)."""
    if backend.is_gpu:
        from . import gpu_ops

        return gpu_ops.group_ids(backend.xp, keys)
    return aggregate.group_ids(keys)


def reduce_groups(backend: Backend, op: str, ids: Any, ngroups: int, values: Any,
                  valid: Any) -> tuple[Any, Any]:
    """Aggregate ``op`` per group (see :func:`.aggregate.reduce_groups`)."""
    if backend.is_gpu:
        from . import gpu_ops

        return gpu_ops.reduce_groups(backend.xp, op, ids, ngroups, values, valid)
    return aggregate.reduce_groups(op, ids, ngroups, values, valid)


def combine_ids(backend: Backend, columns: list[Any], valids: list[Any]) -> Any:
    """One int64 key per row for several key columns (see :func:`.aggregate.combine_ids`)."""
    return aggregate.combine_ids(columns, valids, functools.partial(group_ids, backend))


def all_valid(masks: list[Any]) -> Any:
    """The AND of validity masks (None entries are all-valid); None when there are none."""
    present = [m for m in masks if m is not None]
    return functools.reduce(operator.and_, present) if present else None


def table_on(backend: Backend, table: Table) -> Table:
    """``table`` with its values and masks on ``backend``'s device (dictionaries stay on the
    host: string predicates run on them and map back through the codes)."""
    if not backend.is_gpu:
        return table
    xp = backend.xp
    # NumPy stands in for CuPy under the CUDA simulator, which writes every kernel argument
    # back to the host: Arrow's read-only buffers need a writable copy there.
    move = (lambda a: np.require(a, requirements="W")) if xp is np else xp.asarray
    return Table({n: Column(move(c.values), c.kind, c.dictionary,
                            None if c.valid is None else move(c.valid))
                  for n, c in table.columns.items()})


def columns_on_host(columns: dict[str, Column]) -> dict[str, Column]:
    """The columns as NumPy arrays (a device-to-host copy of device columns)."""
    return {n: Column(to_host(c.values), c.kind, c.dictionary,
                      None if c.valid is None else to_host(c.valid))
            for n, c in columns.items()}
