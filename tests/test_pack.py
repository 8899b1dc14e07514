"""Pack/unpack kernels: CPU kernels and (under the CUDA simulator) numba.cuda kernels."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from hpc import pack
from tests.conftest import MPI_DIR, ROOT


@pytest.mark.parametrize("shape", [(1, 1, 40), (1, 300, 300), (20, 30, 64)])
def test_cpu_pack_unpack_match_numpy_slicing(shape):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape)
    for _ in range(8):
        lo = [int(rng.integers(0, n)) for n in shape]
        n = [int(rng.integers(1, s - x + 1)) for s, x in zip(shape, lo, strict=True)]
        region = tuple(slice(x, x + m) for x, m in zip(lo, n, strict=True))
        buf = np.empty(a[region].size)
        pack.pack(a, buf, (*lo, *n))
        assert np.array_equal(buf, a[region].ravel())
        b = np.zeros_like(a)
        pack.unpack(buf, b, (*lo, *n))
        assert np.array_equal(b[region], a[region]) and b.sum() == pytest.approx(a[region].sum())


def test_as3d_is_a_view():
    a = np.zeros((4, 5))
    v = pack.as3d(a)
    v[0, 1, 2] = 3
    assert v.shape == (1, 4, 5) and a[1, 2] == 3


@pytest.mark.cudasim
@pytest.mark.timeout(300)
def test_cuda_kernels_under_the_simulator():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run(
        [sys.executable, str(MPI_DIR / "check_pack_cudasim.py")],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "boxes ok" in proc.stdout
