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

from hpc.comm import resolve_comm
from hpc.config import settings

from .errors import StorageError

__all__ = ["open_file", "parallel_available", "io_mode", "collective_xfer", "Target", "as_target"]


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
        raise StorageError(f"cannot open with mode {mode!r}: {exc}", path=str(path)) from exc


def collective_xfer() -> Any:
    """A dataset-transfer property list for collective MPI-IO."""
    from h5py import h5fd, h5p

    dxpl = h5p.create(h5p.DATASET_XFER)
    dxpl.set_dxpl_mpio(h5fd.MPIO_COLLECTIVE)
    return dxpl


def as_target(where: Any, mode: str, comm: Any) -> Any:
    """A context manager giving a :class:`Target` for ``where`` (reused when it is one)."""
    if isinstance(where, Target):
        return contextlib.nullcontext(where)
    return Target(where, mode, comm)


class Target:
    """Collective. A path or an open group to read or write, opened as needed and closed after.

    With a path, the file is opened (parallel, serial, or on rank 0 only in gather mode) and
    closed on exit; with an h5py group, that group is used as it is.
    """

    def __init__(self, where: Any, mode: str, comm: Any) -> None:
        self.comm = resolve_comm(comm)
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
        if not self.owned:
            self.group = self._where if self.does_io else None
            return self
        error = None
        if self.does_io:
            try:
                if self.kind == "mpio":
                    self.group = h5py.File(self.path, self.mode, driver="mpio", comm=self.comm)
                else:
                    self.group = h5py.File(self.path, self.mode)
            except OSError as exc:
                error = f"cannot open with mode {self.mode!r}: {exc}"
        if self.comm.Get_size() > 1:
            errors = self.comm.allgather(error)  # every rank raises the same error, no hang
            error = next((e for e in errors if e), None)
        if error:
            if self.group is not None:
                self.group.close()
            raise StorageError(error, path=self.path)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owned and self.group is not None:
            self.group.close()
