"""American and Bermudan options by Longstaff-Schwartz least-squares Monte Carlo.

Exercise today and at the dates ``T/n .. T`` (the Bermudan with exercise dates
``0, T/n, .., T``). At each date, from the last backwards, the discounted cash flow of the
in-the-money paths is regressed on a polynomial in ``S/K`` (degree ``degree``) and a path
exercises where the payoff beats the fitted continuation value. The price is the mean
discounted cash flow, or the immediate payoff where that is larger (exercise today). Paths
use ``RandomStreams(seed, stream)`` by path index, as the other engines. Known biases: with
``n`` dates the contract is Bermudan (below the American price by O(1/n)); the fitted rule is
suboptimal (low); the in-sample regression adds a small upward bias.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from hpc.rng import RandomStreams
from hpc.run import map_blocks

from .engine import PriceResult
from .instruments import GBM, _Option, _whole

__all__ = ["American", "american_lsm"]


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
) -> PriceResult:
    """Longstaff-Schwartz price of ``option`` (also ``price(model, option, ...)``).

    The paths are simulated in blocks by :func:`hpc.run.map_blocks` on ``executor``
    (``"local"``, ``"mpi"``: collective, ``"dask"``), path ``i`` from the normals of global
    index ``i``, and gathered on every rank; the backward regression then runs on the whole
    set of paths (vectorised per date). So the price is bitwise the same for any executor,
    rank count and ``batch``.
    """
    if not isinstance(option, American):
        raise TypeError(f"option: expected American, got {type(option).__name__}")
    paths, degree = int(paths), int(degree)
    if paths < 10 or degree < 1:
        raise ValueError(f"paths={paths}, degree={degree}: need paths >= 10, degree >= 1")
    t0 = time.perf_counter()
    n, dt = option.exercises, option.maturity / option.exercises
    fn = partial(_spots, n=n, dt=dt, model=model, seed=int(seed), stream=int(stream))
    spots = map_blocks(fn, paths, n, executor, batch, comm, scheduler)  # (paths, dates)
    k = option.strike

    def payoff(s: np.ndarray) -> np.ndarray:
        return np.maximum(s - k, 0.0) if option.kind == "call" else np.maximum(k - s, 0.0)

    step_discount = math.exp(-model.rate * dt)
    by_date = np.ascontiguousarray(spots.T)  # (dates, paths): each date's spots contiguous
    del spots
    cash = payoff(by_date[-1])
    for j in range(n - 2, -1, -1):
        cash *= step_discount
        exercise_now = payoff(by_date[j])
        itm = np.flatnonzero(exercise_now > 0)
        if len(itm) > degree + 1:
            basis = _basis(by_date[j, itm] / k, degree)
            coef = _least_squares(basis, cash[itm])
            idx = itm[exercise_now[itm] > basis @ coef]
            cash[idx] = exercise_now[idx]
    cash *= step_discount
    estimate = float(cash.mean())
    stderr = float(cash.std(ddof=1) / math.sqrt(paths))
    immediate = float(payoff(np.array([model.spot]))[0])
    estimate = max(estimate, immediate)
    return PriceResult(
        price=estimate,
        stderr=stderr,
        ci95=(estimate - 1.96 * stderr, estimate + 1.96 * stderr),
        paths=paths,
        seconds=time.perf_counter() - t0,
    )


def _basis(x: np.ndarray, degree: int) -> np.ndarray:
    """The polynomial basis ``1, x, .., x^degree`` (columns), as ``np.vander(increasing=True)``
    without its general-purpose overhead."""
    basis = np.empty((len(x), degree + 1))
    basis[:, 0] = 1.0
    for d in range(1, degree + 1):
        np.multiply(basis[:, d - 1], x, out=basis[:, d])
    return basis


def _least_squares(basis: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares coefficients of ``y`` on ``basis``: by the normal equations (one pass
    over the tall matrix) when their matrix is well conditioned, else by ``lstsq`` (SVD,
    rank-deficient bases included)."""
    gram = basis.T @ basis
    if np.linalg.cond(gram) < 1e10:
        return np.linalg.solve(gram, basis.T @ y)
    return np.linalg.lstsq(basis, y, rcond=None)[0]


def _spots(
    first: int, count: int, n: int, dt: float, model: GBM, seed: int, stream: int
) -> np.ndarray:
    """Spots of paths ``first .. first + count - 1`` at the ``n`` exercise dates (one block
    per path: the rows of :func:`hpc.run.map_blocks`)."""
    z = RandomStreams(seed, stream).normals(first, count, n)
    increments = (model.rate - model.dividend - 0.5 * model.vol**2) * dt
    log_s = math.log(model.spot) + np.cumsum(increments + model.vol * math.sqrt(dt) * z, axis=1)
    return np.exp(log_s)
