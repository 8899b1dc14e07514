"""Run under mpirun (or import): halo exchange against ``np.pad`` of the global array.

The reference is the global array padded by the halo width, ``mode="wrap"`` along periodic axes
and a sentinel constant along the others (corners beyond a non-periodic boundary keep the
sentinel); a rank's ghosted block must equal the padded array at its offset. Random shapes,
1-, 2- and 3-D, halo widths 1-3, both transports and both message patterns.
"""

from __future__ import annotations

import itertools
import sys

import numpy as np

import hpc
from hpc.comm import world

SENTINEL = -9.0


def padded(g: np.ndarray, halo: int, periodic: tuple[bool, ...]) -> np.ndarray:
    """``g`` with ``halo`` ghost cells each side: wrapped on periodic axes, else the sentinel."""
    out = g
    for axis, wrap in enumerate(periodic):
        width = [(0, 0)] * g.ndim
        width[axis] = (halo, halo)
        if wrap:
            out = np.pad(out, width, mode="wrap")
        else:
            out = np.pad(out, width, mode="constant", constant_values=SENTINEL)
    return out


def check_case(shape, periodic, halo, method, pattern, comm=None) -> None:
    """One exchange of a random global array; raises AssertionError naming the case."""
    comm = comm or world()
    d = hpc.CartDecomposition(shape, periodic=periodic, halo=halo, comm=comm, backend="cpu")
    seed = abs(hash((shape, periodic, halo))) % 2**32
    g = np.random.default_rng(seed).standard_normal(shape)
    want_all = padded(g, halo, tuple(d.periodic))
    want = want_all[tuple(slice(o, o + n) for o, n in zip(d.offset, d.ghost_shape, strict=True))]
    a = d.allocate(np.float64, fill=SENTINEL)
    d.interior(a)[...] = g[d.local_slices]
    with hpc.HaloExchange(d, np.float64, method=method, pattern=pattern) as ex:
        for _ in range(2):  # the second round re-uses the bound requests / windows
            ex.exchange(a)
            bad = np.argwhere(a != want)
            assert not bad.size, (
                f"rank {comm.rank}: {len(bad)} wrong cells (first {tuple(bad[0])}) shape={shape} "
                f"periodic={periodic} halo={halo} {method}/{pattern} dims={d.dims}"
            )


def random_cases(rng: np.random.Generator, ranks: int, count: int) -> list[tuple]:
    """``count`` random (shape, periodic, halo) with at least ``halo`` cells per rank."""
    cases = []
    for k in range(count):
        ndim = 1 + k % 3
        halo = 1 + (k // 3) % 3
        periodic = tuple(bool(x) for x in rng.integers(0, 2, ndim))
        if k % 2 == 0:
            periodic = (True,) * ndim  # every corner wraps
        low = halo * ranks
        shape = tuple(int(rng.integers(low, low + 9)) for _ in range(ndim))
        cases.append((shape, periodic, halo))
    return cases


def main() -> int:
    comm = world()
    rng = np.random.default_rng(314 + comm.size)
    cases = comm.bcast(random_cases(rng, comm.size, 18), root=0)
    count = 0
    for (shape, periodic, halo), method, pattern in itertools.product(
        cases, ("p2p", "rma"), ("sweep", "direct")
    ):
        check_case(shape, periodic, halo, method, pattern, comm)
        count += 1
    comm.Barrier()
    if comm.rank == 0:
        print(f"halo pad: {count} cases passed on {comm.size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
