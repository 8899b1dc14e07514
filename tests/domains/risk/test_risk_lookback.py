"""Lookback options: against Black-Scholes (one date), QuantLib's continuous closed forms with
the Broadie-Glasserman-Kou shift (many dates), an independent NumPy simulation of the
discrete payoff (GBM and Heston), exact pathwise relations, reproducibility, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpc.benchmarks.mc import quantlib_process
from hpc.domains.risk import GBM, European, Heston, black_scholes, price
from hpc.domains.risk.instruments import BGK_BETA, Lookback


def _market(rng):
    return GBM(
        spot=rng.uniform(50, 150),
        vol=rng.uniform(0.15, 0.4),
        rate=rng.uniform(0.0, 0.06),
        dividend=rng.uniform(0.0, 0.03),
    )


@pytest.mark.parametrize("kind", ["call", "put"])
def test_one_date_floating_strike_is_the_black_scholes_option_struck_at_the_spot(kind):
    """One date: the extremum is over S(0) and S(T), so the floating call pays
    max(S(T) - S0, 0) and the put max(S0 - S(T), 0)."""
    rng = np.random.default_rng()
    model = _market(rng)
    maturity = rng.uniform(0.25, 2.0)
    r = price(model, Lookback(maturity, kind, monitoring=1), paths=200_000,
              seed=int(rng.integers(2**63)))  # fmt: skip
    exact = black_scholes(model, European(model.spot, maturity, kind))
    assert abs(r.price - exact) <= 5 * r.stderr, (model, maturity, r, exact)


def _ql(model, maturity, kind, strike=None):
    """QuantLib's continuously monitored lookback (running extremum S0): fixed strike
    ``strike``, or floating with ``strike=None``."""
    ql = pytest.importorskip("QuantLib")
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    process = quantlib_process(model, today)
    side = ql.Option.Call if kind == "call" else ql.Option.Put
    exercise = ql.EuropeanExercise(today + int(round(365 * maturity)))
    if strike is None:
        option = ql.ContinuousFloatingLookbackOption(
            model.spot, ql.FloatingTypePayoff(side), exercise
        )
        option.setPricingEngine(ql.AnalyticContinuousFloatingLookbackEngine(process))
    else:
        payoff = ql.PlainVanillaPayoff(side, strike)
        option = ql.ContinuousFixedLookbackOption(model.spot, payoff, exercise)
        option.setPricingEngine(ql.AnalyticContinuousFixedLookbackEngine(process))
    return option.NPV()


def _discrete_by_bgk(model, option):
    """The discretely monitored price from the continuous closed forms: the discrete max
    exceeds h (> S0) about when the continuous one exceeds h exp(a), a = beta sigma
    sqrt(dt) (the discrete min is below h < S0 when the continuous one is below
    h exp(-a)). Integrating the tail, E(M_d - k)+ = exp(-a) E(M_c - k exp(a))+ for
    k >= S0 and E(k - m_d)+ = exp(a) E(k exp(-a) - m_c)+ for k <= S0; every payoff follows
    from these with k = K or S0 (M >= S0 >= m always)."""
    t, s0 = option.maturity, model.spot
    a = BGK_BETA * model.vol * math.sqrt(t / option.monitoring)
    disc, fwd = math.exp(-model.rate * t), s0 * math.exp(-model.dividend * t)
    high = lambda k: math.exp(-a) * _ql(model, t, "call", k * math.exp(a))  # noqa: E731
    low = lambda k: math.exp(a) * _ql(model, t, "put", k * math.exp(-a))  # noqa: E731
    mean_max = disc * s0 + high(s0)  # discounted E max S
    mean_min = disc * s0 - low(s0)
    if option.floating:
        return fwd - mean_min if option.kind == "call" else mean_max - fwd
    k = option.strike
    if option.kind == "call":
        return high(k) if k >= s0 else mean_max - disc * k
    return low(k) if k <= s0 else disc * k - mean_min


@pytest.mark.parametrize(
    "kind, moneyness",
    [("call", None), ("put", None), ("call", 1.1), ("call", 0.95), ("put", 0.9),
     ("put", 1.05)],
)  # fmt: skip
def test_many_dates_match_quantlib_continuous_closed_forms_shifted_by_bgk(kind, moneyness):
    """1000 dates against QuantLib's continuous lookbacks through the Broadie-Glasserman-Kou
    relation: within 5 standard errors plus 0.1% of the price for the relation's residual
    (measured: 0.1-0.3% at 250 dates, within the noise at 1000). The Greeks (pathwise)
    against central differences of the same reference."""
    rng = np.random.default_rng()
    model = GBM(100.0, rng.uniform(0.15, 0.35), rng.uniform(0, 0.05), rng.uniform(0, 0.02))
    maturity = round(365 * rng.uniform(0.5, 1.5)) / 365  # whole days, as QuantLib's dates
    strike = None if moneyness is None else 100.0 * moneyness
    option = Lookback(maturity, kind, strike, monitoring=1000)
    r = price(model, option, paths=300_000, seed=int(rng.integers(2**63)))
    exact = _discrete_by_bgk(model, option)
    assert abs(r.price - exact) <= 5 * r.stderr + 1e-3 * exact, (model, option, r, exact)
    bumped = lambda **kw: _discrete_by_bgk(GBM(**{**model.__dict__, **kw}), option)  # noqa: E731
    h = 1e-3
    delta = (bumped(spot=100 * (1 + h)) - bumped(spot=100 * (1 - h))) / (200 * h)
    vega = (bumped(vol=model.vol + h) - bumped(vol=model.vol - h)) / (2 * h)
    assert abs(r.delta - delta) <= 5 * r.delta_stderr + 2e-3 * abs(delta), (r, delta)
    assert abs(r.vega - vega) <= 5 * r.vega_stderr + 2e-3 * abs(vega), (r, vega)


def test_quantlib_floating_and_fixed_closed_forms_agree():
    """The references among themselves: S(T) - m = S(T) - S0 + (S0 - m)+ and
    M - S(T) = M - S0 + ... so the continuous floating prices are the fixed ones at S0."""
    model = GBM(100.0, 0.3, 0.04, 0.01)
    t = 1.0
    disc, fwd = math.exp(-model.rate * t), model.spot * math.exp(-model.dividend * t)
    assert _ql(model, t, "call") == pytest.approx(fwd - disc * 100 + _ql(model, t, "put", 100))
    assert _ql(model, t, "put") == pytest.approx(disc * 100 + _ql(model, t, "call", 100) - fwd)


def _numpy_lookback(model, option, paths, rng):
    """The discrete payoff simulated independently (NumPy's generator): GBM exactly, Heston
    by full-truncation Euler on the engine's grid. Returns (mean, standard error)."""
    t, n = option.maturity, option.monitoring
    x0 = math.log(model.spot)
    if isinstance(model, GBM):
        dt = t / n
        z = rng.standard_normal((paths, n))
        x = x0 + np.cumsum((model.rate - model.dividend - 0.5 * model.vol**2) * dt
                           + model.vol * math.sqrt(dt) * z, axis=1)  # fmt: skip
    else:
        sub = max(1, math.ceil(model.steps_per_year * t / n))
        dt = t / (sub * n)
        x = np.full(paths, x0)
        v = np.full(paths, model.v0)
        rho_c = math.sqrt(1 - model.rho**2)
        obs = []
        for j in range(sub * n):
            zv, zi = rng.standard_normal(paths), rng.standard_normal(paths)
            vp = np.maximum(v, 0.0)
            x = (
                x
                + (model.rate - model.dividend - 0.5 * vp) * dt
                + np.sqrt(vp * dt) * (model.rho * zv + rho_c * zi)
            )
            v = v + model.kappa * (model.theta - vp) * dt + model.xi * np.sqrt(vp * dt) * zv
            if (j + 1) % sub == 0:
                obs.append(x)
        x = np.stack(obs, axis=1)
    s = np.exp(x)
    hi = np.maximum(s.max(axis=1), model.spot)
    lo = np.minimum(s.min(axis=1), model.spot)
    st, k = s[:, -1], option.strike
    if option.floating:
        pay = st - lo if option.kind == "call" else hi - st
    else:
        pay = np.maximum(hi - k, 0) if option.kind == "call" else np.maximum(k - lo, 0)
    pay = math.exp(-model.rate * t) * pay
    return pay.mean(), pay.std(ddof=1) / math.sqrt(paths)


HESTON = Heston(spot=100.0, v0=0.05, kappa=1.5, theta=0.04, xi=0.5, rho=-0.7, rate=0.03,
                dividend=0.01, steps_per_year=48)  # fmt: skip


@pytest.mark.parametrize("model", [GBM(100.0, 0.3, 0.03, 0.01), HESTON], ids=["gbm", "heston"])
@pytest.mark.parametrize(
    "option",
    [Lookback(1.0, "call", monitoring=6), Lookback(1.0, "put", monitoring=12),
     Lookback(1.0, "call", 105.0, monitoring=12), Lookback(1.0, "put", 95.0, monitoring=6)],
)  # fmt: skip
def test_discrete_payoff_matches_an_independent_numpy_simulation(model, option):
    rng = np.random.default_rng()
    r = price(model, option, paths=100_000, seed=int(rng.integers(2**63)))
    mean, se = _numpy_lookback(model, option, 100_000, rng)
    assert abs(r.price - mean) <= 5 * math.hypot(r.stderr, se), (model, option, r, mean, se)
    if isinstance(model, Heston):
        assert r.delta is None and r.vega is None


def test_floating_and_fixed_at_the_spot_agree_on_the_same_paths():
    """Pathwise: (S(T) - m) + (M - S(T)) = (M - S0)+ + (S0 - m)+, so on the same paths the
    floating call plus put is the fixed call plus put struck at S0, to rounding; and the
    floating delta is the price over the spot (degree-1 homogeneity)."""
    model = GBM(100.0, 0.25, 0.02, 0.01)
    kw = dict(paths=40_000, seed=8, control_variate=False)
    fc = price(model, Lookback(0.5, "call", monitoring=20), **kw)
    fp = price(model, Lookback(0.5, "put", monitoring=20), **kw)
    xc = price(model, Lookback(0.5, "call", 100.0, monitoring=20), **kw)
    xp = price(model, Lookback(0.5, "put", 100.0, monitoring=20), **kw)
    assert fc.price + fp.price == pytest.approx(xc.price + xp.price, rel=1e-12)
    assert fc.delta == pytest.approx(fc.price / 100.0, rel=1e-12)
    assert fp.delta == pytest.approx(fp.price / 100.0, rel=1e-12)


def test_same_seed_same_price_for_any_batch_size_and_on_dask():
    cases = [
        (GBM(100.0, 0.25, 0.02, 0.01), Lookback(0.5, "put", 95.0, monitoring=16)),
        (HESTON, Lookback(0.25, "call", monitoring=4)),
    ]
    kw = dict(paths=20_000, seed=9, block=512)
    refs = [price(m, o, **kw) for m, o in cases]
    for (m, o), ref in zip(cases, refs, strict=True):
        for batch in (1, 3, 100):
            got = price(m, o, batch=batch, **kw)
            assert (got.price, got.stderr, got.delta) == (ref.price, ref.stderr, ref.delta)
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        for (m, o), ref in zip(cases, refs, strict=True):
            got = price(m, o, executor="dask", scheduler=client, batch=2, **kw)
            assert (got.price, got.stderr, got.delta) == (ref.price, ref.stderr, ref.delta)


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: Lookback(0.0), "maturity"),
        (lambda: Lookback(1.0, "straddle"), "kind"),
        (lambda: Lookback(1.0, "call", -5.0), "strike"),
        (lambda: Lookback(1.0, "call", "high"), "strike"),
        (lambda: Lookback(1.0, monitoring=0), "monitoring"),
        (lambda: Lookback(1.0, monitoring=2.5), "monitoring"),
    ],
)
def test_bad_input_names_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_unsupported_combinations_are_refused():
    from hpc.domains.risk import Market

    model = GBM(100.0, 0.2)
    with pytest.raises(ValueError, match="sobol.*Lookback"):
        price(model, Lookback(1.0, monitoring=4), paths=1024, sampler="sobol")
    with pytest.raises(TypeError, match="Lookback for Market"):
        price(Market([100.0], [0.2], [[1.0]]), Lookback(1.0))


def test_portfolio_lists_lookbacks(tmp_path):
    from hpc.domains.risk.portfolio import PortfolioError, load_portfolio

    path = tmp_path / "book.json"
    path.write_text(
        '{"model": {"spot": 100, "vol": 0.2}, "instruments": ['
        '{"name": "fl", "type": "lookback", "maturity": 1, "kind": "put"},'
        '{"name": "fx", "type": "lookback", "maturity": 1, "strike": 110, "monitoring": 52}]}'
    )
    book = load_portfolio(path)
    assert book.instruments == [Lookback(1.0, "put"), Lookback(1.0, "call", 110.0, 52)]
    path.write_text(
        '{"model": {"spot": 100, "vol": 0.2}, "instruments": ['
        '{"type": "lookback", "maturity": 1, "monitoring": -1}]}'
    )
    with pytest.raises(PortfolioError, match=r"instruments\[0\].*monitoring=-1"):
        load_portfolio(path)


def test_hpc_risk_price_prices_lookbacks_and_americans_through_price(tmp_path):
    """The CLI calls ``price`` for every instrument (the American by Longstaff-Schwartz on
    the same executor): the same numbers as the Python API."""
    import json
    import subprocess
    import sys

    from hpc.domains.risk import American

    book = {
        "model": {"spot": 100, "vol": 0.25, "rate": 0.02},
        "instruments": [
            {"name": "lb", "type": "lookback", "maturity": 0.5, "kind": "put", "monitoring": 8},
            {"name": "am", "type": "american", "strike": 100, "maturity": 0.5, "kind": "put",
             "exercises": 4},
        ],
    }  # fmt: skip
    path = tmp_path / "book.json"
    path.write_text(json.dumps(book))
    argv = [sys.executable, "-m", "hpc", "risk", "price", str(path), "--paths", "4000",
            "--seed", "2", "--executor", "local", "--backend", "cpu", "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    model = GBM(100, 0.25, 0.02)
    options = [Lookback(0.5, "put", monitoring=8), American(100, 0.5, "put", 4)]
    for i, (row, option) in enumerate(zip(rows, options, strict=True)):
        r = price(model, option, paths=4000, seed=2, stream=i)
        assert (row["price"], row["stderr"]) == (r.price, r.stderr), (row, r)
