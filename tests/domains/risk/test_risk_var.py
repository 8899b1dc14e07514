"""VaR and ES: closed forms for a lognormal holding, correlated scenarios, revaluation,
historical simulation from an HDF5 returns table, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpc.domains.risk import GBM, European, black_scholes
from hpc.domains.risk.var import Market, Position, historical_var, monte_carlo_var, tail_risk
from scipy import stats


def test_stock_holding_var_and_es_match_the_lognormal_closed_forms():
    rng = np.random.default_rng()
    s0, vol, r, q = rng.uniform(50, 150), rng.uniform(0.1, 0.5), rng.uniform(0, 0.05), 0.01
    h, n = 10 / 250, 400_000
    market = Market([s0], [vol], [[1.0]], rate=r, dividends=[q])
    res = monte_carlo_var(
        market, [Position(0, 1.0)], horizon=h, scenarios=n, seed=int(rng.integers(2**63))
    )
    mu, sd = (r - q - 0.5 * vol * vol) * h, vol * math.sqrt(h)
    a = 0.01
    za = stats.norm.ppf(a)
    quantile = s0 * math.exp(mu + sd * za)
    var_exact = s0 - quantile
    density = stats.norm.pdf(za) / (quantile * sd)  # of S_h at the quantile
    var_se = math.sqrt(a * (1 - a) / n) / density
    assert abs(res.var - var_exact) < 5 * var_se, (res.var, var_exact, var_se)
    b = 0.025
    zb = stats.norm.ppf(b)
    es_exact = s0 - s0 * math.exp((r - q) * h) * stats.norm.cdf(zb - sd) / b
    # asymptotic error of the tail-mean estimator (Chen 2008): conditional variance of the
    # tail plus (1 - b) times its squared distance to the quantile, over n b
    x = s0 * np.exp(mu + sd * stats.norm.ppf(np.linspace(0, b, 200_001)[1:-1]))
    qb = s0 * math.exp(mu + sd * zb)
    es_se = math.sqrt((x.var() + (1 - b) * (x.mean() - qb) ** 2) / (n * b))
    assert abs(res.es - es_exact) < 5 * es_se, (res.es, es_exact, es_se)
    # ES at 97.5% against VaR at 99% is no ordering (for a long stock's lighter loss tail
    # they are within a fraction of a per cent, either way): ES exceeds VaR at its own level
    assert res.es > s0 - qb > 0


def test_scenarios_carry_the_requested_correlation_and_are_reproducible():
    corr = np.array([[1.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 1.0]])
    market = Market([100, 50, 20], [0.2, 0.3, 0.4], corr, rate=0.01)
    positions = [Position(0, 1.0), Position(1, -2.0), Position(2, 3.0)]
    a = monte_carlo_var(market, positions, scenarios=50_000, seed=9)
    b = monte_carlo_var(market, positions, scenarios=50_000, seed=9)
    assert (a.var, a.es) == (b.var, b.es)
    from hpc.rng import RandomStreams

    z = RandomStreams(9).normals(0, 200_000, 3) @ market.loading.T
    assert np.allclose(np.corrcoef(z.T), corr, atol=5 / math.sqrt(200_000))
    # a singular (rank-one) correlation is accepted
    loading = Market([1, 1], [0.1, 0.1], [[1, 1], [1, 1]]).loading
    assert np.allclose(loading @ loading.T, [[1, 1], [1, 1]])


def test_option_positions_are_revalued_in_closed_form():
    market = Market([100.0], [0.25], [[1.0]], rate=0.03, dividends=[0.01])
    call = European(105, 0.5, "call")
    shock = np.array([[0.05]])
    h = 1 / 250
    res = historical_var(
        market, [Position(0, 2.0, call)], shock, horizon=h, var_level=0.9, es_level=0.9
    )
    model = GBM(spot=100.0, vol=0.25, rate=0.03, dividend=0.01)
    now = black_scholes(model, call)
    later = black_scholes(
        GBM(spot=100 * math.exp(0.05), vol=0.25, rate=0.03, dividend=0.01),
        European(105, 0.5 - h, "call"),
    )
    assert res.value == pytest.approx(2 * now, rel=1e-12)
    assert -res.var == pytest.approx(2 * (later - now), rel=1e-10)


def test_historical_simulation_from_an_hdf5_returns_table(tmp_path):
    from hpc.io import read_table, write_table

    rng = np.random.default_rng()
    days = 750
    returns = rng.standard_t(4, size=(days, 2)) * 0.01
    path = tmp_path / "returns.h5"
    write_table(path, "returns", {"AAA": returns[:, 0], "BBB": returns[:, 1]})
    table = read_table(path, "returns")
    r = np.column_stack([table["AAA"], table["BBB"]])
    market = Market([100, 40], [0.2, 0.3], np.eye(2))
    positions = [Position(0, 10.0), Position(1, -5.0)]
    res = historical_var(market, positions, r)
    pnl = 10 * 100 * np.expm1(returns[:, 0]) - 5 * 40 * np.expm1(returns[:, 1])
    worst = np.sort(pnl)
    assert res.var == pytest.approx(-worst[math.ceil(days * 0.01) - 1], rel=1e-12)
    assert res.es == pytest.approx(-worst[: math.ceil(days * 0.025)].mean(), rel=1e-12)
    assert res.scenarios == days


def test_tail_risk_conventions_on_a_known_sample():
    pnl = -np.arange(1, 201, dtype=float)  # losses 1..200
    var, es = tail_risk(pnl, 0.99, 0.975)
    assert var == 199.0  # the 2nd worst of 200
    assert es == np.mean([200, 199, 198, 197, 196])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Market([100, 50], [0.2], np.eye(2)), "vols: 1 values for 2 assets"),
        (lambda: Market([100], [-0.2], [[1.0]]), "vols: must be >= 0"),
        (lambda: Market([100, 50], [0.2, 0.2], [[1, 0.5], [0.4, 1]]), "symmetric"),
        (
            lambda: Market([1, 1, 1], [0.1] * 3, [[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1]]),
            "not positive semi-definite",
        ),
        (
            lambda: monte_carlo_var(Market([1], [0.1], [[1]]), [Position(1, 1.0)]),
            r"positions\[0\].asset=1",
        ),
        (
            lambda: historical_var(
                Market([1], [0.1], [[1]]), [Position(0, 1.0)], np.array([[0.01], [np.nan]])
            ),
            "row 1, column 0",
        ),
    ],
)
def test_bad_input_is_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_hpc_risk_var_equals_the_api_and_reads_an_hdf5_returns_table(tmp_path):
    import json
    import subprocess
    import sys

    from hpc.domains.risk.portfolio import load_book
    from hpc.io import write_table

    root = __import__("pathlib").Path(__file__).resolve().parents[3]
    book = root / "examples" / "book.json"
    market, positions = load_book(book)

    def cli(*extra):
        out = subprocess.run(
            [sys.executable, "-m", "hpc", "risk", "var", str(book), "--json", *extra],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    got = cli("--scenarios", "50000", "--seed", "4")
    want = monte_carlo_var(market, positions, 10 / 250, 50_000, 4)
    assert (got["var"], got["es"]) == (want.var, want.es)
    rng = np.random.default_rng(1)
    returns = rng.normal(0, 0.01, size=(500, 3))
    write_table(tmp_path / "r.h5", "daily", {f"a{k}": returns[:, k] for k in range(3)})
    got = cli(
        "--method", "historical", "--returns", f"{tmp_path / 'r.h5'}:daily", "--horizon-days", "1"
    )
    want = historical_var(market, positions, returns, 1 / 250)
    assert (got["var"], got["es"]) == (want.var, want.es)


def test_a_bad_book_names_the_file_and_the_field(tmp_path):
    import json

    from hpc.domains.risk.portfolio import PortfolioError, load_book

    path = tmp_path / "book.json"
    path.write_text(
        json.dumps(
            {
                "market": {"spots": [1], "vols": [0.1], "correlation": [[1]]},
                "positions": [{"asset": 0, "quantity": 1, "option": {"strike": -1, "maturity": 1}}],
            }
        )
    )
    with pytest.raises(PortfolioError, match=r"positions\[0\]\.option: strike=-1") as info:
        load_book(path)
    assert str(path) in str(info.value)


def test_blockwise_tails_equal_the_tail_of_all_scenarios_at_once():
    """Several scenario blocks (each keeping only its tail) give the tail of the whole sample."""
    from hpc.rng import RandomStreams

    rng = np.random.default_rng()
    corr = np.array([[1.0, 0.5], [0.5, 1.0]])
    market = Market([100.0, 40.0], [0.3, 0.2], corr, rate=0.02)
    book = [Position(0, -4.0, European(95.0, 0.3, "put")), Position(1, 2.0)]
    n, seed, h = 200_003, int(rng.integers(2**63)), 5 / 250
    res = monte_carlo_var(market, book, h, n, seed, var_level=0.99, es_level=0.95)
    assert n > 1 << 16  # more than one block
    z = RandomStreams(seed).normals(0, n, 2) @ market.loading.T
    drift = (market.rate - market.dividends - 0.5 * market.vols**2) * h
    spots = market.spots * np.exp(drift + market.vols * math.sqrt(h) * z)
    # the put revalued by Black-Scholes with SciPy's normal CDF (independent of _bs_value)
    d1 = (np.log(spots[:, 0] / 95.0) + (0.02 + 0.045) * (0.3 - h)) / (0.3 * math.sqrt(0.3 - h))
    d2 = d1 - 0.3 * math.sqrt(0.3 - h)
    put = 95.0 * math.exp(-0.02 * (0.3 - h)) * stats.norm.cdf(-d2) - spots[:, 0] * stats.norm.cdf(
        -d1
    )
    value = -4.0 * put + 2.0 * spots[:, 1]
    var, es = tail_risk(value - res.value, 0.99, 0.95)
    assert res.var == pytest.approx(var, rel=1e-10)
    assert res.es == pytest.approx(es, rel=1e-10)


def test_the_backend_is_chosen_once_and_the_cpu_result_does_not_depend_on_naming_it():
    """``monte_carlo_var(backend=...)``: the scenario blocks run on the backend's array
    module; the device's special functions come from one table (``var.SPECIAL``)."""
    from hpc.domains.risk import var

    from hpc.backend import get_backend

    assert var.SPECIAL.on("cpu").erfc is var._erfc_cpu
    assert var.SPECIAL.on("gpu").erfc is var._erfc_gpu
    market = Market([100.0, 40.0], [0.3, 0.2], [[1.0, 0.5], [0.5, 1.0]], rate=0.02)
    book = [Position(0, -4.0, European(95.0, 0.3, "put")), Position(1, 2.0)]
    kw = dict(horizon=5 / 250, scenarios=70_001, seed=12)
    ref = monte_carlo_var(market, book, **kw)
    for backend in ("cpu", get_backend("cpu")):
        got = monte_carlo_var(market, book, **kw, backend=backend, batch=1)
        assert (got.var, got.es, got.value) == (ref.var, ref.es, ref.value)


@pytest.mark.gpu
def test_gpu_var_equals_the_cpu_var_on_the_same_scenarios():
    market = Market([100.0, 40.0], [0.3, 0.2], [[1.0, 0.5], [0.5, 1.0]], rate=0.02)
    book = [Position(0, -4.0, European(95.0, 0.3, "put")), Position(1, 2.0, European(40, 1.0))]
    kw = dict(horizon=10 / 250, scenarios=1_000_003, seed=5)
    gpu = monte_carlo_var(market, book, **kw, backend="gpu")
    cpu = monte_carlo_var(market, book, **kw, backend="cpu")
    # the same normals (hpc.rng on the device); CuPy's exp/log/erfc against NumPy's, SciPy's
    assert gpu.var == pytest.approx(cpu.var, rel=1e-10)
    assert gpu.es == pytest.approx(cpu.es, rel=1e-10)
    again = monte_carlo_var(market, book, **kw, backend="gpu", batch=3)
    assert (again.var, again.es) == (gpu.var, gpu.es)
