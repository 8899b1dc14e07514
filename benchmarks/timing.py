"""Timing helpers shared by the benchmarks: barrier-aligned repetitions, slowest rank counts."""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = [
    "time_interleaved",
    "memcpy_bandwidth",
    "all_cores",
    "thread_ids",
    "cpus_of",
    "affinity_record",
    "machine_record",
    "worst_point",
    "print_point",
    "parse_floats",
    "idle_barrier",
]


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


def thread_ids() -> set[int]:
    """Local. The ids of this process's threads (Linux ``/proc/self/task``; else the caller's)."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return {threading.get_native_id()}


def cpus_of(tids: Iterable[int] | None = None) -> list[int]:
    """Local. The cores the threads ``tids`` may run on (union; default every thread of this
    process), as measured by ``sched_getaffinity``: what a contender's threads really got."""
    if not hasattr(os, "sched_getaffinity"):
        return list(range(os.cpu_count() or 1))
    found: set[int] = set()
    for tid in thread_ids() if tids is None else tids:
        try:
            found |= os.sched_getaffinity(tid)
        except OSError:  # the thread ended meanwhile
            continue
    return sorted(found or os.sched_getaffinity(0))


def affinity_record(
    comm: Any,
    peer_cpus: Sequence[int] | None = None,
    peer_rank: int = 0,
    peer_threads: Iterable[int] = (),
) -> dict[str, Any]:
    """Collective. Where each side ran, from ``sched_getaffinity`` of the threads.

    Parameters
    ----------
    comm : MPI communicator
        Our ranks.
    peer_cpus : sequence of int, optional
        The cores of the peer's threads, measured on ``peer_rank`` by the caller (for a peer
        library run on one rank: :func:`cpus_of` the threads it started plus the calling
        thread). None: the peer ran in our ranks on our threads (halo's Sendrecv, a hand
        exchange), so its cores are ours.
    peer_rank : int
        The rank that measured ``peer_cpus``.
    peer_threads : iterable of int
        Ids of threads the peer started in this process (left out of ours).

    Returns
    -------
    dict
        ``ours`` (``per_rank`` core lists and their union ``cpus``), ``peer`` (``ranks`` it ran
        on and ``cpus``), ``same_cores`` (the peer could use every core ours used) and
        ``cpu_count``.
    """
    per_rank = comm.allgather(cpus_of(thread_ids() - set(peer_threads)))
    union = sorted(set().union(*map(set, per_rank)))
    if peer_cpus is None:
        peer = {"ranks": list(range(comm.Get_size())), "cpus": union}
    else:
        peer = {"ranks": [peer_rank], "cpus": sorted(peer_cpus)}
    peer = comm.bcast(peer if comm.Get_rank() == peer_rank else None, root=peer_rank)
    return {
        "ours": {"per_rank": per_rank, "cpus": union},
        "peer": peer,
        "same_cores": set(peer["cpus"]) >= set(union),
        "cpu_count": os.cpu_count(),
    }


def machine_record(load_before: tuple[float, ...] | None) -> dict[str, Any]:
    """Local. The load of the machine around a run (shared machines make figures noisy)."""
    now = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": now}


def parse_floats(text: str) -> list[float]:
    """The numbers of a comma list such as ``"1e3,1e5"``."""
    return [float(v) for v in text.split(",") if v.strip()]


def worst_point(points: Sequence[dict[str, Any]], key: str, keep: Sequence[str]) -> Any:
    """The point of lowest ``point["ratio"][key]`` (points without it are skipped), reduced to
    the fields ``keep`` plus ``ratio``; None when no point has a ratio."""
    rated = [p for p in points if isinstance(p.get("ratio"), dict) and key in p["ratio"]]
    if not rated:
        return None
    worst = min(rated, key=lambda p: p["ratio"][key])
    return {k: worst[k] for k in (*keep, "ours", "peers", "ratio") if k in worst}


def print_point(comm: Any, label: str, ours: float, peer: float, ratio: float, unit: str) -> None:
    """Collective (rank 0 prints). One table line of a sweep on stderr: ours, the peer and
    their ratio (stdout keeps the JSON record last)."""
    if comm.Get_rank() == 0:
        print(
            f"{label:<44} ours {ours:10.4g} {unit:<5} peer {peer:10.4g} {unit:<5}"
            f" ratio {ratio:6.3f}",
            file=sys.stderr,
            flush=True,
        )


def idle_barrier(comm: Any) -> None:
    """Collective. A barrier that sleeps between polls: ranks waiting while one rank runs a
    peer or a one-rank point do not take its cores by spinning in MPI."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(0.0005)
