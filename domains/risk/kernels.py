"""Monte Carlo path kernels: each draws its own normals (hpc.rng, by global path index), so no
random numbers are stored and a block's sums depend only on the block number.

Sums per block, in a fixed order (:data:`COLUMNS`): the discounted payoff ``y``, a control
variate ``c`` with known mean, and the pathwise derivatives of ``y`` with respect to the spot
(delta) and the volatility (vega), each with its square (and ``y c``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hpc.rng import device_functions

__all__ = ["block_sums", "EUROPEAN", "ARITHMETIC", "GEOMETRIC", "BARRIER", "COLUMNS", "WIDTH"]

EUROPEAN, ARITHMETIC, GEOMETRIC, BARRIER = 0, 1, 2, 3
COLUMNS = ("y", "yy", "c", "cc", "yc", "d", "dd", "v", "vv")
WIDTH = len(COLUMNS)

_compiled: dict[str, Any] = {}


def _make() -> Any:
    from numba import njit, prange

    pair = device_functions("cpu")["pair"]

    @njit(inline="always")
    def one_path(
        p,
        k0,
        k1,
        stream,
        log_s0,
        s0,
        drift,
        vol,
        dt,
        steps,
        strike,
        call,
        kind,
        barrier,
        up,
        knock_in,
        sign,
        discount,
    ):  # type: ignore[no-untyped-def]
        """(y, c, dy/dS0, dy/dsigma) of one path; ``sign`` -1 flips the normals."""
        x = log_s0
        sqdt = math.sqrt(dt)
        w = 0.0  # Brownian motion at the current date
        arithmetic = 0.0
        geometric = 0.0
        d_arith = 0.0  # d(sum S_j)/dsigma
        d_geo = 0.0  # d(sum ln S_j)/dsigma
        crossed = False
        z2 = 0.0
        for j in range(steps):
            if j % 2 == 0:
                z1, z2 = pair(p, np.uint64(j // 2), k0, k1, stream, True)
                z = sign * z1
            else:
                z = sign * z2
            x += drift + vol * sqdt * z
            w += sqdt * z
            t = (j + 1) * dt
            if kind == ARITHMETIC or kind == GEOMETRIC:
                s = math.exp(x)
                arithmetic += s
                geometric += x
                d_arith += s * (w - vol * t)
                d_geo += w - vol * t
            elif kind == BARRIER:
                s = math.exp(x)
                if (up and s >= barrier) or (not up and s <= barrier):
                    crossed = True
        t = steps * dt
        if kind == EUROPEAN or kind == BARRIER:
            a = math.exp(x)
            da = a * (w - vol * t)
        elif kind == ARITHMETIC:
            a = arithmetic / steps
            da = d_arith / steps
        else:
            a = math.exp(geometric / steps)
            da = a * d_geo / steps
        itm = a > strike if call else a < strike
        y = discount * ((a - strike) if call else (strike - a)) if itm else 0.0
        slope = (discount if call else -discount) if itm else 0.0
        delta = slope * a / s0
        vega = slope * da
        if kind == BARRIER:
            alive = crossed if knock_in else not crossed
            if not alive:
                y = 0.0
            return y, discount * a, 0.0, 0.0  # barrier Greeks: by bumping, not pathwise
        if kind == ARITHMETIC:  # control: the geometric Asian
            g = math.exp(geometric / steps)
            gi = g > strike if call else g < strike
            c = discount * ((g - strike) if call else (strike - g)) if gi else 0.0
            return y, c, delta, vega
        if kind == GEOMETRIC:
            return y, 0.0, delta, vega
        return y, discount * a, delta, vega

    @njit(parallel=True, nogil=True, error_model="numpy")
    def sums(
        out,
        first_block,
        block,
        k0,
        k1,
        stream,
        log_s0,
        s0,
        drift,
        vol,
        dt,
        steps,
        strike,
        call,
        kind,
        barrier,
        up,
        knock_in,
        discount,
        antithetic,
    ):  # type: ignore[no-untyped-def]
        for b in prange(out.shape[0]):
            acc = np.zeros(WIDTH)
            base = np.uint64(first_block + b) * np.uint64(block)
            for i in range(block):
                p = base + np.uint64(i)
                y, c, d, v = one_path(
                    p,
                    k0,
                    k1,
                    stream,
                    log_s0,
                    s0,
                    drift,
                    vol,
                    dt,
                    steps,
                    strike,
                    call,
                    kind,
                    barrier,
                    up,
                    knock_in,
                    1.0,
                    discount,
                )
                if antithetic:
                    ya, ca, da, va = one_path(
                        p,
                        k0,
                        k1,
                        stream,
                        log_s0,
                        s0,
                        drift,
                        vol,
                        dt,
                        steps,
                        strike,
                        call,
                        kind,
                        barrier,
                        up,
                        knock_in,
                        -1.0,
                        discount,
                    )
                    y, c, d, v = 0.5 * (y + ya), 0.5 * (c + ca), 0.5 * (d + da), 0.5 * (v + va)
                acc[0] += y
                acc[1] += y * y
                acc[2] += c
                acc[3] += c * c
                acc[4] += y * c
                acc[5] += d
                acc[6] += d * d
                acc[7] += v
                acc[8] += v * v
            for k in range(WIDTH):
                out[b, k] = acc[k]

    return sums


def block_sums(first: int, count: int, block: int, params: dict[str, Any]) -> np.ndarray:
    """Rows of blocks ``first .. first + count - 1`` (``block`` samples each)."""
    if "cpu" not in _compiled:
        _compiled["cpu"] = _make()
    out = np.empty((count, WIDTH))
    p = params
    _compiled["cpu"](
        out,
        first,
        block,
        np.uint64(p["k0"]),
        np.uint64(p["k1"]),
        np.uint64(p["stream"]),
        p["log_s0"],
        p["s0"],
        p["drift"],
        p["vol"],
        p["dt"],
        p["steps"],
        p["strike"],
        p["call"],
        p["kind"],
        p["barrier"],
        p["up"],
        p["knock_in"],
        p["discount"],
        p["antithetic"],
    )
    return out
