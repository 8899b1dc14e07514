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
post-start-complete-wait, ``sync="pscw"``); RMA is what maps onto RDMA hardware. With ``fence``
the window holds two receive buffers used in turn, so one fence per phase both completes an
exchange's puts and opens the next one's epoch (see :meth:`HaloExchange._complete`). Pack
buffers are allocated once; packing is done by kernels. Device arrays go to MPI directly when
the MPI is CUDA-aware, else through pinned host buffers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    recv_offset: int  # slot in this rank's receive buffer for data from ``direction``
    target_offset: int  # slot in the peer's receive buffer (RMA displacement)
    send_tag: int
    recv_tag: int
    send_components: tuple[int, ...] = (0,)  # which components travel towards the peer
    recv_components: tuple[int, ...] = (0,)  # which components arrive from it


@dataclass
class _Phase:
    """What one phase moves, split by how: self-copies, packed or in-place sends and receives."""

    transfers: list[Transfer]
    self_copy: Any = None  # BoxMove: copies within this rank (a self-wrapped periodic axis)
    packed: list[tuple[Transfer, int]] = field(default_factory=list)  # (t, send offset)
    pack: Any = None  # BoxMove of the packed sends
    direct: list[tuple[Transfer, int, int]] = field(default_factory=list)  # (t, start, stop)
    buffered: list[Transfer] = field(default_factory=list)  # receives through the buffer
    unpack: Any = None  # BoxMove of the buffered receives
    direct_recv: list[tuple[Transfer, int, int]] = field(default_factory=list)
    send_size: int = 0
    recv_size: int = 0
    requests: list[MPI.Prequest] = field(default_factory=list)
    shared_recvs: list[MPI.Prequest] = field(default_factory=list)  # on the phase buffers
    shared_sends: list[MPI.Prequest] = field(default_factory=list)
    window: MPI.Win | None = None
    remote: bool = False  # some rank sends in this phase (the same answer on every rank)
    group: MPI.Group | None = None
    halves: list[tuple[Any, Any]] = field(default_factory=list)  # fence: (recv, recv_mpi) x 2
    turn: int = 0  # fence: the half the current exchange's puts land in


@dataclass
class _Binding:
    """What one exchange of a given array needs, prepared once per array and then reused."""

    array: Any  # held so the id stays this array's
    a3: Any
    recvs: list[list[MPI.Prequest]]  # per phase: persistent receives, buffered and in place
    sends: list[list[MPI.Prequest]]  # per phase: persistent sends, packed and in place
    owned: list[MPI.Prequest]  # the in-place requests this binding created (freed with it)
    puts: list[list[tuple[Any, int, int]]]  # per phase (RMA): origin view, target rank, disp
    flat: Any = None  # the array flattened (a view), what the CPU moves run on
    every: list[list[MPI.Prequest]] = field(default_factory=list)  # per phase: recvs + sends


_MAX_BINDINGS = 4  # arrays whose requests are kept (a solver alternates between two or three)


def _neg(d: Direction) -> Direction:
    return tuple(-x for x in d)


def _extent(box: _pack.Box, axis: int) -> tuple[int, int]:
    """``[lo, hi)`` of ``box`` along ``axis`` of the 3-D view."""
    return box[axis], box[axis] + box[3 + axis]


def _chained(moves: list[Any]) -> list[Any]:
    """``moves`` as one chained move when they can be, else as they are."""
    one = _pack.chain(moves) if len(moves) > 1 else None
    return [one] if one is not None else moves


def _cut(box: _pack.Box, axis: int, lo: int, hi: int) -> _pack.Box:
    """The part of ``box`` whose index along ``axis`` (of the 3-D view) is in ``[lo, hi)``."""
    b = list(box)
    b[axis], b[3 + axis] = lo, hi - lo
    return (b[0], b[1], b[2], b[3], b[4], b[5])


class HaloExchange:
    """Collective. Fill the ghost cells of local arrays of a decomposition from their neighbours.

    Parameters
    ----------
    decomp : CartDecomposition
        The layout; its ``halo`` is the exchanged width.
    dtype : dtype
        Element type of the arrays to exchange.
    method : {"p2p", "rma"}
        Two-sided (persistent requests for packed buffers, nonblocking requests for boxes sent
        in place), or one-sided ``Put`` into an MPI window.
    pattern : {"sweep", "direct"}
        Axis-by-axis phases (fewest messages) or one phase to all neighbours (full overlap).
    sync : {"fence", "pscw"}
        RMA synchronisation: ``MPI_Win_fence`` or post-start-complete-wait (neighbours only).
    components : int
        Values per cell, stored as a leading axis: arrays of shape
        ``(components, *decomp.ghost_shape)`` (structure-of-arrays, as lattice Boltzmann
        distributions). Every component's ghosts travel in the same messages.
    select : callable, optional
        ``select(direction)`` gives the components sent towards the neighbour in
        ``direction`` (default: all), e.g. only the lattice populations streaming across
        that face.
    reverse : bool
        Send the ghost cells and receive into the owned boundary layer of the neighbour
        instead: values a rank wrote beyond its block go to the rank owning those cells
        (in-place streaming schemes push populations across faces this way). With a sweep,
        values in edge and corner ghosts travel on through the later phases.

    Notes
    -----
    A box that is one contiguous run of the array (a plane of the first axis spanning its
    ghosts, in C order) is handed to MPI in place, with no packing; other boxes are packed by one
    kernel call per phase. Copies between a rank and itself (a periodic axis that is not split)
    never go through MPI, and consecutive phases made only of such copies run as one kernel
    call; with ``p2p``, such copies before a phase with messages are cut along that phase's
    axis: the layers it sends are copied first, the others while its messages are in flight.
    The kernels walk the rows of the array in memory order, the low and high faces of an
    axis together (one pass over the row ends for a face of the last axis).

    Examples
    --------
    >>> d = CartDecomposition((64, 64), periodic=True, halo=1)
    >>> u = d.allocate("float64")
    >>> halo = HaloExchange(d, u.dtype)
    >>> halo.exchange(u)            # blocking
    >>> halo.start(u)               # or overlapped:
    >>> # ... update cells that need no ghosts, into another array ...
    >>> halo.finish()
    """

    def __init__(
        self,
        decomp: CartDecomposition,
        dtype: Any = np.float64,
        method: str = "p2p",
        pattern: str = "sweep",
        sync: str = "fence",
        components: int = 1,
        select: Callable[[Direction], Sequence[int]] | None = None,
        reverse: bool = False,
    ) -> None:
        if int(components) < 1:
            raise ValueError(f"components={components}: must be >= 1")
        if method not in ("p2p", "rma"):
            raise ValueError(f"method={method!r}: expected 'p2p' or 'rma'")
        if pattern not in ("sweep", "direct"):
            raise ValueError(f"pattern={pattern!r}: expected 'sweep' or 'direct'")
        if sync not in ("fence", "pscw"):
            raise ValueError(f"sync={sync!r}: expected 'fence' or 'pscw'")
        if reverse and pattern != "sweep":
            # direct messages would land on overlapping edge cells in an undefined order
            raise ValueError("reverse=True needs pattern='sweep'")
        if decomp.comm is None:
            raise ValueError("HaloExchange needs a decomposition with a communicator, not a plan")
        self.decomp = decomp
        self.dtype = np.dtype(dtype)
        self.method, self.pattern, self.sync = method, pattern, sync
        self.reverse = bool(reverse)
        self.comm = decomp.comm
        self.backend = decomp.backend
        self._device = self.backend.is_gpu
        self._staged = self._device and not cuda_aware_mpi()
        self.components = int(components)
        every = tuple(range(self.components))
        self._select = (
            (lambda _d: every) if select is None else (lambda d: tuple(int(c) for c in select(d)))
        )
        g = decomp.ghost_shape
        if self.components == 1:
            self.array_shape = g
            self._shape3 = _pack.as3d(np.empty(g, dtype=np.int8)).shape
        else:
            self.array_shape = (self.components, *g)
            # The component axis leads; in 3-D it is merged with the first spatial axis.
            self._shape3 = (
                (self.components * g[0], g[1], g[2])
                if len(g) == 3
                else _pack.as3d(np.empty(self.array_shape, dtype=np.int8)).shape
            )
        self._check_widths()
        # fence RMA receives into two buffers in turn (one fence an exchange), else one
        self._turns = 2 if method == "rma" and sync == "fence" else 1
        self.phases = [self._classify(t) for t in self._plan_transfers()]
        self._allocate_buffers()
        if method == "p2p":
            self._make_requests()
        else:
            self._make_windows()
        self._pending: _Binding | None = None
        self._bindings: dict[int, _Binding] = {}
        self._runs = self._self_runs()
        self._early = self._early_posts()

    def _self_runs(self) -> dict[int, tuple[int, Any]]:
        """Runs of consecutive phases that only copy within this rank (self-wrapped axes, no
        message, no fence on any rank): first phase -> (phases in the run, one chained move),
        so that they cost one kernel call."""
        me = self.decomp.rank
        runs: dict[int, tuple[int, Any]] = {}
        if self._device:
            return runs
        alone = [
            not ph.remote and all(t.peer == me for t in ph.transfers) for ph in self.phases
        ]
        p = 0
        while p < len(self.phases):
            q = p
            while q < len(self.phases) and alone[q]:
                q += 1
            if q - p >= 2:
                move = _pack.chain([self.phases[k].self_copy for k in range(p, q)])
                if move is not None:
                    runs[p] = (q - p, move)
            p = max(q, p + 1)
        return runs

    def _early_posts(self) -> dict[int, tuple[int, list[Any], list[Any]]]:
        """Self-copies overlapped with a remote phase: the first phase of a run of self-only
        phases followed by a phase with messages -> (that phase, moves before, moves after).

        A self-copy of an earlier phase (a later axis, wrapped on this rank) stays within each
        layer of the remote phase's axis, so it can be cut along that axis: the layers the
        remote phase sends are copied first (its messages carry their edges and corners), the
        messages are posted, and the other owned layers are copied while they are in flight.
        Parts in the ghost layers that the messages fill (for the components they bring) are
        dropped, as the messages overwrite them. CPU sweeps only; not ``reverse``, which sends
        the ghost layers on. p2p only: RMA's puts land in the window, unpacked after the fence,
        and copying the other layers in between let those lines go cold (on two ranks of one
        node, 232^3, halo 1-3: RMA 0-12% slower, p2p as fast or up to 15-20% faster).
        """
        early: dict[int, tuple[int, list[Any], list[Any]]] = {}
        if self._device or self.reverse or self.pattern != "sweep" or self.method != "p2p":
            return early
        me, phases = self.decomp.rank, self.phases
        alone = [not ph.remote and all(t.peer == me for t in ph.transfers) for ph in phases]
        pad = 3 - self.decomp.ndim  # a spatial axis's index in the 3-D boxes
        for r, ph in enumerate(phases):
            if not ph.remote or not ph.transfers or any(t.peer == me for t in ph.transfers):
                continue
            p = r
            while p > 0 and alone[p - 1]:
                p -= 1
            if p == r:
                continue
            axis = pad + next(i for i, s in enumerate(ph.transfers[0].direction) if s)
            sent = [_extent(t.send_box, axis) for t in ph.transfers]
            filled = [(_extent(t.recv_box, axis), set(t.recv_components)) for t in ph.transfers]
            cuts_at = {x for lo_hi in sent + [f for f, _ in filled] for x in lo_hi}
            parts: tuple[list[Any], list[Any]] = ([], [])  # moves before, after the posting
            for q in range(p, r):
                by_dir = {t.direction: t for t in phases[q].transfers}
                pieces: tuple[list[Any], list[Any]] = ([], [])  # (source, target) boxes
                for t in phases[q].transfers:
                    src, dst = by_dir[_neg(t.direction)].send_box, t.recv_box
                    lo, hi = _extent(dst, axis)
                    cuts = sorted({lo, hi} | {x for x in cuts_at if lo < x < hi})
                    for a0, a1 in zip(cuts[:-1], cuts[1:], strict=False):
                        first = any(s0 <= a0 and a1 <= s1 for s0, s1 in sent)
                        for c in t.recv_components:
                            if any(f0 <= a0 and a1 <= f1 and c in cs for (f0, f1), cs in filled):
                                continue  # the messages overwrite it
                            boxes = zip(
                                self._expand(_cut(src, axis, a0, a1), (c,)),
                                self._expand(_cut(dst, axis, a0, a1), (c,)),
                                strict=True,
                            )
                            pieces[0 if first else 1].extend(boxes)
                for k in (0, 1):
                    move = _pack.BoxMove(
                        self._shape3,
                        "copy",
                        [b for b, _ in pieces[k]],
                        targets=[b for _, b in pieces[k]],
                        xp=self.backend.xp,
                    )
                    if move:
                        parts[k].append(move)
            # consecutive phases' moves as one kernel call where they can be chained
            early[p] = (r, *(_chained(m) for m in parts))
        return early

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

    def _span(self, axis: int, side: int, sending: bool, with_ghosts: bool) -> tuple[int, int]:
        """(lo, n) along ``axis``: side -1/+1 is the low/high halo, 0 the owned span.

        ``with_ghosts`` extends the owned span over the ghost cells on each side that has a
        neighbour (a sweep phase carries the edges and corners of the other axes this way).
        """
        d = self.decomp
        h, n = d.halo, d.local_shape[axis]
        if side == 0:
            if not with_ghosts:
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

    def _box(self, direction: Direction, sending: bool, sweep: bool) -> _pack.Box:
        # In a sweep, ghosts along the other axes are included: those of earlier axes are
        # already filled; those of later axes are stale but overwritten by their own phase.
        # Reversed, the ghosts are sent and the owned boundary layers receive.
        if self.reverse:
            sending = not sending
        spans = [self._span(ax, s, sending, sweep) for ax, s in enumerate(direction)]
        return _pack.box3d([lo for lo, _ in spans], [n for _, n in spans])

    def _phase_directions(self) -> list[list[Direction]]:
        d = self.decomp
        on = self._exchanging_axes()
        if self.pattern == "direct":
            return [[dr for dr in d.directions if all(on[i] or s == 0 for i, s in enumerate(dr))]]
        phases = []
        # Last axis first: start() completes every phase but the final one, whose messages (of
        # the first exchanged axis, planes that go in place) stay in flight until finish().
        for axis in reversed(range(d.ndim)):
            if on[axis]:
                unit = [tuple(s if i == axis else 0 for i in range(d.ndim)) for s in (-1, 1)]
                phases.append(unit)
        return phases

    def _plan_transfers(self) -> list[list[Transfer]]:
        d = self.decomp
        plan = self._phase_directions()
        sweep = self.pattern == "sweep"
        # Receive slots are laid out identically on every rank (the largest size any rank
        # needs), so an RMA origin knows the displacement of its data at the target.
        sizes = [
            len(self._select(_neg(dr))) * math.prod(self._box(dr, False, sweep)[3:])
            for dirs in plan
            for dr in dirs
        ]
        local = np.array(sizes or [0], dtype=np.int64)
        widest = np.empty_like(local)
        self.comm.Allreduce(local, widest, op=MPI.MAX)
        phases: list[list[Transfer]] = []
        slot = 0
        self._recv_sizes: list[int] = []
        for dirs in plan:
            offsets: dict[Direction, int] = {}
            total = 0
            for dr in dirs:
                offsets[dr] = total
                total += int(widest[slot])
                slot += 1
            self._recv_sizes.append(total)
            transfers = []
            for tag, dr in enumerate(dirs):
                peer = d.neighbour(dr)
                if peer is None:
                    continue
                send_box = self._box(dr, True, sweep)
                sent = self._select(dr)
                transfers.append(
                    Transfer(
                        direction=dr,
                        peer=peer,
                        send_box=send_box,
                        recv_box=self._box(dr, False, sweep),
                        count=_pack.count(send_box) * len(sent),
                        recv_offset=offsets[dr],
                        target_offset=offsets[_neg(dr)],
                        send_tag=tag,
                        recv_tag=dirs.index(_neg(dr)),
                        send_components=sent,
                        recv_components=self._select(_neg(dr)),
                    )
                )
            phases.append(transfers)
        return phases

    def _expand(self, box: _pack.Box, comps: Sequence[int]) -> list[_pack.Box]:
        """The boxes of the array's 3-D view that hold spatial ``box`` for components ``comps``
        (in that order)."""
        q = self.components
        if q == 1:
            return [box]
        lo0, lo1, lo2, n0, n1, n2 = box
        if self.decomp.ndim == 3:
            g0 = self.decomp.ghost_shape[0]
            return [(c * g0 + lo0, lo1, lo2, n0, n1, n2) for c in comps]
        every = tuple(comps) == tuple(range(q))
        if self.decomp.ndim == 2:
            return (
                [(0, lo1, lo2, q, n1, n2)] if every else [(c, lo1, lo2, 1, n1, n2) for c in comps]
            )
        return [(0, 0, lo2, 1, q, n2)] if every else [(0, c, lo2, 1, 1, n2) for c in comps]

    def _layout(
        self, items: list[tuple[_pack.Box, Sequence[int], int]]
    ) -> tuple[list[_pack.Box], list[int]]:
        """Expanded boxes and their buffer offsets: a message holds its components in turn."""
        boxes, offsets = [], []
        for box, comps, start in items:
            for k, b in enumerate(self._expand(box, comps)):
                boxes.append(b)
                offsets.append(start + k * _pack.count(b))
        return boxes, offsets

    def _classify(self, transfers: list[Transfer]) -> _Phase:
        me = self.decomp.rank
        ph = _Phase(transfers=transfers)
        d = self.decomp
        axes = {i for t in transfers for i, s in enumerate(t.direction) if s}
        ph.remote = any(d.dims[i] > 1 for i in axes) or (self.pattern == "direct" and d.size > 1)
        in_place = not self._staged
        by_dir = {t.direction: t for t in transfers}
        # On a self-wrapped axis the ghosts at dr are what this rank sends towards -dr.
        own = [t for t in transfers if t.peer == me]
        shape3, xp = self._shape3, self.backend.xp
        ex = self._expand
        ph.self_copy = _pack.BoxMove(
            shape3,
            "copy",
            [b for t in own for b in ex(by_dir[_neg(t.direction)].send_box, t.recv_components)],
            targets=[b for t in own for b in ex(t.recv_box, t.recv_components)],
            xp=xp,
        )
        remote = [t for t in transfers if t.peer != me]
        for t in remote:
            sends = ex(t.send_box, t.send_components)
            recvs = ex(t.recv_box, t.recv_components)
            if in_place and len(sends) == 1 and _pack.is_contiguous(sends[0], shape3):
                ph.direct.append((t, *_pack.flat_range(sends[0], shape3)))
            else:
                ph.packed.append((t, ph.send_size))
                ph.send_size += t.count
            one = len(recvs) == 1 and _pack.is_contiguous(recvs[0], shape3)
            if self.method == "p2p" and in_place and one:
                ph.direct_recv.append((t, *_pack.flat_range(recvs[0], shape3)))
            else:
                ph.buffered.append(t)
        pack_boxes, pack_offsets = self._layout(
            [(t.send_box, t.send_components, off) for t, off in ph.packed]
        )
        ph.pack = _pack.BoxMove(shape3, "pack", pack_boxes, pack_offsets, xp=xp)
        unpack_boxes, unpack_offsets = self._layout(
            [(t.recv_box, t.recv_components, t.recv_offset) for t in ph.buffered]
        )
        ph.unpack = _pack.BoxMove(shape3, "unpack", unpack_boxes, unpack_offsets, xp=xp)
        return ph

    # -- buffers, requests, windows -----------------------------------------------------
    def _allocate_buffers(self) -> None:
        be = self.backend
        self._send: list[Any] = []
        self._recv: list[Any] = []
        self._send_mpi: list[Any] = []
        self._recv_mpi: list[Any] = []
        for ph, recv_n in zip(self.phases, self._recv_sizes, strict=True):
            ph.recv_size = recv_n
            send = be.empty(max(ph.send_size, 1), self.dtype)
            recv = be.zeros(self._turns * max(recv_n, 1), self.dtype)
            self._send.append(send)
            self._recv.append(recv)
            if self._staged:
                self._send_mpi.append(be.pinned_empty(max(ph.send_size, 1), self.dtype))
                pinned = be.pinned_empty(self._turns * max(recv_n, 1), self.dtype)
                pinned[...] = 0
                self._recv_mpi.append(pinned)
            else:
                self._send_mpi.append(send)
                self._recv_mpi.append(recv)

    def _make_requests(self) -> None:
        for p, ph in enumerate(self.phases):
            sbuf, rbuf = self._send_mpi[p], self._recv_mpi[p]
            recvs = [
                self.comm.Recv_init(
                    rbuf[t.recv_offset : t.recv_offset + t.count], t.peer, t.recv_tag
                )
                for t in ph.buffered
            ]
            sends = [
                self.comm.Send_init(sbuf[off : off + t.count], t.peer, t.send_tag)
                for t, off in ph.packed
            ]
            ph.requests = recvs + sends
            ph.shared_recvs, ph.shared_sends = recvs, sends

    def _make_windows(self) -> None:
        world_group = self.comm.Get_group()
        item = self.dtype.itemsize
        for p, ph in enumerate(self.phases):
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
            ph.window = win
            ph.group = world_group.Incl(sorted({t.peer for t in ph.buffered}))
            if self._turns == 2:
                half = max(ph.recv_size, 1)
                ph.halves = [
                    (self._recv[p][k * half : (k + 1) * half],
                     self._recv_mpi[p][k * half : (k + 1) * half])
                    for k in range(2)
                ]  # fmt: skip
                self._recv[p], self._recv_mpi[p] = ph.halves[0]
                if ph.remote:  # the epoch of the first exchange's puts (collective)
                    win.Fence(MPI.MODE_NOPRECEDE)
        world_group.Free()

    # -- the exchange -------------------------------------------------------------------
    def _check(self, a: Any) -> None:
        if tuple(a.shape) != self.array_shape:
            raise ValueError(
                f"array of shape {tuple(a.shape)} does not match the local block with ghosts "
                f"{self.array_shape}"
            )
        if np.dtype(a.dtype) != self.dtype:
            raise ValueError(f"array dtype {a.dtype} != exchange dtype {self.dtype}")
        if is_device_array(a) != self._device:
            where = "device" if is_device_array(a) else "host"
            raise ValueError(f"a {where} array was given to a {self.backend.name} halo exchange")
        if not a.flags.c_contiguous:
            raise ValueError("halo exchange needs a C-contiguous local array (use allocate())")

    def _bind(self, a: Any) -> _Binding:
        """The prepared requests and views for ``a`` (made on its first exchange)."""
        bound = self._bindings.get(id(a))
        if bound is not None and bound.array is a and tuple(a.shape) == self.array_shape:
            return bound
        self._check(a)
        a3 = a.reshape(self._shape3)
        flat = a3.reshape(-1)
        recvs, sends, owned, puts = [], [], [], []
        for p, ph in enumerate(self.phases):
            if self.method == "p2p":
                mine_r = [
                    self.comm.Recv_init(flat[lo:hi], t.peer, t.recv_tag)
                    for t, lo, hi in ph.direct_recv
                ]
                mine_s = [
                    self.comm.Send_init(flat[lo:hi], t.peer, t.send_tag) for t, lo, hi in ph.direct
                ]
                recvs.append(ph.shared_recvs + mine_r)
                sends.append(ph.shared_sends + mine_s)
                owned += mine_r + mine_s
                puts.append([])
            else:
                sbuf = self._send_mpi[p]
                puts.append(
                    [(sbuf[off : off + t.count], t.peer, t.target_offset) for t, off in ph.packed]
                    + [(flat[lo:hi], t.peer, t.target_offset) for t, lo, hi in ph.direct]
                )
                recvs.append([])
                sends.append([])
        if len(self._bindings) >= _MAX_BINDINGS:  # forget the oldest array
            oldest = next(iter(self._bindings))
            for r in self._bindings.pop(oldest).owned:
                r.Free()
        every = [r + q for r, q in zip(recvs, sends, strict=True)]
        bound = _Binding(a, a3, recvs, sends, owned, puts, flat, every)
        self._bindings[id(a)] = bound
        return bound

    def _pack_phase(self, p: int, a3: Any) -> None:
        ph = self.phases[p]
        if not self._device:
            if ph.pack:
                ph.pack.run_flat(a3.reshape(-1), self._send[p])
            return
        ph.pack(a3, self._send[p])
        self.backend.synchronize()  # MPI reads the buffers next
        if self._staged and ph.send_size:
            self._send[p].get(out=self._send_mpi[p])

    def _unpack_phase(self, p: int, a3: Any) -> None:
        ph = self.phases[p]
        if not self._device:
            if ph.unpack:
                ph.unpack.run_flat(a3.reshape(-1), self._recv[p])
            return
        if self._staged and ph.recv_size:
            self._recv[p].set(self._recv_mpi[p])
        ph.unpack(a3, self._recv[p])
        self.backend.synchronize()

    def _post(self, p: int, bound: _Binding) -> None:
        ph, a3 = self.phases[p], bound.a3
        if self.method == "p2p" and not self._device and not ph.pack:
            # nothing to pack: every request of the phase starts at once (receives first)
            if bound.every[p]:
                MPI.Prequest.Startall(bound.every[p])
            if ph.self_copy:
                ph.self_copy.run_flat(bound.flat)
            return
        if self.method == "p2p":
            if bound.recvs[p]:
                MPI.Prequest.Startall(bound.recvs[p])  # receives first
            self._pack_phase(p, a3)
            if bound.sends[p]:
                MPI.Prequest.Startall(bound.sends[p])
        else:
            self._pack_phase(p, a3)
            win = ph.window
            shift = 0
            if self.sync == "fence":  # the epoch is open since the last fence
                shift = ph.turn * max(ph.recv_size, 1)
            elif bound.puts[p]:
                win.Post(ph.group)
                win.Start(ph.group)
            for view, peer, disp in bound.puts[p]:
                win.Put(view, peer, disp + shift)
        if ph.self_copy:
            ph.self_copy(a3)  # overlaps with the messages in flight

    def _complete(self, p: int, bound: _Binding) -> None:
        ph = self.phases[p]
        if self.method == "p2p":
            if bound.every[p]:
                MPI.Prequest.Waitall(bound.every[p])
        elif self.sync == "fence":
            if ph.remote:
                # Completes this exchange's puts and opens the next one's epoch. The next puts
                # go to the other half: a neighbour may still be unpacking this half, but it
                # has passed this fence (so is done with the other half's last use) before
                # anyone passes it.
                ph.window.Fence(0)
            self._recv[p], self._recv_mpi[p] = ph.halves[ph.turn]
            self._unpack_phase(p, bound.a3)
            ph.turn ^= 1
            return
        elif bound.puts[p]:
            ph.window.Complete()
            ph.window.Wait()
        self._unpack_phase(p, bound.a3)

    def start(self, a: Any) -> None:
        """Collective. Begin filling the ghost cells of ``a``; call :meth:`finish` to complete.

        Until :meth:`finish` returns, ``a`` must not be written (its boundary cells are being
        sent and its ghosts received); reading owned cells to update another array is the
        intended overlap. With ``pattern="sweep"`` the phases of the other axes complete
        inside ``start`` and only the messages of the first exchanged axis are in flight, so
        every ghost except that axis's is already filled when ``start`` returns (see
        :attr:`pending_axes`); with ``"direct"`` all messages are in flight.
        """
        if self._pending is not None:
            raise RuntimeError("start() called again before finish()")
        bound = self._bind(a)
        last, p = len(self.phases) - 1, 0
        while p <= last:
            early = self._early.get(p)
            if early is not None:  # self-copies around the posting of a remote phase
                r, before, after = early
                for move in before:
                    move.run_flat(bound.flat)
                self._post(r, bound)
                for move in after:
                    move.run_flat(bound.flat)
                if r < last:
                    self._complete(r, bound)
                p = r + 1
                continue
            run = self._runs.get(p)
            if run is not None:  # self-copies only (a final phase among them completes at once)
                run[1].run_flat(bound.flat)
                p += run[0]
                continue
            self._post(p, bound)
            if p < last:
                self._complete(p, bound)
            p += 1
        self._pending = bound

    def finish(self) -> None:
        """Collective. Complete the exchange begun by :meth:`start`."""
        bound = self._pending
        if bound is None:
            raise RuntimeError("finish() called without start()")
        try:
            if self.phases:
                self._complete(len(self.phases) - 1, bound)
        finally:
            self._pending = None

    def exchange(self, a: Any) -> Any:
        """Collective. Fill the ghost cells of ``a`` in place and return ``a``."""
        self.start(a)
        self.finish()
        return a

    # -- facts and clean-up -------------------------------------------------------------
    @property
    def pending_axes(self) -> tuple[int, ...]:
        """Axes whose ghost cells are still being filled between :meth:`start` and
        :meth:`finish` (all others are complete when ``start`` returns). Cells more than the
        halo width away from these axes' block faces can be updated during the overlap."""
        on = [i for i, ex in enumerate(self._exchanging_axes()) if ex]
        if self.pattern == "direct" or not on:
            return tuple(on)
        return (on[0],)  # the final sweep phase

    @property
    def transfers(self) -> list[Transfer]:
        """All messages of one exchange, every phase (self-copies included)."""
        return [t for ph in self.phases for t in ph.transfers]

    @property
    def bytes_sent(self) -> int:
        """Bytes this rank sends per exchange (self-copies included)."""
        return sum(t.count for t in self.transfers) * self.dtype.itemsize

    def close(self) -> None:
        """Collective. Free the requests and windows (the object cannot be used afterwards).

        The exchange keeps persistent requests on the last few arrays it was given (so they are
        not garbage-collected while bound); ``close`` releases them.
        """
        for bound in self._bindings.values():
            for r in bound.owned:
                r.Free()
        self._bindings = {}
        for ph in self.phases:
            for r in ph.requests:
                r.Free()
            if ph.window is not None:
                if self._turns == 2 and ph.remote:
                    ph.window.Fence(MPI.MODE_NOSUCCEED)  # ends the epoch the last fence opened
                ph.window.Free()
            if ph.group is not None:
                ph.group.Free()
        self.phases = []

    def __enter__(self) -> HaloExchange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        n = sum(len(ph.transfers) for ph in self.phases)
        return (
            f"HaloExchange(method={self.method!r}, pattern={self.pattern!r}, messages={n}, "
            f"bytes={self.bytes_sent}, staged={self._staged})"
        )
