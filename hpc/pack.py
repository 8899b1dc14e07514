"""Pack and unpack kernels: copy a box of a local array to or from a contiguous buffer.

Halo exchange moves boxes (faces, edges, corners) of the ghosted local array. Every array is
viewed as 3-D (leading axes of length 1 added), so one pair of kernels serves 1-D, 2-D and 3-D.
CPU kernels are numba ``njit`` (parallel over rows for large boxes); GPU kernels are
``numba.cuda`` with one thread per element, and also run under the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) on host arrays, which is how CI checks their indexing.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

__all__ = ["Box", "as3d", "pack", "unpack", "cuda_kernels"]

# A box is (lo0, lo1, lo2, n0, n1, n2) in the 3-D view of a local array.
Box = tuple[int, int, int, int, int, int]

_PARALLEL_MIN = 1 << 15  # below this many elements the thread start-up costs more than it saves


def as3d(a: Any) -> Any:
    """View ``a`` (1-D, 2-D or 3-D, C-contiguous) as 3-D without copying."""
    if a.ndim == 3:
        return a
    return a.reshape((1,) * (3 - a.ndim) + tuple(a.shape))


def box3d(lo: tuple[int, ...], n: tuple[int, ...]) -> Box:
    """A 1/2/3-D box (corner ``lo``, extent ``n``) in the 3-D view's coordinates."""
    pad = 3 - len(lo)
    lo3 = (0,) * pad + tuple(lo)
    n3 = (1,) * pad + tuple(n)
    return (lo3[0], lo3[1], lo3[2], n3[0], n3[1], n3[2])


@numba.njit(cache=True, nogil=True)
def _pack_serial(a, buf, lo0, lo1, lo2, n0, n1, n2):  # pragma: no cover - compiled
    t = 0
    for i in range(n0):
        for j in range(n1):
            for k in range(n2):
                buf[t] = a[lo0 + i, lo1 + j, lo2 + k]
                t += 1


@numba.njit(cache=True, nogil=True, parallel=True)
def _pack_parallel(a, buf, lo0, lo1, lo2, n0, n1, n2):  # pragma: no cover - compiled
    for r in prange(n0 * n1):
        i = r // n1
        j = r - i * n1
        base = r * n2
        for k in range(n2):
            buf[base + k] = a[lo0 + i, lo1 + j, lo2 + k]


@numba.njit(cache=True, nogil=True)
def _unpack_serial(buf, a, lo0, lo1, lo2, n0, n1, n2):  # pragma: no cover - compiled
    t = 0
    for i in range(n0):
        for j in range(n1):
            for k in range(n2):
                a[lo0 + i, lo1 + j, lo2 + k] = buf[t]
                t += 1


@numba.njit(cache=True, nogil=True, parallel=True)
def _unpack_parallel(buf, a, lo0, lo1, lo2, n0, n1, n2):  # pragma: no cover - compiled
    for r in prange(n0 * n1):
        i = r // n1
        j = r - i * n1
        base = r * n2
        for k in range(n2):
            a[lo0 + i, lo1 + j, lo2 + k] = buf[base + k]


def _count(box: Box) -> int:
    return box[3] * box[4] * box[5]


def _is_big(box: Box) -> bool:
    """Worth threads: many elements spread over more than one row."""
    return _count(box) >= _PARALLEL_MIN and box[3] * box[4] > 1


def pack(a3: np.ndarray, buf: np.ndarray, box: Box) -> None:
    """Local. Copy ``box`` of the 3-D view ``a3`` into the first elements of 1-D ``buf`` (CPU)."""
    (_pack_parallel if _is_big(box) else _pack_serial)(a3, buf, *box)


def unpack(buf: np.ndarray, a3: np.ndarray, box: Box) -> None:
    """Local. Copy the first elements of 1-D ``buf`` into ``box`` of the 3-D view ``a3`` (CPU)."""
    (_unpack_parallel if _is_big(box) else _unpack_serial)(buf, a3, *box)


def cuda_kernels() -> tuple[Any, Any]:
    """The ``numba.cuda`` pack and unpack kernels (imported, and compiled, on first use).

    Launch as ``kernel[blocks, threads](a3, buf, *box)`` with one thread per box element.
    """
    from . import pack_cuda

    return pack_cuda.pack_kernel, pack_cuda.unpack_kernel


def launch_shape(count: int, threads: int = 256) -> tuple[int, int]:
    """Blocks and threads for a one-thread-per-element launch over ``count`` elements."""
    return max(1, (count + threads - 1) // threads), threads


def pack_device(a3: Any, buf: Any, box: Box) -> None:
    """Local. GPU version of :func:`pack` (``a3`` and ``buf`` are device arrays)."""
    kernel, _ = cuda_kernels()
    kernel[launch_shape(_count(box))](a3, buf, *box)


def unpack_device(buf: Any, a3: Any, box: Box) -> None:
    """Local. GPU version of :func:`unpack`."""
    _, kernel = cuda_kernels()
    kernel[launch_shape(_count(box))](buf, a3, *box)
