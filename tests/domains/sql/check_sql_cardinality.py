"""Run under mpirun: tables registered in memory with other rows on every rank give every
rank the same statistics and the same plans, and the answers equal DuckDB's on the union of
the ranks' rows."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from hpc.domains.sql import Catalog, Table, pipeline

from hpc.comm import world

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.domains.sql.duckdb_agreement import check_queries  # noqa: E402

QUERIES = (
    "select a.g, count(*) as n, sum(b.v) as s from a join b on a.k = b.k "
    "where b.v >= 100 and b.v < 400 group by a.g order by a.g",
    "select a.k, b.v from a join b on a.k = b.k where a.x > 0.5 and b.v < 50",
)


def _tables(rank: int) -> dict[str, pa.Table]:
    # rank r's keys lie in [r * 5000, r * 5000 + 7000): the ranks' ranges differ
    rng = np.random.default_rng(100 + rank)
    lo = rank * 5000
    return {
        "a": pa.table({"k": np.arange(lo, lo + 7000), "g": rng.integers(0, 9, 7000),
                       "x": rng.random(7000)}),
        "b": pa.table({"k": rng.integers(lo, lo + 7000, 30_000),
                       "v": rng.integers(0, 1000 * (rank + 1), 30_000)}),
    }


def main() -> int:
    comm = world()
    mine = _tables(comm.rank)
    catalog = Catalog()
    for name, t in mine.items():
        catalog.register(name, Table.from_arrow(t), comm)
    everyone = [_tables(r) for r in range(comm.size)]
    for name in ("a", "b"):
        for column in mine[name].column_names:
            whole = np.concatenate([t[name].column(column).to_numpy() for t in everyone])
            got = catalog.value_range(name, column)
            assert got == (float(whole.min()), float(whole.max())), (name, column, got)
            seen = comm.allgather((got, catalog.distinct_bound(name, column)))
            assert all(s == seen[0] for s in seen), (name, column, seen)
    con = duckdb.connect()
    for name in ("a", "b"):
        con.register(name, pa.concat_tables([t[name] for t in everyone]))
    for sql in QUERIES:
        plan = str(pipeline.physical_plan(sql, catalog, comm.size))
        plans = comm.allgather(plan)
        assert all(p == plans[0] for p in plans), f"plans differ for {sql}"
    check_queries(QUERIES, catalog, con, comm)
    if comm.rank == 0:
        print(f"statistics and plans agree on {comm.size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
