"""numba's optimisation level for the library's kernels: ``max`` unless ``NUMBA_OPT`` says.

numba optimises the module of each function it compiles in two passes: a cheap one (``-O0``
with loop rotation, so that its reference-count pruning sees inlined code), then one ``-O3``.
A parallel kernel's ``prange`` body is compiled as a library of its own and linked into the
kernel's. Compiled in the process, the kernel calls that library's copy of the body, optimised
once; loaded from the disk cache, it runs the copy in its own object, which was optimised again
with the kernel's module. The two can be different machine code: the shared-query alignment
kernel (``bucket_shared``) took 164 ms a call compiled in the process and 79 ms from the cache
(100 x 100 proteins of 100-500 letters, one thread), and a serial copy of it compiled in the
process 164 ms as well. With ``NUMBA_OPT=max`` numba runs its cheap pass at ``-O3`` with loop
vectorisation too, and the same kernel took 78-85 ms both ways; from the cache, the align,
mc, lbm, knn and tpch benchmarks measured the same at either level. The price is compile
time, about a quarter more (``hpc warmup align core``: 57 s at the default, 70 s at ``max``).

:func:`prefer_full_optimisation` (run when :mod:`hpc` is imported) sets ``NUMBA_OPT=max`` in
the environment unless it is set already (``NUMBA_OPT=3`` keeps numba's default), so child
processes (MPI ranks, benchmark peers' workers) compile alike. numba reads the cheap pass's
level once, when it builds its CPU code generator, which importing numba does: where numba
was imported before :mod:`hpc`, the built code generator is set to the same level in place
(numba's private attributes ``_loopvect`` and ``_opt_level``; left alone where a numba version
lacks them: setting ``NUMBA_OPT=max`` in the environment then does it).

The level is not part of any cache key (numba's leaves it out, and so do the names of
:mod:`hpc.jit`'s generated modules): processes at different levels share one cache, and a
kernel compiled at one level is loaded at the other. It has to be so: a module-level cached
kernel that calls a generated helper (the vector heaps) names the helper's module in its
cache, so a module name that changed with the level made the other level's processes fail to
load it. And it costs nothing: from the cache, the benchmarks measured alike at both levels.
"""

from __future__ import annotations

import os
import sys

__all__ = ["LEVEL", "prefer_full_optimisation", "level_in_force"]

LEVEL = "max"


def prefer_full_optimisation() -> str:
    """Local. Set ``NUMBA_OPT`` to :data:`LEVEL` for this process and its children unless the
    environment sets it already.

    Returns
    -------
    str
        The level in force: the environment's, or :data:`LEVEL`.
    """
    current = os.environ.get("NUMBA_OPT", "").strip()
    if current:
        return current
    os.environ["NUMBA_OPT"] = LEVEL
    if "numba" in sys.modules:  # its code generator exists already: numba read the level
        _raise_built_codegen()
    return LEVEL


def _raise_built_codegen() -> None:
    """Give numba's built CPU code generator the cheap pass of ``NUMBA_OPT=max`` (what its
    constructor sets for that level), and numba's config the level (its compiler re-reads the
    environment too)."""
    from numba.core import config
    from numba.core.registry import cpu_target

    config.OPT = config._OptLevel(LEVEL)
    codegen = cpu_target.target_context.codegen()
    if hasattr(codegen, "_loopvect") and hasattr(codegen, "_opt_level"):
        codegen._loopvect, codegen._opt_level = True, 3


def level_in_force() -> str:
    """Local. The level numba compiles with in this process (``NUMBA_OPT``; numba's default
    is ``3``), as ``hpc info`` and the benchmark records report it."""
    return os.environ.get("NUMBA_OPT", "").strip() or "3"
