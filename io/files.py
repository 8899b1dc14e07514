"""Opening HDF5 files collectively: parallel (``driver="mpio"``) or serial, one switch.

``HPC_IO_MODE=auto`` (default) uses MPI-IO when h5py was built with MPI and the communicator has
more than one rank; one rank opens files serially. ``serial`` makes the array and table
functions gather to rank 0 (and scatter from it) instead, for an h5py without MPI.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import h5py

from hpc.comm import abort_unless_agreed, resolve_comm
from hpc.config import settings

from . import faults
from .errors import StorageError, StorageFullError, from_os_error

__all__ = [
    "open_file",
    "parallel_available",
    "io_mode",
    "collective_xfer",
    "Target",
    "as_target",
    "agree",
]


def parallel_available() -> bool:
    """True when h5py was built against parallel HDF5 (``h5py.get_config().mpi``)."""
    return bool(h5py.get_config().mpi)


def io_mode(comm: Any) -> str:
    """``mpio`` (every rank does its own I/O), ``single`` (one rank, serial) or ``gather``
    (several ranks, rank 0 does the I/O)."""
    if comm.Get_size() == 1:
        return "single"
    wanted = settings().io_mode
    if wanted == "serial":
        return "gather"
    if parallel_available():
        return "mpio"
    if wanted == "mpio":
        raise StorageError("HPC_IO_MODE=mpio was asked for, but h5py was built without MPI")
    return "gather"


def open_file(path: str | os.PathLike[str], mode: str = "r", comm: Any = None) -> h5py.File:
    """Collective. Open an HDF5 file on every rank of ``comm``.

    Parallel (MPI-IO) when h5py has MPI and ``comm`` has more than one rank, serial otherwise;
    the caller does not branch on it. Every metadata operation on the returned file (creating
    datasets or groups, attributes, closing) must then be made by all ranks alike.

    Raises
    ------
    StorageError
        If the file cannot be opened (the message names it), or several ranks ask for a file
        with an h5py that has no MPI (use the path-taking functions of :mod:`hpc.io`, which
        gather through rank 0, instead).
    """
    comm = resolve_comm(comm)
    kind = io_mode(comm)
    if kind == "gather":
        raise StorageError(
            "open_file on several ranks needs h5py built with MPI; pass the path to "
            "write_array/read_array/write_table/read_table instead (they gather via rank 0)",
            path=str(path),
        )
    try:
        if kind == "mpio":
            return h5py.File(path, mode, driver="mpio", comm=comm)
        return h5py.File(path, mode)
    except OSError as exc:
        raise from_os_error(exc, f"opening with mode {mode!r}", path) from exc


def collective_xfer() -> Any:
    """A dataset-transfer property list for collective MPI-IO."""
    from h5py import h5fd, h5p

    dxpl = h5p.create(h5p.DATASET_XFER)
    dxpl.set_dxpl_mpio(h5fd.MPIO_COLLECTIVE)
    return dxpl


def as_target(where: Any, mode: str, comm: Any, reserve: int = 0) -> Any:
    """A context manager giving a :class:`Target` for ``where`` (reused when it is one)."""
    if isinstance(where, Target):
        return contextlib.nullcontext(where)
    return Target(where, mode, comm, reserve)


class Target:
    """Collective. A path or an open group to read or write, opened as needed and closed after.

    With a path, the file is opened (parallel, serial, or on rank 0 only in gather mode) and
    closed on exit; with an h5py group, that group is used as it is.
    """

    def __init__(self, where: Any, mode: str, comm: Any, reserve: int = 0) -> None:
        self.comm = resolve_comm(comm)
        self.reserve = int(reserve)  # bytes about to be written: checked free before opening
        self.owned = not isinstance(where, h5py.Group)
        if self.owned:
            self.path = str(Path(where))
            self.kind = io_mode(self.comm)
        else:
            self.path = where.file.filename
            driver = where.file.driver
            self.kind = "mpio" if driver == "mpio" else "single"
            if self.kind == "single" and self.comm.Get_size() > 1:
                self.kind = "gather"  # a serial file held by rank 0 alone
        self.mode = mode
        self._where = where
        self.group: h5py.Group | None = None

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    @property
    def does_io(self) -> bool:
        """True on the ranks that touch the file."""
        return self.kind != "gather" or self.rank == 0

    def __enter__(self) -> Target:
        """Open the file on the ranks doing I/O. Failures (no space for ``reserve`` bytes, a
        read-only or forbidden path, a damaged file) are agreed: every rank raises the same
        :class:`StorageError` before any collective transfer starts."""
        if not self.owned:
            self.group = self._where if self.does_io else None
            return self
        error: StorageError | None = None
        if self.mode != "r" and self.rank == 0:  # agreed before the (collective) open
            operation = "opening for writing"
            try:
                _probe_writable(Path(self.path), self.rank)
                if self.reserve:
                    operation = "checking free space"
                    _check_space(Path(self.path), self.reserve, self.rank)
            except StorageError as exc:
                error = exc
            except OSError as exc:
                error = from_os_error(exc, operation, self.path)
        error = agree(self.comm, error)
        if error:
            raise error
        if self.does_io:
            try:
                if self.kind == "mpio":
                    self.group = h5py.File(self.path, self.mode, driver="mpio", comm=self.comm)
                else:
                    self.group = h5py.File(self.path, self.mode)
            except OSError as exc:
                error = from_os_error(exc, f"opening with mode {self.mode!r}", self.path)
        error = agree(self.comm, error)
        if error:
            if self.group is not None:
                self.group.close()
                self.group = None
            raise error
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        """Close the file. An exception that not every rank raised (inside a collective
        transfer) ends the job (:func:`hpc.comm.abort_job`): the others would wait forever."""
        what = f"collective I/O on {self.path!r}"
        abort_unless_agreed(self.comm, what, exc)  # before closing: closing is collective too
        if self.owned and self.group is not None:
            group, self.group = self.group, None
            try:
                group.close()
            except OSError as close_exc:
                if exc is None:
                    failure = from_os_error(close_exc, "closing", self.path)
                    abort_unless_agreed(self.comm, what, failure)
                    raise failure from close_exc
        return False


def first_error(comm: Any, error: Any) -> Any:
    """Collective. The first error (a message or an exception) any rank saw: all ranks learn it,
    so all raise together."""
    if comm.Get_size() == 1:
        return error
    return next((e for e in comm.allgather(error) if e), None)


def agree(comm: Any, error: StorageError | None) -> StorageError | None:
    """Collective. :func:`first_error` of exceptions, marked as raised by all (``all_ranks``)."""
    error = first_error(comm, error)
    if error is not None:
        error.all_ranks = True
    return error


def _probe_writable(path: Path, rank: int) -> None:
    """Open ``path`` for writing as HDF5 is about to (a read-only file system, a forbidden
    directory or file raise here, on one rank, before the collective open); a file that did not
    exist is removed again."""
    faults.inject("open", path, rank)
    existed = path.exists()
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
    if not existed:
        path.unlink()


def _check_space(path: Path, nbytes: int, rank: int) -> None:
    """Raise ``StorageFullError`` when the file system of ``path`` lacks ``nbytes`` (plus 1%
    and 1 MiB for HDF5's metadata and checksums)."""
    faults.inject("space", path, rank)
    need = int(nbytes * 1.01) + (1 << 20)
    stat = os.statvfs(path.parent if path.parent.exists() else Path.cwd())
    free = stat.f_bavail * stat.f_frsize
    if free < need:
        raise StorageFullError(
            f"no space for the write: {need:,} bytes needed, {free:,} free", path=str(path)
        )
