"""Halo (ghost-cell) exchange on a :class:`~hpc.decomposition.CartDecomposition`.

Faces, edges and corners are filled, periodic axes wrap, and non-periodic domain boundaries are
left untouched. Two message patterns:

``sweep`` (default)
    One phase per axis; each face message also carries the ghost cells already filled along the
    earlier axes, so edges and corners arrive without messages of their own: 2 x ndim messages.
``direct``
    One phase: a message to each of the 3**ndim - 1 neighbours. More messages, but all of them
    are in flight between :meth:`HaloExchange.start` and :meth:`HaloExchange.finish`, so the whole
    exchange overlaps with interior compute.

Two transports: ``p2p`` (persistent ``Send_init``/``Recv_init`` requests) and ``rma`` (one-sided
``Put`` into an MPI window over the receive buffer, synchronised by ``fence`` or by
post-start-complete-wait, ``sync="pscw"``); RMA is what maps onto RDMA hardware. Pack buffers are
allocated once; packing is done by kernels. Device arrays go to MPI directly when the MPI is
CUDA-aware, else through pinned host buffers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from . import pack as _pack
from .backend import is_device_array
from .comm import cuda_aware_mpi
from .decomposition import CartDecomposition, Direction

__all__ = ["HaloExchange"]


@dataclass(frozen=True)
class Transfer:
    """One message of a phase: a box sent to ``peer`` and the box its answer fills."""

    direction: Direction  # towards the peer, from this rank
    peer: int
    send_box: _pack.Box
    recv_box: _pack.Box
    count: int  # elements each way (the two boxes always match in size)
    send_offset: int  # in this phase's send buffer
    recv_offset: int  # in this phase's receive buffer (slot of the direction data comes from)
    target_offset: int  # in the peer's receive buffer (RMA displacement)
    send_tag: int
    recv_tag: int
    self_source: int  # when peer is this rank: offset in the send buffer of the data to unpack


def _neg(d: Direction) -> Direction:
    return tuple(-x for x in d)


class HaloExchange:
    """Collective. Fill the ghost cells of local arrays of a decomposition from their neighbours.

    Parameters
    ----------
    decomp : CartDecomposition
        The layout; its ``halo`` is the exchanged width.
    dtype : dtype
        Element type of the arrays to exchange.
    method : {"p2p", "rma"}
        Two-sided persistent requests, or one-sided ``Put`` into an MPI window.
    pattern : {"sweep", "direct"}
        Axis-by-axis phases (fewest messages) or one phase to all neighbours (full overlap).
    sync : {"fence", "pscw"}
        RMA synchronisation: ``MPI_Win_fence`` or post-start-complete-wait (neighbours only).

    Examples
    --------
    >>> d = CartDecomposition((64, 64), periodic=True, halo=1)
    >>> u = d.allocate("float64")
    >>> halo = HaloExchange(d, u.dtype)
    >>> halo.exchange(u)            # blocking
    >>> halo.start(u)               # or overlapped:
    >>> # ... update cells that need no ghosts ...
    >>> halo.finish()
    """

    def __init__(
        self,
        decomp: CartDecomposition,
        dtype: Any = np.float64,
        method: str = "p2p",
        pattern: str = "sweep",
        sync: str = "fence",
    ) -> None:
        if method not in ("p2p", "rma"):
            raise ValueError(f"method={method!r}: expected 'p2p' or 'rma'")
        if pattern not in ("sweep", "direct"):
            raise ValueError(f"pattern={pattern!r}: expected 'sweep' or 'direct'")
        if sync not in ("fence", "pscw"):
            raise ValueError(f"sync={sync!r}: expected 'fence' or 'pscw'")
        if decomp.comm is None:
            raise ValueError("HaloExchange needs a decomposition with a communicator, not a plan")
        self.decomp = decomp
        self.dtype = np.dtype(dtype)
        self.method, self.pattern, self.sync = method, pattern, sync
        self.comm = decomp.comm
        self.backend = decomp.backend
        self._device = self.backend.is_gpu
        self._staged = self._device and not cuda_aware_mpi()
        self._check_widths()
        self.phases = self._plan_phases()
        self._allocate_buffers()
        self._requests: list[list[MPI.Prequest]] = []
        self._windows: list[MPI.Win] = []
        self._groups: list[MPI.Group] = []
        if method == "p2p":
            self._make_requests()
        else:
            self._make_windows()
        self._pending: Any = None

    # -- planning -----------------------------------------------------------------------
    def _exchanging_axes(self) -> list[bool]:
        d = self.decomp
        return [d.halo > 0 and (d.dims[i] > 1 or d.periodic[i]) for i in range(d.ndim)]

    def _check_widths(self) -> None:
        """Every rank must own at least ``halo`` cells along each exchanging axis."""
        d = self.decomp
        short = [
            i for i, on in enumerate(self._exchanging_axes()) if on and d.local_shape[i] < d.halo
        ]
        bad = np.array([len(short)], dtype=np.int64)
        total = np.zeros(1, dtype=np.int64)
        self.comm.Allreduce(bad, total, op=MPI.SUM)  # every rank learns it, so all raise
        if total[0]:
            raise ValueError(
                f"halo width {d.halo} exceeds the block owned by some rank along an exchanged "
                f"axis (this rank owns {d.local_shape} of {d.global_shape} on grid {d.dims}); "
                "use fewer ranks, another dims, or a narrower halo"
            )

    def _box_along(self, axis: int, side: int, sending: bool, full: bool) -> tuple[int, int]:
        """(lo, n) along ``axis`` of a box: side -1/+1 is the low/high halo, 0 the owned span.

        ``full`` extends an owned span over the ghost cells on the sides that have neighbours.
        """
        d = self.decomp
        h, n = d.halo, d.local_shape[axis]
        if side == 0:
            if not full:
                return h, n
            unit = [0] * d.ndim
            unit[axis] = -1
            lo = 0 if d.neighbour(tuple(unit)) is not None else h
            unit[axis] = 1
            hi = n + 2 * h if d.neighbour(tuple(unit)) is not None else h + n
            return lo, hi - lo
        if sending:
            return (h, h) if side < 0 else (n, h)
        return (0, h) if side < 0 else (h + n, h)

    def _box(self, direction: Direction, sending: bool, phase_axis: int | None) -> _pack.Box:
        lo, ext = [], []
        for axis, side in enumerate(direction):
            full = phase_axis is not None and axis < phase_axis
            a, n = self._box_along(axis, side, sending, full)
            lo.append(a)
            ext.append(n)
        return _pack.box3d(tuple(lo), tuple(ext))

    def _phase_directions(self) -> list[tuple[int | None, list[Direction]]]:
        d = self.decomp
        on = self._exchanging_axes()
        if self.pattern == "direct":
            dirs = [dr for dr in d.directions if all(on[i] or s == 0 for i, s in enumerate(dr))]
            return [(None, dirs)]
        phases: list[tuple[int | None, list[Direction]]] = []
        for axis in range(d.ndim):
            if not on[axis]:
                continue
            dirs = []
            for side in (-1, 1):
                dr = [0] * d.ndim
                dr[axis] = side
                dirs.append(tuple(dr))
            phases.append((axis, dirs))
        return phases

    def _plan_phases(self) -> list[list[Transfer]]:
        d = self.decomp
        plan = self._phase_directions()
        # Receive slots are laid out identically on every rank (the largest size any rank
        # needs), so an RMA origin knows the displacement of its data at the target.
        slot_sizes = []
        for axis, dirs in plan:
            for dr in dirs:
                slot_sizes.append(math.prod(self._box(dr, False, axis)[3:]))
        local = np.array(slot_sizes or [0], dtype=np.int64)
        widest = np.empty_like(local)
        self.comm.Allreduce(local, widest, op=MPI.MAX)
        phases: list[list[Transfer]] = []
        slot = 0
        self._slot_layout: list[dict[Direction, int]] = []
        self._buffer_sizes: list[tuple[int, int]] = []
        for axis, dirs in plan:
            offsets: dict[Direction, int] = {}
            total = 0
            for dr in dirs:
                offsets[dr] = total
                total += int(widest[slot])
                slot += 1
            self._slot_layout.append(offsets)
            transfers: list[Transfer] = []
            send_offsets: dict[Direction, int] = {}
            send_total = 0
            for dr in dirs:
                if d.neighbour(dr) is not None:
                    send_offsets[dr] = send_total
                    send_total += math.prod(self._box(dr, True, axis)[3:])
            for tag, dr in enumerate(dirs):
                peer = d.neighbour(dr)
                if peer is None:
                    continue
                send_box = self._box(dr, True, axis)
                recv_box = self._box(dr, False, axis)
                count = math.prod(send_box[3:])
                transfers.append(
                    Transfer(
                        direction=dr,
                        peer=peer,
                        send_box=send_box,
                        recv_box=recv_box,
                        count=count,
                        send_offset=send_offsets[dr],
                        recv_offset=offsets[dr],
                        target_offset=offsets[_neg(dr)],
                        send_tag=tag,
                        recv_tag=dirs.index(_neg(dr)),
                        # On a self-wrapped axis the ghosts at dr are what this rank sends to -dr.
                        self_source=send_offsets.get(_neg(dr), -1),
                    )
                )
            phases.append(transfers)
            self._buffer_sizes.append((send_total, total))
        return phases

    # -- buffers, requests, windows -----------------------------------------------------
    def _allocate_buffers(self) -> None:
        be = self.backend
        self._send: list[Any] = []
        self._recv: list[Any] = []
        self._send_mpi: list[Any] = []
        self._recv_mpi: list[Any] = []
        for send_n, recv_n in self._buffer_sizes:
            send = be.empty(max(send_n, 1), self.dtype)
            recv = be.zeros(max(recv_n, 1), self.dtype)
            self._send.append(send)
            self._recv.append(recv)
            if self._staged:
                self._send_mpi.append(be.pinned_empty(max(send_n, 1), self.dtype))
                pinned = be.pinned_empty(max(recv_n, 1), self.dtype)
                pinned[...] = 0
                self._recv_mpi.append(pinned)
            else:
                self._send_mpi.append(send)
                self._recv_mpi.append(recv)

    def _remote(self, phase: int) -> list[Transfer]:
        return [t for t in self.phases[phase] if t.peer != self.decomp.rank]

    def _make_requests(self) -> None:
        for p in range(len(self.phases)):
            sbuf, rbuf = self._send_mpi[p], self._recv_mpi[p]
            reqs = []
            for t in self._remote(p):
                reqs.append(
                    self.comm.Recv_init(
                        rbuf[t.recv_offset : t.recv_offset + t.count], t.peer, t.recv_tag
                    )
                )
            for t in self._remote(p):
                reqs.append(
                    self.comm.Send_init(
                        sbuf[t.send_offset : t.send_offset + t.count], t.peer, t.send_tag
                    )
                )
            self._requests.append(reqs)

    def _make_windows(self) -> None:
        world_group = self.comm.Get_group()
        item = self.dtype.itemsize
        for p in range(len(self.phases)):
            if self._device and not self._staged:  # CUDA-aware: expose the device buffer
                win = MPI.Win.Create(self._recv_mpi[p], disp_unit=item, comm=self.comm)
            else:
                # Memory the MPI library allocates itself can be registered for RDMA and shared
                # on a node (Open MPI's osc/sm); Win.Create on user memory is refused by some
                # MPI builds on one rank.
                n = self._recv_mpi[p].size
                win = MPI.Win.Allocate(n * item, disp_unit=item, comm=self.comm)
                exposed = np.frombuffer(win.tomemory(), dtype=self.dtype, count=n)
                exposed[...] = 0
                self._recv_mpi[p] = exposed
                if not self._device:
                    self._recv[p] = exposed
            self._windows.append(win)
            peers = sorted({t.peer for t in self._remote(p)})
            self._groups.append(world_group.Incl(peers))
        world_group.Free()

    # -- the exchange -------------------------------------------------------------------
    def _as3d(self, a: Any) -> Any:
        d = self.decomp
        if tuple(a.shape) != d.ghost_shape:
            raise ValueError(
                f"array of shape {tuple(a.shape)} does not match the local block with ghosts "
                f"{d.ghost_shape}"
            )
        if np.dtype(a.dtype) != self.dtype:
            raise ValueError(f"array dtype {a.dtype} != exchange dtype {self.dtype}")
        if is_device_array(a) != self._device:
            where = "device" if is_device_array(a) else "host"
            raise ValueError(f"a {where} array was given to a {self.backend.name} halo exchange")
        if not a.flags.c_contiguous:
            raise ValueError("halo exchange needs a C-contiguous local array (use allocate())")
        return _pack.as3d(a)

    def _pack_phase(self, p: int, a3: Any) -> None:
        send = self._send[p]
        packer = _pack.pack_device if self._device else _pack.pack
        for t in self.phases[p]:
            packer(a3, send[t.send_offset : t.send_offset + t.count], t.send_box)
        if self._device:
            self.backend.synchronize()
            if self._staged and self._buffer_sizes[p][0]:
                send.get(out=self._send_mpi[p])

    def _unpack_phase(self, p: int, a3: Any) -> None:
        me = self.decomp.rank
        recv, send = self._recv[p], self._send[p]
        if self._staged and self._buffer_sizes[p][1]:
            recv.set(self._recv_mpi[p])
        unpacker = _pack.unpack_device if self._device else _pack.unpack
        for t in self.phases[p]:
            src = send[t.self_source :] if t.peer == me else recv[t.recv_offset :]
            unpacker(src[: t.count], a3, t.recv_box)
        if self._device:
            self.backend.synchronize()

    def _post(self, p: int, a3: Any) -> None:
        if self.method == "p2p":
            reqs = self._requests[p]
            nrecv = len(reqs) // 2
            if nrecv:
                MPI.Prequest.Startall(reqs[:nrecv])  # receives first, before any data moves
            self._pack_phase(p, a3)
            if nrecv:
                MPI.Prequest.Startall(reqs[nrecv:])
            return
        self._pack_phase(p, a3)
        win, sbuf = self._windows[p], self._send_mpi[p]
        if self.sync == "fence":
            win.Fence()
        else:
            group = self._groups[p]
            win.Post(group)
            win.Start(group)
        for t in self._remote(p):
            win.Put(sbuf[t.send_offset : t.send_offset + t.count], t.peer, t.target_offset)

    def _complete(self, p: int, a3: Any) -> None:
        if self.method == "p2p":
            if self._requests[p]:
                MPI.Request.Waitall(self._requests[p])
        elif self.sync == "fence":
            self._windows[p].Fence()
        else:
            self._windows[p].Complete()
            self._windows[p].Wait()
        self._unpack_phase(p, a3)

    def start(self, a: Any) -> None:
        """Collective. Begin filling the ghost cells of ``a``; call :meth:`finish` to complete.

        Between the two calls, only cells that do not read ghosts may be updated, and no ghost
        may be read. With ``pattern="sweep"`` only the first axis's messages are in flight;
        the later axes need the earlier ones and run inside :meth:`finish`.
        """
        if self._pending is not None:
            raise RuntimeError("start() called again before finish()")
        a3 = self._as3d(a)
        if self.phases:
            self._post(0, a3)
        self._pending = a3

    def finish(self) -> None:
        """Collective. Complete the exchange begun by :meth:`start`."""
        a3 = self._pending
        if a3 is None:
            raise RuntimeError("finish() called without start()")
        try:
            if self.phases:
                self._complete(0, a3)
                for p in range(1, len(self.phases)):
                    self._post(p, a3)
                    self._complete(p, a3)
        finally:
            self._pending = None

    def exchange(self, a: Any) -> Any:
        """Collective. Fill the ghost cells of ``a`` in place and return ``a``."""
        self.start(a)
        self.finish()
        return a

    # -- facts and clean-up -------------------------------------------------------------
    @property
    def transfers(self) -> list[Transfer]:
        """All messages of one exchange, every phase (self-copies included)."""
        return [t for phase in self.phases for t in phase]

    @property
    def bytes_sent(self) -> int:
        """Bytes this rank sends per exchange (self-copies included)."""
        return sum(t.count for t in self.transfers) * self.dtype.itemsize

    def close(self) -> None:
        """Collective. Free the requests and windows (the object cannot be used afterwards)."""
        for reqs in self._requests:
            for r in reqs:
                r.Free()
        for win in self._windows:
            win.Free()
        for g in self._groups:
            g.Free()
        self._requests, self._windows, self._groups, self.phases = [], [], [], []

    def __enter__(self) -> HaloExchange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"HaloExchange(method={self.method!r}, pattern={self.pattern!r}, "
            f"messages={sum(len(p) for p in self.phases)}, bytes={self.bytes_sent}, "
            f"staged={self._staged})"
        )
