"""Lattice Boltzmann throughput (MLUPS) against lbmpy and the memory roofline, same run.

Cases: D2Q9 float64 on ``size2d``^2 and D3Q19 float32 on ``size3d``^3, periodic (Taylor-Green
initial state), for each collision of ``--collisions`` (default BGK; also TRT, MRT and the
Smagorinsky closure, ``bgk+les``, ``mrt+les``...). Ours is the full step on the decomposition:
halo exchange overlapped with the fused kernel. Peers, measured in the same run on the same
ranks:

``lbmpy``
    pystencils' generated C kernel for the same lattice, collision, precision and layout, SIMD
    and OpenMP (see :func:`lbmpy_kernel`), each rank sweeping a block of the same size at the
    same time (kernel only: no halo exchange, an advantage for the peer). pystencils is
    imported with CuPy hidden when no GPU is usable.
``roofline``
    the memory bandwidth (bytes read + written) measured with all ranks at once, each with its
    solver's threads, in turns with the timings; the best of STREAM copy and of an in-place
    update sweep (what an in-place AA step's traffic looks like), divided by the bytes a cell
    update must move: q populations read and written.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import world
from hpc.errors import UsageError

__all__ = ["add_arguments", "lbmpy_kernel", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench lbm``."""
    p.add_argument("--size2d", type=int, default=2048, help="D2Q9 float64 grid edge (2048)")
    p.add_argument("--size3d", type=int, default=192, help="D3Q19 float32 grid edge (192)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per repetition")
    p.add_argument("--reps", type=int, default=5, help="repetitions (best reported)")
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")
    p.add_argument("--no-lbmpy", action="store_true", help="skip the lbmpy peer")
    p.add_argument(
        "--collisions",
        default="bgk",
        help="comma-separated operators, each timed on both cases: bgk, trt, mrt, and X+les "
        "(X with the Smagorinsky closure), e.g. bgk,mrt,bgk+les (default bgk)",
    )
    p.add_argument(
        "--smagorinsky", type=float, default=0.12, help="C_s of the +les operators (0.12)"
    )


@contextlib.contextmanager
def _cupy_hidden(hide: bool):
    """pystencils crashes importing a CuPy that has no usable GPU: make it look absent."""
    saved = sys.modules.get("cupy")
    if hide:
        sys.modules["cupy"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if hide:
            if saved is None:
                sys.modules.pop("cupy", None)
            else:
                sys.modules["cupy"] = saved


def _best(comm: Any, fn: Any, reps: int) -> float:
    best = math.inf
    for _ in range(reps):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        local = time.perf_counter() - t0
        best = min(best, comm.allreduce(local, op=MPI.MAX))
    return best


def _vector_targets(ps: Any) -> list[tuple[str, Any]]:
    """pystencils' x86 SIMD targets this CPU supports, widest first (LLVM's host features)."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    names = [
        ("avx512", "avx512f", "X86_AVX512"),
        ("avx", "avx2", "X86_AVX"),
        ("sse", "sse4.1", "X86_SSE"),
    ]
    return [
        (label, getattr(ps.Target, target))
        for label, flag, target in names
        if features.get(flag, False) and hasattr(ps.Target, target)
    ]


def lbmpy_kernel(
    lattice: Any,
    dtype: Any,
    omega: float,
    collision: str = "bgk",
    smagorinsky: float = 0.0,
    rates: Any = None,
) -> tuple[Any, list[int], Any, str]:
    """lbmpy's stream-and-collide kernel for our lattice, in its fastest CPU configuration.

    ``collision``: ``"bgk"`` (lbmpy's SRT), ``"trt"`` (``rates = [omega_minus]``) or ``"mrt"``
    (lbmpy's orthogonal MRT, unweighted Gram-Schmidt as ours, ``rates`` its further rates);
    ``smagorinsky > 0`` adds lbmpy's Smagorinsky subgrid model with that constant.

    Returns ``(sweep, order, offset, config)``: ``sweep(src, dst)`` updates the interior of
    ``(q, *ghost_shape)`` arrays holding populations in lbmpy's order and storage, where lbmpy
    population ``k`` is our population ``order[k]`` minus ``offset[k]`` (lbmpy stores deviations
    from the lattice weights by default: "zero-centred"); ``config`` names the code pystencils
    generated. pystencils wants
    its first spatial axis contiguous (layout ``fzyx``), so it sees our axes reversed: the
    lattice is symmetric, the work identical. The kernel is SIMD-vectorised (AVX-512, AVX or SSE,
    the widest the CPU has) and OpenMP-parallel, as a user tuning lbmpy would build it.
    """
    import numba

    os.environ.setdefault("OMP_NUM_THREADS", str(numba.get_num_threads()))
    from hpc.backend import gpu_unavailable_reason

    from .fpenv import kept_fp_environment

    with _cupy_hidden(gpu_unavailable_reason() is not None):
        import pystencils as ps
        from lbmpy import (
            LBMConfig,
            LBMOptimisation,
            LBStencil,
            Method,
            Stencil,
            create_lb_update_rule,
        )
        from lbmpy.enums import SubgridScaleModel

    d = lattice.d
    stencil = LBStencil(Stencil.D2Q9 if d == 2 else Stencil.D3Q19)
    ours = [tuple(int(v) for v in row) for row in lattice.c.tolist()]
    order = [ours.index(tuple(reversed(tuple(int(v) for v in c)))) for c in stencil]
    tname = "double" if np.dtype(dtype) == np.float64 else "float"
    src, dst = ps.fields(f"src({stencil.Q}), dst({stencil.Q}): {tname}[{d}D]", layout="fzyx")
    method = {"bgk": Method.SRT, "trt": Method.TRT, "mrt": Method.MRT}[collision]
    extra: dict[str, Any] = {}
    if collision == "bgk":
        extra["relaxation_rate"] = omega
    else:
        extra["relaxation_rates"] = [omega, *(rates or [])]
    if collision == "mrt":
        extra["weighted"] = False
    if smagorinsky > 0:
        extra["subgrid_scale_model"] = (SubgridScaleModel.SMAGORINSKY, smagorinsky)
    cfg = LBMConfig(
        stencil=stencil,
        method=method,
        compressible=True,
        continuous_equilibrium=False,  # the polynomial equilibrium, as ours
        **extra,
    )
    opt = LBMOptimisation(symbolic_field=src, symbolic_temporary_field=dst)
    rule = create_lb_update_rule(lbm_config=cfg, lbm_optimisation=opt)
    kernel, config, errors = None, "", []
    for label, target in [*_vector_targets(ps), ("scalar", None)]:
        try:
            kc = ps.CreateKernelConfig(
                default_dtype=tname, **({"target": target} if target else {})
            )
            kc.cpu.openmp.enable = True
            if target is not None:
                kc.cpu.vectorize.enable = True
                kc.cpu.vectorize.assume_inner_stride_one = True
            with kept_fp_environment():  # its -ffast-math library sets flush-to-zero
                kernel = ps.create_kernel(rule, config=kc).compile()
            config = f"{label}+openmp"
            break
        except Exception as exc:  # try the next narrower target
            errors.append(f"{label}: {type(exc).__name__}: {exc}")
    if kernel is None:
        raise RuntimeError("lbmpy kernel: " + "; ".join(errors))
    axes = (*reversed(range(1, d + 1)), 0)
    offset = lattice.w[order] if cfg.zero_centered else np.zeros(lattice.q)

    def sweep(a: np.ndarray, b: np.ndarray) -> None:
        kernel(src=a.transpose(axes), dst=b.transpose(axes))

    return sweep, order, offset, config


def _lbmpy_sweep(
    lattice: Any, local_shape: tuple[int, ...], dtype: Any, omega: float, **kw: Any
) -> Any:
    """``(steps(n), config)``: n lbmpy sweeps over a block like ours (ping-pong buffers)."""
    sweep, _, _, config = lbmpy_kernel(lattice, dtype, omega, **kw)
    shape = (lattice.q, *[n + 2 for n in local_shape])
    f = np.zeros(shape, dtype=dtype)
    f[...] = lattice.w.reshape((-1,) + (1,) * lattice.d)
    g = f.copy()

    def steps(n: int) -> None:
        a, b = f, g
        for _ in range(n):
            sweep(a, b)
            a, b = b, a

    steps(1)
    return steps, config


def _stream_kernels() -> tuple[Any, Any]:
    from numba import njit, prange

    @njit(parallel=True, nogil=True)
    def copy(dst: np.ndarray, src: np.ndarray) -> None:
        for i in prange(src.size):
            dst[i] = src[i]

    @njit(parallel=True, nogil=True)
    def update(a: np.ndarray) -> None:  # read and write the same lines: no write-allocate
        for i in prange(a.size):
            a[i] = a[i] * 0.5 + 0.25

    return copy, update


def _bandwidths(comm: Any, nbytes: int = 1 << 28) -> dict[str, float]:
    """Aggregate memory bandwidth (GB/s, bytes read + written) with every rank at once.

    ``copy``: STREAM copy, the faster of a numba loop with the solver's threads and
    ``np.copyto``. ``update``: an in-place read-modify-write sweep; a two-buffer kernel pays a
    write-allocate read that a copy's count leaves out, an in-place one does not, so an in-place
    scheme is held to this limit too (whichever is higher sets the roofline).
    """
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    copy, update = _stream_kernels()
    copy(dst, src)
    update(dst)
    np.copyto(dst, src)
    scale = comm.Get_size() * 2 * nbytes / 1e9
    copy_s = min(
        _best(comm, lambda: copy(dst, src), 3), _best(comm, lambda: np.copyto(dst, src), 3)
    )
    return {"copy": scale / copy_s, "update": scale / _best(comm, lambda: update(dst), 3)}


def _peer_options(solver: Any, les: float) -> dict[str, Any]:
    """lbmpy's settings for the operator of ``solver``."""
    kw: dict[str, Any] = {"collision": solver.collision, "smagorinsky": les}
    if solver.collision == "trt":
        kw["rates"] = [solver.omega_minus]
    elif solver.collision == "mrt":
        r = solver.rates
        kw["rates"] = [r["bulk"], r["q"], r["eps"]]  # lbmpy: bulk, then higher orders
    return kw


def _case(
    args: argparse.Namespace, dim: int, n: int, dtype: Any, collision: str = "bgk"
) -> dict[str, Any]:
    from hpc.domains.cfd import TaylorGreen

    comm = world()
    base, _, les = collision.partition("+")
    cs = args.smagorinsky if les == "les" else 0.0
    tg = TaylorGreen(
        n, re=100.0, dim=dim, dtype=dtype, collision=base, backend=args.backend, smagorinsky=cs
    )
    solver = tg.solver
    solver.step(2)  # compile and warm up
    cells = n**dim
    record: dict[str, Any] = {
        # the default collision keeps the names earlier records used; the others say theirs
        "case": f"{solver.lattice.name} {np.dtype(dtype).name}"
        + ("" if collision == "bgk" else f" {collision.upper()}"),
        "collision": collision,
        "size": [n] * dim,
        "dims": list(tg.decomp.dims),
        "peers": {},
        "ratio": {},
    }
    runs = {"ours": lambda: solver.step(args.steps), "copy": lambda: None}
    if not args.no_lbmpy and not solver.backend.is_gpu:
        error = None
        try:
            sweep, config = _lbmpy_sweep(
                solver.lattice,
                tg.decomp.local_shape,
                dtype,
                solver.omega_plus,
                **_peer_options(solver, cs),
            )
        except Exception as exc:  # the peer is optional: report why it is missing
            sweep, config, error = None, "", f"{type(exc).__name__}: {exc}"
        errors = comm.allgather(error)
        if any(errors):
            record["peers"]["lbmpy"] = {"error": next(e for e in errors if e)}
        else:
            runs["lbmpy"] = lambda: sweep(args.steps)
    # Shared machines drift: ours, the peer and the copy bandwidth are timed in turns, each
    # repetition once, and the best of each counts (the copy's best is the stricter roofline).
    best = {name: math.inf for name in runs}
    samples: list[dict[str, float]] = []
    for _ in range(args.reps):
        for name, fn in runs.items():
            if name == "copy":
                samples.append(_bandwidths(comm))
            else:
                best[name] = min(best[name], _best(comm, fn, 1))
    solver.close()
    ours = best["ours"]
    record["ours"] = {"seconds": ours / args.steps, "MLUPS": cells * args.steps / ours / 1e6}
    if "lbmpy" in runs:
        peer = best["lbmpy"]
        record["peers"]["lbmpy"] = {
            "seconds": peer / args.steps,
            "MLUPS": cells * args.steps / peer / 1e6,
            "config": config,
        }
        record["ratio"]["lbmpy"] = peer / ours
    copy_bw = max(b["copy"] for b in samples)
    update_bw = max(b["update"] for b in samples)
    bw = max(copy_bw, update_bw)
    bytes_per_cell = 2 * solver.lattice.q * np.dtype(dtype).itemsize
    roof = bw * 1e9 / bytes_per_cell / 1e6
    record["limits"] = {
        "copy_GBps": copy_bw,
        "update_GBps": update_bw,
        "bandwidth_GBps": bw,
        "bandwidth_samples": samples,
        "bytes_per_cell": bytes_per_cell,
        "roofline_MLUPS": roof,
        "fraction_of_roofline": record["ours"]["MLUPS"] / roof,
    }
    return record


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Both cases per collision; the first (D2Q9 float64) is the headline."""
    comm = world()
    known = ("bgk", "trt", "mrt")
    names = [c.strip().lower() for c in args.collisions.split(",") if c.strip()]
    for c in names:
        base, plus, les = c.partition("+")
        if base not in known or (plus and les != "les"):
            raise UsageError(
                f"--collisions {args.collisions}: {c!r} is not one of bgk, trt, mrt, "
                "optionally with +les"
            )
    cases = []
    for c in names or ["bgk"]:
        cases += [
            _case(args, 2, args.size2d, np.float64, c),
            _case(args, 3, args.size3d, np.float32, c),
        ]
    from hpc.backend import get_backend

    head = cases[0]
    return {
        "bench": "lbm",
        "backend": get_backend(args.backend).name,
        "ranks": comm.Get_size(),
        "size": head["size"],
        "ours": head["ours"],
        "peers": head["peers"],
        "ratio": head["ratio"],
        "limits": head["limits"],
        "cases": cases,
    }
