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
``ops.table_on(xp, table)``
    ``table`` with its values and masks on the device.
``ops.exact_group_sums(xp, ids, values, mask, ngroups)``
    Exact int64 sums per group with their counts and an overflow flag per group.
``ops.group_minmax(xp, ids, values, mask, ngroups, want_max)``
    MIN or MAX per group.
``ops.checked(xp, op, a, b, valid, lo, hi)``
    Integer arithmetic that reports results outside ``[lo, hi]`` instead of wrapping.
``ops.window_frame_reduce``, ``ops.window_frame_moments``, ``ops.window_range_bounds``
    The window operator's frame aggregates (SUM/MIN/MAX and the moments of the variances
    over every row's frame) and RANGE frame bounds (:mod:`.physical.window_kernels`,
    :mod:`.physical.window_device`).

Capabilities
------------
``ops.host_kernels``
    The CPU-only mechanisms apply (fused SUM programs, deferred filter gathers, masked dense
    filters, lazy decimals). False on the GPU.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from hpc.backend import Backend, to_host
from hpc.dispatch import DeviceTable

from . import aggregate, join
from .table import Column, Table

__all__ = ["OPS", "hash_join", "group_ids", "combine_ids", "table_on", "host_column",
           "columns_on_host"]

OPS = DeviceTable("sql")
# ``host_kernels``: the layered engine's CPU-only mechanisms apply (fused SUM programs,
# deferred filter gathers, masked dense filters, lazy decimals)
OPS.constants("cpu", host_kernels=True)
OPS.constants("gpu", host_kernels=False)


# -- CPU: the numba kernels on NumPy columns (``xp`` is NumPy) ----------------------------------
@OPS.cpu("join")
def _join_cpu(xp: Any, probe: Any, build: Any, how: str = "inner", probe_valid: Any = None,
              build_valid: Any = None) -> tuple[Any, Any]:
    return join.hash_join(probe, build, how, probe_valid, build_valid)


@OPS.cpu("member")
def _member_cpu(xp: Any, values: Any, members: Any) -> Any:
    return join.matched(values, members)  # hashed: one pass however many members


@OPS.cpu("group_ids")
def _group_ids_cpu(xp: Any, keys: Any) -> tuple[Any, int, Any]:
    return aggregate.group_ids(keys)


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


@OPS.gpu("member")
def _member_gpu(xp: Any, values: Any, members: Any) -> Any:
    return xp.isin(values, xp.asarray(members))


@OPS.gpu("group_ids")
def _group_ids_gpu(xp: Any, keys: Any) -> tuple[Any, int, Any]:
    from . import gpu_ops

    return gpu_ops.group_ids(xp, keys)


@OPS.gpu("table_on")
def _table_on_gpu(xp: Any, table: Table) -> Table:
    # NumPy stands in for CuPy under the CUDA simulator, which writes every kernel argument
    # back to the host: Arrow's read-only buffers need a writable copy there.
    move = (lambda a: np.require(a, requirements="W")) if xp is np else xp.asarray
    return Table({n: Column(move(c.values), c.kind, c.dictionary,
                            None if c.valid is None else move(c.valid))
                  for n, c in table.columns.items()})


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


def combine_ids(backend: Backend, columns: list[Any], valids: list[Any]) -> Any:
    """One int64 key per row for several key columns (see :func:`.aggregate.combine_ids`)."""
    return aggregate.combine_ids(columns, valids, functools.partial(group_ids, backend))


def table_on(backend: Backend, table: Table) -> Table:
    """``table`` with its values and masks on ``backend``'s device (dictionaries stay on the
    host: string predicates run on them and map back through the codes)."""
    return OPS.on(backend).table_on(backend.xp, table)


def host_column(c: Column) -> Column:
    """``c`` with its values and mask on the host (the same column when they are)."""
    if isinstance(c.values, np.ndarray) and (c.valid is None or isinstance(c.valid, np.ndarray)):
        return c
    return Column(to_host(c.values), c.kind, c.dictionary,
                  None if c.valid is None else to_host(c.valid))


def columns_on_host(columns: dict[str, Column]) -> dict[str, Column]:
    """The columns as NumPy arrays (a device-to-host copy of device columns)."""
    return {n: host_column(c) for n, c in columns.items()}


# -- window kernels: the window operator's frame aggregates and RANGE bounds (see
# :mod:`.physical.window_kernels`), numba on the CPU, array programs on the device
# (:mod:`.physical.window_device`) -------------------------------------------------------------
@OPS.cpu("window_frame_reduce")
def _window_frame_reduce_cpu(xp: Any, values: Any, present: Any, starts: Any, ends: Any,
                             op: int, identity: Any) -> Any:
    from .physical import window_kernels

    return window_kernels.frame_reduce(values, present, starts, ends, op, identity)


@OPS.gpu("window_frame_reduce")
def _window_frame_reduce_gpu(xp: Any, values: Any, present: Any, starts: Any, ends: Any,
                             op: int, identity: Any) -> Any:
    from .physical import window_device

    return window_device.frame_reduce(xp, values, present, starts, ends, op, identity)


@OPS.cpu("window_frame_moments")
def _window_frame_moments_cpu(xp: Any, values: Any, present: Any, starts: Any, ends: Any
                              ) -> tuple:
    from .physical import window_kernels

    return window_kernels.frame_moments(values, present, starts, ends)


@OPS.gpu("window_frame_moments")
def _window_frame_moments_gpu(xp: Any, values: Any, present: Any, starts: Any, ends: Any
                              ) -> tuple:
    from .physical import window_device

    return window_device.frame_moments(xp, values, present, starts, ends)


@OPS.cpu("window_range_bounds")
def _window_range_bounds_cpu(xp: Any, values: Any, lo: Any, hi: Any, targets: Any,
                             ascending: bool, strict: bool) -> Any:
    from .physical import window_kernels

    return window_kernels.range_bounds(values, lo, hi, targets, ascending, strict)


@OPS.gpu("window_range_bounds")
def _window_range_bounds_gpu(xp: Any, values: Any, lo: Any, hi: Any, targets: Any,
                             ascending: bool, strict: bool) -> Any:
    from .physical import window_device

    return window_device.range_bounds(xp, values, lo, hi, targets, ascending, strict)
