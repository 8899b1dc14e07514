"""Run with NUMBA_ENABLE_CUDASIM=1: the numba.cuda path kernels give the CPU kernels' block sums."""

from __future__ import annotations

import math
import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc.domains.risk import kernels  # noqa: E402


def main() -> int:
    for kind, steps, antithetic in (
        (kernels.EUROPEAN, 1, True),
        (kernels.ARITHMETIC, 5, True),
        (kernels.GEOMETRIC, 4, False),
    ):
        dt = 0.9 / steps
        params = dict(
            k0=123456789, k1=987, stream=2, log_s0=math.log(90.0), s0=90.0,
            drift=(0.02 - 0.5 * 0.3**2) * dt, vol=0.3, dt=dt, steps=steps, strike=95.0,
            call=kind != kernels.GEOMETRIC, kind=kind, discount=math.exp(-0.02 * 0.9),
            barrier=0.0, up=False, knock_in=False, antithetic=antithetic,
        )  # fmt: skip
        cpu = kernels.block_sums(7, 3, 40, params)
        gpu = kernels._gpu_block_sums(7, 3, 40, params, xp=np)
        # libdevice (here: Python's math) against hpc.vmath: rounding only
        assert np.allclose(gpu, cpu, rtol=1e-12, atol=1e-13), (kind, gpu - cpu)
    print("cudasim: GPU path kernels equal the CPU kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
