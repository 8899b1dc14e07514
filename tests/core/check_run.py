"""Run under mpirun: map_blocks over ranks gives the local rows; an error on one rank is
raised on every rank, naming it."""

from __future__ import annotations

import sys

import numpy as np

from hpc.comm import world
from hpc.run import map_blocks


def rows(first, count):
    b = np.arange(first, first + count, dtype=float)
    return np.stack([b, b * b], axis=1)


def failing(first, count):
    if first == 0:
        raise KeyError("block zero")
    return rows(first, count)


def main() -> int:
    comm = world()
    for nblocks in (0, 1, 17):  # fewer blocks than ranks too: some ranks own nothing
        for batch in (None, 1, 2, 5, 50):
            got = map_blocks(rows, nblocks, 2, executor="mpi", batch=batch)
            assert got.tobytes() == rows(0, nblocks).tobytes(), (nblocks, batch)
    try:
        map_blocks(failing, 17, 2, executor="mpi", batch=2)
    except RuntimeError as exc:
        assert "rank 0" in str(exc) and "block zero" in str(exc), exc
    else:
        raise AssertionError("the failure on rank 0 was not raised")
    if comm.rank == 0:
        print(f"map_blocks: rows and errors correct on {comm.size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
