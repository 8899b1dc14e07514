"""Run under mpirun: D3Q27 cases and convective outlets on this rank count give bitwise the
populations of the same case on one rank (run by rank 0 on COMM_SELF)."""

from __future__ import annotations

import sys

import numpy as np
from hpc.domains.cfd import BodyInChannel, Channel, LatticeUnits, TaylorGreen

from hpc.comm import world
from tests.domains.cfd.check_cfd_invariance import compare_with_one_rank
from tests.domains.cfd.check_cfd_invariance import fields as gathered


def fields(case, steps):
    out = gathered(case, steps)
    case.solver.close()
    return out


def _duct(c, d):
    """A 3-D D3Q27 duct (TRT with the Smagorinsky closure), uniform inflow, convective outlet
    at its mean outflow velocity."""
    units = LatticeUnits.from_reynolds(20.0, 6, 0.05)
    return BodyInChannel(
        (10, 6, 6), [], units, (0.05, 0.0, 0.0), lattice="D3Q27", outlet="convective",
        smagorinsky=0.1, comm=c, dims=d,
    )


def main() -> int:
    comm = world()
    size = comm.Get_size()
    cases = [
        # periodic, AA streaming (push exchange of 9 of 27 populations per face), float32
        (
            "tg-d3q27",
            (1, 1, size),
            lambda c, d: TaylorGreen(
                10, re=30, dim=3, dtype=np.float32, lattice="D3Q27", comm=c, dims=d
            ),
            20,
        ),
        # the outlet face cut by the rank boundary (its mean velocity summed over ranks), and
        # the outlet on the last rank along x
        ("duct-convective", (1, size, 1), _duct, 30),
        (
            "channel-convective",
            (1, size),
            lambda c, d: Channel(16, 12, inflow=True, outlet="convective", comm=c, dims=d),
            120,
        ),
        (
            "channel-convective-x",
            (size, 1),
            lambda c, d: Channel(16, 12, inflow=True, outlet="convective", comm=c, dims=d),
            120,
        ),
    ]
    return compare_with_one_rank(comm, cases, fields)


if __name__ == "__main__":
    sys.exit(main())
