"""Run under mpirun: ``check_atomic.py PATH CASE`` writes the table ``t`` of PATH atomically.

``ok``: every rank writes its rows. ``commit``: the commit fails (``HPC_IO_FAULTS`` set by the
test); rank 0 prints every rank's outcome in rank order. ``one-rank``: the last rank raises
inside the block, alone (the job must end, not hang).
"""

from __future__ import annotations

import sys

import numpy as np
from hpc.io import StorageError, atomic_output, write_table

import hpc


def main() -> int:
    path, case = sys.argv[1], sys.argv[2]
    comm = hpc.world()
    rank = comm.Get_rank()
    rows = {"x": np.arange(rank * 10, rank * 10 + 3, dtype=np.int64)}
    try:
        with atomic_output(path, comm) as tmp:
            write_table(tmp, "t", rows, comm=comm)
            if case == "one-rank" and rank == comm.Get_size() - 1:
                raise RuntimeError("a bug on one rank")
        outcome = "written"
    except StorageError as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    everyone = comm.gather(outcome, root=0)
    if rank == 0:
        for r, line in enumerate(everyone):
            print(f"rank {r}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
