"""The Monte Carlo block-sum kernel: one template per target, specialised per (model, payoff).

A *model* (:mod:`.gbm`, :mod:`.basket`: correlated GBM, :mod:`.heston`) supplies the path
step; a *payoff* (:mod:`.payoff_european`, :mod:`.payoff_asian`, :mod:`.payoff_barrier`,
:mod:`.payoff_lookback`) supplies what is accumulated along the path and the sample's value at
maturity. Both are templates of :func:`hpc.jit.specialise` with fixed names, bound into the
kernel below, so each (model, payoff, target) combination is one generated kernel module,
cached on disk.

Template interface (``st``: the path state, ``(rows, lanes)``; ``r``: the first row of a path
and its antithetic partner at ``r + _HALF``; ``m``/``q``: tuples loaded once per launch from
the model and payoff parameter arrays ``mp``/``pp``):

- model: ``_m_load(mp) -> m``, ``_m_steps(m)``, ``_m_start(st, r, i, m, mp)``,
  ``_m_step(st, i, p, j, k0, k1, stream, m, mp, q, antithetic)`` (steps ``j .. j + _STRIDE
  - 1`` of sample ``p``'s paths and their partners, calling ``_p_observe`` at each
  observation date), ``_m_tail`` (the same for one step ``j``: the steps left over when
  ``_STRIDE`` does not divide their number, in a lane loop of their own),
  ``_m_terminal(st, r, i, m, mp) -> (x, g, t)``: log level, its derivative in the volatility
  and the maturity; the module constants ``STRIDE`` and
  ``PATHS`` (paths of a sample, default 1: path ``k`` at rows ``k _HALF``, its antithetic
  partner at ``(k + PATHS) _HALF``);
- payoff: ``_p_load(pp) -> q``, ``_p_start(st, r, i, q)``, ``_p_observe(st, r, i, x, g, t,
  q)``, ``_p_value(st, r, i, x, g, t, q) -> (y, c, delta, vega)``.

Each kernel draws its own normals (hpc.rng, by global sample index), so no random numbers
are stored and a block's sums depend only on the block number. A sample's values are the mean
over its paths (and their antithetic partners). Sums per block, in a fixed order
(:data:`COLUMNS`): the discounted payoff ``y``, a control variate ``c`` with known mean, and
the pathwise derivatives of ``y`` with respect to the spot (delta) and the volatility (vega),
each with its square (and ``y c``).
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpc.dispatch import DeviceTable
from hpc.rng import device_functions

__all__ = [
    "BLOCKS",
    "KernelSpec",
    "block_sums",
    "paths_per_sample",
    "kernel_module",
    "EUROPEAN",
    "ARITHMETIC",
    "GEOMETRIC",
    "BARRIER",
    "COLUMNS",
    "WIDTH",
    "LANES",
]

EUROPEAN, ARITHMETIC, GEOMETRIC, BARRIER = 0, 1, 2, 3
COLUMNS = ("y", "yy", "c", "cc", "yc", "d", "dd", "v", "vv")
WIDTH = len(COLUMNS)
LANES = 64  # CPU: paths advanced together, one vector loop per time step
_NUMPY_ERRORS = {"error_model": "numpy"}


@dataclass(frozen=True)
class KernelSpec:
    """One pricing problem for the kernel: the model and payoff names (modules of this
    package), their parameter arrays, the compile-time constants of the model (e.g. the asset
    count) and the random stream (``k0, k1, stream``: :attr:`hpc.rng.RandomStreams.key`)."""

    model: str  # "gbm", "correlated" or "heston"
    payoff: str  # "european", "arithmetic", "geometric", "barrier[_price]" or "lookback"
    mp: np.ndarray
    pp: np.ndarray
    k0: int
    k1: int
    stream: int
    antithetic: bool
    constants: tuple = ()  # (name, value) pairs bound into the model's templates


# --- the kernel templates -------------------------------------------------------------------
# Bound per specialisation: _MROWS (model rows per path), _HALF (rows per path: model and
# payoff), _PATHS (paths of a sample), _STATE (rows of the state: the paths and their
# partners), _STRIDE (steps per _m_step).
_MROWS, _HALF, _PATHS, _STATE, _STRIDE = 0, 0, 1, 0, 1


def _exp(x: float) -> float:
    return math.exp(x)


def _log(x: float) -> float:
    return math.log(x)


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


def _begin(st: Any, i: int, m: Any, mp: Any, q: Any) -> None:
    """Fresh state for lane ``i``: the sample's paths and their antithetic partners."""
    for k in range(_STATE):
        st[k, i] = 0.0
    for k in range(2 * _PATHS):
        _m_start(st, k * _HALF, i, m, mp)
        _p_start(st, k * _HALF + _MROWS, i, q)


def _path_value(st: Any, k: int, i: int, m: Any, mp: Any, q: Any) -> tuple:
    """(y, c, delta, vega) of path ``k`` of lane ``i`` (its rows from ``k _HALF``)."""
    x, g, t = _m_terminal(st, k * _HALF, i, m, mp)
    return _p_value(st, k * _HALF + _MROWS, i, x, g, t, q)


def _paths_sum(st: Any, lo: int, hi: int, i: int, m: Any, mp: Any, q: Any) -> tuple:
    """(y, c, delta, vega) summed over paths ``lo .. hi - 1`` of lane ``i``, in order."""
    y, c, d, v = _path_value(st, lo, i, m, mp, q)
    for k in range(lo + 1, hi):
        yk, ck, dk, vk = _path_value(st, k, i, m, mp, q)
        y, c, d, v = y + yk, c + ck, d + dk, v + vk
    return y, c, d, v


def _finish(st: Any, i: int, m: Any, mp: Any, q: Any, antithetic: bool) -> None:
    """The sample's (y, c, delta, vega), the mean over its paths (the sum over the paths
    plus the sum over their antithetic partners), into rows 0..3 (the GPU's; the CPU kernel
    does the same sums in lane loops of their own)."""
    y, c, d, v = _paths_sum(st, 0, _PATHS, i, m, mp, q)
    if antithetic:
        ya, ca, da, va = _paths_sum(st, _PATHS, 2 * _PATHS, i, m, mp, q)
        y, c, d, v = y + ya, c + ca, d + da, v + va
    share = 1.0 / (2 * _PATHS) if antithetic else 1.0 / _PATHS  # 1, 1/2 or 1/4: exact
    st[0, i], st[1, i], st[2, i], st[3, i] = share * y, share * c, share * d, share * v


def _lanes_sums(out, first_block, block, k0, k1, stream, mp, pp, antithetic):  # type: ignore[no-untyped-def]  # noqa: E501
    """The CPU kernel: rows of blocks ``first_block ..`` (``block`` samples each).

    Paths of a block advance ``LANES`` at a time, each time step one loop over lanes with no
    calls (Philox, :mod:`hpc.vmath` exp/log/sincos inline), which LLVM vectorises. Samples are
    summed in path order, so the result does not depend on ``LANES``.
    """
    m = _m_load(mp)
    q = _p_load(pp)
    steps = _m_steps(m)
    full = steps - steps % _STRIDE
    share = 1.0 / (2 * _PATHS) if antithetic else 1.0 / _PATHS  # as _finish
    for b in prange(out.shape[0]):
        st = np.zeros((_STATE, LANES))
        # a sample's (y, c, delta, vega) summed over its paths, then over their partners
        val = np.empty((8, LANES))
        base = np.uint64(first_block + b) * np.uint64(block)
        # the sums in scalars, not an array: LLVM cannot keep array elements in registers
        # across the loop (a store to them might alias ``st``), and a chain of stores and
        # reloads per sample is slower than the add itself. Same operations in the same order
        # as _accumulate (the GPU's), so the same bits.
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = 0.0
        for c0 in range(0, block, LANES):
            n = min(LANES, block - c0)
            for i in range(n):
                _begin(st, i, m, mp, q)
            for j in range(0, full, _STRIDE):
                for i in range(n):  # the vector loop
                    p = base + np.uint64(c0 + i)
                    _m_step(st, i, p, j, k0, k1, stream, m, mp, q, antithetic)
            if _STRIDE > 1:  # (compiled out otherwise: it would slow the basket's loop)
                for j in range(full, steps):  # no draws under a condition in the loop above
                    for i in range(n):
                        p = base + np.uint64(c0 + i)
                        _m_tail(st, i, p, j, k0, k1, stream, m, mp, q, antithetic)
            # _finish's sums, in its order, the partners in a loop of their own: a branch on
            # ``antithetic`` around payoffs inside the lane loop keeps it from vectorising
            for i in range(n):
                y, c, d, v = _paths_sum(st, 0, _PATHS, i, m, mp, q)
                val[0, i], val[1, i], val[2, i], val[3, i] = y, c, d, v
            if antithetic:
                for i in range(n):
                    y, c, d, v = _paths_sum(st, _PATHS, 2 * _PATHS, i, m, mp, q)
                    val[4, i], val[5, i], val[6, i], val[7, i] = y, c, d, v
            for i in range(n):  # in path order
                y, c, d, v = val[0, i], val[1, i], val[2, i], val[3, i]
                if antithetic:
                    y, c, d, v = y + val[4, i], c + val[5, i], d + val[6, i], v + val[7, i]
                y, c, d, v = share * y, share * c, share * d, share * v
                a0 += y
                a1 += y * y
                a2 += c
                a3 += c * c
                a4 += y * c
                a5 += d
                a6 += d * d
                a7 += v
                a8 += v * v
        out[b, 0], out[b, 1], out[b, 2], out[b, 3], out[b, 4] = a0, a1, a2, a3, a4
        out[b, 5], out[b, 6], out[b, 7], out[b, 8] = a5, a6, a7, a8


def _gpu_samples(values, first, k0, k1, stream, mp, pp, antithetic):  # type: ignore[no-untyped-def]  # noqa: E501
    """GPU: one thread per sample writing its (y, c, delta, vega)."""
    i = cuda.grid(1)
    if i < values.shape[1]:
        m = _m_load(mp)
        q = _p_load(pp)
        st = cuda.local.array((_STATE, 1), float64)
        _begin(st, 0, m, mp, q)
        p = first + np.uint64(i)
        steps = _m_steps(m)
        full = steps - steps % _STRIDE
        for j in range(0, full, _STRIDE):
            _m_step(st, 0, p, j, k0, k1, stream, m, mp, q, antithetic)
        for j in range(full, steps):
            _m_tail(st, 0, p, j, k0, k1, stream, m, mp, q, antithetic)
        _finish(st, 0, m, mp, q, antithetic)
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


def _unbound(*args: Any) -> Any:
    raise NotImplementedError("a template of the model or payoff, bound in the kernel")


# the model's and payoff's templates (see the module docstring), replaced in the kernel
_m_load = _m_steps = _m_start = _m_step = _m_tail = _m_terminal = _unbound
_p_load = _p_start = _p_value = _unbound


# --- the factory: one generated module per (model, payoff, constants, target) ----------------
_compiled: dict[Any, types.ModuleType] = {}


def _parts(name: str) -> types.ModuleType:
    from importlib import import_module

    modules = {
        "gbm": ".gbm",
        "correlated": ".basket",
        "heston": ".heston",
        "european": ".payoff_european",
        "arithmetic": ".payoff_asian",
        "geometric": ".payoff_asian",
        "barrier": ".payoff_barrier",
        "barrier_price": ".payoff_barrier",  # without the Greeks' bumped copies
        "lookback": ".payoff_lookback",
    }
    if name not in modules:
        raise ValueError(f"no kernel template {name!r}")
    return import_module(modules[name], __package__)


def kernel_module(model: str, payoff: str, constants: tuple, target: str) -> types.ModuleType:
    """The generated kernel module of ``model`` and ``payoff`` for ``target`` (``"cpu"`` or
    ``"cuda"``), compiled once per machine (disk cache) and kept for this process."""
    from hpc import vmath
    from hpc.jit import specialise

    key = (model, payoff, constants, target)
    if key in _compiled:
        return _compiled[key]
    mod, pay = _parts(model), _parts(payoff)
    mrows = mod.rows(dict(constants))
    half = mrows + (pay.rows(payoff) if hasattr(pay, "rows") else pay.ROWS)
    paths = getattr(mod, "PATHS", 1)
    bind: dict[str, Any] = {
        **dict(constants),
        **pay.constants(payoff),
        "_MROWS": mrows,
        "_HALF": half,
        "_PATHS": paths,
        "_STATE": 2 * paths * half,
        "_STRIDE": mod.STRIDE,
    }
    helpers = [
        _accumulate, _begin, _path_value, _paths_sum, _finish, *mod.TEMPLATES, *pay.TEMPLATES
    ]
    if target == "cpu":
        bind.update(_exp=vmath.exp, _log=vmath.log, _pair=device_functions("cpu")["pair"])
        module = specialise("risk_lanes", [_lanes_sums], helpers, bind, "cpu", _NUMPY_ERRORS)
    else:
        bind["_pair"] = device_functions("gpu")["pair"]
        kernels = [_gpu_samples, _gpu_block_totals]
        module = specialise("risk_paths", kernels, [_exp, _log, *helpers], bind, "cuda")
    _compiled[key] = module
    return module


def paths_per_sample(spec: KernelSpec) -> int:
    """Paths one sample of ``spec`` simulates: its model's ``PATHS``, twice that with
    antithetic partners."""
    return int(getattr(_parts(spec.model), "PATHS", 1)) * (2 if spec.antithetic else 1)


BLOCKS = DeviceTable("risk.kernels")
"""The block-sum kernel of each device: ``BLOCKS.on(backend).block_rows(first, count, block,
spec, xp=None)`` (the CPU lane kernel; on the GPU the sample and block-total kernels)."""


def block_sums(
    first: int, count: int, block: int, spec: Any, backend: Any = "cpu", xp: Any = None
) -> np.ndarray:
    """``(count, WIDTH)`` sums of blocks ``first .. first + count - 1`` (``block`` samples
    each) of ``spec`` (a :class:`KernelSpec`, or the parameter dict of a GBM option, as
    earlier versions took), on ``backend``'s device (a :class:`hpc.backend.Backend` or its
    name; ``xp``: the device array module, from :mod:`hpc.backend`); the rows come back to
    the host either way."""
    return BLOCKS.on(backend).block_rows(first, count, block, spec, xp)


def _stream(spec: KernelSpec) -> tuple[np.uint64, np.uint64, np.uint64]:
    return np.uint64(spec.k0), np.uint64(spec.k1), np.uint64(spec.stream)


@BLOCKS.cpu("block_rows")
def _cpu_block_sums(first: int, count: int, block: int, spec: Any, xp: Any = None) -> np.ndarray:
    """:func:`block_sums` on the CPU: the lane kernel (``xp`` is not used: the rows are host
    arrays)."""
    if isinstance(spec, dict):
        spec = _from_params(spec)
    module = kernel_module(spec.model, spec.payoff, spec.constants, "cpu")
    out = np.empty((count, WIDTH))
    module._lanes_sums(out, first, block, *_stream(spec), spec.mp, spec.pp, spec.antithetic)
    return out


@BLOCKS.gpu("block_rows")
def _gpu_block_sums(first: int, count: int, block: int, spec: Any, xp: Any = None) -> np.ndarray:
    """:func:`block_sums` on the GPU, in launches of at most about 2**22 samples (``xp``:
    the device array module; default: the GPU backend's, NumPy under the CUDA simulator)."""
    if isinstance(spec, dict):
        spec = _from_params(spec)
    if xp is None:
        from hpc.backend import get_backend

        xp = get_backend("gpu").xp
    module = kernel_module(spec.model, spec.payoff, spec.constants, "cuda")
    samples, block_totals = module._gpu_samples, module._gpu_block_totals
    per_launch = max(1, (1 << 22) // block)
    out = xp.empty((count, WIDTH))
    values = xp.empty((4, min(count, per_launch) * block))
    mp, pp = xp.asarray(spec.mp), xp.asarray(spec.pp)
    k0, k1, stream = _stream(spec)
    threads = 128
    for b0 in range(0, count, per_launch):
        nb = min(per_launch, count - b0)
        n = nb * block
        samples[(n + threads - 1) // threads, threads](
            values, np.uint64((first + b0) * block), k0, k1, stream, mp, pp, spec.antithetic
        )
        block_totals[(nb + threads - 1) // threads, threads](out[b0 : b0 + nb], values, block)
    return out.get() if hasattr(out, "get") else np.asarray(out)


_PAYOFFS = {EUROPEAN: "european", ARITHMETIC: "arithmetic", GEOMETRIC: "geometric"}


def _from_params(p: dict[str, Any]) -> KernelSpec:
    """A :class:`KernelSpec` from the parameter dict of a GBM option (``kind``, ``k0``, ``k1``,
    ``stream``, ``log_s0``, ``s0``, ``drift``, ``vol``, ``dt``, ``steps``, ``strike``,
    ``call``, ``discount``, ``antithetic``; barriers: ``barrier``, ``up``, ``knock_in``)."""
    from . import gbm

    kind = p["kind"]
    mp = gbm.pack(p["log_s0"], p["drift"], p["vol"], p["dt"], p["steps"])
    payoff = _PAYOFFS.get(kind, "barrier")
    pay = _parts(payoff)
    extra = {}
    if kind == BARRIER:
        extra = dict(log_barrier=math.log(p["barrier"]), up=p["up"], knock_in=p["knock_in"])
    pp = pay.pack(p["strike"], p["call"], p["discount"], p["s0"], p["steps"], **extra)
    return KernelSpec(
        "gbm", payoff, mp, pp, int(p["k0"]), int(p["k1"]), int(p["stream"]), bool(p["antithetic"])
    )
