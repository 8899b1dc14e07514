"""The barrier's block kernel against NumPy on the same normals: all nine block sums, the
four bumped copies behind its central-difference Greeks included (their levels at maturity
are computed from two exponentials in the kernel, five here)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpc.domains.risk import kernels
from hpc.domains.risk.payoff_barrier import SPOT_BUMP, VOL_BUMP

from hpc.rng import RandomStreams


@pytest.mark.parametrize("steps", [1, 2, 7])
@pytest.mark.parametrize("antithetic", [False, True])
def test_barrier_kernel_equals_a_numpy_simulation_on_the_same_normals(steps, antithetic):
    """Fresh market, direction, knock type and option kind (a knock-in: the kind that pays
    beyond the barrier); a sample is two paths on the
    cosines and sines of the pairs (and their partners on the negatives); each path is
    watched with the spot bumped by ``+-SPOT_BUMP`` in ``ln S`` and the volatility by
    ``+-VOL_BUMP``, every copy monitored at every date and paid at maturity."""
    rng = np.random.default_rng()
    s0, vol = rng.uniform(50, 150), rng.uniform(0.1, 0.5)
    r, q, t = rng.uniform(0.0, 0.08), rng.uniform(0.0, 0.04), rng.uniform(0.25, 2.0)
    up, knock_in, call = (bool(v) for v in rng.integers(0, 2, 3))
    call = up if knock_in else call  # a knock-in on the far side of the strike (one date)
    # the barrier within about one standard deviation of the spot (hits on a good share of
    # the paths), the strike on the spot's side of it (every type can pay)
    gap = rng.uniform(0.2, 1.0) * vol * math.sqrt(t)
    level = s0 * math.exp(gap if up else -gap)
    strike = s0 * math.exp(rng.uniform(-0.5, 0.5) * gap)
    block, nblocks, first = 100, 3, int(rng.integers(0, 1000))
    seed = int(rng.integers(2**63))
    dt = t / steps
    drift = (r - q - 0.5 * vol**2) * dt
    disc = math.exp(-r * t)
    params = dict(
        k0=seed & 0xFFFFFFFF, k1=seed >> 32, stream=2, log_s0=math.log(s0), s0=s0,
        drift=drift, vol=vol, dt=dt, steps=steps, strike=strike, call=call,
        kind=kernels.BARRIER, discount=disc, barrier=level, up=up, knock_in=knock_in,
        antithetic=antithetic,
    )  # fmt: skip
    got = kernels.block_sums(first, nblocks, block, params)

    z = RandomStreams(seed, 2).normals(first * block, nblocks * block, 2 * steps)
    dates = dt * np.arange(1, steps + 1)
    log_b = math.log(level)

    def sample(z):
        w = np.cumsum(math.sqrt(dt) * z, axis=1)
        x = math.log(s0) + drift * np.arange(1, steps + 1) + vol * w
        g = w - vol * dates
        ys = []
        for shift in (
            0.0, SPOT_BUMP, -SPOT_BUMP,
            VOL_BUMP * g - 0.5 * VOL_BUMP**2 * dates, -VOL_BUMP * g - 0.5 * VOL_BUMP**2 * dates,
        ):  # fmt: skip
            xk = x + shift
            hit = (xk >= log_b).any(axis=1) if up else (xk <= log_b).any(axis=1)
            a = np.exp(xk[:, -1])
            pay = np.maximum(a - strike, 0.0) if call else np.maximum(strike - a, 0.0)
            ys.append(np.where(hit == knock_in, disc * pay, 0.0))
        delta = (ys[1] - ys[2]) / (s0 * (math.exp(SPOT_BUMP) - math.exp(-SPOT_BUMP)))
        vega = (ys[3] - ys[4]) / (2.0 * VOL_BUMP)
        return np.stack([ys[0], disc * np.exp(x[:, -1]), delta, vega])

    za, zb = z[:, 0::2], z[:, 1::2]
    paths = [za, zb, -za, -zb] if antithetic else [za, zb]
    y, c, d, v = sum(sample(zk) for zk in paths) / len(paths)
    cols = [y, y * y, c, c * c, y * c, d, d * d, v, v * v]
    want = np.stack([col.reshape(nblocks, block).sum(axis=1) for col in cols], axis=1)
    assert (want[:, 0] > 0).any(), "no path paid: a degenerate draw"
    # scale: a column's sums are compared to its largest magnitude (a Greek's sum of
    # differences cancels down to far below its terms)
    scale = np.abs(want).max(axis=0) + 1e-300
    np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=1e-11)


@pytest.mark.parametrize("monitoring", [1, 5])
def test_a_price_without_greeks_is_the_same_price(monitoring):
    """``greeks=False`` runs the kernel without the bumped copies: the path's own hits and
    payoff are the same, so the price and its error are bitwise those with the Greeks, and
    no Greek is reported. Fresh contract, direction and knock type each run."""
    from hpc.domains.risk import GBM, Barrier, price

    rng = np.random.default_rng()
    s0, vol = rng.uniform(50, 150), rng.uniform(0.1, 0.5)
    up, knock_in = bool(rng.integers(2)), bool(rng.integers(2))
    gap = rng.uniform(0.2, 1.0) * vol
    option = Barrier(s0 * math.exp(rng.uniform(-0.5, 0.5) * gap), 1.0,
                     "call" if rng.integers(2) else "put",
                     barrier=s0 * math.exp(gap if up else -gap),
                     direction="up" if up else "down", knock="in" if knock_in else "out",
                     monitoring=monitoring)
    model = GBM(s0, vol, rng.uniform(0.0, 0.08), rng.uniform(0.0, 0.04))
    seed = int(rng.integers(2**31))
    full = price(model, option, paths=20_000, seed=seed)
    alone = price(model, option, paths=20_000, seed=seed, greeks=False)
    assert (alone.price, alone.stderr, alone.paths) == (full.price, full.stderr, full.paths)
    assert full.delta is not None and full.vega is not None
    assert alone.delta is None and alone.vega is None
