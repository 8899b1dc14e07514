"""One Python source, several compiled kernels: rebinding a function's globals.

A kernel body written once in plain Python calls helpers by global name (``_exp``, ``_pair``,
a ``_KIND`` constant); compiling a copy whose globals name the CPU versions (numba) or the GPU
versions (numba.cuda) gives both targets from one description. Numba freezes globals at compile
time, so constants rebound this way are folded and dead branches vanish.
"""

from __future__ import annotations

from typing import Any

__all__ = ["rebind_globals"]


def rebind_globals(fn: Any, **names: Any) -> Any:
    """A copy of the plain function ``fn`` whose globals are its module's, updated by ``names``."""
    return type(fn)(fn.__code__, {**fn.__globals__, **names}, fn.__name__, fn.__defaults__)
