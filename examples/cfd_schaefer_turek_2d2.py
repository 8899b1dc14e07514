"""Schaefer & Turek (1996) 2D-2 (Re = 100, periodic vortex shedding) at several resolutions.

A long run (minutes to hours on a few cores), not part of ``make test``. Each configuration
``D:COLLISION[:LAMBDA]`` runs in turn in this process; its force history is saved to
``OUT/st2d2_D<D>_<collision>.npz`` every ``--save-every`` steps (so a stopped run still has its
history) and its figures are appended to ``OUT/summary.jsonl``::

    NUMBA_NUM_THREADS=2 python examples/cfd_schaefer_turek_2d2.py 20:bgk 40:trt 40:trt:0.02

The figures are taken from the last ``--window`` steps of the history (max c_D, max c_L, and
the Strouhal number from the lift's upward zero crossings), and also from the window before it,
so that a run that is not yet periodic shows as two windows that disagree.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np
from hpc.domains.cfd import SchaeferTurek
from hpc.domains.cfd.obstacles import SCHAEFER_TUREK


def window_figures(step: np.ndarray, cd: np.ndarray, cl: np.ndarray, lo: float, hi: float,
                   diameter: float, u_mean: float) -> dict[str, float]:
    """max c_D, max c_L and St of the samples with ``lo < step <= hi``."""
    sel = (step > lo) & (step <= hi)
    t, d, lift = step[sel], cd[sel], cl[sel]
    if t.size < 4:
        return {"cd_max": math.nan, "cl_max": math.nan, "st": math.nan, "periods": 0}
    c = lift - 0.5 * (lift.max() + lift.min())
    up = np.nonzero((c[:-1] < 0) & (c[1:] >= 0))[0]
    st = math.nan
    if up.size >= 2:
        tc = t[up] + (t[up + 1] - t[up]) * (-c[up]) / (c[up + 1] - c[up])
        st = diameter / ((tc[-1] - tc[0]) / (tc.size - 1) * u_mean)
    return {"cd_max": float(d.max()), "cl_max": float(lift.max()), "st": st,
            "periods": int(max(up.size - 1, 0))}


def run_one(spec: str, args: argparse.Namespace) -> dict[str, object]:
    parts = spec.split(":")
    diameter, collision = float(parts[0]), parts[1]
    options: dict[str, object] = {"collision": collision, "sample_every": args.sample_every}
    if len(parts) > 2:
        options["magic"] = float(parts[2])
    # the start-up and the shedding period last D / u_max steps times a constant
    steps = args.steps or int(round(args.steps_per_cell * diameter * 0.05 / args.u_max))
    window = args.window or steps // 6
    case = SchaeferTurek(diameter=diameter, re=100.0, u_max=args.u_max, outlet=args.outlet,
                         **options)
    lam = f"_L{parts[2]}" if len(parts) > 2 else ""
    tag = f"st2d2_D{parts[0]}_{collision}{lam}_u{args.u_max:g}_{args.outlet}"
    out = Path(args.out)
    cells = math.prod(case.decomp.global_shape)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    done = 0
    while done < steps:
        chunk = min(args.save_every, steps - done)
        case.run(chunk, check_every=chunk)
        done += chunk
        h = case.history_table()
        np.savez(out / f"{tag}.npz", **h)
        elapsed = time.perf_counter() - t0
        print(f"{tag}: step {done}/{steps}  {cells * done / elapsed / 1e6:.1f} MLUPS  "
              f"c_D {h['cd'][-1]:.4f}  c_L {h['cl'][-1]:+.4f}  load {os.getloadavg()[0]:.2f}",
              flush=True)
        if not np.isfinite(h["cd"][-1]):
            break
    seconds = time.perf_counter() - t0
    h = case.history_table()
    last = window_figures(h["step"], h["cd"], h["cl"], steps - window, steps,
                          case.diameter, case.units.u)
    before = window_figures(h["step"], h["cd"], h["cl"], steps - 2 * window, steps - window,
                            case.diameter, case.units.u)
    record = {
        "tag": tag, "diameter": case.diameter, "grid": list(case.decomp.global_shape),
        "collision": collision, "magic": options.get("magic"), "u_max": args.u_max,
        "tau": case.units.tau, "outlet": args.outlet, "steps": steps, "window": window,
        "seconds": seconds, "mlups": cells * steps / seconds / 1e6,
        "threads": os.environ.get("NUMBA_NUM_THREADS"),
        "load_start": load0, "load_end": os.getloadavg(),
        "last_window": last, "previous_window": before,
        "published": {k: list(v) for k, v in SCHAEFER_TUREK["2D-2"].items()},
    }
    with open(out / "summary.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")
    print(json.dumps(record), flush=True)
    case.solver.close()
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="D:COLLISION[:LAMBDA], e.g. 40:trt:0.1875")
    p.add_argument("--u-max", type=float, default=0.05)
    p.add_argument("--outlet", default="pressure", choices=["pressure", "convective"])
    p.add_argument("--steps", type=int, default=0,
                   help="steps per run (default: STEPS_PER_CELL D 0.05 / u_max)")
    p.add_argument("--steps-per-cell", type=float, default=4000.0,
                   help="steps per cell of diameter at u_max = 0.05 (default 4000: about 36 "
                   "shedding periods, periodic after the first 15-20)")
    p.add_argument("--window", type=int, default=0, help="steps per window (default steps/6)")
    p.add_argument("--sample-every", type=int, default=10)
    p.add_argument("--save-every", type=int, default=10_000)
    p.add_argument("--out", default="st2d2_runs")
    args = p.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for spec in args.runs:
        run_one(spec, args)


if __name__ == "__main__":
    main()
