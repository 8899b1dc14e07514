"""Run under mpirun: one save that meets an injected or real file-system fault.

``check_faults.py DIR CASE [N]``: the job first saves a small checkpoint of step 1 and leaves a
stale temporary beside it (as a crashed save would), without faults: ``HPC_IO_FAULTS`` is read
at each operation and is set afterwards from ``HPC_TEST_FAULTS``. Then, by CASE:

``save``
    step 2 with an N x N float64 array (default 64); rank 0 prints every rank's outcome,
    ``rank R: saved`` or ``rank R: <error class>: <message>``, and ``rank R: latest L intact
    B`` once each rank has checked that step 1 is still the latest and loads bitwise.
``load``
    step 1 read back under the fault.
``table``
    a table written under the fault.
``kill``
    rank 1 kills itself with SIGKILL while the others wait in a collective.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
from hpc.io import Checkpoint, StorageError

import hpc

SMALL = (16, 12)


def main() -> int:
    directory, case = Path(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    comm = hpc.world()
    rank = comm.Get_rank()
    ckpt = Checkpoint(directory, keep=3)
    small = hpc.CartDecomposition(SMALL, periodic=True, halo=1)
    u = small.allocate(np.float64)
    small.interior(u)[...] = np.arange(np.prod(SMALL), dtype=np.float64).reshape(SMALL)[
        small.local_slices
    ]
    ckpt.save(1, {"u": u}, small)
    if rank == 0:  # what a crashed save leaves: the next save removes it
        (directory / ".checkpoint_0000000009.h5.tmp-stale").write_bytes(b"left by a crash")
    comm.Barrier()
    if rank == 0:
        print("ready", flush=True)  # the fault starts now (the test's clock)
    os.environ["HPC_IO_FAULTS"] = os.environ.get("HPC_TEST_FAULTS", "")
    if case == "kill":
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        comm.Barrier()  # never completes: rank 1 is gone
        return 1
    if case == "load":
        ckpt.load(1, small)
        print(f"rank {rank}: loaded", flush=True)
        return 0
    if case == "table":
        from hpc.io import write_table

        write_table(directory / "table.h5", "t", {"x": np.arange(10 * (rank + 1))})
        print(f"rank {rank}: table written", flush=True)
        return 0
    big = hpc.CartDecomposition((n, n), periodic=True, halo=1)
    v = big.allocate(np.float64)
    try:
        ckpt.save(2, {"u": v}, big)
        outcome = "saved"
    except StorageError as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    os.environ["HPC_IO_FAULTS"] = ""
    latest = ckpt.latest()
    back = ckpt.load(1, small)
    same = np.array_equal(small.interior(back.arrays["u"]), small.interior(u))
    lines = [f"rank {rank}: {outcome}", f"rank {rank}: latest {latest} intact {same}"]
    everyone = comm.gather(lines, root=0)  # printed by one rank: lines never interleave
    if rank == 0:
        print("\n".join(line for mine in everyone for line in mine), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
