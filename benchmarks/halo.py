"""Halo exchange against plain MPI Sendrecv of the same bytes between the same neighbours.

Peers, run on the same data in the same run, turn about with ours in every repetition:

``sendrecv``
    For every message of our exchange, a contiguous buffer of the same size to the same
    neighbour with ``Sendrecv`` (shift pattern, nothing packed, the array never touched): the
    floor for two-sided MPI, and the target of the p2p method.
``numpy_sendrecv``
    A complete hand-written exchange: faces sliced out with NumPy, ``Sendrecv``, sliced back in,
    periodic self-wrap by slice assignment. Its result is checked equal to ours. Unlike the
    floor it pays for touching the strided faces of the array, as any real exchange must.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import world
from hpc.decomposition import CartDecomposition
from hpc.halo import HaloExchange
from hpc.pack import as3d

from .timing import memcpy_bandwidth, time_interleaved

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench halo``."""
    p.add_argument("--size2d", type=int, default=4096, help="edge of the 2-D grid (default 4096)")
    p.add_argument("--size3d", type=int, default=256, help="edge of the 3-D grid (default 256)")
    p.add_argument("--halo", type=int, default=1, help="ghost width (default 1)")
    p.add_argument("--reps", type=int, default=100, help="timed repetitions (median reported)")
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


def _region(box: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(box[i], box[i] + box[3 + i]) for i in range(3))


def _numpy_peer(ex: HaloExchange, decomp: CartDecomposition, a3: Any) -> Any:
    """A hand-written halo exchange of ``a3`` (3-D view) with NumPy slicing and Sendrecv."""
    comm, me = ex.comm, decomp.rank
    steps = []
    for phase in ex.phases:
        by_dir = {t.direction: t for t in phase.transfers}
        for t in phase.transfers:
            back = by_dir.get(tuple(-s for s in t.direction))  # whose data lands in our ghosts
            src = MPI.PROC_NULL if back is None else back.peer
            recv_box = None if back is None else back.recv_box
            recv = np.empty(t.count if back is None else back.count, dtype=ex.dtype)
            steps.append((t, src, recv_box, recv))

    def exchange() -> None:
        for t, src, recv_box, recv in steps:
            if t.peer == me and src == me:
                a3[_region(recv_box)] = a3[_region(t.send_box)]
                continue
            send = np.ascontiguousarray(a3[_region(t.send_box)])
            comm.Sendrecv(send, t.peer, t.send_tag, recv, src, t.send_tag)
            if recv_box is not None:
                a3[_region(recv_box)] = recv.reshape([recv_box[3], recv_box[4], recv_box[5]])

    return exchange


def _case(args: argparse.Namespace, shape: tuple[int, ...], method: str) -> dict[str, Any]:
    comm = world()
    decomp = CartDecomposition(shape, periodic=True, halo=args.halo, backend=args.backend)
    xp = decomp.backend.xp
    a = decomp.allocate(np.float64, fill=-1.0)
    decomp.interior(a)[...] = xp.random.default_rng(comm.rank).standard_normal(decomp.local_shape)
    ex = HaloExchange(decomp, np.float64, method=method, pattern=args.pattern)
    sync = decomp.backend.synchronize
    contenders = [lambda: ex.exchange(a), _sendrecv_peer(ex, decomp)]
    hand = None
    if not decomp.backend.is_gpu:
        hand = a.copy()
        contenders.append(_numpy_peer(ex, decomp, as3d(hand)))
    times = time_interleaved(comm, contenders, args.reps, sync=sync)
    ours, peer = times[0], times[1]
    nbytes = ex.bytes_sent
    ex.close()
    peers = {"sendrecv": {"seconds": peer, "GBps": nbytes / peer / 1e9}}
    ratio = {"sendrecv": peer / ours}
    if hand is not None:
        if not np.array_equal(hand, a):
            raise RuntimeError("the NumPy reference exchange disagrees with HaloExchange")
        peers["numpy_sendrecv"] = {"seconds": times[2], "GBps": nbytes / times[2] / 1e9}
        ratio["numpy_sendrecv"] = times[2] / ours
    return {
        "bench": "halo",
        "method": method,
        "pattern": args.pattern,
        "size": list(shape),
        "dims": list(decomp.dims),
        "bytes_per_rank": nbytes,
        "ours": {"seconds": ours, "GBps": nbytes / ours / 1e9},
        "peers": peers,
        "ratio": ratio,
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
