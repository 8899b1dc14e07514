"""Run under mpirun: window functions without PARTITION BY (one sequence over the ranks),
ORDER BY as a distributed sort and aggregates in two phases, on the Parquet tables of
argv[1] (written by ``test_sql_windows.py``, row groups small enough that every rank reads
some rows): every query's rows on rank 0 equal DuckDB's, in order. Prints the mismatches,
or ``ok``."""

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
    # value functions and LAG / LEAD IGNORE NULLS: rows read wherever they lie
    "select id, first_value(v) over (order by k, id) as f, last_value(s) over (order by k, id "
    "rows between unbounded preceding and unbounded following) as l, nth_value(v, 30) over "
    "(order by k desc, id) as n30, first_value(v ignore nulls) over (order by k, id rows "
    "between 60 preceding and 2 preceding) as fi, last_value(v ignore nulls) over (order by "
    "k, id) as li, nth_value(v, 3 ignore nulls) over (order by k, id rows between 5 following "
    "and unbounded following) as ni from {t} order by id",
    "select id, lag(v, 3 ignore nulls) over (order by k, id) as l3, lead(v, 45, -1 ignore "
    "nulls) over (order by k, id) as l45, lag(s, 1, 'none' ignore nulls) over (order by k "
    "desc, id desc) as ls from {t} order by id",
    # variances: moments of the neighbouring rows merged with the other ranks'
    "select id, stddev_samp(v) over (order by k, id) as sd, var_pop(v) over (order by k, id "
    "rows between 40 preceding and 40 following) as vp, var_samp(v) over (order by k range "
    "between current row and unbounded following) as vs from {t} order by id",
    # from an offset to the UNBOUNDED end on its side: states read at the frame's first row
    "select id, count(v) over (order by k, id rows between 70 following and unbounded "
    "following) as c, sum(v) over (order by k desc, id rows between unbounded preceding and "
    "3 preceding) as s, min(s) over (order by k, id rows between 1 following and unbounded "
    "following) as mn, max(v) over (order by k, id rows between unbounded preceding and 200 "
    "preceding) as mx, avg(v) over (order by k, id rows between 0 following and unbounded "
    "following) as a from {t} order by id",
    # RANGE offsets: frame ends found by value on the rank that holds them
    "select id, sum(v) over (order by k range between 3 preceding and 2 following) as s, "
    "count(*) over (order by k desc range between 10 preceding and current row) as c, "
    "min(s) over (order by k range between current row and 5 following) as mn, max(v) over "
    "(order by k range between 20 preceding and 10 preceding) as mx, avg(v) over (order by k "
    "desc nulls first range between unbounded preceding and 4 preceding) as a, var_samp(v) "
    "over (order by k range between 5 preceding and 5 following) as vs from {t} order by id",
    # GROUPS frames (peer groups numbered over the ranks, a target group's start read where
    # it lies) and EXCLUDE (a frame in up to three pieces, each combined over the ranks)
    "select id, sum(v) over (order by k groups between 2 preceding and 1 following) as s, "
    "count(*) over (order by k desc groups between current row and 3 following exclude "
    "group) as c, min(s) over (order by k groups between 1 following and 5 following) as mn, "
    "first_value(k) over (order by k groups between 4 preceding and 2 preceding) as fk, "
    "count(v) over (partition by k % 3 order by k groups between 1 preceding and current "
    "row) as pc from {t} order by id",
    "select id, sum(v) over (order by k, id rows between 30 preceding and 30 following "
    "exclude current row) as s, avg(v) over (order by k range between unbounded preceding "
    "and current row exclude ties) as a, max(v) over (order by k range between 3 preceding "
    "and 3 following exclude group) as mx, nth_value(k, 2 ignore nulls) over (order by k "
    "groups between 1 preceding and 1 following exclude ties) as n2, last_value(id) over "
    "(order by k, id rows between 50 preceding and 1 following exclude current row) as lv, "
    "var_pop(v) over (order by k groups between 2 preceding and 2 following exclude group) "
    "as vp from {t} order by id",
    # PARTITION BY: ranges of (partition, ORDER BY) per rank, a partition over several ranks
    "select id, row_number() over (partition by k order by id) as rn, rank() over (partition "
    "by k % 3 order by v) as r, dense_rank() over (partition by k % 3 order by v desc) as d, "
    "percent_rank() over (partition by s order by v) as p, cume_dist() over (partition by k "
    "order by v) as c, ntile(4) over (partition by k order by id) as nt from {t} order by id",
    "select id, lag(v, 2) over (partition by k order by id) as l, lead(s, 30, 'x') over "
    "(partition by k order by id) as ld, lag(v, 1 ignore nulls) over (partition by k % 2 "
    "order by id) as li, lead(v, 3 ignore nulls) over (partition by k % 2 order by id desc) "
    "as ldi from {t} order by id",
    "select id, sum(v) over (partition by k order by id) as rs, avg(v) over (partition by "
    "k % 4 order by id rows between 10 preceding and 10 following) as ma, min(s) over "
    "(partition by k) as mn, count(*) over (partition by k) as n, max(v) over (partition by "
    "k % 2 order by id rows between 3 following and unbounded following) as mx, "
    "stddev_samp(v) over (partition by k order by id rows between unbounded preceding and "
    "current row) as sd from {t} order by id",
    "select id, first_value(v) over (partition by k order by id) as f, last_value(v ignore "
    "nulls) over (partition by k order by id rows between unbounded preceding and unbounded "
    "following) as l, nth_value(s, 3) over (partition by k % 3 order by id) as n3, v * 1.0 / "
    "sum(v) over (partition by k) as share from {t} order by id",
    # a partition on one rank (hash-partitioned): what needs all of a partition's rows there
    "select id, median(v) over (partition by k) as md, count(distinct s) over (partition by k) "
    "as ds, sum(v) over (partition by k order by v range between 5 preceding and 5 following) "
    "as rs from {t} order by id",
    # aggregates in two phases: each rank's states per group, merged where the keys hash
    "select k, count(*) as n, count(v) as c, sum(v) as s, avg(v) as a, min(s) as mn, max(v) "
    "as mx, stddev_samp(v) as sd, var_pop(v) as vp, bool_and(v > 0) as ba, bool_or(v > 900) "
    "as bo from {t} group by k order by k nulls first",
    "select count(*) as n, sum(v) as s, avg(v) as a, min(s) as mn, var_samp(v) as vs, sum(v) "
    "filter (where k > 3) as f, count(*) filter (where v is null) as cn from {t}",
    "select s, avg(v * 1.5) as a, count(distinct k) as d from {t} group by s order by s",
    "select k % 3 as g, sum(v) as s, avg(v) as a, stddev_pop(v) as sd from {t} where v > 2000 "
    "group by k % 3 order by g",
    # without ORDER BY: the whole sequence, rows where they are
    "select id, count(*) over () as n, sum(v) over () as s, avg(v) over () as a, min(s) over "
    "() as mn, max(v) over () as mx, stddev_pop(v) over () as sd, rank() over () as r, "
    "dense_rank() over () as d, percent_rank() over () as p, cume_dist() over () as c "
    "from {t} order by id",
    # what does not combine from per-rank states: the arguments on one rank, the value to all
    "select id, count(distinct s) over () as ds, median(v) over () as md, sum(distinct v) "
    "over (order by k rows between unbounded preceding and unbounded following) as sd, "
    "v * 1.0 / sum(v) over () as share from {t} order by id",
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
