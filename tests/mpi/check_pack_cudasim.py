"""Run with NUMBA_ENABLE_CUDASIM=1: the numba.cuda pack/unpack kernels against NumPy slicing."""

from __future__ import annotations

import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc import pack  # noqa: E402


def main() -> int:
    rng = np.random.default_rng(11)
    cases = 0
    for shape in [(1, 1, 9), (1, 6, 7), (5, 4, 6)]:
        a = rng.standard_normal(shape)
        for _ in range(6):
            lo = [int(rng.integers(0, n)) for n in shape]
            n = [int(rng.integers(1, s - x + 1)) for s, x in zip(shape, lo, strict=True)]
            box = (*lo, *n)
            region = tuple(slice(x, x + m) for x, m in zip(lo, n, strict=True))
            buf = np.full(int(np.prod(n)) + 3, np.nan)
            pack.pack_device(a, buf, box)
            assert np.array_equal(buf[:-3], a[region].ravel()), f"pack {box}"
            assert np.isnan(buf[-3:]).all(), f"pack wrote past its box {box}"
            b = np.zeros_like(a)
            pack.unpack_device(buf, b, box)
            want = np.zeros_like(a)
            want[region] = a[region]
            assert np.array_equal(b, want), f"unpack {box}"
            cases += 1
    print(f"cudasim pack/unpack: {cases} boxes ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
