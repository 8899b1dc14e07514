"""Run with NUMBA_ENABLE_CUDASIM=1: the numba.cuda random-stream kernel equals the CPU one."""

from __future__ import annotations

import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc.rng import RandomStreams, _gpu_kernels  # noqa: E402


def main() -> int:
    rs = RandomStreams(seed=2**40 + 12345, stream=3)
    for normal, dim in ((True, 5), (False, 4)):
        cpu = rs.normals(2**33, 70, dim) if normal else rs.uniforms(2**33, 70, dim)
        gpu = np.empty_like(cpu)
        args = (np.uint64(2**33), rs._k0, rs._k1, np.uint64(rs.stream), normal)
        _gpu_kernels()["fill"][3, 32](gpu, *args)
        assert np.allclose(gpu, cpu, rtol=1e-14, atol=1e-15), (normal, dim)
    print("cudasim: GPU random streams equal the CPU streams")
    return 0


if __name__ == "__main__":
    sys.exit(main())
