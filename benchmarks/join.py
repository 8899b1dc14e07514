"""Inner equi-join throughput of int64 keys with payloads against DuckDB and polars, same run.

Build side: ``--build`` rows with distinct keys (a random permutation) and an int64 payload;
probe side: ``--probe`` rows whose keys are drawn from a range twice the build keys' (about
half find a match) with an int64 payload. Every contender computes the same answer, the
match count and the sum of both payloads over the matches, so each materialises the join.
Ours: every rank generates its share of both sides, they are hash-partitioned by key over
the ranks (the all-to-all shuffle, timed) and joined locally (numba build/probe). Peers on
rank 0 over the whole tables, DuckDB with as many threads as our ranks x numba threads.
``ratio``: our tuples per second (probe + build rows over seconds) over DuckDB's.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import world

from .timing import time_interleaved

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench join``."""
    p.add_argument("--probe", type=float, default=2e7, help="probe rows (2e7)")
    p.add_argument("--build", type=float, default=2e6, help="build rows (2e6)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-polars", action="store_true")


def _tables(n_probe: int, n_build: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(20261203)
    build = {"k": rng.permutation(n_build).astype(np.int64) * 2 + 1,
             "q": rng.integers(0, 1000, n_build, dtype=np.int64)}
    # odd keys below 4 * n_build: about half fall among the build keys (odd, below 2 * n_build)
    probe = {"k": rng.integers(0, 4 * n_build, n_probe, dtype=np.int64) | 1,
             "p": rng.integers(0, 1000, n_probe, dtype=np.int64)}
    return probe, build


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Time the join: ours (shuffle + local hash join), DuckDB, polars."""
    import numba
    from hpc.domains.sql import Column, hash_join
    from hpc.domains.sql.exchange import partition_by_keys

    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    n_probe, n_build = int(args.probe), int(args.build)
    probe, build = _tables(n_probe, n_build)  # the same tables on every rank: each takes a share
    mine_p = slice(rank * n_probe // size, (rank + 1) * n_probe // size)
    mine_b = slice(rank * n_build // size, (rank + 1) * n_build // size)
    local_p = {n: Column(a[mine_p].copy(), "int") for n, a in probe.items()}
    local_b = {n: Column(a[mine_b].copy(), "int") for n, a in build.items()}
    answer: dict[str, Any] = {}

    def ours() -> None:
        p = partition_by_keys(local_p, [local_p["k"]], comm)
        b = partition_by_keys(local_b, [local_b["k"]], comm)
        left, right = hash_join(p["k"].values, b["k"].values)
        total = int(p["p"].values[left].sum() + b["q"].values[right].sum())
        answer["ours"] = comm.allreduce(np.array([len(left), total]), op=MPI.SUM).tolist()

    threads = min(os.cpu_count() or 1, size * numba.get_num_threads())
    fns = [ours]
    names = ["ours"]
    if rank == 0:
        import duckdb
        import pyarrow as pa

        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
        con.register("probe", pa.table(probe))
        con.register("build", pa.table(build))
        sql = "SELECT count(*), sum(p) + sum(q) FROM probe JOIN build USING (k)"

        def duck() -> None:
            answer["duckdb"] = list(con.execute(sql).fetchone())

        fns.append(duck)
        names.append("duckdb")
    else:
        fns.append(lambda: None)
        names.append("duckdb")
    has_polars = not args.no_polars
    if has_polars:
        if rank == 0:
            import polars as pl

            pp, pb = pl.DataFrame(probe), pl.DataFrame(build)

            def polars() -> None:
                j = pp.join(pb, on="k", how="inner")
                answer["polars"] = [j.height, int(j["p"].sum() + j["q"].sum())]

            fns.append(polars)
        else:
            fns.append(lambda: None)
        names.append("polars")
    times = time_interleaved(comm, fns, reps=args.reps, warmup=1)
    tuples = n_probe + n_build
    rates = {n: tuples / t for n, t in zip(names, times, strict=True)}
    agree = comm.bcast(all(answer[n] == answer["ours"] for n in names if n in answer)
                       if rank == 0 else None, root=0)
    return {
        "bench": "join",
        "backend": "cpu",
        "ranks": size,
        "size": {"probe": n_probe, "build": n_build, "matches": answer["ours"][0],
                 "duckdb_threads": threads},
        "ours": {"seconds": times[0], "tuples_per_s": rates["ours"]},
        "peers": {n: {"seconds": t, "tuples_per_s": rates[n]}
                  for n, t in zip(names[1:], times[1:], strict=True)},
        "ratio": rates["ours"] / rates["duckdb"],
        "limits": {"answers_agree": agree},
    }
