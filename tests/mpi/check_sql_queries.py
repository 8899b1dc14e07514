"""Run under mpirun: each query (argv[3:]) over the Parquet tables in the directory argv[1]
gives DuckDB's rows on any rank count; argv[2] is the broadcast limit in rows (0 forces
shuffle joins everywhere). Ordered comparison where the query has ORDER BY."""

from __future__ import annotations

import sys

from hpc.domains.sql import Catalog, QueryOptions, query
from hpc.domains.sql.compare import same_rows

from hpc.comm import world


def main() -> int:
    comm = world()
    data, limit, queries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    catalog = Catalog.from_directory(data)
    con = None
    if comm.Get_rank() == 0:
        import duckdb

        con = duckdb.connect()
        for t in catalog.tables:
            con.execute(f"create view {t} as select * from read_parquet('{data}/{t}.parquet')")
    failures = []
    for sql in queries:
        result = query(sql, catalog, comm, QueryOptions(broadcast_rows=limit))
        if comm.Get_rank() == 0:
            problem = same_rows(result.to_pandas(), con.execute(sql).df(),
                                ordered="order by" in sql)
            if problem:
                failures.append(f"{sql}: {problem}")
        elif result.num_rows:
            failures.append(f"{sql}: rank {comm.Get_rank()} holds {result.num_rows} rows")
    failures = comm.allgather(failures)
    if any(failures):
        print(failures, flush=True)
        return 1
    if comm.Get_rank() == 0:
        print(f"ok: {len(queries)} queries on {comm.Get_size()} ranks, broadcast <= {limit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
