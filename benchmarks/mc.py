"""Monte Carlo throughput against QuantLib, same run: the arithmetic Asian and European call
(headline), and with ``--sweep`` a grid of products, path counts and time steps.

Ours: ``hpc.domains.risk.price`` with pseudo-random Philox streams, antithetic pairs and no
control variate (the plain estimator, as the peer's) nor Greeks (``greeks=False``: the peer
estimates none; a barrier then runs without its bumped copies), paths split over the ranks;
the American by ``american_lsm(..., antithetic=True)`` (``price`` keeps its plain default
there), as the peer's antithetic Longstaff-Schwartz. Peer:
QuantLib's MC engine of the same contract (pseudo-random, antithetic, one thread, exact GBM
steps at the fixing dates; Euler for Heston, full truncation as ours), on rank 0 with fewer
paths (throughput is what is compared).

What is timed, on each side, is one pricing call and nothing else: ours is ``price(...)``
after a warm-up call on a few blocks (so no JIT compile or kernel-cache load is timed; the
block dispatch, the kernel and the exact reduction are), QuantLib's is ``option.NPV()`` (its
path generator and engine are built lazily inside that call, a fixed cost that is negligible
next to its path loop at the sizes used here). Both are run ``--repeat`` times, taking turns,
and the fastest run of each counts, so drift of a shared machine's load hits both alike.

On the GPU backend each case also has ``limits``: its float64 flops per second (path-steps
x :data:`FLOPS_PER_PATH_STEP`, the arithmetic of one step counted from the kernel's source)
as a fraction of the device's float64 FMA rate measured in the same run (:mod:`.device_peak`).

Ratios: ``quantlib`` (ours over QuantLib's paths per second), ``quantlib_per_core`` (ours
per core, cores = ranks x numba threads, over QuantLib's one core) and
``quantlib_per_cpu_second`` (paths per CPU second on each side: the fair per-core figure when
another job shares the cores, since wall time then understates a multi-threaded run).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from mpi4py import MPI

from hpc.comm import world

__all__ = ["add_arguments", "run", "quantlib_process", "PRODUCTS"]

PRODUCTS = ("european", "asian", "barrier", "basket", "heston", "american")
_ONE_STEP = ("european", "basket")  # exact in one step: more dates are no more work
_WORST_OVER = 1e6  # only points with more path-steps than this count toward "worst"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench mc``."""
    p.add_argument("--paths", type=float, default=1e6, help="Asian paths (1e6)")
    p.add_argument("--fixings", type=int, default=252, help="Asian fixings (252)")
    p.add_argument("--european-paths", type=float, default=2e7, help="European paths (2e7)")
    p.add_argument("--peer-fraction", type=float, default=0.05, help="QuantLib's share of paths")
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")
    p.add_argument("--repeat", type=int, default=3, help="runs per side, fastest counts (3)")
    p.add_argument("--threads", type=int, default=None, help="numba threads (default: numba's)")
    p.add_argument("--sweep", action="store_true", help="the product x paths x steps grid")
    p.add_argument("--sweep-products", default=",".join(PRODUCTS), help=f"comma list of {PRODUCTS}")
    p.add_argument("--sweep-paths", default="1e4,1e5,1e6", help="path counts (1e4,1e5,1e6)")
    p.add_argument("--sweep-steps", default="1,12,365", help="time steps (1,12,365)")
    p.add_argument(
        "--sweep-budget", type=float, default=1200.0, help="seconds; later points skipped (1200)"
    )
    p.add_argument(
        "--peer-path-steps", type=float, default=2e6, help="QuantLib's path-steps a point (2e6)"
    )
    p.add_argument(
        "--max-path-steps", type=float, default=4e9, help="ours: larger points skipped (4e9)"
    )


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


# --- the contracts: ours and QuantLib's, the same terms -------------------------------------
_BASKET = dict(
    spots=[100.0, 95.0, 105.0, 100.0],
    vols=[0.2, 0.25, 0.3, 0.35],
    dividends=[0.01, 0.0, 0.02, 0.01],
    rho=0.5,
)
_HESTON = dict(v0=0.04, kappa=1.5, theta=0.04, xi=0.5, rho=-0.7)
_BARRIER = 130.0  # up-and-out call


def _ours(product: str, steps: int) -> tuple[Any, Any]:
    """Our model and instrument of ``product`` with ``steps`` time steps."""
    import numpy as np
    from hpc.domains.risk import (
        American,
        AsianArithmetic,
        Barrier,
        Basket,
        European,
        Heston,
        Market,
    )

    model, strike, t = _market()
    if product == "european":
        return model, European(strike, t, "call")
    if product == "asian":
        return model, AsianArithmetic(strike, t, "call", steps)
    if product == "barrier":
        return model, Barrier(strike, t, "call", barrier=_BARRIER, direction="up",
                              knock="out", monitoring=steps)  # fmt: skip
    if product == "american":
        return model, American(strike, t, "put", exercises=steps)
    if product == "heston":
        h = Heston(model.spot, **_HESTON, rate=model.rate, dividend=model.dividend,
                   steps_per_year=steps)  # fmt: skip
        return h, European(strike, t, "call")
    if product == "basket":
        n = len(_BASKET["spots"])
        corr = np.full((n, n), _BASKET["rho"]) + (1.0 - _BASKET["rho"]) * np.eye(n)
        market = Market(_BASKET["spots"], _BASKET["vols"], corr, model.rate,
                        _BASKET["dividends"])  # fmt: skip
        return market, Basket(np.full(n, 1.0 / n), strike, t, "call")
    raise ValueError(f"product {product!r}: expected one of {PRODUCTS}")


def _quantlib_option(product: str, samples: int, steps: int) -> Any:
    """QuantLib's option of ``product`` with its MC engine set (``samples`` antithetic
    pairs, ``steps`` time steps), built but not priced."""
    import QuantLib as ql

    model, strike, maturity = _market()
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    days = int(round(365 * maturity))
    process = quantlib_process(model, today)
    kind = ql.Option.Put if product == "american" else ql.Option.Call
    payoff = ql.PlainVanillaPayoff(kind, strike)
    exercise = ql.EuropeanExercise(today + days)
    mc = dict(antitheticVariate=True, requiredSamples=samples, seed=42)
    if product == "asian":
        dates = [today + int(round(days * (i + 1) / steps)) for i in range(steps)]
        option = ql.DiscreteAveragingAsianOption(
            ql.Average.Arithmetic, 0.0, 0, dates, payoff, exercise
        )
        engine = ql.MCDiscreteArithmeticAPEngine(process, "pseudorandom", **mc)
    elif product == "european":
        option = ql.VanillaOption(payoff, exercise)
        engine = ql.MCEuropeanEngine(process, "pseudorandom", timeSteps=1, **mc)
    elif product == "barrier":
        option = ql.BarrierOption(ql.Barrier.UpOut, _BARRIER, 0.0, payoff, exercise)
        engine = ql.MCBarrierEngine(
            process, "pseudorandom", timeSteps=steps, isBiased=True, **mc
        )  # isBiased: monitored at the steps only, as ours (else a Brownian-bridge crossing)
    elif product == "american":
        option = ql.VanillaOption(payoff, ql.AmericanExercise(today, today + days))
        engine = ql.MCAmericanEngine(process, "pseudorandom", timeSteps=steps, **mc)
    elif product == "heston":
        dc = ql.Actual365Fixed()
        flat = lambda r: ql.YieldTermStructureHandle(ql.FlatForward(today, r, dc))  # noqa: E731
        h = _HESTON
        hp = ql.HestonProcess(
            flat(model.rate), flat(model.dividend), ql.QuoteHandle(ql.SimpleQuote(model.spot)),
            h["v0"], h["kappa"], h["theta"], h["xi"], h["rho"], ql.HestonProcess.FullTruncation,
        )  # fmt: skip
        option = ql.VanillaOption(payoff, exercise)
        engine = ql.MCEuropeanHestonEngine(hp, "pseudorandom", timeSteps=steps, **mc)
    elif product == "basket":
        from hpc.domains.risk import GBM

        b = _BASKET
        n = len(b["spots"])
        procs = []
        for s, v, q in zip(b["spots"], b["vols"], b["dividends"], strict=True):
            procs.append(quantlib_process(GBM(s, v, model.rate, q), today))
        corr = ql.Matrix(n, n, b["rho"])
        for i in range(n):
            corr[i][i] = 1.0
        array = ql.StochasticProcessArray(procs, corr)
        option = ql.BasketOption(ql.AverageBasketPayoff(payoff, [1.0 / n] * n), exercise)
        engine = ql.MCEuropeanBasketEngine(array, "pseudorandom", timeSteps=1, **mc)
    else:
        raise ValueError(f"product {product!r}: expected one of {PRODUCTS}")
    option.setPricingEngine(engine)
    return option


def _quantlib(kind: str, samples: int, fixings: int) -> dict[str, Any]:
    """QuantLib's MC engine on the same contract: seconds, price and its error estimate
    (one run; the benchmark itself times :func:`_point`'s runs)."""
    option = _quantlib_option(kind, samples, fixings)
    t0 = time.perf_counter()
    value = option.NPV()
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "price": value, "stderr": option.errorEstimate(), "paths": samples}


# --- timing -----------------------------------------------------------------------------------
def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU seconds (all threads of this process) of ``fn()``, and its value."""
    c0, t0 = time.process_time(), time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, time.process_time() - c0, value


def _cores(backend: Any) -> tuple[int, bool]:
    import numba

    from hpc.backend import get_backend

    gpu = get_backend(backend).is_gpu
    return world().Get_size() * (1 if gpu else numba.get_num_threads()), gpu


def _point(
    args: argparse.Namespace, product: str, paths: int, steps: int, peer_paths: int
) -> dict[str, Any]:
    """Collective. Ours and QuantLib's on one contract, ``args.repeat`` runs each taking
    turns, the fastest of each reported."""
    from hpc.domains.risk import american_lsm, price

    comm = world()
    model, option = _ours(product, steps)
    cores, gpu = _cores(args.backend)
    kw: dict[str, Any] = dict(executor="mpi", backend=args.backend)
    pricer: Callable[..., Any] = price
    if product != "american":  # QuantLib's engines estimate no Greeks: neither do we
        kw.update(antithetic=True, control_variate=False, greeks=False)
    else:  # Longstaff-Schwartz runs on the CPU: no backend
        pricer = partial(american_lsm, antithetic=True)
        kw.pop("backend")
    pricer(model, option, paths=4 * 4096 if product != "american" else 1024, seed=1, **kw)
    samples = max(500, peer_paths // 2)  # antithetic pairs
    best: dict[str, Any] = {}
    peer: dict[str, Any] | None = None
    for _ in range(max(1, args.repeat)):
        comm.Barrier()
        wall, cpu, ours = _timed(lambda: pricer(model, option, paths=paths, seed=7, **kw))
        wall = comm.allreduce(wall, op=MPI.MAX)
        cpu = comm.allreduce(cpu, op=MPI.SUM)
        if not best or wall < best["seconds"]:
            best = {"seconds": wall, "cpu_seconds": cpu, "result": ours}
        if comm.rank == 0 and (peer is None or "error" not in peer):
            try:
                opt = _quantlib_option(product, samples, steps)
                qwall, qcpu, value = _timed(opt.NPV)
                if peer is None or qwall < peer["seconds"]:
                    peer = {"seconds": qwall, "cpu_seconds": qcpu, "price": value,
                            "stderr": opt.errorEstimate()}  # fmt: skip
            except Exception as exc:  # the peer is optional: report why it is missing
                peer = {"error": f"{type(exc).__name__}: {exc}"}
    ours = best.pop("result")
    rec_ours = {
        **best,
        "price": ours.price,
        "stderr": ours.stderr,
        "paths": ours.paths,
        "path_steps_per_s": ours.paths * steps / best["seconds"],
        "paths_per_s": ours.paths / best["seconds"],
        "paths_per_s_per_core": ours.paths / best["seconds"] / cores,
        "paths_per_cpu_s": ours.paths / max(best["cpu_seconds"], 1e-9),
        "cores": cores,
    }
    if gpu and product != "american":  # the same samples on the CPU: agree to rounding
        cpu_res = price(model, option, paths=paths, seed=7, **{**kw, "backend": "cpu"})
        rec_ours["cpu_price"] = cpu_res.price
        rec_ours["gpu_minus_cpu_in_stderr"] = (ours.price - cpu_res.price) / ours.stderr
    if peer is not None and "error" not in peer:
        peer["paths"] = 2 * samples
        peer["path_steps_per_s"] = peer["paths"] * steps / peer["seconds"]
        peer["paths_per_s"] = peer["paths"] / peer["seconds"]
        peer["paths_per_cpu_s"] = peer["paths"] / max(peer["cpu_seconds"], 1e-9)
        peer["cores"] = 1
    peer = comm.bcast(peer, root=0)
    ratio: dict[str, float] = {}
    if "error" not in peer:
        ratio["quantlib"] = rec_ours["paths_per_s"] / peer["paths_per_s"]
        ratio["quantlib_per_core"] = rec_ours["paths_per_s_per_core"] / peer["paths_per_s"]
        ratio["quantlib_per_cpu_second"] = rec_ours["paths_per_cpu_s"] / peer["paths_per_cpu_s"]
    return {"ours": rec_ours, "peers": {"quantlib": peer}, "ratio": ratio}


def _case(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    if kind == "asian":
        paths, steps = int(args.paths), args.fixings
    else:
        paths, steps = int(args.european_paths), 1
    record = _point(args, kind, paths, steps, int(paths * args.peer_fraction))
    return {"case": f"{kind} call, {steps} fixing{'s' if steps > 1 else ''}", **record}


def _floats(text: str) -> list[int]:
    return [int(float(v)) for v in text.split(",") if v.strip()]


def _sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. The grid products x paths x steps (one-step products at one step only),
    each point as :func:`_point`, within ``args.sweep_budget`` seconds; the worst per-core
    ratio among points of more than 1e6 path-steps (``"worst"``), and the worst per CPU
    second (``"worst_per_cpu_second"``: the fair figure when other jobs share the cores)."""
    comm = world()
    products = [p.strip() for p in args.sweep_products.split(",") if p.strip()]
    for p in products:
        if p not in PRODUCTS:
            raise ValueError(f"--sweep-products: {p!r} is not one of {PRODUCTS}")
    grid = [
        (product, paths, steps)
        for product in products
        for steps in (sorted({1}) if product in _ONE_STEP else _floats(args.sweep_steps))
        for paths in _floats(args.sweep_paths)
    ]
    start = time.perf_counter()
    points: list[dict[str, Any]] = []
    for product, paths, steps in grid:
        point: dict[str, Any] = {"product": product, "paths": paths, "steps": steps}
        elapsed = comm.bcast(time.perf_counter() - start, root=0)
        if elapsed > args.sweep_budget:
            point["skipped"] = f"sweep budget of {args.sweep_budget:g} s spent"
        elif paths * steps > args.max_path_steps or (
            product == "american" and paths * steps * 8 > 4e8  # LSM keeps every path
        ):
            point["skipped"] = (
                f"{paths * steps:.3g} path-steps over the limit (--max-path-steps; American:"
                " 4e8 bytes of stored paths)"
            )
        else:
            peer_paths = max(1000, min(paths, int(args.peer_path_steps / steps)))
            point.update(_point(args, product, paths, steps, peer_paths))
            if hasattr(os, "getloadavg"):  # a shared machine's load, the point's context
                point["loadavg"] = os.getloadavg()[0]
        points.append(point)
    ranked = [
        p for p in points
        if p["paths"] * p["steps"] > _WORST_OVER and "quantlib_per_core" in p.get("ratio", {})
    ]  # fmt: skip
    return {
        "points": points,
        "worst": _lowest(ranked, "quantlib_per_core"),
        "worst_per_cpu_second": _lowest(ranked, "quantlib_per_cpu_second"),
        "seconds": time.perf_counter() - start,
    }


def _lowest(points: list[dict[str, Any]], figure: str) -> dict[str, Any] | None:
    """The point of ``points`` with the lowest ``ratio[figure]``: its product, size, ratios
    and load average (None without points)."""
    point = min(points, key=lambda p: p["ratio"][figure], default=None)
    keep = ("product", "paths", "steps", "ratio", "loadavg")
    return None if point is None else {k: point[k] for k in keep if k in point}


# float64 flops a path-step of the GPU kernel (GBM, antithetic) counted from its source, an
# FMA as 2: the step x += drift + vol sqrt(dt) z (3) and w += sqrt(dt) z (2); the Asian
# observes at every step: the volatility derivative g = w - vol t (2) and S, ln S, S g and g
# added to its sums (5); the European's one step adds the terminal g and t (3) and the payoff
# with its derivatives (7). Not counted: exp, Box-Muller's log, sqrt, sine and cosine (one
# each per two normals, shared by four path-steps), Philox's integer rounds, the per-sample
# sums: the fraction understates the work done.
FLOPS_PER_PATH_STEP = {"asian": 12, "european": 15}


def _fp64_fractions(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Local. Each GPU case's counted flops (:data:`FLOPS_PER_PATH_STEP`) over its seconds as
    a fraction of the device's measured float64 FMA rate (into the cases' ``limits``); the
    headline's figures for the record's. One device's rate: meant for one rank."""
    import numpy as np

    from .device_peak import fma_rate

    peak = fma_rate(np.float64)
    for rec in cases:
        kind = rec["case"].split()[0]
        flops = rec["ours"]["path_steps_per_s"] * FLOPS_PER_PATH_STEP[kind]
        rec["limits"] = {
            "flops_per_path_step": FLOPS_PER_PATH_STEP[kind],
            "GFLOPs": flops / 1e9,
            "device_fp64_GFLOPs": peak / 1e9,
            "fraction_of_fp64": flops / peak,
        }
    return dict(cases[0]["limits"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. The arithmetic Asian (headline) and the European; with ``--sweep`` the
    grid too (its worst point in ``"worst"``)."""
    import numba

    from hpc.backend import get_backend

    backend = get_backend(args.backend)  # first: it shares the cores among the ranks
    if args.threads is not None:
        numba.set_num_threads(args.threads)
    comm = world()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    cases = [_case(args, "asian"), _case(args, "european")]
    head = cases[0]
    limits: dict[str, Any] = {}
    if backend.is_gpu:
        limits = _fp64_fractions(cases)
    record: dict[str, Any] = {
        "bench": "mc",
        "backend": backend.name,
        "ranks": comm.Get_size(),
        "threads": numba.get_num_threads(),
        "size": {"paths": int(args.paths), "fixings": args.fixings},
        "ours": head["ours"],
        "peers": head["peers"],
        "ratio": head["ratio"],
        "limits": limits,
        "cases": cases,
    }
    if args.sweep:
        sweep = _sweep(args)
        record["sweep"] = sweep["points"]
        record["worst"] = sweep["worst"]
        record["worst_per_cpu_second"] = sweep["worst_per_cpu_second"]
        record["sweep_seconds"] = sweep["seconds"]
    record["machine"] = {
        "cpus": os.cpu_count(),
        "loadavg_before": load,
        "loadavg_after": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    return record
