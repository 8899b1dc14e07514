"""Timing helpers shared by the benchmarks: barrier-aligned repetitions, slowest rank counts."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["time_interleaved", "memcpy_bandwidth", "all_cores"]


@contextmanager
def all_cores() -> Iterator[None]:
    """Within the block, the calling thread may run on every core; its binding is restored
    after. A peer library's worker threads started here (DuckDB's ``SET threads``, polars'
    pool) inherit that: under ``mpirun`` rank 0 is bound to one core, and the peer's threads
    would otherwise all share it."""
    bound = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        if bound is not None:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        yield
    finally:
        if bound is not None:
            os.sched_setaffinity(0, bound)


def time_interleaved(
    comm: Any,
    fns: Sequence[Callable[[], None]],
    reps: int,
    warmup: int = 3,
    sync: Callable[[], None] | None = None,
) -> list[float]:
    """Collective. Median over ``reps`` of the slowest rank's seconds for each of ``fns``.

    The functions take turns within each repetition, so drift of the machine (other load,
    frequency, memory placement) affects every contender alike.
    """
    for fn in fns:
        for _ in range(warmup):
            fn()
    if sync:
        sync()
    times = np.empty((len(fns), reps))
    local = np.empty(1)
    slowest = np.empty(1)
    for i in range(reps):
        for f, fn in enumerate(fns):
            comm.Barrier()
            t0 = time.perf_counter()
            fn()
            if sync:
                sync()
            local[0] = time.perf_counter() - t0
            _idle_allreduce(comm, local, slowest)
            times[f, i] = slowest[0]
    return [float(statistics.median(row)) for row in times]


def _idle_allreduce(comm: Any, local: np.ndarray, out: np.ndarray) -> None:
    """Collective. The maximum of ``local`` over the ranks into ``out``, waiting without
    spinning: a rank that is done (every rank but 0 while a peer library runs on rank 0)
    sleeps between polls instead of busy-waiting in MPI, which would take a core from the
    contender still running."""
    request = comm.Iallreduce(local, out, op=MPI.MAX)
    while not request.Test():
        time.sleep(0.0005)


def memcpy_bandwidth(nbytes: int = 1 << 28, reps: int = 5) -> float:
    """Local. Host copy rate in GB/s (bytes copied per second): the ceiling of a shared-memory
    transport and of packing."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return nbytes / best / 1e9
