"""Run under mpirun -n 3: a journal written by 3 ranks (one of them failing) is resumed on 2
ranks and by one process, bitwise; a mismatched key is refused on every rank; the progress bar
on rank 0 receives every rank's block count."""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

import numpy as np
from mpi4py import MPI

from hpc.collectives import barrier, bcast_object
from hpc.comm import world
from hpc.journal import Journal, JournalMismatchError
from hpc.progress import Progress
from hpc.run import map_blocks
from tests.core.journal_job import WIDTH, rows


def failing(first: int, count: int) -> np.ndarray:
    if first == 8:
        raise KeyError("block eight")
    return rows(first, count)


def main() -> int:
    comm = world()
    rank = comm.Get_rank()
    base = Path(bcast_object(tempfile.mkdtemp() if rank == 0 else None, 0, comm))
    reference = rows(0, 40)

    # 1. three ranks, rank 1 fails at block 8: every rank raises, the others' batches stay
    path = base / "j"
    try:
        map_blocks(failing, 40, WIDTH, "mpi", batch=2, comm=comm, journal=path, key={"n": 40})
    except RuntimeError as exc:
        assert "rank 1" in str(exc) and "block eight" in str(exc), exc
    else:
        raise AssertionError("the failure on rank 1 was not raised")
    barrier(comm)
    segments = sorted(path.glob("*.seg"))
    assert 0 < len(segments) < 20, segments

    # 2. resumed on two ranks (rank 2 sits out)
    sub = comm.Split(0 if rank < 2 else MPI.UNDEFINED, rank)
    if sub != MPI.COMM_NULL:
        got = map_blocks(rows, 40, WIDTH, "mpi", batch=3, comm=sub, journal=path, key={"n": 40})
        assert got.tobytes() == reference.tobytes()
        sub.Free()
    barrier(comm)
    assert not path.exists()

    # 3. a journal of three ranks resumed by one process with the local executor
    path2 = base / "j2"
    try:
        map_blocks(failing, 40, WIDTH, "mpi", batch=2, comm=comm, journal=path2, key={})
    except RuntimeError:
        pass
    barrier(comm)
    if rank == 0:
        got = map_blocks(rows, 40, WIDTH, "local", comm=MPI.COMM_SELF, journal=path2, key={})
        assert got.tobytes() == reference.tobytes()
        assert not path2.exists()
    barrier(comm)

    # 4. another key: refused on every rank, agreed
    path3 = base / "j3"
    Journal(path3, {"seed": 1}, comm)
    try:
        Journal(path3, {"seed": 2}, comm)
    except JournalMismatchError as exc:
        assert exc.all_ranks and "seed: 2 here, 1 in the journal" in str(exc), exc
    else:
        raise AssertionError("a journal for other arguments was accepted")

    # 5. progress: rank 0's bar counts every rank's blocks, without a collective per batch
    sink = io.StringIO() if rank == 0 else None
    with Progress(total=4000, unit="paths", comm=comm, file=sink) as bar:
        with bar.phase(4000) as phase:
            got = map_blocks(rows, 40, WIDTH, "mpi", batch=1, comm=comm)
        assert got.tobytes() == reference.tobytes()
        if rank == 0:
            received = phase.counters[0].received
            mine = {r: len(range(r, 40, comm.Get_size())) for r in range(1, comm.Get_size())}
            assert received == mine, (received, mine)
            assert bar.n == 4000, bar.n
    if rank == 0:
        assert "4.00k/4.00k" in sink.getvalue() and "paths" in sink.getvalue(), sink.getvalue()
    barrier(comm)
    if rank == 0:
        import shutil

        shutil.rmtree(base)
        print(f"journal: ok on {comm.Get_size()} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
