"""Parallel HDF5 write and read of a decomposed 3-D float64 array against single-process peers.

Peers on the same bytes in the same run: ``tofile``, ``numpy.tofile`` of the whole array from one
process followed by ``fsync`` (the disk's sequential rate), and ``h5py_serial``, a gather to rank
0 and a serial h5py write (the usual way without parallel HDF5). Every write is timed up to its
``fsync``; reads are ``numpy.fromfile`` and a serial h5py read plus scatter. Reads come from the
page cache (the file was just written) unless the cache is dropped between phases. The
peers write and read the very data ours wrote (gathered once, untimed), checked on read-back
(``same_data``); they run on rank 0 with every core allowed (``affinity``).

``--sweep`` adds the workload space: arrays of ``--sweep-bytes`` (1 MB to 4 GB) on each of
``--sweep-ranks`` rank counts (a sub-communicator of the ranks launched; the others sleep),
writes and reads against ``tofile``/``fromfile`` only (the serial h5py peer would need a third
copy of the largest arrays). A table line per point on stderr, every point under ``sweep``
and the point of lowest ``tofile`` write ratio under ``worst``.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from hpc.io import read_array, write_array
from hpc.io.files import io_mode
from mpi4py import MPI

from hpc.comm import world
from hpc.decomposition import CartDecomposition

from .timing import (
    affinity_record,
    all_cores,
    cpus_of,
    idle_barrier,
    machine_record,
    parse_floats,
    print_point,
    worst_point,
)

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench io``."""
    p.add_argument("--size", type=int, default=645, help="edge of the 3-D grid (645: 2 GiB)")
    p.add_argument("--reps", type=int, default=2, help="repetitions (best reported)")
    p.add_argument("--dir", default=".hpc-bench-io", help="scratch folder (removed afterwards)")
    p.add_argument("--backend", default=None, help="auto, cpu or gpu (default HPC_BACKEND)")
    p.add_argument("--sweep", action="store_true", help="also the bytes x ranks grid")
    p.add_argument(
        "--sweep-bytes", default="1e6,1.6e7,2.56e8,4e9", help="array bytes of --sweep (1 MB-4 GB)"
    )
    p.add_argument("--sweep-ranks", default="1,2", help="rank counts of --sweep (1,2)")
    p.add_argument(
        "--sweep-budget", type=float, default=1500.0, help="seconds; later points skipped (1500)"
    )
    p.add_argument(
        "--sweep-rep-bytes",
        type=float,
        default=4e8,
        help="a sweep point repeats until ours wrote this many bytes (at most 25 times; 4e8)",
    )


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _timed(comm: Any, fn: Any) -> float:
    comm.Barrier()
    t0 = time.perf_counter()
    fn()
    idle_barrier(comm)  # a rank done early sleeps: no spinning on a core the other side needs
    return time.perf_counter() - t0


def _point(
    comm: Any, shape: tuple[int, ...], reps: int, scratch: Path, backend: Any, serial: bool
) -> dict[str, Any]:
    """Collective over ``comm``. Best-of-``reps`` seconds and GB/s of ours, ``tofile`` /
    ``fromfile`` and (``serial``) the gather + serial h5py peer, on one array of ``shape``."""
    rank = comm.Get_rank()
    decomp = CartDecomposition(shape, periodic=False, halo=1, comm=comm, backend=backend)
    local = decomp.allocate(np.float64)
    xp = decomp.backend.xp
    decomp.interior(local)[...] = xp.asarray(
        np.random.default_rng(rank).standard_normal(decomp.local_shape)
    )
    nbytes = int(np.prod(shape)) * 8
    if rank == 0:
        scratch.mkdir(parents=True, exist_ok=True)
    comm.Barrier()
    ours_h5, serial_h5, raw = scratch / "ours.h5", scratch / "serial.h5", scratch / "raw.bin"
    full = decomp.gather(local)  # the peers write the same bytes as ours (untimed)
    peer_cpus: list[int] = []

    def ours_write() -> None:
        write_array(ours_h5, "u", local, decomp)
        if rank == 0:
            _fsync(ours_h5)

    def serial_write() -> None:
        g = decomp.gather(local)
        if rank == 0:
            with h5py.File(serial_h5, "w") as f:
                f.create_dataset("u", data=g)
            _fsync(serial_h5)

    def tofile_write() -> None:
        if rank == 0:
            with all_cores():  # the peer gets every core ours has, as under no binding
                peer_cpus[:] = cpus_of([threading.get_native_id()])
                with open(raw, "wb") as fh:
                    full.tofile(fh)
                    fh.flush()
                    os.fsync(fh.fileno())

    def ours_read() -> None:
        read_array(ours_h5, "u", decomp)

    def serial_read() -> None:
        g = None
        if rank == 0:
            with h5py.File(serial_h5, "r") as f:
                g = f["u"][...]
        decomp.scatter(g)

    def fromfile_read() -> None:
        if rank == 0:
            with all_cores():
                np.fromfile(raw, dtype=np.float64)

    order = [("ours_w", ours_write)]
    order += [("serial_w", serial_write)] if serial else []
    order += [("tofile_w", tofile_write), ("ours_r", ours_read)]
    order += [("serial_r", serial_read)] if serial else []
    order += [("fromfile_r", fromfile_read)]
    best: dict[str, float] = {}
    try:
        for _ in range(max(1, reps)):
            for name, fn in order:
                seconds = _timed(comm, fn)
                best[name] = min(best.get(name, float("inf")), seconds)
        check = read_array(ours_h5, "u", decomp)
        ours_ok = bool((decomp.interior(check) == decomp.interior(local)).all())
        del check
        peer_ok = None
        if rank == 0:
            peer_ok = bool(np.array_equal(np.fromfile(raw, dtype=np.float64), full.reshape(-1)))
        ok = comm.allreduce(int(ours_ok), op=MPI.MIN) == 1
        if not ok:
            raise RuntimeError("the benchmark's file does not read back what was written")
        peer_ok = comm.bcast(peer_ok, root=0)
        if not peer_ok:
            raise RuntimeError("the tofile peer's file does not hold the array ours wrote")
    finally:
        comm.Barrier()
        if rank == 0:
            shutil.rmtree(scratch, ignore_errors=True)

    def fig(seconds: float) -> dict[str, float]:
        return {"seconds": seconds, "GBps": nbytes / seconds / 1e9}

    write_peers = {"tofile": fig(best["tofile_w"])}
    read_peers = {"fromfile": fig(best["fromfile_r"])}
    if serial:
        write_peers["h5py_serial"] = fig(best["serial_w"])
        read_peers["h5py_serial"] = fig(best["serial_r"])
    return {
        "backend": decomp.backend.name,
        "ranks": comm.Get_size(),
        "size": list(shape),
        "bytes": nbytes,
        "mode": io_mode(comm),
        "same_data": bool(peer_ok),
        "ours": fig(best["ours_w"]),
        "peers": write_peers,
        "ratio": {n: f["seconds"] / best["ours_w"] for n, f in write_peers.items()},
        "read": {
            "ours": fig(best["ours_r"]),
            "peers": read_peers,
            "ratio": {n: f["seconds"] / best["ours_r"] for n, f in read_peers.items()},
        },
        "peer_cpus": comm.bcast(peer_cpus, root=0),
    }


def _sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Every point of bytes x ranks within ``--sweep-budget`` seconds; ranks not in
    a point's sub-communicator sleep in a barrier."""
    comm = world()
    rank = comm.Get_rank()
    counts = [int(r) for r in parse_floats(args.sweep_ranks)]
    start = time.perf_counter()
    points: list[dict[str, Any]] = []
    for nbytes in parse_floats(args.sweep_bytes):
        edge = max(2, round((nbytes / 8) ** (1 / 3)))
        shape = (edge,) * 3
        for nranks in counts:
            base = {"ranks": nranks, "size": list(shape), "bytes": edge**3 * 8}
            elapsed = comm.bcast(time.perf_counter() - start, root=0)
            if elapsed > args.sweep_budget:
                points.append({**base, "skipped": f"sweep budget of {args.sweep_budget:g} s spent"})
                continue
            if nranks > comm.Get_size():
                points.append({**base, "skipped": f"{nranks} ranks asked, {comm.Get_size()} run"})
                continue
            sub = comm.Split(0 if rank < nranks else MPI.UNDEFINED, rank)
            point = None
            # small arrays repeat more: a write of milliseconds varies with every fsync
            reps = max(args.reps, min(25, math.ceil(args.sweep_rep_bytes / base["bytes"])))
            if sub != MPI.COMM_NULL:
                scratch = Path(args.dir) / f"sweep-{edge}-{nranks}"
                point = _point(sub, shape, reps, scratch, args.backend, serial=False)
                point["reps"] = reps
                point["load"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
                sub.Free()
            idle_barrier(comm)
            point = comm.bcast(point, root=0)
            points.append(point)
            print_point(
                comm,
                f"io {point['bytes'] / 1e6:.4g} MB on {nranks} rank(s) write",
                point["ours"]["GBps"],
                point["peers"]["tofile"]["GBps"],
                point["ratio"]["tofile"],
                "GB/s",
            )
    worst = worst_point(points, "tofile", ("ranks", "size", "bytes", "mode", "read"))
    return {"points": points, "worst": worst, "seconds": time.perf_counter() - start}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Best-of-``reps`` seconds and GB/s for each writer and reader; with
    ``--sweep`` also the grid (``sweep``) and its worst point (``worst``)."""
    comm = world()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    shape = (args.size,) * 3
    head = _point(comm, shape, args.reps, Path(args.dir), args.backend, serial=True)
    peer_cpus = head.pop("peer_cpus")
    record: dict[str, Any] = {"bench": "io", **head}
    if getattr(args, "sweep", False):
        sweep = _sweep(args)
        record["sweep"] = sweep["points"]
        record["worst"] = sweep["worst"]
        record["sweep_seconds"] = sweep["seconds"]
        if comm.Get_rank() == 0:
            shutil.rmtree(args.dir, ignore_errors=True)
    record["affinity"] = affinity_record(comm, peer_cpus)
    record["machine"] = machine_record(load)
    return record
