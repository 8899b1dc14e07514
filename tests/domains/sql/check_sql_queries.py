"""Run under mpirun: each query (argv[3:]) over the Parquet tables in the directory argv[1]
gives DuckDB's rows on any rank count; argv[2] is the broadcast limit in rows (0 forces
shuffle joins everywhere). Ordered comparison where the query has ORDER BY."""

from __future__ import annotations

import sys
from typing import Any

from hpc.domains.sql import Catalog, QueryOptions, query
from hpc.domains.sql.compare import same_rows

from hpc.comm import world


def failures_against_duckdb(data: str, queries: dict[str, str], limit: int,
                            comm: Any) -> list[str]:
    """Collective. ``label: problem`` for every query (by label) whose rows on rank 0
    differ from DuckDB's over the same files, or that leaves rows on another rank; the same
    list on every rank."""
    catalog = Catalog.from_directory(data)
    con = None
    if comm.Get_rank() == 0:
        import duckdb

        con = duckdb.connect()
        for t in catalog.tables:
            con.execute(f"create view {t} as select * from read_parquet('{data}/{t}.parquet')")
    failures = []
    for label, sql in queries.items():
        result = query(sql, catalog, comm, QueryOptions(broadcast_rows=limit))
        if comm.Get_rank() == 0:
            problem = same_rows(result.to_pandas(), con.execute(sql).df(),
                                ordered="order by" in sql)
            if problem:
                failures.append(f"{label}: {problem}")
        elif result.num_rows:
            failures.append(f"{label}: rank {comm.Get_rank()} holds {result.num_rows} rows")
    return [f for part in comm.allgather(failures) for f in part]


def report(failures: list[str], comm: Any, ok: str) -> int:
    """The exit status; the failures printed, or ``ok`` on rank 0."""
    if failures:
        print(failures, flush=True)
        return 1
    if comm.Get_rank() == 0:
        print(ok, flush=True)
    return 0


def main() -> int:
    comm = world()
    data, limit, queries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    failures = failures_against_duckdb(data, {q: q for q in queries}, limit, comm)
    return report(failures, comm,
                  f"ok: {len(queries)} queries on {comm.Get_size()} ranks, broadcast <= {limit}")


if __name__ == "__main__":
    sys.exit(main())
