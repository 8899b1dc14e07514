"""Monte Carlo risk: prices against closed forms, error scaling, reproducibility, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpc.domains.risk import (
    GBM,
    AsianArithmetic,
    AsianGeometric,
    European,
    black_scholes,
    geometric_asian,
    price,
)

from tests.conftest import MPI_DIR, run_mpi


def _fresh_market(rng):
    model = GBM(
        spot=rng.uniform(50, 150),
        vol=rng.uniform(0.1, 0.5),
        rate=rng.uniform(0.0, 0.08),
        dividend=rng.uniform(0.0, 0.04),
    )
    strike = model.spot * rng.uniform(0.7, 1.3)
    return model, strike, rng.uniform(0.25, 2.0), str(rng.choice(["call", "put"]))


@pytest.mark.parametrize("control_variate", [False, True])
def test_european_matches_black_scholes_within_3_standard_errors(control_variate):
    rng = np.random.default_rng()
    for _ in range(2):
        model, strike, maturity, kind = _fresh_market(rng)
        option = European(strike, maturity, kind)
        r = price(
            model,
            option,
            paths=400_000,
            seed=int(rng.integers(2**63)),
            control_variate=control_variate,
        )
        exact = black_scholes(model, option)
        assert abs(r.price - exact) <= 3 * r.stderr, (model, option, r, exact)
        assert r.ci95[0] < r.price < r.ci95[1]


def test_black_scholes_closed_form_against_a_published_value():
    # Hull, Options, Futures and Other Derivatives, example 15.6: S=42, K=40, r=10%,
    # sigma=20%, T=0.5: call 4.76, put 0.81
    model = GBM(spot=42, vol=0.2, rate=0.1)
    assert black_scholes(model, European(40, 0.5, "call")) == pytest.approx(4.7594, abs=1e-4)
    assert black_scholes(model, European(40, 0.5, "put")) == pytest.approx(0.8086, abs=1e-4)


def test_geometric_asian_matches_its_closed_form():
    rng = np.random.default_rng()
    model, strike, maturity, kind = _fresh_market(rng)
    option = AsianGeometric(strike, maturity, kind, fixings=int(rng.integers(2, 60)))
    r = price(model, option, paths=300_000, seed=5)
    exact = geometric_asian(model, option)
    assert abs(r.price - exact) <= 3 * r.stderr, (model, option, r, exact)
    # one fixing is a European
    one = AsianGeometric(strike, maturity, kind, fixings=1)
    assert geometric_asian(model, one) == pytest.approx(
        black_scholes(model, European(strike, maturity, kind)), rel=1e-12
    )


def test_standard_error_halves_when_paths_quadruple():
    model = GBM(spot=100, vol=0.3, rate=0.02)
    option = AsianArithmetic(100, 1.0, "call", fixings=24)
    small = price(model, option, paths=100_000, seed=3, control_variate=False)
    large = price(model, option, paths=400_000, seed=4, control_variate=False)
    assert 1.8 < small.stderr / large.stderr < 2.2
    assert abs(small.price - large.price) < 3 * math.hypot(small.stderr, large.stderr)


def test_arithmetic_asian_control_variate_is_consistent_and_much_tighter():
    model = GBM(spot=100, vol=0.25, rate=0.04, dividend=0.01)
    option = AsianArithmetic(95, 0.75, "call", fixings=52)
    plain = price(model, option, paths=200_000, seed=8, control_variate=False)
    cv = price(model, option, paths=200_000, seed=9)
    assert cv.stderr < plain.stderr / 10
    assert abs(cv.price - plain.price) < 3 * math.hypot(plain.stderr, cv.stderr)
    # the arithmetic mean dominates the geometric one
    geo = geometric_asian(model, AsianGeometric(95, 0.75, "call", 52))
    assert cv.price > geo


def test_same_seed_same_price_for_any_batch_size_and_on_dask():
    model = GBM(spot=100, vol=0.2, rate=0.01)
    option = AsianArithmetic(100, 1.0, "put", fixings=12)
    kw = dict(paths=60_000, seed=21, block=512)
    ref = price(model, option, **kw)
    for batch in (1, 5, 1000):
        got = price(model, option, batch=batch, **kw)
        assert (got.price, got.stderr) == (ref.price, ref.stderr), batch
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        got = price(model, option, executor="dask", scheduler=client, batch=7, **kw)
    assert (got.price, got.stderr) == (ref.price, ref.stderr)
    other = price(model, option, **dict(kw, seed=22))
    assert other.price != ref.price


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 4])
def test_prices_are_bitwise_identical_on_any_rank_count(nranks):
    proc = run_mpi(nranks, [str(MPI_DIR / "check_risk_repro.py")], timeout=300)
    assert "bitwise equal" in proc.stdout


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: GBM(spot=100, vol=-0.2), "vol"),
        (lambda: GBM(spot=float("nan"), vol=0.2), "spot"),
        (lambda: GBM(spot=100, vol=0.2, rate=float("inf")), "rate"),
        (lambda: European(-1, 1.0), "strike"),
        (lambda: European(100, 0.0), "maturity"),
        (lambda: European(100, 1.0, "straddle"), "kind"),
        (lambda: AsianArithmetic(100, 1.0, fixings=0), "fixings"),
        (lambda: AsianArithmetic(100, 1.0, fixings=2.5), "fixings"),
    ],
)
def test_bad_input_names_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_zero_volatility_is_the_discounted_forward_payoff():
    model = GBM(spot=100, vol=0.0, rate=0.05)
    r = price(model, European(90, 1.0), paths=4096)
    assert r.price == pytest.approx(math.exp(-0.05) * (100 * math.exp(0.05) - 90), rel=1e-12)
    assert r.stderr < 1e-6 * r.price  # rounding of the one-pass variance only
