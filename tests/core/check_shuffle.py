"""Run under mpirun: hpc.shuffle delivers every row exactly once, to its destination, in
(source rank, source position) order, for several dtypes, skewed and empty sends."""

from __future__ import annotations

import sys

import numpy as np

from hpc.comm import world
from hpc.shuffle import hash_partition, shuffle


def rows_of(rank: int, n: int, case: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1000 * case + rank)
    key = rng.integers(-(2**40), 2**40, n)
    if case == 1:  # skew: most rows share one key
        key[: n * 3 // 4] = 7
    return {
        "key": key,
        "src": np.full(n, rank, dtype=np.int32),
        "pos": np.arange(n, dtype=np.int64),
        "x": rng.standard_normal(n).astype(np.float32),
        "flag": rng.random(n) < 0.5,
    }


def main() -> int:
    comm = world()
    size, rank = comm.size, comm.rank
    for case, n_of in enumerate(
        (lambda r: 1000 + 37 * r, lambda r: 500, lambda r: 0 if r % 2 else 300)
    ):
        mine = rows_of(rank, n_of(rank), case)
        dest = hash_partition(mine["key"], size)
        got = shuffle(mine, dest, comm)
        # the reference: every rank rebuilds all ranks' rows and selects those sent here
        want = {name: [] for name in mine}
        for src in range(size):
            rows = rows_of(src, n_of(src), case)
            keep = hash_partition(rows["key"], size) == rank
            for name in rows:
                want[name].append(rows[name][keep])
        for name in mine:
            ref = np.concatenate(want[name])
            assert got[name].dtype == mine[name].dtype, name
            assert np.array_equal(got[name], ref), (case, name)
        total = comm.allreduce(len(got["key"]))
        assert total == sum(n_of(r) for r in range(size))
    # a destination outside the communicator is refused on the rank that passed it
    try:
        shuffle({"a": np.zeros(2)}, np.array([0, size]), comm)
    except ValueError as exc:
        assert "dest" in str(exc)
    else:
        raise AssertionError("a bad destination was accepted")
    if rank == 0:
        print(f"shuffle: rows delivered exactly once in order on {size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
