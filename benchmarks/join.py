"""Inner equi-join throughput of int64 keys with payloads against DuckDB and polars, same run.

Build side: ``--build`` rows with distinct keys (a random permutation) and an int64 payload;
probe side: ``--probe`` rows whose keys are drawn from a range twice the build keys' (about
half find a match) with an int64 payload. Every contender computes the same answer, the
match count and the sum of both payloads over the matches, so each materialises the join.
Ours: every rank generates its share of both sides, they are hash-partitioned by key over
the ranks (the all-to-all shuffle, timed) and joined locally (numba build/probe). Peers on
rank 0 over the whole tables, DuckDB with as many threads as our ranks x numba threads.
``ratio``: our tuples per second (probe + build rows over seconds) over DuckDB's.

``--backend gpu`` (one process; other ranks wait): the four columns are copied to the device
once, untimed, and ours is :func:`hpc.domains.sql.gpu_ops.hash_join` plus the payload gathers
and sums, timed after a warm-up with a device synchronisation. Its bandwidth fraction counts
the bytes the join cannot avoid (both sides' keys and payloads read once, 16 bytes a row; per
match the pair written and read back and two payloads gathered, 48 bytes) over the seconds,
against a measured device-to-device copy (bytes read + written per second).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import world

from .timing import all_cores, time_interleaved

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench join``."""
    p.add_argument("--probe", type=float, default=2e7, help="probe rows (2e7)")
    p.add_argument("--build", type=float, default=2e6, help="build rows (2e6)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-polars", action="store_true")
    p.add_argument(
        "--backend", default="cpu", help="cpu (default), gpu, or auto (the GPU if usable)"
    )


def _tables(n_probe: int, n_build: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(20261203)
    build = {"k": rng.permutation(n_build).astype(np.int64) * 2 + 1,
             "q": rng.integers(0, 1000, n_build, dtype=np.int64)}
    # odd keys below 4 * n_build: about half fall among the build keys (odd, below 2 * n_build)
    probe = {"k": rng.integers(0, 4 * n_build, n_probe, dtype=np.int64) | 1,
             "p": rng.integers(0, 1000, n_probe, dtype=np.int64)}
    return probe, build


def _device_copy_bandwidth(cp: Any, nbytes: int = 1 << 30, reps: int = 10) -> float:
    """Device copy rate in GB/s (bytes read + written per second), best of ``reps``."""
    src = cp.ones(nbytes // 8)
    dst = cp.empty_like(src)
    dst[...] = src
    cp.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        dst[...] = src
        cp.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best / 1e9


def _peers(
    probe: dict[str, np.ndarray], build: dict[str, np.ndarray], threads: int, polars: bool,
    answer: dict[str, Any],
) -> tuple[list[str], list[Any]]:
    """DuckDB's and (optionally) polars' join of the same tables, each storing its answer."""
    import duckdb
    import pyarrow as pa

    with all_cores():  # its threads on every core, not rank 0's one under mpirun
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
    con.register("probe", pa.table(probe))
    con.register("build", pa.table(build))
    sql = "SELECT count(*), sum(p) + sum(q) FROM probe JOIN build USING (k)"

    def duck() -> None:
        answer["duckdb"] = list(con.execute(sql).fetchone())

    names, fns = ["duckdb"], [duck]
    if polars:
        import polars as pl

        pp, pb = pl.DataFrame(probe), pl.DataFrame(build)

        def polars_join() -> None:
            j = pp.join(pb, on="k", how="inner")
            answer["polars"] = [j.height, int(j["p"].sum() + j["q"].sum())]

        names.append("polars")
        fns.append(polars_join)
    return names, fns


def _run_gpu(args: argparse.Namespace) -> dict[str, Any]:
    """Local. Ours on the device (gpu_ops hash join + gathers) against DuckDB and polars."""
    import cupy as cp
    from hpc.domains.sql import gpu_ops

    n_probe, n_build = int(args.probe), int(args.build)
    probe, build = _tables(n_probe, n_build)
    dp = {n: cp.asarray(a) for n, a in probe.items()}
    db = {n: cp.asarray(a) for n, a in build.items()}
    answer: dict[str, Any] = {}

    def ours() -> None:
        left, right = gpu_ops.hash_join(cp, dp["k"], db["k"])
        total = dp["p"][left].sum() + db["q"][right].sum()
        answer["ours"] = [int(len(left)), int(total)]  # int(): waits for the device

    names, fns = _peers(probe, build, os.cpu_count() or 1, not args.no_polars, answer)
    sync = cp.cuda.Device().synchronize
    times = time_interleaved(MPI.COMM_SELF, [ours, *fns], reps=args.reps, warmup=1, sync=sync)
    tuples = n_probe + n_build
    matches = answer["ours"][0]
    moved = 16 * tuples + 48 * matches
    copy_gbps = _device_copy_bandwidth(cp)
    return {
        "bench": "join",
        "backend": "gpu",
        "ranks": 1,
        "size": {"probe": n_probe, "build": n_build, "matches": matches,
                 "duckdb_threads": os.cpu_count() or 1},
        "ours": {"seconds": times[0], "tuples_per_s": tuples / times[0]},
        "peers": {n: {"seconds": t, "tuples_per_s": tuples / t}
                  for n, t in zip(names, times[1:], strict=True)},
        "ratio": times[1] / times[0],
        "limits": {
            "answers_agree": all(answer[n] == answer["ours"] for n in names),
            "bytes_moved": moved,
            "GBps": moved / times[0] / 1e9,
            "device_copy_GBps": copy_gbps,
            "bandwidth_fraction": moved / times[0] / 1e9 / copy_gbps,
        },
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Time the join: ours (shuffle + local hash join), DuckDB, polars."""
    import numba

    from hpc.backend import get_backend

    comm = world()
    want = getattr(args, "backend", "cpu") or "cpu"
    if want != "cpu" and get_backend(want).is_gpu:  # one process on one device
        out = _run_gpu(args) if comm.Get_rank() == 0 else None
        return comm.bcast(out, root=0)
    from hpc.domains.sql import Column, hash_join
    from hpc.domains.sql.exchange import partition_by_keys

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
        # the payloads gathered as the engine gathers a join's columns
        total = int(p["p"].gather(left).values.sum() + b["q"].gather(right).values.sum())
        answer["ours"] = comm.allreduce(np.array([len(left), total]), op=MPI.SUM).tolist()

    threads = min(os.cpu_count() or 1, size * numba.get_num_threads())
    if rank == 0:
        peer_names, peer_fns = _peers(probe, build, threads, not args.no_polars, answer)
    else:  # the peers run on rank 0; the other ranks keep the timing loop's barriers
        peer_names = ["duckdb"] + ([] if args.no_polars else ["polars"])
        peer_fns = [lambda: None] * len(peer_names)
    names = ["ours", *peer_names]
    fns = [ours, *peer_fns]
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
