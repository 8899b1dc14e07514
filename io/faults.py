"""Fault injection at hpc.io's file-system layer, for tests (``HPC_IO_FAULTS``).

``HPC_IO_FAULTS="op=ERRNO[@rank],..."`` makes the named operation raise ``OSError(ERRNO)`` on
every rank that performs it, or on ``rank`` only. Operations: ``space`` (the free-space check
before a write), ``open`` (opening an HDF5 file), ``mkdir`` and ``remove`` (a checkpoint's
directory and stale temporaries), ``write`` and ``read`` (inside the collective transfer of a
dataset or column), ``commit`` (the fsync and rename of a checkpoint or of any atomic output,
:mod:`hpc.io.atomic`). ``ERRNO`` is a name
(``ENOSPC``, ``EROFS``, ``EPERM``, ``EIO``) or a number. Unset (the default), nothing happens.

Tests use it where the machine cannot make a real full or read-only file system (CI runs as
root, so permission bits alone cannot refuse a write).
"""

from __future__ import annotations

import errno
import functools
import os
from typing import Any

__all__ = ["inject", "OPERATIONS"]

OPERATIONS = ("space", "open", "mkdir", "remove", "write", "read", "commit")


@functools.lru_cache(maxsize=8)
def _parse(spec: str) -> dict[str, tuple[int, int | None]]:
    faults: dict[str, tuple[int, int | None]] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        op, _, rest = item.partition("=")
        code, _, rank = rest.partition("@")
        if op not in OPERATIONS or not code:
            raise ValueError(
                f"HPC_IO_FAULTS: {item!r}: expected op=ERRNO[@rank], op one of "
                f"{', '.join(OPERATIONS)}"
            )
        number = int(code) if code.isdigit() else getattr(errno, code, None)
        if number is None:
            raise ValueError(f"HPC_IO_FAULTS: {item!r}: unknown errno {code!r}")
        faults[op] = (number, int(rank) if rank else None)
    return faults


def inject(op: str, path: Any, rank: int) -> None:
    """Raise the injected ``OSError`` for ``op`` on this ``rank``, if ``HPC_IO_FAULTS`` asks."""
    spec = os.environ.get("HPC_IO_FAULTS")
    if not spec:
        return
    fault = _parse(spec).get(op)
    if fault and (fault[1] is None or fault[1] == rank):
        raise OSError(fault[0], f"{os.strerror(fault[0])} (injected)", str(path))
