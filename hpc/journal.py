"""Journals of finished blocks: batch jobs that resume after SIGKILL, on any rank count.

A :class:`Journal` is a directory. ``key.json`` holds the caller's key (the arguments the
results depend on, plus the library version); every finished batch of blocks is one *segment*
file, written to a temporary, flushed and renamed into place by the rank that computed it, so
a segment is either whole or absent whatever moment the job is killed at. A rerun with the same
key reads the segments and computes only the blocks none of them holds; since a block's rows
depend on its number alone (the contract of :func:`hpc.run.map_blocks`), the result is bitwise
the one of an uninterrupted run, on any rank count or executor.

Layout of ``DIR``::

    key.json                          {"key": {...}, "format": "hpc-journal/1"}
    s0000-b000000000000-n8.seg        stage 0 (the first map_blocks call), blocks 0..7
    s0000-b000000000008-n8.seg        ...
    s0001-b000000000000-n16.seg       stage 1 (the second call)

A segment is ``MAGIC``, a 4-byte little-endian header length, a JSON header (stage, blocks,
width, SHA-256 of the payload) and the rows as little-endian float64.

Examples
--------
>>> with Journal("run.journal", key={"seed": 1, "paths": 10**6}) as journal:
...     rows = map_blocks(fn, nblocks, width, executor="mpi")   # journaled as stage 0
...     write_output(rows)
... # leaving the block without an error removes the journal
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import HPCError

__all__ = [
    "Journal",
    "JournalError",
    "JournalMismatchError",
    "CorruptJournalError",
    "active_journal",
    "remove_stale_temporaries",
    "Snapshot",
]

FORMAT = "hpc-journal/1"
MAGIC = b"HPCJSEG1"
STATE_MAGIC = b"HPCJSTA1"
_KEY = "key.json"
_ACTIVE: contextvars.ContextVar[Journal | None] = contextvars.ContextVar(
    "hpc_journal", default=None
)


class JournalError(HPCError, ValueError):
    """A journal cannot be used: see the subclasses."""


class JournalMismatchError(JournalError):
    """The journal was written for other arguments (its key differs from this run's)."""


class CorruptJournalError(JournalError):
    """A journal file is damaged or does not belong to the journal (names the file)."""


def active_journal() -> Journal | None:
    """Local. The journal of the innermost ``with Journal(...)`` block, or None."""
    return _ACTIVE.get()


def _version() -> str:
    import hpc

    return str(hpc.__version__)


def _canonical(key: Mapping[str, Any]) -> dict[str, Any]:
    """The key as JSON gives it back (tuples become lists), so stored and given keys compare."""
    try:
        return dict(json.loads(json.dumps(dict(key), sort_keys=True)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"journal key: not JSON-serialisable ({exc})") from None


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def key_difference(stored: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """Local. One line per entry where two keys differ: ``name: X here, Y in the journal``."""
    a, b = _flatten(dict(given)), _flatten(dict(stored))
    lines = []
    for name in sorted(set(a) | set(b)):
        if a.get(name, _MISSING) != b.get(name, _MISSING):
            here = "absent" if name not in a else json.dumps(a[name])
            there = "absent" if name not in b else json.dumps(b[name])
            lines.append(f"{name}: {here} here, {there} in the journal")
    return lines


_MISSING = object()


def _fsync(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(final: Path, data: bytes) -> None:
    """Local. ``data`` under ``final``, whole or not at all (temporary, fsync, rename)."""
    tmp = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync(final.parent, directory=True)


def remove_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Local. Remove the temporaries ``.NAME.tmp-*`` that an interrupted atomic write of
    ``path`` (see :mod:`hpc.io.atomic`) left beside it; return them.

    Call it only where no other process is writing ``path`` (a job resuming its journal).
    """
    final = Path(path)
    found = sorted(final.parent.glob(f".{final.name}.tmp-*")) if final.parent.is_dir() else []
    for tmp in found:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
    return found


@dataclass
class Stage:
    """The journaled state of one :func:`hpc.run.map_blocks` call (see :meth:`Journal.stage`).

    ``done[k]`` says block ``k`` is in the journal; its rows are ``rows[k]``. ``write`` is True
    on the processes that record segments (every rank for the ``mpi`` executor, rank 0 for
    the others).
    """

    journal: Journal
    index: int
    nblocks: int
    width: int
    done: np.ndarray
    rows: np.ndarray
    write: bool = True

    @property
    def resumed_blocks(self) -> int:
        """How many blocks came from the journal."""
        return int(self.done.sum())

    def batches(self, batch: int) -> list[tuple[int, int]]:
        """Local. ``(first, count)`` batches of at most ``batch`` blocks covering exactly the
        blocks not in the journal, in block order."""
        out: list[tuple[int, int]] = []
        missing = np.flatnonzero(~self.done)
        if missing.size == 0:
            return out
        # runs of consecutive missing blocks, each cut into batches
        cuts = np.flatnonzero(np.diff(missing) != 1) + 1
        for run in np.split(missing, cuts):
            lo, hi = int(run[0]), int(run[-1]) + 1
            out.extend((b, min(batch, hi - b)) for b in range(lo, hi, batch))
        return out

    def record(self, first: int, rows: np.ndarray) -> None:
        """Local. Make blocks ``first .. first + len(rows) - 1`` durable as one segment."""
        if not self.write:
            return
        rows = np.ascontiguousarray(rows, dtype="<f8")
        count = int(rows.shape[0])
        payload = rows.tobytes()
        header = json.dumps(
            {
                "format": FORMAT,
                "stage": self.index,
                "first": int(first),
                "count": count,
                "nblocks": self.nblocks,
                "width": self.width,
                "sha256": hashlib.sha256(payload).hexdigest(),
            },
            sort_keys=True,
        ).encode()
        data = MAGIC + len(header).to_bytes(4, "little") + header + payload
        _write_durably(self.journal.path / _segment_name(self.index, first, count), data)


def _segment_name(stage: int, first: int, count: int) -> str:
    return f"s{stage:04d}-b{first:012d}-n{count}.seg"


def _read_segment(path: Path) -> tuple[dict[str, Any], np.ndarray]:
    """Local. A segment's header and rows; :class:`CorruptJournalError` naming the file when
    it is truncated, not a segment, or fails its checksum."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorruptJournalError(f"journal segment {str(path)!r}: cannot read ({exc})") from None
    bad = f"journal segment {str(path)!r}"
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        raise CorruptJournalError(f"{bad}: not a journal segment (no {MAGIC!r} signature)")
    n = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "little")
    start = len(MAGIC) + 4
    try:
        header = json.loads(data[start : start + n])
        count, width = int(header["count"]), int(header["width"])
    except (ValueError, KeyError, TypeError):
        raise CorruptJournalError(f"{bad}: damaged header") from None
    payload = data[start + n :]
    if len(payload) != count * width * 8:
        raise CorruptJournalError(
            f"{bad}: {len(payload)} bytes of rows, the header declares {count} x {width} float64"
        )
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise CorruptJournalError(f"{bad}: checksum mismatch (the file was altered or damaged)")
    return header, np.frombuffer(payload, dtype="<f8").reshape(count, width)


class Snapshot:
    """Local. The latest state of an iterative computation in a journal (see
    :meth:`Journal.snapshot`): k-means centroids after iteration ``step``, say.

    :meth:`save` replaces one file atomically (temporary, fsync, rename), so a kill leaves
    the previous state or the new one. An iteration that depends only on its state then
    resumes bitwise: load ``(step, arrays)``, continue from iteration ``step``.
    """

    def __init__(self, journal: Journal, index: int, label: str, meta: dict[str, Any]) -> None:
        self.journal = journal
        self.index = index
        self.label = label
        self.meta = meta
        self.path = journal.path / f"state{index:04d}-{label}.state"

    def load(self) -> tuple[int, dict[str, np.ndarray]] | None:
        """The saved ``(step, arrays)``, or None when nothing was saved yet.

        Raises
        ------
        JournalMismatchError
            The state was saved by a computation with other ``meta`` (sizes, parameters).
        CorruptJournalError
            The file is damaged (names it).
        """
        if not self.path.exists():
            return None
        bad = f"journal state {str(self.path)!r}"
        data = self.path.read_bytes()
        if not data.startswith(STATE_MAGIC) or len(data) < len(STATE_MAGIC) + 4:
            raise CorruptJournalError(f"{bad}: not a journal state (no signature)")
        start = len(STATE_MAGIC) + 4
        n = int.from_bytes(data[len(STATE_MAGIC) : start], "little")
        try:
            header = json.loads(data[start : start + n])
            specs, step = header["arrays"], int(header["step"])
        except (ValueError, KeyError, TypeError):
            raise CorruptJournalError(f"{bad}: damaged header") from None
        payload = data[start + n :]
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise CorruptJournalError(f"{bad}: checksum mismatch (the file was altered or damaged)")
        if header.get("meta") != self.meta:
            diff = key_difference(header.get("meta") or {}, self.meta)
            raise JournalMismatchError(f"{bad} was saved for other parameters: " + "; ".join(diff))
        arrays, offset = {}, 0
        for name, dtype, shape in specs:
            size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            arrays[name] = np.frombuffer(payload[offset : offset + size], dtype=dtype).reshape(
                shape
            )
            offset += size
        return step, arrays

    def save(self, step: int, arrays: Mapping[str, np.ndarray]) -> None:
        """Make ``arrays`` (the state after iteration ``step``) durable, replacing the last.
        Rank 0 of the journal's communicator writes; where several ranks iterate alike (the
        same state everywhere), the others' calls do nothing."""
        if self.journal.comm.Get_rank() != 0:
            return
        parts, specs = [], []
        for name, a in arrays.items():
            a = np.ascontiguousarray(a)
            le = a.dtype.newbyteorder("<") if a.dtype.byteorder not in "|=" else a.dtype
            a = a.astype(le, copy=False)
            specs.append((name, a.dtype.str, list(a.shape)))
            parts.append(a.tobytes())
        payload = b"".join(parts)
        header = json.dumps(
            {
                "format": FORMAT,
                "label": self.label,
                "step": int(step),
                "meta": self.meta,
                "arrays": specs,
                "sha256": hashlib.sha256(payload).hexdigest(),
            },
            sort_keys=True,
        ).encode()
        _write_durably(
            self.path, STATE_MAGIC + len(header).to_bytes(4, "little") + header + payload
        )


class Journal:
    """Collective over ``comm``. Open the journal directory ``path`` for a run with ``key``:
    created when missing, resumed when it holds the same key, refused otherwise.

    Parameters
    ----------
    path : str or path
        The journal's directory (its parent must exist).
    key : mapping
        JSON-serialisable values the results depend on (the command line's arguments, seed,
        sizes, backend); the library version is added. A journal written with another key is
        refused with :class:`JournalMismatchError` naming every difference.
    comm : MPI.Comm, optional
        The ranks that share the journal (default :func:`hpc.comm.world`); rank 0 creates,
        checks, reads and removes it, every rank writes its own segments.

    Notes
    -----
    Used as a context manager, the journal is *active*: every :func:`hpc.run.map_blocks`
    call inside the block is journaled, the n-th call as stage n (so the calls must come in
    the same order on a rerun, as they do in a deterministic program). Leaving the block
    without an error removes the journal (:meth:`complete`): write the output inside it.
    After an exception the journal stays for the rerun. One journal serves one job at a time.

    Raises
    ------
    JournalMismatchError
        ``path`` is a journal written with another key, or a directory that is no journal.
    CorruptJournalError
        ``key.json`` is damaged.
    """

    def __init__(
        self, path: str | os.PathLike[str], key: Mapping[str, Any], comm: Any = None
    ) -> None:
        from .collectives import bcast_object
        from .comm import resolve_comm

        self.path = Path(path)
        self.comm = resolve_comm(comm)
        self.key = {**_canonical(key), "hpc_version": _version()}
        self._next_stage = 0
        self._next_snapshot = 0
        self._token: contextvars.Token[Journal | None] | None = None
        outcome: tuple[bool, JournalError | OSError | None] = (False, None)
        if self.comm.Get_rank() == 0:
            try:
                outcome = (self._open_or_create(), None)
            except (JournalError, OSError) as exc:
                outcome = (False, exc)
        resumed, error = bcast_object(outcome, 0, self.comm)
        if error is not None:
            error.all_ranks = True  # type: ignore[union-attr]
            raise error
        self.resumed: bool = resumed

    def _open_or_create(self) -> bool:
        """Rank 0: check an existing journal (True) or create a new one (False)."""
        record = {"format": FORMAT, "key": self.key}
        if not self.path.exists():
            if not self.path.parent.is_dir():
                raise JournalError(
                    f"journal {str(self.path)!r}: no such directory {str(self.path.parent)!r}"
                )
            # made under a temporary name and renamed: a directory named like the journal
            # always has its key (and one a killed run was making is removed)
            remove_stale_temporaries(self.path)
            tmp = self.path.with_name(f".{self.path.name}.tmp-{uuid.uuid4().hex[:12]}")
            tmp.mkdir()
            try:
                _write_durably(tmp / _KEY, json.dumps(record, sort_keys=True, indent=1).encode())
                os.rename(tmp, self.path)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            _fsync(self.path.parent, directory=True)
            return False
        if not self.path.is_dir():
            raise JournalError(f"journal {str(self.path)!r}: exists and is not a directory")
        keyfile = self.path / _KEY
        if not keyfile.exists():
            raise JournalMismatchError(
                f"journal {str(self.path)!r}: the directory has no {_KEY}, so it is not a journal"
            )
        try:
            stored = json.loads(keyfile.read_text(encoding="utf-8"))
            if stored.get("format") != FORMAT or not isinstance(stored.get("key"), dict):
                raise ValueError(stored.get("format"))
        except (ValueError, OSError, AttributeError):
            raise CorruptJournalError(f"journal file {str(keyfile)!r}: damaged") from None
        diff = key_difference(stored["key"], self.key)
        if diff:
            raise JournalMismatchError(
                f"journal {str(self.path)!r} was written for other arguments: " + "; ".join(diff)
            )
        # temporaries of segments a killed run was writing: nobody writes them any more
        for tmp in self.path.glob(".*.tmp-*"):
            tmp.unlink(missing_ok=True)
        return True

    # -- stages ---------------------------------------------------------------------------

    def stage(self, nblocks: int, width: int, comm: Any = None, write: bool = True) -> Stage:
        """Collective over ``comm`` (default: the journal's). The next stage's finished blocks.

        Rank 0 reads and checks the stage's segments; every rank receives the same ``done``
        mask and rows. A segment written for another block count or width, or a damaged one,
        raises on every rank (:class:`JournalMismatchError`, :class:`CorruptJournalError`).
        """
        from .collectives import bcast_array, bcast_object

        comm = self.comm if comm is None else comm
        index = self._next_stage
        self._next_stage += 1
        done = np.zeros(nblocks, dtype=bool)
        rows = np.zeros((nblocks, width))
        error: JournalError | None = None
        if comm.Get_rank() == 0:
            try:
                self._load(index, nblocks, width, done, rows)
            except JournalError as exc:
                error = exc
        if comm.Get_size() > 1:
            error = bcast_object(error, 0, comm)
            if error is None:
                done = np.asarray(bcast_array(done, 0, comm), dtype=bool)
                if done.any():  # a fresh stage sends no rows
                    rows = np.asarray(bcast_array(rows, 0, comm))
        if error is not None:
            error.all_ranks = True
            raise error
        return Stage(self, index, nblocks, width, done, rows, write)

    def _load(self, index: int, nblocks: int, width: int, done: np.ndarray, rows: Any) -> None:
        owner: dict[int, Path] = {}
        for seg in sorted(self.path.glob(f"s{index:04d}-*.seg")):
            header, data = _read_segment(seg)
            if header.get("stage") != index:
                raise CorruptJournalError(
                    f"journal segment {str(seg)!r}: its header says stage {header.get('stage')}"
                )
            if (header["nblocks"], header["width"]) != (nblocks, width):
                raise JournalMismatchError(
                    f"journal segment {str(seg)!r}: stage {index} was written with "
                    f"{header['nblocks']} blocks of width {header['width']}, this run has "
                    f"{nblocks} of width {width}"
                )
            first, count = int(header["first"]), int(header["count"])
            if first < 0 or first + count > nblocks:
                raise CorruptJournalError(
                    f"journal segment {str(seg)!r}: blocks {first}..{first + count - 1} lie "
                    f"outside 0..{nblocks - 1}"
                )
            overlap = np.flatnonzero(done[first : first + count])
            if overlap.size:
                other = owner[first + int(overlap[0])]
                raise CorruptJournalError(
                    f"journal segments {str(other)!r} and {str(seg)!r} both hold block "
                    f"{first + int(overlap[0])}"
                )
            done[first : first + count] = True
            rows[first : first + count] = data
            for b in range(first, first + count):
                owner[b] = seg

    def snapshot(self, label: str, meta: Mapping[str, Any] | None = None) -> Snapshot:
        """Local. The next iterative state of the run (numbered in call order like stages):
        ``label`` names it in the file name, ``meta`` (sizes, parameters) is checked when it
        is loaded. Rank 0 saves it (:meth:`Snapshot.save`)."""
        index = self._next_snapshot
        self._next_snapshot += 1
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label)
        return Snapshot(self, index, safe, _canonical(meta or {}))

    # -- lifetime -------------------------------------------------------------------------

    def complete(self) -> None:
        """Collective. The run's output is written: remove the journal (rank 0).

        Segments go first and ``key.json`` last, so a kill half-way leaves a valid journal
        holding fewer blocks (a rerun recomputes them), never a directory without its key.
        """
        from .collectives import barrier

        if self.comm.Get_size() > 1:
            barrier(self.comm)  # every rank has written its segments and finished with them
        if self.comm.Get_rank() == 0 and self.path.is_dir():
            for entry in sorted(self.path.iterdir()):
                if entry.name != _KEY:
                    entry.unlink(missing_ok=True)
            (self.path / _KEY).unlink(missing_ok=True)
            self.path.rmdir()
            _fsync(self.path.parent, directory=True)

    def __enter__(self) -> Journal:
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        if exc_type is None:
            self.complete()

    def __repr__(self) -> str:
        state = "resumed" if self.resumed else "new"
        return f"Journal({str(self.path)!r}, {state}, next stage {self._next_stage})"


def journal_segments(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Local. The segment files of the journal ``path`` (for inspection and tests)."""
    yield from sorted(Path(path).glob("s*.seg"))
