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
``floor``
    The honest floor: ``Sendrecv`` of contiguous buffers only for the messages to another rank,
    and for a message to the rank itself (a periodic wrap with one rank along that axis) a
    contiguous copy of the same bytes, timed in the same loop (``self_copy``: the measured copy
    bandwidth at that size). Passing a rank's own faces through MPI (``sendrecv``) costs more
    than the copy a real exchange needs, so ``sendrecv`` flatters ours there; both floors are
    reported, and the target applies to ``floor``.
``floor_lines``
    ``floor`` with the self-copy charged for the cache lines it must touch rather than the bytes
    it moves: a face of the last axis is one short run per row of the array (a halo of 1-3
    elements, 8-24 bytes, in a row of kilobytes), and no exchange can fill it without reading
    and writing each 64-byte line that holds such a run. The self part is a contiguous copy of
    as many bytes as the distinct lines the self-wrapped boxes (sources and targets) lie on,
    timed in the same loop. Reported beside ``floor``, not instead of it.

On the GPU backend each case also has ``limits``: the bytes the exchange must move (every
message read from its face and written into the ghosts: twice the bytes sent, all ranks) per
second, as a fraction of a measured device-to-device copy (:mod:`.device_peak`).

``--sweep`` adds the workload space: 1-, 2- and 3-D periodic grids of ``--sweep-bytes``
global bytes (``max``: the largest grid whose two copies, ours and the NumPy peer's, fit in
half of the memory), halo widths ``--sweep-halos`` and every method, on the ranks launched
(2 on 2 cores: more ranks than cores measure nothing but the scheduler). A table line per
point on stderr, every point under ``sweep`` and the point of lowest ``floor`` ratio under
``worst``. ``affinity`` records the cores of both sides (the peers run in our ranks).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import world
from hpc.decomposition import CartDecomposition
from hpc.halo import HaloExchange
from hpc.pack import as3d

from .timing import (
    affinity_record,
    machine_record,
    memcpy_bandwidth,
    parse_floats,
    print_point,
    time_interleaved,
    worst_point,
)

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
    p.add_argument("--sweep", action="store_true", help="also the dims x bytes x halo grid")
    p.add_argument(
        "--sweep-bytes",
        default="1e4,1e6,1e8,max",
        help="global array bytes of --sweep (max: two copies fit half of memory)",
    )
    p.add_argument("--sweep-dims", default="1,2,3", help="dimensions of --sweep (1,2,3)")
    p.add_argument("--sweep-halos", default="1,2,3", help="halo widths of --sweep (1,2,3)")
    p.add_argument(
        "--sweep-point-seconds",
        type=float,
        default=2.0,
        help="timed seconds per contender a point (repetitions fitted to it, at most --reps)",
    )
    p.add_argument(
        "--sweep-budget", type=float, default=1500.0, help="seconds; later points skipped (1500)"
    )


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


def _floor_peers(ex: HaloExchange, decomp: CartDecomposition) -> tuple[Any, Any, int]:
    """The honest floor in two timed parts: ``Sendrecv`` of contiguous buffers for the messages
    to other ranks, and a contiguous copy for those a rank sends itself (and its byte count)."""
    comm, me, be = ex.comm, decomp.rank, decomp.backend
    remote, local = [], []
    for t in ex.transfers:
        source = decomp.neighbour(tuple(-s for s in t.direction))
        src = MPI.PROC_NULL if source is None else source
        send, recv = be.zeros(t.count, ex.dtype), be.zeros(t.count, ex.dtype)
        if t.peer == me and src == me:
            local.append((send, recv))
        else:
            remote.append((send, recv, t.peer, src, t.send_tag))

    def sendrecv_remote() -> None:
        for send, recv, dest, source, tag in remote:
            comm.Sendrecv(send, dest, tag, recv, source, tag)

    def copy_self() -> None:
        for send, recv in local:
            recv[...] = send

    return sendrecv_remote, copy_self, sum(int(s.nbytes) for s, _ in local)


_LINE = 64  # bytes in a cache line


def _self_lines(ex: HaloExchange, decomp: CartDecomposition) -> int:
    """Distinct cache lines of the local array that this rank's self-copies read or write
    (the boxes of the messages a rank sends itself, as C-ordered rows of the 3-D view)."""
    me = decomp.rank
    shape3 = as3d(np.empty(decomp.ghost_shape, dtype=np.int8)).shape
    item = ex.dtype.itemsize
    first, last = [], []  # lines of each row of each box, inclusive
    for t in ex.transfers:
        if t.peer != me:
            continue
        for box in (t.send_box, t.recv_box):
            i = np.arange(box[0], box[0] + box[3], dtype=np.int64)[:, None]
            j = np.arange(box[1], box[1] + box[4], dtype=np.int64)[None, :]
            start = ((i * shape3[1] + j) * shape3[2] + box[2]).ravel()
            first.append(start * item // _LINE)
            last.append(((start + box[5]) * item - 1) // _LINE)
    if not first:
        return 0
    lo, hi = np.concatenate(first), np.concatenate(last)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    # lines of each interval not already covered by the ones before it
    before = np.concatenate([[-1], np.maximum.accumulate(hi)[:-1]])
    return int(np.maximum(0, hi - np.maximum(lo - 1, before)).sum())


def _line_copy_peer(ex: HaloExchange, decomp: CartDecomposition) -> tuple[Any, int]:
    """A contiguous copy of as many bytes as the self-copies' distinct cache lines."""
    nbytes = _self_lines(ex, decomp) * _LINE
    be = decomp.backend
    send, recv = be.zeros(nbytes // 8, np.float64), be.zeros(nbytes // 8, np.float64)

    def copy_lines() -> None:
        if nbytes:
            recv[...] = send

    return copy_lines, nbytes


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


def _fill(decomp: CartDecomposition, a: Any) -> None:
    """A cheap deterministic interior (one pass per axis; random numbers would take minutes
    at the sweep's largest sizes), different on every rank and along every axis."""
    xp = decomp.backend.xp
    view = decomp.interior(a)
    view[...] = float(decomp.rank) * 1e12
    for axis, n in enumerate(decomp.local_shape):
        shape = [1] * len(decomp.local_shape)
        shape[axis] = n
        view += xp.arange(n, dtype=np.float64).reshape(shape) * 10.0 ** (4 * axis)


def _case(
    args: argparse.Namespace,
    shape: tuple[int, ...],
    method: str,
    halo: int | None = None,
    reps: int | None = None,
    prepared: tuple[CartDecomposition, Any] | None = None,
) -> dict[str, Any]:
    """Collective. Ours against the floors and the NumPy exchange on one grid and method.

    ``prepared``: a decomposition and its filled array to reuse (the sweep shares them between
    methods); else one is made with random values. ``reps``: repetitions (default ``--reps``).
    """
    comm = world()
    halo = args.halo if halo is None else halo
    if prepared is None:
        decomp = CartDecomposition(shape, periodic=True, halo=halo, backend=args.backend)
        xp = decomp.backend.xp
        a = decomp.allocate(np.float64, fill=-1.0)
        decomp.interior(a)[...] = xp.random.default_rng(comm.rank).standard_normal(
            decomp.local_shape
        )
    else:
        decomp, a = prepared
    ex = HaloExchange(decomp, np.float64, method=method, pattern=args.pattern)
    sync = decomp.backend.synchronize
    remote, self_copy, self_bytes = _floor_peers(ex, decomp)
    copy_lines, line_bytes = _line_copy_peer(ex, decomp)
    contenders = [lambda: ex.exchange(a), _sendrecv_peer(ex, decomp), remote, self_copy]
    contenders.append(copy_lines)
    hand = None
    if not decomp.backend.is_gpu:
        hand = a.copy()
        contenders.append(_numpy_peer(ex, decomp, as3d(hand)))
    times = time_interleaved(comm, contenders, args.reps if reps is None else reps, sync=sync)
    ours, peer = times[0], times[1]
    floor = times[2] + times[3]
    nbytes = ex.bytes_sent
    ex.close()
    peers: dict[str, Any] = {"sendrecv": {"seconds": peer, "GBps": nbytes / peer / 1e9}}
    # the slowest rank's copy bytes: the floor's time is the slowest rank's too
    self_max = comm.allreduce(self_bytes, op=MPI.MAX)
    peers["floor"] = {
        "seconds": floor,
        "GBps": nbytes / floor / 1e9,
        "sendrecv_remote_seconds": times[2],
        "self_copy_seconds": times[3],
        "self_bytes_per_rank": self_max,
        "self_copy_GBps": self_max / times[3] / 1e9 if self_max and times[3] > 0 else None,
    }
    floor_lines = times[2] + times[4]
    peers["floor_lines"] = {
        "seconds": floor_lines,
        "GBps": nbytes / floor_lines / 1e9,
        "self_copy_seconds": times[4],
        "self_line_bytes_per_rank": comm.allreduce(line_bytes, op=MPI.MAX),
    }
    ratio = {"sendrecv": peer / ours, "floor": floor / ours, "floor_lines": floor_lines / ours}
    if hand is not None:
        if not np.array_equal(hand, a):
            raise RuntimeError("the NumPy reference exchange disagrees with HaloExchange")
        peers["numpy_sendrecv"] = {"seconds": times[5], "GBps": nbytes / times[5] / 1e9}
        ratio["numpy_sendrecv"] = times[5] / ours
    rec: dict[str, Any] = {
        "bench": "halo",
        "method": method,
        "pattern": args.pattern,
        "halo": halo,
        "size": list(shape),
        "dims": list(decomp.dims),
        "bytes_per_rank": nbytes,
        "same_data": hand is not None,  # the NumPy peer's result was checked equal to ours
        "ours": {"seconds": ours, "GBps": nbytes / ours / 1e9},
        "peers": peers,
        "ratio": ratio,
    }
    if decomp.backend.is_gpu:
        rec["limits"] = _device_limits(comm, decomp, nbytes, ours)
    return rec


def _device_limits(
    comm: Any, decomp: CartDecomposition, bytes_per_rank: int, seconds: float
) -> dict[str, Any]:
    """Collective. A GPU exchange's bandwidth fraction: the bytes it must move (each message
    read from its face and written into the ghosts, 2x the bytes sent, summed over the
    ranks) per second over the measured device copy rate (bytes read + written, every rank
    at once: :func:`.device_peak.copy_bandwidth`)."""
    from .device_peak import copy_bandwidth, fraction

    moved = 2 * comm.allreduce(bytes_per_rank, op=MPI.SUM)
    copy = copy_bandwidth(decomp.backend.xp, comm=comm)
    return {
        "bytes_moved": moved,
        "GBps": moved / seconds / 1e9,
        "device_copy_GBps": copy / 1e9,
        "bandwidth_fraction": fraction(moved, seconds, copy),
    }


def _max_bytes() -> int:
    """Global bytes of the sweep's ``max``: two copies (ours, the NumPy peer's) in half of the
    memory of this node."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 8 << 30
    return memory // 4


def _shape(nbytes: float, ndim: int) -> tuple[int, ...]:
    edge = max(1, round((nbytes / 8) ** (1.0 / ndim)))
    return (edge,) * ndim


def _sweep(args: argparse.Namespace, methods: list[str]) -> dict[str, Any]:
    """Collective. Every point of dims x bytes x halo x method, within ``--sweep-budget``."""
    comm = world()
    sizes = [
        float(_max_bytes()) if v.strip() == "max" else float(v)
        for v in args.sweep_bytes.split(",")
        if v.strip()
    ]
    dims = [int(d) for d in parse_floats(args.sweep_dims)]
    halos = [int(h) for h in parse_floats(args.sweep_halos)]
    start = time.perf_counter()
    points: list[dict[str, Any]] = []
    for nbytes in sizes:
        for ndim in dims:
            shape = _shape(nbytes, ndim)
            for halo in halos:
                base = {"ndim": ndim, "global_bytes": int(np.prod(shape)) * 8, "halo": halo}
                elapsed = comm.bcast(time.perf_counter() - start, root=0)
                if elapsed > args.sweep_budget:
                    points += [{**base, "method": m, "size": list(shape),
                                "skipped": f"sweep budget of {args.sweep_budget:g} s spent"}
                               for m in methods]  # fmt: skip
                    continue
                try:
                    decomp = CartDecomposition(
                        shape, periodic=True, halo=halo, backend=args.backend
                    )
                    if min(decomp.local_shape) < halo:
                        raise ValueError(
                            f"local block {decomp.local_shape} narrower than the halo {halo}"
                        )
                except ValueError as exc:
                    points += [{**base, "method": m, "size": list(shape), "skipped": str(exc)}
                               for m in methods]  # fmt: skip
                    continue
                a = decomp.allocate(np.float64, fill=-1.0)
                _fill(decomp, a)
                for method in methods:
                    reps = _fitted_reps(args, decomp, a, method)
                    point = _case(args, shape, method, halo, reps, (decomp, a))
                    point.update(base, reps=reps)
                    points.append(point)
                    print_point(
                        comm,
                        f"halo {ndim}-D {'x'.join(map(str, shape))} h{halo} {method}",
                        point["ours"]["seconds"] * 1e6,
                        point["peers"]["floor"]["seconds"] * 1e6,
                        point["ratio"]["floor"],
                        "us",
                    )
                del a
    worst = worst_point(
        points, "floor", ("ndim", "size", "halo", "method", "dims", "bytes_per_rank")
    )
    return {"points": points, "worst": worst, "seconds": time.perf_counter() - start}


def _fitted_reps(args: argparse.Namespace, decomp: CartDecomposition, a: Any, method: str) -> int:
    """Collective. Repetitions so that each contender runs about ``--sweep-point-seconds``
    (at least 5, at most ``--reps``), from one timed exchange (the slowest rank's)."""
    comm = world()
    ex = HaloExchange(decomp, np.float64, method=method, pattern=args.pattern)
    ex.exchange(a)
    comm.Barrier()
    t0 = time.perf_counter()
    ex.exchange(a)
    decomp.backend.synchronize()
    one = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    ex.close()
    return int(min(max(5, args.sweep_point_seconds / max(one, 1e-7)), max(5, args.reps)))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Run every case; the first (2-D, first method) is the headline figure; with
    ``--sweep`` also the grid (``sweep``) and its worst point (``worst``)."""
    comm = world()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    shapes = [(args.size2d,) * 2, (args.size3d,) * 3]
    cases = [_case(args, shape, m) for shape in shapes for m in methods]
    backend = CartDecomposition((1,), comm=comm, backend=args.backend).backend.name
    head = cases[0]
    record: dict[str, Any] = {
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
    if "limits" in head:  # GPU: the headline's fraction of the device copy beside the host's
        record["limits"].update(head["limits"])
    if getattr(args, "sweep", False):
        sweep = _sweep(args, methods)
        record["sweep"] = sweep["points"]
        record["worst"] = sweep["worst"]
        record["sweep_seconds"] = sweep["seconds"]
    record["affinity"] = affinity_record(comm)  # the peers run in our ranks, on our threads
    record["machine"] = machine_record(load)
    return record
