"""Inner equi-join throughput of int64 keys with payloads against DuckDB and polars, same run.

Build side: ``--build`` rows with distinct keys (a random permutation) and an int64 payload;
probe side: ``--probe`` rows whose keys are drawn from a range twice the build keys' (about
half find a match) with an int64 payload. Every contender computes the same answer, the
match count and the sum of both payloads over the matches, so each materialises the join.
Ours: every rank generates its share of both sides; the exchange is planned as the SQL
engine plans a join (:class:`hpc.domains.sql.engine.QueryOptions`): the smaller side is
all-gathered (broadcast) when it has at most ``broadcast_rows`` rows in all or a quarter of
the other side's, and sends the other ranks at most twice the other side's bytes, else both sides
are hash-partitioned by key over the ranks (the all-to-all shuffle) by the engine's join
exchanges (``physical.skew_join``: the rows of a key heavy enough to overload its rank stay
where they are and the other side's rows of it go to every rank; ``heavy_stayed`` records
it); then the local numba hash
join, its table built on the smaller side as the engine does, and the payloads materialised
as the engine's join operator materialises its sides (``physical.join._rows_of``: a side whose
rows are all of its rows in order, as when every probe row matches one build row, is kept as
it is, not copied; ``side_kept`` records it) before they are summed (all timed). Peers on
rank 0 over the whole tables, DuckDB with as many threads as our ranks x numba threads.
``ratio``: our tuples per second (probe + build rows over seconds) over DuckDB's.

``--backend gpu`` (one process; other ranks wait): the four columns are copied to the device
once, untimed, and ours is :func:`hpc.domains.sql.gpu_ops.hash_join` plus the payload gathers
and sums, timed after a warm-up with a device synchronisation. Its bandwidth fraction counts
the bytes the join cannot avoid (both sides' keys and payloads read once, 16 bytes a row; per
match the pair written and read back and two payloads gathered, 48 bytes) over the seconds,
against a measured device-to-device copy (bytes read + written per second,
:mod:`.device_peak`). Without DuckDB on the machine ours runs alone (``peers`` says why).

Fair cores: the peers' worker threads are started with every core allowed
(:func:`~.timing.all_cores`: under ``mpirun``'s default binding rank 0 owns one core), the
other ranks sleep while they run (the timing loop waits without spinning), and ``affinity``
records the cores both sides' threads could use, measured with ``sched_getaffinity``.

``--sweep`` adds the workload space: build sizes ``--sweep-build`` x probe sizes
``--sweep-probe`` (1e3 to 1e8) x key distributions ``--sweep-keys``: ``uniform`` (as above)
and ``skewed`` (probe keys Zipf-distributed over the build keys, exponent 1.2: the hottest key
draws about a sixth of the probe rows: on 2 ranks not heavy by the engine's rule, so the hash
shuffle sends all of them to one rank; from 4 ranks it stays).
DuckDB is the peer (polars is left out of the grid); every point checks that both computed
the same answer. Points run smallest first; one whose tables would not fit half of the memory
is skipped with the reason, as are those left when ``--sweep-budget`` is spent. A table line
per point on stderr, every point under ``sweep`` and the point of lowest ratio under
``worst``.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import world

from .timing import (
    affinity_record,
    all_cores,
    cpus_of,
    machine_record,
    parse_floats,
    print_point,
    thread_ids,
    time_interleaved,
    worst_point,
)

_ZIPF = 1.2  # exponent of the skewed probe keys

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
    p.add_argument(
        "--broadcast-rows",
        type=float,
        default=None,
        help="largest side broadcast instead of shuffled (default: the SQL engine's; 0: always"
        " shuffle)",
    )
    p.add_argument("--keys", default="uniform", choices=["uniform", "skewed"], help="probe keys")
    p.add_argument("--sweep", action="store_true", help="also the build x probe x keys grid")
    p.add_argument("--sweep-build", default="1e3,1e5,1e7,1e8", help="build rows of --sweep")
    p.add_argument("--sweep-probe", default="1e3,1e5,1e7,1e8", help="probe rows of --sweep")
    p.add_argument("--sweep-keys", default="uniform,skewed", help="key distributions of --sweep")
    p.add_argument(
        "--sweep-budget", type=float, default=1500.0, help="seconds; later points skipped (1500)"
    )


def _tables(
    n_probe: int, n_build: int, keys: str = "uniform"
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(20261203)
    build = {
        "k": rng.permutation(n_build).astype(np.int64) * 2 + 1,
        "q": rng.integers(0, 1000, n_build, dtype=np.int64),
    }
    if keys == "skewed":
        # Zipf ranks over the build keys (every probe row matches; a few keys take most rows)
        hot = (rng.zipf(_ZIPF, n_probe) - 1) % n_build
        k = build["k"][hot]
    elif keys == "uniform":
        # odd keys below 4 * n_build: about half fall among the build keys (odd, < 2 * n_build)
        k = rng.integers(0, 4 * n_build, n_probe, dtype=np.int64) | 1
    else:
        raise ValueError(f"keys {keys!r}: expected 'uniform' or 'skewed'")
    probe = {"k": k, "p": rng.integers(0, 1000, n_probe, dtype=np.int64)}
    return probe, build


def _peers(
    probe: dict[str, np.ndarray],
    build: dict[str, np.ndarray],
    threads: int,
    polars: bool,
    answer: dict[str, Any],
    cpus: list[int] | None = None,
    started: set[int] | None = None,
) -> tuple[list[str], list[Any]]:
    """DuckDB's and (optionally) polars' join of the same tables, each storing its answer;
    the cores the peers' threads (those they start here and the caller's) may use into
    ``cpus`` and the ids of the threads they started into ``started``."""
    import duckdb
    import pyarrow as pa

    before = thread_ids()
    with all_cores():  # its threads on every core, not rank 0's one under mpirun
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
        if polars:
            import polars as pl

            pl.thread_pool_size()  # polars starts its pool at first use: here, on every core
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
    new = thread_ids() - before
    if cpus is not None:
        cpus[:] = cpus_of(new | {threading.get_native_id()})
    if started is not None:
        started |= new
    return names, fns


def _run_gpu(args: argparse.Namespace) -> dict[str, Any]:
    """Local. Ours on the device (gpu_ops hash join + gathers) against DuckDB and polars."""
    import cupy as cp
    from hpc.domains.sql import gpu_ops

    from .device_peak import copy_bandwidth

    n_probe, n_build = int(args.probe), int(args.build)
    probe, build = _tables(n_probe, n_build)
    dp = {n: cp.asarray(a) for n, a in probe.items()}
    db = {n: cp.asarray(a) for n, a in build.items()}
    answer: dict[str, Any] = {}

    def ours() -> None:
        left, right = gpu_ops.hash_join(cp, dp["k"], db["k"])
        total = dp["p"][left].sum() + db["q"][right].sum()
        answer["ours"] = [int(len(left)), int(total)]  # int(): waits for the device

    peers: dict[str, Any] = {}
    try:
        names, fns = _peers(probe, build, os.cpu_count() or 1, not args.no_polars, answer)
    except ImportError as exc:  # a GPU machine's image may lack the peers: ours alone
        names, fns = [], []
        peers["duckdb"] = {"error": f"{type(exc).__name__}: {exc}"}
    sync = cp.cuda.Device().synchronize
    times = time_interleaved(MPI.COMM_SELF, [ours, *fns], reps=args.reps, warmup=1, sync=sync)
    tuples = n_probe + n_build
    matches = answer["ours"][0]
    moved = 16 * tuples + 48 * matches
    copy_gbps = copy_bandwidth(cp) / 1e9
    for n, t in zip(names, times[1:], strict=True):
        peers[n] = {"seconds": t, "tuples_per_s": tuples / t}
    return {
        "bench": "join",
        "backend": "gpu",
        "ranks": 1,
        "size": {
            "probe": n_probe,
            "build": n_build,
            "matches": matches,
            "duckdb_threads": os.cpu_count() or 1,
        },
        "ours": {"seconds": times[0], "tuples_per_s": tuples / times[0]},
        "peers": peers,
        "ratio": times[1] / times[0] if names else None,
        "limits": {
            "answers_agree": all(answer[n] == answer["ours"] for n in names) if names else None,
            "bytes_moved": moved,
            "GBps": moved / times[0] / 1e9,
            "device_copy_GBps": copy_gbps,
            "bandwidth_fraction": moved / times[0] / 1e9 / copy_gbps,
        },
    }


def _exchange_plan(n_probe: int, n_build: int, broadcast_rows: int, size: int) -> str:
    """How the engine moves an inner join's rows (the planner's rule with both sides' sizes
    known, 16 bytes a row each: :func:`~hpc.domains.sql.optimizer.distribute.
    broadcast_beats_hashing`): ``broadcast_probe`` (the probe side all-gathered, where it is
    the smaller), ``broadcast_build``, else ``shuffle``."""
    from hpc.domains.sql.optimizer.distribute import broadcast_beats_hashing

    if size == 1:
        return "local"

    def small(rows: int, others: int) -> bool:
        return broadcast_beats_hashing(rows, others, size, broadcast_rows, 16 * rows,
                                       16 * others)

    if n_probe < n_build and small(n_probe, n_build):
        return "broadcast_probe"
    if small(n_build, n_probe):
        return "broadcast_build"
    return "shuffle"


def _cpu_point(
    comm: Any,
    n_probe: int,
    n_build: int,
    keys: str,
    reps: int,
    polars: bool,
    broadcast_rows: float | None = None,
) -> dict[str, Any]:
    """Collective. Ours (the engine's exchange + local hash join) against DuckDB (and polars)
    on one table pair, the peers on rank 0 over the whole tables."""
    import numba
    from hpc.domains.sql import Column, hash_join
    from hpc.domains.sql.engine import QueryOptions
    from hpc.domains.sql.exchange import allgather_columns
    from hpc.domains.sql.physical.join import Side, _rows_of
    from hpc.domains.sql.physical.skew_join import skew_exchanges

    rank, size = comm.Get_rank(), comm.Get_size()
    probe, build = _tables(n_probe, n_build, keys)  # the same tables on every rank
    mine_p = slice(rank * n_probe // size, (rank + 1) * n_probe // size)
    mine_b = slice(rank * n_build // size, (rank + 1) * n_build // size)
    local_p = {n: Column(a[mine_p].copy(), "int") for n, a in probe.items()}
    local_b = {n: Column(a[mine_b].copy(), "int") for n, a in build.items()}
    if rank != 0:  # only rank 0 runs the peers over the whole tables
        probe, build = {}, {}
    answer: dict[str, Any] = {}
    kept = [False]  # whether a side was kept as it is, ungathered (the last run's)
    stayed = [False]  # whether heavy keys' rows stayed on their ranks (the last run's)

    if broadcast_rows is None:
        broadcast_rows = QueryOptions().broadcast_rows
    plan = _exchange_plan(n_probe, n_build, int(broadcast_rows), size)

    def ours() -> None:
        p, b = local_p, local_b
        if plan == "broadcast_build":  # every rank joins its probe rows against all builds
            b = allgather_columns(local_b, comm)
        elif plan == "broadcast_probe":
            p = allgather_columns(local_p, comm)
        elif plan == "shuffle":  # the engine's join exchanges: both sides hashed, except
            # the rows of heavy keys, which stay on their ranks (physical.skew_join)
            sides = [(local_p, len(local_p["k"]), [local_p["k"]]),
                     (local_b, len(local_b["k"]), [local_b["k"]])]
            stay, ((p, _), (b, _)) = skew_exchanges(sides, None, comm, int(broadcast_rows),
                                                    nulls_meet=False)
            stayed[0] = stay is not None
        if len(b["k"]) <= len(p["k"]):
            left, right = hash_join(p["k"].values, b["k"].values)
        else:  # the table on the smaller side (as the engine builds it), pairs swapped back
            right, left = hash_join(b["k"].values, p["k"].values)
        # the payloads materialised as the engine's join materialises its two sides
        # (physical.join._rows_of, timed with its test): a side whose rows are all of its
        # rows in order (every probe row matched once, pairs in probe order) is kept as it
        # is, as a pipelined engine reads it; the other side's column is gathered
        pp = _rows_of(Side({"p": p["p"]}, len(p["p"])), left)["p"]
        qq = _rows_of(Side({"q": b["q"]}, len(b["q"])), right)["q"]
        kept[0] = pp is p["p"] or qq is b["q"]
        total = int(pp.values.sum() + qq.values.sum())
        answer["ours"] = comm.allreduce(np.array([len(left), total]), op=MPI.SUM).tolist()

    threads = min(os.cpu_count() or 1, size * numba.get_num_threads())
    peer_cpus: list[int] = []
    peer_threads: set[int] = set()
    if rank == 0:
        peer_names, peer_fns = _peers(
            probe, build, threads, polars, answer, peer_cpus, peer_threads
        )
    else:  # the peers run on rank 0; the other ranks keep the timing loop's barriers
        peer_names = ["duckdb"] + (["polars"] if polars else [])
        peer_fns = [lambda: None] * len(peer_names)
    names = ["ours", *peer_names]
    fns = [ours, *peer_fns]
    times = time_interleaved(comm, fns, reps=reps, warmup=1)
    tuples = n_probe + n_build
    rates = {n: tuples / t for n, t in zip(names, times, strict=True)}
    agree = comm.bcast(all(answer[n] == answer["ours"] for n in names if n in answer)
                       if rank == 0 else None, root=0)  # fmt: skip
    return {
        "keys": keys,
        "exchange": plan,
        "size": {
            "probe": n_probe,
            "build": n_build,
            "matches": answer["ours"][0],
            "duckdb_threads": threads,
        },  # fmt: skip
        "ours": {"seconds": times[0], "tuples_per_s": rates["ours"]},
        "peers": {
            n: {"seconds": t, "tuples_per_s": rates[n]}
            for n, t in zip(names[1:], times[1:], strict=True)
        },  # fmt: skip
        "ratio": rates["ours"] / rates["duckdb"],
        "answers_agree": agree,
        # some rank kept a side's payload as it is (its rows: all of them, in order)
        "side_kept": bool(comm.allreduce(int(kept[0]), op=MPI.MAX)),
        # the shuffle kept heavy keys' rows where they were (the engine's skewed join)
        "heavy_stayed": stayed[0],
        "peer_cpus": comm.bcast(peer_cpus, root=0),
        "peer_threads": sorted(peer_threads),
    }


def _footprint(n_probe: int, n_build: int, size: int) -> int:
    """Bytes a point holds at its peak, 16 a row per copy: the whole tables on every rank while
    they are made, our shares and their shuffled copies, DuckDB's hash table and result (peak
    measured at 1.1e8 rows on 2 ranks: about 5.1 copies)."""
    return 16 * (n_probe + n_build) * (size + 4)


def _half_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Every point of build x probe x keys within ``--sweep-budget`` seconds."""
    comm = world()
    builds = [int(v) for v in parse_floats(args.sweep_build)]
    probes = [int(v) for v in parse_floats(args.sweep_probe)]
    keys = [k.strip() for k in args.sweep_keys.split(",") if k.strip()]
    for k in keys:
        if k not in ("uniform", "skewed"):
            raise ValueError(f"--sweep-keys: {k!r} is not 'uniform' or 'skewed'")
    start = time.perf_counter()
    points: list[dict[str, Any]] = []
    # smallest joins first, both key distributions at each size: a spent budget drops the
    # largest points of every distribution rather than a whole distribution
    grid = sorted(
        ((b, p, k) for b in builds for p in probes for k in keys),
        key=lambda g: (g[0] + g[1], g[0], keys.index(g[2])),
    )
    for n_build, n_probe, key in grid:
        base = {"keys": key, "build": n_build, "probe": n_probe}
        if comm.bcast(time.perf_counter() - start, root=0) > args.sweep_budget:
            points.append({**base, "skipped": f"budget of {args.sweep_budget:g} s spent"})
            continue
        need = _footprint(n_probe, n_build, comm.Get_size())
        if need > _half_memory():
            points.append({**base, "skipped": f"needs about {need / 1e9:.1f} GB, over half of"
                           f" the memory ({_half_memory() / 1e9:.1f} GB)"})  # fmt: skip
            continue
        # small joins take microseconds: more repetitions for a stable median
        reps = int(min(50, max(args.reps, 2e7 // (n_probe + n_build))))
        point = _cpu_point(comm, n_probe, n_build, key, reps, False, args.broadcast_rows)
        point.pop("peer_threads")
        point.update(base, reps=reps)
        points.append(point)
        print_point(
            comm,
            f"join {key} build {n_build:.0e} probe {n_probe:.0e} {point['exchange']}",
            point["ours"]["tuples_per_s"] / 1e6,
            point["peers"]["duckdb"]["tuples_per_s"] / 1e6,
            point["ratio"],
            "Mt/s",
        )
    rated = [{**p, "ratio": {"duckdb": p["ratio"]}} for p in points if "ratio" in p]
    worst = worst_point(
        rated, "duckdb",
        ("keys", "build", "probe", "exchange", "size", "answers_agree", "side_kept",
         "heavy_stayed"),
    )
    return {"points": points, "worst": worst, "seconds": time.perf_counter() - start}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Time the join: ours (shuffle + local hash join), DuckDB, polars; with
    ``--sweep`` also the grid (``sweep``) and its worst point (``worst``)."""
    from hpc.backend import get_backend

    comm = world()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    want = getattr(args, "backend", "cpu") or "cpu"
    if want != "cpu" and get_backend(want).is_gpu:  # one process on one device
        out = _run_gpu(args) if comm.Get_rank() == 0 else None
        return comm.bcast(out, root=0)
    head = _cpu_point(
        comm,
        int(args.probe),
        int(args.build),
        args.keys,
        args.reps,
        not args.no_polars,
        args.broadcast_rows,
    )
    peer_cpus = head.pop("peer_cpus")
    peer_threads = head.pop("peer_threads")
    record: dict[str, Any] = {
        "bench": "join",
        "backend": "cpu",
        "ranks": comm.Get_size(),
        "keys": head["keys"],
        "exchange": head["exchange"],
        "size": head["size"],
        "ours": head["ours"],
        "peers": head["peers"],
        "ratio": head["ratio"],
        "limits": {"answers_agree": head["answers_agree"]},
        "side_kept": head["side_kept"],
        "heavy_stayed": head["heavy_stayed"],
    }
    if getattr(args, "sweep", False):
        sweep = _sweep(args)
        record["sweep"] = sweep["points"]
        record["worst"] = sweep["worst"]
        record["sweep_seconds"] = sweep["seconds"]
    record["affinity"] = affinity_record(comm, peer_cpus, peer_threads=peer_threads)
    record["machine"] = machine_record(load)
    return record
