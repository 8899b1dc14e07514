"""The device backend: which array module and which kernel compiler the library uses.

The CPU backend is NumPy plus numba ``@njit(parallel=True)``; the GPU backend is CuPy plus
``numba.cuda.jit``. The choice is made once per process (``HPC_BACKEND=auto|cpu|gpu``) and is a
value (:class:`Backend`) that code above this module passes around; nothing above it imports CuPy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import settings
from .errors import HPCError

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "get_backend",
    "array_module",
    "is_device_array",
    "to_host",
    "gpu_unavailable_reason",
]

log = logging.getLogger("hpc.backend")


class BackendUnavailableError(HPCError, RuntimeError):
    """The requested backend cannot run on this machine (the message says why)."""


@dataclass(frozen=True)
class Backend:
    """A device backend.

    Attributes
    ----------
    name : {"cpu", "gpu"}
        Which device the arrays live on.
    xp : module
        The array module: ``numpy`` or ``cupy``.
    device_id : int
        The CUDA device used by this process (0 on the CPU backend).
    """

    name: str
    xp: Any = field(repr=False)
    device_id: int = 0

    @property
    def is_gpu(self) -> bool:
        """True on the GPU backend."""
        return self.name == "gpu"

    def empty(self, shape: tuple[int, ...] | int, dtype: Any = np.float64) -> Any:
        """Local. An uninitialised C-contiguous array on this backend's device."""
        return self.xp.empty(shape, dtype=dtype)

    def zeros(self, shape: tuple[int, ...] | int, dtype: Any = np.float64) -> Any:
        """Local. A zero-filled C-contiguous array on this backend's device."""
        return self.xp.zeros(shape, dtype=dtype)

    def asarray(self, a: Any, dtype: Any = None) -> Any:
        """Local. ``a`` on this backend's device (no copy when it is already there)."""
        return self.xp.asarray(a, dtype=dtype)

    def pinned_empty(self, shape: tuple[int, ...] | int, dtype: Any = np.float64) -> np.ndarray:
        """Local. A host array for staging device data through MPI (page-locked on the GPU)."""
        if self.is_gpu:
            import cupyx

            return cupyx.empty_pinned(shape, dtype=dtype)
        return np.empty(shape, dtype=dtype)

    def synchronize(self) -> None:
        """Local. Wait for all queued device work (no-op on the CPU)."""
        if self.is_gpu:
            # A device-wide sync: numba.cuda kernels and CuPy may run on different streams.
            self.xp.cuda.Device().synchronize()

    def launch(self, kernel: Any, extents: Sequence[int], *args: Any) -> None:
        """Local. Run a kernel over a box of ``extents`` cells (first axis slowest).

        On the CPU ``kernel(*args)`` is called (a numba kernel loops over the box itself); on
        the GPU it is launched with one thread per cell, the thread's x running along the
        last (contiguous) axis, in blocks of 128 x 2 (2-D) or 64 x 2 x 2 (3-D) threads.
        """
        self.bound(kernel, extents)(*args)

    def bound(self, kernel: Any, extents: Sequence[int]) -> Any:
        """Local. ``kernel`` ready to run over a box of ``extents`` cells as :meth:`launch`
        runs it: called with its arguments, it runs. A caller stepping the same boxes many
        times binds them once (on a small block, working out the launch each call cost as
        much as the call itself)."""
        if not self.is_gpu:
            return kernel
        threads = {1: (256,), 2: (128, 2), 3: (64, 2, 2)}[len(extents)]
        sizes = list(reversed([int(e) for e in extents]))
        blocks = tuple((s + t - 1) // t for s, t in zip(sizes, threads, strict=True))
        return kernel[blocks, threads]


_lock = threading.Lock()
_cached: dict[str, Backend] = {}


def gpu_unavailable_reason() -> str | None:
    """Return why the GPU backend cannot be used here, or None when it can.

    Every failure of CuPy (not installed, installed without a driver, no device, a broken
    runtime) is caught and turned into the reason string: probing never crashes the process.
    """
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy that fails at import without a driver
        return f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
        if count < 1:
            return "CuPy found no CUDA device"
        cupy.zeros(1).sum().item()  # a real allocation and kernel launch on the device
    except Exception as exc:
        return f"CuPy cannot use a CUDA device ({type(exc).__name__}: {exc})"
    return None


def _share_cores() -> None:
    """Split this process's cores among the ranks on its node for numba's threads.

    Without it, N ranks on a node each start one thread per core: N-fold oversubscription.
    An explicit ``NUMBA_NUM_THREADS`` is left alone.
    """
    import os

    if "NUMBA_NUM_THREADS" in os.environ:
        return
    import numba

    from .comm import node_local_size

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    per_rank = max(1, (os.cpu_count() or 1) // node_local_size())
    numba.set_num_threads(max(1, min(cores or 1, per_rank, numba.config.NUMBA_NUM_THREADS)))


def _node_local_device(count: int) -> int:
    """Round-robin GPU by node-local rank, so ranks on one node spread over its devices."""
    from .comm import node_local_rank

    return node_local_rank() % max(count, 1)


def _make_gpu() -> Backend:
    import cupy

    device_id = _node_local_device(int(cupy.cuda.runtime.getDeviceCount()))
    cupy.cuda.Device(device_id).use()
    return Backend("gpu", cupy, device_id)


def get_backend(name: str | Backend | None = None) -> Backend:
    """Return the backend for ``name`` (default: ``HPC_BACKEND``, else ``auto``).

    Parameters
    ----------
    name : {"auto", "cpu", "gpu"}, Backend or None
        ``auto`` picks the GPU when CuPy finds a usable device, else the CPU (with one log line
        saying why). A :class:`Backend` is returned unchanged.

    Returns
    -------
    Backend
        The same object on every call with the same resolved name.

    Raises
    ------
    BackendUnavailableError
        If ``gpu`` is asked for and no GPU is usable; the message gives the reason.
    ValueError
        For a name other than auto, cpu or gpu.
    """
    if isinstance(name, Backend):
        return name
    requested = (name or settings().backend).strip().lower()
    if requested not in ("auto", "cpu", "gpu"):
        raise ValueError(f"backend {requested!r}: expected 'auto', 'cpu' or 'gpu'")
    with _lock:
        if requested in _cached:
            return _cached[requested]
        if requested == "cpu":
            _share_cores()
            backend = Backend("cpu", np)
        else:
            reason = gpu_unavailable_reason()
            if reason is None:
                backend = _cached.get("gpu") or _make_gpu()
            elif requested == "gpu":
                raise BackendUnavailableError(f"HPC_BACKEND=gpu was asked for, but {reason}")
            else:
                log.info("hpc: using the CPU backend: %s", reason)
                _share_cores()
                backend = _cached.get("cpu") or Backend("cpu", np)
        _cached[requested] = backend
        _cached.setdefault(backend.name, backend)
        return backend


def _reset_cache() -> None:
    """Forget the chosen backends (for tests that change ``HPC_BACKEND``)."""
    with _lock:
        _cached.clear()


def is_device_array(a: Any) -> bool:
    """True when ``a`` lives in GPU memory (it exposes ``__cuda_array_interface__``)."""
    return hasattr(a, "__cuda_array_interface__") and not isinstance(a, np.ndarray)


def array_module(a: Any) -> Any:
    """The array module of ``a``: ``cupy`` for device arrays, else ``numpy``."""
    if is_device_array(a):
        own = getattr(type(a), "array_module", None)  # a stand-in's (hpc.testing.device)
        if own is not None:
            return own
        import cupy

        return cupy
    return np


def to_host(a: Any) -> np.ndarray:
    """Local. ``a`` as a NumPy array (a device-to-host copy for device arrays)."""
    if is_device_array(a):
        return a.get() if hasattr(a, "get") else np.asarray(a.copy_to_host())
    return np.asarray(a)
