"""Monte Carlo risk: prices against closed forms, error scaling, reproducibility, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hpc.benchmarks.mc import quantlib_process
from hpc.domains.risk import (
    GBM,
    AsianArithmetic,
    AsianGeometric,
    Barrier,
    European,
    black_scholes,
    geometric_asian,
    price,
)
from scipy import stats

from tests.conftest import ROOT, mpi_script, run_mpi


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
def test_european_matches_black_scholes_within_4_standard_errors(control_variate):
    """Fresh markets each run, so the bound is set by its false alarms: 4 standard errors
    fail a correct estimator with probability 6e-5 per check, 2.5e-4 per run of the four
    checks (3 failed one run in about a hundred: |z| = 3.27 once, where 60 seeds of that
    market gave z of mean -0.01 and deviation 1.02). 4 standard errors of 400k paths were
    0.47% of the price there, far below the error of a wrong drift or discount."""
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
        assert abs(r.price - exact) <= 4 * r.stderr, (model, option, r, exact)
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
    proc = run_mpi(nranks, [str(mpi_script("check_risk_repro.py"))], timeout=300)
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


def _bs_greeks(model, option):
    t, s = option.maturity, model.vol
    d1 = (
        math.log(model.spot / option.strike) + (model.rate - model.dividend + 0.5 * s * s) * t
    ) / (s * math.sqrt(t))
    q = math.exp(-model.dividend * t)
    delta = q * stats.norm.cdf(d1) if option.kind == "call" else q * (stats.norm.cdf(d1) - 1)
    vega = model.spot * q * stats.norm.pdf(d1) * math.sqrt(t)
    return delta, vega


def _itm_probability(model, strike, maturity, kind):
    """Risk-neutral probability that the option ends in the money (Black-Scholes N(+-d2))."""
    s = model.vol
    d2 = (
        math.log(model.spot / strike) + (model.rate - model.dividend - 0.5 * s * s) * maturity
    ) / (s * math.sqrt(maturity))
    return stats.norm.cdf(d2 if kind == "call" else -d2)


def test_pathwise_delta_and_vega_match_black_scholes():
    """Fresh market, within z standard errors, z set for a false-failure rate below 1e-6.

    Two two-sided checks. Were the estimates exactly normal, each would fail falsely with
    probability 2 (1 - Phi(z)); a factor 4 covers the skew of the sample mean (Edgeworth:
    skewness ~1/sqrt(p) = 10 at an in-the-money probability p = 1%, 2e6 samples, gives
    about 1.2x the normal tail at z = 5.3) and the noise of the estimated standard error.
    So z = Phi^-1(1 - 1e-6 / (2 * 2 * 4)) = 5.29: 2 checks x 2 tails x 6.25e-8 x 4 = 1e-6.
    Draws where the option ends in the money with probability under 1% are redrawn (1.1% of
    them): there a handful of in-the-money paths makes the estimate far from normal (a
    3-sigma bound failed at 3.15 on a deep out-of-the-money put), and with none the standard
    error is 0. 4e6 paths keep the power: a delta or vega 1% off (x 1.01) fails this test on
    about 97% of draws (93% for the earlier 3-sigma bound at 4e5 paths)."""
    rng = np.random.default_rng()
    while True:
        model, strike, maturity, kind = _fresh_market(rng)
        if _itm_probability(model, strike, maturity, kind) >= 0.01:
            break
    option = European(strike, maturity, kind)
    r = price(model, option, paths=4_000_000, seed=int(rng.integers(2**63)))
    delta, vega = _bs_greeks(model, option)
    z = stats.norm.isf(1e-6 / (2 * 2 * 4))  # 5.29: see the docstring
    assert abs(r.delta - delta) <= z * r.delta_stderr, (model, option, r.delta, delta)
    assert abs(r.vega - vega) <= z * r.vega_stderr, (model, option, r.vega, vega)


def test_pathwise_greeks_of_the_geometric_asian_match_its_closed_form():
    model = GBM(spot=100, vol=0.3, rate=0.03, dividend=0.02)
    option = AsianGeometric(105, 1.5, "call", fixings=20)
    r = price(model, option, paths=400_000, seed=17)
    h = 1e-4
    bump = lambda **kw: geometric_asian(GBM(**{**model.__dict__, **kw}), option)  # noqa: E731
    delta = (bump(spot=100 + h) - bump(spot=100 - h)) / (2 * h)
    vega = (bump(vol=0.3 + h) - bump(vol=0.3 - h)) / (2 * h)
    assert abs(r.delta - delta) <= 3 * r.delta_stderr
    assert abs(r.vega - vega) <= 3 * r.vega_stderr


def _quantlib_barrier(model, option):
    ql = pytest.importorskip("QuantLib")
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    process = quantlib_process(model, today)
    kind = {
        ("up", "out"): ql.Barrier.UpOut,
        ("up", "in"): ql.Barrier.UpIn,
        ("down", "out"): ql.Barrier.DownOut,
        ("down", "in"): ql.Barrier.DownIn,
    }
    payoff = ql.PlainVanillaPayoff(
        ql.Option.Call if option.kind == "call" else ql.Option.Put, option.strike
    )
    qopt = ql.BarrierOption(
        kind[option.direction, option.knock],
        option.barrier,
        0.0,
        payoff,
        ql.EuropeanExercise(today + int(round(365 * option.maturity))),
    )
    qopt.setPricingEngine(ql.AnalyticBarrierEngine(process))
    return qopt.NPV()


@pytest.mark.parametrize(
    "direction, knock", [("up", "out"), ("up", "in"), ("down", "out"), ("down", "in")]
)
def test_barrier_with_continuity_correction_matches_quantlib_analytic(direction, knock):
    """Discrete monitoring at 252 dates with the Broadie-Glasserman-Kou shift against the
    continuously monitored closed form: within 3 standard errors plus the correction's
    residual bias (taken as 0.3% of the vanilla price)."""
    rng = np.random.default_rng()
    model = GBM(
        spot=100,
        vol=rng.uniform(0.15, 0.35),
        rate=rng.uniform(0, 0.06),
        dividend=rng.uniform(0, 0.03),
    )
    maturity = round(365 * rng.uniform(0.5, 1.5)) / 365  # whole days, as QuantLib's dates
    level = 100 * (rng.uniform(1.15, 1.4) if direction == "up" else rng.uniform(0.65, 0.87))
    kind = str(rng.choice(["call", "put"]))
    option = Barrier(
        100 * rng.uniform(0.9, 1.1),
        maturity,
        kind,
        barrier=level,
        direction=direction,
        knock=knock,
        monitoring=252,
        continuity_correction=True,
    )
    r = price(model, option, paths=600_000, seed=int(rng.integers(2**63)))
    exact = _quantlib_barrier(model, option)
    vanilla = black_scholes(model, European(option.strike, maturity, kind))
    assert abs(r.price - exact) <= 3 * r.stderr + 3e-3 * vanilla, (option, model, r, exact)
    # common-random-number Greeks against the closed form bumped the same way
    h = 0.01
    up = _quantlib_barrier(GBM(**{**model.__dict__, "spot": 100 * math.exp(h)}), option)
    down = _quantlib_barrier(GBM(**{**model.__dict__, "spot": 100 * math.exp(-h)}), option)
    delta = (up - down) / (100 * (math.exp(h) - math.exp(-h)))
    assert abs(r.delta - delta) <= 3 * r.delta_stderr + 0.02 * abs(delta) + 1e-3, (r, delta)


def test_in_plus_out_is_the_vanilla_on_the_same_paths():
    model = GBM(spot=100, vol=0.2, rate=0.02)
    kw = dict(strike=100, maturity=1.0, kind="call", barrier=120, direction="up", monitoring=50)
    ins = price(model, Barrier(knock="in", **kw), paths=100_000, seed=4, control_variate=False)
    outs = price(model, Barrier(knock="out", **kw), paths=100_000, seed=4, control_variate=False)
    vanilla = price(model, European(100, 1.0, "call"), paths=100_000, seed=4, control_variate=False)
    # European draws one normal per path, the barrier 50: compare with the closed form
    assert abs(ins.price + outs.price - black_scholes(model, European(100, 1.0))) < 4 * (
        ins.stderr + outs.stderr
    )
    assert vanilla.price > 0


def test_portfolio_errors_name_the_file_and_the_field(tmp_path):
    from hpc.domains.risk.portfolio import PortfolioError, load_portfolio

    good = {
        "model": {"spot": 100, "vol": 0.2},
        "instruments": [{"name": "c", "type": "european", "strike": 100, "maturity": 1.0}],
    }
    cases = [
        ('{"model": {"spot": 100,\n "vol": }}', "line 2"),
        ({**good, "model": {"spot": 100, "vol": -0.1}}, "model: vol=-0.1"),
        ({**good, "instruments": [{"type": "swap"}]}, r"instruments\[0\]: type='swap'"),
        (
            {
                **good,
                "instruments": [
                    {"name": "x", "type": "asian", "strike": 1, "maturity": 1, "fixings": 0}
                ],
            },
            r"instruments\[0\] \(x\): fixings=0",
        ),
        (
            {**good, "instruments": [{"type": "european", "strike": 1, "maturity": 1, "strik": 2}]},
            "unknown field",
        ),
    ]
    for i, (content, message) in enumerate(cases):
        path = tmp_path / f"book{i}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        with pytest.raises(PortfolioError, match=message) as info:
            load_portfolio(path)
        assert str(path) in str(info.value)


def test_hpc_risk_price_on_two_ranks_writes_the_table(tmp_path):
    from hpc.domains.risk.portfolio import load_portfolio
    from hpc.io import read_table

    out = tmp_path / "risk.h5"
    example = ROOT / "examples" / "portfolio.json"
    proc = run_mpi(
        2,
        [
            "-m",
            "hpc",
            "risk",
            "price",
            str(example),
            "--paths",
            "50000",
            "--seed",
            "3",
            "--out",
            str(out),
            "--json",
        ],
        timeout=300,
    )
    printed = json.loads(proc.stdout.strip().splitlines()[-1])
    table = read_table(out, "prices")
    book = load_portfolio(example)
    assert list(table["name"]) == book.names == [row["name"] for row in printed]
    from hpc.domains.risk import American, american_lsm

    for i, option in enumerate(book.instruments):  # the same numbers as the Python API
        if isinstance(option, American):
            r = american_lsm(book.model, option, paths=50000, seed=3, stream=i)
        else:
            r = price(book.model, option, paths=50000, seed=3, stream=i)
        assert table["price"][i] == r.price and table["stderr"][i] == r.stderr


def _quantlib_american(model, option):
    ql = pytest.importorskip("QuantLib")
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    process = quantlib_process(model, today)
    kind = ql.Option.Put if option.kind == "put" else ql.Option.Call
    qopt = ql.VanillaOption(
        ql.PlainVanillaPayoff(kind, option.strike),
        ql.AmericanExercise(today, today + int(round(365 * option.maturity))),
    )
    qopt.setPricingEngine(ql.FdBlackScholesVanillaEngine(process, 400, 400))
    return qopt.NPV()


def test_american_put_by_longstaff_schwartz_matches_quantlib_finite_differences():
    """Fresh market; 100 exercise dates. LSM prices the Bermudan contract, below the American
    by O(1/dates): ours may fall short of the FD price by 3 standard errors plus 1% of it,
    and may not exceed it by more than 3 standard errors."""
    from hpc.domains.risk.american import American, american_lsm

    rng = np.random.default_rng()
    model = GBM(
        spot=rng.uniform(80, 120),
        vol=rng.uniform(0.15, 0.4),
        rate=rng.uniform(0.01, 0.06),
        dividend=rng.uniform(0.0, 0.02),
    )
    option = American(100.0, round(365 * rng.uniform(0.5, 1.5)) / 365, "put", exercises=100)
    r = american_lsm(model, option, paths=200_000, seed=int(rng.integers(2**63)))
    fd = _quantlib_american(model, option)
    assert fd - 3 * r.stderr - 0.01 * fd <= r.price <= fd + 3 * r.stderr, (model, r, fd)
    european = black_scholes(model, European(100.0, option.maturity, "put"))
    assert r.price > european - 3 * r.stderr  # the early-exercise premium is not negative


def test_longstaff_schwartz_reproduces_their_published_example():
    """Longstaff and Schwartz (2001), Table 1: S=36, K=40, r=6%, sigma=0.2, T=1, 50 exercise
    dates: LSM 4.472 (s.e. 0.010), finite differences 4.478."""
    from hpc.domains.risk.american import American, american_lsm

    r = american_lsm(
        GBM(spot=36, vol=0.2, rate=0.06), American(40, 1.0, "put", 50), paths=200_000, seed=3
    )
    assert abs(r.price - 4.472) < 3 * math.hypot(r.stderr, 0.010)


def test_heston_european_matches_quantlib_analytic_engine():
    """Full-truncation Euler at 250 steps a year against the semi-analytic Heston price:
    within 3 standard errors plus the scheme's O(dt) bias (taken as 0.5% of the price)."""
    ql = pytest.importorskip("QuantLib")
    from hpc.domains.risk import Heston, price_heston

    rng = np.random.default_rng()
    model = Heston(
        spot=100.0,
        v0=rng.uniform(0.02, 0.09),
        kappa=rng.uniform(1.0, 3.0),
        theta=rng.uniform(0.02, 0.09),
        xi=rng.uniform(0.2, 0.6),
        rho=rng.uniform(-0.8, 0.0),
        rate=rng.uniform(0.0, 0.05),
        dividend=rng.uniform(0.0, 0.02),
    )
    option = European(
        rng.uniform(90, 110),
        round(365 * rng.uniform(0.5, 1.5)) / 365,
        str(rng.choice(["call", "put"])),
    )
    r = price_heston(model, option, paths=300_000, seed=int(rng.integers(2**63)))
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    dc = ql.Actual365Fixed()
    process = ql.HestonProcess(
        ql.YieldTermStructureHandle(ql.FlatForward(today, model.rate, dc)),
        ql.YieldTermStructureHandle(ql.FlatForward(today, model.dividend, dc)),
        ql.QuoteHandle(ql.SimpleQuote(model.spot)),
        model.v0,
        model.kappa,
        model.theta,
        model.xi,
        model.rho,
    )
    kind = ql.Option.Call if option.kind == "call" else ql.Option.Put
    qopt = ql.VanillaOption(
        ql.PlainVanillaPayoff(kind, option.strike),
        ql.EuropeanExercise(today + int(round(365 * option.maturity))),
    )
    qopt.setPricingEngine(ql.AnalyticHestonEngine(ql.HestonModel(process)))
    exact = qopt.NPV()
    assert abs(r.price - exact) <= 3 * r.stderr + 5e-3 * exact, (model, option, r, exact)
    with pytest.raises(ValueError, match="rho"):
        Heston(spot=100, v0=0.04, kappa=1, theta=0.04, xi=0.3, rho=-1.5)


def test_basket_kernel_equals_a_numpy_simulation_on_the_same_normals():
    from hpc.domains.risk.basket import Basket, price_basket
    from hpc.domains.risk.var import Market

    from hpc.rng import RandomStreams

    corr = [[1, 0.5, 0.2], [0.5, 1, 0.3], [0.2, 0.3, 1]]
    market = Market([100, 80, 60], [0.2, 0.3, 0.25], corr, rate=0.02, dividends=[0, 0.01, 0])
    option = Basket([0.5, 0.3, 0.2], 85, 1.0, "put")
    n = 8192
    r = price_basket(
        market, option, paths=n, seed=5, antithetic=False, control_variate=False, block=1024
    )
    z = RandomStreams(5).normals(0, n, 3) @ market.loading.T
    st = market.spots * np.exp((0.02 - market.dividends - 0.5 * market.vols**2) + market.vols * z)
    pay = np.exp(-0.02) * np.maximum(85 - st @ option.weights, 0)
    assert r.price == pytest.approx(pay.mean(), rel=1e-12)
    assert r.stderr == pytest.approx(pay.std(ddof=1) / math.sqrt(n), rel=1e-9)


def test_perfectly_correlated_basket_is_a_black_scholes_option():
    from hpc.domains.risk.basket import Basket, price_basket
    from hpc.domains.risk.var import Market

    market = Market([100, 50], [0.25, 0.25], [[1, 1], [1, 1]], rate=0.03, dividends=[0.01] * 2)
    r = price_basket(market, Basket([1, 2], 190, 1.0), paths=400_000, seed=2)
    exact = black_scholes(GBM(spot=200, vol=0.25, rate=0.03, dividend=0.01), European(190, 1.0))
    assert abs(r.price - exact) <= 3 * r.stderr
    with pytest.raises(ValueError, match="weights"):
        price_basket(market, Basket([1, 2, 3], 100, 1.0))


def test_brownian_bridge_has_the_covariance_of_brownian_motion():
    from hpc.domains.risk.qmc import bridge_matrix

    rng = np.random.default_rng()
    for n in (1, 2, 7, 64):
        times = np.cumsum(rng.uniform(0.1, 1.0, n))
        a = bridge_matrix(times)
        np.testing.assert_allclose(a @ a.T, np.minimum.outer(times, times), rtol=0, atol=1e-12)


def _within_qmc_error(result, exact: float, strike: float) -> bool:
    """``result`` within 4 randomised standard errors of ``exact``. With no spread at all
    between the scramblings (no path paid, far out of the money) the error estimate is 0:
    then the exact price must be below what one paying path would add (``strike / paths``),
    which is why none was drawn."""
    if result.stderr == 0.0 and result.price == 0.0:
        return exact < strike / result.paths
    return abs(result.price - exact) <= 4 * result.stderr


def test_sobol_with_a_bridge_prices_within_its_randomised_error_and_beats_pseudo_random():
    """Randomised QMC: the error is estimated from 16 scramblings (a t-distribution with 15
    degrees of freedom: 4 standard errors)."""
    rng = np.random.default_rng()
    model, strike, maturity, kind = _fresh_market(rng)
    seed = int(rng.integers(2**31))
    european = European(strike, maturity, kind)
    r = price(model, european, paths=2**15, sampler="sobol", seed=seed)
    assert _within_qmc_error(r, black_scholes(model, european), strike), (model, european, r)
    asian = AsianGeometric(strike, maturity, kind, fixings=32)
    q = price(model, asian, paths=2**13, sampler="sobol", seed=seed)
    assert _within_qmc_error(q, geometric_asian(model, asian), strike), (model, asian, q)
    # the efficiency claim on an at-the-money contract (far out of the money, both errors
    # are about the rare paths that pay, and the bridge has little structure to exploit)
    atm_model, atm = GBM(spot=100, vol=0.25, rate=0.03), AsianGeometric(100, 1.0, "call", 32)
    rq = price(atm_model, atm, paths=2**13, sampler="sobol", seed=seed)
    plain = price(
        atm_model, atm, paths=rq.paths, seed=seed, antithetic=False, control_variate=False
    )
    assert rq.stderr < plain.stderr / 5
    again = price(model, asian, paths=2**13, sampler="sobol", seed=seed, batch=1)
    assert (again.price, again.stderr) == (q.price, q.stderr)
    with pytest.raises(ValueError, match="power of 2"):
        price(model, european, sampler="sobol", block=1000)


@pytest.mark.parametrize("kind", ["european", "arithmetic", "geometric"])
@pytest.mark.parametrize("antithetic", [False, True])
def test_vector_kernel_equals_a_numpy_simulation_on_the_same_normals(kind, antithetic):
    """All nine block sums, blocks not a multiple of the kernel's lane count, odd steps. A
    sample is two paths: step ``j`` takes normals ``2 j`` (path A) and ``2 j + 1`` (path B)
    of the sample's index in the stream (its antithetic partners their negatives)."""
    from hpc.domains.risk import kernels

    from hpc.rng import RandomStreams

    rng = np.random.default_rng()
    s0, vol, r, q, strike, t = 100.0, rng.uniform(0.1, 0.4), 0.03, 0.01, 98.0, 1.3
    steps = 1 if kind == "european" else 7
    block, nblocks, first = 100, 3, int(rng.integers(0, 1000))
    seed = int(rng.integers(2**63))
    dt = t / steps
    code = {"european": kernels.EUROPEAN, "arithmetic": kernels.ARITHMETIC}
    params = dict(
        k0=seed & 0xFFFFFFFF, k1=seed >> 32, stream=3, log_s0=math.log(s0), s0=s0,
        drift=(r - q - 0.5 * vol**2) * dt, vol=vol, dt=dt, steps=steps, strike=strike,
        call=False, kind=code.get(kind, kernels.GEOMETRIC), discount=math.exp(-r * t),
        barrier=0.0, up=False, knock_in=False, antithetic=antithetic,
    )  # fmt: skip
    got = kernels.block_sums(first, nblocks, block, params)

    z = RandomStreams(seed, 3).normals(first * block, nblocks * block, 2 * steps)
    za, zb = z[:, 0::2], z[:, 1::2]
    dates = dt * np.arange(1, steps + 1)

    def sample(z):
        w = np.cumsum(math.sqrt(dt) * z, axis=1)
        x = math.log(s0) + (r - q - 0.5 * vol**2) * dates + vol * w
        s = np.exp(x)
        geo = np.exp(x.mean(axis=1))
        if kind == "european":
            a, da = s[:, -1], s[:, -1] * (w[:, -1] - vol * t)
        elif kind == "arithmetic":
            a, da = s.mean(axis=1), (s * (w - vol * dates)).mean(axis=1)
        else:
            a, da = geo, geo * (w - vol * dates).mean(axis=1)
        disc = math.exp(-r * t)
        itm = a < strike
        y = disc * np.maximum(strike - a, 0.0)
        c = {"european": disc * a, "arithmetic": disc * np.maximum(strike - geo, 0.0)}
        c = c.get(kind, 0.0 * a)
        return np.stack([y, c, -disc * itm * a / s0, -disc * itm * da])

    paths = [za, zb, -za, -zb] if antithetic else [za, zb]
    y, c, d, v = sum(sample(zk) for zk in paths) / len(paths)
    cols = [y, y * y, c, c * c, y * c, d, d * d, v, v * v]
    want = np.stack([col.reshape(nblocks, block).sum(axis=1) for col in cols], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


def test_the_block_kernel_is_chosen_once_per_device():
    """``kernels.BLOCKS`` holds the block kernel of each device; ``block_sums`` on the CPU
    backend (by name or object) is the lane kernel's rows."""
    from hpc.domains.risk import kernels

    from hpc.backend import get_backend

    assert kernels.BLOCKS.on("cpu").block_rows is kernels._cpu_block_sums
    assert kernels.BLOCKS.on("gpu").block_rows is kernels._gpu_block_sums
    spec = dict(
        k0=5, k1=7, stream=1, log_s0=math.log(100.0), s0=100.0, drift=-0.01, vol=0.2,
        dt=0.25, steps=4, strike=100.0, call=True, kind=kernels.ARITHMETIC,
        discount=0.98, barrier=0.0, up=False, knock_in=False, antithetic=True,
    )  # fmt: skip
    rows = kernels.block_sums(3, 2, 50, spec)
    assert rows.shape == (2, kernels.WIDTH)
    same = kernels.block_sums(3, 2, 50, spec, get_backend("cpu"))
    np.testing.assert_array_equal(same, rows)

@pytest.mark.cudasim
def test_gpu_path_kernels_under_the_simulator_equal_the_cpu_kernels():
    from tests.conftest import run_cudasim

    run_cudasim("check_risk_cudasim.py", timeout=400)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "option", [European(95, 1.0, "put"), AsianArithmetic(100, 1.0, "call", 64)]
)
def test_gpu_price_equals_the_cpu_price_on_the_same_samples(option):
    model = GBM(spot=100, vol=0.25, rate=0.03, dividend=0.01)
    gpu = price(model, option, paths=2_000_000, seed=11, backend="gpu")
    cpu = price(model, option, paths=2_000_000, seed=11, backend="cpu")
    # libdevice against hpc.vmath: the same samples up to rounding, far inside one stderr
    assert gpu.price == pytest.approx(cpu.price, rel=1e-10)
    assert gpu.stderr == pytest.approx(cpu.stderr, rel=1e-8)
    assert gpu.delta == pytest.approx(cpu.delta, rel=1e-9)
    again = price(model, option, paths=2_000_000, seed=11, backend="gpu", batch=3)
    assert again.price == gpu.price  # bitwise reproducible on the device, any batching


def test_one_entry_point_prices_every_model_the_same_on_every_executor():
    """``price`` dispatches on the model and instrument; the old names are the same numbers;
    each combination is bitwise the same for any batch size and on Dask."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster
    from hpc.domains.risk import (
        American,
        Basket,
        Heston,
        Market,
        american_lsm,
        price_basket,
        price_heston,
    )

    gbm = GBM(spot=100, vol=0.25, rate=0.02, dividend=0.01)
    heston = Heston(spot=100, v0=0.05, kappa=1.2, theta=0.04, xi=0.4, rho=-0.6, rate=0.02)
    market = Market([100, 60], [0.2, 0.3], [[1, 0.3], [0.3, 1]], rate=0.02)
    cases = [
        (gbm, Barrier(100, 0.5, "put", 85, "down", "out", 8), price, 20_000),
        (heston, European(100, 0.25, "call"), price_heston, 10_000),
        (heston, Barrier(100, 0.25, "call", 110, "up", "in", 4), price, 10_000),
        (market, Basket([0.4, 0.6], 75, 1.0, "put"), price_basket, 20_000),
        (gbm, American(100, 0.5, "put", 6), american_lsm, 5_000),
    ]
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        for model, option, wrapper, paths in cases:
            ref = price(model, option, paths=paths, seed=9)
            old = wrapper(model, option, paths=paths, seed=9)
            assert (old.price, old.stderr) == (ref.price, ref.stderr), option
            got = price(model, option, paths=paths, seed=9, batch=3)
            assert (got.price, got.stderr) == (ref.price, ref.stderr), option
            got = price(model, option, paths=paths, seed=9, executor="dask", scheduler=client)
            assert (got.price, got.stderr) == (ref.price, ref.stderr), option
    with pytest.raises(TypeError, match="Basket for GBM"):
        price(gbm, Basket([1.0], 100, 1.0))


@pytest.mark.parametrize(
    "option",
    [
        European(100, 1.0, "put"),
        AsianGeometric(105, 1.0, "call", fixings=6),
        Barrier(100, 1.0, "call", 125, "up", "out", monitoring=12),
    ],
)
def test_heston_without_vol_of_vol_is_gbm(option):
    """xi = 0, v0 = theta: the Heston paths are GBM's with vol sqrt(theta) (Euler in ln S is
    exact then), so every payoff is priced as under GBM, within 4 combined standard errors."""
    from hpc.domains.risk import Heston

    heston = Heston(spot=100, v0=0.04, kappa=2.0, theta=0.04, xi=0.0, rho=-0.5, rate=0.03,
                    dividend=0.01, steps_per_year=24)  # fmt: skip
    gbm = GBM(spot=100, vol=0.2, rate=0.03, dividend=0.01)
    h = price(heston, option, paths=200_000, seed=4)
    g = price(gbm, option, paths=200_000, seed=5)
    assert abs(h.price - g.price) <= 4 * math.hypot(h.stderr, g.stderr), (option, h, g)
    if isinstance(option, AsianGeometric):
        exact = geometric_asian(gbm, option)
        assert abs(h.price - exact) <= 4 * h.stderr, (h, exact)
