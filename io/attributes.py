"""File attributes written collectively (every rank of the job takes part, as MPI-IO needs)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .errors import from_os_error
from .files import as_target

__all__ = ["write_attrs", "read_attrs"]


def write_attrs(
    path_or_group: str | os.PathLike[str] | Any, attrs: Mapping[str, Any], comm: Any = None
) -> None:
    """Collective. Set attributes on the root of a file (created if missing) or on a group.

    Every rank passes the same ``attrs``; the values are rank 0's. Numbers, strings and arrays
    as h5py stores them.

    Raises
    ------
    StorageError
        When the file cannot be opened or written (every rank raises it).
    """
    from hpc.comm import resolve_comm

    comm = resolve_comm(comm)
    values = dict(attrs) if comm.Get_size() == 1 else comm.bcast(dict(attrs), root=0)
    with as_target(path_or_group, "a", comm) as target:
        if target.does_io:
            for key, value in values.items():
                target.group.attrs[key] = value


def read_attrs(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Local. The attributes of a file's root group, as Python values."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            return {
                k: v.item() if hasattr(v, "item") and v.ndim == 0 else v for k, v in f.attrs.items()
            }
    except OSError as exc:
        raise from_os_error(exc, "reading attributes", path) from None
