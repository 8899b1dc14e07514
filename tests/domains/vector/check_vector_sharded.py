"""Under mpirun: a sharded index gives the single-process index's results (any rank count)."""

from __future__ import annotations

import sys

import numpy as np
from hpc.domains.vector import FlatIndex, IVFFlatIndex, IVFPQIndex, ShardedIndex

from hpc.comm import world
from hpc.decomposition import chunk


def main() -> int:
    comm = world()
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    rng = np.random.default_rng(seed)  # the same fresh data on every rank
    n, nq, dim = 3000, 40, 16
    centres = rng.standard_normal((20, dim)) * 3
    x = (centres[rng.integers(20, size=n)] + rng.standard_normal((n, dim))).astype(np.float32)
    x[n // 2 : n // 2 + 5] = x[:5]  # duplicates, on different shards
    q = rng.standard_normal((nq, dim)).astype(np.float32) * 3
    lo, hi = chunk(n, comm.size, comm.rank)
    cases = [
        (lambda: FlatIndex(dim), {}),
        (lambda: FlatIndex(dim, "ip"), {}),
        (lambda: IVFFlatIndex(dim, 16, seed=seed), {"nprobe": 3}),
        (lambda: IVFFlatIndex(dim, 16, "cosine", seed=seed), {"nprobe": 4}),
        (lambda: IVFPQIndex(dim, 8, m=4, nbits=6, seed=seed), {"nprobe": 2}),
        (lambda: IVFPQIndex(dim, 8, m=4, nbits=6, seed=seed), {"nprobe": 2, "rerank": 30}),
    ]
    allow = rng.choice(n, size=n // 3, replace=False)
    for make, params in cases:
        single = make()
        single.train(x)
        single.add(x)
        sharded = ShardedIndex(make(), comm)
        sharded.train(x[lo:hi])
        sharded.add(x[lo:hi])
        assert sharded.ntotal == n
        for k in (1, 10, n + 3):
            d0, i0 = single.search(q, k, **params)
            d1, i1 = sharded.search(q if comm.rank == 0 else None, k, **params)
            assert np.array_equal(i0, i1), (single, k, np.flatnonzero((i0 != i1).any(1)))
            assert np.array_equal(d0, d1), (single, k)
        d0, i0 = single.search(q, 7, filter=allow, **params)
        d1, i1 = sharded.search(q, 7, filter=allow, **params)
        assert np.array_equal(i0, i1) and np.isin(i1[i1 >= 0], allow).all()
        gone = np.arange(0, n, 3)
        single.remove(gone)
        assert sharded.remove(gone) == gone.size
        d0, i0 = single.search(q, 5, **params)
        d1, i1 = sharded.search(q, 5, **params)
        assert np.array_equal(i0, i1) and not np.isin(i1, gone).any()
    if comm.rank == 0:
        print(f"sharded == single on {comm.size} rank(s): PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
