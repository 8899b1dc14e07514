"""``hpc cfd``: run the cases under MPI, write fields and checkpoints, plot the cavity.

Examples::

    mpirun -n 2 hpc cfd cavity --re 100 --n 129 --out cavity.h5
    mpirun -n 2 hpc cfd cavity --re 100 --n 129 --checkpoint-every 5000 --restart
    hpc cfd taylor-green --n 64 --steps 2000
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

__all__ = ["add_parser"]


def _common(p: argparse.ArgumentParser, steps: int) -> None:
    p.add_argument(
        "--collision",
        choices=["bgk", "trt"],
        default=None,
        help="collision operator (default: the case's)",
    )
    p.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    p.add_argument("--dim", type=int, choices=[2, 3], default=2, help="2 (D2Q9) or 3 (D3Q19)")
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
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def add_parser(sub: Any) -> None:
    """Register ``hpc cfd`` and its commands on the ``hpc`` parser's subparsers."""
    cfd = sub.add_parser("cfd", help="lattice Boltzmann flows (cavity, Taylor-Green, channel)")
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
    _common(ch, 100_000)
    ch.set_defaults(func=_run_case, case="channel")
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
    if args.case == "cavity":
        return LidDrivenCavity(args.n, args.re, u_lid=args.u_lid, dim=args.dim, **kw)
    if args.case == "taylor-green":
        return TaylorGreen(args.n, re=args.re, u0=args.u0, dim=args.dim, **kw)
    if args.dim != 2:
        raise on_all_ranks(UsageError("the channel is 2-D (--dim 2)"))
    return Channel(args.nx, args.ny, re=args.re, u_max=args.u_max, inflow=args.inflow, **kw)


def _check_options(args: argparse.Namespace) -> None:
    """Options refused before the solver is built (a long run must not fail at its end)."""
    check_count("--steps", args.steps)
    check_count("--check-every", args.check_every, 1)
    check_count("--checkpoint-every", args.checkpoint_every)
    check_output_path("--out", args.out)
    if args.checkpoint_dir is not None and args.checkpoint_dir.is_file():
        raise UsageError(f"--checkpoint-dir {args.checkpoint_dir}: is a file, expected a folder")


def _run_case(args: argparse.Namespace) -> int:
    from hpc.io import Checkpoint, atomic_output, write_array, write_attrs, write_xdmf

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
        "args": {k: str(v) for k, v in vars(args).items() if k not in ("func",)},
    }
    if args.restart:
        step = ckpt.latest()
        if step is None:
            if rank0:
                print(f"no checkpoint in {ckpt_dir}: starting from step 0", flush=True)
        else:
            state = ckpt.load(step, decomp=case.decomp)
            solver.restore(state.arrays, state.step)
            if rank0:
                print(f"restarted from step {state.step} ({state.path})", flush=True)
    if rank0 and not args.quiet:
        u = case.units
        print(
            f"{args.case}: grid {case.decomp.global_shape} on {comm.Get_size()} ranks "
            f"{case.decomp.dims}, {solver.lattice.name} {solver.collision.upper()} "
            f"{solver.dtype.name}, backend {solver.backend.name}, tau={u.tau:.4f} "
            f"nu={u.nu:.4g} Re={u.reynolds:.4g} Ma={u.mach:.3f}",
            flush=True,
        )
    tol = getattr(args, "tol", 0.0) or None
    info = case.run(
        max(0, args.steps - solver.steps_done),
        check_every=args.check_every,
        tol=tol,
        progress=not args.quiet,
        checkpoint_every=args.checkpoint_every,
        on_checkpoint=lambda step: ckpt.save(step, solver.state(), case.decomp, attrs=params),
    )
    if info["converged"] and rank0 and not args.quiet:
        print(f"converged: residual {info['residual']:.3e} < {tol:g}", flush=True)
    _report(case, args, rank0)
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
        with atomic_output(args.out, comm) as tmp:  # whole or not at all
            for name, local in fields.items():
                write_array(tmp, name, local, case.decomp)
            write_attrs(tmp, attrs, comm)
        if rank0:
            write_xdmf(args.out, list(fields), spacing=[1.0] * case.decomp.ndim)
            print(f"fields written to {args.out} (+ {args.out.with_suffix('.xmf').name})")
    solver.close()
    return 0


def _report(case: Any, args: argparse.Namespace, rank0: bool) -> None:
    import numpy as np

    from .ghia import GHIA, ghia_deviation

    if args.case == "taylor-green":
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
    except OSError as exc:
        if isinstance(exc, MissingDataError):
            raise
        raise from_os_error(exc, "reading the result", args.file) from None
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
    out = args.png or args.file.with_suffix(".png")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot written to {out}")
    return 0
