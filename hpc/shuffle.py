"""All-to-all shuffle of column arrays by destination rank (hash joins, group-bys, sharding).

Rows go to the rank named by ``dest``: counts first (``Alltoall``), then one ``Alltoallv`` per
column on raw buffers (no pickling). Rows keep their order within each (source, destination)
pair and arrive ordered by source rank, so the result is deterministic. Device (CuPy) columns
are staged through host memory unless the MPI is CUDA-aware, as for the halo exchange.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from .backend import array_module, to_host
from .comm import cuda_aware_mpi, resolve_comm

__all__ = ["shuffle", "hash_partition"]


def hash_partition(keys: Any, nparts: int) -> Any:
    """Destination ``0 .. nparts - 1`` of each integer key: a multiplicative (Fibonacci) hash,
    so consecutive keys spread evenly and the same key goes to the same part everywhere."""
    xp = _xp(keys)
    k = xp.asarray(keys).astype(xp.uint64, copy=False)
    h = (k * xp.uint64(0x9E3779B97F4A7C15)) >> xp.uint64(32)
    return (h % xp.uint64(nparts)).astype(xp.int64)


def shuffle(columns: dict[str, Any], dest: Any, comm: Any = None) -> dict[str, Any]:
    """Collective. Send row ``i`` of every column to rank ``dest[i]``.

    Parameters
    ----------
    columns : dict of str to array
        Equal-length 1-D arrays (NumPy or CuPy); every rank passes the same names and dtypes.
    dest : array of int
        Destination rank of each row, in ``[0, comm.size)``.
    comm : MPI communicator, optional
        Default: :func:`hpc.comm.world`.

    Returns
    -------
    dict of str to array
        The rows this rank received, ordered by source rank, then by position at the source.
    """
    comm = resolve_comm(comm)
    size = comm.Get_size()
    xp = _xp(dest)
    dest = xp.asarray(dest).astype(xp.int64, copy=False)
    n = int(dest.shape[0])
    problem = None
    for name, col in columns.items():
        if col.ndim != 1 or col.shape[0] != n:
            problem = f"column {name!r}: shape {col.shape}, expected ({n},)"
    if problem is None and n and (int(dest.min()) < 0 or int(dest.max()) >= size):
        problem = f"dest: ranks must lie in [0, {size}), got {int(dest.min())}..{int(dest.max())}"
    # agreed on every rank first, so a bad call raises everywhere instead of hanging
    problems = [p for p in comm.allgather(problem) if p]
    if problems:
        raise ValueError(problems[0] if problem is None else problem)
    # rows grouped by destination, order kept; as int16 (under 2**15 ranks) NumPy's stable
    # sort is a linear radix sort instead of a merge sort of int64 (5M rows: 368 -> 99 ms)
    narrow = dest.astype(xp.int16) if size <= 1 << 15 else dest
    order = xp.argsort(narrow, kind="stable")
    send_counts = np.asarray(_host(xp.bincount(dest, minlength=size)), dtype=np.int64)
    recv_counts = np.empty(size, dtype=np.int64)
    comm.Alltoall(send_counts, recv_counts)
    send_displ = np.concatenate([[0], np.cumsum(send_counts)[:-1]])
    recv_displ = np.concatenate([[0], np.cumsum(recv_counts)[:-1]])
    total = int(recv_counts.sum())
    device = xp is not np
    direct = not device or cuda_aware_mpi()
    out: dict[str, Any] = {}
    for name, col in columns.items():
        packed = col[order]
        recv = xp.empty(total, dtype=col.dtype)
        if device:
            xp.cuda.get_current_stream().synchronize()
        sbuf = packed if direct else _host(packed)
        rbuf = recv if direct else np.empty(total, dtype=col.dtype)
        mpi_type = MPI.BYTE
        item = np.dtype(col.dtype).itemsize
        comm.Alltoallv(
            [_bytes(sbuf), (send_counts * item, send_displ * item), mpi_type],
            [_bytes(rbuf), (recv_counts * item, recv_displ * item), mpi_type],
        )
        out[name] = recv if direct else xp.asarray(rbuf)
    return out


def _bytes(a: Any) -> Any:
    """A byte view of a contiguous array for MPI (CuPy arrays pass through: CUDA-aware MPI)."""
    if isinstance(a, np.ndarray):
        return np.ascontiguousarray(a).view(np.uint8)
    return a


def _xp(a: Any) -> Any:
    """NumPy, or the device array module of a device array."""
    return array_module(a)


def _host(a: Any) -> np.ndarray:
    return to_host(a)
