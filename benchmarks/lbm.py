"""Lattice Boltzmann throughput (MLUPS) against lbmpy and the memory roofline, same run.

Cases: D2Q9 float64 on ``size2d``^2 and D3Q19 (``--lattice3d D3Q27``: D3Q27) float32 on
``size3d``^3, periodic (Taylor-Green initial state), for each collision of ``--collisions``
(default BGK; also TRT, MRT and the Smagorinsky closure, ``bgk+les``, ``mrt+les``...). Ours
is the full step on the decomposition: halo exchange overlapped with the fused kernel. Peers,
measured in the same run on the same ranks:

``lbmpy``
    pystencils' generated C kernel for the same lattice, collision, precision and layout, SIMD
    and OpenMP (see :func:`lbmpy_kernel`), each rank sweeping a block of the same size at the
    same time (kernel only: no halo exchange, an advantage for the peer). pystencils is
    imported with CuPy hidden when no GPU is usable.
``roofline``
    the memory bandwidth (bytes read + written) measured with all ranks at once, each with its
    solver's threads, in turns with the timings; the best of STREAM copy and of an in-place
    update sweep (what an in-place AA step's traffic looks like), divided by the bytes a cell
    update must move: q populations read and written. On the GPU backend (lbmpy does not
    run there) the bandwidth is the device's, a measured device-to-device copy with every
    rank at once (:mod:`.device_peak`), and ``limits`` gives our fraction of that roofline.

``--sweep`` adds the workload space: case (``--sweep-cases``: D2Q9 float64, D3Q19 float32) x
rank count (``--sweep-ranks``, a sub-communicator of the ranks launched; the others sleep, so
a rank keeps the cores and threads the launch gave it) x block size per rank, for each
collision of ``--collisions``. The block sizes (bytes of our populations per rank,
``--sweep-bytes``) step geometrically from the cache private to a core to the largest block
whose populations, ours and lbmpy's two buffers, fit in half of the memory on that rank count,
both read from the machine; a point that would not fit the memory available now (other jobs
hold some) runs the largest grid that does (``shrunk`` says from what and why), or below a
quarter of its cells is skipped and says why. Each point fits its steps to
``--sweep-point-seconds`` and times ours, lbmpy (started from our populations:
``same_state``) and the bandwidth in turns. A table line per point on stderr (ours, lbmpy,
their ratio, the fraction of the roofline), every point under ``sweep``, and under ``worst``
the point furthest below its targets (``margin``: the lower of ratio / 1.2 and, at
memory-sized blocks, roofline fraction / 0.85): 1.2x lbmpy everywhere and 85% of the roofline
where the blocks are memory-sized (all ranks' populations at least 4x the last-level cache;
smaller blocks live partly in cache, where the memory roofline bounds nothing).
``affinity`` records the cores of both sides (the peer runs in our ranks, on our threads).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import math
import os
import sys
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import world
from hpc.errors import UsageError

from .timing import affinity_record, cpus_of, idle_barrier, machine_record, parse_floats

__all__ = ["add_arguments", "lbmpy_kernel", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench lbm``."""
    p.add_argument("--size2d", type=int, default=2048, help="D2Q9 float64 grid edge (2048)")
    p.add_argument("--size3d", type=int, default=192, help="3-D float32 grid edge (192)")
    p.add_argument(
        "--lattice3d", default="D3Q19", choices=("D3Q19", "D3Q27"), help="3-D lattice (D3Q19)"
    )
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
    p.add_argument("--sweep", action="store_true", help="also the case x ranks x block grid")
    p.add_argument(
        "--sweep-bytes",
        default="auto",
        help="our populations per rank of --sweep: a comma list of bytes, 'cache' and 'max' "
        "(cache private to a core; largest fitting half of memory), or auto: --sweep-blocks "
        "geometric steps from cache to max",
    )
    p.add_argument(
        "--sweep-blocks", type=int, default=5, help="block sizes of --sweep-bytes auto (5)"
    )
    p.add_argument("--sweep-cases", default="d2q9,d3q19",
                   help="d2q9 (float64), d3q19, d3q27 (float32); default d2q9,d3q19")
    p.add_argument("--sweep-ranks", default="1,2", help="rank counts of --sweep (1,2)")
    p.add_argument(
        "--sweep-point-seconds",
        type=float,
        default=1.0,
        help="timed seconds per contender and repetition a point (steps fitted to it)",
    )
    p.add_argument("--sweep-reps", type=int, default=5, help="repetitions a point, best counts (5)")
    p.add_argument(
        "--sweep-kernels",
        action="store_true",
        help="also time our kernels alone a point (no halo exchange, as lbmpy is timed): "
        "``ours_kernels``, and how much of our step the exchange and Python take",
    )
    p.add_argument(
        "--sweep-memory-sized",
        default="auto",
        help="bytes of all ranks' populations from which a block is memory-sized and the "
        "roofline target applies (auto: 4x the last-level cache)",
    )
    p.add_argument(
        "--sweep-budget", type=float, default=1500.0, help="seconds; later points skipped (1500)"
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
    stencil = LBStencil(getattr(Stencil, lattice.name))  # D2Q9, D3Q19 or D3Q27, as ours
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
    steps = _ping_pong(sweep, f)
    steps(1)
    return steps, config


def _ping_pong(sweep: Any, f: np.ndarray) -> Any:
    """``steps(n)``: ``n`` sweeps from ``f`` into a second buffer and back, alternating."""
    g = f.copy()

    def steps(n: int) -> None:
        a, b = f, g
        for _ in range(n):
            sweep(a, b)
            a, b = b, a

    return steps


@functools.cache  # compiled once a process: a sweep measures the bandwidth at every point
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


def _device_bandwidth(comm: Any, xp: Any) -> dict[str, float]:
    """Collective. The device copy rate (GB/s, bytes read + written) with every rank at once,
    summed over the ranks (:func:`.device_peak.copy_bandwidth`)."""
    from .device_peak import copy_bandwidth

    return {"copy": copy_bandwidth(xp, reps=3, comm=comm) / 1e9}


def _device_limits(
    mlups: float, samples: list[dict[str, float]], q: int, dtype: Any
) -> dict[str, Any]:
    """The roofline of a GPU step: the best measured device copy over the bytes a cell update
    must move (q populations read and written), and our fraction of it."""
    bw = max(b["copy"] for b in samples)
    bytes_per_cell = 2 * q * np.dtype(dtype).itemsize
    roof = bw * 1e9 / bytes_per_cell / 1e6
    return {
        "device_copy_GBps": bw,
        "bandwidth_GBps": bw,
        "bandwidth_samples": samples,
        "bytes_per_cell": bytes_per_cell,
        "roofline_MLUPS": roof,
        "fraction_of_roofline": mlups / roof,
    }


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
    lattice = getattr(args, "lattice3d", "D3Q19") if dim == 3 else None
    tg = TaylorGreen(
        n, re=100.0, dim=dim, dtype=dtype, collision=base, backend=args.backend, smagorinsky=cs,
        lattice=lattice,
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
    gpu = solver.backend.is_gpu
    for _ in range(args.reps):
        for name, fn in runs.items():
            if name == "copy":
                samples.append(_device_bandwidth(comm, solver.backend.xp) if gpu
                               else _bandwidths(comm))  # fmt: skip
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
    if gpu:
        record["limits"] = _device_limits(record["ours"]["MLUPS"], samples, solver.lattice.q, dtype)
        return record
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


# -- the sweep ----------------------------------------------------------------------------

# lattice and precision of each case of --sweep-cases
_SWEEP_CASES = {"d2q9": ("D2Q9", np.float64), "d3q19": ("D3Q19", np.float32),
                "d3q27": ("D3Q27", np.float32)}
_TARGETS = {"lbmpy": 1.2, "roofline": 0.85}  # x lbmpy everywhere; of the roofline, memory-sized
_SWEEP_NU = 0.1  # one viscosity at every size: lbmpy's kernel (omega is a constant) is built once
_SLAB_BYTES = 64 << 20  # float64 temporaries of one initialisation slab
_RESERVE = 3 << 29  # per rank, beside the populations: bandwidth arrays, slabs, the interpreter


def _cache_sizes() -> tuple[int, int]:
    """``(private, last)``: bytes of the largest data cache private to one core and of the
    last-level cache, from sysfs (fallbacks 1 MiB and 32 MiB)."""
    private, last = 0, 0
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        entries = []
    for entry in entries:
        path = os.path.join(root, entry)
        try:
            with open(os.path.join(path, "type")) as fh:
                kind = fh.read().strip()
            with open(os.path.join(path, "size")) as fh:
                text = fh.read().strip()
            with open(os.path.join(path, "shared_cpu_list")) as fh:
                shared = fh.read().strip()
        except OSError:
            continue
        if kind == "Instruction" or not text:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
        size = int(text.rstrip("KMG")) * scale
        last = max(last, size)
        if "," not in shared and "-" not in shared:  # one core
            private = max(private, size)
    return private or 1 << 20, last or 32 << 20


def _memory() -> tuple[int, int]:
    """``(total, available)`` bytes of this node's memory (available: ``MemAvailable`` now)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    available = total
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    return total, available


def _release_memory() -> None:
    """Local. Free the last point's arrays and hand the heap back to the OS: the ``hpc``
    command keeps freed memory in the process for reuse (:mod:`hpc.memory`), and the next
    point may allocate on another rank, or be sized by the memory available."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError, TypeError):
        import ctypes
        import ctypes.util

        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)


def _cell_bytes(q: int, dtype: Any) -> int:
    """Bytes a point holds per cell of a rank's block: our populations (one array, AA
    streaming), lbmpy's two, and the flags with their temporaries."""
    return 3 * q * np.dtype(dtype).itemsize + 3


def _block_sizes(args: argparse.Namespace, q: int, dtype: Any, nranks: int) -> list[float]:
    """Bytes of our populations per rank for each point of one case and rank count."""
    private, _ = _cache_sizes()
    total, _ = _memory()
    per_cell = q * np.dtype(dtype).itemsize
    largest = total // 2 // nranks // _cell_bytes(q, dtype) * per_cell
    smallest = min(private, largest)
    if args.sweep_bytes.strip() == "auto":
        n = max(1, args.sweep_blocks)
        if n == 1:
            return [float(largest)]
        step = (largest / smallest) ** (1.0 / (n - 1))
        return [float(smallest * step**i) for i in range(n)]
    named = {"cache": float(smallest), "max": float(largest)}
    items = [v.strip() for v in args.sweep_bytes.split(",") if v.strip()]
    return [named[v] if v in named else float(v) for v in items]


def _fit_memory(
    dim: int, q: int, dtype: Any, shape: tuple[int, ...], nranks: int
) -> tuple[tuple[int, ...], str | None, str | None]:
    """``(shape, shrunk, skipped)``: the grid of a point within the memory available now
    (other jobs hold some on a shared node). A grid that does not fit is shrunk to the
    largest that does (``shrunk`` says why), or skipped below a quarter of its cells."""
    _, available = _memory()
    per_cell = _cell_bytes(q, dtype)
    need = per_cell * math.prod(shape) + nranks * _RESERVE
    if need <= available:
        return shape, None, None
    why = f"needs {need / 1e9:.3g} GB, {available / 1e9:.3g} GB available"
    cells = (0.9 * available - nranks * _RESERVE) / per_cell
    if cells < math.prod(shape) / 4:
        return shape, None, why
    return _grid_shape(dim, cells / nranks, nranks), why, None


def _grid_shape(dim: int, cells_per_rank: float, nranks: int) -> tuple[int, ...]:
    """A square or cubic global grid of about ``nranks`` blocks of ``cells_per_rank``."""
    edge = max(nranks, 4, round((cells_per_rank * nranks) ** (1.0 / dim)))
    return (edge,) * dim


def _taylor_green(shape: tuple[int, ...], u0: float) -> Any:
    """``fields(coords) -> (rho, u)``: the Taylor-Green vortex of :class:`TaylorGreen` on the
    global grid ``shape``, at the global cell indices ``coords`` (an open mesh)."""

    def fields(coords: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        x = [(c + 0.5) * (2 * np.pi / n) for c, n in zip(coords, shape, strict=True)]
        if len(shape) == 2:
            u = [u0 * np.sin(x[0]) * np.cos(x[1]), -u0 * np.cos(x[0]) * np.sin(x[1])]
            p = -0.25 * u0**2 * (np.cos(2 * x[0]) + np.cos(2 * x[1]))
        else:
            c2 = np.cos(x[2])
            u = [
                u0 * np.sin(x[0]) * np.cos(x[1]) * c2,
                -u0 * np.cos(x[0]) * np.sin(x[1]) * c2,
                0.0 * x[0] * x[1] * x[2],
            ]
            p = u0**2 / 16 * (np.cos(2 * x[0]) + np.cos(2 * x[1])) * (np.cos(2 * x[2]) + 2)
        return 1.0 + 3.0 * p, u

    return fields


def _slab_solver_class() -> Any:
    from hpc.domains.cfd import LBMSolver

    class SlabSolver(LBMSolver):
        """:class:`LBMSolver` whose initial state is set a slab of the block at a time: the
        whole-block equilibrium holds q float64 temporaries per cell, several times the
        populations, which would not fit beside the sweep's largest blocks."""

        def __init__(self, *a: Any, fields: Any = None, **kw: Any) -> None:
            self._fields = fields
            super().__init__(*a, **kw)

        def initialize(self, rho: Any = 1.0, u: Any = None) -> None:
            from hpc.domains.cfd.solver import equilibrium

            if self._fields is None:
                super().initialize(rho, u)
                return
            d = self.decomp
            coords = self.coordinates()
            n0 = d.local_shape[0]
            row = math.prod(d.local_shape[1:]) * self.lattice.q * 16
            rows = max(1, _SLAB_BYTES // max(row, 1))
            inner = d.interior_slices
            self.f[...] = 0
            for i in range(0, n0, rows):
                j = min(n0, i + rows)
                r, v = self._fields([coords[0][i:j], *coords[1:]])
                shape = (j - i, *d.local_shape[1:])
                r = np.broadcast_to(r, shape)
                v = [np.broadcast_to(va, shape) for va in v]
                start = inner[0].start
                at = (slice(None), slice(start + i, start + j), *inner[1:])
                self.f[at] = equilibrium(self.lattice, r, v).astype(self.dtype)
            if self.g is not None:
                self.g[...] = self.f

    return SlabSolver


def _sweep_point(
    args: argparse.Namespace,
    comm: Any,
    lattice_name: str,
    dtype: Any,
    shape: tuple[int, ...],
    collision: str,
    memory_sized: float,
    kernels: dict[Any, Any],
) -> dict[str, Any]:
    """Collective over ``comm``. Ours, lbmpy and the roofline on one grid, in turns."""
    import numba
    from hpc.domains import cfd
    from hpc.domains.cfd.units import LatticeUnits

    from hpc.decomposition import CartDecomposition

    base, _, les = collision.partition("+")
    cs = args.smagorinsky if les == "les" else 0.0
    lattice = getattr(cfd, lattice_name)
    units = LatticeUnits.from_viscosity(_SWEEP_NU, shape[0], 0.05)
    decomp = CartDecomposition(shape, periodic=True, halo=1, comm=comm, backend=args.backend)
    solver = _slab_solver_class()(
        decomp,
        lattice,
        units.tau,
        collision=base,
        dtype=dtype,
        smagorinsky=cs,
        fields=_taylor_green(shape, units.u),
    )
    solver.step(2)  # compile and warm up (even counts: AA steps in pairs, one buffer)
    steps = _fit_steps(comm, solver.step, args.sweep_point_seconds)
    cells = math.prod(shape)
    runs: dict[str, Any] = {"ours": lambda: solver.step(steps)}
    if getattr(args, "sweep_kernels", False):
        kernels_only = _kernels_only(solver)
        runs["ours_kernels"] = lambda: kernels_only(steps)
    peers: dict[str, Any] = {}
    if not args.no_lbmpy and not solver.backend.is_gpu:
        key = (lattice.name, np.dtype(dtype).name, collision)
        error = None
        try:
            if key not in kernels:
                kernels[key] = lbmpy_kernel(
                    lattice, dtype, solver.omega_plus, **_peer_options(solver, cs)
                )
            kernel, order, offset, config = kernels[key]
            sweep = _buffers_sweep(kernel, solver, order, offset)
        except Exception as exc:  # the peer is optional: report why it is missing
            sweep, config, error = None, "", f"{type(exc).__name__}: {exc}"
        errors = comm.allgather(error)
        if any(errors):
            peers["lbmpy"] = {"error": next(e for e in errors if e)}
        else:
            runs["lbmpy"] = lambda: sweep(steps)
    best = {name: math.inf for name in runs}
    samples = []
    for _ in range(max(1, args.sweep_reps)):
        for name, fn in runs.items():
            best[name] = min(best[name], _best(comm, fn, 1))
        samples.append(_bandwidths(comm))
    solver.close()
    ours = best["ours"]
    fig = {"seconds": ours / steps, "MLUPS": cells * steps / ours / 1e6}
    ratio: dict[str, float] = {}
    if "lbmpy" in runs:
        peer = best["lbmpy"]
        peers["lbmpy"] = {
            "seconds": peer / steps,
            "MLUPS": cells * steps / peer / 1e6,
            "config": config,
        }
        ratio["lbmpy"] = peer / ours
    kernels_fig = None
    if "ours_kernels" in runs:
        alone = best["ours_kernels"]
        kernels_fig = {
            "seconds": alone / steps,
            "MLUPS": cells * steps / alone / 1e6,
            "step_share": alone / ours,  # of our step's time; the rest: exchange and Python
        }
    bw = max(max(b["copy"], b["update"]) for b in samples)
    bytes_per_cell = 2 * lattice.q * np.dtype(dtype).itemsize
    roof = bw * 1e9 / bytes_per_cell / 1e6
    peers["roofline"] = {"MLUPS": roof, "bandwidth_GBps": bw, "bytes_per_cell": bytes_per_cell}
    ratio["roofline"] = fig["MLUPS"] / roof
    populations = cells * lattice.q * np.dtype(dtype).itemsize
    point: dict[str, Any] = {
        "case": f"{lattice.name} {np.dtype(dtype).name}",
        "collision": collision,
        "ranks": comm.Get_size(),
        "size": list(shape),
        "dims": list(decomp.dims),
        "block": list(decomp.local_shape),
        "block_bytes": populations // comm.Get_size(),
        "memory_sized": populations >= memory_sized,
        "same_state": "lbmpy" in runs,  # lbmpy started from our populations
        "steps": steps,
        "reps": max(1, args.sweep_reps),
        "ours": fig,
        **({"ours_kernels": kernels_fig} if kernels_fig else {}),
        "peers": peers,
        "ratio": ratio,
        "bandwidth_samples": samples,
        "threads": comm.allgather(numba.get_num_threads()),
        "cpus": comm.allgather(cpus_of()),
    }
    point.update(_margin(point))
    return point


def _kernels_only(solver: Any) -> Any:
    """``steps(n)``: the kernel calls of ``n`` steps of ``solver`` without its halo exchanges
    (the ghosts keep earlier values: the cells' work is the same), to set our kernels beside
    lbmpy's, which is timed the same way."""
    calls = solver._kernel_calls()

    def one(plan: str, out: Any) -> None:
        inner, ring = calls[plan]
        solver._launch(inner, out)
        solver._launch(ring, out)

    def steps(n: int) -> None:
        if solver.streaming == "aa":
            for _ in range(n // 2):
                one("aa-stream", solver.f)
                one("aa-local", solver.f)
            return
        for _ in range(n):
            one("pull", solver.g)
            solver.f, solver.g = solver.g, solver.f

    return steps


def _fit_steps(comm: Any, step: Any, seconds: float) -> int:
    """Collective. An even step count that runs about ``seconds`` (the slowest rank's time),
    from runs doubling from 2 steps until one takes a quarter of it: a single short run is
    at the mercy of one preemption on a shared machine."""
    n = 2
    while True:
        t = _best(comm, functools.partial(step, n), 1)
        if t >= seconds / 4 or n >= 1 << 22:
            return max(2, 2 * round(seconds * n / max(t, 1e-9) / 2))
        n *= 2


def _buffers_sweep(kernel: Any, solver: Any, order: Any, offset: Any) -> Any:
    """``steps(n)``: n sweeps of an lbmpy ``kernel`` over ping-pong buffers of the block of
    ``solver``, starting from its current state in lbmpy's order and storage (``order`` and
    ``offset`` of :func:`lbmpy_kernel`), each block wrapped periodically into its ghosts."""
    f = np.empty(solver.f.shape, dtype=solver.f.dtype)
    inner = solver.f[(slice(None), *solver.decomp.interior_slices)]
    for k, i in enumerate(order):
        f[k] = np.pad(inner[i], 1, mode="wrap") - f.dtype.type(offset[k])
    steps = _ping_pong(kernel, f)
    steps(2)
    return steps


def _margin(point: dict[str, Any]) -> dict[str, Any]:
    """How far the point is above (> 1) or below (< 1) its tightest target: the ratio to lbmpy
    over 1.2 everywhere, the fraction of the roofline over 0.85 at memory-sized blocks."""
    margins = {}
    if "lbmpy" in point["ratio"]:
        margins["lbmpy"] = point["ratio"]["lbmpy"] / _TARGETS["lbmpy"]
    if point["memory_sized"]:
        margins["roofline"] = point["ratio"]["roofline"] / _TARGETS["roofline"]
    if not margins:
        return {}
    binding = min(margins, key=margins.__getitem__)
    return {"margin": margins[binding], "limited_by": binding}


def _print_point(comm: Any, point: dict[str, Any]) -> None:
    """Rank 0: one table line on stderr (stdout keeps the JSON record last)."""
    if comm.Get_rank() != 0:
        return
    peer = point["peers"].get("lbmpy", {}).get("MLUPS", math.nan)
    alone = point.get("ours_kernels")
    kernels = f" (kernels alone {alone['MLUPS']:.4g})" if alone else ""
    label = (
        f"lbm {point['case']} {point['collision']} {point['ranks']}r "
        f"{'x'.join(map(str, point['block']))} {point['block_bytes'] / 1e6:.4g} MB"
    )
    print(
        f"{label:<48} ours {point['ours']['MLUPS']:8.4g} MLUPS{kernels} lbmpy {peer:8.4g} MLUPS"
        f" ratio {point['ratio'].get('lbmpy', math.nan):6.3f}"
        f" roofline {point['ratio']['roofline']:6.3f}"
        + (" (memory-sized)" if point["memory_sized"] else ""),
        file=sys.stderr,
        flush=True,
    )


def _sweep(args: argparse.Namespace, collisions: list[str]) -> dict[str, Any]:
    """Collective. Every point of case x ranks x block x collision within ``--sweep-budget``;
    ranks outside a point's sub-communicator sleep in a barrier."""
    from hpc.backend import get_backend

    comm = world()
    rank = comm.Get_rank()
    get_backend(args.backend)  # collective on first use: on every rank before a one-rank point
    start = time.perf_counter()
    counts = [int(r) for r in parse_floats(args.sweep_ranks)]
    names = [c.strip().lower() for c in args.sweep_cases.split(",") if c.strip()]
    for name in names:
        if name not in _SWEEP_CASES:
            raise UsageError(f"--sweep-cases: {name!r} is not one of {', '.join(_SWEEP_CASES)}")
    _, llc = _cache_sizes()
    auto = args.sweep_memory_sized.strip() == "auto"
    memory_sized = 4.0 * llc if auto else float(args.sweep_memory_sized)
    kernels: dict[Any, Any] = {}
    points: list[dict[str, Any]] = []
    for name in names:
        lattice_name, dtype = _SWEEP_CASES[name]
        dim, q = int(lattice_name[1]), int(lattice_name[3:])
        per_cell = q * np.dtype(dtype).itemsize
        for nranks in counts:
            for nbytes in _block_sizes(args, q, dtype, nranks):
                shape = _grid_shape(dim, nbytes / per_cell, nranks)
                for collision in collisions:
                    base = {
                        "case": f"{lattice_name} {np.dtype(dtype).name}",
                        "collision": collision,
                        "ranks": nranks,
                        "size": list(shape),
                        "block_bytes": math.prod(shape) * per_cell // nranks,
                    }
                    skip, shrunk = None, None
                    elapsed = comm.bcast(time.perf_counter() - start, root=0)
                    if elapsed > args.sweep_budget:
                        skip = f"sweep budget of {args.sweep_budget:g} s spent"
                    elif nranks > comm.Get_size():
                        skip = f"{nranks} ranks asked, {comm.Get_size()} run"
                    else:
                        shape, shrunk, skip = comm.bcast(
                            _fit_memory(dim, q, dtype, shape, nranks), root=0
                        )
                    if skip:
                        points.append({**base, "skipped": skip})
                        continue
                    sub = comm.Split(0 if rank < nranks else MPI.UNDEFINED, rank)
                    point = None
                    if sub != MPI.COMM_NULL:
                        point = _sweep_point(
                            args, sub, lattice_name, dtype, shape, collision, memory_sized,
                            kernels,
                        )
                        sub.Free()
                    _release_memory()
                    idle_barrier(comm)
                    point = comm.bcast(point, root=0)
                    if shrunk:
                        point["shrunk"] = {"asked_block_bytes": base["block_bytes"], "why": shrunk}
                    points.append(point)
                    _print_point(comm, point)
    rated = [p for p in points if "margin" in p]
    worst = None
    if rated:
        w = min(rated, key=lambda p: p["margin"])
        keep = ("case", "collision", "ranks", "size", "block", "block_bytes", "memory_sized")
        keep += ("steps", "ours", "peers", "ratio", "margin", "limited_by")
        worst = {k: w[k] for k in keep if k in w}
        worst["targets"] = dict(_TARGETS)
    return {"points": points, "worst": worst, "seconds": time.perf_counter() - start}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Both cases per collision; the first (D2Q9 float64) is the headline; with
    ``--sweep`` also the grid (``sweep``) and its worst point (``worst``)."""
    from hpc.backend import get_backend

    comm = world()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    if getattr(args, "sweep", False) and get_backend(args.backend).is_gpu:
        raise UsageError(
            "--sweep sizes its blocks by the host's caches and memory and its roofline by the "
            "host's bandwidth: it runs on the CPU (scripts/gpu_check.sh lbm runs a GPU grid)"
        )
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
    head = cases[0]
    record: dict[str, Any] = {
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
    if getattr(args, "sweep", False):
        sweep = _sweep(args, names or ["bgk"])
        record["sweep"] = sweep["points"]
        record["worst"] = sweep["worst"]
        record["sweep_seconds"] = sweep["seconds"]
    record["affinity"] = affinity_record(comm)  # lbmpy runs in our ranks, on our threads
    record["machine"] = machine_record(load)
    return record
