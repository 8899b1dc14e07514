"""Monte Carlo throughput (arithmetic Asian and European call) against QuantLib, same run.

Ours: ``hpc.domains.risk.price`` with pseudo-random Philox streams, antithetic pairs and no
control variate (the plain estimator, as the peer's), paths split over the ranks. Peer:
QuantLib's ``MCDiscreteArithmeticAPEngine`` and ``MCEuropeanEngine`` (pseudo-random, one
thread, exact GBM steps at the fixing dates) on the same market and contract, on rank 0 with
fewer paths (throughput is what is compared). Both standard errors are reported; ``ratio`` is
the per-core throughput ratio (ours per core over QuantLib's, which runs on one core).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from mpi4py import MPI

from hpc.comm import world

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench mc``."""
    p.add_argument("--paths", type=float, default=1e6, help="Asian paths (1e6)")
    p.add_argument("--fixings", type=int, default=252, help="Asian fixings (252)")
    p.add_argument("--european-paths", type=float, default=2e7, help="European paths (2e7)")
    p.add_argument("--peer-fraction", type=float, default=0.05, help="QuantLib's share of paths")
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")


def _market() -> tuple[Any, float, float]:
    from hpc.domains.risk import GBM

    return GBM(spot=100.0, vol=0.2, rate=0.03, dividend=0.01), 100.0, 1.0


def quantlib_process(model: Any, today: Any) -> Any:
    """QuantLib's Black-Scholes-Merton process of ``model`` from ``today``: flat rate,
    dividend yield and volatility, Actual/365 (the day count our year fractions match)."""
    import QuantLib as ql

    dc = ql.Actual365Fixed()
    flat = lambda r: ql.YieldTermStructureHandle(ql.FlatForward(today, r, dc))  # noqa: E731
    return ql.BlackScholesMertonProcess(
        ql.QuoteHandle(ql.SimpleQuote(model.spot)),
        flat(model.dividend),
        flat(model.rate),
        ql.BlackVolTermStructureHandle(
            ql.BlackConstantVol(today, ql.NullCalendar(), model.vol, dc)
        ),
    )


def _quantlib(kind: str, samples: int, fixings: int) -> dict[str, Any]:
    """QuantLib's MC engine on the same contract: seconds, price and its error estimate."""
    import QuantLib as ql

    model, strike, maturity = _market()
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    days = int(round(365 * maturity))
    process = quantlib_process(model, today)
    payoff = ql.PlainVanillaPayoff(ql.Option.Call, strike)
    exercise = ql.EuropeanExercise(today + days)
    if kind == "asian":
        dates = [today + int(round(days * (i + 1) / fixings)) for i in range(fixings)]
        option = ql.DiscreteAveragingAsianOption(
            ql.Average.Arithmetic, 0.0, 0, dates, payoff, exercise
        )
        engine = ql.MCDiscreteArithmeticAPEngine(
            process, "pseudorandom", antitheticVariate=True, requiredSamples=samples, seed=42
        )
    else:
        option = ql.VanillaOption(payoff, exercise)
        engine = ql.MCEuropeanEngine(
            process,
            "pseudorandom",
            timeSteps=1,
            antitheticVariate=True,
            requiredSamples=samples,
            seed=42,
        )
    option.setPricingEngine(engine)
    t0 = time.perf_counter()
    value = option.NPV()
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "price": value, "stderr": option.errorEstimate(), "paths": samples}


def _case(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    import numba
    from hpc.domains.risk import AsianArithmetic, European, price

    from hpc.backend import get_backend

    comm = world()
    model, strike, maturity = _market()
    if kind == "asian":
        option: Any = AsianArithmetic(strike, maturity, "call", args.fixings)
        paths = int(args.paths)
    else:
        option = European(strike, maturity, "call")
        paths = int(args.european_paths)
    steps = option.steps
    gpu = get_backend(args.backend).is_gpu
    cores = comm.Get_size() * (1 if gpu else numba.get_num_threads())
    kw = dict(antithetic=True, control_variate=False, executor="mpi", backend=args.backend)
    price(model, option, paths=4 * 4096, seed=1, **kw)  # compile
    comm.Barrier()
    t0 = time.perf_counter()
    ours = price(model, option, paths=paths, seed=7, **kw)
    seconds = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    record: dict[str, Any] = {
        "case": f"{kind} call, {steps} fixing{'s' if steps > 1 else ''}",
        "ours": {
            "seconds": seconds,
            "price": ours.price,
            "stderr": ours.stderr,
            "paths": ours.paths,
            "path_steps_per_s": ours.paths * steps / seconds,
            "paths_per_s": ours.paths / seconds,
            "cores": cores,
        },
        "peers": {},
        "ratio": {},
    }
    if gpu:  # the same samples on the CPU: the prices must agree to rounding
        cpu = price(model, option, paths=paths, seed=7, **{**kw, "backend": "cpu"})
        record["ours"]["cpu_price"] = cpu.price
        record["ours"]["gpu_minus_cpu_in_stderr"] = (ours.price - cpu.price) / ours.stderr
    peer = None
    if comm.rank == 0:
        samples = max(1000, int(paths * args.peer_fraction) // 2)  # antithetic pairs
        try:
            peer = _quantlib(kind, samples, args.fixings)
            peer["paths"] = 2 * samples
            peer["path_steps_per_s"] = peer["paths"] * steps / peer["seconds"]
            peer["paths_per_s"] = peer["paths"] / peer["seconds"]
            peer["cores"] = 1
        except Exception as exc:  # the peer is optional: report why it is missing
            peer = {"error": f"{type(exc).__name__}: {exc}"}
    peer = comm.bcast(peer, root=0)
    record["peers"]["quantlib"] = peer
    if "error" not in peer:
        ours_rate = record["ours"]["paths_per_s"] / cores
        record["ratio"]["quantlib_per_core"] = ours_rate / peer["paths_per_s"]
        record["ratio"]["quantlib"] = record["ours"]["paths_per_s"] / peer["paths_per_s"]
    return record


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. The arithmetic Asian (headline) and the European."""
    from hpc.backend import get_backend

    comm = world()
    cases = [_case(args, "asian"), _case(args, "european")]
    head = cases[0]
    return {
        "bench": "mc",
        "backend": get_backend(args.backend).name,
        "ranks": comm.Get_size(),
        "size": {"paths": int(args.paths), "fixings": args.fixings},
        "ours": head["ours"],
        "peers": head["peers"],
        "ratio": head["ratio"],
        "limits": {},
        "cases": cases,
    }
