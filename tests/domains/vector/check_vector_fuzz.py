"""Under mpirun: every drawn case (a pickle from the parent, which drew them) searched with a
ShardedIndex of FlatIndex shards equals the one-process FlatIndex bit for bit and the brute
force reference. Rows are split over the ranks at the case's cuts (some ranks may hold none)."""

from __future__ import annotations

import pickle
import sys
import traceback

import numpy as np
from hpc.domains.vector import FlatIndex, ShardedIndex

from hpc.comm import world
from tests.jobs import report


def run_case(comm, case: dict) -> None:
    a = case["arrays"]
    bounds = [0, *case["cuts"], case["n"]][: comm.size + 1]
    bounds[-1] = case["n"]
    lo, hi = (
        (bounds[comm.rank], bounds[comm.rank + 1])
        if comm.rank < len(bounds) - 1
        else (case["n"], case["n"])
    )
    shard = ShardedIndex(FlatIndex(case["dim"], case["metric"], db_block=case["db_block"]), comm)
    shard.add(a["x"][lo:hi], a["ids"][lo:hi] if case["own_ids"] else None)
    assert shard.ntotal == case["n"]
    if a["removed"] is not None:
        assert shard.remove(a["removed"]) == a["removed"].size
    d, i = shard.search(a["q"] if comm.rank == 0 else None, case["k"], filter=a["allow"])
    sd, si = case["single"]
    wd, wi = case["want"]
    assert np.array_equal(i, si), f"ids differ from one process:\n{i}\n{si}"
    assert d.tobytes() == sd.tobytes(), f"distances differ from one process:\n{d}\n{sd}"
    assert np.array_equal(i, wi), f"ids differ from brute force:\n{i}\n{wi}"
    assert np.array_equal(d, wd.astype(np.float32)), "distances differ from brute force"


def main() -> int:
    comm = world()
    with open(sys.argv[1], "rb") as fh:
        cases = pickle.load(fh)
    failures = []
    for j, case in enumerate(cases):
        try:
            run_case(comm, case)
        except AssertionError:
            shown = {k: v for k, v in case.items() if k not in ("arrays", "single", "want")}
            failures.append(f"case {j} {shown}:\n{traceback.format_exc()}")
    return report(comm, failures, f"sharded fuzz: {len(cases)} cases on {comm.size} ranks: PASS")


if __name__ == "__main__":
    sys.exit(main())
