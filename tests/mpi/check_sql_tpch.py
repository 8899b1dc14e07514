"""Run under mpirun: TPC-H queries on the Parquet files in argv[1] give DuckDB's rows on any
rank count; argv[2] is the broadcast limit in rows (0 forces shuffle joins everywhere)."""

from __future__ import annotations

import sys

from hpc.domains.sql import Catalog, QueryOptions, query
from hpc.domains.sql.compare import same_rows
from hpc.domains.sql.tpch import QUERIES, SUPPORTED

from hpc.comm import world


def main() -> int:
    comm = world()
    data, limit = sys.argv[1], int(sys.argv[2])
    catalog = Catalog.from_directory(data)
    con = None
    if comm.Get_rank() == 0:
        import duckdb

        con = duckdb.connect()
        for t in catalog.tables:
            con.execute(f"create view {t} as select * from read_parquet('{data}/{t}.parquet')")
    failures = []
    for q in SUPPORTED:
        result = query(QUERIES[q], catalog, comm, QueryOptions(broadcast_rows=limit))
        if comm.Get_rank() == 0:
            ref = con.execute(QUERIES[q]).df()
            problem = same_rows(result.to_pandas(), ref, ordered="order by" in QUERIES[q])
            if problem:
                failures.append(f"Q{q}: {problem}")
        elif result.num_rows:
            failures.append(f"Q{q}: rank {comm.Get_rank()} holds {result.num_rows} rows")
    failures = comm.allgather(failures)
    if any(failures):
        print(failures, flush=True)
        return 1
    if comm.Get_rank() == 0:
        print(f"ok: TPC-H {SUPPORTED} on {comm.Get_size()} ranks, broadcast <= {limit} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
