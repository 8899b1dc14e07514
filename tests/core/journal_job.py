"""A journaled batch job for the SIGKILL tests: ``journal_job.py JOURNAL OUT EXECUTOR NBLOCKS``.

Run as a plain process (executors ``local``, ``dask``) or under ``mpirun`` (``mpi``). The
blocks' rows are pseudo-random numbers seeded by the block number, with a short sleep so a
kill lands inside the work; the result goes to OUT (``.npy``) atomically, inside the journal's
block, so the journal is removed only once the output is whole.
"""

from __future__ import annotations

import sys
import time

import numpy as np

WIDTH = 5
SECONDS_PER_BLOCK = 0.004


def rows(first: int, count: int, sleep: float = 0.0) -> np.ndarray:
    """Rows of blocks ``first .. first + count - 1``: a function of the block number only."""
    time.sleep(sleep * count)
    return np.stack(
        [
            np.random.default_rng([7, b]).standard_normal(WIDTH) * 1e3
            for b in range(first, first + count)
        ]
    ).reshape(count, WIDTH)


def main(argv: list[str]) -> int:
    from functools import partial

    from hpc.io import atomic_open

    from hpc.collectives import barrier
    from hpc.comm import world
    from hpc.journal import Journal
    from hpc.run import map_blocks

    journal, out, executor, nblocks = argv[0], argv[1], argv[2], int(argv[3])
    comm = world()
    fn = partial(rows, sleep=SECONDS_PER_BLOCK)
    with Journal(journal, key={"job": "journal_job", "nblocks": nblocks}, comm=comm):
        result = map_blocks(fn, nblocks, WIDTH, executor=executor, comm=comm)
        if comm.Get_rank() == 0:
            with atomic_open(out, "wb") as fh:
                np.save(fh, result)
        barrier(comm)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
