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
SPOT_BUMP = 0.01  # barrier Greeks: log-spot bump (about 1%) ...
VOL_BUMP = 0.01  # ... and absolute volatility bump, central differences on common paths
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
        hit = np.zeros(5, dtype=np.bool_)
        log_barrier = math.log(barrier) if kind == BARRIER else 0.0
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
                # the path and its four bumped versions (spot +-1%, vol +-0.01) on the same
                # Brownian motion: common random numbers for the finite-difference Greeks
                for m in range(5):
                    xm = x
                    if m == 1 or m == 2:
                        xm = x + (SPOT_BUMP if m == 1 else -SPOT_BUMP)
                    elif m >= 3:
                        vm = vol + (VOL_BUMP if m == 3 else -VOL_BUMP)
                        xm = log_s0 + (drift / dt + 0.5 * vol * vol - 0.5 * vm * vm) * t + vm * w
                    if (up and xm >= log_barrier) or (not up and xm <= log_barrier):
                        hit[m] = True
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
            ys = np.zeros(5)
            for m in range(5):
                if m == 0:
                    xm = x
                elif m <= 2:
                    xm = x + (SPOT_BUMP if m == 1 else -SPOT_BUMP)
                else:
                    vm = vol + (VOL_BUMP if m == 3 else -VOL_BUMP)
                    xm = log_s0 + (drift / dt + 0.5 * vol * vol - 0.5 * vm * vm) * t + vm * w
                am = math.exp(xm)
                pay = max(am - strike, 0.0) if call else max(strike - am, 0.0)
                alive = hit[m] if knock_in else not hit[m]
                ys[m] = discount * pay if alive else 0.0
            delta = (ys[1] - ys[2]) / (s0 * (math.exp(SPOT_BUMP) - math.exp(-SPOT_BUMP)))
            vega = (ys[3] - ys[4]) / (2.0 * VOL_BUMP)
            return ys[0], discount * a, delta, vega
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
