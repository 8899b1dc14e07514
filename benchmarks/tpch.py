"""TPC-H query times against DuckDB (and polars) on the same Parquet files, same run.

Ours: :func:`hpc.domains.sql.query` on every rank (each reads its row groups; joins and group-
bys shuffle between ranks). Peers on rank 0: DuckDB with as many threads as our ranks times
numba threads (capped at the cores), and polars' SQL context over lazy Parquet scans where it
can run the query. Every repetition reads the Parquet files again, for all three; one
untimed pass of all queries (ours and DuckDB) warms the process first. With
``--resident`` all three hold the tables in memory instead (ours on the backend's device: GPU
memory for ``--backend gpu``). ``--layout by-date`` reads copies of the files with the fact
tables sorted by date (a time series as it is usually written; cached beside the generated
files). Each answer is checked against DuckDB's. ``ratio`` is the
geometric mean over the queries of DuckDB's seconds over ours (above 1: we are faster); the
target is 1/1.5 on the CPU and 5 with ``--backend gpu`` (our columns and kernels on the GPU,
DuckDB on the host's cores).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from hpc.comm import world

from .timing import affinity_record, all_cores, cpus_of, thread_ids, time_interleaved

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench tpch``."""
    _add_data_arguments(p)
    p.add_argument("--queries", default=None, help="comma-separated query numbers")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions (median)")
    p.add_argument("--no-polars", action="store_true")
    p.add_argument("--resident", action="store_true",
                   help="tables read once into memory (ours: on the backend's device; DuckDB: "
                        "CREATE TABLE; polars: eager frames), so no Parquet decoding is timed")
    p.add_argument("--backend", default="cpu",
                   help="cpu (default) or gpu: where our columns and kernels run")


# How the fact tables' rows are laid out in their files: as the generator wrote them (in key
# order, every date in every row group), or sorted by date as time series are usually written
# (each row group one span of dates: row-group statistics can skip most of them)
LAYOUTS = {"generated": {}, "by-date": {"lineitem": "l_shipdate", "orders": "o_orderdate"}}


def _add_data_arguments(p: argparse.ArgumentParser) -> None:
    """``--sf``, ``--data`` and ``--layout``: the options :func:`_data` reads."""
    p.add_argument("--sf", type=float, default=1.0, help="scale factor (1)")
    p.add_argument("--data", default=None, help="Parquet directory (default: generated, cached)")
    p.add_argument("--layout", default="generated", choices=sorted(LAYOUTS),
                   help="rows as generated (default) or the fact tables sorted by date")


def _duckdb_threads(comm: Any) -> int:
    """DuckDB's thread count: as many as our ranks times numba threads, capped at the cores,
    so both engines have the same cores to use."""
    import numba

    return min(os.cpu_count() or 1, comm.Get_size() * numba.get_num_threads())


def _duckdb(path: Path, tables: Any, threads: int, resident: bool = False) -> Any:
    """A DuckDB connection on ``threads`` threads with one view per Parquet table of ``path``
    (with ``resident``, a table read into memory instead).

    Its threads start on every core of the machine: under ``mpirun`` rank 0 is bound to one
    core, and threads inherit the binding of the thread that starts them, so DuckDB's
    ``threads`` would otherwise share that one core."""
    import duckdb

    with all_cores():
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
    what = "TABLE" if resident else "VIEW"
    for t in tables:
        con.execute(f"CREATE {what} {t} AS SELECT * FROM read_parquet('{path}/{t}.parquet')")
    return con


def _geomean(values: Any) -> float:
    """The geometric mean of positive numbers."""
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _data(args: argparse.Namespace, comm: Any) -> Path:
    from hpc.domains.sql.tpch import TABLES, generate

    if args.data:
        if getattr(args, "layout", "generated") != "generated":
            raise ValueError("--layout rewrites the generated tables: not with --data")
        return Path(args.data)
    root = Path(os.environ.get("HPC_CACHE", Path.home() / ".cache" / "hpc"))
    path = root / f"tpch-sf{args.sf:g}"
    if comm.Get_rank() == 0 and not all((path / f"{t}.parquet").exists() for t in TABLES):
        generate(args.sf, path)
    layout = getattr(args, "layout", "generated")
    if layout != "generated":
        sorted_path = path.with_name(f"{path.name}-{layout}")
        if comm.Get_rank() == 0 and not all(
                (sorted_path / f"{t}.parquet").exists() for t in TABLES):
            _lay_out(path, sorted_path, LAYOUTS[layout])
        path = sorted_path
    comm.Barrier()
    return path


def _lay_out(source: Path, out: Path, sort_by: dict[str, str]) -> None:
    """The tables of ``source`` in ``out``: those of ``sort_by`` rewritten sorted by their
    column (DuckDB's Parquet writer, snappy, row groups as large as the source's first),
    the others linked. Files appear only complete (written aside, then renamed)."""
    import duckdb
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    for f in sorted(source.glob("*.parquet")):
        target = out / f.name
        if target.exists():
            continue
        column = sort_by.get(f.stem)
        if column is None:
            os.symlink(f.resolve(), target)
            continue
        rows = pq.ParquetFile(f).metadata.row_group(0).num_rows
        aside = out / f".{f.name}.tmp"
        duckdb.connect().execute(
            f"COPY (SELECT * FROM read_parquet('{f}') ORDER BY {column}) TO '{aside}' "
            f"(FORMAT PARQUET, COMPRESSION SNAPPY, ROW_GROUP_SIZE {rows})")
        aside.replace(target)


def _polars_runner(path: Path, sql: str, frames: dict[str, Any] | None) -> Any:
    import polars as pl

    def run() -> Any:
        ctx = pl.SQLContext()
        for f in path.glob("*.parquet"):
            ctx.register(f.stem, frames[f.stem].lazy() if frames else pl.scan_parquet(f))
        return ctx.execute(sql, eager=True)

    try:
        run()
    except Exception:  # noqa: BLE001 - a query polars' SQL cannot run is reported as such
        return None
    return run


def _synchronised(backend: Any, result: Any) -> Any:
    backend.synchronize()  # the result is on the host already; this only settles the queue
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Time each query: ours, DuckDB, polars."""
    from hpc.domains.sql import Catalog, QueryOptions, query
    from hpc.domains.sql.compare import same_rows
    from hpc.domains.sql.tpch import QUERIES, SUPPORTED

    from hpc.backend import get_backend
    from hpc.memory import keep_freed_memory

    keep_freed_memory(arrow=True)  # as the hpc command does for SQL: Arrow's pages reused
    comm = world()
    rank0 = comm.Get_rank() == 0
    backend = get_backend(args.backend)
    options = QueryOptions(backend=backend)
    path = _data(args, comm)
    catalog = Catalog.from_directory(path)
    if args.resident:
        catalog = catalog.in_memory(backend, comm)
    wanted = [int(q) for q in args.queries.split(",")] if args.queries else list(SUPPORTED)
    threads = _duckdb_threads(comm)
    before = thread_ids()
    con = _duckdb(path, catalog.tables, threads, args.resident) if rank0 else None
    peer_threads = thread_ids() - before if rank0 else set()  # DuckDB's, started on connect
    frames = None
    if rank0 and args.resident and not args.no_polars:
        import polars as pl

        frames = {f.stem: pl.read_parquet(f) for f in path.glob("*.parquet")}
    # one pass of every query before any timing: the process's memory (the heap's pages,
    # Arrow's arenas) and compiled kernels are warm for the first query as for the last;
    # the first query of a cold process otherwise pays page faults that later ones do not
    for q in wanted:
        query(QUERIES[q], catalog, comm, options)
        if rank0:
            con.execute(QUERIES[q]).fetchall()
    per_query: dict[str, Any] = {}
    ratios = []
    for q in wanted:
        sql = QUERIES[q]
        ours = query(sql, catalog, comm, options)
        correct = None
        polars = None
        if rank0:
            correct = same_rows(ours.to_pandas(), con.execute(sql).df(), "order by" in sql)
            polars = None if args.no_polars else _polars_runner(path, sql, frames)
        has_polars = comm.bcast(polars is not None, root=0)
        fns = [lambda sql=sql: _synchronised(backend, query(sql, catalog, comm, options)),
               (lambda sql=sql: con.execute(sql).fetchall()) if rank0 else (lambda: None)]
        if has_polars:
            fns.append(polars if rank0 else (lambda: None))
        times = time_interleaved(comm, fns, reps=args.reps, warmup=1)
        entry = {"ours_s": times[0], "duckdb_s": times[1],
                 "polars_s": times[2] if has_polars else None,
                 "speed_vs_duckdb": times[1] / times[0],
                 "equal_to_duckdb": comm.bcast(correct is None, root=0)}
        if correct is not None:
            entry["difference"] = correct
        per_query[f"Q{q}"] = entry
        ratios.append(times[1] / times[0])
    geo = _geomean(ratios)
    geo_time = lambda key: _geomean(e[key] for e in per_query.values())  # noqa: E731
    ran_polars = [k for k, e in per_query.items() if e["polars_s"] is not None]
    return {
        "bench": "tpch",
        "backend": backend.name,
        "ranks": comm.Get_size(),
        "size": {"sf": args.sf, "queries": wanted, "duckdb_threads": threads,
                 "resident": bool(args.resident), "layout": args.layout},
        "ours": {"geomean_s": geo_time("ours_s")},
        "peers": {"duckdb": {"geomean_s": geo_time("duckdb_s"), "threads": threads},
                  "polars": {"queries_run": ran_polars,
                             "geomean_s": geo_time("polars_s") if len(ran_polars) == len(
                                 per_query) else None}},
        "ratio": geo,
        "limits": {"target_ratio": 1 / 1.5 if not backend.is_gpu else 5.0},
        "affinity": affinity_record(comm, cpus_of(peer_threads) if rank0 else [],
                                    peer_threads=peer_threads),
        "queries": per_query,
    }
