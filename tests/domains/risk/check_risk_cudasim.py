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
    # every other (model, payoff) kernel: barriers, Heston, the correlated basket
    from hpc.domains.risk import (
        GBM,
        AsianArithmetic,
        Barrier,
        Basket,
        European,
        Heston,
        Lookback,
        Market,
    )
    from hpc.domains.risk.engine import _plan

    gbm = GBM(spot=90.0, vol=0.3, rate=0.02, dividend=0.01)
    heston = Heston(spot=90.0, v0=0.05, kappa=1.2, theta=0.04, xi=0.4, rho=-0.6, rate=0.02,
                    steps_per_year=8)  # fmt: skip
    market = Market([90.0, 60.0], [0.3, 0.2], [[1.0, 0.5], [0.5, 1.0]], rate=0.02)
    for model, option, antithetic in (
        (gbm, Barrier(95.0, 0.9, "call", 110.0, "up", "out", 5), True),
        (gbm, Barrier(95.0, 0.9, "put", 80.0, "down", "in", 4), False),
        (heston, European(95.0, 0.9, "put"), True),
        (heston, AsianArithmetic(95.0, 0.9, "call", 3), False),
        (market, Basket([0.5, 0.5], 70.0, 0.9, "call"), True),
        (gbm, Lookback(0.9, "call", monitoring=5), True),
        (gbm, Lookback(0.9, "put", 100.0, monitoring=4), False),
        (heston, Lookback(0.9, "put", monitoring=3), True),
    ):
        spec = _plan(model, option, 3, 2, antithetic)[0]
        cpu = kernels.block_sums(7, 3, 40, spec)
        gpu = kernels._gpu_block_sums(7, 3, 40, spec, xp=np)
        assert np.allclose(gpu, cpu, rtol=1e-11, atol=1e-12), (model, option, gpu - cpu)
    # VaR's scenario blocks on a GPU backend (the simulator's arrays are NumPy's): the device
    # normals and the erfc kernel give the CPU's tails to rounding
    from hpc.domains.risk.var import Position, monte_carlo_var

    from hpc.backend import Backend

    book = [Position(0, -4.0, European(95.0, 0.3, "put")), Position(1, 2.0, European(60.0, 1.0))]
    kw = dict(horizon=5 / 250, scenarios=3001, seed=4, var_level=0.99, es_level=0.95)
    cpu = monte_carlo_var(market, book, **kw, backend="cpu")
    gpu = monte_carlo_var(market, book, **kw, backend=Backend("gpu", np))
    assert math.isclose(gpu.var, cpu.var, rel_tol=1e-12), (gpu, cpu)
    assert math.isclose(gpu.es, cpu.es, rel_tol=1e-12), (gpu, cpu)
    print("cudasim: GPU path kernels equal the CPU kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
