"""The correlated-GBM (basket) kernel over several dates, any asset count: each date draws
normals ``j d .. j d + d - 1`` of the path's stream, in whole Philox pairs where it can (a
date of an odd asset count may start or end inside a pair). Checked against a NumPy simulation
on the same normals (:meth:`hpc.rng.RandomStreams.normals`)."""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.risk import basket, kernels, payoff_european
from hpc.domains.risk.var import Market

from hpc.rng import RandomStreams


def _market(rng: np.random.Generator, d: int) -> Market:
    a = rng.normal(size=(d, d))
    cov = a @ a.T + d * np.eye(d)
    corr = cov / np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    return Market(
        rng.uniform(80, 120, d), rng.uniform(0.1, 0.4, d), corr, rate=0.02,
        dividends=rng.uniform(0, 0.02, d),
    )  # fmt: skip


@pytest.mark.parametrize("d, dates", [(1, 3), (3, 4), (4, 2)])
def test_basket_over_dates_equals_numpy_on_the_same_normals(d, dates):
    rng = np.random.default_rng()
    seed, stream = int(rng.integers(0, 2**63)), int(rng.integers(0, 2**32))
    market = _market(rng, d)
    w = rng.dirichlet(np.ones(d))
    strike, t, block, count = 100.0, 1.5, 100, 3
    discount = float(np.exp(-market.rate * t))
    rs = RandomStreams(seed, stream)
    spec = kernels.KernelSpec(
        "correlated", "european", basket.pack(market, w, t, dates),
        payoff_european.pack(strike, False, discount, 1.0, dates), int(rs.key[0]), int(rs.key[1]),
        stream, antithetic=False, constants=(("_ASSETS", d),),
    )  # fmt: skip
    first = int(rng.integers(0, 10**6))
    rows = kernels.block_sums(first, count, block, spec)
    # the reference: date j uses normals j d .. j d + d - 1 of each path
    z = rs.normals(first * block, count * block, d * dates).reshape(-1, dates, d)
    dt = t / dates
    drift = (market.rate - market.dividends - 0.5 * market.vols**2) * dt
    x = np.log(market.spots) + (drift + market.vols * np.sqrt(dt) * (z @ market.loading.T)).sum(1)
    level = np.exp(x) @ w
    pay = (discount * np.maximum(strike - level, 0.0)).reshape(count, block)
    np.testing.assert_allclose(rows[:, 0], pay.sum(axis=1), rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(rows[:, 1], (pay**2).sum(axis=1), rtol=1e-11, atol=1e-9)
