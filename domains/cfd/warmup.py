"""Warm-up tasks of the CFD domain (see :mod:`hpc.warmup`).

The CPU stream-and-collide kernel is specialised to the local box's shape (constant strides), so
these warm the command line's default cases; other sizes compile once each, on first use.
"""

from __future__ import annotations

from collections.abc import Callable


def _cavity() -> None:
    from .cases import LidDrivenCavity

    LidDrivenCavity(129, re=100.0).run(4, check_every=2)


def _taylor_green() -> None:
    from .cases import TaylorGreen

    TaylorGreen(64, re=100.0).run(4, check_every=2)


def _cylinder() -> None:
    from .obstacles import SchaeferTurek

    SchaeferTurek(20).run(4, check_every=2)


TASKS: list[tuple[str, Callable[[], object]]] = [
    ("lid-driven cavity (D2Q9, n=129: `hpc cfd cavity`'s default)", _cavity),
    ("Taylor-Green vortex (D2Q9, n=64: `hpc cfd taylor-green`'s default)", _taylor_green),
    ("Schaefer-Turek cylinder (D2Q9, D=20: `hpc cfd cylinder`'s default)", _cylinder),
]
