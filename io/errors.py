"""Errors of the storage layer: each names the file and, where there is one, the dataset."""

from __future__ import annotations

__all__ = ["StorageError", "CorruptDataError", "LayoutMismatchError"]


class StorageError(RuntimeError):
    """A file or dataset cannot be read or written as asked."""

    def __init__(self, message: str, path: str | None = None, dataset: str | None = None):
        where = ", ".join(
            part
            for part in (
                f"file {path!r}" if path else "",
                f"dataset {dataset!r}" if dataset else "",
            )
            if part
        )
        super().__init__(f"{message} ({where})" if where else message)
        self.path = path
        self.dataset = dataset


class CorruptDataError(StorageError):
    """Stored data fails its checksum, is truncated, or is missing a part it declares."""


class LayoutMismatchError(StorageError):
    """A dataset's shape or dtype differs from what the reader expects or the file declares."""
