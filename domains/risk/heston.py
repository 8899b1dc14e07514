"""European options under Heston by Monte Carlo (full-truncation Euler), same blocks, streams
and exact reduction as the GBM engine: reproducible on any executor."""

from __future__ import annotations

import math
import time
from functools import partial
from typing import Any

import numpy as np

from hpc.rng import RandomStreams
from hpc.run import exact_sum, map_blocks

from .engine import DEFAULT_BLOCK, PriceResult, estimate
from .instruments import European, Heston
from .kernels import _pair, path_rows  # _pair: bound in the generated kernel

__all__ = ["price_heston"]

def _heston_terminal(
    p, k0, k1, stream, log_s0, v0, kappa, theta, xi, rho, mu, dt, steps, sign
):  # type: ignore[no-untyped-def]
    """The terminal spot of path ``p`` (full-truncation Euler; ``sign`` -1 flips the normals)."""
    x, v = log_s0, v0
    sq = math.sqrt(dt)
    rho_c = math.sqrt(max(1.0 - rho * rho, 0.0))
    for j in range(steps):
        zv, zi = _pair(p, np.uint64(j), k0, k1, stream, True)
        zv, zi = sign * zv, sign * zi
        vp = max(v, 0.0)
        root = math.sqrt(vp)
        x += (mu - 0.5 * vp) * dt + root * sq * (rho * zv + rho_c * zi)
        v += kappa * (theta - vp) * dt + xi * root * sq * zv
    return math.exp(x)


def _heston_sums(
    out,
    first_block,
    block,
    k0,
    k1,
    stream,
    log_s0,
    v0,
    kappa,
    theta,
    xi,
    rho,
    mu,
    dt,
    steps,
    strike,
    call,
    discount,
    antithetic,
):  # type: ignore[no-untyped-def]
    for b in prange(out.shape[0]):
        sy = syy = sc = scc = syc = 0.0
        base = np.uint64(first_block + b) * np.uint64(block)
        for i in range(block):
            p = base + np.uint64(i)
            s = _heston_terminal(
                p, k0, k1, stream, log_s0, v0, kappa, theta, xi, rho, mu, dt, steps, 1.0
            )
            y = discount * (max(s - strike, 0.0) if call else max(strike - s, 0.0))
            c = discount * s
            if antithetic:
                s = _heston_terminal(
                    p, k0, k1, stream, log_s0, v0, kappa, theta, xi, rho, mu, dt, steps, -1.0
                )
                y = 0.5 * (
                    y + discount * (max(s - strike, 0.0) if call else max(strike - s, 0.0))
                )
                c = 0.5 * (c + discount * s)
            sy += y
            syy += y * y
            sc += c
            scc += c * c
            syc += y * c
        out[b, 0] = sy
        out[b, 1] = syy
        out[b, 2] = sc
        out[b, 3] = scc
        out[b, 4] = syc


prange = range  # placeholder: the generated kernel module imports numba's


def _rows(first: int, count: int, block: int, args: tuple) -> np.ndarray:
    return path_rows(_heston_sums, (_heston_terminal,), 5, first, count, block, args)


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
) -> PriceResult:
    """Price a European option under ``model``; the control variate is the discounted terminal
    spot (mean ``S0 exp(-q T)``). Collective for ``executor="mpi"``."""
    if not isinstance(model, Heston):
        raise TypeError(f"model: expected Heston, got {type(model).__name__}")
    if not isinstance(option, European):
        raise TypeError(
            f"option: the Heston engine prices European options, not {type(option).__name__}"
        )
    per_sample = 2 if antithetic else 1
    nblocks = math.ceil(int(paths) / per_sample / int(block))
    n = nblocks * int(block)
    steps = max(1, math.ceil(model.steps_per_year * option.maturity))
    dt = option.maturity / steps
    rs = RandomStreams(seed, stream)
    args = (
        rs.key[0],
        rs.key[1],
        np.uint64(rs.stream),
        math.log(model.spot),
        model.v0,
        model.kappa,
        model.theta,
        model.xi,
        model.rho,
        model.rate - model.dividend,
        dt,
        steps,
        option.strike,
        option.kind == "call",
        math.exp(-model.rate * option.maturity),
        bool(antithetic),
    )
    t0 = time.perf_counter()
    rows = map_blocks(
        partial(_rows, block=int(block), args=args), nblocks, 5, executor, batch, comm, scheduler
    )
    seconds = time.perf_counter() - t0
    control = model.spot * math.exp(-model.dividend * option.maturity) if control_variate else None
    return estimate(exact_sum(rows), n, control, n * per_sample, seconds)
