"""Small arrays written through rank 0, where every rank's check travels in the gather.

The job (this file run under ``mpirun``) writes fresh random arrays of several dtypes and
compares the file, read back with plain h5py on rank 0, with the global array they were cut
from; then makes one rank's array wrong (shape, dtype kind, a dtype other than rank 0's) and
checks that every rank raises the same :class:`StorageError` and that no file was created.
"""

from __future__ import annotations

import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from hpc.io import StorageError, write_array

import hpc
from hpc.comm import world
from tests.conftest import run_mpi


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [2, 3])
def test_small_writes_agree_on_data_and_errors(tmp_path, nranks):
    proc = run_mpi(nranks, [str(Path(__file__)), str(tmp_path)], timeout=180)
    lines: dict[int, list[str]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("rank "):
            rank, _, text = line[5:].partition(": ")
            lines.setdefault(int(rank), []).append(text)
    assert sorted(lines) == list(range(nranks)), proc.stdout
    assert all(lines[r] == lines[0] for r in lines), proc.stdout  # word for word
    out = lines[0]
    assert out[:4] == ["same float64", "same float32", "same int16", "same complex128"], out
    assert out[4].startswith("shape: StorageError: rank 1: local array of shape"), out[4]
    assert out[5].startswith("object: StorageError: rank 1: dtype object cannot"), out[5]
    assert out[6].startswith("kind: StorageError: rank 1: dtype int64 differs from"), out[6]
    assert out[7:] == ["no file left: True"], out


def _outcome(fn) -> str:
    try:
        fn()
        return "ok"
    except StorageError as exc:
        assert exc.all_ranks
        return f"{type(exc).__name__}: {exc}"


def main() -> int:
    directory = Path(sys.argv[1])
    comm = world()
    rank = comm.Get_rank()
    shape = (23, 9, 7)
    d = hpc.CartDecomposition(shape, periodic=False, halo=1)
    rng = np.random.default_rng(comm.bcast(int(np.random.SeedSequence().entropy % 2**32)))
    lines = []
    path = directory / "small.h5"
    for dtype in (np.float64, np.float32, np.int16, np.complex128):
        g = (rng.standard_normal(shape) * 1000).astype(dtype)
        if np.dtype(dtype).kind == "c":
            g = g + 1j * rng.standard_normal(shape)
        u = d.allocate(dtype, fill=7)  # ghosts must not reach the file
        d.interior(u)[...] = g[d.local_slices]
        write_array(path, "u", u, d, attrs={"n": 1})
        same = None
        if rank == 0:
            with h5py.File(path) as f:
                same = f["u"].dtype == dtype and np.array_equal(f["u"][...], g)
        lines.append(f"same {np.dtype(dtype).name}" if comm.bcast(same) else "differs")
    bad = directory / "bad.h5"
    good = d.allocate(np.float64)
    wrong_shape = np.zeros(tuple(n + 1 for n in d.ghost_shape)) if rank == 1 else good
    lines.append(f"shape: {_outcome(lambda: write_array(bad, 'u', wrong_shape, d))}")
    objects = d.allocate(object) if rank == 1 else good
    lines.append(f"object: {_outcome(lambda: write_array(bad, 'u', objects, d))}")
    other = d.allocate(np.int64) if rank == 1 else good  # same itemsize, other kind
    lines.append(f"kind: {_outcome(lambda: write_array(bad, 'u', other, d))}")
    lines.append(f"no file left: {not bad.exists()}")
    everyone = comm.gather(lines, root=0)
    if rank == 0:
        print("\n".join(f"rank {r}: {line}" for r, mine in enumerate(everyone) for line in mine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
