"""Run independent batches of work SPMD over MPI ranks, in one process, or on Dask.

The unit is a *block*: a fixed slice of the work (for Monte Carlo, a fixed range of path
indices) whose result, a row of float64 values, depends only on the block number. Blocks are
grouped into batches for scheduling; every executor returns the same ``(nblocks, width)``
array in block order, so any reduction of it (see :func:`exact_sum`) is bitwise the same on
one process, on any number of ranks, on Dask and for any batch size.

Examples
--------
>>> import numpy as np
>>> def work(first, count):  # rows for blocks first .. first + count - 1
...     return np.arange(first, first + count, dtype=float)[:, None] ** 2
>>> rows = map_blocks(work, nblocks=10, width=1, executor="local", batch=3)
>>> exact_sum(rows)
array([285.])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["map_blocks", "exact_sum", "EXECUTORS"]

EXECUTORS = ("mpi", "local", "dask")
BlockFn = Callable[[int, int], Any]


def _batches(nblocks: int, batch: int) -> list[tuple[int, int]]:
    return [(b, min(batch, nblocks - b)) for b in range(0, nblocks, batch)]


def _checked(rows: Any, count: int, width: int, first: int) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    if rows.shape != (count, width):
        raise ValueError(
            f"the block function returned shape {rows.shape} for blocks {first}.."
            f"{first + count - 1}; expected ({count}, {width})"
        )
    return rows


def map_blocks(
    fn: BlockFn,
    nblocks: int,
    width: int,
    executor: str = "mpi",
    batch: int | None = None,
    comm: Any = None,
    scheduler: Any = None,
) -> np.ndarray:
    """Collective for ``executor="mpi"``. Evaluate ``fn(first, count)`` over all blocks.

    Parameters
    ----------
    fn : callable
        ``fn(first, count)`` returns the ``(count, width)`` rows of blocks ``first`` to
        ``first + count - 1``; it must depend on nothing else (it runs wherever it is sent).
    nblocks, width : int
        Number of blocks and values per block.
    executor : {"mpi", "local", "dask"}
        ``"mpi"``: batches dealt round-robin to the ranks of ``comm`` (default: the world
        communicator), rows gathered on every rank (:func:`hpc.collectives.allgather_rows`).
        ``"local"``: this process. ``"dask"``: one task per batch on ``scheduler`` (a
        ``distributed.Client``, a scheduler address, or None for a new ``LocalCluster``).
    batch : int, optional
        Blocks per batch (default: an even share per rank or worker).

    Returns
    -------
    ndarray
        ``(nblocks, width)`` float64, row ``k`` from block ``k``; the same on every rank.
    """
    nblocks, width = int(nblocks), int(width)
    if executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r}: expected one of {EXECUTORS}")
    if nblocks < 0 or width < 1:
        raise ValueError(f"nblocks={nblocks}, width={width}: need nblocks >= 0, width >= 1")
    if executor == "mpi":
        return _map_mpi(fn, nblocks, width, batch, comm)
    if executor == "dask":
        return _map_dask(fn, nblocks, width, batch, scheduler)
    out = np.empty((nblocks, width))
    for first, count in _batches(nblocks, batch or max(nblocks, 1)):
        out[first : first + count] = _checked(fn(first, count), count, width, first)
    return out


def _map_mpi(fn: BlockFn, nblocks: int, width: int, batch: int | None, comm: Any) -> np.ndarray:
    from .collectives import allgather_object, allgather_rows
    from .comm import resolve_comm
    from .errors import on_all_ranks

    comm = resolve_comm(comm)
    size, rank = comm.Get_size(), comm.Get_rank()
    batch = batch or max(1, math.ceil(nblocks / size))
    batches = _batches(nblocks, batch)
    mine = [b for i, b in enumerate(batches) if i % size == rank]
    local = np.empty((sum(c for _, c in mine), width))
    row = 0
    error = None
    try:
        for first, count in mine:
            local[row : row + count] = _checked(fn(first, count), count, width, first)
            row += count
    except Exception as exc:  # every rank must learn of it, or the others hang in the gather
        error = f"rank {rank}: {type(exc).__name__}: {exc}"
    errors = [e for e in allgather_object(error, comm) if e]
    if errors:
        raise on_all_ranks(RuntimeError("map_blocks failed: " + "; ".join(errors)))
    gathered = allgather_rows(local, comm)  # rank 0's batches first, then rank 1's, ...
    # rank r's rows are its round-robin batches, in order: put them back in block order
    out = np.empty((nblocks, width))
    offset = 0
    for r in range(size):
        for first, count in batches[r::size]:
            out[first : first + count] = gathered[offset : offset + count]
            offset += count
    return out


def _map_dask(
    fn: BlockFn, nblocks: int, width: int, batch: int | None, scheduler: Any
) -> np.ndarray:
    from distributed import Client, LocalCluster

    owned = None
    if scheduler is None:
        owned = Client(LocalCluster(processes=False, dashboard_address=None))
        client = owned
    elif isinstance(scheduler, str):
        owned = Client(scheduler)
        client = owned
    else:
        client = scheduler
    try:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        batch = batch or max(1, math.ceil(nblocks / workers))
        batches = _batches(nblocks, batch)
        futures = [client.submit(fn, first, count, pure=False) for first, count in batches]
        out = np.empty((nblocks, width))
        for (first, count), rows in zip(batches, client.gather(futures), strict=True):
            out[first : first + count] = _checked(rows, count, width, first)
        return out
    finally:
        if owned is not None:
            cluster = owned.cluster
            owned.close()
            if cluster is not None:
                cluster.close()


def exact_sum(rows: np.ndarray) -> np.ndarray:
    """Column sums of ``rows``, correctly rounded (``math.fsum``): independent of the order in
    which the rows were produced or added."""
    rows = np.asarray(rows, dtype=np.float64)
    return np.array([math.fsum(rows[:, j]) for j in range(rows.shape[1])])
