"""Keep the process's floating-point environment when a peer's compiled code is loaded.

A shared library linked with ``-ffast-math`` (pystencils compiles lbmpy's kernels so) sets
flush-to-zero and denormals-are-zero in the loading thread's MXCSR when it is loaded: every
later computation of the process, ours included, would then flush subnormal numbers to zero.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from collections.abc import Iterator

__all__ = ["kept_fp_environment"]

_FENV_BYTES = 256  # above sizeof(fenv_t) on every platform glibc supports


@contextlib.contextmanager
def kept_fp_environment() -> Iterator[None]:
    """Restore the thread's floating-point environment (rounding, exception masks, FTZ/DAZ)
    as it was before the block; a no-op where the C library has no ``fegetenv``."""
    name = ctypes.util.find_library("m") or ctypes.util.find_library("c")
    libm = ctypes.CDLL(name) if name else None
    if libm is None or not hasattr(libm, "fegetenv"):
        yield
        return
    saved = ctypes.create_string_buffer(_FENV_BYTES)
    got = libm.fegetenv(saved) == 0
    try:
        yield
    finally:
        if got:
            libm.fesetenv(saved)
