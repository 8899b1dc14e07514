"""European basket options on correlated geometric Brownian motions (``var.Market``), by Monte
Carlo with the same blocks, streams and exact reduction as the single-asset engine."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from hpc.rng import RandomStreams
from hpc.run import exact_sum, map_blocks

from .engine import DEFAULT_BLOCK, PriceResult, estimate
from .instruments import _kind, _positive
from .kernels import _pair, path_rows  # _pair: bound in the generated kernel
from .var import Market

__all__ = ["Basket", "price_basket"]


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


def _basket_sums(
    out,
    first_block,
    block,
    k0,
    k1,
    stream,
    log_s0,
    drift,
    sd,
    loading,
    weights,
    strike,
    call,
    discount,
    antithetic,
):  # type: ignore[no-untyped-def]
    d = log_s0.shape[0]
    for b in prange(out.shape[0]):
        z = np.empty(d)
        acc = np.zeros(5)
        base = np.uint64(first_block + b) * np.uint64(block)
        for i in range(block):
            p = base + np.uint64(i)
            for j0 in range(0, d, 2):
                z1, z2 = _pair(p, np.uint64(j0 // 2), k0, k1, stream, True)
                z[j0] = z1
                if j0 + 1 < d:
                    z[j0 + 1] = z2
            y = 0.0
            c = 0.0
            for sign in (1.0, -1.0):
                value = 0.0
                for a in range(d):
                    shock = 0.0
                    for m in range(d):
                        shock += loading[a, m] * z[m]
                    value += weights[a] * math.exp(log_s0[a] + drift[a] + sd[a] * sign * shock)
                pay = max(value - strike, 0.0) if call else max(strike - value, 0.0)
                y += discount * pay
                c += discount * value
                if not antithetic:
                    break
            if antithetic:
                y *= 0.5
                c *= 0.5
            acc[0] += y
            acc[1] += y * y
            acc[2] += c
            acc[3] += c * c
            acc[4] += y * c
        for k in range(5):
            out[b, k] = acc[k]


prange = range  # placeholder: the generated kernel module imports numba's


def _rows(first: int, count: int, block: int, args: tuple) -> np.ndarray:
    return path_rows(_basket_sums, (), 5, first, count, block, args)


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
) -> PriceResult:
    """Price ``option`` on ``market``'s assets; the control variate is the discounted basket
    value (mean ``sum_k w_k S_k exp(-q_k T)``). Collective for ``executor="mpi"``."""
    if len(option.weights) != len(market.spots):
        raise ValueError(f"weights: {len(option.weights)} for {len(market.spots)} assets")
    t = option.maturity
    per_sample = 2 if antithetic else 1
    nblocks = math.ceil(int(paths) / per_sample / int(block))
    n = nblocks * int(block)
    rs = RandomStreams(seed, stream)
    args = (
        rs.key[0],
        rs.key[1],
        np.uint64(rs.stream),
        np.log(market.spots),
        (market.rate - market.dividends - 0.5 * market.vols**2) * t,
        market.vols * math.sqrt(t),
        np.ascontiguousarray(market.loading),
        option.weights,
        option.strike,
        option.kind == "call",
        math.exp(-market.rate * t),
        bool(antithetic),
    )
    t0 = time.perf_counter()
    rows = map_blocks(
        partial(_rows, block=int(block), args=args), nblocks, 5, executor, batch, comm, scheduler
    )
    seconds = time.perf_counter() - t0
    control = (
        float(np.sum(option.weights * market.spots * np.exp(-market.dividends * t)))
        if control_variate
        else None
    )
    return estimate(exact_sum(rows), n, control, n * per_sample, seconds)
