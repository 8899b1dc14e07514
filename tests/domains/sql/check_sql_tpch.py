"""Run under mpirun: TPC-H queries on the Parquet files in argv[1] give DuckDB's rows on any
rank count; argv[2] is the broadcast limit in rows (0 forces shuffle joins everywhere)."""

from __future__ import annotations

import sys

from check_sql_queries import failures_against_duckdb, report  # beside this script
from hpc.domains.sql.tpch import QUERIES, SUPPORTED

from hpc.comm import world


def main() -> int:
    comm = world()
    data, limit = sys.argv[1], int(sys.argv[2])
    failures = failures_against_duckdb(data, {f"Q{q}": QUERIES[q] for q in SUPPORTED}, limit,
                                       comm)
    return report(failures, comm,
                  f"ok: TPC-H {SUPPORTED} on {comm.Get_size()} ranks, broadcast <= {limit} rows")


if __name__ == "__main__":
    sys.exit(main())
