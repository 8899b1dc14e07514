"""Run under mpirun: ``check_small_io.py DIR``, small arrays given as paths (written and read
through rank 0 when h5py has MPI), then their errors; rank 0 prints every rank's outcomes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hpc.io import StorageError, read_array, write_array

import hpc


def _outcome(fn) -> str:
    try:
        fn()
        return "ok"
    except StorageError as exc:
        return f"{type(exc).__name__}: {exc}"


def main() -> int:
    directory = Path(sys.argv[1])
    comm = hpc.world()
    rank = comm.Get_rank()
    d = hpc.CartDecomposition((9, 7, 5), periodic=False, halo=1)
    u = d.allocate(np.float32)
    d.interior(u)[...] = np.arange(9 * 7 * 5, dtype=np.float32).reshape(9, 7, 5)[d.local_slices]
    path = directory / "small.h5"
    lines = []
    for attrs in ({"step": 1, "old": "x"}, {"step": 2}):  # the second reuses the dataset
        write_array(path, "u", u, d, attrs=attrs)
        back = read_array(path, "u", d)
        same = np.array_equal(d.interior(back), d.interior(u)) and back.dtype == np.float32
        lines.append(f"read back {same}")
    lines.append(f"no directory: {_outcome(lambda: write_array(directory / 'no/x.h5', 'u', u, d))}")
    lines.append(f"missing: {_outcome(lambda: read_array(path, 'v', d))}")
    other = hpc.CartDecomposition((9, 7, 4), periodic=False, halo=1)
    lines.append(f"layout: {_outcome(lambda: read_array(path, 'u', other))}")
    lines.append(f"no file: {_outcome(lambda: read_array(directory / 'none.h5', 'u', d))}")
    everyone = comm.gather(lines, root=0)
    if rank == 0:
        print("\n".join(f"rank {r}: {line}" for r, mine in enumerate(everyone) for line in mine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
