"""Run with NUMBA_ENABLE_CUDASIM=1: the generated numba.cuda MRT and Smagorinsky kernels equal
the CPU kernels."""

from __future__ import annotations

import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc.domains.cfd.codegen import MOVING_WALL, WALL, load_kernel, mrt_rate_names  # noqa: E402
from hpc.domains.cfd.lattice import D2Q9, D3Q19, D3Q27  # noqa: E402


def main() -> int:
    rng = np.random.default_rng(5)
    checked = 0
    combos = [
        (D2Q9, (6, 5), "mrt", False),
        (D2Q9, (6, 5), "bgk", True),
        (D2Q9, (6, 5), "trt", True),
        (D3Q19, (4, 4, 4), "mrt", True),
        (D3Q27, (4, 4, 4), "trt", True),
    ]
    for lat, shape, collision, les in combos:
        f = 0.05 + 0.01 * rng.random((lat.q, *shape))
        flags = np.zeros(shape, np.uint8)
        flags[0] = WALL
        flags[-1] = MOVING_WALL
        cpu_out = np.zeros_like(f)
        gpu_out = np.zeros_like(f)
        box = [v for n in shape for v in (1, n - 1)]
        d = lat.d
        n_rates = len(mrt_rate_names(lat)) if collision == "mrt" else 0
        rates = [1.1 + 0.05 * k for k in range(n_rates)]
        extra = rates + ([0.8, 0.5] if les else [])
        args = (1 / 0.8, 1.1, *([1e-4] * d), *([0.05] + [0.0] * (d - 1)), *extra)
        load_kernel(lat, collision, True, np.float64, "cpu", True, shape, "pull", les)(
            f, cpu_out, flags, *box, *args
        )
        gpu = load_kernel(lat, collision, True, np.float64, "gpu", True, None, "pull", les)
        extents = [n - 2 for n in shape]
        gpu[(1,) * d, tuple(reversed(extents))](f, gpu_out, flags, *box, *args)
        assert np.allclose(cpu_out, gpu_out, rtol=1e-13, atol=1e-15), (lat.name, collision)
        assert np.abs(cpu_out).max() > 0
        checked += 1
    print(f"cudasim: {checked} generated MRT/LES GPU kernels match the CPU kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
