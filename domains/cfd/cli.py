"""``hpc cfd``: run the cases under MPI, write fields and checkpoints, plot the cavity.

Examples::

    mpirun -n 2 hpc cfd cavity --re 100 --n 129 --out cavity.h5
    mpirun -n 2 hpc cfd cavity --re 100 --n 129 --checkpoint-every 5000 --restart
    hpc cfd taylor-green --n 64 --steps 2000
    mpirun -n 2 hpc cfd cylinder --diameter 20 --re 20 --out cyl.h5   # Schaefer-Turek 2D-1
    hpc cfd stl part.stl --nx 96 --ny 48 --nz 48 --scale 10 --offset 30 24 24
    hpc cfd plot cavity.h5
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import hpc  # lazy: MPI starts at the first hpc.world()
from hpc.errors import UsageError, check_count, check_output_path, on_all_ranks
from hpc.jobs import Job, add_job_options

__all__ = ["add_parser"]


def _magic(text: str) -> float | str:
    """``--magic``: ``auto`` or a number (checked in :func:`_make_case`)."""
    if text.strip() == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a number (the TRT magic parameter) or 'auto'"
        ) from None


def _common(p: argparse.ArgumentParser, steps: int) -> None:
    p.add_argument(
        "--collision",
        choices=["bgk", "trt", "mrt"],
        default=None,
        help="collision operator (default: the case's); mrt: multiple-relaxation-time",
    )
    p.add_argument(
        "--magic",
        type=_magic,
        default=None,
        metavar="LAMBDA",
        help="TRT magic parameter (tau - 1/2)(tau_- - 1/2), > 0, or 'auto': 3/16 up to "
        "u_max/nu = 7.5, above it 6 (nu/u_max)^2, which kept inflow faces stable "
        "(docs/cfd.md). Default: auto with an inflow face (cylinder, stl, channel --inflow), "
        "else 3/16 (bounce-back walls mid-link); with --collision mrt it sets the energy-flux "
        "rate",
    )
    p.add_argument(
        "--smagorinsky",
        type=float,
        default=0.0,
        metavar="CS",
        help="Smagorinsky LES constant C_s (default 0: no closure; 0.1-0.2 typical)",
    )
    p.add_argument(
        "--mrt-rates",
        default=None,
        metavar="G=S,...",
        help="MRT rates of moment groups, e.g. bulk=1.2,eps=1.4 (groups: bulk, eps, q; "
        "D3Q19 also pi, m; shear is set by the viscosity)",
    )
    p.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    p.add_argument(
        "--dim", type=int, choices=[2, 3], default=None, help="2 (D2Q9, default) or 3 (D3Q19)"
    )
    p.add_argument(
        "--lattice",
        choices=["D2Q9", "D3Q19", "D3Q27"],
        default=None,
        help="velocity set (default: D2Q9 in 2-D, D3Q19 in 3-D); D3Q27 implies --dim 3 "
        "(BGK or TRT, with or without --smagorinsky; no MRT)",
    )
    p.add_argument("--steps", type=int, default=steps, help=f"total steps (default {steps})")
    p.add_argument(
        "--check-every",
        type=int,
        default=1000,
        help="steps between residual checks and progress lines",
    )
    p.add_argument("--out", type=Path, default=None, help="HDF5 file for the final fields")
    p.add_argument(
        "--checkpoint-dir",
        type=Path,
        default=None,
        help="checkpoint folder (default: OUT stem + '.ckpt', or 'checkpoints')",
    )
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints")
    p.add_argument("--restart", action="store_true", help="continue from the latest checkpoint")
    p.add_argument(
        "--journal",
        type=Path,
        metavar="DIR",
        default=None,
        help="checkpoints in DIR (every --checkpoint-every steps, default --check-every), "
        "resumed from the latest when DIR holds one (after a crash or preemption, on any rank "
        "count); removed when the run completes",
    )
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")
    add_job_options(p, journal=False)  # --quiet, --metrics FILE


def _bodies(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sample-every", type=int, default=10, help="steps between force samples (history)"
    )
    p.add_argument(
        "--half-way",
        action="store_true",
        help="half-way bounce-back on the body (default: Bouzidi's interpolated, 2nd order)",
    )
    _outlet(p)


def _outlet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--outlet",
        choices=["pressure", "convective"],
        default="pressure",
        help="outflow face: pressure (density 1, default) or convective (Orlanski: "
        "du/dt + U_c du/dx = 0, lets a wake's vortices leave without reflection)",
    )
    p.add_argument(
        "--outlet-speed",
        type=float,
        default=None,
        metavar="U_C",
        help="the convective outlet's speed, lattice units (default: the mean outflow velocity)",
    )


def add_parser(sub: Any) -> None:
    """Register ``hpc cfd`` and its commands on the ``hpc`` parser's subparsers."""
    cfd = sub.add_parser(
        "cfd", help="lattice Boltzmann flows (cavity, Taylor-Green, channel, cylinder, STL body)"
    )
    cmds = cfd.add_subparsers(dest="cfd_command", metavar="CASE", required=True)
    cav = cmds.add_parser("cavity", help="lid-driven cavity, compared with Ghia et al. (1982)")
    cav.add_argument("--re", type=float, default=100.0, help="Reynolds number (default 100)")
    cav.add_argument("--n", type=int, default=129, help="cells per side (default 129)")
    cav.add_argument("--u-lid", type=float, default=0.1, help="lid speed, lattice units")
    cav.add_argument(
        "--tol",
        type=float,
        default=1e-7,
        help="stop when max|du|/U between checks falls below this (0: never)",
    )
    _common(cav, 200_000)
    cav.set_defaults(func=_run_case, case="cavity")
    tg = cmds.add_parser("taylor-green", help="decaying Taylor-Green vortex (periodic)")
    tg.add_argument("--n", type=int, default=64, help="cells per side")
    tg.add_argument("--re", type=float, default=100.0, help="Reynolds number U n / nu")
    tg.add_argument("--u0", type=float, default=0.05, help="vortex speed, lattice units")
    _common(tg, 2000)
    tg.set_defaults(func=_run_case, case="taylor-green", tol=0.0)
    ch = cmds.add_parser(
        "channel",
        help="Poiseuille channel: body force, or --inflow (velocity inlet, pressure outlet)",
    )
    ch.add_argument("--nx", type=int, default=8)
    ch.add_argument("--ny", type=int, default=32)
    ch.add_argument("--re", type=float, default=16.0, help="Reynolds number u_max ny / nu")
    ch.add_argument("--u-max", type=float, default=0.05)
    ch.add_argument("--tol", type=float, default=1e-9)
    ch.add_argument(
        "--inflow",
        action="store_true",
        help="velocity inlet (parabolic) and pressure outlet instead of a body force",
    )
    _outlet(ch)
    _common(ch, 100_000)
    ch.set_defaults(func=_run_case, case="channel")
    cyl = cmds.add_parser(
        "cylinder",
        help="Schaefer & Turek (1996) cylinder: drag, lift, pressure drop (2D-1, 2D-2, 3D-1Z)",
    )
    cyl.add_argument("--diameter", type=float, default=20, help="cells per diameter (default 20)")
    cyl.add_argument(
        "--re", type=float, default=20.0, help="20 (2D-1, 3D-1Z: steady) or 100 (2D-2)"
    )
    cyl.add_argument("--u-max", type=float, default=0.1, help="peak inflow speed, lattice units")
    _bodies(cyl)
    cyl.add_argument(
        "--tol",
        type=float,
        default=None,
        help="stop when max|du|/U between checks falls below this (default 1e-8 for Re <= 40, "
        "else 0: never)",
    )
    _common(cyl, 60_000)
    cyl.set_defaults(func=_run_case, case="cylinder")
    stl = cmds.add_parser(
        "stl", help="flow through a 3-D channel around a closed STL surface (drag, lift)"
    )
    stl.add_argument("file", type=Path, help="STL file (closed surface)")
    stl.add_argument("--nx", type=int, default=96)
    stl.add_argument("--ny", type=int, default=48)
    stl.add_argument("--nz", type=int, default=48)
    stl.add_argument("--scale", type=float, default=1.0, help="cells per file unit")
    stl.add_argument("--offset", type=float, nargs=3, default=(0.0, 0.0, 0.0), help="shift, cells")
    stl.add_argument("--re", type=float, default=20.0, help="Reynolds number U L / nu")
    stl.add_argument(
        "--length", type=float, default=None, help="L of Re, cells (default: the body's height)"
    )
    stl.add_argument("--u-in", type=float, default=0.05, help="uniform inflow speed")
    stl.add_argument("--tol", type=float, default=1e-7)
    _bodies(stl)
    _common(stl, 20_000)
    stl.set_defaults(func=_run_case, case="stl")
    plot = cmds.add_parser("plot", help="PNG of a cavity result: speed, streamlines, profiles")
    plot.add_argument("file", type=Path)
    plot.add_argument("--png", type=Path, default=None, help="output (default FILE.png)")
    plot.set_defaults(func=_plot)


def _make_case(args: argparse.Namespace) -> Any:
    import numpy as np

    from .cases import Channel, LidDrivenCavity, TaylorGreen

    dtype = np.dtype(args.dtype)
    kw: dict[str, Any] = {"dtype": dtype, "backend": args.backend}
    if args.collision:
        kw["collision"] = args.collision
    if args.lattice:
        kw["lattice"] = args.lattice
        if args.lattice == "D3Q27" and args.collision == "mrt":
            raise on_all_ranks(
                UsageError("--collision mrt is not available on D3Q27 (no moment basis): "
                           "use bgk or trt, or --lattice D3Q19")
            )
    kw.update(_closure_options(args))
    if args.magic is not None:
        if args.magic != "auto" and not (math.isfinite(args.magic) and args.magic > 0):
            raise on_all_ranks(UsageError(
                f"--magic {args.magic}: the TRT magic parameter must be finite and > 0 "
                "(3/16: walls mid-link; smaller: odd moments damped harder)"))
        kw["magic"] = args.magic
    if args.case in ("cylinder", "stl"):
        return _make_body_case(args, kw)
    if args.case == "cavity":
        return LidDrivenCavity(args.n, args.re, u_lid=args.u_lid, dim=args.dim, **kw)
    if args.case == "taylor-green":
        return TaylorGreen(args.n, re=args.re, u0=args.u0, dim=args.dim, **kw)
    if args.dim != 2:
        raise on_all_ranks(UsageError("the channel is 2-D (--dim 2)"))
    kw.pop("lattice", None)  # D2Q9
    return Channel(
        args.nx, args.ny, re=args.re, u_max=args.u_max, inflow=args.inflow, **kw, **_outlet_kw(args)
    )


def _outlet_kw(args: argparse.Namespace) -> dict[str, Any]:
    """``outlet`` and ``outlet_speed`` keywords from the options."""
    if args.outlet_speed is not None:
        if args.outlet != "convective":
            raise on_all_ranks(UsageError("--outlet-speed needs --outlet convective"))
        if not args.outlet_speed >= 0:
            raise on_all_ranks(UsageError(f"--outlet-speed {args.outlet_speed}: must be >= 0"))
    if args.case == "channel" and not args.inflow and args.outlet != "pressure":
        raise on_all_ranks(UsageError("--outlet needs --inflow (the channel is periodic)"))
    return {"outlet": args.outlet, "outlet_speed": args.outlet_speed}


def _closure_options(args: argparse.Namespace) -> dict[str, Any]:
    """``smagorinsky`` and ``mrt_rates`` keywords from the options (empty when unset)."""
    out: dict[str, Any] = {}
    if args.smagorinsky:
        if not args.smagorinsky > 0:
            raise on_all_ranks(UsageError(f"--smagorinsky {args.smagorinsky}: must be >= 0"))
        out["smagorinsky"] = args.smagorinsky
    if args.mrt_rates:
        if args.collision != "mrt":
            raise on_all_ranks(UsageError("--mrt-rates needs --collision mrt"))
        rates = {}
        for item in args.mrt_rates.split(","):
            key, _, value = item.partition("=")
            try:
                rates[key.strip()] = float(value)
            except ValueError:
                raise on_all_ranks(
                    UsageError(f"--mrt-rates {args.mrt_rates}: expected GROUP=RATE,...")
                ) from None
        out["mrt_rates"] = rates
    return out


def _make_body_case(args: argparse.Namespace, kw: dict[str, Any]) -> Any:
    from .geometry import GeometryError, Surface
    from .obstacles import BodyInChannel, SchaeferTurek
    from .units import LatticeUnits

    kw.update(curved=not args.half_way, sample_every=args.sample_every, **_outlet_kw(args))
    if args.case == "cylinder":
        return SchaeferTurek(args.diameter, re=args.re, u_max=args.u_max, dim=args.dim, **kw)
    error = None
    try:  # every rank reads the file; all agree on the outcome
        body = Surface(args.file, scale=args.scale, offset=args.offset)
    except GeometryError as exc:
        error = exc
    if error is not None:
        raise on_all_ranks(UsageError(str(error)))
    lo, hi = body.bounds(3)
    length = args.length or float(hi[1] - lo[1])
    units = LatticeUnits.from_reynolds(args.re, length, args.u_in)
    shape = (args.nx, args.ny, args.nz)
    outside = [a for a in range(3) if lo[a] < 0 or hi[a] > shape[a]]
    if outside:
        raise on_all_ranks(
            UsageError(
                f"{args.file}: the body spans {lo.round(2).tolist()} .. {hi.round(2).tolist()} "
                f"cells, outside the grid {shape} along axes {outside}; change --scale/--offset"
            )
        )
    return BodyInChannel(shape, [body], units, (args.u_in, 0.0, 0.0), **kw)


def _check_options(args: argparse.Namespace) -> None:
    """Options refused before the solver is built (a long run must not fail at its end)."""
    check_count("--steps", args.steps)
    check_count("--check-every", args.check_every, 1)
    check_count("--checkpoint-every", args.checkpoint_every)
    check_output_path("--out", args.out)
    if args.case in ("cylinder", "stl"):
        check_count("--sample-every", args.sample_every)
    if args.case == "stl":
        args.dim = 3  # a surface is 3-D
        if not args.file.is_file():
            raise UsageError(f"{args.file}: no such file")
    if args.lattice is not None:  # the lattice fixes the dimension
        d = 2 if args.lattice == "D2Q9" else 3
        if args.dim not in (None, d):
            raise UsageError(f"--lattice {args.lattice} is {d}-D, not --dim {args.dim}")
        args.dim = d
    args.dim = args.dim or 2
    if args.checkpoint_dir is not None and args.checkpoint_dir.is_file():
        raise UsageError(f"--checkpoint-dir {args.checkpoint_dir}: is a file, expected a folder")
    if args.journal is not None:
        if args.checkpoint_dir is not None or args.restart:
            raise UsageError("--journal DIR is a checkpoint folder resumed and removed at the "
                             "end: give it, or --checkpoint-dir/--restart, not both")
        if args.journal.is_file():
            raise UsageError(f"--journal {args.journal}: is a file, expected a folder")
        # the journal: checkpoints in DIR, resumed when there, removed when the run completes
        args.checkpoint_dir, args.restart = args.journal, True
        args.checkpoint_every = args.checkpoint_every or args.check_every


def _run_case(args: argparse.Namespace) -> int:
    from hpc.io import Checkpoint

    from hpc.journal import remove_stale_temporaries

    try:
        _check_options(args)
    except UsageError as exc:  # every rank parses the same command line
        raise on_all_ranks(exc) from None
    comm = hpc.world()
    rank0 = comm.Get_rank() == 0
    case = _make_case(args)
    solver = case.solver
    ckpt_dir = args.checkpoint_dir or (
        args.out.with_suffix(".ckpt") if args.out else Path("checkpoints")
    )
    ckpt = Checkpoint(ckpt_dir, keep=2) if (args.checkpoint_every or args.restart) else None
    params = {
        "case": args.case,
        # paths resolved: a restart from another folder names the same files alike
        "args": {k: str(v.resolve() if isinstance(v, Path) else v)
                 for k, v in vars(args).items() if k not in ("func", "argv")},
    }
    if args.restart:
        step = ckpt.latest()
        if step is None:
            if rank0:
                print(f"no checkpoint in {ckpt_dir}: starting from step 0", flush=True)
        else:
            state = ckpt.load(step, decomp=case.decomp)
            _check_same_run(state.attrs, params, state.path)
            solver.restore(state.arrays, state.step)
            if rank0:
                print(f"restarted from step {state.step} ({state.path})", flush=True)
            if args.journal is not None and args.out and rank0:
                # what a killed run of this journal was writing: the output is written anew
                # (no other process writes it: the journal is this job's)
                remove_stale_temporaries(args.out)
    job = Job(args, comm, unit="steps", total=max(0, args.steps - solver.steps_done),
              backend=solver.backend.name, journal=False, desc=args.case)
    with job:
        _solve(args, case, ckpt, params, job)
    if args.journal is not None and rank0:  # the run is whole: its checkpoints are done with
        import shutil

        shutil.rmtree(args.journal, ignore_errors=True)
    return 0


# options a restart may change: how long, how often and where it reports and saves, and
# where it runs; every other option sets the flow (case, grid, Reynolds number, collision
# and its parameters, precision, geometry), which a restart must continue unchanged
_RUN_OPTIONS = frozenset({
    "steps", "check_every", "out", "checkpoint_dir", "checkpoint_every", "restart", "journal",
    "backend", "quiet", "metrics", "tol", "sample_every",
})


def _check_same_run(saved: dict[str, Any], now: dict[str, Any], path: Any) -> None:
    """Refuse to restart a checkpoint under options that change the flow it holds (another
    collision operator, TRT magic parameter, Reynolds number, grid or precision), naming each
    option, its checkpointed value and the new one. Every rank reads the same checkpoint, so
    every rank raises alike."""
    before, after = saved.get("args", {}), now["args"]
    changed = [
        f"--{k.replace('_', '-')} {before.get(k)!s} in the checkpoint, {after.get(k)!s} now"
        for k in sorted(set(before) | set(after))
        if k not in _RUN_OPTIONS and before.get(k) != after.get(k)
    ]
    if saved.get("case") != now["case"]:
        changed.insert(0, f"case {saved.get('case')} in the checkpoint, {now['case']} now")
    if changed:
        raise on_all_ranks(UsageError(
            f"--restart from {path}: the checkpoint was written by a run with other flow "
            f"options ({'; '.join(changed)}); give the same options, or start a new run "
            "without --restart"))


def _solve(args: argparse.Namespace, case: Any, ckpt: Any, params: dict[str, Any],
           job: Job) -> None:
    """Collective. Run the case, report, and write ``--out`` with the run record."""
    from hpc.io import atomic_output, write_array, write_attrs, write_xdmf

    from hpc.runrecord import copy_bandwidth

    comm, solver = case.comm, case.solver
    rank0 = comm.Get_rank() == 0
    if rank0 and not args.quiet:
        u = case.units
        job.write(
            f"{args.case}: grid {case.decomp.global_shape} on {comm.Get_size()} ranks "
            f"{case.decomp.dims}, {solver.lattice.name} {solver.collision.upper()}"
            f"{_lambda_text(solver) if solver.collision == 'trt' else ''}"
            f"{f' + Smagorinsky C_s={solver.smagorinsky:g}' if solver.smagorinsky else ''} "
            f"{solver.dtype.name}, backend {solver.backend.name}, tau={u.tau:.4f} "
            f"nu={u.nu:.4g} Re={u.reynolds:.4g} Ma={u.mach:.3f}"
        )

    def report(line: str, steps: int, mlups: float) -> None:  # rank 0, at every check
        job.progress.update(steps)
        job.progress.set_rate(MLUPS=mlups)
        job.write(line)  # above the bar, or the plain line when there is none

    tol = getattr(args, "tol", 0.0)
    if args.case == "cylinder" and tol is None:
        tol = 1e-8 if args.re <= 40 else 0.0
    tol = tol or None
    info = case.run(
        max(0, args.steps - solver.steps_done),
        check_every=args.check_every,
        tol=tol,
        progress=not args.quiet,
        checkpoint_every=args.checkpoint_every,
        on_checkpoint=lambda step: ckpt.save(step, solver.state(), case.decomp, attrs=params),
        report=report,
    )
    if info["converged"] and rank0 and not args.quiet:
        job.write(f"converged: residual {info['residual']:.3e} < {tol:g}")
    _report(case, args, rank0)
    figures: dict[str, Any] = {"rate": info["mlups"], "rate_unit": "MLUPS",
                               "work": info["mlups"] * 1e6 * info["seconds"],
                               "work_unit": "cell updates"}
    if args.out or args.metrics:  # memory-bound: each update reads and writes q populations
        traffic = 2 * solver.lattice.q * solver.dtype.itemsize
        figures.update(limit=copy_bandwidth(comm) / 1e9, limit_unit="GB/s",
                       achieved=info["mlups"] * 1e6 * traffic / 1e9)
    job.finish(**figures)
    if args.out:
        fields = case.fields()
        attrs = {
            "case": args.case,
            "steps": solver.steps_done,
            "params": json.dumps(params["args"]),
            "tau": case.units.tau,
            "u_ref": case.units.u,
            "re": case.units.reynolds,
        }
        if hasattr(case, "history_table"):
            attrs.update(_body_summary(case, args))
        with atomic_output(args.out, comm) as tmp:  # whole or not at all
            for name, local in fields.items():
                write_array(tmp, name, local, case.decomp)
            write_attrs(tmp, attrs, comm)
            if hasattr(case, "history_table"):
                from hpc.io import write_table

                table = case.history_table()  # the same on every rank: rank 0 writes its rows
                if not rank0:
                    table = {k: v[:0] for k, v in table.items()}
                write_table(tmp, "forces", table, comm)
            job.write_record(tmp)
        if rank0:
            write_xdmf(args.out, list(fields), spacing=[1.0] * case.decomp.ndim)
            job.write(f"fields written to {args.out} (+ {args.out.with_suffix('.xmf').name})")
    solver.close()


def _body_summary(case: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Figures of a body case for the output's attributes and the report."""
    import numpy as np

    h = case.history_table()
    out: dict[str, Any] = {}
    if h["step"].size:
        out.update(cd=float(h["cd"][-1]), cl=float(h["cl"][-1]))
        half = h["cd"].size // 2
        out.update(cd_max=float(h["cd"][half:].max()), cl_max=float(h["cl"][half:].max()))
    if args.case == "cylinder":
        out["diameter_cells"] = float(case.diameter)
        if case.dim == 2 or case.decomp.ndim == 3:
            out["dp"] = float(case.pressure_drop())
        st = case.strouhal() if h["step"].size else float("nan")
        if np.isfinite(st):
            out["st"] = float(st)
    return out


def _lambda_text(solver: Any) -> str:
    """`` Lambda=...`` for the header line, saying when ``magic="auto"`` chose it and from
    which grid Reynolds number."""
    text = f" Lambda={solver.magic:.6g}"
    if solver.magic_auto:
        nu = (solver.tau - 0.5) / 3.0
        text += f" (auto: u_max/nu={solver.u_max / nu:.4g})"
    return text


def _report_body(case: Any, args: argparse.Namespace, rank0: bool) -> None:
    from .obstacles import SCHAEFER_TUREK

    summary = _body_summary(case, args)
    if not rank0 or "cd" not in summary:
        return
    if args.case != "cylinder":
        print(f"drag coefficient {summary['cd']:.5f}, lift {summary['cl']:+.5f} (last sample)")
        return
    unsteady = args.re > 40
    name = "2D-2" if unsteady and case.dim == 2 else ("2D-1" if case.dim == 2 else "3D-1Z")
    ref = SCHAEFER_TUREK[name]
    keys = ("cd_max", "cl_max", "st") if unsteady else ("cd", "cl", "dp")
    parts = []
    for k in keys:
        if k in ref and k in summary:
            lo, hi = ref[k]
            parts.append(f"{k} {summary[k]:.5f} (published [{lo}, {hi}])")
    print(f"Schaefer & Turek {name}, D = {case.diameter:g} cells: " + ", ".join(parts))


def _report(case: Any, args: argparse.Namespace, rank0: bool) -> None:
    import numpy as np

    from .ghia import GHIA, ghia_deviation

    if args.case in ("cylinder", "stl"):
        _report_body(case, args, rank0)
    elif args.case == "taylor-green":
        e = case.kinetic_energy()
        if rank0 and case.dim == 2:
            ea = case.analytic_energy(case.solver.steps_done)
            print(
                f"kinetic energy {e:.6e}, analytic exp(-4 nu k^2 t): {ea:.6e} "
                f"(rel. error {abs(e / ea - 1):.2e})"
            )
    elif args.case == "channel":
        _, u = case.solver.macroscopic()
        exact = case.analytic_profile()
        num = float(((u[0] - exact[None, :]) ** 2).sum())
        den = float(np.broadcast_to(exact[None, :] ** 2, u[0].shape).sum())
        from hpc.collectives import allreduce

        num, den = allreduce(num, "sum", case.comm), allreduce(den, "sum", case.comm)
        if rank0:
            print(f"Poiseuille profile: relative L2 error {math.sqrt(num / den):.3e}")
    elif args.case == "cavity" and case.dim == 2:
        lines = case.centerlines()
        if rank0 and int(round(case.re)) in GHIA:
            du, dv = ghia_deviation(int(round(case.re)), *lines)
            print(
                f"Ghia et al. (1982), Re={case.re:g}: max|u-u_G| {du:.4f}, "
                f"max|v-v_G| {dv:.4f} (lid units)"
            )


def _plot(args: argparse.Namespace) -> int:
    import h5py
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hpc.io.errors import MissingDataError, from_os_error

    from .ghia import GHIA

    check_output_path("--png", args.png)
    try:
        with h5py.File(args.file, "r") as f:
            missing = [name for name in ("ux", "uy") if name not in f]
            if missing:
                raise MissingDataError(
                    "not an hpc cfd result: no velocity field", str(args.file), missing[0]
                )
            ux, uy = f["ux"][...], f["uy"][...]
            u_ref = float(f.attrs.get("u_ref", 1.0))
            re = float(f.attrs.get("re", 0.0))
            body = None
            if "forces" in f and "solid" in f:  # a flow around bodies
                body = {
                    "solid": f["solid"][...],
                    **{k: f[f"forces/{k}"][...] for k in ("step", "cd", "cl")},
                }
    except OSError as exc:
        if isinstance(exc, MissingDataError):
            raise
        raise from_os_error(exc, "reading the result", args.file) from None
    if body is not None:
        return _plot_body(args, ux, uy, u_ref, body)
    if ux.ndim != 2:
        raise UsageError(f"{args.file}: plot draws 2-D fields; this one is {ux.ndim}-D")
    n = ux.shape[0]
    pos = (np.arange(n) + 0.5) / n
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 5))
    speed = np.hypot(ux, uy).T / u_ref
    im = a.imshow(speed, origin="lower", extent=(0, 1, 0, 1), cmap="viridis")
    a.streamplot(pos, pos, ux.T, uy.T, color="w", density=1.2, linewidth=0.6)
    fig.colorbar(im, ax=a, label="|u| / U")
    a.set_title(f"{args.file.name}: speed and streamlines")
    m = n // 2
    u_line = 0.5 * (ux[m - 1, :] + ux[m, :]) if n % 2 == 0 else ux[m, :]
    v_line = 0.5 * (uy[:, m - 1] + uy[:, m]) if n % 2 == 0 else uy[:, m]
    b.plot(u_line / u_ref, pos, label="u(y) on x = 1/2")
    b.plot(pos, v_line / u_ref, label="v(x) on y = 1/2")
    key = int(round(re))
    if key in GHIA:
        gy, gu, gx, gv = GHIA[key]
        b.plot(gu, gy, "o", mfc="none", label=f"Ghia et al. u, Re={key}")
        b.plot(gx, gv, "s", mfc="none", label=f"Ghia et al. v, Re={key}")
    b.set_xlabel("position / velocity")
    b.legend(fontsize=8)
    b.set_title("centre-line profiles")
    return _save_figure(fig, args)


def _save_figure(fig: Any, args: argparse.Namespace) -> int:
    """Write ``fig`` to ``--png`` (default: the file's name with ``.png``) and say where."""
    out = args.png or args.file.with_suffix(".png")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot written to {out}")
    return 0


def _plot_body(
    args: argparse.Namespace, ux: Any, uy: Any, u_ref: float, body: dict[str, Any]
) -> int:
    """Speed around the body (drawn in grey; 3-D: the mid plane in z) over the force
    coefficients' history."""
    import matplotlib.pyplot as plt
    import numpy as np

    solid = body["solid"]
    if ux.ndim == 3:
        m = ux.shape[2] // 2
        ux, uy, solid = ux[:, :, m], uy[:, :, m], solid[:, :, m]
    nx, ny = ux.shape
    fig, (a, b) = plt.subplots(2, 1, figsize=(11, 3.2 + 2.5 * min(ny / nx * 4, 2.5)))
    speed = np.ma.masked_where(solid.T > 0, np.hypot(ux, uy).T / u_ref)
    im = a.imshow(speed, origin="lower", extent=(0, nx, 0, ny), cmap="viridis")
    a.contourf(np.arange(nx) + 0.5, np.arange(ny) + 0.5, solid.T, levels=[0.5, 1.5], colors="0.5")
    fig.colorbar(im, ax=a, label="|u| / U")
    a.set_title(f"{args.file.name}: speed (body in grey)")
    a.set_aspect("equal")
    b.plot(body["step"], body["cd"], label="c_D")
    b.plot(body["step"], body["cl"], label="c_L")
    b.set_xlabel("step")
    b.set_ylabel("coefficient")
    b.legend(fontsize=8)
    b.set_title("force history")
    return _save_figure(fig, args)
