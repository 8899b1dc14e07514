"""Differential fuzzing of the Monte Carlo risk engines against independent references on the
*same* contract: the same fixing, monitoring and exercise dates, the same time steps.

References (none shares code with :mod:`hpc.domains.risk`):

==========================  =================================================================
ours                        reference
==========================  =================================================================
European (GBM, one step)    QuantLib ``AnalyticEuropeanEngine`` (exact)
geometric Asian, n fixings  QuantLib ``AnalyticDiscreteGeometricAveragePriceAsianEngine`` on
                            the same fixing dates (exact)
arithmetic Asian            QuantLib ``MCDiscreteArithmeticAPEngine`` on the same fixing dates
                            (its own standard error, combined with ours)
barrier, n monitoring       :func:`_discrete_barrier`: backward quadrature of the lognormal
dates                       transition density over the same n dates (deterministic; its own
                            discretisation error checked by halving its grid); knock-ins by
                            in + out = vanilla
Bermudan by LSM, n dates    QuantLib ``FdBlackScholesVanillaEngine`` on a ``BermudanExercise``
                            on today (LSM never prices below immediate exercise) and the
                            same n dates
Heston European (Euler)     QuantLib ``AnalyticHestonEngine`` (adaptive Gauss-Lobatto)
==========================  =================================================================

Tolerance: ``|ours - reference| <= 5 sqrt(se_ours^2 + se_ref^2) + bias``, where ``bias`` is 0
for the engines that sample the contract exactly (European, Asians, barriers: GBM steps are
exact in log space) and a named bound for the two biased schemes (:data:`LSM_LOW_BIAS`,
:data:`LSM_HIGH_BIAS`, :data:`HESTON_EULER_BIAS`). A 5-sigma miss of an unbiased estimator has
probability 5.7e-7, so a make-test run of at most :data:`MAX_COMPARISONS` comparisons fails
falsely less than once in 1/(200 x 5.7e-7) = 8,700 runs.

Paths are chosen from a pilot run so that 5 standard errors are under 0.5% of the reference
price; a draw whose price is so small against its payoff's spread that this would need more
than the test's path budget (deep out of the money, knocked out almost surely) is rejected
(``assume``), not tested loosely.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpc.benchmarks.mc import quantlib_process
from hypothesis import Phase, assume, example, given, note
from hypothesis import strategies as st
from scipy import special

from tests.fuzz import fuzz

ql = pytest.importorskip("QuantLib")

from hpc.domains.risk import (  # noqa: E402
    GBM,
    AsianArithmetic,
    AsianGeometric,
    Barrier,
    European,
    Heston,
    price,
    price_heston,
)
from hpc.domains.risk.american import American, american_lsm  # noqa: E402

# make-test examples per fuzz test (HPC_FUZZ_EXAMPLES overrides); one comparison each
EXAMPLES = {
    "european": 30,
    "geometric": 14,
    "arithmetic": 6,
    "barrier": 12,
    "american": 6,
    "heston": 4,
}
MAX_COMPARISONS = 200
SIGMAS = 5.0  # the tolerance in combined standard errors
TARGET = 0.005  # paths so that SIGMAS standard errors are below this fraction of the price
# Longstaff-Schwartz against the same Bermudan: the fitted exercise rule is suboptimal, so
# the out-of-sample value is low; the in-sample regression adds a smaller upward bias.
LSM_LOW_BIAS = 0.01  # of the price
LSM_HIGH_BIAS = 0.002  # of the price
HESTON_EULER_BIAS = 0.005  # of the price, full truncation on the steps below (see the test)
HESTON_STEPS_PER_YEAR = 500  # and at least HESTON_MIN_STEPS steps to expiry
HESTON_MIN_STEPS = 100
PRICE_FLOOR = 1e-4  # of the spot: cheaper options are rejected (no 0.5% test is affordable)

# no "explain" phase: it reruns a failing example hundreds of times (minutes of Monte Carlo)
PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink]

TODAY = ql.Date(2, 1, 2026)
DC = ql.Actual365Fixed()


def test_fuzz_budget_is_at_most_200_comparisons():
    assert sum(EXAMPLES.values()) <= MAX_COMPARISONS


# ------------------------------------------------------------------------------ strategies


@st.composite
def markets(draw, max_vol=1.2):
    """Spot, volatility (to 120%), rate (negative too), dividend yield."""
    return GBM(
        spot=draw(st.floats(5.0, 1000.0)),
        vol=draw(st.floats(0.05, max_vol)),
        rate=draw(st.floats(-0.02, 0.12)),
        dividend=draw(st.floats(0.0, 0.10)),
    )


# maturities in whole days (QuantLib's dates): a day to five years, short ones as often
days = st.one_of(st.integers(1, 60), st.integers(61, 5 * 365))
kinds = st.sampled_from(["call", "put"])
seeds = st.integers(0, 2**63 - 1)
# log-moneyness in standard deviations: deep in (-3) to deep out (+3) of the money for a call
moneyness = st.floats(-3.0, 3.0)


def _strike(model, t, z):
    forward = model.spot * math.exp((model.rate - model.dividend) * t)
    return forward * math.exp(z * model.vol * math.sqrt(t))


# ----------------------------------------------------------------------- QuantLib plumbing


def _setup():
    ql.Settings.instance().evaluationDate = TODAY


def _flat(rate):
    return ql.YieldTermStructureHandle(ql.FlatForward(TODAY, rate, DC))


def _bsm(model):
    return quantlib_process(model, TODAY)


def _payoff(kind, strike):
    return ql.PlainVanillaPayoff(ql.Option.Call if kind == "call" else ql.Option.Put, strike)


def _ql_european(model, kind, strike, ndays):
    _setup()
    opt = ql.VanillaOption(_payoff(kind, strike), ql.EuropeanExercise(TODAY + ndays))
    opt.setPricingEngine(ql.AnalyticEuropeanEngine(_bsm(model)))
    return opt.NPV()


def _fixing_dates(n, spacing):
    return [TODAY + spacing * (k + 1) for k in range(n)]


def _ql_asian(model, kind, strike, n, spacing, engine):
    _setup()
    opt = ql.DiscreteAveragingAsianOption(
        ql.Average.Geometric if engine == "geometric" else ql.Average.Arithmetic,
        1.0 if engine == "geometric" else 0.0,
        0,
        _fixing_dates(n, spacing),
        _payoff(kind, strike),
        ql.EuropeanExercise(TODAY + n * spacing),
    )
    return opt


# ------------------------------------------------------------------------------- helpers


def _paths_for(pilot, reference, budget, spot, unit=1.0, minimum=1 << 15):
    """Paths so that SIGMAS standard errors are below TARGET of ``reference`` (with a 1.5x
    margin), judged from a ``pilot`` result; rejects the draw when that exceeds ``budget``
    (in paths x ``unit``, the cost of one path) or the price is below PRICE_FLOOR x spot."""
    assume(reference > PRICE_FLOOR * spot)
    per_path = pilot.stderr * math.sqrt(pilot.paths)
    need = 1.5 * (SIGMAS * per_path / (TARGET * reference)) ** 2
    note(f"pilot {pilot}; reference {reference!r}; paths needed {need:.3g}")
    assume(need * unit <= budget)
    return int(max(minimum, need))


def _precise(run, paths, reference, budget, unit=1.0):
    """``run(paths)``, run again with more paths when its standard error misses the planned
    precision: a pilot of a deep out-of-the-money option sees too few of the rare paths that
    carry its price, so it underestimates the variance. The larger run's estimate plans the
    second (rejected when beyond ``budget``); the comparison itself is unchanged."""
    result = run(paths)
    wanted = TARGET * abs(reference) / SIGMAS
    if result.stderr > 1.5 * wanted:
        need = 1.5 * result.paths * (result.stderr / wanted) ** 2
        note(f"{result.paths} paths gave stderr {result.stderr:.3g}; re-run with {need:.3g}")
        assume(need * unit <= budget)
        result = run(int(need))
    return result


def _check(ours, ref, ref_se=0.0, bias=0.0, low_bias=None):
    """``ours`` within SIGMAS combined standard errors of ``ref`` plus the bias bounds (one
    bound above and ``low_bias`` below, when that differs)."""
    se = math.hypot(ours.stderr, ref_se)
    low = bias if low_bias is None else low_bias
    note(f"ours {ours.price!r} +- {ours.stderr:.3g}; reference {ref!r} +- {ref_se:.3g}")
    assert ref - SIGMAS * se - low <= ours.price <= ref + SIGMAS * se + bias, (ours, ref, ref_se)
    # the comparison had teeth: the statistical part is below TARGET of the price (1.5x the
    # margin the pilot planned for, so only a badly wrong pilot trips this)
    assert SIGMAS * se <= 1.5 * TARGET * abs(ref), (se, ref)


# ---------------------------------------------------------------------------- European


@fuzz(EXAMPLES["european"], phases=PHASES)
@given(markets(), days, kinds, moneyness, seeds, st.booleans())
# deep out of the money at high volatility: the pilot saw too few paths that pay (found once)
@example(GBM(spot=5.0, vol=1.0, rate=0.0, dividend=0.0), 454, "call", 3.0, 7_732_768_156, False)
def test_fuzz_european_against_quantlib_analytic(model, ndays, kind, z, seed, cv):
    t = ndays / 365
    strike = _strike(model, t, z)
    option = European(strike, t, kind)
    ref = _ql_european(model, kind, strike, ndays)
    pilot = price(model, option, paths=1 << 15, seed=seed, stream=1, control_variate=cv)
    n = _paths_for(pilot, ref, 1 << 25, model.spot)
    run = lambda paths: price(model, option, paths=paths, seed=seed, control_variate=cv)  # noqa: E731
    _check(_precise(run, n, ref, 1 << 25), ref)


# ------------------------------------------------------------------------------- Asians


@fuzz(EXAMPLES["geometric"], phases=PHASES)
@given(
    markets(),
    st.one_of(st.integers(1, 12), st.integers(13, 64)),
    st.one_of(st.integers(1, 7), st.integers(8, 60)),
    kinds,
    moneyness,
    seeds,
)
def test_fuzz_geometric_asian_against_quantlib_discrete_closed_form(
    model, fixings, spacing, kind, z, seed
):
    """Fixings every ``spacing`` days, ``T = fixings x spacing`` days: QuantLib's discrete
    geometric closed form on those dates is exact for our contract (no control variate)."""
    t = fixings * spacing / 365
    strike = _strike(model, t, z / 2)
    option = AsianGeometric(strike, t, kind, fixings=fixings)
    qopt = _ql_asian(model, kind, strike, fixings, spacing, "geometric")
    qopt.setPricingEngine(ql.AnalyticDiscreteGeometricAveragePriceAsianEngine(_bsm(model)))
    ref = qopt.NPV()
    pilot = price(model, option, paths=1 << 15, seed=seed, stream=1)
    n = _paths_for(pilot, ref, 4e7, model.spot, unit=fixings)
    run = lambda paths: price(model, option, paths=paths, seed=seed)  # noqa: E731
    _check(_precise(run, n, ref, 4e7, unit=fixings), ref)


@fuzz(EXAMPLES["arithmetic"], phases=PHASES)
@given(
    markets(max_vol=0.8),
    st.integers(2, 24),
    st.integers(1, 30),
    kinds,
    moneyness,
    seeds,
)
def test_fuzz_arithmetic_asian_against_quantlib_monte_carlo(model, fixings, spacing, kind, z, seed):
    """QuantLib's Monte Carlo (its own generator and paths, geometric control variate) on the
    same fixing dates; both standard errors combined."""
    t = fixings * spacing / 365
    strike = _strike(model, t, z / 2)
    option = AsianArithmetic(strike, t, kind, fixings=fixings)
    ours = price(model, option, paths=1 << 17, seed=seed)

    def quantlib(samples):
        qopt = _ql_asian(model, kind, strike, fixings, spacing, "arithmetic")
        engine = ql.MCDiscreteArithmeticAPEngine(
            _bsm(model),
            "pseudorandom",
            antitheticVariate=True,
            controlVariate=True,
            requiredSamples=samples,
            seed=seed % (2**31 - 1) + 1,
        )
        qopt.setPricingEngine(engine)
        return qopt.NPV(), qopt.errorEstimate()

    ref, ref_se = quantlib(2048)
    assume(ref > PRICE_FLOOR * model.spot)
    need = 1.5 * 2048 * (SIGMAS * ref_se / (0.6 * TARGET * ref)) ** 2
    note(f"QuantLib pilot {ref!r} +- {ref_se:.3g}: samples needed {need:.3g}")
    assume(need * fixings <= 3e6)
    if need > 2048:
        ref, ref_se = quantlib(int(need))
    if SIGMAS * ours.stderr > 0.6 * TARGET * ref:
        ours = price(model, option, paths=1 << 20, seed=seed)
    _check(ours, ref, ref_se)


# ------------------------------------------------------------------------------ barriers


def _discrete_barrier_out(model, strike, t, kind, barrier, up, n, points_per_sd=8):
    """Knock-out call or put monitored at ``t/n .. t``, by backward quadrature over the log
    price: the transition density of one date to the next is Gaussian, so the value at date
    ``j`` is the integral of the value at ``j + 1`` over the surviving side of the barrier
    (Simpson's rule on a uniform grid ending at the barrier, a discrete convolution); the last
    step (payoff times the Gaussian over the surviving interval) is integrated in closed form."""
    sig, r, q = model.vol, model.rate, model.dividend
    dt = t / n
    s = sig * math.sqrt(dt)
    mu = (r - q - 0.5 * sig * sig) * dt
    x0, lb, lk = math.log(model.spot), math.log(barrier), math.log(strike)
    spread = 10.0 * sig * math.sqrt(t) + abs(mu) * n + 10.0 * s

    def last_step(x):  # E[payoff(exp(y)) 1{y survives}], y ~ N(x + mu, s^2)
        lo, hi = (-np.inf, lb) if up else (lb, np.inf)
        lo, hi = (max(lo, lk), hi) if kind == "call" else (lo, min(hi, lk))
        if not lo < hi:
            return np.zeros_like(x)
        a = x + mu

        def between(shift):  # P(lo < y + ... < hi) of N(a + shift, s^2)
            return special.ndtr((hi - a - shift) / s) - special.ndtr((lo - a - shift) / s)

        expo = np.exp(a + 0.5 * s * s) * between(s * s)
        prob = between(0.0)
        return np.maximum(expo - strike * prob if kind == "call" else strike * prob - expo, 0.0)

    if n == 1:
        return math.exp(-r * t) * float(last_step(np.array([x0]))[0])
    if up:
        hi, lo = min(lb, x0 + spread), x0 - spread
    else:
        lo, hi = max(lb, x0 - spread), x0 + spread
    m = int(math.ceil((hi - lo) / (s / points_per_sd)))
    m += m % 2  # an even number of intervals for Simpson's rule
    grid = np.linspace(lo, hi, m + 1)
    h = grid[1] - grid[0]
    w = np.full(m + 1, 2.0)
    w[1::2] = 4.0
    w[0] = w[-1] = 1.0
    w *= h / 3.0
    reach = int(math.ceil((10.0 * s + abs(mu)) / h))
    offsets = np.arange(-reach, reach + 1) * h
    kernel = np.exp(-0.5 * ((offsets - mu) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    value = last_step(grid)  # at date n - 1
    for _ in range(n - 2):  # dates n - 2 .. 1
        # value_new[i] = sum_d kernel[d] w[i + d] value[i + d]
        value = np.convolve(w * value, kernel[::-1], mode="full")[reach : reach + m + 1]
    dens = np.exp(-0.5 * ((grid - x0 - mu) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    return math.exp(-r * t) * float(np.sum(w * dens * value))


def _discrete_barrier(model, option, ndays, points_per_sd=16):
    up = option.direction == "up"
    out = _discrete_barrier_out(
        model,
        option.strike,
        option.maturity,
        option.kind,
        option.barrier,
        up,
        option.monitoring,
        points_per_sd,
    )
    if option.knock == "out":
        return out
    return _ql_european(model, option.kind, option.strike, ndays) - out


def test_discrete_barrier_reference_against_brute_force_and_its_limits():
    """The quadrature reference itself: one date is a European truncated at the barrier;
    many dates approach the continuous closed form from the discrete side (the
    Broadie-Glasserman-Kou shift brings it within a small error); halving its grid changes
    nothing that matters; and a plain NumPy simulation of the same dates agrees."""
    model = GBM(100.0, 0.3, 0.05, 0.02)
    up_out = Barrier(100.0, 1.0, "call", barrier=130.0, direction="up", knock="out", monitoring=50)
    fine = _discrete_barrier(model, up_out, 365, points_per_sd=16)
    assert _discrete_barrier(model, up_out, 365, points_per_sd=32) == pytest.approx(fine, rel=1e-7)
    # Simpson's rule converges as h^4: 8 points per standard deviation of a step are within
    # 1e-6 of 16 (whose own error is then ~16x smaller still)
    assert _discrete_barrier(model, up_out, 365, points_per_sd=8) == pytest.approx(fine, rel=1e-6)
    # continuous monitoring with the barrier shifted out by BGK: an approximation of the
    # discrete price (here 1.8% high), a check of sign and scale only
    _setup()
    shifted = 130.0 * math.exp(0.5826 * 0.3 * math.sqrt(1.0 / 50))
    qopt = ql.BarrierOption(
        ql.Barrier.UpOut, shifted, 0.0, _payoff("call", 100.0), ql.EuropeanExercise(TODAY + 365)
    )
    qopt.setPricingEngine(ql.AnalyticBarrierEngine(_bsm(model)))
    assert fine == pytest.approx(qopt.NPV(), rel=0.03)
    # brute force on the same 50 dates, NumPy's generator
    rng = np.random.default_rng(1)
    dt = 1.0 / 50
    mu = (0.05 - 0.02 - 0.045) * dt
    total, squares, npaths = 0.0, 0.0, 400_000
    for _ in range(4):
        x = math.log(100.0) + np.cumsum(
            mu + 0.3 * math.sqrt(dt) * rng.standard_normal((npaths // 4, 50)), axis=1
        )
        pay = np.where(
            x.max(axis=1) < math.log(130.0), np.maximum(np.exp(x[:, -1]) - 100.0, 0.0), 0.0
        )
        total += pay.sum()
        squares += (pay * pay).sum()
    mean = total / npaths
    se = math.sqrt((squares / npaths - mean * mean) / npaths)
    assert abs(math.exp(-0.05) * mean - fine) < 5 * math.exp(-0.05) * se
    # one monitoring date: the European with the terminal spot below the barrier
    one = Barrier(90.0, 0.5, "put", barrier=80.0, direction="down", knock="in", monitoring=1)
    european = _ql_european(model, "put", 90.0, 182)
    got = _discrete_barrier(GBM(100.0, 0.3, 0.05, 0.02), one, 182)
    assert 0.0 < got < european


@st.composite
def barriers(draw):
    model = draw(markets(max_vol=0.8))
    ndays = draw(days)
    t = ndays / 365
    kind = draw(kinds)
    direction = draw(st.sampled_from(["up", "down"]))
    knock = draw(st.sampled_from(["out", "in"]))
    # the barrier from 0.2% to 3 standard deviations away from the spot, on its far side
    gap = draw(
        st.one_of(st.floats(0.002, 0.05), st.floats(0.05, 3.0 * model.vol * math.sqrt(t) + 0.06))
    )
    level = model.spot * math.exp(gap if direction == "up" else -gap)
    strike = _strike(model, t, draw(moneyness) / 2)
    monitoring = draw(st.one_of(st.integers(1, 12), st.integers(13, 64)))
    option = Barrier(
        strike, t, kind, barrier=level, direction=direction, knock=knock, monitoring=monitoring
    )
    return model, option, ndays


@fuzz(EXAMPLES["barrier"], phases=PHASES)
@given(barriers(), seeds)
def test_fuzz_discrete_barrier_against_quadrature_on_the_same_dates(case, seed):
    model, option, ndays = case
    ref = _discrete_barrier(model, option, ndays)
    assume(ref > PRICE_FLOOR * model.spot)
    if option.knock == "in":  # in = vanilla - out: keep the out price's relative accuracy
        assume(ref > 1e-2 * _ql_european(model, option.kind, option.strike, ndays))
    # the reference's own discretisation error (h^4): doubling its grid spacing moves it by
    # under 1e-4 of itself, so at this spacing it is off by about 1e-5 (of a 1e-3 tolerance)
    coarse = _discrete_barrier(model, option, ndays, points_per_sd=8)
    assert abs(coarse - ref) <= 1e-4 * ref, (ref, coarse)
    pilot = price(model, option, paths=1 << 15, seed=seed, stream=1)
    n = _paths_for(pilot, ref, 3e7, model.spot, unit=option.monitoring)
    run = lambda paths: price(model, option, paths=paths, seed=seed)  # noqa: E731
    _check(_precise(run, n, ref, 3e7, unit=option.monitoring), ref)


# ------------------------------------------------------------------------------ American


def _ql_bermudan(model, kind, strike, n, spacing, grid=800):
    """Exercise today (LSM's price is never below immediate exercise) and every ``spacing``
    days after, ``n`` times."""
    _setup()
    dates = [TODAY, *_fixing_dates(n, spacing)]
    opt = ql.VanillaOption(_payoff(kind, strike), ql.BermudanExercise(dates))
    opt.setPricingEngine(ql.FdBlackScholesVanillaEngine(_bsm(model), grid, grid))
    return opt.NPV()


@fuzz(EXAMPLES["american"], phases=PHASES)
@given(
    markets(max_vol=0.8),
    st.integers(2, 16),
    st.integers(1, 40),
    kinds,
    st.floats(-3.0, 0.0),
    seeds,
)
def test_fuzz_longstaff_schwartz_against_quantlib_finite_differences(
    model, exercises, spacing, kind, z, seed
):
    """The Bermudan exercisable now and every ``spacing`` days after, against QuantLib's
    finite differences on those dates (in the money to slightly out: LSM has no variance reduction,
    so far out of the money the 0.5% target needs more paths than the budget).

    Bias bounds (of the price): LSM's fitted rule is suboptimal, so its value is low by up to
    :data:`LSM_LOW_BIAS` (Longstaff and Schwartz, 2001, Table 1: within 0.3% with 50 dates and
    a cubic; 1% leaves room for high volatility and long maturities); the in-sample fit sees
    the paths it values, high by at most :data:`LSM_HIGH_BIAS` at >= 32k paths."""
    t = exercises * spacing / 365
    sign = 1.0 if kind == "call" else -1.0
    strike = _strike(model, t, -sign * z)  # z < 0: in the money
    option = American(strike, t, kind, exercises=exercises)
    pilot = american_lsm(model, option, paths=1 << 14, seed=seed, stream=1)
    n = _paths_for(pilot, pilot.price, 8e6, model.spot, unit=exercises)  # before the FD grid
    ref = _ql_bermudan(model, kind, strike, exercises, spacing)
    ours = american_lsm(model, option, paths=n, seed=seed)
    _check(ours, ref, bias=LSM_HIGH_BIAS * ref, low_bias=LSM_LOW_BIAS * ref)


# -------------------------------------------------------------------------------- Heston


@st.composite
def hestons(draw):
    v0 = draw(st.floats(0.01, 0.25))
    theta = draw(st.floats(0.01, 0.25))
    kappa = draw(st.floats(0.3, 5.0))
    # the Feller ratio 2 kappa theta / xi^2: below 1 (variance reaches zero) as often as above
    feller = draw(st.one_of(st.floats(0.1, 1.0), st.floats(1.0, 4.0)))
    xi = min(math.sqrt(2.0 * kappa * theta / feller), 2.0)
    return Heston(
        spot=draw(st.floats(10.0, 500.0)),
        v0=v0,
        kappa=kappa,
        theta=theta,
        xi=xi,
        rho=draw(st.floats(-0.95, 0.5)),
        rate=draw(st.floats(-0.01, 0.08)),
        dividend=draw(st.floats(0.0, 0.06)),
    )


def _ql_heston(model, kind, strike, ndays):
    _setup()
    process = ql.HestonProcess(
        _flat(model.rate),
        _flat(model.dividend),
        ql.QuoteHandle(ql.SimpleQuote(model.spot)),
        model.v0,
        model.kappa,
        model.theta,
        model.xi,
        model.rho,
    )
    opt = ql.VanillaOption(_payoff(kind, strike), ql.EuropeanExercise(TODAY + ndays))
    opt.setPricingEngine(ql.AnalyticHestonEngine(ql.HestonModel(process), 1e-10, 1_000_000))
    return opt.NPV()


@fuzz(EXAMPLES["heston"], phases=PHASES)
@given(hestons(), st.integers(7, 2 * 365), kinds, st.floats(-1.5, 1.5), seeds)
def test_fuzz_heston_euler_against_quantlib_analytic(model, ndays, kind, z, seed):
    """Full-truncation Euler, Feller condition met or violated, against the semi-analytic
    price. Bias bound :data:`HESTON_EULER_BIAS` of the price: the scheme's weak error is
    O(dt) (Lord, Koekkoek and van Dijk, 2010); it grows with the vol of vol, so the step is
    at most a year / HESTON_STEPS_PER_YEAR and T / HESTON_MIN_STEPS. (At the engine's default
    250 a year, a 7-day option with vol of vol 2 and Feller ratio 0.125 is 1.5% high on its
    5 steps; 0.25% on 20, within 0.1% on 80 and more: bias, not error.)"""
    t = ndays / 365
    spy = max(HESTON_STEPS_PER_YEAR, math.ceil(HESTON_MIN_STEPS / t))
    model = Heston(**{**model.__dict__, "steps_per_year": spy})
    vol = math.sqrt(max(model.v0, model.theta))
    forward = model.spot * math.exp((model.rate - model.dividend) * t)
    strike = forward * math.exp(z * vol * math.sqrt(t))
    option = European(strike, t, kind)
    ref = _ql_heston(model, kind, strike, ndays)
    steps = max(1, math.ceil(model.steps_per_year * t))
    pilot = price_heston(model, option, paths=1 << 14, seed=seed, stream=1)
    n = _paths_for(pilot, ref, 4e7, model.spot, unit=steps)
    run = lambda paths: price_heston(model, option, paths=paths, seed=seed)  # noqa: E731
    _check(_precise(run, n, ref, 4e7, unit=steps), ref, bias=HESTON_EULER_BIAS * ref)
