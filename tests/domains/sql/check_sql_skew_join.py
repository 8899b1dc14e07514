"""Run under mpirun: joins whose keys are skewed (one value in 70% of the fact rows, a key
NULL in 70% of them, a heavy string key, a value heavy on both sides) with both sides
hashed: the heavy values' rows stay on their ranks, the other side's rows of them go to
every rank, and every answer (inner, left, right, semi, anti, full, residual conditions, two
keys, NULL-safe keys) equals DuckDB's on fresh random tables. Also that the heavy rows
stayed: the staying side's rows after the exchange are spread about evenly over the ranks,
where hashing would give one rank most of them.

Usage: ``mpirun -n N python -m mpi4py check_sql_skew_join.py DIR SEED [strict]`` (strict:
the GPU backend's code on strict stand-ins for CuPy arrays, under the CUDA simulator).
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hpc.domains.sql import Catalog, QueryOptions, query
from hpc.domains.sql.physical import executor

from hpc.comm import world

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.domains.sql.duckdb_agreement import differences  # noqa: E402

LIMIT = 200  # the broadcast limit: the most rows a skewed join copies to every rank
# (query, whether f's hot key value is heavy and kept: the staying rows then spread evenly)
QUERIES = (
    ("select d.name, count(*) as n, sum(f.v) as s from f join d on f.k = d.k "
     "group by d.name order by d.name", True),
    ("select f.k, count(*) as n, count(d.k) as matched, sum(d.w) as w from f left join d "
     "on f.k = d.k group by f.k order by f.k", True),
    ("select d.k, count(f.v) as n from d right join f on d.k = f.k group by d.k "
     "order by d.k", True),
    ("select count(*) as n, sum(v) as s from f where exists "
     "(select 1 from d where d.k = f.k)", True),
    ("select count(*) as n, sum(v) as s from f where not exists "
     "(select 1 from d where d.k = f.k)", True),
    ("select count(*) as n, count(f.k) as fk, count(d.k) as dk from f full join d "
     "on f.k = d.k", False),
    # a residual condition judged on the pairs that met
    ("select f.k, count(*) as n from f join d on f.k = d.k and f.v > d.w group by f.k "
     "order by f.k", True),
    # two keys (each pair of values a sixth of f: hashed); a heavy string key (carried
    # strings ride along)
    ("select f.k2, count(*) as n, sum(d.w) as w from f join d on f.k = d.k "
     "and f.k2 = d.k2 group by f.k2 order by f.k2", False),
    ("select f.tag, count(*) as n, sum(f.v) as v, sum(f.k2) as k2, min(d.name) as lo, "
     "max(d.name) as hi from f join d on f.tag = d.tag group by f.tag order by f.tag", True),
    # a value heavy on both sides: hashed as before (its pairs meet on one rank)
    ("select count(*) as n, sum(f.v + g.x) as s from f join g on f.k = g.k", False),
    # the skewed side the smaller one of an inner join
    ("select count(*) as n, sum(h.y) as s from h join f on h.k = f.k", True),
    # NULL keys in most rows: they stay where they are (they meet nothing)
    ("select count(*) as n, count(d.k) as dk, sum(d.w) as w from f left join d "
     "on f.kn = d.k", True),
    # NULL keys meeting NULL keys: nothing kept back for them
    ("select count(*) as n from f join d on f.k is not distinct from d.k "
     "and f.k2 = d.k2", False),
)


def write_tables(root: Path, seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    keys = n  # d's keys, each once (the hot one three times): as many as f's rows, so that
    hot = int(rng.integers(0, keys))  # the plans hash both sides of every join
    k = rng.integers(0, keys, n)
    k[rng.random(n) < 0.7] = hot  # most fact rows on one value
    null_key = rng.random(n) < 0.15  # and NULL keys (never matching)
    kn = rng.integers(0, keys, n)  # a key NULL in most rows
    tags = np.array([f"t{i}é" for i in range(n // 2)])  # strings, the hot one in 60% of f
    tag = np.where(rng.random(n) < 0.6, "hot", tags[rng.integers(0, len(tags), n)])
    pq.write_table(pa.table({
        "k": pa.array(k, mask=null_key),
        "kn": pa.array(kn, mask=rng.random(n) < 0.7),
        "k2": rng.integers(0, 3, n),
        "v": rng.integers(0, 1000, n),
        "tag": pa.array(tag.tolist()),
    }), root / "f.parquet", row_group_size=n // 24)
    dk = np.concatenate([np.arange(keys), [hot, hot, hot]])  # the hot value three times
    m = len(dk)
    dtag = tags[np.arange(m) % len(tags)]  # each tag twice, the hot one in 20 rows
    dtag[rng.choice(m, 20, replace=False)] = "hot"
    pq.write_table(pa.table({
        "k": pa.array(dk, mask=rng.random(m) < 0.05),
        "k2": rng.integers(0, 3, m),
        "w": rng.integers(0, 1000, m),
        "name": pa.array([f"d{i % 40}" for i in range(m)]),
        "tag": pa.array(dtag.tolist()),
    }), root / "d.parquet", row_group_size=n // 24)
    # the hot key heavy here too, beyond the copies a broadcast may make (LIMIT rows)
    g = n // 2
    gk = np.concatenate([np.full(300, hot), rng.integers(0, keys, g - 300)])
    pq.write_table(pa.table({"k": gk, "x": rng.integers(0, 50, g)}), root / "g.parquet",
                   row_group_size=n // 24)
    hk = rng.integers(0, keys, n * 5 // 4)
    pq.write_table(pa.table({"k": hk, "y": rng.integers(0, 9, len(hk))}), root / "h.parquet",
                   row_group_size=n // 6)


def main() -> int:
    comm = world()
    root, seed = Path(sys.argv[1]), int(sys.argv[2])
    strict = len(sys.argv) > 3 and sys.argv[3] == "strict"
    if comm.rank == 0:  # (the simulator runs kernels in Python: smaller tables)
        write_tables(root, seed, 1200 if strict else 24_000)
    comm.Barrier()
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    for t in ("d", "f", "g", "h"):
        con.execute(f"create view {t} as select * from read_parquet('{root / t}.parquet')")
    # what the skewed exchanges did: the staying side's rows each rank holds after them
    moved = []
    skew_exchanges = executor.skew_exchanges

    def watched(sides, *args):  # type: ignore[no-untyped-def]
        kept, out = skew_exchanges(sides, *args)
        if kept is not None:
            moved.append((sides[kept][1], out[kept][1]))
        return kept, out

    executor.skew_exchanges = watched
    # every table above LIMIT rows: both sides of every join hashed
    backend = None
    if strict:  # device arrays refusing what CuPy refuses (under the simulator)
        from hpc.testing.device import simulated_backend

        backend = simulated_backend()
    options = QueryOptions(broadcast_rows=LIMIT, backend=backend)
    balanced = []
    # (strict: an inner and a right join and one on strings: the simulator
    # runs the device kernels in Python)
    for sql, hot in [QUERIES[j] for j in (0, 2, 8)] if strict else QUERIES:
        before = len(moved)
        got = query(sql, catalog, comm, options)
        if comm.rank == 0:
            differs = differences(got.to_pandas(), con.execute(sql).df(), "order by" in sql)
            assert differs is None, f"seed {seed}: {sql}: {differs}"
        if hot:
            assert len(moved) == before + 1, f"seed {seed}: {sql}: no skewed exchange"
            balanced.append(before)
    executor.skew_exchanges = skew_exchanges
    # the staying side's rows after the exchanges where the hot value stayed: hashed, one
    # rank would hold the hot 60% and its share of the rest (0.8 of the rows on 2 ranks,
    # 0.73 on 3); kept, every rank about 1/N plus the NULL rows' imbalance (0.58, 0.43)
    counts = comm.allgather(moved)
    for j in balanced:
        after = np.array([c[j][1] for c in counts], float)
        share = after.max() / after.sum()
        assert share < 0.25 + 0.75 / comm.size, f"seed {seed}: exchange {j}: {after}"
    if comm.rank == 0:
        print(f"skew join: the queries agree on {comm.size} ranks (seed {seed}); "
              f"{len(counts[0])} skewed exchanges, the first's staying rows per rank "
              f"{[c[0][1] for c in counts]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
