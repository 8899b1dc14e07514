"""Where the physical operators' columns live, and the kernels for that device.

The executor runs a plan on one backend (:class:`hpc.backend.Backend`). It enters
:func:`running_on` once; the operators and their helpers ask :func:`kernels` for the
backend's kernels (:data:`..ops.OPS`: the numba CPU kernels, or numba.cuda ones on the GPU)
and :func:`xp` for its array module, so an operator is written once for both devices and
never asks which one it runs on. Outside a run (a helper called on its own) it is the CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from hpc.backend import Backend, get_backend

__all__ = ["running_on", "backend", "kernels", "xp"]

_current: ContextVar[Backend | None] = ContextVar("hpc_sql_backend", default=None)


@contextlib.contextmanager
def running_on(where: Backend) -> Iterator[None]:
    """The block's operators run on ``where``."""
    token = _current.set(where)
    try:
        yield
    finally:
        _current.reset(token)


def backend() -> Backend:
    """The backend of the run in progress (the CPU outside one)."""
    return _current.get() or get_backend("cpu")


def xp() -> Any:
    """The array module of the run in progress (NumPy, or CuPy on the GPU)."""
    current = _current.get()
    return np if current is None else current.xp


def kernels() -> Any:
    """The run's kernels (:data:`hpc.domains.sql.ops.OPS` on its backend)."""
    from hpc.domains.sql.ops import OPS

    return OPS.on(backend())
