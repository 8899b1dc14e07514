"""Lattice Boltzmann throughput (MLUPS) against lbmpy and the memory roofline, same run.

Cases: D2Q9 float64 on ``size2d``^2 and D3Q19 float32 on ``size3d``^3, periodic (Taylor-Green
initial state), BGK. Ours is the full step on the decomposition: halo exchange overlapped with
the fused kernel. Peers, measured in the same run on the same ranks:

``lbmpy``
    pystencils' generated C kernel for the same lattice, collision, precision and layout, each
    rank sweeping a block of the same size at the same time (kernel only: no halo exchange, an
    advantage for the peer). pystencils is imported with CuPy hidden when no GPU is usable.
``roofline``
    the copy bandwidth measured with all ranks copying at once (bytes read + written, as STREAM
    copy), divided by the bytes a cell update must move: q populations read and written.
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

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench lbm``."""
    p.add_argument("--size2d", type=int, default=2048, help="D2Q9 float64 grid edge (2048)")
    p.add_argument("--size3d", type=int, default=192, help="D3Q19 float32 grid edge (192)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per repetition")
    p.add_argument("--reps", type=int, default=3, help="repetitions (best reported)")
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")
    p.add_argument("--no-lbmpy", action="store_true", help="skip the lbmpy peer")


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


def _lbmpy_sweep(lattice: Any, local_shape: tuple[int, ...], dtype: Any, omega: float) -> Any:
    """A callable running one lbmpy kernel sweep over a block like ours (or None)."""
    import numba

    os.environ.setdefault("OMP_NUM_THREADS", str(numba.get_num_threads()))
    from hpc.backend import gpu_unavailable_reason

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

    stencil = LBStencil(Stencil.D2Q9 if lattice.d == 2 else Stencil.D3Q19)
    tname = "double" if np.dtype(dtype) == np.float64 else "float"
    src, dst = ps.fields(
        f"src({stencil.Q}), dst({stencil.Q}): {tname}[{lattice.d}D]", layout="fzyx"
    )
    cfg = LBMConfig(stencil=stencil, method=Method.SRT, relaxation_rate=omega, compressible=True)
    opt = LBMOptimisation(symbolic_field=src, symbolic_temporary_field=dst)
    rule = create_lb_update_rule(lbm_config=cfg, lbm_optimisation=opt)
    kc = ps.CreateKernelConfig(default_dtype=tname)
    with contextlib.suppress(AttributeError):
        kc.cpu.openmp.enable = True
    kernel = ps.create_kernel(rule, config=kc).compile()
    shape = (lattice.q, *[n + 2 for n in local_shape])
    f = np.zeros(shape, dtype=dtype)
    f[...] = lattice.w.reshape((-1,) + (1,) * lattice.d)
    g = f.copy()
    views = [np.moveaxis(f, 0, -1), np.moveaxis(g, 0, -1)]

    def sweep(steps: int) -> None:
        a, b = views
        for _ in range(steps):
            kernel(src=a, dst=b)
            a, b = b, a

    sweep(1)
    return sweep


def _copy_bandwidth(comm: Any, nbytes: int = 1 << 27) -> float:
    """Aggregate copy bandwidth (GB/s, read + written) with every rank copying at once."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    seconds = _best(comm, lambda: np.copyto(dst, src), 5)
    return comm.Get_size() * 2 * nbytes / seconds / 1e9


def _case(args: argparse.Namespace, dim: int, n: int, dtype: Any, bw: float) -> dict[str, Any]:
    from hpc.domains.cfd import TaylorGreen

    comm = world()
    tg = TaylorGreen(n, re=100.0, dim=dim, dtype=dtype, collision="bgk", backend=args.backend)
    solver = tg.solver
    solver.step(2)  # compile and warm up
    cells = n**dim
    ours = _best(comm, lambda: solver.step(args.steps), args.reps)
    record: dict[str, Any] = {
        "case": f"{solver.lattice.name} {np.dtype(dtype).name}",
        "size": [n] * dim,
        "dims": list(tg.decomp.dims),
        "ours": {"seconds": ours / args.steps, "MLUPS": cells * args.steps / ours / 1e6},
        "peers": {},
        "ratio": {},
    }
    bytes_per_cell = 2 * solver.lattice.q * np.dtype(dtype).itemsize
    roof = bw * 1e9 / bytes_per_cell / 1e6
    record["limits"] = {
        "copy_GBps": bw,
        "bytes_per_cell": bytes_per_cell,
        "roofline_MLUPS": roof,
        "fraction_of_roofline": record["ours"]["MLUPS"] / roof,
    }
    if not args.no_lbmpy and not solver.backend.is_gpu:
        error = None
        try:
            sweep = _lbmpy_sweep(solver.lattice, tg.decomp.local_shape, dtype, solver.omega_plus)
        except Exception as exc:  # the peer is optional: report why it is missing
            sweep, error = None, f"{type(exc).__name__}: {exc}"
        errors = comm.allgather(error)
        if any(errors):
            record["peers"]["lbmpy"] = {"error": next(e for e in errors if e)}
        else:
            peer = _best(comm, lambda: sweep(args.steps), args.reps)
            record["peers"]["lbmpy"] = {
                "seconds": peer / args.steps,
                "MLUPS": cells * args.steps / peer / 1e6,
            }
            record["ratio"]["lbmpy"] = peer / ours
    solver.close()
    return record


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Both cases; the first (D2Q9 float64) is the headline."""
    comm = world()
    bw = _copy_bandwidth(comm)
    cases = [
        _case(args, 2, args.size2d, np.float64, bw),
        _case(args, 3, args.size3d, np.float32, bw),
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
