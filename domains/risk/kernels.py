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

_compiled: dict[Any, Any] = {}


def _accumulate(acc: Any, y: float, c: float, d: float, v: float) -> None:
    """Add one sample to the block's sums, in :data:`COLUMNS` order."""
    acc[0] += y
    acc[1] += y * y
    acc[2] += c
    acc[3] += c * c
    acc[4] += y * c
    acc[5] += d
    acc[6] += d * d
    acc[7] += v
    acc[8] += v * v


def _accumulator() -> Any:
    from numba import njit

    return njit(inline="always")(_accumulate)


def _make_barrier() -> Any:
    """The barrier kernel: one path at a time, with four bumped copies for the Greeks."""
    from numba import njit, prange

    pair = device_functions("cpu")["pair"]
    accumulate = _accumulator()

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
        log_barrier,
        up,
        knock_in,
        sign,
        discount,
    ):  # type: ignore[no-untyped-def]
        """(y, c, dy/dS0, dy/dsigma) of one path; ``sign`` -1 flips the normals."""
        x = log_s0
        sqdt = math.sqrt(dt)
        w = 0.0  # Brownian motion at the current date
        hit = np.zeros(5, dtype=np.bool_)
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
        return ys[0], discount * math.exp(x), delta, vega

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
        discount,
        antithetic,
        barrier,
        up,
        knock_in,
    ):  # type: ignore[no-untyped-def]
        log_barrier = math.log(barrier)
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
                    log_barrier,
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
                        log_barrier,
                        up,
                        knock_in,
                        -1.0,
                        discount,
                    )
                    y, c, d, v = 0.5 * (y + ya), 0.5 * (c + ca), 0.5 * (d + da), 0.5 * (v + va)
                accumulate(acc, y, c, d, v)
            for k in range(WIDTH):
                out[b, k] = acc[k]

    return sums


LANES = 64  # paths advanced together: one vector loop per time step


def _make_lanes(kind: int) -> Any:
    """The vectorised kernel for European and Asian payoffs (``kind`` fixed at compile time).

    Paths of a block advance ``LANES`` at a time, each time step one loop over lanes with no
    calls (Philox, :mod:`hpc.vmath` exp/log/sincos inline), which LLVM vectorises. Per path the
    arithmetic is the scalar kernel's, so the result is independent of ``LANES``.
    """
    from numba import njit, prange

    from hpc import vmath

    pair = device_functions("cpu")["pair"]
    accumulate = _accumulator()
    vexp = vmath.exp
    asian = kind == ARITHMETIC or kind == GEOMETRIC

    @njit(inline="always")
    def advance(st, r, i, z, drift, vsd, sqdt, vt):  # type: ignore[no-untyped-def]
        """One time step of the path whose state is ``st[r:r + 6, i]`` (``vt``: vol x date)."""
        x = st[r, i] + (drift + vsd * z)
        w = st[r + 1, i] + sqdt * z
        st[r, i] = x
        st[r + 1, i] = w
        if asian:
            s = vexp(x)
            st[r + 2, i] += s  # sum of S
            st[r + 3, i] += x  # sum of ln S
            st[r + 4, i] += s * (w - vt)  # its vol derivative
            st[r + 5, i] += w - vt

    @njit(inline="always")
    def payoff(st, r, i, steps, strike, call, s0, vol, t, discount):  # type: ignore[no-untyped-def]
        """(y, c, delta, vega) of the finished path ``st[r:r + 6, i]``."""
        x, w, ar, ge, dar, dge = (
            st[r, i],
            st[r + 1, i],
            st[r + 2, i],
            st[r + 3, i],
            st[r + 4, i],
            st[r + 5, i],
        )
        if kind == EUROPEAN:
            a = vexp(x)
            da = a * (w - vol * t)
        elif kind == ARITHMETIC:
            a = ar / steps
            da = dar / steps
        else:
            a = vexp(ge / steps)
            da = a * dge / steps
        itm = a > strike if call else a < strike
        y = discount * ((a - strike) if call else (strike - a)) if itm else 0.0
        slope = (discount if call else -discount) if itm else 0.0
        if kind == ARITHMETIC:  # control: the geometric Asian
            g = vexp(ge / steps)
            gi = g > strike if call else g < strike
            c = discount * ((g - strike) if call else (strike - g)) if gi else 0.0
        elif kind == GEOMETRIC:
            c = 0.0
        else:
            c = discount * a
        return y, c, slope * a / s0, slope * da

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
        discount,
        antithetic,
    ):  # type: ignore[no-untyped-def]
        sqdt = math.sqrt(dt)
        vsd = vol * sqdt
        t_end = steps * dt
        for b in prange(out.shape[0]):
            acc = np.zeros(WIDTH)
            # per-lane state (x, w, sum S, sum ln S and their vol derivatives) of the path
            # (rows 0..5) and of its antithetic partner (rows 6..11)
            st = np.zeros((12, LANES))
            base = np.uint64(first_block + b) * np.uint64(block)
            for c0 in range(0, block, LANES):
                n = min(LANES, block - c0)
                st[:, :] = 0.0
                st[0, :] = log_s0
                st[6, :] = log_s0
                for j in range(0, steps, 2):
                    vt1 = vol * (j + 1) * dt
                    vt2 = vol * (j + 2) * dt
                    second = j + 1 < steps
                    for i in range(n):  # the vector loop
                        p = base + np.uint64(c0 + i)
                        z1, z2 = pair(p, np.uint64(j // 2), k0, k1, stream, True)
                        advance(st, 0, i, z1, drift, vsd, sqdt, vt1)
                        if second:
                            advance(st, 0, i, z2, drift, vsd, sqdt, vt2)
                        if antithetic:
                            advance(st, 6, i, -z1, drift, vsd, sqdt, vt1)
                            if second:
                                advance(st, 6, i, -z2, drift, vsd, sqdt, vt2)
                for i in range(n):  # payoffs, vectorised, into rows 0..3
                    y, c, d, v = payoff(st, 0, i, steps, strike, call, s0, vol, t_end, discount)
                    if antithetic:
                        ya, ca, da, va = payoff(
                            st, 6, i, steps, strike, call, s0, vol, t_end, discount
                        )
                        y, c, d, v = 0.5 * (y + ya), 0.5 * (c + ca), 0.5 * (d + da), 0.5 * (v + va)
                    st[0, i], st[1, i], st[2, i], st[3, i] = y, c, d, v
                for i in range(n):  # in path order: the block's sums do not depend on LANES
                    accumulate(acc, st[0, i], st[1, i], st[2, i], st[3, i])
            for k in range(WIDTH):
                out[b, k] = acc[k]

    return sums


def block_sums(first: int, count: int, block: int, params: dict[str, Any]) -> np.ndarray:
    """Rows of blocks ``first .. first + count - 1`` (``block`` samples each)."""
    p = params
    kind = p["kind"]
    if kind not in _compiled:
        _compiled[kind] = _make_barrier() if kind == BARRIER else _make_lanes(kind)
    out = np.empty((count, WIDTH))
    args = [
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
        p["discount"],
        p["antithetic"],
    ]
    if kind == BARRIER:
        args += [p["barrier"], p["up"], p["knock_in"]]
    _compiled[kind](*args)
    return out
