"""numba's parallel kernels on a work-stealing thread pool (TBB) where it is installed.

numba runs a ``prange`` loop on one of three threading layers and picks the first that
loads: TBB, then OpenMP, then its own work queue. With OpenMP (GNU's, the usual one on
Linux) every parallel region is a fork-join over a fixed team: the loop is cut into one
share per thread and the region ends when every thread has run its share. On a machine with
other work running (a shared node, MPI ranks beside their threads, a test suite) a team
thread that the scheduler has put aside holds up the whole region for a time slice, once
per region: a query of twenty kernels over 60k rows took 130 ms where one thread took 7 ms.
TBB's threads take work from each other instead, so the calling thread runs whatever a
descheduled thread has not started.

The ``tbb`` wheel puts ``libtbb.so.12`` in the environment's ``lib`` folder, which is not
on the loader's path, so numba's TBB layer fails to load and it falls back to OpenMP.
:func:`load_tbb` loads the library by its path first; numba's own ``dlopen`` then finds it
by name. Nothing is forced: ``NUMBA_THREADING_LAYER`` still chooses.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["load_tbb", "threading_layer"]

_TBB = "libtbb.so.12"  # the interface numba's TBB layer links against
_loaded: str | None = None


def load_tbb() -> str | None:
    """Local. Load TBB's shared library from this environment's ``lib`` folder (where the
    ``tbb`` wheel installs it) so that numba's TBB threading layer can start.

    Returns
    -------
    str or None
        The library's path, or None where there is none (not installed, not Linux) or it
        does not load; numba then uses OpenMP as before.
    """
    global _loaded
    if _loaded is not None or not sys.platform.startswith("linux"):
        return _loaded
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix)):
        path = os.path.join(prefix, "lib", _TBB)
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            _loaded = path
            break
    return _loaded


def threading_layer() -> str:
    """Local. The threading layer numba's parallel kernels run on (``tbb``, ``omp`` or
    ``workqueue``), starting it if no parallel kernel has run yet."""
    import numba
    import numpy as np

    try:
        return str(numba.threading_layer())
    except ValueError:  # not started yet: one tiny parallel kernel starts it
        _start(np.zeros(2))
        return str(numba.threading_layer())


def _start(a):  # type: ignore[no-untyped-def]
    from numba import njit, prange

    @njit(parallel=True)
    def touch(a):  # type: ignore[no-untyped-def]
        for i in prange(a.shape[0]):
            a[i] = i

    touch(a)
