"""Run under mpirun: read_parquet parts cover every row once, in order, and string codes
decode the same on every rank."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow.parquet as pq
from hpc.domains.sql import read_parquet

from hpc.comm import world


def main() -> int:
    comm = world()
    for name in ("t1.parquet", "t7.parquet"):
        path = f"{sys.argv[1]}/{name}"
        t = read_parquet(path, comm=comm)
        ref = pq.read_table(path)
        keys = np.concatenate(comm.allgather(t["k"].values))
        assert np.array_equal(keys, ref.column("k").to_numpy()), name
        dictionaries = comm.allgather(t["s"].dictionary.tolist())
        assert all(d == dictionaries[0] for d in dictionaries), "dictionaries differ"
        decoded = t["s"].dictionary[t["s"].values].tolist()
        want = ref.column("s").to_pylist()
        lo = len(np.concatenate(comm.allgather(t["k"].values)[: comm.rank] or [np.empty(0)]))
        assert decoded == want[lo : lo + t.num_rows], name
    if comm.rank == 0:
        print(f"parquet: parts cover the file on {comm.size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
