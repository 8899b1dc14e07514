"""Sequence databases read in batches: lists in memory, FASTA/FASTQ files, HDF5 sequence stores.

A search never holds more of a database than one batch (plus the few target sequences of its
hits), so a database larger than memory can be searched. Every source knows its size (records
and residues: the E-values need them before the first batch is scored), yields its records in
batches of consecutive global indices, and fetches given records again for the tracebacks.

The HDF5 sequence store (:func:`write_store`, ``hpc align store``) keeps the letters as written
(ASCII, upper case) in one flat dataset with an offsets dataset and the names, so a batch is two
slices, and any scoring can encode them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["Database", "open_database", "write_store", "STORE_GROUP"]

STORE_GROUP = "sequences"  # the store's group; its attribute hpc_sequence_store marks it
_STORE_VERSION = 1


class Database:
    """Local. A database of named sequences, read in batches.

    Attributes
    ----------
    count : int
        Number of sequences.
    residues : int
        Total letters (BLAST's database length).
    """

    count: int
    residues: int
    label: str = "target"  # names the source in error messages (the file, for files)

    def batches(self, size: int) -> Iterator[tuple[int, list[str], list[Any]]]:
        """Consecutive batches of ``size`` records: ``(first global index, names, sequences)``."""
        raise NotImplementedError

    def fetch(self, indices: np.ndarray) -> dict[int, tuple[str, Any]]:
        """The records of ``indices`` (global), as ``{index: (name, sequence)}``."""
        raise NotImplementedError

    def read(self, first: int, count: int) -> tuple[list[str], list[Any]]:
        """Local. Names and sequences of records ``first .. first + count - 1`` (fewer at the
        end). Reads in increasing ``first``, as a rank's batches come, cost one pass over a
        FASTA file (:class:`_Fasta` keeps a forward cursor)."""
        found = self.fetch(np.arange(first, min(first + count, self.count)))
        return [found[k][0] for k in sorted(found)], [found[k][1] for k in sorted(found)]

    def close(self) -> None:
        """Local. Release what :meth:`read` keeps open (a FASTA file's cursor)."""

    def lengths_of(self, indices: np.ndarray) -> np.ndarray:
        """Lengths of the records of ``indices``."""
        found = self.fetch(indices)
        return np.array([len(found[int(i)][1]) for i in indices], dtype=np.int64)


class _Memory(Database):
    def __init__(self, seqs: Sequence[Any], names: Sequence[str] | None) -> None:
        self.seqs = seqs
        self.names = list(names) if names is not None else [str(k) for k in range(len(seqs))]
        if len(self.names) != len(seqs):
            raise ValueError(f"{len(self.names)} target names for {len(seqs)} targets")
        self.count = len(seqs)
        self.residues = int(sum(len(s) for s in seqs))

    def batches(self, size: int) -> Iterator[tuple[int, list[str], list[Any]]]:
        for first in range(0, self.count, size):
            yield first, self.names[first : first + size], list(self.seqs[first : first + size])

    def fetch(self, indices: np.ndarray) -> dict[int, tuple[str, Any]]:
        return {int(i): (self.names[int(i)], self.seqs[int(i)]) for i in np.unique(indices)}

    def read(self, first: int, count: int) -> tuple[list[str], list[Any]]:
        return self.names[first : first + count], list(self.seqs[first : first + count])


class _Fasta(Database):
    """A FASTA/FASTQ file, streamed: one pass counts it, each search pass reads it again."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from .seqio import read_sequences

        self.path = self.label = str(path)
        count = residues = 0
        for rec in read_sequences(self.path):
            count += 1
            residues += len(rec.sequence)
        self.count, self.residues = count, residues
        self._cursor: tuple[int, Iterator[tuple[str, str]]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # an open generator does not pickle (Dask tasks): a copy starts a new pass
        return {**self.__dict__, "_cursor": None}

    def read(self, first: int, count: int) -> tuple[list[str], list[Any]]:
        at, records = self._cursor if self._cursor is not None else (0, self._records())
        if first < at:  # behind the cursor: a new pass from the start
            at, records = 0, self._records()
        names: list[str] = []
        seqs: list[str] = []
        for name, seq in records:
            at += 1
            if at > first:
                names.append(name)
                seqs.append(seq)
                if len(names) == count:
                    break
        self._cursor = (at, records)
        return names, seqs

    def close(self) -> None:
        self._cursor = None

    def _records(self) -> Iterator[tuple[str, str]]:
        from .seqio import read_sequences

        for rec in read_sequences(self.path):
            yield rec.name, rec.sequence

    def batches(self, size: int) -> Iterator[tuple[int, list[str], list[Any]]]:
        names: list[str] = []
        seqs: list[str] = []
        first = 0
        for name, seq in self._records():
            names.append(name)
            seqs.append(seq)
            if len(names) == size:
                yield first, names, seqs
                first += size
                names, seqs = [], []
        if names:
            yield first, names, seqs

    def fetch(self, indices: np.ndarray) -> dict[int, tuple[str, Any]]:
        wanted = {int(i) for i in indices}
        out: dict[int, tuple[str, Any]] = {}
        if not wanted:
            return out
        last = max(wanted)
        for k, (name, seq) in enumerate(self._records()):
            if k in wanted:
                out[k] = (name, seq)
            if k >= last:
                break
        return out


class _Store(Database):
    """An HDF5 sequence store (:func:`write_store`): batches and records are slices."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from hpc.io import MissingDataError, open_file

        from hpc.comm import self_comm

        self.path = self.label = str(path)
        with open_file(self.path, "r", comm=self_comm()) as f:
            group = f.get(STORE_GROUP)
            if group is None or "hpc_sequence_store" not in group.attrs:
                raise MissingDataError(
                    f"no sequence store (group {STORE_GROUP!r}) in the file; write one with "
                    "'hpc align store'",
                    path=self.path,
                )
            self.count = int(group.attrs["count"])
            self.residues = int(group.attrs["residues"])

    def _read(self, group: Any, first: int, stop: int) -> tuple[list[str], list[str]]:
        off = np.asarray(group["offsets"][first : stop + 1], dtype=np.int64)
        letters = np.asarray(group["residues"][int(off[0]) : int(off[-1])], dtype=np.uint8)
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in group["names"][first:stop]]
        raw = letters.tobytes().decode("ascii")
        rel = off - off[0]
        return names, [raw[int(a) : int(b)] for a, b in zip(rel[:-1], rel[1:], strict=True)]

    def _open(self) -> Any:
        from hpc.io import open_file

        from hpc.comm import self_comm

        return open_file(self.path, "r", comm=self_comm())

    def batches(self, size: int) -> Iterator[tuple[int, list[str], list[Any]]]:
        with self._open() as f:
            for first in range(0, self.count, size):
                names, seqs = self._read(f[STORE_GROUP], first, min(first + size, self.count))
                yield first, names, seqs

    def read(self, first: int, count: int) -> tuple[list[str], list[Any]]:
        with self._open() as f:
            return self._read(f[STORE_GROUP], first, min(first + count, self.count))

    def fetch(self, indices: np.ndarray) -> dict[int, tuple[str, Any]]:
        out: dict[int, tuple[str, Any]] = {}
        with self._open() as f:
            for i in np.unique(np.asarray(indices, dtype=np.int64)):
                names, seqs = self._read(f[STORE_GROUP], int(i), int(i) + 1)
                out[int(i)] = (names[0], seqs[0])
        return out


def _is_hdf5(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(8) == b"\x89HDF\r\n\x1a\n"


def open_database(targets: Any, names: Sequence[str] | None = None) -> Database:
    """Local. A :class:`Database` of ``targets``: a list of sequences (``names`` optional), a
    FASTA/FASTQ path (plain or gzip), an HDF5 sequence store's path, or a Database.

    Raises
    ------
    OSError
        If a path cannot be read.
    """
    if isinstance(targets, Database):
        return targets
    if isinstance(targets, (str, os.PathLike)):
        path = os.fspath(targets)
        return _Store(path) if _is_hdf5(path) else _Fasta(path)
    return _Memory(targets, names)


def write_store(
    path: str | os.PathLike[str],
    records: Any,
    comm: Any = None,
    chunk: int = 1 << 20,
    before_commit: Callable[[Any, int, int], None] | None = None,
) -> tuple[int, int]:
    """Collective (rank 0 writes). Write sequences as an HDF5 sequence store.

    Parameters
    ----------
    path : str or path
        The store; it appears whole or not at all (:func:`hpc.io.atomic_output`).
    records : path or iterable
        A FASTA/FASTQ path (streamed: the store may be larger than memory), or
        ``(name, sequence)`` pairs or :class:`~hpc.domains.align.seqio.Record` objects.
    chunk : int
        Letters buffered before each append.
    before_commit : callable, optional
        Collective. ``before_commit(tmp, count, residues)`` on every rank once the store is
        written to the temporary ``tmp`` and before it is renamed into place (the command
        line adds its run record there, so the file appears with it).

    Returns
    -------
    (int, int)
        Sequences and residues written (on every rank).

    Raises
    ------
    ValueError
        On every rank: a malformed FASTA/FASTQ file, a sequence with a letter that is not
        ASCII.
    OSError
        On every rank: a file that cannot be read or written.
    """
    from hpc.io import atomic_output

    from hpc.collectives import bcast_object
    from hpc.comm import resolve_comm

    comm = resolve_comm(comm)
    result: Any = None
    with atomic_output(path, comm) as tmp:
        if comm.Get_rank() == 0:
            try:
                result = _write_store(tmp, records, chunk)
            except (ValueError, OSError) as exc:  # the other ranks must learn of it
                result = (isinstance(exc, OSError), str(exc))
        result = bcast_object(result, 0, comm)
        if isinstance(result[0], bool):
            from hpc.errors import on_all_ranks

            raise on_all_ranks((OSError if result[0] else ValueError)(result[1]))
        if before_commit is not None:
            before_commit(tmp, int(result[0]), int(result[1]))
    return int(result[0]), int(result[1])


def _write_store(tmp: Any, records: Any, chunk: int) -> tuple[int, int]:
    """Rank 0's part of :func:`write_store`: stream the records into the new file."""
    from hpc.io import open_file

    from hpc.comm import self_comm

    from .seqio import Record, read_sequences

    source = read_sequences(records) if isinstance(records, (str, os.PathLike)) else records
    with open_file(tmp, "w", comm=self_comm()) as f:
        g = f.create_group(STORE_GROUP)
        res = g.create_dataset("residues", (0,), np.uint8, maxshape=(None,),
                               chunks=(min(chunk, 1 << 20),))  # fmt: skip
        offs = g.create_dataset("offsets", (1,), np.int64, maxshape=(None,),
                                chunks=(1 << 16,), data=[0])  # fmt: skip
        nms = g.create_dataset("names", (0,), dtype=_string_dtype(), maxshape=(None,),
                               chunks=(1 << 14,))  # fmt: skip
        buf: list[bytes] = []
        bnames: list[str] = []
        count = residues = 0

        def flush() -> None:
            nonlocal residues
            if not bnames:
                return
            lengths = np.array([len(b) for b in buf], dtype=np.int64)
            data = np.frombuffer(b"".join(buf), dtype=np.uint8)
            n0, r0 = nms.shape[0], res.shape[0]
            res.resize((r0 + data.size,))
            res[r0:] = data
            offs.resize((n0 + 1 + lengths.size,))
            offs[n0 + 1 :] = r0 + np.cumsum(lengths)
            nms.resize((n0 + len(bnames),))
            nms[n0:] = bnames
            residues += int(data.size)
            buf.clear()
            bnames.clear()

        pending = 0
        for rec in source:
            name, seq = (rec.name, rec.sequence) if isinstance(rec, Record) else rec
            text = seq if isinstance(seq, str) else bytes(seq).decode("ascii")
            if not text.isascii():
                raise ValueError(f"sequence {name!r}: letters must be ASCII")
            buf.append(text.upper().encode("ascii"))
            bnames.append(str(name))
            count += 1
            pending += len(text)
            if pending >= chunk:
                flush()
                pending = 0
        flush()
        g.attrs["hpc_sequence_store"] = _STORE_VERSION
        g.attrs["count"] = count
        g.attrs["residues"] = residues
        return count, residues


def _string_dtype() -> Any:
    import h5py

    return h5py.string_dtype("utf-8")
