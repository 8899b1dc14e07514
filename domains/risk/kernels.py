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

__all__ = [
    "block_sums",
    "path_rows",
    "EUROPEAN",
    "ARITHMETIC",
    "GEOMETRIC",
    "BARRIER",
    "COLUMNS",
    "WIDTH",
]

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


def _barrier_path(
    p, k0, k1, stream, log_s0, s0, drift, vol, dt, steps, strike, call, log_barrier, up,
    knock_in, sign, discount,
):  # type: ignore[no-untyped-def]
    """(y, c, dy/dS0, dy/dsigma) of one barrier path; ``sign`` -1 flips the normals."""
    x = log_s0
    sqdt = math.sqrt(dt)
    w = 0.0  # Brownian motion at the current date
    hit = np.zeros(5, dtype=np.bool_)
    z2 = 0.0
    for j in range(steps):
        if j % 2 == 0:
            z1, z2 = _pair(p, np.uint64(j // 2), k0, k1, stream, True)
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


def _barrier_sums(
    out, first_block, block, k0, k1, stream, log_s0, s0, drift, vol, dt, steps, strike, call,
    discount, antithetic, barrier, up, knock_in,
):  # type: ignore[no-untyped-def]
    """The barrier kernel: one path at a time, with four bumped copies for the Greeks."""
    log_barrier = math.log(barrier)
    for b in prange(out.shape[0]):
        acc = np.zeros(WIDTH)
        base = np.uint64(first_block + b) * np.uint64(block)
        for i in range(block):
            p = base + np.uint64(i)
            y, c, d, v = _barrier_path(
                p, k0, k1, stream, log_s0, s0, drift, vol, dt, steps, strike, call,
                log_barrier, up, knock_in, 1.0, discount,
            )
            if antithetic:
                ya, ca, da, va = _barrier_path(
                    p, k0, k1, stream, log_s0, s0, drift, vol, dt, steps, strike, call,
                    log_barrier, up, knock_in, -1.0, discount,
                )
                y, c, d, v = 0.5 * (y + ya), 0.5 * (c + ca), 0.5 * (d + da), 0.5 * (v + va)
            _accumulate(acc, y, c, d, v)
        for k in range(WIDTH):
            out[b, k] = acc[k]


LANES = 64  # CPU: paths advanced together, one vector loop per time step
STATE = 12  # per path: x, w, sum S, sum ln S, their vol derivatives; again for its partner


# --- one description of a path, compiled for the CPU and the GPU ----------------------------
# Templates of hpc.jit.specialise: ``_KIND``, ``_ASIAN``, ``_exp``, ``_pair`` are bound per
# target and payoff in the generated modules, which numba caches on disk.
_KIND, _ASIAN = EUROPEAN, False


def _exp(x: float) -> float:
    return math.exp(x)


def _pair(index: Any, pair: Any, k0: Any, k1: Any, stream: Any, normal: bool) -> tuple:
    raise NotImplementedError  # rebound to hpc.rng's compiled pair


def _advance(
    st: Any, r: int, i: int, z: float, drift: float, vsd: float, sqdt: float, vt: float
) -> None:  # noqa: E501
    """One time step of the path whose state is ``st[r:r + 6, i]`` (``vt``: vol x date)."""
    x = st[r, i] + (drift + vsd * z)
    w = st[r + 1, i] + sqdt * z
    st[r, i] = x
    st[r + 1, i] = w
    if _ASIAN:
        s = _exp(x)
        st[r + 2, i] += s  # sum of S
        st[r + 3, i] += x  # sum of ln S
        st[r + 4, i] += s * (w - vt)  # its vol derivative
        st[r + 5, i] += w - vt


def _two_steps(
    st: Any,
    i: int,
    p: Any,
    j: int,
    k0: Any,
    k1: Any,
    stream: Any,
    drift: float,
    vol: float,
    dt: float,
    steps: int,
    antithetic: bool,
) -> None:  # noqa: E501
    """Steps ``j`` and ``j + 1`` (if any) of path ``p`` and its antithetic partner: one pair
    of normals, dimensions ``j`` and ``j + 1`` of the path's stream."""
    sqdt = math.sqrt(dt)
    vsd = vol * sqdt
    vt1 = vol * (j + 1) * dt
    vt2 = vol * (j + 2) * dt
    z1, z2 = _pair(p, np.uint64(j // 2), k0, k1, stream, True)
    _advance(st, 0, i, z1, drift, vsd, sqdt, vt1)
    if j + 1 < steps:
        _advance(st, 0, i, z2, drift, vsd, sqdt, vt2)
    if antithetic:
        _advance(st, 6, i, -z1, drift, vsd, sqdt, vt1)
        if j + 1 < steps:
            _advance(st, 6, i, -z2, drift, vsd, sqdt, vt2)


def _payoff(
    st: Any,
    r: int,
    i: int,
    steps: int,
    strike: float,
    call: bool,
    s0: float,
    vol: float,
    t: float,
    discount: float,
) -> tuple:  # noqa: E501
    """(y, c, delta, vega) of the finished path ``st[r:r + 6, i]``."""
    x, w, ar, ge, dar, dge = (
        st[r, i], st[r + 1, i], st[r + 2, i], st[r + 3, i], st[r + 4, i], st[r + 5, i]
    )  # fmt: skip
    if _KIND == EUROPEAN:
        a = _exp(x)
        da = a * (w - vol * t)
    elif _KIND == ARITHMETIC:
        a = ar / steps
        da = dar / steps
    else:
        a = _exp(ge / steps)
        da = a * dge / steps
    itm = a > strike if call else a < strike
    y = discount * ((a - strike) if call else (strike - a)) if itm else 0.0
    slope = (discount if call else -discount) if itm else 0.0
    if _KIND == ARITHMETIC:  # control: the geometric Asian
        g = _exp(ge / steps)
        gi = g > strike if call else g < strike
        c = discount * ((g - strike) if call else (strike - g)) if gi else 0.0
    elif _KIND == GEOMETRIC:
        c = 0.0
    else:
        c = discount * a
    return y, c, slope * a / s0, slope * da


def _finish(
    st: Any,
    i: int,
    steps: int,
    strike: float,
    call: bool,
    s0: float,
    vol: float,
    t: float,
    discount: float,
    antithetic: bool,
) -> None:  # noqa: E501
    """The sample's (y, c, delta, vega), averaged over the antithetic pair, into rows 0..3."""
    y, c, d, v = _payoff(st, 0, i, steps, strike, call, s0, vol, t, discount)
    if antithetic:
        ya, ca, da, va = _payoff(st, 6, i, steps, strike, call, s0, vol, t, discount)
        y, c, d, v = 0.5 * (y + ya), 0.5 * (c + ca), 0.5 * (d + da), 0.5 * (v + va)
    st[0, i], st[1, i], st[2, i], st[3, i] = y, c, d, v


def _lanes_sums(
    out, first_block, block, k0, k1, stream, log_s0, s0, drift, vol, dt, steps, strike, call,
    discount, antithetic,
):  # type: ignore[no-untyped-def]
    """The CPU kernel for European and Asian payoffs (``_KIND`` fixed at compile time).

    Paths of a block advance ``LANES`` at a time, each time step one loop over lanes with no
    calls (Philox, :mod:`hpc.vmath` exp/log/sincos inline), which LLVM vectorises. Samples are
    summed in path order, so the result does not depend on ``LANES``.
    """
    for b in prange(out.shape[0]):
        acc = np.zeros(WIDTH)
        st = np.zeros((STATE, LANES))
        base = np.uint64(first_block + b) * np.uint64(block)
        for c0 in range(0, block, LANES):
            n = min(LANES, block - c0)
            st[:, :] = 0.0
            st[0, :] = log_s0
            st[6, :] = log_s0
            for j in range(0, steps, 2):
                for i in range(n):  # the vector loop
                    p = base + np.uint64(c0 + i)
                    _two_steps(st, i, p, j, k0, k1, stream, drift, vol, dt, steps, antithetic)
            for i in range(n):  # vectorised too
                _finish(st, i, steps, strike, call, s0, vol, steps * dt, discount, antithetic)
            for i in range(n):  # in path order
                _accumulate(acc, st[0, i], st[1, i], st[2, i], st[3, i])
        for k in range(WIDTH):
            out[b, k] = acc[k]


def _gpu_samples(
    values, first, k0, k1, stream, log_s0, s0, drift, vol, dt, steps, strike, call, discount,
    antithetic,
):  # type: ignore[no-untyped-def]
    """GPU: one thread per sample writing its (y, c, delta, vega)."""
    i = cuda.grid(1)
    if i < values.shape[1]:
        st = cuda.local.array((STATE, 1), float64)
        for r in range(STATE):
            st[r, 0] = 0.0
        st[0, 0] = log_s0
        st[6, 0] = log_s0
        p = first + np.uint64(i)
        for j in range(0, steps, 2):
            _two_steps(st, 0, p, j, k0, k1, stream, drift, vol, dt, steps, antithetic)
        _finish(st, 0, steps, strike, call, s0, vol, steps * dt, discount, antithetic)
        for r in range(4):
            values[r, i] = st[r, 0]


def _gpu_block_totals(out, values, block):  # type: ignore[no-untyped-def]
    """GPU: one thread per block summing its samples in path order (the CPU's order)."""
    b = cuda.grid(1)
    if b < out.shape[0]:
        acc = cuda.local.array(WIDTH, float64)
        for k in range(WIDTH):
            acc[k] = 0.0
        for i in range(b * block, (b + 1) * block):
            _accumulate(acc, values[0, i], values[1, i], values[2, i], values[3, i])
        for k in range(WIDTH):
            out[b, k] = acc[k]


prange = range  # placeholders: the generated kernel modules import numba's prange, cuda ...
cuda: Any = None
float64: Any = None
_PATH = (_advance, _payoff, _two_steps, _finish, _accumulate)


def _make(kind: int, target: str) -> Any:
    """The generated kernel module of ``kind`` for ``target`` (``"cpu"`` or ``"cuda"``)."""
    from hpc import vmath
    from hpc.jit import specialise

    if kind == BARRIER:
        bind = {"_pair": device_functions("cpu")["pair"]}
        helpers = [_accumulate, _barrier_path]
        return specialise("risk_barrier", [_barrier_sums], helpers, bind, "cpu", _NUMPY_ERRORS)
    names = {"_KIND": kind, "_ASIAN": kind in (ARITHMETIC, GEOMETRIC)}
    if target == "cpu":
        bind = {**names, "_exp": vmath.exp, "_pair": device_functions("cpu")["pair"]}
        return specialise("risk_lanes", [_lanes_sums], _PATH, bind, "cpu", _NUMPY_ERRORS)
    bind = {**names, "_pair": device_functions("gpu")["pair"]}
    kernels = [_gpu_samples, _gpu_block_totals]
    return specialise("risk_paths", kernels, [_exp, *_PATH], bind, "cuda")


_NUMPY_ERRORS = {"error_model": "numpy"}


def path_rows(
    kernel: Any, helpers: tuple, width: int, first: int, count: int, block: int, args: tuple
) -> np.ndarray:
    """``(count, width)`` sums of blocks ``first ..`` by the CPU template ``kernel``
    ``(out, first_block, block, *args)``, whose templates draw normals by ``_pair`` (bound to
    :mod:`hpc.rng`'s); compiled once per machine through :func:`hpc.jit.specialise`."""
    from hpc.jit import specialise

    key = ("rows", kernel)
    if key not in _compiled:
        bind = {"_pair": device_functions("cpu")["pair"]}
        label = kernel.__name__.strip("_")
        module = specialise(f"risk_{label}", [kernel], helpers, bind, "cpu", _NUMPY_ERRORS)
        _compiled[key] = getattr(module, kernel.__name__)
    out = np.empty((count, width))
    _compiled[key](out, first, block, *args)
    return out


def _gpu_block_sums(
    first: int, count: int, block: int, p: dict[str, Any], xp: Any = None
) -> np.ndarray:
    """:func:`block_sums` on the GPU, in launches of at most about 2**22 samples (``xp``:
    the device array module, CuPy; NumPy under the CUDA simulator)."""
    if xp is None:
        import cupy as xp

    key = ("gpu", p["kind"])
    if key not in _compiled:
        module = _make(p["kind"], "cuda")
        _compiled[key] = (module._gpu_samples, module._gpu_block_totals)
    samples, block_totals = _compiled[key]
    per_launch = max(1, (1 << 22) // block)
    out = xp.empty((count, WIDTH))
    values = xp.empty((4, min(count, per_launch) * block))
    threads = 128
    for b0 in range(0, count, per_launch):
        nb = min(per_launch, count - b0)
        n = nb * block
        samples[(n + threads - 1) // threads, threads](
            values, np.uint64((first + b0) * block), *_scalars(p)
        )
        block_totals[(nb + threads - 1) // threads, threads](out[b0 : b0 + nb], values, block)
    return out.get() if hasattr(out, "get") else out


def _scalars(p: dict[str, Any]) -> list[Any]:
    """The kernels' scalar arguments after the output and position, in order."""
    return [
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


def block_sums(
    first: int, count: int, block: int, params: dict[str, Any], gpu: bool = False
) -> np.ndarray:
    """Rows of blocks ``first .. first + count - 1`` (``block`` samples each), on the CPU or,
    for European and Asian payoffs, the GPU (the rows come back to the host either way)."""
    p = params
    kind = p["kind"]
    if gpu and kind != BARRIER:
        return _gpu_block_sums(first, count, block, p)
    if kind not in _compiled:
        module = _make(kind, "cpu")
        _compiled[kind] = module._barrier_sums if kind == BARRIER else module._lanes_sums
    out = np.empty((count, WIDTH))
    args = [out, first, block, *_scalars(p)]
    if kind == BARRIER:
        args += [p["barrier"], p["up"], p["knock_in"]]
    _compiled[kind](*args)
    return out
