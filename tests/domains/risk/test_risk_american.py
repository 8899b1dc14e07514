"""Longstaff-Schwartz (compiled kernels) against a plain NumPy Longstaff-Schwartz on the same
normals, and against the exact Bermudan price of a binomial tree."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from hpc.domains.risk import GBM
from hpc.domains.risk.american import American, american_lsm

from hpc.rng import RandomStreams


def _fresh(rng):
    model = GBM(
        spot=rng.uniform(80, 120),
        vol=rng.uniform(0.15, 0.4),
        rate=rng.uniform(0.01, 0.06),
        dividend=rng.uniform(0.0, 0.03),
    )
    kind = str(rng.choice(["call", "put"]))
    option = American(100.0, rng.uniform(0.25, 1.5), kind, int(rng.integers(2, 40)))
    return model, option


def _numpy_lsm(model, option, paths, seed, degree, antithetic=False):
    """Longstaff-Schwartz as the textbook writes it: the normals of ``RandomStreams``, the
    spots by cumulative sums, a least-squares fit (``lstsq``) on ``1, x, .., x^degree`` of
    the in-the-money ``x = S/K`` at each date. ``antithetic``: ``paths`` samples, each a
    path and its partner from the negated normals, both in the regression; the price is the
    mean and the standard error that of the pair means."""
    n, dt = option.exercises, option.maturity / option.exercises
    z = RandomStreams(seed).normals(0, paths, n)
    drift = (model.rate - model.dividend - 0.5 * model.vol**2) * dt
    z = np.concatenate([z, -z]) if antithetic else z
    s = np.exp(math.log(model.spot) + np.cumsum(drift + model.vol * math.sqrt(dt) * z, axis=1))
    k, sign = option.strike, 1.0 if option.kind == "call" else -1.0
    disc = math.exp(-model.rate * dt)
    cash = np.maximum(sign * (s[:, -1] - k), 0.0)
    for j in range(n - 2, -1, -1):
        cash *= disc
        e = np.maximum(sign * (s[:, j] - k), 0.0)
        itm = np.flatnonzero(e > 0)
        if len(itm) > degree + 1:
            basis = np.vander(s[itm, j] / k, degree + 1, increasing=True)
            coef = np.linalg.lstsq(basis, cash[itm], rcond=None)[0]
            ex = itm[e[itm] > basis @ coef]
            cash[ex] = e[ex]
    cash *= disc
    if antithetic:
        cash = 0.5 * (cash[:paths] + cash[paths:])
    return cash.mean(), cash.std(ddof=1) / math.sqrt(paths)


def test_lsm_equals_a_numpy_lsm_on_the_same_paths():
    """Fresh market, degree 2 and 3 (each degree a compiled module): the same price up to
    rounding (a path's exercise decision could flip only where its payoff and the fitted
    value agree to ~1e-13, about 1e-7 of runs; it would move the price by ~1e-5 and fail
    the 1e-9 bound)."""
    rng = np.random.default_rng()
    for degree in (2, 3):
        model, option = _fresh(rng)
        seed = int(rng.integers(2**63))
        ref, ref_se = _numpy_lsm(model, option, 20_000, seed, degree)
        r = american_lsm(model, option, paths=20_000, seed=seed, degree=degree)
        immediate = max((model.spot - 100.0) * (1 if option.kind == "call" else -1), 0.0)
        ref = max(ref, immediate)  # exercise today
        assert abs(r.price - ref) <= 1e-9 * ref, (model, option, degree, r.price, ref)
        assert abs(r.stderr - ref_se) <= 1e-9 * ref_se


def test_antithetic_lsm_equals_a_numpy_lsm_on_the_same_paths():
    """Fresh market, antithetic pairs (the kernel's loop with partners, a partner's spot a
    quotient): the same price and pair-mean error as NumPy's paths of ``z`` and ``-z``, up
    to rounding (bound as above)."""
    rng = np.random.default_rng()
    model, option = _fresh(rng)
    seed = int(rng.integers(2**63))
    ref, ref_se = _numpy_lsm(model, option, 10_000, seed, 3, antithetic=True)
    r = american_lsm(model, option, paths=20_000, seed=seed, antithetic=True)
    immediate = max((model.spot - 100.0) * (1 if option.kind == "call" else -1), 0.0)
    ref = max(ref, immediate)
    assert r.paths == 20_000
    assert abs(r.price - ref) <= 1e-9 * ref, (model, option, r.price, ref)
    assert abs(r.stderr - ref_se) <= 1e-9 * ref_se


@pytest.mark.parametrize("antithetic", [False, True])
def test_lsm_price_does_not_depend_on_threads_or_batch(antithetic):
    model, option = GBM(100.0, 0.3, 0.04, 0.01), American(105.0, 1.0, "put", 7)
    threads = numba.get_num_threads()
    kw = dict(paths=5_001, seed=4, antithetic=antithetic)
    ref = american_lsm(model, option, **kw)
    try:
        numba.set_num_threads(1)
        one = american_lsm(model, option, executor="mpi", batch=1, **kw)
    finally:
        numba.set_num_threads(threads)
    assert (one.price, one.stderr, one.paths) == (ref.price, ref.stderr, ref.paths)
    assert ref.paths == (5_002 if antithetic else 5_001)


def _bermudan_tree(model, option, per_date=150):
    """Exact Bermudan price (exercise now and at the dates ``T/n .. T``) on a
    Cox-Ross-Rubinstein tree with ``per_date`` steps between dates."""
    n = option.exercises
    steps = n * per_date
    dt = option.maturity / steps
    u = math.exp(model.vol * math.sqrt(dt))
    p = (math.exp((model.rate - model.dividend) * dt) - 1 / u) / (u - 1 / u)
    disc = math.exp(-model.rate * dt)
    sign = 1.0 if option.kind == "call" else -1.0
    s = model.spot * u ** np.arange(-steps, steps + 1, 2)
    v = np.maximum(sign * (s - option.strike), 0.0)
    for i in range(steps - 1, -1, -1):
        v = disc * (p * v[1:] + (1 - p) * v[:-1])
        s = s[1:] / u
        if i % per_date == 0:
            v = np.maximum(v, sign * (s - option.strike))
    return float(v[0])


@pytest.mark.parametrize("antithetic", [False, True])
def test_lsm_matches_the_bermudan_price_of_a_binomial_tree(antithetic):
    """Fresh market, a Bermudan put with 4-16 dates: within 4 standard errors plus 0.5% (the
    fitted rule's low bias and the in-sample regression's high one) of the tree's price."""
    rng = np.random.default_rng()
    model, _ = _fresh(rng)
    option = American(float(rng.uniform(90, 110)), rng.uniform(0.25, 1.0), "put",
                      int(rng.integers(4, 17)))  # fmt: skip
    seed = int(rng.integers(2**63))
    r = american_lsm(model, option, paths=200_000, seed=seed, antithetic=antithetic)
    tree = _bermudan_tree(model, option)
    assert abs(r.price - tree) <= 4 * r.stderr + 0.005 * tree, (model, option, r, tree)
