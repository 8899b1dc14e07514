"""Halo exchange against plain MPI Sendrecv of the same bytes between the same neighbours.

The peer moves, for every message of our exchange, a contiguous buffer of the same size to the
same neighbour with ``Sendrecv`` (shift pattern, no packing): the floor for two-sided MPI. Our
figure includes packing the (partly strided) faces, edges and corners and unpacking them.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import world
from hpc.decomposition import CartDecomposition
from hpc.halo import HaloExchange

from .timing import memcpy_bandwidth, time_collective

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench halo``."""
    p.add_argument("--size2d", type=int, default=4096, help="edge of the 2-D grid (default 4096)")
    p.add_argument("--size3d", type=int, default=256, help="edge of the 3-D grid (default 256)")
    p.add_argument("--halo", type=int, default=1, help="ghost width (default 1)")
    p.add_argument("--reps", type=int, default=50, help="timed repetitions (median reported)")
    p.add_argument("--methods", default="p2p,rma", help="comma list of p2p, rma (default both)")
    p.add_argument(
        "--pattern", default="sweep", choices=["sweep", "direct"], help="message pattern"
    )
    p.add_argument("--backend", default=None, help="auto, cpu or gpu (default HPC_BACKEND)")


def _sendrecv_peer(ex: HaloExchange, decomp: CartDecomposition) -> Any:
    """Sendrecv of contiguous buffers with the byte counts and neighbours of ``ex``'s messages."""
    comm = ex.comm
    be = decomp.backend
    steps = []
    for t in ex.transfers:
        source = decomp.neighbour(tuple(-s for s in t.direction))
        steps.append(
            (
                be.zeros(t.count, ex.dtype),
                be.zeros(t.count, ex.dtype),
                t.peer,
                MPI.PROC_NULL if source is None else source,
                t.send_tag,
            )
        )

    def exchange() -> None:
        for send, recv, dest, source, tag in steps:
            comm.Sendrecv(send, dest, tag, recv, source, tag)

    return exchange


def _case(args: argparse.Namespace, shape: tuple[int, ...], method: str) -> dict[str, Any]:
    comm = world()
    decomp = CartDecomposition(shape, periodic=True, halo=args.halo, backend=args.backend)
    a = decomp.allocate(np.float64, fill=1.0)
    ex = HaloExchange(decomp, np.float64, method=method, pattern=args.pattern)
    sync = decomp.backend.synchronize
    ours = time_collective(comm, lambda: ex.exchange(a), args.reps, sync=sync)
    peer = time_collective(comm, _sendrecv_peer(ex, decomp), args.reps, sync=sync)
    nbytes = ex.bytes_sent
    ex.close()
    return {
        "bench": "halo",
        "method": method,
        "pattern": args.pattern,
        "size": list(shape),
        "dims": list(decomp.dims),
        "bytes_per_rank": nbytes,
        "ours": {"seconds": ours, "GBps": nbytes / ours / 1e9},
        "peers": {"sendrecv": {"seconds": peer, "GBps": nbytes / peer / 1e9}},
        "ratio": {"sendrecv": peer / ours},
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Run every case; the first (2-D, first method) is the headline figure."""
    comm = world()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    shapes = [(args.size2d,) * 2, (args.size3d,) * 3]
    cases = [_case(args, shape, m) for shape in shapes for m in methods]
    backend = CartDecomposition((1,), comm=comm, backend=args.backend).backend.name
    head = cases[0]
    return {
        "bench": "halo",
        "backend": backend,
        "ranks": comm.Get_size(),
        "size": head["size"],
        "method": head["method"],
        "ours": head["ours"],
        "peers": head["peers"],
        "ratio": head["ratio"],
        "limits": {"memcpy_GBps": memcpy_bandwidth()},
        "cases": cases,
    }
