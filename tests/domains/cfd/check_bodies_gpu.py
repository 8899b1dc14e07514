"""Bodies in the flow on the GPU path equal the CPU path: Schaefer & Turek's cylinder in a
channel (a tiny grid, a few dozen steps), with the NEE pressure outlet and with the convective
outlet, stepped on both backends; populations and the drag/lift history are compared, and the
GPU run is repeated to show it is bitwise reproducible.

``python check_bodies_gpu.py sim`` runs under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1;
NumPy arrays stand in for CuPy's, so the numba.cuda kernels - the fused stream-and-collide, the
NEE faces, the Bouzidi links - and the solver's GPU dispatch run, CuPy itself does not);
``gpu`` runs on a real device; ``gpu bench`` adds the steps per second of the 2D-2 set-up at
D = 20 on both backends.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

MODE = sys.argv[1] if len(sys.argv) > 1 else "sim"
if MODE == "sim":
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"
    # the halo exchange stages device buffers through pinned host memory unless CUDA-aware
    os.environ["HPC_CUDA_AWARE_MPI"] = "1"

from hpc.domains.cfd import SchaeferTurek  # noqa: E402

from hpc.backend import Backend, get_backend, to_host  # noqa: E402

LAUNCHED: set[str] = set()  # names of the kernels the simulated GPU ran


class SimBackend(Backend):
    """The GPU backend over NumPy for the CUDA simulator: kernels are launched as on a GPU
    (numba.cuda, one thread per cell or link); there is no device to synchronise."""

    def synchronize(self) -> None:
        """Nothing queued: the simulator runs each launch to completion."""

    def bound(self, kernel: Any, extents: Any) -> Any:
        """As :meth:`Backend.bound` (thread x along the last axis), in blocks of 32, 8 x 4 or
        4 x 4 x 2 threads: the simulator runs a Python thread per GPU thread, most of them
        idle in the real launch's blocks on so small a grid."""
        threads = {1: (32,), 2: (8, 4), 3: (4, 4, 2)}[len(extents)]
        sizes = list(reversed([int(e) for e in extents]))
        blocks = tuple((s + t - 1) // t for s, t in zip(sizes, threads, strict=True))
        configured = kernel[blocks, threads]

        def run(*args: Any) -> None:
            configured(*args)
            LAUNCHED.add(getattr(kernel, "fn", kernel).__name__)

        return run


def sim_backend() -> Backend:
    """The simulated GPU backend. Its halo exchanges are told that NumPy arrays are device
    arrays (in the simulator they are); the CPU backend's still see host arrays."""
    import hpc.halo

    plain, check = hpc.halo.is_device_array, hpc.halo.HaloExchange._check

    def sim_check(self: Any, a: Any) -> None:
        if not isinstance(self.backend, SimBackend):
            return check(self, a)
        hpc.halo.is_device_array = lambda _a: True
        try:
            return check(self, a)
        finally:
            hpc.halo.is_device_array = plain

    hpc.halo.HaloExchange._check = sim_check
    return SimBackend("gpu", np)


def run(backend: Any, steps: int, **options: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Populations after ``steps`` steps and the force history (every step)."""
    case = SchaeferTurek(backend=backend, sample_every=1, **options)
    case.run(steps, check_every=steps)
    f = to_host(case.solver.f).copy()
    history = case.history_table()
    case.solver.close()
    return f, history


def compare(label: str, gpu: Any, steps: int, **options: Any) -> None:
    cpu = get_backend("cpu")
    f_cpu, h_cpu = run(cpu, steps, **options)
    t0 = time.perf_counter()
    f_gpu, h_gpu = run(gpu, steps, **options)
    seconds = time.perf_counter() - t0
    # the simulator runs threads one after another; a real device is where a race would show
    f_again, h_again = run(gpu, steps, **options) if MODE == "gpu" else (f_gpu, h_gpu)
    assert np.isfinite(f_cpu).all() and np.abs(h_cpu["fx"]).max() > 0, label
    df = float(np.abs(f_gpu - f_cpu).max())
    dforce = max(float(np.abs(h_gpu[k] - h_cpu[k]).max()) for k in ("fx", "fy"))
    scale = max(float(np.abs(h_cpu[k]).max()) for k in ("fx", "fy"))
    assert df <= 1e-12, (label, "populations", df)
    assert dforce <= 1e-12 * scale, (label, "force history", dforce, scale)
    assert np.array_equal(f_gpu, f_again), (label, "repeated GPU run: populations differ")
    for k in ("fx", "fy"):
        assert np.array_equal(h_gpu[k], h_again[k]), (label, "repeated GPU run: force differs")
    bitwise = df == 0.0 and dforce == 0.0
    print(
        f"{label}: {steps} steps, max |f_gpu - f_cpu| = {df:.2e}, max |F_gpu - F_cpu| = "
        f"{dforce:.2e} (|F| <= {scale:.3e}){' bitwise' if bitwise else ''}"
        f"{'; repeated GPU run bitwise' if MODE == 'gpu' else ''}; GPU path {seconds:.1f} s",
        flush=True,
    )


def bench(gpu: Any, steps: int = 2000) -> None:
    """MLUPS of the 2D-2 set-up at D = 20 (880 x 82 cells) on both backends."""
    for name, backend in (("cpu", get_backend("cpu")), ("gpu", gpu)):
        case = SchaeferTurek(20, re=100, u_max=0.05, backend=backend, outlet="convective")
        case.solver.step(10)  # compile, warm up
        stats = case.run(steps, check_every=steps)
        fx = case.force()[0]
        print(f"bench {name}: {stats['mlups']:.1f} MLUPS, F_x {fx:.6e}", flush=True)
        case.solver.close()


def main() -> int:
    gpu = sim_backend() if MODE == "sim" else get_backend("gpu")
    # D = 8 / 4.1 cells (42 x 8 cells), the inflow ramped up over 10 steps: the flow around
    # the cylinder develops within the steps run (Re 100 would give tau 0.504 here: refused)
    tiny = {"diameter": 2, "u_max": 0.1, "ramp": 10}
    compare("2D-1 NEE outlet", gpu, 30, re=20, **tiny)
    compare("2D-1 convective outlet", gpu, 30, re=20, outlet="convective", **tiny)
    if MODE == "sim":  # the whole step ran as numba.cuda kernels
        expected = {"stream_collide", "_nee_threads", "_interpolate_threads", "_store_threads"}
        assert expected <= LAUNCHED, sorted(LAUNCHED)
    if "bench" in sys.argv[2:]:
        bench(gpu)
    print("bodies: the GPU path equals the CPU path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
