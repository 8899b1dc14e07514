"""Closed forms: Black-Scholes-Merton and the discretely monitored geometric Asian option."""

from __future__ import annotations

import math

from .instruments import GBM, AsianGeometric, European

__all__ = ["black_scholes", "geometric_asian", "normal_cdf"]


def normal_cdf(x: float) -> float:
    """Standard normal distribution function."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _lognormal_option(
    forward_log_mean: float, log_var: float, strike: float, discount: float, kind: str
) -> float:
    """``discount * E[(X - K)+]`` (or the put) for ``ln X ~ N(m, v)``."""
    if log_var <= 0.0:
        x = math.exp(forward_log_mean)
        return (
            discount * max(x - strike, 0.0) if kind == "call" else discount * max(strike - x, 0.0)
        )
    s = math.sqrt(log_var)
    mean = math.exp(forward_log_mean + 0.5 * log_var)
    d1 = (forward_log_mean - math.log(strike) + log_var) / s
    d2 = d1 - s
    if kind == "call":
        return discount * (mean * normal_cdf(d1) - strike * normal_cdf(d2))
    return discount * (strike * normal_cdf(-d2) - mean * normal_cdf(-d1))


def black_scholes(model: GBM, option: European) -> float:
    """Black-Scholes-Merton price of a European call or put."""
    t, sig = option.maturity, model.vol
    m = math.log(model.spot) + (model.rate - model.dividend - 0.5 * sig * sig) * t
    return _lognormal_option(
        m, sig * sig * t, option.strike, math.exp(-model.rate * t), option.kind
    )


def geometric_asian(model: GBM, option: AsianGeometric) -> float:
    """Geometric Asian on ``n`` equally spaced fixings ``T/n .. T``: ``ln G`` is normal with
    mean ``ln S0 + (r - q - sigma^2/2) T (n+1)/(2n)`` and variance
    ``sigma^2 T (n+1)(2n+1)/(6 n^2)``."""
    n, t, sig = option.fixings, option.maturity, model.vol
    m = math.log(model.spot) + (model.rate - model.dividend - 0.5 * sig * sig) * t * (n + 1) / (
        2 * n
    )
    v = sig * sig * t * (n + 1) * (2 * n + 1) / (6 * n * n)
    return _lognormal_option(m, v, option.strike, math.exp(-model.rate * t), option.kind)
