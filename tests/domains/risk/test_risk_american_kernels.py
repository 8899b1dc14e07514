"""The Longstaff-Schwartz path kernel against NumPy on the same normals: both loops (with and
without antithetic partners), an even and an odd number of dates, blocks drawn from an
offset (as :func:`hpc.run.map_blocks` batches them)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpc.domains.risk import GBM
from hpc.domains.risk import american as am

from hpc.rng import RandomStreams


@pytest.mark.parametrize("antithetic", [False, True])
def test_spots_equal_numpy_paths_on_the_same_normals(antithetic):
    """Fresh market, date count (odd and even), path count and block offset: each path's
    spots are ``exp(ln S0 + cumsum(drift dt + vol sqrt(dt) z))`` and a partner's those of
    ``-z``, to rounding (the partner is computed as a quotient: a few ulp)."""
    rng = np.random.default_rng()
    model = GBM(
        spot=rng.uniform(50, 150),
        vol=rng.uniform(0.1, 0.6),
        rate=rng.uniform(0.0, 0.08),
        dividend=rng.uniform(0.0, 0.04),
    )
    seed, stream = int(rng.integers(2**63)), int(rng.integers(4))
    for n in (int(rng.integers(1, 20)) * 2, int(rng.integers(0, 20)) * 2 + 1):
        paths = int(rng.integers(10, 6000))
        maturity = rng.uniform(0.1, 3.0)
        dt = maturity / n
        block = am.block_size(paths)
        half = block // 2 if antithetic else block
        first, count = int(rng.integers(0, 3)), int(rng.integers(1, 4))
        rows = am._spots(first, count, n, block, half, dt, model, seed, stream)
        spots = rows.reshape(count, n, block)
        z = RandomStreams(seed, stream).normals(first * half, count * half, n)
        drift = (model.rate - model.dividend - 0.5 * model.vol**2) * dt
        vsd = model.vol * math.sqrt(dt)
        ref = np.exp(math.log(model.spot) + np.cumsum(drift + vsd * z, axis=1))
        got = spots[:, :, :half].transpose(0, 2, 1).reshape(count * half, n)
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0, err_msg=f"paths, n={n}")
        if antithetic:
            partner = np.exp(math.log(model.spot) + np.cumsum(drift - vsd * z, axis=1))
            got = spots[:, :, half:].transpose(0, 2, 1).reshape(count * half, n)
            np.testing.assert_allclose(got, partner, rtol=1e-13, atol=0, err_msg=f"n={n}")


@pytest.mark.parametrize("antithetic", [False, True])
def test_parallel_backward_equals_one_thread(monkeypatch, antithetic):
    """The backward induction on every thread (its threshold lowered to 0; a real run needs
    2^20 paths for that) gives the one-thread price to the bit: the partial sums are added
    in block order, the sampled moments too."""
    import numba

    rng = np.random.default_rng()
    model = GBM(100.0, rng.uniform(0.15, 0.4), rng.uniform(0.01, 0.06), rng.uniform(0.0, 0.03))
    option = am.American(rng.uniform(90, 110), rng.uniform(0.25, 1.5), "put", 9)
    seed = int(rng.integers(2**63))
    monkeypatch.setattr(am, "_PARALLEL_PATHS", 0)
    kw = dict(paths=70_001, seed=seed, antithetic=antithetic)  # 69 blocks, every 2nd sampled
    ref = am.american_lsm(model, option, **kw)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = am.american_lsm(model, option, **kw)
    finally:
        numba.set_num_threads(threads)
    assert (one.price, one.stderr) == (ref.price, ref.stderr)


def test_antithetic_pair_means_on_read_only_rows_give_the_same_price(monkeypatch):
    """The pair means go into the spots' memory when it is writable; rows that are not (as
    :func:`hpc.run.map_blocks` may return them from Dask) give the same price and error to
    the bit, through a new array."""
    rng = np.random.default_rng()
    model = GBM(100.0, rng.uniform(0.15, 0.4), rng.uniform(0.01, 0.06), rng.uniform(0.0, 0.03))
    option = am.American(rng.uniform(90, 110), rng.uniform(0.25, 1.5), "put", 5)
    seed = int(rng.integers(2**63))
    ref = am.american_lsm(model, option, paths=5_000, seed=seed, antithetic=True)
    blocks = am.map_blocks

    def read_only(*args, **kwargs):
        rows = blocks(*args, **kwargs).copy()
        rows.flags.writeable = False
        return rows

    monkeypatch.setattr(am, "map_blocks", read_only)
    got = am.american_lsm(model, option, paths=5_000, seed=seed, antithetic=True)
    assert (got.price, got.stderr) == (ref.price, ref.stderr)
