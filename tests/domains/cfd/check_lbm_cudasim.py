"""Run with NUMBA_ENABLE_CUDASIM=1: the generated numba.cuda kernel equals the CPU kernel, and
the GPU kernels of the boundaries (Bouzidi links with their momentum-exchange terms, NEE
faces) equal their CPU kernels on random states."""

from __future__ import annotations

import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc.domains.cfd.boundaries import apply_nee_face  # noqa: E402
from hpc.domains.cfd.bouzidi import InterpolatedBounceBack  # noqa: E402
from hpc.domains.cfd.codegen import MOVING_WALL, WALL, load_kernel  # noqa: E402
from hpc.domains.cfd.geometry import BoundaryLinks  # noqa: E402
from hpc.domains.cfd.lattice import D2Q9, D3Q19, D3Q27  # noqa: E402
from numba import cuda  # noqa: E402

from hpc.backend import Backend  # noqa: E402
from hpc.comm import self_comm  # noqa: E402

GPU = Backend("gpu", np)  # NumPy arrays stand in for the device's under the simulator


def boundary_kernels(rng: np.random.Generator) -> int:
    """Bouzidi's two passes and the link terms, and the NEE faces: GPU equals CPU."""
    checked = 0
    for lat, shape in [(D2Q9, (7, 6)), (D3Q19, (6, 5, 4))]:
        for dtype in (np.float64, np.float32):
            f = (0.05 + 0.01 * rng.random((lat.q, *shape))).astype(dtype)
            flags = (rng.random(shape) < 0.3).astype(np.uint8)  # walls upstream: fallbacks
            # distinct (cell, direction) slots on interior cells; q over both branches
            inner = np.ravel_multi_index(
                np.meshgrid(*[np.arange(1, n - 1) for n in shape], indexing="ij"), shape
            ).ravel()
            slots = rng.choice(inner.size * (lat.q - 1), size=25, replace=False)
            cell = inner[slots // (lat.q - 1)].astype(np.int64)
            direction = (1 + slots % (lat.q - 1)).astype(np.int64)
            q = rng.uniform(1e-3, 1.0, cell.size)
            q[:3] = (0.5, 1.0, 1e-9)
            links = BoundaryLinks(cell, direction, q, cell * lat.q + direction)
            out = []
            for backend in (Backend("cpu", np), GPU):
                bounce = InterpolatedBounceBack(lat, links, shape, self_comm(), backend)
                g = f.copy()
                bounce.apply(g, flags)
                out.append((g, bounce.force()))
            (f_cpu, force_cpu), (f_gpu, force_gpu) = out
            assert np.array_equal(f_cpu, f_gpu), (lat.name, dtype, "bouzidi")
            assert not np.array_equal(f_cpu, f)
            assert np.array_equal(force_cpu, force_gpu), (lat.name, dtype, force_cpu, force_gpu)
            assert np.abs(force_cpu).max() > 0
            checked += 1
        f = 0.1 + 0.01 * rng.random((lat.q, *shape))
        for kind in ("velocity", "pressure"):
            for axis in range(lat.d):
                spans = [slice(0, n) for a, n in enumerate(shape) if a != axis]
                size = [s.stop for s in spans]
                velocity = [0.05 * rng.random(size) for _ in range(lat.d)]
                out = []
                for backend in (Backend("cpu", np), GPU):
                    g = f.copy()
                    near, ghost = shape[axis] - 2, shape[axis] - 1
                    apply_nee_face(
                        g, lat, axis, near, ghost, spans, kind, 1.01, velocity, backend
                    )
                    out.append(g)
                assert np.array_equal(out[0], out[1]), (lat.name, kind, axis, "nee")
                assert not np.array_equal(out[0], f)
                checked += 1
    return checked


def main() -> int:
    rng = np.random.default_rng(4)
    checked = 0
    every = [(c, forcing) for c in ("bgk", "trt") for forcing in (False, True)]
    # D3Q27: the same generator, so two combinations cover it (each compiles 3 CPU kernels)
    for lat, shape, combos in [
        (D2Q9, (7, 6), every),
        (D3Q19, (5, 4, 4), every),
        (D3Q27, (4, 4, 4), [("bgk", False), ("trt", True)]),
    ]:
        for collision, forcing in combos:
            f = 0.05 + 0.01 * rng.random((lat.q, *shape))
            flags = np.zeros(shape, np.uint8)
            flags[0] = WALL
            flags[-1] = MOVING_WALL
            cpu_out = np.zeros_like(f)
            gpu_out = np.zeros_like(f)
            box = [v for n in shape for v in (1, n - 1)]
            d = lat.d
            args = (0.9, 1.1, *([1e-4] * d), *([0.05] + [0.0] * (d - 1)))
            load_kernel(lat, collision, forcing, np.float64, "cpu", True, shape)(
                f, cpu_out, flags, *box, *args
            )
            gpu = load_kernel(lat, collision, forcing, np.float64, "gpu")
            extents = [n - 2 for n in shape]
            gpu[(1,) * d, tuple(reversed(extents))](f, gpu_out, flags, *box, *args)
            assert np.allclose(cpu_out, gpu_out, rtol=1e-13, atol=1e-15), (
                lat.name,
                collision,
                forcing,
            )
            assert np.abs(cpu_out).max() > 0
            checked += 1
            for pattern in ("aa-stream", "aa-local"):  # in place: f is input and output
                cpu_f, gpu_f = f.copy(), f.copy()
                load_kernel(lat, collision, forcing, np.float64, "cpu", True, shape, pattern)(
                    cpu_f, cpu_f, flags, *box, *args
                )
                gpu = load_kernel(
                    lat, collision, forcing, np.float64, "gpu", True, None, pattern
                )
                # one device array passed twice (host arrays would be copied twice)
                dev = cuda.to_device(gpu_f)
                gpu[(1,) * d, tuple(reversed(extents))](dev, dev, flags, *box, *args)
                gpu_f = dev.copy_to_host()
                assert np.allclose(cpu_f, gpu_f, rtol=1e-13, atol=1e-15), (lat.name, pattern)
                assert not np.array_equal(cpu_f, f)
                checked += 1
    boundaries = boundary_kernels(rng)
    print(
        f"cudasim: {checked} generated GPU kernels match the CPU kernels; "
        f"{boundaries} boundary kernel cases (Bouzidi links, NEE faces) too"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
