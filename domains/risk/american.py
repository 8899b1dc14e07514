"""American and Bermudan options by Longstaff-Schwartz least-squares Monte Carlo.

Exercise today and at the dates ``T/n .. T`` (the Bermudan with exercise dates
``0, T/n, .., T``). At each date, from the last backwards, the discounted cash flow of the
in-the-money paths is regressed on a polynomial in ``S/K`` (degree ``degree``) and a path
exercises where the payoff beats the fitted continuation value. The price is the mean
discounted cash flow, or the immediate payoff where that is larger (exercise today). Paths
use ``RandomStreams(seed, stream)`` by path index, as the other engines. Known biases: with
``n`` dates the contract is Bermudan (below the American price by O(1/n)); the fitted rule is
suboptimal (low); the in-sample regression adds a small upward bias.

Two generated CPU kernels (:func:`hpc.jit.specialise`) do the work. The first draws the
paths, a block's paths in one vector loop per pair of dates (Philox, Box-Muller and exp
inline; an antithetic partner's spot as a quotient, no second exp), straight into a
date-major layout: blocks of :func:`block_size` paths, each block ``(dates, block)``, so a
date's spots are contiguous and nothing is transposed (in one process
:func:`hpc.run.map_blocks` hands the drawn rows back without a copy); an odd count's last
date has a loop of its own (no spot drawn for the unused sine of its pair). The second
runs the whole backward induction with no Python work per date: one pass over the paths per
date applies the previous date's exercise rule, discounts and accumulates the regression's
normal equations (the power sums of the basis and its products with the cash flow) in
per-block partial sums, added in block order (so the result does not depend on the thread
count); the small system is then solved in the kernel. A third forms the antithetic pair
means in sample order, in place of NumPy's temporaries. The basis is the polynomial in ``u =
(S/K - c) / s``, ``c`` and ``s`` the mean and deviation of the in-the-money ``S/K`` (from a
fixed subsample of blocks, also by per-block sums in block order): the same column space as
the powers of ``S/K``, so the same
fitted continuation values, with a well-conditioned Gram matrix; it is solved by a symmetric
eigendecomposition that drops eigenvalues below ``1e-14`` of the largest (the least-squares
solution of least norm when the basis is rank-deficient, as ``lstsq``). The cash flows match
a NumPy Longstaff-Schwartz on the same normals (``lstsq`` on the powers of ``S/K``) to
rounding.

Both kernels index their arrays with unsigned integers inside the vector loops: a signed
index carries numba's negative-index wraparound (a select per access), which LLVM cannot
remove and which leaves the addresses non-affine, so the loop vectoriser gives up and the
loop runs scalar (numba leaves LLVM's SLP vectoriser off, so scalar sums in registers would
not vectorise either). Unsigned, the backward scan keeps its lane sums in vector registers
and runs 2-3x faster, bitwise the same.
"""

from __future__ import annotations

import math
import time
import types
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from hpc.rng import RandomStreams
from hpc.run import map_blocks

from .engine import PriceResult
from .instruments import GBM, _Option, _whole

__all__ = ["American", "american_lsm", "block_size", "BLOCK"]

BLOCK = 1024  # paths per block (at most): the unit of the partial sums and of map_blocks
LANES = 64  # block sizes are multiples of this (whole vectors in both kernels)
_SAMPLED_BLOCKS = 32  # blocks the basis's centre and scale are taken from (about)
_EIG_TOL = 1e-14  # eigenvalues of the Gram matrix below this share of the largest: dropped
# paths below which the backward induction runs on one thread: it opens a parallel region per
# date, which costs tens of microseconds on an idle machine and up to a scheduler time slice
# (milliseconds) on a busy one; below 2^20 paths (about 10 ms of scan a date) one thread
# measured faster in wall and CPU time on a loaded 2-core machine
_PARALLEL_PATHS = 1 << 20


@dataclass(frozen=True)
class American(_Option):
    """American call or put, exercisable now and at ``exercises`` equally spaced dates
    ``T/n .. T`` (Bermudan)."""

    exercises: int = 100

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "exercises", _whole("exercises", self.exercises))

    @property
    def steps(self) -> int:
        return self.exercises


def block_size(paths: int) -> int:
    """Paths per block for ``paths`` paths: ``BLOCK``, or fewer (a multiple of ``LANES``)
    when there are too few paths to fill it. A function of ``paths`` alone, so the partial
    sums, hence the price, are the same for any executor, rank count and ``batch``."""
    return int(min(BLOCK, LANES * math.ceil(int(paths) / LANES)))


def american_lsm(
    model: GBM,
    option: American,
    paths: int = 100_000,
    seed: int = 0,
    stream: int = 0,
    degree: int = 3,
    executor: str = "local",
    batch: int | None = None,
    comm: Any = None,
    scheduler: Any = None,
    antithetic: bool = False,
) -> PriceResult:
    """Longstaff-Schwartz price of ``option`` (also ``price(model, option, ...)``, which
    takes the default ``antithetic=False``).

    The paths are simulated in blocks of :func:`block_size` paths by
    :func:`hpc.run.map_blocks` on ``executor`` (``"local"``, ``"mpi"``: collective,
    ``"dask"``; ``batch``: blocks per task), path ``i`` from the normals of global index
    ``i``, and gathered on every rank; the backward regression then runs on the whole set of
    paths (one compiled pass per date). So the price is bitwise the same for any executor,
    rank count and ``batch``.

    ``antithetic=True``: ``ceil(paths / 2)`` samples, sample ``i`` from the normals of
    global index ``i`` and its partner from their negatives (half the random numbers a
    path); both paths enter the regression, and the standard error is that of the pair
    means.
    """
    if not isinstance(option, American):
        raise TypeError(f"option: expected American, got {type(option).__name__}")
    paths, degree = int(paths), int(degree)
    if paths < 10 or degree < 1:
        raise ValueError(f"paths={paths}, degree={degree}: need paths >= 10, degree >= 1")
    from hpc.jit import serial_below

    t0 = time.perf_counter()
    n, dt = option.exercises, option.maturity / option.exercises
    block = block_size(paths)
    half = block // 2 if antithetic else block  # samples a block: lanes i and i + half paired
    samples = math.ceil(paths / 2) if antithetic else paths
    nblocks = math.ceil(samples / half)
    fn = partial(_spots, n=n, block=block, half=half, dt=dt, model=model, seed=int(seed),
                 stream=int(stream))  # fmt: skip
    rows = map_blocks(fn, nblocks, n * block, executor, batch, comm, scheduler)
    spots = rows.reshape(nblocks, n, block)  # each date's spots of a block contiguous
    cash = np.empty((nblocks, block))
    part = np.empty((nblocks, 3 * degree + 3))
    call = option.kind == "call"
    k = float(option.strike)
    with serial_below(paths, _PARALLEL_PATHS):
        discount = math.exp(-model.rate * dt)
        _kernels(degree)._lsm_backward(spots, cash, part, samples, half, k, call, discount)
    if antithetic:  # the pair means, into the spots' memory (dead now: no new array)
        reuse = spots.flags.writeable and spots.flags.c_contiguous  # (rows from Dask: maybe not)
        means = spots.reshape(-1)[: nblocks * half] if reuse else np.empty(nblocks * half)
        with serial_below(paths, _PARALLEL_PATHS):
            _kernels(degree)._pair_means(cash, half, means)
        cash = means
    cash = cash.reshape(-1)[:samples]
    estimate = float(cash.mean())
    stderr = float(cash.std(ddof=1) / math.sqrt(samples))
    immediate = max(model.spot - k, 0.0) if call else max(k - model.spot, 0.0)
    estimate = max(estimate, immediate)
    return PriceResult(
        price=estimate,
        stderr=stderr,
        ci95=(estimate - 1.96 * stderr, estimate + 1.96 * stderr),
        paths=samples * (2 if antithetic else 1),
        seconds=time.perf_counter() - t0,
    )


def _spots(
    first: int, count: int, n: int, block: int, half: int, dt: float, model: GBM, seed: int,
    stream: int,
) -> np.ndarray:  # fmt: skip
    """Rows of blocks ``first .. first + count - 1``: block ``b``'s spots at the ``n`` exercise
    dates, ``(n, block)`` flattened (the rows of :func:`hpc.run.map_blocks`); ``half``: the
    samples a block (``block``, or ``block // 2`` with antithetic partners in the second
    half). Path ``p``'s log-spot is ``ln S0 + sum of (drift dt + vol sqrt(dt) z_j)``, summed
    in date order."""
    from hpc.jit import serial_below

    rs = RandomStreams(seed, stream)
    out = np.empty((count, n, block))
    increment = (model.rate - model.dividend - 0.5 * model.vol**2) * dt
    with serial_below(count * block * n):
        _kernels()._lsm_paths(
            out, np.uint64(first), *rs.key, np.uint64(rs.stream),
            math.log(model.spot), increment, model.vol * math.sqrt(dt), half,
        )  # fmt: skip
    return out.reshape(count, n * block)


# --- the kernel templates (compiled by hpc.jit; see the module docstring) --------------------
def _lsm_paths(out, first_block, k0, k1, stream, log_s0, increment, vsd, half):  # type: ignore[no-untyped-def]  # noqa: E501
    """Spots ``out[b, j, i]`` at date ``j + 1`` of sample ``(first_block + b) half + i`` (``i
    < half``) and, when ``half < block``, of its antithetic partner at lane ``i + half``:
    each pair of dates one loop over the block's samples with no calls, which LLVM
    vectorises. Its indices are unsigned (see :func:`_scan_block`), and the loop with
    partners is written apart from the one without: a partner's store (``r1[i + half]``) is,
    without partners, the next date's (``half`` = the block), so one loop for both fails
    LLVM's overlap check at run time and runs scalar (6x slower without partners). A
    partner's spot is ``G / S``, ``G = exp(2 (ln S0 + m))``, ``m`` the date's summed drift:
    its path is the reflection of ``S``'s about ``ln S0 + m``, so this is ``exp`` of its
    log-spot but for rounding (a few ulp), at the cost of a division instead of an
    ``exp``."""
    count, n, block = out.shape
    uhalf = np.uint64(half)
    full = n - n % 2  # dates in whole pairs
    for b in prange(count):
        x = np.zeros(half)  # log-spot minus ln S0, summed in date order
        base = np.uint64(first_block + b) * uhalf
        drift = 0.0
        for j in range(0, full, 2):
            pair = np.uint64(j // 2)
            r1 = out[b, j]
            r2 = out[b, j + 1]
            g1 = _exp(2.0 * (log_s0 + (drift + increment)))
            drift = (drift + increment) + increment
            g2 = _exp(2.0 * (log_s0 + drift))
            if half < block:
                for i in range(half):  # the vector loop
                    ui = np.uint64(i)
                    z1, z2 = _pair(base + ui, pair, k0, k1, stream, True)
                    s1, s2 = _two_dates(r1, r2, x, ui, z1, z2, log_s0, increment, vsd)
                    r1[ui + uhalf] = g1 / s1
                    r2[ui + uhalf] = g2 / s2
            else:
                for i in range(half):
                    ui = np.uint64(i)
                    z1, z2 = _pair(base + ui, pair, k0, k1, stream, True)
                    _two_dates(r1, r2, x, ui, z1, z2, log_s0, increment, vsd)
        if full < n:  # n odd: the last date alone (its pair's sine unused, no spot for it)
            pair = np.uint64(full // 2)
            r1 = out[b, full]
            g1 = _exp(2.0 * (log_s0 + (drift + increment)))
            if half < block:
                for i in range(half):
                    ui = np.uint64(i)
                    z1, z2 = _pair(base + ui, pair, k0, k1, stream, True)
                    s1 = _last_date(r1, x, ui, z1, log_s0, increment, vsd)
                    r1[ui + uhalf] = g1 / s1
            else:
                for i in range(half):
                    ui = np.uint64(i)
                    z1, z2 = _pair(base + ui, pair, k0, k1, stream, True)
                    _last_date(r1, x, ui, z1, log_s0, increment, vsd)


def _two_dates(r1, r2, x, i, z1, z2, log_s0, increment, vsd):  # type: ignore[no-untyped-def]
    """Path ``i``'s spots at two consecutive dates (rows ``r1``, ``r2``) from its normals
    ``z1``, ``z2``; ``x[i]``: its log-spot minus ``ln S0``, carried over. Returns the two
    spots."""
    x1 = x[i] + (increment + vsd * z1)
    s1 = _exp(log_s0 + x1)
    x2 = x1 + (increment + vsd * z2)
    s2 = _exp(log_s0 + x2)
    r1[i] = s1
    r2[i] = s2
    x[i] = x2
    return s1, s2


def _last_date(r1, x, i, z1, log_s0, increment, vsd):  # type: ignore[no-untyped-def]
    """Path ``i``'s spot at the last date (row ``r1``) from its normal ``z1``, as the first
    date of :func:`_two_dates` (the same operations: the same bits). ``x`` is not updated:
    it is dead after this date, and its store kept the loop from vectorising (4.4 against
    27 ns a path, measured). Returns the spot."""
    s1 = _exp(log_s0 + (x[i] + (increment + vsd * z1)))
    r1[i] = s1
    return s1


def _payoff(s: float, strike: float, call: bool) -> float:
    return max(s - strike, 0.0) if call else max(strike - s, 0.0)


def _scan_block(spots, cash, part, b, j, live, half, strike, call, discount, first, update, regress, coef, a0, a1, b0, b1):  # type: ignore[no-untyped-def]  # noqa: E501
    """Block ``b``: the exercise rule of date ``j + 1`` (``update``; ``first``: the cash flows
    are the payoffs at date ``j + 1``, the last, not read from ``cash``), the discount, then the
    regression's sums at date ``j`` (``regress``) into ``part[b]``: count, the power sums
    ``u^0 .. u^2d`` and ``u^0 y .. u^d y`` (``u = S a1 - b1`` at date ``j``, ``S a0 - b0``
    at ``j + 1``: the basis variable, no division in the loop). Branch-free over ``_VEC``
    paths at a time, each lane with its own sums (added in lane order at the end), so LLVM
    vectorises the lane loop: its array indices are unsigned, since a signed index carries
    numba's negative-index wraparound, which LLVM cannot prove away and which leaves the
    addresses non-affine (the loop then stays scalar)."""
    block = cash.shape[1]
    acc = np.zeros((part.shape[1], _VEC))
    for c0 in range(0, block, _VEC):
        for v in range(_VEC):
            i = c0 + v
            ui = np.uint64(i)
            lane = np.uint64(v)
            s = spots[b, j + 1, ui]
            e = _payoff(s, strike, call)
            y = e if first else cash[b, ui]  # first: the cash flow is the last date's payoff
            u = s * a0 - b0
            fit = coef[_DEGREE]
            for d in range(_DEGREE - 1, -1, -1):
                fit = fit * u + coef[d]
            y = e if (e > 0.0) & (e > fit) & update else y
            y = y * discount
            cash[b, ui] = y
            s = spots[b, j, ui]
            sample = i if i < half else i - half
            w = 1.0 if (_payoff(s, strike, call) > 0.0) & (sample < live) & regress else 0.0
            u = s * a1 - b1
            acc[0, lane] += w
            for d in range(2 * _DEGREE + 1):
                acc[1 + d, lane] += w
                if d <= _DEGREE:
                    acc[2 * _DEGREE + 2 + d, lane] += w * y
                w = w * u
    for k in range(part.shape[1]):
        t = 0.0
        for v in range(_VEC):
            t += acc[k, v]
        part[b, k] = t


def _moments_block(spots, part, b, j, live, half, strike, call):  # type: ignore[no-untyped-def]
    """Block ``b`` at date ``j``: the count of in-the-money paths, the sum of their ``S/K``
    and of its square into ``part[b, :3]`` (lane sums as :func:`_scan_block`, vectorised)."""
    block = spots.shape[2]
    acc = np.zeros((3, _VEC))
    for c0 in range(0, block, _VEC):
        for v in range(_VEC):
            i = c0 + v
            lane = np.uint64(v)
            s = spots[b, j, np.uint64(i)]
            sample = i if i < half else i - half
            w = 1.0 if (_payoff(s, strike, call) > 0.0) & (sample < live) else 0.0
            x = w * (s / strike)
            acc[0, lane] += w
            acc[1, lane] += x
            acc[2, lane] += x * x
    for k in range(3):
        t = 0.0
        for v in range(_VEC):
            t += acc[k, v]
        part[b, k] = t


def _centre_scale(spots, part, j, samples, half, strike, call):  # type: ignore[no-untyped-def]
    """Mean and deviation of the in-the-money ``S/K`` at date ``j`` over every
    ``nblocks // 32``-th block (all blocks when that sample has fewer than 2 such paths):
    per-block sums (:func:`_moments_block`, in ``part``) added in block order."""
    nblocks = spots.shape[0]
    c = 0.0
    s1 = 0.0
    s2 = 0.0
    for step in (max(1, nblocks // _SAMPLED_BLOCKS), 1):
        picked = (nblocks + step - 1) // step
        for q in prange(picked):
            b = q * step
            _moments_block(spots, part, b, j, min(half, samples - b * half), half, strike, call)
        c = 0.0
        s1 = 0.0
        s2 = 0.0
        for q in range(picked):
            c += part[q * step, 0]
            s1 += part[q * step, 1]
            s2 += part[q * step, 2]
        if c >= 2.0:
            break
    if c < 1.0:
        return 1.0, 1.0
    mean = s1 / c
    var = s2 / c - mean * mean
    scale = math.sqrt(var) if var > 1e-24 * mean * mean else 1.0
    return mean, scale


def _solve(total, coef):  # type: ignore[no-untyped-def]
    """The least-squares coefficients from the normal equations in ``total`` (as the rows
    of ``part``) into ``coef``: eigenvalues of the Gram matrix by cyclic Jacobi rotations,
    those below ``_EIG_TOL`` of the largest dropped (the minimum-norm solution)."""
    n = _DEGREE + 1
    a = np.empty((n, n))
    v = np.zeros((n, n))
    for r in range(n):
        v[r, r] = 1.0
        for c in range(n):
            a[r, c] = total[1 + r + c]
    for _sweep in range(60):
        off = 0.0
        diag = 0.0
        for r in range(n):
            diag += a[r, r] * a[r, r]
            for c in range(r + 1, n):
                off += a[r, c] * a[r, c]
        if off <= 1e-32 * diag:
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                if a[p, q] == 0.0:
                    continue
                theta = (a[q, q] - a[p, p]) / (2.0 * a[p, q])
                t = (1.0 if theta >= 0.0 else -1.0) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                cs = 1.0 / math.sqrt(t * t + 1.0)
                sn = t * cs
                for k in range(n):  # columns p, q
                    akp = a[k, p]
                    akq = a[k, q]
                    a[k, p] = cs * akp - sn * akq
                    a[k, q] = sn * akp + cs * akq
                for k in range(n):  # rows p, q
                    apk = a[p, k]
                    aqk = a[q, k]
                    a[p, k] = cs * apk - sn * aqk
                    a[q, k] = sn * apk + cs * aqk
                for k in range(n):
                    vkp = v[k, p]
                    vkq = v[k, q]
                    v[k, p] = cs * vkp - sn * vkq
                    v[k, q] = sn * vkp + cs * vkq
    top = 0.0
    for r in range(n):
        top = max(top, abs(a[r, r]))
    for r in range(n):
        coef[r] = 0.0
    for e in range(n):
        lam = a[e, e]
        if lam > _EIG_TOL * top:
            proj = 0.0
            for r in range(n):
                proj += v[r, e] * total[2 * _DEGREE + 2 + r]
            proj /= lam
            for r in range(n):
                coef[r] += proj * v[r, e]


def _lsm_backward(spots, cash, part, samples, half, strike, call, discount):  # type: ignore[no-untyped-def]  # noqa: E501
    """The backward induction over ``spots`` (``(blocks, dates, block)``, ``samples`` in all,
    ``half`` a block): ``cash`` (``(blocks, block)``) ends as each path's cash flow
    discounted to today (``part``: scratch, one row of sums per block)."""
    nblocks, n, block = spots.shape
    width = part.shape[1]
    coef = np.zeros(_DEGREE + 1)
    total = np.zeros(width)
    update = False
    a0, b0 = 1.0, 0.0
    for j in range(n - 2, -2, -1):  # j = -1: the last exercise rule and discount only
        regress = j >= 0
        a1, b1 = 1.0, 0.0
        if regress:
            centre, scale = _centre_scale(spots, part, j, samples, half, strike, call)
            a1, b1 = 1.0 / (strike * scale), centre / scale
        for b in prange(nblocks):
            live = min(half, samples - b * half)
            _scan_block(spots, cash, part, b, j, live, half, strike, call, discount,
                        j == n - 2, update, regress, coef, a0, a1, b0, b1)  # fmt: skip
        if not regress:
            break
        for k in range(width):
            total[k] = 0.0
        for b in range(nblocks):  # in block order: independent of the threads
            for k in range(width):
                total[k] += part[b, k]
        update = total[0] > _DEGREE + 1
        if update:
            _solve(total, coef)
            a0, b0 = a1, b1


def _pair_means(cash, half, out):  # type: ignore[no-untyped-def]
    """``out[b half + i] = (cash[b, i] + cash[b, i + half]) / 2`` for ``i < half``: the mean
    of each antithetic pair in sample order (the operations of ``0.5 * (a + b)``: the same
    bits as NumPy's)."""
    nblocks = cash.shape[0]
    uhalf = np.uint64(half)
    for b in prange(nblocks):
        row = cash[b]
        dst = out[b * half : (b + 1) * half]
        for i in range(half):
            ui = np.uint64(i)
            dst[ui] = 0.5 * (row[ui] + row[ui + uhalf])


prange = range  # placeholders: the generated kernel module imports numba's prange
_pair: Any = None
_exp = math.exp
_DEGREE = 3  # bound per generated module
_VEC = 8  # paths of one vector of the backward scan
_kernel_modules: dict[int, types.ModuleType] = {}


def _kernels(degree: int = 3) -> types.ModuleType:
    """The generated module of the kernels above for polynomials of ``degree`` (a constant
    of the compiled code: its loops unroll), compiled once per machine (disk cache)."""
    if degree not in _kernel_modules:
        from hpc import vmath
        from hpc.jit import specialise
        from hpc.rng import device_functions

        bind = {
            "_exp": vmath.exp,
            "_pair": device_functions("cpu")["pair"],
            "_DEGREE": int(degree),
            "_VEC": _VEC,
            "_SAMPLED_BLOCKS": _SAMPLED_BLOCKS,
            "_EIG_TOL": _EIG_TOL,
        }
        helpers = [
            _two_dates, _last_date, _payoff, _scan_block, _moments_block, _centre_scale, _solve
        ]
        _kernel_modules[degree] = specialise(
                "risk_lsm", [_lsm_paths, _lsm_backward, _pair_means], helpers, bind, "cpu",
            {"error_model": "numpy"},
        )  # fmt: skip
    return _kernel_modules[degree]
