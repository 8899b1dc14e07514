"""Atomic output: a file appears whole under its name, or not at all.

Every writer of the library goes through these two functions: the content is written to a
temporary beside the final name, flushed to disk (``fsync``), renamed over the final name and
the directory fsynced, so neither a failure nor a power cut leaves a half-written file under
the final name. Temporaries are named ``.NAME.tmp-TOKEN``.

- :func:`atomic_output` gives a temporary *path* for a writer that opens it itself (one HDF5
  file written collectively by every rank of a communicator, or by one process);
- :func:`atomic_open` gives an open file object (text or bytes) for one process.

Examples
--------
>>> with atomic_output("hits.h5", comm) as tmp:          # collective
...     write_table(tmp, "hits", rows, comm=comm)
>>> with atomic_open("reads.sam") as fh:                # local
...     fh.write(header)
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from . import faults
from .errors import StorageError, from_os_error

__all__ = ["atomic_output", "atomic_open", "fsync_path"]


def fsync_path(path: str | os.PathLike[str], directory: bool = False) -> None:
    """Local. Flush a file (or a directory's entries, ``directory=True``) to disk."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(final: Path, token: str) -> Path:
    return final.with_name(f".{final.name}.tmp-{token}")


def _commit(tmp: Path, final: Path, rank: int) -> None:
    """Flush ``tmp``, rename it over ``final`` and flush the directory (one process)."""
    faults.inject("commit", final, rank)
    fsync_path(tmp)
    os.replace(tmp, final)
    fsync_path(final.parent, directory=True)


def _check_directory(final: Path, rank: int) -> None:
    faults.inject("open", final, rank)
    if not final.parent.is_dir():
        raise FileNotFoundError(2, "No such file or directory", str(final.parent))
    if final.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(final))


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], comm: Any = None) -> Iterator[Path]:
    """Collective over ``comm`` (local when ``comm`` is None). A temporary path to write
    ``path``'s content to; renamed over ``path`` when the block ends without an error.

    Every rank receives the same temporary name. The directory is checked by rank 0 and the
    commit (fsync, rename, directory fsync) done by rank 0; both outcomes are agreed, so every
    rank raises the same :class:`~hpc.io.StorageError` or none does. An error inside the
    block removes the temporary; one that not every rank raised ends the job
    (:func:`hpc.comm.abort_unless_agreed`), since the others would wait in the commit.

    Raises
    ------
    StorageError
        The directory is missing or ``path`` is a directory (before the block runs), or the
        commit failed (the temporary is removed; ``path`` keeps its old content).
    """
    from hpc.comm import abort_unless_agreed

    from .files import agree

    final = Path(path)
    single = comm is None or comm.Get_size() == 1
    rank = 0 if comm is None else comm.Get_rank()
    token = uuid.uuid4().hex[:12] if rank == 0 else None
    token = token if single else comm.bcast(token, root=0)
    tmp = _temporary(final, token)
    error: StorageError | None = None
    if rank == 0:
        try:
            _check_directory(final, rank)
        except OSError as exc:
            error = from_os_error(exc, "opening for writing", final)
    error = error if single else agree(comm, error)
    if error:
        raise error
    try:
        yield tmp
    except BaseException as exc:
        if not single:
            abort_unless_agreed(comm, f"writing {str(final)!r}", exc)
        if rank == 0:
            tmp.unlink(missing_ok=True)
        raise
    failure: StorageError | None = None
    if rank == 0:
        try:
            _commit(tmp, final, rank)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            failure = from_os_error(exc, "committing the output", final)
    failure = failure if single else agree(comm, failure)
    if failure:
        raise failure


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8"
) -> Iterator[IO[Any]]:
    """Local. An open file (``mode`` "w" or "wb") whose content replaces ``path`` when the
    block ends without an error; after an error ``path`` is as it was.

    Raises
    ------
    StorageError
        The directory is missing, ``path`` is a directory, or writing or committing failed.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode {mode!r}: expected 'w' or 'wb'")
    with atomic_output(path) as tmp:
        try:
            fh = open(tmp, mode, encoding=None if "b" in mode else encoding)  # noqa: SIM115
        except OSError as exc:
            raise from_os_error(exc, "opening for writing", path) from None
        with fh:
            try:
                yield fh
                fh.flush()
            except OSError as exc:
                if isinstance(exc, StorageError):
                    raise
                raise from_os_error(exc, "writing", path) from None
