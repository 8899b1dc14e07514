"""Errors of the storage layer: each names the file, the dataset where there is one, and the
operation that failed. They are :class:`hpc.HPCError` and ``OSError`` both.

An error agreed among the ranks before it is raised (``all_ranks=True``) is raised by every
rank at the same point; :func:`from_os_error` turns an ``OSError`` into the subclass its errno
says (no space, no permission, missing).
"""

from __future__ import annotations

import errno as _errno
import re
from typing import Any

from hpc.errors import HPCError

__all__ = [
    "StorageError",
    "CorruptDataError",
    "LayoutMismatchError",
    "MissingDataError",
    "StorageFullError",
    "StoragePermissionError",
    "from_os_error",
]


class StorageError(HPCError, OSError):
    """A file or dataset cannot be read or written as asked."""

    def __init__(
        self,
        message: str,
        path: str | None = None,
        dataset: str | None = None,
        all_ranks: bool = False,
    ) -> None:
        where = ", ".join(
            part
            for part in (
                f"file {path!r}" if path else "",
                f"dataset {dataset!r}" if dataset else "",
            )
            if part
        )
        super().__init__(f"{message} ({where})" if where else message)
        self.message = message
        self.path = path
        self.dataset = dataset
        self.all_ranks = all_ranks

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[Any, ...]:  # the same error on every rank (allgather)
        return (type(self), (self.message, self.path, self.dataset, self.all_ranks))


class CorruptDataError(StorageError):
    """Stored data fails its checksum, is truncated, or is missing a part it declares."""


class LayoutMismatchError(StorageError):
    """A dataset's shape or dtype differs from what the reader expects or the file declares."""


class MissingDataError(StorageError):
    """No such file, dataset, table or checkpoint."""


class StorageFullError(StorageError):
    """The file system has no room (``ENOSPC``, ``EDQUOT``) for what is about to be written."""


class StoragePermissionError(StorageError):
    """The file system refuses the operation (``EACCES``, ``EPERM``, ``EROFS``)."""


_BY_ERRNO = {
    _errno.ENOSPC: StorageFullError,
    _errno.EDQUOT: StorageFullError,
    _errno.EACCES: StoragePermissionError,
    _errno.EPERM: StoragePermissionError,
    _errno.EROFS: StoragePermissionError,
    _errno.ENOENT: MissingDataError,
}


def from_os_error(
    exc: OSError, operation: str, path: Any, dataset: str | None = None
) -> StorageError:
    """The storage error for ``exc`` raised by ``operation`` on ``path`` (subclass by errno)."""
    # h5py: "Unable to ... (... errno = 30, error message = 'Read-only file system', ...)"
    found = re.search(r"errno = (\d+)", str(exc))
    said = re.search(r"error message = '([^']*)'", str(exc))
    code = exc.errno if exc.errno is not None else int(found.group(1)) if found else 0
    reason = said.group(1) if said else exc.strerror or str(exc)
    cls = _BY_ERRNO.get(code, StorageError)
    return cls(f"{operation} failed: {reason}", path=str(path), dataset=dataset)
