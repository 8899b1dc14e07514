"""Run under mpirun: window functions without PARTITION BY (one ordered sequence over the
ranks) and ORDER BY as a distributed sort, on the Parquet tables of argv[1] (written by
``test_sql_windows.py``, row groups small enough that every rank reads some rows): every
query's rows on rank 0 equal DuckDB's, in order. Prints the mismatches, or ``ok``."""

from __future__ import annotations

import sys

from hpc.domains.sql import Catalog, QueryOptions, query

from hpc.comm import world
from tests.domains.sql.querygen import compare, duckdb_over, duckdb_rows, engine_rows
from tests.jobs import report

# every table: id (unique), k (the sort key: its distribution differs per table), v, s
QUERIES = [
    "select id, rank() over (order by k) as r, dense_rank() over (order by k desc) as d, "
    "percent_rank() over (order by k) as p, cume_dist() over (order by k) as c, "
    "count(*) over (order by k) as n, sum(v) over (order by k) as s from {t} order by id",
    "select id, row_number() over (order by k, id) as rn, ntile(5) over (order by k, id) as nt, "
    "lag(v, 7) over (order by k, id) as l7, lead(s, 40, 'end') over (order by k desc, id) "
    "as l40 from {t} order by id",
    "select id, sum(v) over (order by k, id rows between 25 preceding and 3 following) as mv, "
    "min(s) over (order by k, id rows between unbounded preceding and 2 following) as mn, "
    "max(v) over (order by k, id rows between 4 following and unbounded following) as mx, "
    "avg(v) over (order by k range between current row and unbounded following) as av "
    "from {t} order by id",
    "select id, k, v from {t} order by k desc, v, id",
]


def main() -> int:
    comm = world()
    catalog = Catalog.from_directory(sys.argv[1])
    con = duckdb_over(sys.argv[1], catalog.tables) if comm.Get_rank() == 0 else None
    failures, count = [], 0
    for table in catalog.tables:
        for text in QUERIES:
            sql = text.format(t=table)
            count += 1
            result = query(sql, catalog, comm, QueryOptions(broadcast_rows=0))
            if con is not None:
                problem = compare(engine_rows(result), duckdb_rows(con, sql), True)
                if problem:
                    failures.append(f"{sql}\n{problem}")
            elif result.num_rows:
                failures.append(f"rank {comm.Get_rank()} holds {result.num_rows} rows")
    return report(comm, failures, f"ok: {count} queries on {comm.Get_size()} ranks")


if __name__ == "__main__":
    sys.exit(main())
