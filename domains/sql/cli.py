"""``hpc sql``: TPC-H data, TPC-H queries and ad-hoc SQL over Parquet or HDF5, on any ranks.

Examples::

    hpc sql tpch-gen --sf 1 --out tpch/
    hpc sql tpch --query 5 --data tpch/
    mpirun -n 2 hpc sql query --data tpch/ "SELECT count(*) FROM lineitem"
    hpc sql query --data tpch/ "EXPLAIN SELECT ..."
    mpirun -n 2 hpc sql convert tpch/ tpch.h5
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import hpc  # lazy: MPI starts at the first hpc.world()
from hpc.errors import on_all_ranks

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Register ``hpc sql`` on the ``hpc`` parser's subparsers."""
    sql = sub.add_parser("sql", help="columnar SQL over Parquet/HDF5 (TPC-H), distributed by MPI")
    cmds = sql.add_subparsers(dest="sql_command", metavar="COMMAND", required=True)
    g = cmds.add_parser("tpch-gen", help="generate TPC-H Parquet files (tpchgen-cli, offline)")
    g.add_argument("--sf", type=float, default=1.0, help="scale factor (1 = 6e6 lineitems)")
    g.add_argument("--out", required=True, help="output directory")
    g.set_defaults(func=_tpch_gen)
    t = cmds.add_parser("tpch", help="run TPC-H queries and print their rows")
    t.add_argument("--query", type=int, action="append", help="query number (repeatable)")
    t.add_argument("--data", required=True, help="directory of Parquet tables, or an HDF5 file")
    t.add_argument("--explain", action="store_true", help="print the plan as it ran")
    t.add_argument("--backend", default=None, help="auto, cpu or gpu (default HPC_BACKEND)")
    t.set_defaults(func=_tpch)
    q = cmds.add_parser("query", help="run one SQL query (EXPLAIN ... prints the plan)")
    q.add_argument("sql", help="the query text")
    q.add_argument("--data", required=True, help="directory of Parquet tables, or an HDF5 file")
    q.add_argument("--max-rows", type=int, default=50, help="rows to print (50)")
    q.add_argument("--backend", default=None, help="auto, cpu or gpu (default HPC_BACKEND)")
    q.set_defaults(func=_query)
    c = cmds.add_parser("convert", help="Parquet directory -> one HDF5 file of hpc.io tables")
    c.add_argument("source", help="directory of Parquet tables")
    c.add_argument("out", help="HDF5 file to write")
    c.set_defaults(func=_convert)


def _print(table: Any, max_rows: int) -> None:
    import pandas as pd

    with pd.option_context("display.max_rows", max_rows, "display.width", 160):
        print(table.to_pandas().head(max_rows).to_string(index=False))


def _tpch_gen(args: argparse.Namespace) -> int:
    from hpc.collectives import barrier

    from .tpch import generate

    if hpc.world().Get_rank() == 0:
        t0 = time.perf_counter()
        out = generate(args.sf, args.out)
        print(f"TPC-H SF {args.sf:g} written to {out} in {time.perf_counter() - t0:.1f} s")
    barrier(hpc.world())
    return 0


def _tpch(args: argparse.Namespace) -> int:
    from hpc.backend import BackendUnavailableError
    from hpc.memory import keep_freed_memory

    from .catalog import Catalog
    from .engine import QueryOptions, explain, query
    from .errors import SQLError
    from .tpch import QUERIES, SUPPORTED

    keep_freed_memory(arrow=True)  # Parquet decoding reuses Arrow's pages
    comm = hpc.world()
    options = QueryOptions(backend=args.backend)
    try:
        catalog = Catalog.open(args.data)
        for q in args.query or list(SUPPORTED):
            if q not in QUERIES:
                raise SQLError(f"TPC-H has queries 1..22, not {q}")
            t0 = time.perf_counter()
            if args.explain:
                text = explain(QUERIES[q], catalog, comm, options)
                if comm.Get_rank() == 0:
                    print(f"-- Q{q} plan\n{text}")
                continue
            result = query(QUERIES[q], catalog, comm, options)
            seconds = time.perf_counter() - t0
            if comm.Get_rank() == 0:
                print(f"-- Q{q}: {result.num_rows} rows in {seconds:.3f} s on "
                      f"{comm.Get_size()} rank(s)")
                _print(result, 100)
    except (SQLError, OSError, BackendUnavailableError) as exc:
        raise on_all_ranks(exc) from None  # the query fails alike on every rank
    return 0


def _query(args: argparse.Namespace) -> int:
    from hpc.backend import BackendUnavailableError
    from hpc.memory import keep_freed_memory

    from .catalog import Catalog
    from .engine import QueryOptions, query
    from .errors import SQLError

    keep_freed_memory(arrow=True)  # Parquet decoding reuses Arrow's pages
    comm = hpc.world()
    try:
        result = query(args.sql, Catalog.open(args.data), comm, QueryOptions(backend=args.backend))
    except (SQLError, OSError, BackendUnavailableError) as exc:
        raise on_all_ranks(exc) from None  # the query fails alike on every rank
    if comm.Get_rank() == 0:
        if "plan" in result.columns and len(result.columns) == 1:
            print("\n".join(result.to_pandas()["plan"]))
        else:
            _print(result, args.max_rows)
    return 0


def _convert(args: argparse.Namespace) -> int:
    from .convert import convert
    from .errors import SQLError

    try:
        out = convert(args.source, args.out, hpc.world())
    except (SQLError, OSError) as exc:
        raise on_all_ranks(exc) from None  # the query fails alike on every rank
    if hpc.world().Get_rank() == 0:
        print(f"wrote {out}")
    return 0
