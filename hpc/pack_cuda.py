"""numba.cuda kernel of :class:`hpc.pack.BoxMove`: grid row ``blockIdx.y`` is the box, one
thread per element along x.

Kept in its own module, imported only when a GPU exchange or the CUDA simulator needs it, and
written against the module-level ``cuda`` name so the simulator can stand in for it.
"""

from __future__ import annotations

from typing import Any

from numba import cuda

__all__ = ["move_rows", "launch_rows"]

_THREADS = 256


@cuda.jit
def move_rows(src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n0, n1, n2):  # pragma: no cover
    b = cuda.blockIdx.y
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t < n0 * n1 * n2:
        k = t % n2
        r = t // n2
        j = r % n1
        i = r // n1
        dst[d_start[b] + i * ds0 + j * ds1 + k] = src[s_start[b] + i * ss0 + j * ss1 + k]


def launch_rows(
    src: Any, src_side: tuple, dst: Any, dst_side: tuple, n: tuple, boxes: int, per_box: int
) -> None:
    """Local. Launch :func:`move_rows` over ``boxes`` boxes of ``per_box`` elements each."""
    grid = ((per_box + _THREADS - 1) // _THREADS, boxes)
    move_rows[grid, _THREADS](src, *src_side, dst, *dst_side, *n)
