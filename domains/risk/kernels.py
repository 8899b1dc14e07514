"""Monte Carlo path kernels: each draws its own normals (hpc.rng, by global path index), so no
random numbers are stored and a block's sums depend only on the block number.

Sums per block, in a fixed order: ``(sum y, sum y^2, sum c, sum c^2, sum y c)`` of the
discounted payoff ``y`` and a control variate ``c`` with known mean.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hpc.rng import device_functions

__all__ = ["block_sums", "EUROPEAN", "ARITHMETIC", "GEOMETRIC", "WIDTH"]

EUROPEAN, ARITHMETIC, GEOMETRIC = 0, 1, 2
WIDTH = 5

_compiled: dict[str, Any] = {}


def _make() -> Any:
    from numba import njit, prange

    pair = device_functions("cpu")["pair"]

    @njit(inline="always")
    def payoff(value: float, strike: float, call: bool) -> float:
        return max(value - strike, 0.0) if call else max(strike - value, 0.0)

    @njit(inline="always")
    def one_path(
        p, k0, k1, stream, log_s0, drift, vol_dt, steps, strike, call, kind, sign, discount
    ):  # type: ignore[no-untyped-def]
        x = log_s0
        arithmetic = 0.0
        geometric = 0.0
        z2 = 0.0
        for j in range(steps):
            if j % 2 == 0:
                z1, z2 = pair(p, np.uint64(j // 2), k0, k1, stream, True)
                z = z1
            else:
                z = z2
            x += drift + vol_dt * sign * z
            if kind != EUROPEAN:
                arithmetic += math.exp(x)
                geometric += x
        if kind == EUROPEAN:
            terminal = math.exp(x)
            return discount * payoff(terminal, strike, call), discount * terminal
        g = discount * payoff(math.exp(geometric / steps), strike, call)
        if kind == GEOMETRIC:
            return g, 0.0
        return discount * payoff(arithmetic / steps, strike, call), g

    @njit(parallel=True, nogil=True, error_model="numpy")
    def sums(
        out,
        first_block,
        block,
        k0,
        k1,
        stream,
        log_s0,
        drift,
        vol_dt,
        steps,
        strike,
        call,
        kind,
        discount,
        antithetic,
    ):  # type: ignore[no-untyped-def]
        for b in prange(out.shape[0]):
            sy = syy = sc = scc = syc = 0.0
            base = np.uint64(first_block + b) * np.uint64(block)
            for i in range(block):
                p = base + np.uint64(i)
                y, c = one_path(
                    p,
                    k0,
                    k1,
                    stream,
                    log_s0,
                    drift,
                    vol_dt,
                    steps,
                    strike,
                    call,
                    kind,
                    1.0,
                    discount,
                )
                if antithetic:
                    ya, ca = one_path(
                        p,
                        k0,
                        k1,
                        stream,
                        log_s0,
                        drift,
                        vol_dt,
                        steps,
                        strike,
                        call,
                        kind,
                        -1.0,
                        discount,
                    )
                    y = 0.5 * (y + ya)
                    c = 0.5 * (c + ca)
                sy += y
                syy += y * y
                sc += c
                scc += c * c
                syc += y * c
            out[b, 0] = sy
            out[b, 1] = syy
            out[b, 2] = sc
            out[b, 3] = scc
            out[b, 4] = syc

    return sums


def block_sums(first: int, count: int, block: int, params: tuple) -> np.ndarray:
    """Rows of blocks ``first .. first + count - 1`` (``block`` samples each) for the path
    parameters ``params`` = (k0, k1, stream, log_s0, drift, vol_dt, steps, strike, call, kind,
    discount, antithetic)."""
    if "cpu" not in _compiled:
        _compiled["cpu"] = _make()
    out = np.empty((count, WIDTH))
    (k0, k1, stream, log_s0, drift, vol_dt, steps, strike, call, kind, discount, anti) = params
    _compiled["cpu"](
        out,
        first,
        block,
        np.uint64(k0),
        np.uint64(k1),
        np.uint64(stream),
        log_s0,
        drift,
        vol_dt,
        steps,
        strike,
        call,
        kind,
        discount,
        anti,
    )
    return out
