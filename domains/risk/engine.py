"""Monte Carlo pricing, one entry point (:func:`price`) for every model and instrument: paths
in fixed blocks of one generated kernel, run by hpc.run, reduced exactly."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from hpc.rng import RandomStreams
from hpc.run import exact_sum, map_blocks

from . import kernels
from .instruments import (
    GBM,
    AsianArithmetic,
    AsianGeometric,
    Barrier,
    European,
    Heston,
    Lookback,
)
from .var import Market

__all__ = ["PriceResult", "price", "DEFAULT_BLOCK"]

DEFAULT_BLOCK = 4096  # samples per block: the unit of reproducibility


@dataclass(frozen=True)
class PriceResult:
    """A Monte Carlo price with its statistical error.

    Attributes
    ----------
    price, stderr : float
        Estimate and its standard error.
    ci95 : tuple of float
        ``price -+ 1.96 stderr``.
    paths : int
        Simulated paths (an antithetic pair counts two).
    seconds : float
        Wall time of the simulation.
    control_beta : float or None
        Regression coefficient of the control variate, when one was used.
    delta, vega : float or None
        d price / d spot and d price / d vol, with ``delta_stderr``, ``vega_stderr``:
        pathwise for European, Asian and lookback options; for barriers, whose payoff jumps,
        central differences on the same paths (spot x exp(+-0.01), vol +-0.01: O(bump^2)
        bias).
    """

    price: float
    stderr: float
    ci95: tuple[float, float]
    paths: int
    seconds: float
    control_beta: float | None = None
    delta: float | None = None
    delta_stderr: float | None = None
    vega: float | None = None
    vega_stderr: float | None = None


def _control_mean(model: GBM, option: Any) -> float | None:
    """The exact discounted mean of the control variate the kernel reports, if any."""
    from .analytic import geometric_asian

    if isinstance(option, European | Barrier | Lookback):  # c = discounted S(T)
        return model.spot * math.exp(-model.dividend * option.maturity)
    if isinstance(option, AsianArithmetic):  # c = the geometric Asian with the same terms
        return geometric_asian(
            model, AsianGeometric(option.strike, option.maturity, option.kind, option.fixings)
        )
    return None


_PAYOFF = {
    European: "european",
    AsianArithmetic: "arithmetic",
    AsianGeometric: "geometric",
    Barrier: "barrier",
    Lookback: "lookback",
}


def _payoff_params(option: Any, discount: float, s0: float, log_barrier: float) -> np.ndarray:
    """The payoff's parameter array of ``option`` (``s0``: the delta's spot)."""
    from . import kernels

    pay = kernels._parts(_PAYOFF[type(option)])
    extra: dict[str, Any] = {}
    if isinstance(option, Barrier):
        extra = dict(log_barrier=log_barrier, up=option.direction == "up",
                     knock_in=option.knock == "in")  # fmt: skip
    if isinstance(option, Lookback):  # the extremum starts at S(0) = s0
        extra = dict(log_s0=math.log(s0), floating=option.floating)
        strike = 0.0 if option.floating else option.strike
        return pay.pack(strike, option.kind == "call", discount, s0, option.steps, **extra)
    return pay.pack(option.strike, option.kind == "call", discount, s0, option.steps, **extra)


def _payoff_kernel(option: Any, greeks: bool) -> str:
    """The payoff template of ``option``: a barrier without ``greeks`` skips the bumped
    copies (:mod:`.payoff_barrier`)."""
    name = _PAYOFF[type(option)]
    return name if greeks or name != "barrier" else "barrier_price"


def _plan(
    model: Any, option: Any, seed: int, stream: int, antithetic: bool, greeks: bool = True
) -> tuple[kernels.KernelSpec, float | None, bool]:
    """The kernel's problem for ``model`` and ``option``, the exact mean of its control
    variate (None: unknown) and whether the Greeks columns are the model's delta and vega
    (``greeks`` off: never; a barrier then runs without the copies that estimate them, as
    under Heston, whose Greeks are not estimated)."""
    from . import basket, gbm, heston

    rs = RandomStreams(seed, stream)
    key = dict(k0=int(rs.key[0]), k1=int(rs.key[1]), stream=rs.stream, antithetic=antithetic)
    if isinstance(model, GBM | Heston) and type(option) in _PAYOFF:
        t = option.maturity
        discount = math.exp(-model.rate * t)
        forward = model.spot * math.exp(-model.dividend * t)  # discounted mean of S(T)
        if isinstance(model, GBM):
            dt = t / option.steps
            drift = (model.rate - model.dividend - 0.5 * model.vol**2) * dt
            mp = gbm.pack(math.log(model.spot), drift, model.vol, dt, option.steps)
            barrier = option.simulated_barrier(model.vol) if isinstance(option, Barrier) else 1.0
            pp = _payoff_params(option, discount, model.spot, math.log(barrier))
            spec = kernels.KernelSpec("gbm", _payoff_kernel(option, greeks), mp, pp, **key)
            return spec, _control_mean(model, option), greeks
        if isinstance(option, Barrier) and option.continuity_correction:
            raise ValueError("Heston: the barrier's continuity correction assumes GBM")
        barrier = option.barrier if isinstance(option, Barrier) else 1.0
        mp = heston.pack(model, t, option.steps)
        pp = _payoff_params(option, discount, model.spot, math.log(barrier))
        spec = kernels.KernelSpec("heston", _payoff_kernel(option, False), mp, pp, **key)
        control = forward if isinstance(option, European | Barrier | Lookback) else None
        return spec, control, False
    if isinstance(model, Market) and isinstance(option, basket.Basket):
        if len(option.weights) != len(model.spots):
            raise ValueError(f"weights: {len(option.weights)} for {len(model.spots)} assets")
        t = option.maturity
        discount = math.exp(-model.rate * t)
        mp = basket.pack(model, option.weights, t, 1)
        pp = _payoff_params(European(option.strike, t, option.kind), discount, 1.0, 0.0)
        consts = (("_ASSETS", len(model.spots)),)
        spec = kernels.KernelSpec("correlated", "european", mp, pp, constants=consts, **key)
        control = float(np.sum(option.weights * model.spots * np.exp(-model.dividends * t)))
        return spec, control, False
    if not isinstance(model, GBM | Heston | Market):
        raise TypeError(f"model: expected GBM, Heston or Market, got {type(model).__name__}")
    raise TypeError(
        f"option: unsupported instrument {type(option).__name__} for {type(model).__name__}"
    )


def price(
    model: GBM | Heston | Market,
    option: Any,
    paths: int = 1_000_000,
    seed: int = 0,
    stream: int = 0,
    antithetic: bool = True,
    control_variate: bool = True,
    executor: str = "local",
    batch: int | None = None,
    block: int = DEFAULT_BLOCK,
    comm: Any = None,
    scheduler: Any = None,
    sampler: str = "pseudo",
    replicates: int = 16,
    backend: Any = None,
    degree: int = 3,
    greeks: bool = True,
) -> PriceResult:
    """Price ``option`` under ``model`` by Monte Carlo (collective for ``executor="mpi"``).

    One entry point for every combination:

    ======================  ===================================================================
    ``model``               ``option``
    ======================  ===================================================================
    :class:`GBM`            European, AsianArithmetic, AsianGeometric, Barrier, Lookback;
                            American (Longstaff-Schwartz, :func:`.american.american_lsm`,
                            ``degree``)
    :class:`Heston`         European, AsianArithmetic, AsianGeometric, Barrier (no continuity
                            correction), Lookback
    :class:`.var.Market`    :class:`.basket.Basket` (correlated GBM)
    ======================  ===================================================================

    Each (model, payoff) pair runs one generated kernel (:mod:`.kernels`) on blocks of paths
    through :func:`hpc.run.map_blocks`, on the executor ``executor`` (``"local"``, ``"mpi"``,
    ``"dask"``) and the backend ``backend`` (``"gpu"``: numba.cuda; default: ``HPC_BACKEND``
    / the CPU). GPU and CPU prices agree to rounding (libdevice against :mod:`hpc.vmath`),
    each bitwise reproducible on its own.

    ``sampler="sobol"`` (GBM; European and Asian options): scrambled Sobol points through a
    Brownian bridge, ``replicates`` independent scramblings giving the standard error (no
    antithetic or control variates, Greeks not estimated).

    The path count is rounded up to whole blocks of ``block`` samples. Sample ``i`` uses the
    normals of global index ``i`` of ``RandomStreams(seed, stream)``, so the result is bitwise
    the same for any executor, rank count or ``batch`` (blocks per task). A GBM sample is two
    paths, on the cosine and the sine of each Box-Muller pair (:mod:`.gbm`), a Heston or basket
    sample one; antithetic partners double that. Controls (their
    coefficient estimated from the same paths): the discounted terminal level for European,
    barrier, lookback and basket options, the geometric Asian (closed form) for an arithmetic
    Asian under GBM. Greeks: GBM only (pathwise for European, Asian and lookback options; for
    barriers, whose payoff jumps, central differences on the same paths: spot x exp(+-0.01),
    vol +-0.01). ``greeks=False``: none reported (``delta``, ``vega`` None); a barrier then
    simulates each path without its four bumped copies, about half a one-date path's
    time, with the same price bitwise.
    """
    from .american import American, american_lsm

    if isinstance(option, American):
        if not isinstance(model, GBM):
            raise TypeError(f"model: American options need GBM, got {type(model).__name__}")
        return american_lsm(
            model, option, paths, seed, stream, degree, executor, batch, comm, scheduler
        )
    paths, block = int(paths), int(block)
    if paths < 2 or block < 1:
        raise ValueError(f"paths={paths}, block={block}: need paths >= 2 and block >= 1")
    if sampler not in ("pseudo", "sobol"):
        raise ValueError(f"sampler={sampler!r}: expected 'pseudo' or 'sobol'")
    spec, control, greeks_known = _plan(model, option, seed, stream, bool(antithetic),
                                        bool(greeks))
    per_sample = kernels.paths_per_sample(spec) if sampler == "pseudo" else 1
    nblocks = math.ceil(paths / per_sample / block)
    samples = nblocks * block
    if sampler == "sobol":
        if not isinstance(model, GBM):
            raise ValueError("sampler='sobol' prices under GBM")
        return _price_sobol(
            model, option, nblocks, block, seed, replicates, executor, batch, comm, scheduler
        )
    from hpc.backend import get_backend

    fn = partial(kernels.BLOCKS.on(get_backend(backend)).block_rows, block=block, spec=spec)
    t0 = time.perf_counter()
    rows = map_blocks(fn, nblocks, kernels.WIDTH, executor, batch, comm, scheduler)
    seconds = time.perf_counter() - t0
    sy, syy, sc, scc, syc, sd, sdd, sv, svv = exact_sum(rows)
    greeks: dict[str, float | None] = {}
    if greeks_known:
        for name, s1, s2 in (("delta", sd, sdd), ("vega", sv, svv)):
            mean, se = mean_and_stderr(s1, s2, samples)
            greeks[name], greeks[f"{name}_stderr"] = mean, se
    return estimate(
        (sy, syy, sc, scc, syc),
        samples,
        control if control_variate else None,
        samples * per_sample,
        seconds,
        **greeks,
    )


def mean_and_stderr(total: float, squares: float, n: int) -> tuple[float, float]:
    """Sample mean and its standard error from a sum and a sum of squares over ``n``."""
    mean = total / n
    return float(mean), float(math.sqrt(max(squares - n * mean * mean, 0.0) / (n - 1) / n))


def estimate(
    sums: tuple[float, float, float, float, float],
    n: int,
    control: float | None,
    paths: int,
    seconds: float,
    **greeks: float | None,
) -> PriceResult:
    """The result from ``(sum y, sum y^2, sum c, sum c^2, sum y c)`` over ``n`` samples: the
    plain mean, or with ``control`` (the exact mean of ``c``) the regression-adjusted one, whose
    coefficient is estimated from the same samples."""
    sy, syy, sc, scc, syc = sums
    mean_y = sy / n
    variance = max(syy - n * mean_y * mean_y, 0.0) / (n - 1)
    value, beta = mean_y, None
    if control is not None:
        mean_c = sc / n
        var_c = max(scc - n * mean_c * mean_c, 0.0) / (n - 1)
        if var_c > 0.0:
            cov = (syc - n * mean_y * mean_c) / (n - 1)
            beta = cov / var_c
            value = mean_y - beta * (mean_c - control)
            variance = max(variance - cov * cov / var_c, 0.0)
    value, stderr = float(value), float(math.sqrt(variance / n))
    return PriceResult(
        price=value,
        stderr=stderr,
        ci95=(value - 1.96 * stderr, value + 1.96 * stderr),
        paths=paths,
        seconds=seconds,
        control_beta=None if beta is None else float(beta),
        **greeks,
    )


def _sobol_payoff(w: Any, spec: dict[str, Any]) -> Any:
    """Discounted payoffs of Brownian paths ``w`` (unit time spacing) for ``spec``."""
    import numpy as np

    steps = w.shape[1]
    t = np.arange(1, steps + 1) * spec["dt"]
    log_s = spec["log_s0"] + spec["mu"] * t + spec["vol"] * math.sqrt(spec["dt"]) * w
    if spec["kind"] == kernels.EUROPEAN:
        a = np.exp(log_s[:, -1])
    elif spec["kind"] == kernels.ARITHMETIC:
        a = np.exp(log_s).mean(axis=1)
    else:
        a = np.exp(log_s.mean(axis=1))
    k = spec["strike"]
    return spec["discount"] * (np.maximum(a - k, 0.0) if spec["call"] else np.maximum(k - a, 0.0))


def _sobol_rows(
    first: int, count: int, block: int, replicates: int, seed: int, spec: dict[str, Any]
) -> Any:
    from .qmc import sobol_block_sums

    return sobol_block_sums(
        first, count, block, replicates, seed, partial(_sobol_payoff, spec=spec), spec["steps"]
    )


def _price_sobol(
    model: GBM,
    option: Any,
    nblocks: int,
    block: int,
    seed: int,
    replicates: int,
    executor: str,
    batch: int | None,
    comm: Any,
    scheduler: Any,
) -> PriceResult:
    import numpy as np

    if not isinstance(option, European | AsianArithmetic | AsianGeometric):
        raise ValueError(
            f"sampler='sobol' prices European and Asian options, not {type(option).__name__}"
        )
    if block & (block - 1):
        raise ValueError(f"block={block}: Sobol blocks must be a power of 2")
    if int(replicates) < 2:
        raise ValueError(f"replicates={replicates}: need >= 2 for an error estimate")
    kind = (
        kernels.EUROPEAN
        if isinstance(option, European)
        else (kernels.ARITHMETIC if isinstance(option, AsianArithmetic) else kernels.GEOMETRIC)
    )
    dt = option.maturity / option.steps
    spec = {
        "log_s0": math.log(model.spot),
        "mu": model.rate - model.dividend - 0.5 * model.vol**2,
        "vol": model.vol,
        "dt": dt,
        "steps": option.steps,
        "strike": option.strike,
        "call": option.kind == "call",
        "kind": kind,
        "discount": math.exp(-model.rate * option.maturity),
    }
    fn = partial(_sobol_rows, block=block, replicates=int(replicates), seed=int(seed), spec=spec)
    t0 = time.perf_counter()
    rows = map_blocks(fn, nblocks, int(replicates), executor, batch, comm, scheduler)
    seconds = time.perf_counter() - t0
    n = nblocks * block
    means = exact_sum(rows) / n
    estimate = float(np.mean(means))
    stderr = float(np.std(means, ddof=1) / math.sqrt(len(means)))
    return PriceResult(
        estimate,
        stderr,
        (estimate - 1.96 * stderr, estimate + 1.96 * stderr),
        n * int(replicates),
        seconds,
    )
