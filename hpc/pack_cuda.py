"""numba.cuda pack/unpack kernels (see :mod:`hpc.pack`), one thread per box element.

Kept in their own module, imported only when a GPU exchange or the CUDA simulator needs them,
and written against the module-level ``cuda`` name so the simulator can stand in for it.
"""

from __future__ import annotations

from numba import cuda

__all__ = ["pack_kernel", "unpack_kernel"]


@cuda.jit
def pack_kernel(a, buf, lo0, lo1, lo2, n0, n1, n2):  # pragma: no cover - compiled
    t = cuda.grid(1)
    if t < n0 * n1 * n2:
        k = t % n2
        r = t // n2
        j = r % n1
        i = r // n1
        buf[t] = a[lo0 + i, lo1 + j, lo2 + k]


@cuda.jit
def unpack_kernel(buf, a, lo0, lo1, lo2, n0, n1, n2):  # pragma: no cover - compiled
    t = cuda.grid(1)
    if t < n0 * n1 * n2:
        k = t % n2
        r = t // n2
        j = r % n1
        i = r // n1
        a[lo0 + i, lo1 + j, lo2 + k] = buf[t]
