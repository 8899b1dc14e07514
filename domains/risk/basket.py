"""Correlated geometric Brownian motions (``var.Market``) observed through a basket's weighted
sum: the path step as a template of the Monte Carlo kernel (:mod:`.kernels`), the
:class:`Basket` instrument and :func:`price_basket`.

Date ``j`` of path ``p`` draws normals ``j d .. j d + d - 1`` of its stream (``d`` assets,
``_ASSETS``, a constant of the kernel), correlated by the market's loading ``L`` (``L L^T``
the correlation). The payoff observes the log of ``sum_k w_k S_k``. State per path: the
``d`` log-spots, then ``d`` rows of normals (of the first path of the antithetic pair).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .engine import DEFAULT_BLOCK, PriceResult
from .instruments import _kind, _positive
from .var import Market

__all__ = ["Basket", "price_basket", "pack", "rows", "STRIDE", "TEMPLATES"]


@dataclass(frozen=True)
class Basket:
    """Call or put on ``sum_k weights[k] S_k(T)``."""

    weights: Any
    strike: float
    maturity: float
    kind: str = "call"

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=np.float64).ravel()
        if len(w) == 0 or not np.isfinite(w).all():
            raise ValueError(f"weights={self.weights!r}: need finite values, one per asset")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "strike", _positive("strike", self.strike))
        object.__setattr__(self, "maturity", _positive("maturity", self.maturity))
        _kind(self.kind)

    @property
    def steps(self) -> int:
        return 1


STRIDE = 1  # one date per call of _m_step
_MROWS = _HALF = _ASSETS = 0  # bound in the kernel


def rows(constants: dict[str, Any]) -> int:
    return 2 * constants["_ASSETS"]


def pack(market: Market, weights: np.ndarray, maturity: float, dates: int) -> np.ndarray:
    """The model's parameter array: ``dt``, ``steps``, then per asset the log-spot, the drift
    and the standard deviation of one step, the loading (row-major) and the weights."""
    dt = maturity / dates
    drift = (market.rate - market.dividends - 0.5 * market.vols**2) * dt
    return np.concatenate(
        [[dt, dates], np.log(market.spots), drift, market.vols * math.sqrt(dt),
         np.ascontiguousarray(market.loading).ravel(), weights]
    ).astype(np.float64)  # fmt: skip


def _m_load(mp: Any) -> tuple:
    return mp[0], int(mp[1])


def _m_steps(m: Any) -> int:
    return m[1]


def _m_start(st: Any, r: int, i: int, m: Any, mp: Any) -> None:
    for a in range(_ASSETS):
        st[r + a, i] = mp[2 + a]


def _m_level(st: Any, r: int, i: int, mp: Any) -> float:
    """``ln sum_k w_k S_k`` of the path at rows ``r..``."""
    d = _ASSETS
    value = 0.0
    for a in range(d):
        value += mp[2 + 3 * d + d * d + a] * _exp(st[r + a, i])
    return _log(value)


def _m_move(st: Any, r: int, i: int, sign: float, j: int, m: Any, mp: Any, q: Any) -> None:
    """Date ``j`` of the path at rows ``r..`` on the normals of rows ``_ASSETS..``."""
    d = _ASSETS
    for a in range(d):
        shock = 0.0
        for k in range(d):
            shock += mp[2 + 3 * d + a * d + k] * st[d + k, i]
        st[r + a, i] = st[r + a, i] + mp[2 + d + a] + mp[2 + 2 * d + a] * sign * shock
    t = (j + 1) * m[0]
    _p_observe(st, r + _MROWS, i, _m_level(st, r, i, mp), 0.0, t, q)


def _m_step(
    st: Any, i: int, p: Any, j: int, k0: Any, k1: Any, stream: Any, m: Any, mp: Any, q: Any,
    antithetic: bool,
) -> None:  # fmt: skip
    d = _ASSETS
    # normals j d .. j d + d - 1 of the path, in whole pairs: no branch that depends on the
    # asset inside the vector loop over lanes (a pair drawn under a condition kept it scalar)
    k = j * d
    a = 0
    if k % 2 == 1:  # the window starts on the second normal of a pair
        z1, z2 = _pair(p, np.uint64(k // 2), k0, k1, stream, True)
        st[d, i] = z2
        a = 1
    for h in range((d - a) // 2):
        z1, z2 = _pair(p, np.uint64((k + a) // 2 + h), k0, k1, stream, True)
        st[d + a + 2 * h, i] = z1
        st[d + a + 2 * h + 1, i] = z2
    if (d - a) % 2 == 1:  # and ends on the first normal of a pair
        z1, z2 = _pair(p, np.uint64((k + d - 1) // 2), k0, k1, stream, True)
        st[2 * d - 1, i] = z1
    _m_move(st, 0, i, 1.0, j, m, mp, q)
    if antithetic:
        _m_move(st, _HALF, i, -1.0, j, m, mp, q)


def _m_tail(
    st: Any, i: int, p: Any, j: int, k0: Any, k1: Any, stream: Any, m: Any, mp: Any, q: Any,
    antithetic: bool,
) -> None:  # fmt: skip
    """The kernel's call for steps left over by ``STRIDE`` (none: ``STRIDE`` is 1)."""
    _m_step(st, i, p, j, k0, k1, stream, m, mp, q, antithetic)


def _m_terminal(st: Any, r: int, i: int, m: Any, mp: Any) -> tuple:
    return _m_level(st, r, i, mp), 0.0, m[1] * m[0]


def _pair(index: Any, pair: Any, k0: Any, k1: Any, stream: Any, normal: bool) -> tuple:
    raise NotImplementedError  # bound to hpc.rng's compiled pair in the kernel


def _p_observe(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> None:
    raise NotImplementedError  # the payoff's, bound in the kernel


def _exp(x: float) -> float:
    return math.exp(x)  # bound in the kernel


def _log(x: float) -> float:
    return math.log(x)  # bound in the kernel


TEMPLATES = (_m_load, _m_steps, _m_start, _m_level, _m_move, _m_step, _m_tail, _m_terminal)


def price_basket(
    market: Market,
    option: Basket,
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
    """Price ``option`` on ``market``'s assets: a thin wrapper of :func:`.engine.price`, kept
    for its name. The control variate is the discounted basket value (mean
    ``sum_k w_k S_k exp(-q_k T)``). Collective for ``executor="mpi"``; ``backend="gpu"`` runs
    the paths on the GPU."""
    from .engine import price

    return price(
        market, option, paths=paths, seed=seed, stream=stream, antithetic=antithetic,
        control_variate=control_variate, executor=executor, batch=batch, block=block,
        comm=comm, scheduler=scheduler, backend=backend,
    )  # fmt: skip
