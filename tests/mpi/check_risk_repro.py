"""Run under mpirun: Monte Carlo prices on this rank count, several batch sizes, are bitwise
the single-process price."""

from __future__ import annotations

import sys

from hpc.domains.risk import GBM, AsianArithmetic, European, price

from hpc.comm import world


def main() -> int:
    comm = world()
    model = GBM(spot=100.0, vol=0.25, rate=0.03, dividend=0.01)
    checked = 0
    for option in (European(95.0, 0.5, "put"), AsianArithmetic(100.0, 1.0, "call", 12)):
        ref = price(model, option, paths=100_000, seed=11, block=1024, executor="local")
        for batch in (None, 1, 3, 7):
            got = price(
                model, option, paths=100_000, seed=11, block=1024, executor="mpi", batch=batch
            )
            assert (got.price, got.stderr, got.paths) == (ref.price, ref.stderr, ref.paths), (
                option,
                batch,
                got,
                ref,
            )
            checked += 1
    if comm.rank == 0:
        print(f"risk: {checked} prices on {comm.size} ranks bitwise equal to one process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
