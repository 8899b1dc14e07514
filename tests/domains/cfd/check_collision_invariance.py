"""Run under mpirun: MRT and Smagorinsky cases on this rank count give bitwise the populations
of the same case on one rank (run by rank 0 on COMM_SELF)."""

from __future__ import annotations

import sys

from hpc.domains.cfd import Channel

from hpc.comm import world
from tests.domains.cfd.check_cfd_invariance import compare_with_one_rank
from tests.domains.cfd.check_cfd_invariance import fields as gathered


def fields(case, steps):
    out = gathered(case, steps)
    case.solver.close()
    return out


def main() -> int:
    comm = world()
    size = comm.Get_size()
    cases = [
        # MRT with the closure, Guo forcing and walls, pull streaming (one case: every block
        # shape compiles its own kernel, which is most of this test's time)
        (
            "channel-mrt-les",
            (size, 1),
            lambda c, d: Channel(
                12, 10, re=200, collision="mrt", smagorinsky=0.2, streaming="pull", comm=c, dims=d
            ),
            40,
        ),
    ]
    return compare_with_one_rank(comm, cases, fields)


if __name__ == "__main__":
    sys.exit(main())
