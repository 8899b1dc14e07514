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

With ``journal=DIR`` (or inside ``with hpc.journal.Journal(DIR, key):``) every finished batch
is made durable in the journal, and a rerun after a crash or SIGKILL computes only the
missing blocks, on any rank count or executor, with a bitwise-equal result (see
:mod:`hpc.journal`). Inside ``with progress.phase(units):`` (:mod:`hpc.progress`) finished
blocks move rank 0's progress bar.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["map_blocks", "exact_sum", "EXECUTORS"]

EXECUTORS = ("mpi", "local", "dask")
BlockFn = Callable[[int, int], Any]
# batches per worker when a journal or a progress bar wants intermediate results (the result
# does not depend on the batch size; only the checkpoint and update granularity does)
GRANULARITY = 8


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
    *,
    journal: Any = None,
    key: Mapping[str, Any] | None = None,
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
        Blocks per batch (default: an even share per rank or worker; with a journal or a
        progress bar, an eighth of that).
    journal : str, path or :class:`hpc.journal.Journal`, optional
        Journal finished batches there and skip the blocks a previous run journaled. A path
        is opened (collectively over ``comm``) with ``key``, used for this call alone and
        removed when the call returns; a :class:`~hpc.journal.Journal` object is used as its
        next stage and kept. Default: the journal of an enclosing ``with Journal(...)``.
    key : mapping, optional
        With a path ``journal``: the arguments the rows depend on (seed, sizes, ...); a
        journal written with another key is refused, naming the difference. ``nblocks`` and
        ``width`` are always checked.

    Returns
    -------
    ndarray
        ``(nblocks, width)`` float64, row ``k`` from block ``k``; the same on every rank, and
        bitwise the same whether or not the run was interrupted and resumed.

    Raises
    ------
    hpc.journal.JournalMismatchError, hpc.journal.CorruptJournalError
        The journal belongs to other arguments, or one of its files is damaged (on every
        rank, before any block runs).
    """
    from .journal import Journal, active_journal
    from .progress import active_phase

    nblocks, width = int(nblocks), int(width)
    if executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r}: expected one of {EXECUTORS}")
    if nblocks < 0 or width < 1:
        raise ValueError(f"nblocks={nblocks}, width={width}: need nblocks >= 0, width >= 1")
    owned = None
    if journal is not None and not isinstance(journal, Journal):
        journal = owned = Journal(journal, key or {}, comm=comm)
    elif journal is None:
        journal = active_journal()
    phase = active_phase()
    if executor == "mpi":
        from .comm import resolve_comm

        comm = resolve_comm(comm)
    stage = None
    if journal is not None:
        mpi = executor == "mpi"
        stage_comm = comm if mpi else journal.comm
        # mpi: every rank records its own batches; otherwise rank 0 alone (the others, if
        # any, compute the same rows)
        stage = journal.stage(nblocks, width, stage_comm, write=mpi or stage_comm.Get_rank() == 0)
    fine = stage is not None or (phase is not None and phase.progress.enabled)
    if executor == "mpi":
        out = _map_mpi(fn, nblocks, width, batch, comm, stage, phase, fine)
    elif executor == "dask":
        out = _map_dask(fn, nblocks, width, batch, scheduler, stage, phase, fine)
    else:
        out = _map_local(fn, nblocks, width, batch, stage, phase, fine)
    if owned is not None:
        owned.complete()
    return out


def _todo(nblocks: int, batch: int, stage: Any) -> list[tuple[int, int]]:
    """The batches still to compute: all of them, or those the journal lacks."""
    return _batches(nblocks, batch) if stage is None else stage.batches(batch)


def _start(stage: Any, nblocks: int, width: int) -> np.ndarray:
    """The result array, holding the journaled rows already."""
    return np.array(stage.rows) if stage is not None else np.empty((nblocks, width))


def _store(out: np.ndarray, stage: Any, counter: Any, first: int, rows: np.ndarray) -> None:
    """Rows of blocks ``first``.. into the result, the journal and the progress count."""
    if stage is not None:
        stage.record(first, rows)
    out[first : first + len(rows)] = rows
    if counter is not None:
        counter.add(len(rows))


def _counter(phase: Any, nblocks: int, stage: Any, comm: Any = None, remote: bool = False) -> Any:
    if phase is None:
        return None
    counter = phase.counter(nblocks, comm, remote)
    if stage is not None:
        counter.resumed(stage.resumed_blocks)
    return counter


def _map_local(
    fn: BlockFn, nblocks: int, width: int, batch: int | None, stage: Any, phase: Any, fine: bool
) -> np.ndarray:
    batch = batch or max(1, math.ceil(nblocks / GRANULARITY) if fine else nblocks)
    todo = _todo(nblocks, batch, stage)
    counter = _counter(phase, nblocks, stage)
    if stage is None and todo == [(0, nblocks)]:  # one batch of every block: its rows are
        rows = _checked(fn(0, nblocks), nblocks, width, 0)  # the result, not copied
        if counter is not None:
            counter.add(nblocks)
            counter.close()
        return rows if rows.flags.c_contiguous and rows.flags.writeable else rows.copy()
    out = _start(stage, nblocks, width)
    for first, count in todo:
        _store(out, stage, counter, first, _checked(fn(first, count), count, width, first))
    if counter is not None:
        counter.close()
    return out


def _map_mpi(
    fn: BlockFn,
    nblocks: int,
    width: int,
    batch: int | None,
    comm: Any,
    stage: Any,
    phase: Any,
    fine: bool,
) -> np.ndarray:
    from .collectives import allgather_object, allgather_rows
    from .errors import on_all_ranks

    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1 and stage is None:  # nothing to gather or to agree on: as in-process
        try:
            return _map_local(fn, nblocks, width, batch, stage, phase, fine)
        except Exception as exc:  # the error every rank count reports
            raise on_all_ranks(RuntimeError(
                f"map_blocks failed: rank 0: {type(exc).__name__}: {exc}")) from exc
    batch = batch or max(1, math.ceil(nblocks / (size * (GRANULARITY if fine else 1))))
    batches = _todo(nblocks, batch, stage)
    mine = batches[rank::size]
    local = np.empty((sum(c for _, c in mine), width))
    counter = _counter(phase, nblocks, stage, comm, remote=True)
    row = 0
    error = None
    try:
        for first, count in mine:
            rows = _checked(fn(first, count), count, width, first)
            if stage is not None:
                stage.record(first, rows)  # this rank's own segment: no communication
            local[row : row + count] = rows
            row += count
            if counter is not None:
                counter.add(count)
    except Exception as exc:  # every rank must learn of it, or the others hang in the gather
        error = f"rank {rank}: {type(exc).__name__}: {exc}"
    if counter is not None:
        counter.close()  # matched on every rank, also after an error
    errors = [e for e in allgather_object(error, comm) if e]
    if errors:
        raise on_all_ranks(RuntimeError("map_blocks failed: " + "; ".join(errors)))
    gathered = allgather_rows(local, comm)  # rank 0's batches first, then rank 1's, ...
    # rank r's rows are its round-robin batches, in order: put them back in block order
    out = _start(stage, nblocks, width)
    offset = 0
    for r in range(size):
        for first, count in batches[r::size]:
            out[first : first + count] = gathered[offset : offset + count]
            offset += count
    return out


def _map_dask(
    fn: BlockFn,
    nblocks: int,
    width: int,
    batch: int | None,
    scheduler: Any,
    stage: Any,
    phase: Any,
    fine: bool,
) -> np.ndarray:
    from distributed import Client, LocalCluster, as_completed

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
        batch = batch or max(1, math.ceil(nblocks / (workers * (GRANULARITY if fine else 1))))
        batches = _todo(nblocks, batch, stage)
        futures = {
            client.submit(fn, first, count, pure=False): (first, count) for first, count in batches
        }
        out = _start(stage, nblocks, width)
        counter = _counter(phase, nblocks, stage)
        # the client journals each batch as it arrives, so workers need no access to the
        # journal's directory
        for future in as_completed(futures):
            first, count = futures[future]
            _store(out, stage, counter, first, _checked(future.result(), count, width, first))
        if counter is not None:
            counter.close()
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
