"""Run under mpirun: scans that skip row groups by their statistics (none kept, fewer kept
than ranks, many kept; a folder of parts) answer as DuckDB does."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
from hpc.domains.sql import Catalog

from hpc.comm import world

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.domains.sql.duckdb_agreement import check_queries  # noqa: E402
from tests.domains.sql.test_zone_maps import clustered_table  # noqa: E402

QUERIES = (
    "select count(*) as n, sum(u) as s from t where k > 10000",  # no group kept
    "select k, s, u from t where k = 7 or s = 'w0003'",  # a few groups
    "select u, count(*) as n from t where d >= DATE '1994-10-01' group by u order by u",
    "select count(*) as n from t where k between -400 and 300 and m < 500.00",
    "select count(*) as n, min(s) as s from p where k in (-450, 0, 450) or k is null",
    # a raw string of a table of several files, carried to a gather: each rank's entries
    # are its own (not merged over the ranks) until the exchange settles them
    "select k, s from p where k > 0 order by k desc, s limit 6",
    "select max(s) as s, count(distinct s) as d from p where k < 100",
)


def main() -> int:
    comm = world()
    root = Path(sys.argv[1])
    if comm.rank == 0:
        rng = np.random.default_rng(17)
        pq.write_table(clustered_table(rng, 6000, 0.05), root / "t.parquet",
                       row_group_size=500)
        (root / "p").mkdir()
        for i in range(3):
            pq.write_table(clustered_table(rng, 900, 0.2), root / "p" / f"{i}.parquet",
                           row_group_size=100)
    comm.Barrier()
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    con.execute(f"create view t as select * from read_parquet('{root / 't.parquet'}')")
    con.execute(f"create view p as select * from read_parquet('{root / 'p'}/*.parquet')")
    check_queries(QUERIES, catalog, con, comm)
    if comm.rank == 0:
        print(f"zone maps: {len(QUERIES)} queries agree on {comm.size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
