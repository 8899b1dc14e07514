"""Payoff of a discretely monitored lookback call or put: a template of the Monte Carlo kernel
(:mod:`.kernels`).

The extremum is taken over ``S(0)`` and the observation dates ``T/n, 2T/n, .., T`` (so
``S(T)`` is among them): floating strike, call ``S(T) - min S`` and put ``max S - S(T)``;
fixed strike ``K``, call ``max(max S - K, 0)`` and put ``max(K - min S, 0)``.

Accumulated per path: the largest and smallest ``ln S`` so far and the volatility derivative
``g`` of ``ln S`` where each was attained (``g = 0`` at ``S(0)``). The payoff is Lipschitz in
the path and the extremum of finitely many dates is attained at one date almost surely, so
its pathwise derivatives are unbiased: delta ``y / S0`` (floating strike: the payoff is
homogeneous of degree 1 in ``S0``) or ``slope a / S0`` (fixed strike, ``a`` the extremum),
vega from ``S g`` at the dates involved. Control variate: the discounted level at maturity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["pack", "constants", "ROWS", "TEMPLATES"]

ROWS = 4  # max ln S, g at the max, min ln S, g at the min


def constants(payoff: str) -> dict[str, Any]:
    return {}


def pack(
    strike: float, call: bool, discount: float, s0: float, dates: int, log_s0: float = 0.0,
    floating: bool = True,
) -> np.ndarray:  # fmt: skip
    """The payoff's parameter array (``s0``: the spot the pathwise delta is taken against;
    ``log_s0``: ``ln S(0)``, where the extremum starts; ``strike`` unused when
    ``floating``)."""
    flags = [1.0 if call else 0.0, 1.0 if floating else 0.0]
    return np.array([strike, discount, s0, log_s0, *flags], dtype=np.float64)


def _p_load(pp: Any) -> tuple:
    return pp[0], pp[1], pp[2], pp[3], pp[4] != 0.0, pp[5] != 0.0


def _p_start(st: Any, r: int, i: int, q: Any) -> None:
    log_s0 = q[3]
    st[r, i] = log_s0  # the extremum starts at S(0), where g = 0
    st[r + 1, i] = 0.0
    st[r + 2, i] = log_s0
    st[r + 3, i] = 0.0


def _p_observe(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> None:
    if x > st[r, i]:  # the first date attaining the max keeps it
        st[r, i] = x
        st[r + 1, i] = g
    if x < st[r + 2, i]:
        st[r + 2, i] = x
        st[r + 3, i] = g


def _p_value(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> tuple:
    strike, discount, s0, log_s0, call, floating = q
    hi, ghi, lo, glo = st[r, i], st[r + 1, i], st[r + 2, i], st[r + 3, i]
    s = _exp(x)
    if floating:
        e = _exp(lo) if call else _exp(hi)
        ge = glo if call else ghi
        y = discount * ((s - e) if call else (e - s))  # >= 0: S(T) is an observation
        vega = discount * ((s * g - e * ge) if call else (e * ge - s * g))
        return y, discount * s, y / s0, vega
    a = _exp(hi) if call else _exp(lo)
    ga = ghi if call else glo
    itm = a > strike if call else a < strike
    y = discount * ((a - strike) if call else (strike - a)) if itm else 0.0
    slope = (discount if call else -discount) if itm else 0.0
    return y, discount * s, slope * a / s0, slope * (a * ga)


def _exp(x: float) -> float:
    raise NotImplementedError  # bound in the kernel


TEMPLATES = (_p_load, _p_start, _p_observe, _p_value)
