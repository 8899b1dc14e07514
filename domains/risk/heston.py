"""Path step of the Heston model (:class:`.instruments.Heston`), full-truncation Euler: a
template of the Monte Carlo kernel (:mod:`.kernels`), and :func:`price_heston`.

Step ``j`` of path ``p`` draws the pair of normals ``j`` of its stream (the variance's and an
independent one, mixed by ``rho``). The simulation grid refines the instrument's dates:
``sub`` Euler steps per date, the payoff observing the path every ``sub``-th step. State per
path: ``x = ln S`` and the variance ``v``. No volatility derivative (``g = 0``): Greeks other
than delta are not reported.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .engine import DEFAULT_BLOCK, PriceResult
from .instruments import European, Heston

__all__ = ["price_heston", "pack", "rows", "STRIDE", "TEMPLATES"]

STRIDE = 1  # one Euler step (one pair of normals) per call of _m_step
_MROWS = _HALF = 0  # bound in the kernel


def rows(constants: dict[str, Any]) -> int:
    return 2


def pack(model: Heston, maturity: float, dates: int) -> np.ndarray:
    """The model's parameter array for ``dates`` equally spaced dates up to ``maturity``: at
    least ``steps_per_year`` Euler steps a year, a whole number per date."""
    sub = max(1, math.ceil(model.steps_per_year * maturity / dates))
    steps = sub * dates
    mu = model.rate - model.dividend
    return np.array(
        [math.log(model.spot), model.v0, model.kappa, model.theta, model.xi, model.rho, mu,
         maturity / steps, steps, sub],
        dtype=np.float64,
    )  # fmt: skip


def _m_load(mp: Any) -> tuple:
    rho = mp[5]
    return (mp[0], mp[1], mp[2], mp[3], mp[4], rho, math.sqrt(max(1.0 - rho * rho, 0.0)),
            mp[6], mp[7], int(mp[8]), int(mp[9]))  # fmt: skip


def _m_steps(m: Any) -> int:
    return m[9]


def _m_start(st: Any, r: int, i: int, m: Any, mp: Any) -> None:
    st[r, i] = m[0]
    st[r + 1, i] = m[1]


def _m_euler(st: Any, r: int, i: int, zv: float, zi: float, j: int, m: Any, q: Any) -> None:
    """Step ``j`` of the path at rows ``r..``: full truncation of the variance."""
    kappa, theta, xi, rho, rho_c, mu, dt, sub = m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[10]
    sq = math.sqrt(dt)
    x, v = st[r, i], st[r + 1, i]
    vp = max(v, 0.0)
    root = math.sqrt(vp)
    x += (mu - 0.5 * vp) * dt + root * sq * (rho * zv + rho_c * zi)
    v += kappa * (theta - vp) * dt + xi * root * sq * zv
    st[r, i] = x
    st[r + 1, i] = v
    if (j + 1) % sub == 0:
        _p_observe(st, r + _MROWS, i, x, 0.0, (j + 1) * dt, q)


def _m_step(
    st: Any, i: int, p: Any, j: int, k0: Any, k1: Any, stream: Any, m: Any, mp: Any, q: Any,
    antithetic: bool,
) -> None:  # fmt: skip
    zv, zi = _pair(p, np.uint64(j), k0, k1, stream, True)
    _m_euler(st, 0, i, zv, zi, j, m, q)
    if antithetic:
        _m_euler(st, _HALF, i, -zv, -zi, j, m, q)


def _m_tail(
    st: Any, i: int, p: Any, j: int, k0: Any, k1: Any, stream: Any, m: Any, mp: Any, q: Any,
    antithetic: bool,
) -> None:  # fmt: skip
    """The kernel's call for steps left over by ``STRIDE`` (none: ``STRIDE`` is 1)."""
    _m_step(st, i, p, j, k0, k1, stream, m, mp, q, antithetic)


def _m_terminal(st: Any, r: int, i: int, m: Any, mp: Any) -> tuple:
    return st[r, i], 0.0, m[9] * m[8]


def _pair(index: Any, pair: Any, k0: Any, k1: Any, stream: Any, normal: bool) -> tuple:
    raise NotImplementedError  # bound to hpc.rng's compiled pair in the kernel


def _p_observe(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> None:
    raise NotImplementedError  # the payoff's, bound in the kernel


TEMPLATES = (_m_load, _m_steps, _m_start, _m_euler, _m_step, _m_tail, _m_terminal)


def price_heston(
    model: Heston,
    option: European,
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
    backend: Any = None,
) -> PriceResult:
    """Price ``option`` (European, Asian or barrier) under the Heston ``model``: a thin wrapper
    of :func:`.engine.price`, kept for its name. The control variate of a European or barrier
    option is the discounted terminal spot (mean ``S0 exp(-q T)``). Collective for
    ``executor="mpi"``; ``backend="gpu"`` runs the paths on the GPU."""
    from .engine import price

    if not isinstance(model, Heston):
        raise TypeError(f"model: expected Heston, got {type(model).__name__}")
    return price(
        model, option, paths=paths, seed=seed, stream=stream, antithetic=antithetic,
        control_variate=control_variate, executor=executor, batch=batch, block=block,
        comm=comm, scheduler=scheduler, backend=backend,
    )  # fmt: skip
