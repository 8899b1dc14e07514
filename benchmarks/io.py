"""Parallel HDF5 write and read of a decomposed 3-D float64 array against single-process peers.

Peers on the same bytes in the same run: ``tofile``, ``numpy.tofile`` of the whole array from one
process followed by ``fsync`` (the disk's sequential rate), and ``h5py_serial``, a gather to rank
0 and a serial h5py write (the usual way without parallel HDF5). Every write is timed up to its
``fsync``; reads are ``numpy.fromfile`` and a serial h5py read plus scatter. Reads come from the
page cache (the file was just written) unless the cache is dropped between phases.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from hpc.io import read_array, write_array
from hpc.io.files import io_mode

from hpc.comm import world
from hpc.decomposition import CartDecomposition

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench io``."""
    p.add_argument("--size", type=int, default=645, help="edge of the 3-D grid (645: 2 GiB)")
    p.add_argument("--reps", type=int, default=2, help="repetitions (best reported)")
    p.add_argument("--dir", default=".hpc-bench-io", help="scratch folder (removed afterwards)")
    p.add_argument("--backend", default=None, help="auto, cpu or gpu (default HPC_BACKEND)")


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
    comm.Barrier()
    return time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Best-of-``reps`` seconds and GB/s for each writer and reader."""
    comm = world()
    rank = comm.Get_rank()
    shape = (args.size,) * 3
    decomp = CartDecomposition(shape, periodic=False, halo=1, backend=args.backend)
    local = decomp.allocate(np.float64)
    xp = decomp.backend.xp
    decomp.interior(local)[...] = xp.asarray(
        np.random.default_rng(rank).standard_normal(decomp.local_shape)
    )
    nbytes = int(np.prod(shape)) * 8
    scratch = Path(args.dir)
    if rank == 0:
        scratch.mkdir(parents=True, exist_ok=True)
    comm.Barrier()
    ours_h5, serial_h5, raw = scratch / "ours.h5", scratch / "serial.h5", scratch / "raw.bin"
    full = np.empty(shape) if rank == 0 else None

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
            np.fromfile(raw, dtype=np.float64)

    best: dict[str, float] = {}
    try:
        for _ in range(max(1, args.reps)):
            for name, fn in [
                ("ours_w", ours_write),
                ("serial_w", serial_write),
                ("tofile_w", tofile_write),
                ("ours_r", ours_read),
                ("serial_r", serial_read),
                ("fromfile_r", fromfile_read),
            ]:
                seconds = _timed(comm, fn)
                best[name] = min(best.get(name, float("inf")), seconds)
        check = read_array(ours_h5, "u", decomp)
        if not (decomp.interior(check) == decomp.interior(local)).all():
            raise RuntimeError("the benchmark's file does not read back what was written")
    finally:
        comm.Barrier()
        if rank == 0:
            shutil.rmtree(scratch, ignore_errors=True)

    def fig(seconds: float) -> dict[str, float]:
        return {"seconds": seconds, "GBps": nbytes / seconds / 1e9}

    return {
        "bench": "io",
        "backend": decomp.backend.name,
        "ranks": comm.Get_size(),
        "size": list(shape),
        "bytes": nbytes,
        "mode": io_mode(comm),
        "ours": fig(best["ours_w"]),
        "peers": {"tofile": fig(best["tofile_w"]), "h5py_serial": fig(best["serial_w"])},
        "ratio": {
            "tofile": best["tofile_w"] / best["ours_w"],
            "h5py_serial": best["serial_w"] / best["ours_w"],
        },
        "read": {
            "ours": fig(best["ours_r"]),
            "peers": {"fromfile": fig(best["fromfile_r"]), "h5py_serial": fig(best["serial_r"])},
            "ratio": {
                "fromfile": best["fromfile_r"] / best["ours_r"],
                "h5py_serial": best["serial_r"] / best["ours_r"],
            },
        },
    }
