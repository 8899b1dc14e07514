"""Moving columns between ranks: hash-partitioned shuffle, broadcast (all-gather) and gather to
rank 0, on raw buffers (never pickled). String dictionaries are global (merged when a table is
read), so only the int32 codes travel; carried strings still in their raw entries are settled
first (:func:`.table.settle`); validity masks travel as bytes when any rank has one."""

from __future__ import annotations

from typing import Any

import numpy as np

from hpc.backend import array_module
from hpc.collectives import allgather_rows, allreduce
from hpc.shuffle import combined_hash, hash_shuffle, shuffle

from .table import Column, settle_columns

__all__ = ["ship", "allgather_columns", "key_hash", "partition_by_keys"]


def _with_masks(columns: dict[str, Column], comm: Any) -> list[str]:
    """Names whose validity mask must travel (some rank has one)."""
    local = [c.valid is not None for c in columns.values()]
    flags = allreduce(np.asarray(local, np.int64), "sum", comm) if local else []
    return [n for n, f in zip(columns, flags, strict=True) if f]


def _arrays(columns: dict[str, Column], masked: list[str]) -> dict[str, np.ndarray]:
    arrays = {n: array_module(c.values).ascontiguousarray(c.values) for n, c in columns.items()}
    for n in masked:
        c = columns[n]
        xp = array_module(c.values)
        valid = xp.ones(len(c), bool) if c.valid is None else c.valid
        arrays["\0valid:" + n] = xp.ascontiguousarray(valid)
    return arrays


def _columns(template: dict[str, Column], arrays: dict[str, np.ndarray]) -> dict[str, Column]:
    out = {}
    for n, c in template.items():
        valid = arrays.get("\0valid:" + n)
        out[n] = Column(arrays[n], c.kind, c.dictionary, valid)
    return out


def ship(columns: dict[str, Column], dest: np.ndarray | None, comm: Any,
         hashes: list[Any] | None = None) -> dict[str, Column]:
    """Collective. Send row ``i`` of every column to rank ``dest[i]`` (see
    :func:`hpc.shuffle.shuffle`); kinds and dictionaries are kept. With ``hashes`` (integer
    key hashes, one array per key column) instead of ``dest``, to the rank
    ``hash_partition(combined_hash(hashes))``: :func:`hpc.shuffle.hash_shuffle` hashes,
    picks and counts the ranks in one pass."""
    if comm.Get_size() == 1:
        return columns
    columns = settle_columns(columns, comm)
    arrays = _arrays(columns, _with_masks(columns, comm))
    return _columns(columns, shuffle(arrays, dest, comm) if hashes is None
                    else hash_shuffle(arrays, hashes, comm))


def allgather_columns(columns: dict[str, Column], comm: Any) -> dict[str, Column]:
    """Collective. Every rank gets all rows of every rank (in rank order): a broadcast join's
    small side. Device columns travel through host buffers and return to the device (see
    :mod:`hpc.collectives`)."""
    if comm.Get_size() == 1:
        return columns
    columns = settle_columns(columns, comm)
    masked = _with_masks(columns, comm)
    arrays = _arrays(columns, masked)
    return _columns(columns, {name: allgather_rows(a, comm) for name, a in arrays.items()})


def _as_int64(c: Column) -> np.ndarray:
    v = c.values
    if v.dtype.kind == "f":
        v = (v.astype(np.float64) + 0.0).view(np.int64)
    v = v.astype(np.int64, copy=False)
    if c.valid is not None:
        v = array_module(v).where(c.valid, v, np.int64(-0x7FFF_FFFF_FFFF_FFF1))
    return v


def key_hash(keys: list[Column]) -> np.ndarray:
    """One uint64 per row from several key columns, equal wherever the keys are equal (values
    compared as SQL GROUP BY does: nulls equal each other)."""
    return combined_hash([_as_int64(c) for c in keys])


def partition_by_keys(
    columns: dict[str, Column], keys: list[Column], comm: Any
) -> dict[str, Column]:
    """Collective. Rows with equal keys meet on one rank (the key hash names the rank: the
    rank of ``hash_partition(key_hash(keys))``), through :func:`hpc.shuffle.hash_shuffle`:
    hashing, choosing the rank and counting in one pass over the keys, each column then
    written straight into its destinations' runs."""
    if comm.Get_size() == 1:
        return columns
    if any(k.raw for k in keys):
        raise ValueError("partition keys must be settled strings (see table.settle)")
    if not keys:  # one key-less group: every row to rank 0
        return ship(columns, np.zeros(len(next(iter(columns.values()), [])), np.int64), comm)
    columns = settle_columns(columns, comm)
    arrays = _arrays(columns, _with_masks(columns, comm))
    return _columns(columns, hash_shuffle(arrays, [_as_int64(k) for k in keys], comm))
