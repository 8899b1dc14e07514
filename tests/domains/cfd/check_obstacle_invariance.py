"""Run under mpirun: flows around bodies (curved walls, forces, open faces) on this rank count
(several process grids) give bitwise the populations and force history of one rank."""

from __future__ import annotations

import sys

import numpy as np
from hpc.domains.cfd.geometry import Box, Sphere
from hpc.domains.cfd.obstacles import BodyInChannel, SchaeferTurek
from hpc.domains.cfd.units import LatticeUnits

from hpc.comm import world
from tests.domains.cfd.check_cfd_invariance import compare_with_one_rank


def run(case, steps):
    case.run(steps)
    out = {i: case.decomp.gather(case.solver.f[i]) for i in range(case.solver.lattice.q)}
    out["history"] = np.array([case.history[k] for k in sorted(case.history)])
    case.solver.close()
    return out


def two_bodies(comm, dims):
    units = LatticeUnits.from_reynolds(10.0, 6.0, 0.05)
    bodies = [Sphere((14.3, 9.7), 3.1), Box((19.2, 4.6), (24.9, 12.3))]
    return BodyInChannel((44, 18), bodies, units, (0.05, 0.0), comm=comm, dims=dims, sample_every=5)


def main() -> int:
    comm = world()
    size = comm.Get_size()
    # process grids whose block faces cut the bodies (the cylinder's centre is at y = 12.2
    # of 25 cells; the sphere and the box span x = 11 and x = 22 of 44); on 4 ranks a 2 x 2
    # grid cuts both axes at once
    two = size >= 4 and size % 2 == 0
    cases = [
        (
            "2D-1",
            (2, size // 2) if two else (1, size),
            lambda c, d: SchaeferTurek(6, comm=c, dims=d),
            40,
        ),
        ("bodies", (2, size // 2) if two else (size, 1), two_bodies, 40),
        ("3D-1Z", (1, 1, size), lambda c, d: SchaeferTurek(3, dim=3, comm=c, dims=d), 10),
    ]
    def with_history(case, steps):
        out = run(case, steps)
        assert out["history"].size, "the force history is written"
        return out

    return compare_with_one_rank(comm, cases, with_history, "body cases")


if __name__ == "__main__":
    sys.exit(main())
