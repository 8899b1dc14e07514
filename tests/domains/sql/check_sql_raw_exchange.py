"""Run under mpirun: raw string columns (carried, GROUP BY keys, MIN/MAX/COUNT(DISTINCT)
arguments, equi-join keys) cross the ranks in hash and gather exchanges as their rows' bytes,
unsorted, NULLs kept, and arrive raw (one entry per row); the answers equal DuckDB's.

Usage: ``mpirun -n N python -m mpi4py check_sql_raw_exchange.py DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hpc.domains.sql import Catalog, QueryOptions, pipeline, query, strings
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.physical import executor

from hpc.comm import world

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.domains.sql.duckdb_agreement import differences  # noqa: E402

# (query, broadcast_rows): 0 shuffles both sides of every join by hash
QUERIES = (
    # raw GROUP BY keys hashed by their bytes; the carried ones ride along
    ("select d.name, d.note, count(*) as n, sum(f.v) as s from f join d on f.k = d.k "
     "group by d.name, d.note order by n desc, d.name, d.note limit 12", 1_000_000),
    ("select d.note, count(*) as n from d group by d.note order by d.note", 1_000_000),
    # a key determined by another (kept raw by the aggregate) beside a raw one that is not
    ("select d.k, d.name, d.note, count(*) as n from f join d on f.k = d.k "
     "where f.v < 2000 group by d.k, d.name, d.note order by d.k", 0),
    # MIN/MAX/COUNT(DISTINCT) of raw strings, grouped and not
    ("select d.note, count(distinct d.name) as dn, min(d.name) as lo, max(d.name) as hi, "
     "count(d.name) as c from d group by d.note order by d.note", 1_000_000),
    ("select count(distinct d.name) as dn, min(d.name) as lo, max(d.name) as hi "
     "from f join d on f.k = d.k where f.v < 900", 0),
    # equi-joins on raw strings, both sides hashed; carried strings through the join
    ("select a.note, count(*) as n from d a join d b on a.note = b.note group by a.note "
     "order by a.note", 0),
    ("select a.k, b.k as bk, a.note, b.name from d a join d b on a.name = b.name "
     "where a.k < 5000 order by a.k, bk", 0),
    ("select f.k, f.v, d.name, d.note from f left join d on f.k = d.k where f.v < 40 "
     "order by f.k, f.v, d.note", 0),
    # a carried column whose rows are NULL on one side of an outer join
    ("select f.k, d.name from f left join d on f.k = d.k and d.k > 100000 "
     "order by f.k, d.name limit 9", 0),
    # every row gathered with its raw strings (no order: compared as sets)
    ("select d.k, d.name, d.note from d where d.k % 97 = 3", 1_000_000),
)


def write_tables(root: Path) -> None:
    rng = np.random.default_rng(31)
    n = 12_000
    tails = ["", "é", "日本", "ß🙂", "x" * 40]
    names = [f"name {i % 7000:05d}{tails[int(rng.integers(0, len(tails)))]}" for i in range(n)]
    names[5] = ""  # an empty string, distinct from NULL
    pq.write_table(pa.table({
        "k": np.arange(n),
        "name": pa.array(names, mask=rng.random(n) < 0.1),
        "note": pa.array([["", "ñ"][i % 2] + f"n{int(v)}" for i, v in
                          enumerate(rng.integers(0, 400, n))], mask=rng.random(n) < 0.05),
    }), root / "d.parquet", row_group_size=2500)
    pq.write_table(pa.table({"k": rng.integers(0, n + 50, 150_000),
                             "v": rng.integers(0, 10_000, 150_000)}),
                   root / "f.parquet", row_group_size=20_000)


def raw_outputs(node: P.Node) -> set[str]:
    """Output names of the raw columns of the scans under ``node``."""
    return {out for s in P.nodes(node) if isinstance(s, P.Scan)
            for out, source, _ in s.columns if source in s.raw}


def main() -> int:
    comm = world()
    root = Path(sys.argv[1])
    if comm.rank == 0:
        write_tables(root)
    comm.Barrier()
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    for t in ("d", "f"):
        con.execute(f"create view {t} as select * from read_parquet('{root / t}.parquet')")
    # what each exchange is given and gives: raw columns must come out raw, one entry a row
    seen = {"hash": 0, "gather": 0}
    exchange = executor.exchange

    def watched(columns, nrows, how, keys, comm_, directions=None):  # type: ignore
        out, m = exchange(columns, nrows, how, keys, comm_, directions)
        if how in seen:
            raw = [n for n, c in columns.items() if c.raw]
            seen[how] += len(raw)
            for name in raw:
                c = out[name]
                assert c.raw and len(c.dictionary) == m == len(c), (how, name)
                assert isinstance(c.dictionary, strings.Entries)
        return out, m

    executor.exchange = watched
    hashed = 0
    for sql, broadcast in QUERIES:
        plan = pipeline.physical_plan(sql, catalog, comm.size, broadcast)
        hashed += any(raw_outputs(e) & {f.name for f in e.schema}
                      for e in P.nodes(plan)
                      if isinstance(e, P.Exchange) and e.how in ("hash", "partition"))
        got = query(sql, catalog, comm, QueryOptions(broadcast_rows=broadcast))
        if comm.rank == 0:
            differs = differences(got.to_pandas(), con.execute(sql).df(), "order by" in sql)
            assert differs is None, f"{sql}: {differs}"
    executor.exchange = exchange
    assert hashed >= 6, f"only {hashed} plans hash raw string columns"
    counts = comm.allreduce(np.array([seen["hash"], seen["gather"]]))
    assert counts[0] > 0 and counts[1] > 0, f"raw columns through hash, gather: {counts}"
    if comm.rank == 0:
        print(f"raw exchange: {len(QUERIES)} queries agree on {comm.size} ranks; raw columns "
              f"through hash exchanges {counts[0]}, gathers {counts[1]}; {hashed} plans")
    return 0


if __name__ == "__main__":
    sys.exit(main())
