"""Run under mpirun: cases on this rank count (several process grids) give bitwise the fields
of the same case on one rank (run by rank 0 on COMM_SELF)."""

from __future__ import annotations

import sys

import numpy as np
from hpc.domains.cfd import Channel, LidDrivenCavity, TaylorGreen
from mpi4py import MPI

from hpc.comm import world


def fields(case, steps):
    case.solver.step(steps)
    out = {}
    for i in range(case.solver.lattice.q):
        out[i] = case.decomp.gather(case.solver.f[i])
    return out


def compare_with_one_rank(comm, cases, run, label: str = "cases") -> int:
    """Each ``(name, dims, make, steps)`` case on ``comm`` (process grid ``dims``) against
    the same case on one rank (rank 0, COMM_SELF): ``run(case, steps)``'s arrays bitwise
    equal; prints the count on rank 0."""
    for name, dims, make, steps in cases:
        mine = run(make(comm, dims), steps)
        if comm.rank == 0:
            ref = run(make(MPI.COMM_SELF, None), steps)
            for i in ref:
                assert mine[i].tobytes() == ref[i].tobytes(), f"{name} dims={dims} {i}"
        comm.Barrier()
    if comm.rank == 0:
        print(f"{len(cases)} {label} on {comm.Get_size()} ranks bitwise identical to 1 rank")
    return 0


def main() -> int:
    comm = world()
    size = comm.Get_size()
    grids2 = [None, (1, size)] + ([(2, size // 2)] if size % 2 == 0 and size > 2 else [])
    grids3 = [None, (1, 1, size)] + ([(2, 1, size // 2)] if size >= 4 else [])
    cases = []
    for dims in grids2:
        cases.append(("cavity", dims, lambda c, d: LidDrivenCavity(24, 100, comm=c, dims=d), 150))
        cases.append(("channel", dims, lambda c, d: Channel(12, 16, comm=c, dims=d), 150))
        cases.append(
            ("inflow", dims, lambda c, d: Channel(16, 12, inflow=True, comm=c, dims=d), 150)
        )
    for dims in grids3:
        cases.append(
            (
                "tg3d",
                dims,
                lambda c, d: TaylorGreen(12, re=30, dim=3, dtype=np.float32, comm=c, dims=d),
                60,
            )
        )
    return compare_with_one_rank(comm, cases, fields)


if __name__ == "__main__":
    sys.exit(main())
