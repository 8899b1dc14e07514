"""The engine's kernels on its backend: the numba CPU kernels for NumPy columns, the
numba.cuda kernels (:mod:`.gpu_ops`) for device columns, and moving tables between host and
device. They are listed per device in :data:`OPS` (:class:`hpc.dispatch.DeviceTable`); the
engine takes ``OPS.on(backend)`` once and calls only these, so an operator is written once
for both devices and its logic never asks which device it runs on.

Operations (``ops = OPS.on(backend)``; each takes ``backend.xp`` first)
-----------------------------------------------------------------------
``ops.join(xp, probe, build, how, probe_valid, build_valid)``
    Row pairs of an equi-join (see :func:`.join.hash_join`).
``ops.group_ids(xp, keys)``
    Dense group ids, group count and first rows (see :func:`.aggregate.group_ids`).
``ops.reduce_groups(xp, op, ids, ngroups, values, valid)``
    Aggregate ``op`` per group (see :func:`.aggregate.reduce_groups`).
``ops.table_on(xp, table)``
    ``table`` with its values and masks on the device.
``ops.distinct_keys(xp, values)``
    The distinct values of one integer key column without nulls, by a one-pass CPU kernel
    (:func:`.aggregate.distinct_integers`); None where that does not apply (always on the
    GPU): the caller numbers the groups instead.
``ops.fused_sums(xp, ids, ngroups, aggs, args, states, counts)``
    The float SUMs and AVGs without nulls and the row count in one CPU pass (see
    ``_fused_sums_cpu``); nothing on the GPU (each aggregate is reduced on its own there).

Capabilities
------------
``ops.carries_raw_columns``
    Raw (unmerged) string columns are carried past the scans: their grouping check is a CPU
    kernel (:mod:`.carried`). False on the GPU.
``ops.defers_scan_filter``
    A single grouped table's scan filter may hand its mask to the aggregate instead of
    gathering every column. False on the GPU.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

from hpc.backend import Backend, to_host
from hpc.dispatch import DeviceTable

from . import aggregate, join
from .table import Column, Table

__all__ = ["OPS", "hash_join", "group_ids", "combine_ids", "reduce_groups", "all_valid",
           "table_on", "columns_on_host"]

OPS = DeviceTable("sql")
# ``host_kernels``: the layered engine's CPU-only mechanisms apply (fused SUM programs,
# deferred filter gathers, masked dense filters, lazy decimals)
OPS.constants("cpu", carries_raw_columns=True, defers_scan_filter=True, host_kernels=True)
OPS.constants("gpu", carries_raw_columns=False, defers_scan_filter=False, host_kernels=False)


# -- CPU: the numba kernels on NumPy columns (``xp`` is NumPy) ----------------------------------
@OPS.cpu("join")
def _join_cpu(xp: Any, probe: Any, build: Any, how: str = "inner", probe_valid: Any = None,
              build_valid: Any = None) -> tuple[Any, Any]:
    return join.hash_join(probe, build, how, probe_valid, build_valid)


@OPS.cpu("group_ids")
def _group_ids_cpu(xp: Any, keys: Any) -> tuple[Any, int, Any]:
    return aggregate.group_ids(keys)


@OPS.cpu("reduce_groups")
def _reduce_groups_cpu(xp: Any, op: str, ids: Any, ngroups: int, values: Any,
                       valid: Any) -> tuple[Any, Any]:
    return aggregate.reduce_groups(op, ids, ngroups, values, valid)


@OPS.cpu("distinct_keys")
def _distinct_keys_cpu(xp: Any, values: Any) -> Any:
    return aggregate.distinct_integers(values)


@OPS.cpu("table_on")
def _table_on_cpu(xp: Any, table: Table) -> Table:
    return table


# -- GPU: the numba.cuda kernels, imported on first use (the CPU engine never loads them);
# ``xp`` is CuPy, or NumPy under the CUDA simulator ----------------------------------------------
@OPS.gpu("join")
def _join_gpu(xp: Any, probe: Any, build: Any, how: str = "inner", probe_valid: Any = None,
              build_valid: Any = None) -> tuple[Any, Any]:
    from . import gpu_ops

    return gpu_ops.hash_join(xp, probe, build, how, probe_valid, build_valid)


@OPS.gpu("group_ids")
def _group_ids_gpu(xp: Any, keys: Any) -> tuple[Any, int, Any]:
    from . import gpu_ops

    return gpu_ops.group_ids(xp, keys)


@OPS.gpu("reduce_groups")
def _reduce_groups_gpu(xp: Any, op: str, ids: Any, ngroups: int, values: Any,
                       valid: Any) -> tuple[Any, Any]:
    from . import gpu_ops

    return gpu_ops.reduce_groups(xp, op, ids, ngroups, values, valid)


@OPS.gpu("distinct_keys")
def _distinct_keys_gpu(xp: Any, values: Any) -> None:
    return None  # the groups are numbered instead


@OPS.gpu("table_on")
def _table_on_gpu(xp: Any, table: Table) -> Table:
    # NumPy stands in for CuPy under the CUDA simulator, which writes every kernel argument
    # back to the host: Arrow's read-only buffers need a writable copy there.
    move = (lambda a: np.require(a, requirements="W")) if xp is np else xp.asarray
    return Table({n: Column(move(c.values), c.kind, c.dictionary,
                            None if c.valid is None else move(c.valid))
                  for n, c in table.columns.items()})


@OPS.cpu("fused_sums")
def _fused_sums_cpu(xp: Any, ids: Any, ngroups: int, aggs: list[Any], args: list[Column | None],
               states: list, counts: dict) -> None:
    """The SUMs and AVGs of float columns without nulls, and the row count, in one pass
    (:func:`.aggregate.sum_columns`); a column several of them read (``sum(x)``,
    ``avg(x)``) is summed once. Fills their ``states`` and ``counts[None]``. ``aggs`` are
    the engine's aggregates (``.op``, ``.arg``), ``args`` their argument columns."""
    if not ngroups:
        return
    fused = [i for i, (a, col) in enumerate(zip(aggs, args, strict=True))
             if a.op in ("sum", "avg") and col is not None and col.valid is None
             and col.kind == "float"]
    if not fused and not any(a.op == "count" and a.arg is None for a in aggs):
        return
    arrays = {id(args[i].values): args[i].values for i in fused}  # each array once, in order
    row = {key: j for j, key in enumerate(arrays)}
    sums, count = aggregate.sum_columns(ids, ngroups, list(arrays.values()))
    counts[None] = count
    for i in fused:
        states[i] = {"sum": sums[row[id(args[i].values)]], "count": count}


@OPS.gpu("fused_sums")
def _fused_sums_gpu(xp: Any, ids: Any, ngroups: int, aggs: list[Any], args: list[Column | None],
                    states: list, counts: dict) -> None:
    return None  # each aggregate is reduced on its own (reduce_groups)


# -- the layered engine's exact group sums, min/max and checked arithmetic --------------------
@OPS.cpu("exact_group_sums")
def _exact_group_sums_cpu(xp: Any, ids: Any, values: Any, mask: Any, ngroups: int) -> tuple:
    from .physical.checked import group_sums

    return group_sums(ids, values, mask, ngroups)


@OPS.gpu("exact_group_sums")
def _exact_group_sums_gpu(xp: Any, ids: Any, values: Any, mask: Any, ngroups: int) -> tuple:
    """(sums, counts, overflowed) per group: the sums of the values' 32-bit halves by the
    device's group sums (exact below 2**31 rows), recombined."""
    from . import gpu_ops

    high, _ = gpu_ops.reduce_groups(xp, "sum", ids, ngroups, values >> 32, mask)
    low, _ = gpu_ops.reduce_groups(xp, "sum", ids, ngroups, values & 0xFFFFFFFF, mask)
    counts, _ = gpu_ops.reduce_groups(xp, "count", ids, ngroups, values, mask)
    top = high + (low >> 32)
    overflowed = (top < -(2**31)) | (top >= 2**31)
    return (top << 32) | (low & 0xFFFFFFFF), counts, overflowed


@OPS.cpu("group_minmax")
def _group_minmax_cpu(xp: Any, ids: Any, values: Any, mask: Any, ngroups: int,
                      want_max: bool) -> tuple[Any, Any]:
    return aggregate.minmax(ids, values, mask, ngroups, want_max)


@OPS.gpu("group_minmax")
def _group_minmax_gpu(xp: Any, ids: Any, values: Any, mask: Any, ngroups: int,
                      want_max: bool) -> tuple[Any, Any]:
    from . import gpu_ops

    return gpu_ops.reduce_groups(xp, "max" if want_max else "min", ids, ngroups, values, mask)


@OPS.cpu("checked")
def _checked_cpu(xp: Any, op: str, a: Any, b: Any, valid: Any, lo: int, hi: int) -> tuple:
    from .physical.checked import checked_kernel

    return checked_kernel(op, a, b, valid, lo, hi)


@OPS.gpu("checked")
def _checked_gpu(xp: Any, op: str, a: Any, b: Any, valid: Any, lo: int, hi: int) -> tuple:
    from .physical.checked import checked_arrays

    return checked_arrays(xp, op, a, b, valid, lo, hi)


# -- the same on both devices ------------------------------------------------------------------
def hash_join(backend: Backend, probe: Any, build: Any, how: str = "inner",
              probe_valid: Any = None, build_valid: Any = None) -> tuple[Any, Any]:
    """Row pairs of an equi-join (see :func:`.join.hash_join`) on ``backend``'s device."""
    return OPS.on(backend).join(backend.xp, probe, build, how, probe_valid, build_valid)


def group_ids(backend: Backend, keys: Any) -> tuple[Any, int, Any]:
    """Dense group ids, group count and first rows (see :func:`.aggregate.group_ids`)."""
    return OPS.on(backend).group_ids(backend.xp, keys)


def reduce_groups(backend: Backend, op: str, ids: Any, ngroups: int, values: Any,
                  valid: Any) -> tuple[Any, Any]:
    """Aggregate ``op`` per group (see :func:`.aggregate.reduce_groups`)."""
    return OPS.on(backend).reduce_groups(backend.xp, op, ids, ngroups, values, valid)


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
    return OPS.on(backend).table_on(backend.xp, table)


def columns_on_host(columns: dict[str, Column]) -> dict[str, Column]:
    """The columns as NumPy arrays (a device-to-host copy of device columns)."""
    return {n: Column(to_host(c.values), c.kind, c.dictionary,
                      None if c.valid is None else to_host(c.valid))
            for n, c in columns.items()}
