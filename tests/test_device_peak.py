"""The GPU peaks of ``benchmarks/device_peak.py`` and the work counts set against them.

The chain kernels run under the CUDA simulator (a child process: the simulator must be on
before numba.cuda is imported) on fresh random inputs and are checked against the closed form
of their recurrences; the fraction against a hand computation; the per-cell and per-step
operation counts of the align and mc benchmarks against the kernel source they describe.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

_CHAINS = """
import json, sys
import numpy as np
from numba import cuda
from hpc.benchmarks import device_peak as dp
p = json.loads(sys.argv[1])
n = 3  # threads: one more than the output, so the bounds check is exercised
out = cuda.device_array(n - 1, dtype=np.float64)
dp._fma_chains[1, n](out, cuda.to_device(np.array(p["xs"])), p["a"], p["b"], p["iters"])
iout = cuda.device_array(n - 1, dtype=np.int32)
seed = cuda.to_device(np.array(p["ks"], dtype=np.int32))
dp._int32_chains[1, n](iout, seed, np.int32(p["step"]), np.int32(p["floor"]), p["iters"])
rate = dp.fma_rate(np.float32, iterations=2, blocks=1, threads=2, reps=1)
irate = dp.int32_rate(iterations=2, blocks=1, threads=2, reps=1)
print(json.dumps({"fma": out.copy_to_host().tolist(), "int": iout.copy_to_host().tolist(),
                  "rates": [rate, irate]}))
"""


@pytest.mark.cudasim
def test_chain_kernels_compute_their_recurrences_under_the_simulator():
    rng = np.random.default_rng()
    iters = int(rng.integers(3, 12))
    xs = rng.uniform(-10, 10, 8)
    a, b = float(rng.uniform(0.1, 1.0)), float(rng.uniform(0.5, 0.999))
    ks = rng.integers(-1000, 1000, 8)
    step = int(rng.integers(-20, 20))
    floor = int(rng.integers(-1500, 500))
    params = {"xs": xs.tolist(), "a": a, "b": b, "iters": iters, "ks": ks.tolist(),
              "step": step, "floor": floor}  # fmt: skip
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHAINS, json.dumps(params)],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # x -> x b + a, n times: b^n x + a (1 - b^n) / (1 - b); the eight chains summed
    bn = b**iters
    fma = float(np.sum(bn * xs + a * (1 - bn) / (1 - b)))
    np.testing.assert_allclose(got["fma"], [fma, fma], rtol=1e-12)
    # x -> max(x + step, floor), n times, by brute force in Python integers; XOR of the chains
    # (no int32 overflow at these magnitudes)
    want = 0
    for k in ks:
        x = int(k)
        for _ in range(iters):
            x = max(x + step, floor)
        want ^= x
    assert got["int"] == [want, want]
    assert all(r > 0 and np.isfinite(r) for r in got["rates"])


def test_fraction_is_work_over_seconds_over_peak():
    from hpc.benchmarks.device_peak import fraction

    # 3.2e9 bytes in 2 ms is 1.6e12 B/s; of a 2e12 B/s copy that is 0.8
    assert fraction(3.2e9, 2e-3, 2e12) == pytest.approx(0.8, rel=1e-15)
    with pytest.raises(ValueError, match="seconds 0"):
        fraction(1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="peak -1"):
        fraction(1.0, 1.0, -1.0)


def _calls(fn: object, names: set[str]) -> dict[str, int]:
    """Calls of each of ``names`` in the source of ``fn``."""
    tree = ast.parse(inspect.getsource(fn))  # type: ignore[arg-type]
    counts = dict.fromkeys(names, 0)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in counts:
                counts[node.func.id] += 1
    return counts


def test_align_ops_per_cell_count_the_two_state_update():
    from hpc.benchmarks.align import INT32_OPS_PER_CELL
    from hpc.domains.align import cuda_kernels, kernels

    ops = {"_add", "_sub", "_max"}
    cell = sum(_calls(kernels._cell, ops).values())
    cell2 = _calls(kernels._cell2, ops | {"_cell"})
    assert cell2["_cell"] == 1
    # the GPU kernel's loop adds best = _max(best, hh) per cell
    assert "best = _max(best, hh)" in inspect.getsource(cuda_kernels._pairs_kernel)
    assert INT32_OPS_PER_CELL == cell + sum(cell2[o] for o in ops) + 1
