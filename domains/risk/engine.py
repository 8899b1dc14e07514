"""Monte Carlo pricing: paths in fixed blocks, run by hpc.run, reduced exactly."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from hpc.rng import RandomStreams
from hpc.run import exact_sum, map_blocks

from . import kernels
from .instruments import GBM, AsianArithmetic, AsianGeometric, European

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
    """

    price: float
    stderr: float
    ci95: tuple[float, float]
    paths: int
    seconds: float
    control_beta: float | None = None


def _control_mean(model: GBM, option: Any) -> float | None:
    """The exact discounted mean of the control variate the kernel reports, if any."""
    from .analytic import geometric_asian

    if isinstance(option, European):  # c = discounted S(T)
        return model.spot * math.exp(-model.dividend * option.maturity)
    if isinstance(option, AsianArithmetic):  # c = the geometric Asian with the same terms
        return geometric_asian(
            model, AsianGeometric(option.strike, option.maturity, option.kind, option.fixings)
        )
    return None


def price(
    model: GBM,
    option: European | AsianArithmetic | AsianGeometric,
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
) -> PriceResult:
    """Price ``option`` under ``model`` by Monte Carlo (collective for ``executor="mpi"``).

    The path count is rounded up to whole blocks of ``block`` samples. Sample ``i`` uses the
    normals of global index ``i`` of ``RandomStreams(seed, stream)``, one per fixing, so the
    result is bitwise the same for any executor, rank count or ``batch`` (blocks per task).
    Controls: the discounted terminal spot for a European, the geometric Asian (closed form)
    for an arithmetic Asian; the coefficient is estimated from the same paths.
    """
    if not isinstance(model, GBM):
        raise TypeError(f"model: expected GBM, got {type(model).__name__}")
    if not isinstance(option, European | AsianArithmetic | AsianGeometric):
        raise TypeError(f"option: unsupported instrument {type(option).__name__}")
    paths, block = int(paths), int(block)
    if paths < 2 or block < 1:
        raise ValueError(f"paths={paths}, block={block}: need paths >= 2 and block >= 1")
    per_sample = 2 if antithetic else 1
    nblocks = math.ceil(paths / per_sample / block)
    samples = nblocks * block
    kind = (
        kernels.EUROPEAN
        if isinstance(option, European)
        else kernels.ARITHMETIC
        if isinstance(option, AsianArithmetic)
        else kernels.GEOMETRIC
    )
    dt = option.maturity / option.steps
    rs = RandomStreams(seed, stream)
    params = (
        int(rs.key[0]),
        int(rs.key[1]),
        rs.stream,
        math.log(model.spot),
        (model.rate - model.dividend - 0.5 * model.vol**2) * dt,
        model.vol * math.sqrt(dt),
        option.steps,
        option.strike,
        option.kind == "call",
        kind,
        math.exp(-model.rate * option.maturity),
        bool(antithetic),
    )
    fn = partial(_rows, block=block, params=params)
    t0 = time.perf_counter()
    rows = map_blocks(fn, nblocks, kernels.WIDTH, executor, batch, comm, scheduler)
    seconds = time.perf_counter() - t0
    sy, syy, sc, scc, syc = exact_sum(rows)
    n = samples
    mean_y = sy / n
    var_y = max(syy - n * mean_y * mean_y, 0.0) / (n - 1)
    control = _control_mean(model, option) if control_variate else None
    beta = None
    estimate, variance = mean_y, var_y
    if control is not None:
        mean_c = sc / n
        var_c = max(scc - n * mean_c * mean_c, 0.0) / (n - 1)
        cov = (syc - n * mean_y * mean_c) / (n - 1)
        if var_c > 0.0:
            beta = cov / var_c
            estimate = mean_y - beta * (mean_c - control)
            variance = max(var_y - cov * cov / var_c, 0.0)
    stderr = float(math.sqrt(variance / n))
    estimate = float(estimate)
    return PriceResult(
        price=estimate,
        stderr=stderr,
        ci95=(estimate - 1.96 * stderr, estimate + 1.96 * stderr),
        paths=samples * per_sample,
        seconds=seconds,
        control_beta=None if beta is None else float(beta),
    )


def _rows(first: int, count: int, block: int, params: tuple) -> Any:
    return kernels.block_sums(first, count, block, params)
