"""Run under mpirun: string columns carried raw past joins (read only by the output or a
per-entry filter, or by MIN/MAX) cross the ranks in a broadcast as their rows' bytes,
unsorted, with their NULLs, and the answers equal DuckDB's; a later hash exchange and the
result settle them."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hpc.domains.sql import Catalog, pipeline
from hpc.domains.sql.logical import plan as P

from hpc.comm import world

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.domains.sql.duckdb_agreement import check_queries  # noqa: E402

QUERIES = (
    # the dimension's strings ride the broadcast to the result
    "select f.k, f.v, d.name, d.note from f join d on f.k = d.k where f.v < 3000",
    # and on to a GROUP BY whose key determines them (a hash exchange settles them)
    "select d.k, d.name, d.note, count(*) as n, sum(f.v) as s from f join d on f.k = d.k "
    "where d.note like 'n1%' or d.name is null group by d.k, d.name, d.note order by d.k",
    # none of the broadcast side's rows on a rank, every one NULL on another
    "select f.k, d.name from f left join d on f.k = d.k and d.k > 100000 order by f.k limit 7",
    # MIN/MAX of raw strings (NULLs among them): partial states settled by the exchange
    "select d.note, min(d.name) as lo, max(d.name) as hi, count(*) as n from d "
    "group by d.note order by d.note limit 20",
    "select max(d.name) as hi, min(d.name) as lo from f join d on f.k = d.k where f.v < 500",
    "select count(distinct d.name) as dn, count(d.name) as n from f join d on f.k = d.k "
    "where f.v < 900",
    # an equi-join on raw strings, the key exchanged or broadcast
    "select a.note, count(*) as n from d a join d b on a.note = b.note group by a.note "
    "order by a.note limit 5",
    "select count(*) as n from d a join d b on a.name = b.name where a.k < 2000",
)


def main() -> int:
    comm = world()
    root = Path(sys.argv[1])
    if comm.rank == 0:
        rng = np.random.default_rng(23)
        n = 3000
        names = np.array([f"name {i:05d} {'x' * int(rng.integers(0, 30))}" for i in range(n)])
        pq.write_table(pa.table({
            "k": np.arange(n),
            "name": pa.array(names, mask=rng.random(n) < 0.1),
            "note": pa.array([f"n{int(v)}" for v in rng.integers(0, 500, n)]),
        }), root / "d.parquet", row_group_size=700)
        pq.write_table(pa.table({"k": rng.integers(0, n + 50, 200_000),
                                 "v": rng.integers(0, 10_000, 200_000)}),
                       root / "f.parquet", row_group_size=20_000)
    comm.Barrier()
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    for t in ("d", "f"):
        con.execute(f"create view {t} as select * from read_parquet('{root / t}.parquet')")
    plan = pipeline.physical_plan(QUERIES[0], catalog, comm.size)
    moved = [n for n in P.nodes(plan) if isinstance(n, P.Exchange) and n.how == "broadcast"]
    assert any(s.raw for m in moved for s in P.nodes(m) if isinstance(s, P.Scan)), \
        f"no raw string column in a broadcast:\n{P.explain(plan)}"
    check_queries(QUERIES, catalog, con, comm)
    if comm.rank == 0:
        print(f"carried strings: {len(QUERIES)} queries agree on {comm.size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
