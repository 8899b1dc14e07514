"""Differential fuzzing settings shared by every domain.

Examples are fresh random inputs on every run (hypothesis' default random seed; no
derandomisation). ``make test`` runs a bounded number per test; ``HPC_FUZZ_EXAMPLES=N`` runs
``N`` per test (long runs)::

    HPC_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest -k fuzz

Under MPI the examples are drawn here, in the parent process, and handed to the job as a file
(:func:`draw`): ranks never draw, so they all see the same inputs and a failure names the
exact example.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

__all__ = ["examples", "fuzz", "draw"]

_SLOW_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def examples(default: int) -> int:
    """Examples per test: ``HPC_FUZZ_EXAMPLES`` when set, else ``default`` (make test's bound)."""
    raw = os.environ.get("HPC_FUZZ_EXAMPLES", "").strip()
    if not raw:
        return default
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"HPC_FUZZ_EXAMPLES={raw!r}: expected a whole number") from None
    if n < 1:
        raise ValueError(f"HPC_FUZZ_EXAMPLES={n}: expected at least 1")
    return n


def fuzz(default: int, **kwargs: Any) -> settings:
    """Hypothesis settings of a differential fuzz test: ``default`` examples in make test
    (``HPC_FUZZ_EXAMPLES`` overrides), no deadline (kernels compile on first use)."""
    return settings(
        max_examples=examples(default),
        deadline=None,
        suppress_health_check=_SLOW_CHECKS,
        **kwargs,
    )


def draw(strategy: st.SearchStrategy[Any], default: int) -> list[Any]:
    """``examples(default)`` examples of ``strategy``, drawn here (the parent process) for one
    MPI job, which runs them all (one ``mpirun`` start) and names the index of any that fails.

    Hypothesis draws them as it draws a test's examples: the simplest first, then varied
    ones, fresh each run.

    Examples
    --------
    >>> cases = draw(st.integers(), 20)  # doctest: +SKIP
    """
    out: list[Any] = []

    @settings(
        max_examples=examples(default),
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=_SLOW_CHECKS,
        database=None,
    )
    @given(strategy)
    def collect(example: Any) -> None:
        out.append(example)

    collect()
    return out
