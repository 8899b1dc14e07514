"""Run under mpirun on a GPU machine: halo exchange of CuPy arrays equals the CPU reference."""

from __future__ import annotations

import sys

import numpy as np

import hpc
from hpc.backend import to_host
from hpc.comm import world
from tests.core.check_halo import SENTINEL, expected_local


def main() -> int:
    comm = world()
    cases = 0
    for shape, periodic in [((40, 33), True), ((20, 18, 17), (True, False, True))]:
        for method in ("p2p", "rma"):
            for pattern in ("sweep", "direct"):
                d = hpc.CartDecomposition(shape, periodic=periodic, halo=1, backend="gpu")
                g = np.random.default_rng(7).standard_normal(shape)
                a = d.allocate(np.float64, fill=SENTINEL)
                d.interior(a)[...] = d.backend.asarray(g[d.local_slices])
                with hpc.HaloExchange(d, np.float64, method=method, pattern=pattern) as ex:
                    ex.exchange(a)
                    staged = ex._staged
                want = expected_local(g, d)
                assert np.array_equal(to_host(a), want), (
                    f"{shape} {method} {pattern} rank {comm.rank}"
                )
                cases += 1
    if comm.rank == 0:
        print(f"gpu halo: {cases} cases passed on {comm.size} ranks (staged={staged})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
