"""Run with NUMBA_ENABLE_CUDASIM=1: the numba.cuda top-k and list-scan kernels give the CPU
kernels' results (NumPy arrays stand in for CuPy's)."""

from __future__ import annotations

import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc.domains.vector import FlatIndex, IVFFlatIndex  # noqa: E402
from hpc.domains.vector import _kernels as K  # noqa: E402
from hpc.domains.vector.flat import _gpu_flat_search, flat_search  # noqa: E402


def main() -> int:
    rng = np.random.default_rng()
    n, nq, dim = 160, 4, 8
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x[100:104] = x[:4]  # exact ties, broken by id
    q = rng.standard_normal((nq, dim)).astype(np.float32)
    norms = (x * x).sum(axis=1)
    ids = rng.permutation(10 * n)[:n].astype(np.int64)
    mask = (rng.random(n) < 0.5).astype(np.uint8)
    for k in (1, 5, 24):
        for l2 in (True, False):
            for m in (None, mask):
                want = flat_search(q, x, norms, ids, k, l2, m)
                got = _gpu_flat_search(q, x, norms, ids, k, l2, m, 4, 128, True)
                assert np.array_equal(want[1], got[1]), (k, l2, want[1], got[1])
                assert np.allclose(want[0], got[0], rtol=1e-6), (k, l2)
    big = K.GPU_KMAX + 3  # the sort-based path
    want = flat_search(q, x, norms, ids, big, True)
    got = _gpu_flat_search(q, x, norms, ids, big, True, None, 4, 128, True)
    assert np.array_equal(np.sort(want[1], axis=1), np.sort(got[1], axis=1))
    assert np.allclose(want[0], got[0], rtol=1e-6)

    # IVF-Flat list scanning: the GPU path of the index against its CPU path
    index = IVFFlatIndex(dim, 6, backend="cpu")
    index.train(x)
    index.add(x, ids)
    _, probes = index._coarse(q, 3)
    for k in (1, 6):
        want = index.search(q, k, nprobe=3)
        got = index._gpu_search(q, k, probes, None)
        assert np.array_equal(want[1], got[1]), (k, want[1], got[1])
        assert np.allclose(want[0], got[0], rtol=1e-6)
    flat = FlatIndex(dim)
    flat.add(x)
    print("cudasim: GPU top-k and IVF kernels equal the CPU kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
