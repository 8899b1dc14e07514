"""Payoff of a European call or put on the model's level at maturity (a single asset, or a
basket's weighted sum): a template of the Monte Carlo kernel (:mod:`.kernels`).

Control variate: the discounted level. Pathwise delta ``slope a / S0`` (the level is
proportional to the spot) and vega ``slope a g`` (``g``: the derivative of ``ln a`` in the
volatility, from the model).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["pack", "constants", "ROWS", "TEMPLATES"]

ROWS = 0  # nothing accumulated along the path


def constants(payoff: str) -> dict[str, Any]:
    return {}


def pack(strike: float, call: bool, discount: float, s0: float, dates: int) -> np.ndarray:
    """The payoff's parameter array (``s0``: the spot the pathwise delta is taken against)."""
    return np.array([strike, 1.0 if call else 0.0, discount, s0], dtype=np.float64)


def _p_load(pp: Any) -> tuple:
    return pp[0], pp[1] != 0.0, pp[2], pp[3]


def _p_start(st: Any, r: int, i: int, q: Any) -> None:
    pass


def _p_observe(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> None:
    pass


def _p_value(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> tuple:
    strike, call, discount, s0 = q
    a = _exp(x)
    itm = a > strike if call else a < strike
    y = discount * ((a - strike) if call else (strike - a)) if itm else 0.0
    slope = (discount if call else -discount) if itm else 0.0
    return y, discount * a, slope * a / s0, slope * (a * g)


def _exp(x: float) -> float:
    raise NotImplementedError  # bound in the kernel


TEMPLATES = (_p_load, _p_start, _p_observe, _p_value)
