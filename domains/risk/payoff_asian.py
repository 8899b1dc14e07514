"""Payoff of an Asian call or put on the arithmetic (``_GEOMETRIC = False``) or geometric mean
of the level at the observation dates: a template of the Monte Carlo kernel (:mod:`.kernels`).

Accumulated per path: the sums of ``S`` and ``ln S`` at the dates and their derivatives in the
volatility. Control variate of the arithmetic mean: the geometric Asian on the same path (its
mean is known in closed form under GBM); none for the geometric one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["pack", "constants", "ROWS", "TEMPLATES"]

ROWS = 4  # sum S, sum ln S, sum dS/dsigma, sum d ln S/dsigma
_GEOMETRIC = False  # bound in the kernel


def constants(payoff: str) -> dict[str, Any]:
    return {"_GEOMETRIC": payoff == "geometric"}


def pack(strike: float, call: bool, discount: float, s0: float, dates: int) -> np.ndarray:
    """The payoff's parameter array (``dates``: the number of fixings)."""
    return np.array([strike, 1.0 if call else 0.0, discount, s0, dates], dtype=np.float64)


def _p_load(pp: Any) -> tuple:
    return pp[0], pp[1] != 0.0, pp[2], pp[3], pp[4]


def _p_start(st: Any, r: int, i: int, q: Any) -> None:
    pass  # the sums start at zero


def _p_observe(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> None:
    s = _exp(x)
    st[r, i] += s  # sum of S
    st[r + 1, i] += x  # sum of ln S
    st[r + 2, i] += s * g  # its vol derivative
    st[r + 3, i] += g


def _p_value(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> tuple:
    strike, call, discount, s0, n = q
    ar, ge, dar, dge = st[r, i], st[r + 1, i], st[r + 2, i], st[r + 3, i]
    if _GEOMETRIC:
        a = _exp(ge / n)
        da = a * dge / n
    else:
        a = ar / n
        da = dar / n
    itm = a > strike if call else a < strike
    y = discount * ((a - strike) if call else (strike - a)) if itm else 0.0
    slope = (discount if call else -discount) if itm else 0.0
    if _GEOMETRIC:
        c = 0.0
    else:  # control: the geometric Asian
        gm = _exp(ge / n)
        gi = gm > strike if call else gm < strike
        c = discount * ((gm - strike) if call else (strike - gm)) if gi else 0.0
    return y, c, slope * a / s0, slope * da


def _exp(x: float) -> float:
    raise NotImplementedError  # bound in the kernel


TEMPLATES = (_p_load, _p_start, _p_observe, _p_value)
