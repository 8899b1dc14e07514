"""A progress bar on rank 0, fed by every rank without a collective per update.

:class:`Progress` draws one tqdm bar on rank 0 (rate, ETA, the domain's unit: paths,
scenarios, vectors, steps). Work is reported two ways:

- :meth:`Progress.update`: rank 0 adds units itself (a time-stepping loop every rank runs in
  step, such as a solver's steps);
- :meth:`Progress.phase`: a part of the run worth ``units``, during which every
  :func:`hpc.run.map_blocks` call reports its finished blocks. With the ``mpi`` executor each
  rank sends its running count to rank 0 by non-blocking point-to-point messages (at most one
  every :data:`SEND_INTERVAL` seconds, and one final), which rank 0 collects whenever it
  finishes a batch of its own; no rank waits for another until the call's end.

The bar is off (every method a no-op) when rank 0's stdout is not a terminal, or with
``enabled=False`` (the command line's ``--quiet``). Rank 0 decides and tells the others once,
when the bar is made (the only collective). It is drawn on stderr when that is a terminal,
else on stdout (``mpirun`` forwards a rank's stdout through a terminal, stderr through a
pipe).

Examples
--------
>>> with Progress(total=2 * paths, unit="paths", comm=comm) as bar:
...     for option in book:
...         with bar.phase(paths):
...             price(model, option, paths=paths, executor="mpi")   # map_blocks inside
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

__all__ = ["Progress", "Phase", "BlockCounter", "active_phase", "SEND_INTERVAL"]

SEND_INTERVAL = 0.2  # seconds between a rank's progress messages (bounds the traffic)
_TAG = 0x6870  # point-to-point tag of progress messages ("hp")
_PHASE: contextvars.ContextVar[Phase | None] = contextvars.ContextVar(
    "hpc_progress_phase", default=None
)


def active_phase() -> Phase | None:
    """Local. The phase of the innermost ``with progress.phase(...)`` block, or None."""
    return _PHASE.get()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def terminal() -> bool:
    """Local. Whether stdout is a terminal (the bar shows only then)."""
    return _isatty(sys.stdout)


def _bar_stream() -> IO[str]:
    """stderr when it is a terminal, else stdout (under ``mpirun`` only stdout is one)."""
    return sys.stderr if _isatty(sys.stderr) else sys.stdout


def _terminal_width(stream: IO[str]) -> int:
    """Columns of ``stream``'s terminal; 0 when it reports no size (rows or columns)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return 0
    return size.columns if size.lines > 0 else 0


class Progress:
    """Collective over ``comm``. A progress bar of ``total`` units, drawn on rank 0.

    Parameters
    ----------
    total : float
        Units of the whole run (None: unknown, no ETA).
    unit : str
        What a unit is ("paths", "scenarios", "vectors", "steps").
    comm : MPI.Comm, optional
        Default :func:`hpc.comm.world`. Pass the communicator the work runs on.
    enabled : bool, optional
        False: no bar (``--quiet``). None or True: a bar when rank 0's stdout is a terminal.
    desc : str, optional
        Label in front of the bar.
    file : file object, optional
        Where rank 0 draws the bar (default stderr, or stdout when only that is a terminal).
        Giving one draws the bar even when it is not a terminal (tests).
    """

    def __init__(
        self,
        total: float | None,
        unit: str,
        comm: Any = None,
        enabled: bool | None = None,
        desc: str | None = None,
        file: IO[str] | None = None,
    ) -> None:
        from .collectives import bcast_object
        from .comm import resolve_comm

        self.comm = resolve_comm(comm)
        self.rank = self.comm.Get_rank()
        self.unit = unit
        self.total = total
        want = enabled is not False and (file is not None or terminal())
        self.enabled: bool = bool(bcast_object(want if self.rank == 0 else None, 0, self.comm))
        self._bar: Any = None
        self._done = 0.0  # units counted by rank 0 (phases and updates)
        self._token: contextvars.Token[Phase | None] | None = None
        if self.enabled and self.rank == 0:
            from tqdm import tqdm

            # a terminal reporting no width (a batch system's pty) would get an empty bar
            stream = file if file is not None else _bar_stream()
            sized = file is None and _terminal_width(stream) > 0
            self._bar = tqdm(
                total=total,
                unit=f" {unit}",
                unit_scale=True,
                desc=desc,
                file=stream,
                dynamic_ncols=sized,
                ncols=None if sized or file is not None else 100,
                nrows=None if sized else 24,
                smoothing=0.1,
            )

    @property
    def n(self) -> float:
        """Local. Units counted so far (rank 0; 0 elsewhere)."""
        return self._done

    def update(self, units: float) -> None:
        """Local. Add ``units`` of finished work (counted on rank 0 only)."""
        if self.rank == 0:
            self._set(self._done + units)

    def _set(self, done: float) -> None:
        self._done = done
        if self._bar is not None:
            self._bar.update(done - self._bar.n)

    def set_rate(self, **figures: float) -> None:
        """Local. Show figures beside the bar (for example ``MLUPS=812.5``); rank 0 only."""
        if self._bar is not None:
            self._bar.set_postfix({k: f"{v:.4g}" for k, v in figures.items()}, refresh=False)

    def write(self, text: str) -> None:
        """Local. Print a line on rank 0 without breaking the bar."""
        if self.rank != 0:
            return
        if self._bar is not None:
            self._bar.write(text, file=sys.stdout)
        else:
            print(text, flush=True)

    @contextlib.contextmanager
    def phase(self, units: float) -> Iterator[Phase]:
        """Local. A part of the run worth ``units``: :func:`hpc.run.map_blocks` calls inside
        report into it (the n-th of ``k`` blocks is ``units / nblocks``). On leaving it the
        bar stands at the phase's end."""
        phase = Phase(self, float(units), self._done)
        token = _PHASE.set(phase)
        try:
            yield phase
        finally:
            _PHASE.reset(token)
        if self.rank == 0:
            self._set(phase.start + phase.units)

    def close(self) -> None:
        """Local. Finish the bar (rank 0)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Phase:
    """A part of a :class:`Progress` run worth ``units`` (see :meth:`Progress.phase`)."""

    def __init__(self, progress: Progress, units: float, start: float) -> None:
        self.progress = progress
        self.units = units
        self.start = start
        self.counters: list[BlockCounter] = []  # one per map_blocks call (tests read them)

    def counter(self, nblocks: int, comm: Any = None, remote: bool = False) -> BlockCounter:
        """Local (collective in use when ``remote``). A counter of finished blocks out of
        ``nblocks`` for one map_blocks call; ``remote``: every rank of ``comm`` counts its own
        and rank 0 sums them (the ``mpi`` executor)."""
        counter = BlockCounter(self, nblocks, comm, remote)
        self.counters.append(counter)
        return counter

    def _show(self, blocks: float, nblocks: int) -> None:
        if nblocks > 0:
            self.progress._set(self.start + self.units * min(1.0, blocks / nblocks))


class BlockCounter:
    """Finished blocks of one :func:`hpc.run.map_blocks` call, summed on rank 0.

    With ``remote``, ranks other than 0 ``Isend`` their running count to rank 0 (throttled)
    and a final one from :meth:`close`; rank 0 receives whatever has arrived each time it
    counts, and in :meth:`close` waits for every rank's final count, so no message outlives
    the call. Every rank must call :meth:`close` (also after an error in its work).
    """

    def __init__(self, phase: Phase, nblocks: int, comm: Any, remote: bool) -> None:
        self.phase = phase
        self.nblocks = int(nblocks)
        self.enabled = phase.progress.enabled
        self.remote = bool(remote and comm is not None and comm.Get_size() > 1 and self.enabled)
        self.comm = comm
        self.rank = comm.Get_rank() if comm is not None else 0
        self.mine = 0
        self.initial = 0
        self._others: dict[int, int] = {}
        self._finals: set[int] = set()
        self._sends: list[tuple[Any, np.ndarray]] = []
        self._last_send = 0.0

    def resumed(self, blocks: int) -> None:
        """Local. Blocks taken from a journal: counted once, by rank 0."""
        self.initial = int(blocks)
        self._refresh()

    def add(self, blocks: int) -> None:
        """Local. This rank finished ``blocks`` more blocks."""
        self.mine += int(blocks)
        if not self.enabled:
            return
        if self.rank == 0:
            self._refresh()
        elif self.remote and time.monotonic() - self._last_send >= SEND_INTERVAL:
            self._send(final=False)

    def _send(self, final: bool) -> None:
        buf = np.array([self.mine, int(final)], dtype=np.int64)
        self._sends.append((self.comm.Isend(buf, dest=0, tag=_TAG), buf))
        self._last_send = time.monotonic()
        # completed sends are dropped so the list stays short
        self._sends = [(r, b) for r, b in self._sends if not r.Test()]

    def _poll(self, block: bool) -> set[int]:
        """Rank 0: receive the counts that arrived (``block``: until every final one)."""
        from mpi4py import MPI

        finals = self._finals  # kept across polls: a final count may arrive in an early one
        status = MPI.Status()
        buf = np.empty(2, dtype=np.int64)
        waiting = set(range(1, self.comm.Get_size())) if block else set()
        while True:
            if not self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=_TAG, status=status):
                if not waiting - finals:
                    return finals
                self.comm.Probe(source=MPI.ANY_SOURCE, tag=_TAG, status=status)
            src = status.Get_source()
            self.comm.Recv(buf, source=src, tag=_TAG)
            self._others[src] = max(self._others.get(src, 0), int(buf[0]))
            if buf[1]:
                finals.add(src)

    def _refresh(self) -> None:
        if self.rank != 0 or not self.enabled:
            return
        if self.remote:
            self._poll(block=False)
        total = self.initial + self.mine + sum(self._others.values())
        self.phase._show(total, self.nblocks)

    def close(self) -> None:
        """Local, but with ``remote`` every rank of the communicator must call it: the others
        send their final count, rank 0 receives them all."""
        if not self.remote:
            self._refresh()
            return
        if self.rank == 0:
            self._poll(block=True)
            self._refresh()
        else:
            self._send(final=True)
            for request, _ in self._sends:
                request.Wait()
            self._sends = []

    @property
    def received(self) -> dict[int, int]:
        """Rank 0: the last count each other rank reported (tests)."""
        return dict(self._others)
