"""Host memory policy: keep freed memory in the process for reuse.

Columnar kernels allocate and free arrays of tens to hundreds of megabytes many times a
second. By default glibc serves every allocation above 32 MB with a fresh ``mmap`` and
unmaps it when freed, so each new array faults its pages in again and the kernel zeroes
them: on a virtual machine that costs up to 0.4 GB/s, which is 20-50x slower than writing
the same memory a second time. Analytics engines avoid this with their own allocators,
which keep freed memory (DuckDB and polars use jemalloc). :func:`keep_freed_memory` makes
glibc do the same for NumPy, numba and everything else in the process, and with
``arrow=True`` gives Arrow's buffers (Parquet decoding) a jemalloc pool that never purges:
Arrow's own default returns pages to the OS within milliseconds. The ``hpc`` command line
turns it on (with Arrow's pool for the SQL commands and benchmarks); a program that imports
the library decides for itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["keep_freed_memory"]

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4
_TOP_PAD = 64 << 20  # each heap extension asks the kernel for 64 MB more than it needs


def keep_freed_memory(arrow: bool = False) -> bool:
    """Serve large allocations from the heap and never return freed heap memory to the OS,
    so arrays reuse pages that are already mapped and need no page faults.

    This lasts for the life of the process. The process's resident memory stays at its
    peak, as it would with a buffer pool.

    Parameters
    ----------
    arrow : bool
        Also make Arrow's default memory pool jemalloc with page purging off (imports
        pyarrow). Measured here: Parquet reads of TPC-H ``lineitem`` took 30% less time than
        with Arrow's default mimalloc pool, and half the time of glibc's. Call it before
        pyarrow is first imported: jemalloc reads its settings (``JE_ARROW_MALLOC_CONF``,
        set here unless already set) when the library loads, and later only arenas made
        after the call stop purging.

    Returns
    -------
    bool
        True if every setting was applied. False where the C library is not glibc (musl,
        macOS), Arrow is missing or was built without jemalloc, or pyarrow was imported
        first without ``JE_ARROW_MALLOC_CONF`` set; those parts are then left as they were
        (or, for the last, applied to new arenas only).
    """
    ok = _keep_glibc_memory()
    if arrow:
        ok &= _keep_arrow_memory()
    return ok


# Arrow's jemalloc reads this when it starts. ``jemalloc_set_decay_ms`` alone only sets the
# default for arenas made after the call: the arenas jemalloc starts with keep purging after
# a second, and a thread that draws one (a reader thread of ours, not Arrow's pool) faults
# all its pages in again on every query (35k faults, 140 MB, per TPC-H Q6).
_ARROW_JEMALLOC = "JE_ARROW_MALLOC_CONF"
_NEVER_PURGE = "dirty_decay_ms:-1,muzzy_decay_ms:-1"


def _keep_arrow_memory() -> bool:
    import os
    import sys

    started = "pyarrow" in sys.modules  # then its jemalloc has read its settings already
    if not started:
        os.environ.setdefault(_ARROW_JEMALLOC, _NEVER_PURGE)  # a user's own settings win
    try:
        import pyarrow as pa

        pool = pa.jemalloc_memory_pool()
        pa.jemalloc_set_decay_ms(-1)  # -1: dirty pages are never purged
    except (ImportError, NotImplementedError, AttributeError):
        return False
    pa.set_memory_pool(pool)
    return _ARROW_JEMALLOC in os.environ  # else the arenas made at start still purge


def _keep_glibc_memory() -> bool:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_MAX, 0)  # no mmap for large blocks: they come from the heap
    ok &= mallopt(_M_TRIM_THRESHOLD, -1)  # -1: never trim the heap's top
    ok &= mallopt(_M_TOP_PAD, _TOP_PAD)
    return bool(ok)
