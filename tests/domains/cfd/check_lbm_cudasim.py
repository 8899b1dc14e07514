"""Run with NUMBA_ENABLE_CUDASIM=1: the generated numba.cuda kernel equals the CPU kernel."""

from __future__ import annotations

import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc.domains.cfd.codegen import MOVING_WALL, WALL, load_kernel  # noqa: E402
from hpc.domains.cfd.lattice import D2Q9, D3Q19, D3Q27  # noqa: E402
from numba import cuda  # noqa: E402


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
    print(f"cudasim: {checked} generated GPU kernels match the CPU kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
