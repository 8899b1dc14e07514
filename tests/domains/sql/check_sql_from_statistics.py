"""Run under mpirun (or alone): ungrouped MIN, MAX and COUNT of whole Parquet tables are
answered from the footers' statistics where they can be, and every answer equals DuckDB's,
exactly (integers near 2**63, decimals, dates), on fresh random tables: several files per
table, row groups of random sizes, NULL-heavy and all-NULL row groups, an empty file, a
file written without statistics, doubles and strings (which the scan answers).

Usage: ``mpirun -n N python -m mpi4py check_sql_from_statistics.py DIR SEED``.
"""

from __future__ import annotations

import datetime
import decimal
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hpc.domains.sql import Catalog, query
from hpc.domains.sql.physical import executor

from hpc.comm import world

# (query, whether the statistics answer it)
QUERIES = (
    ("select count(*) as n from t", True),
    ("select min(i8) as a, max(i8) as b, min(i32) as c, max(i32) as d from t", True),
    ("select min(big) as a, max(big) as b, count(big) as c from t", True),
    ("select min(dec) as a, max(dec) as b, min(dat) as c, max(dat) as d from t", True),
    ("select count(s) as a, count(*) as b, count(dec) as c from t", True),
    ("select cast(max(i32) as bigint) - min(i32) as spread, count(*) + 1 as n1 from t", True),
    ("select min(nulls) as a, max(nulls) as b, count(nulls) as c from t", True),
    ("select min(dec) as a, max(dec) as b, count(*) as n from dec_int", True),
    ("select min(k) as a, max(k) as b, count(*) as n from empty", True),
    # the scan answers these: a double, a string's extremes, DISTINCT, a filter, no stats
    ("select min(f) as a, max(f) as b from t", False),
    ("select min(s) as a, max(s) as b from t", False),
    ("select count(distinct i8) as a from t", False),
    ("select max(big) as a, count(*) as n from t where i8 > 0", False),
    ("select min(k) as a, max(k) as b, count(*) as n from bare", False),
)


def _ints(rng: np.random.Generator, n: int, lo: int, hi: int, null_share: float) -> pa.Array:
    return pa.array(rng.integers(lo, hi, n, endpoint=True), mask=rng.random(n) < null_share)


def write_tables(root: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    folder = root / "t"
    folder.mkdir()
    for part in range(int(rng.integers(1, 4))):
        n = int(rng.integers(1, 3000))
        share = float(rng.choice([0.0, 0.3, 0.95]))
        top = 2**63 - 1
        dec = [decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**9, 10**9, n)]
        days = rng.integers(-20000, 30000, n)
        table = pa.table({
            "i8": pa.array(rng.integers(-128, 127, n, endpoint=True).astype(np.int8),
                           mask=rng.random(n) < share),
            "i32": _ints(rng, n, -2**31, 2**31 - 1, share).cast(pa.int32()),
            "big": _ints(rng, n, top - 10**6, top, share) if part % 2 else
            _ints(rng, n, -top - 1, -top + 10**6, share),
            "dec": pa.array(dec, pa.decimal128(15, 2), mask=rng.random(n) < share),
            "dat": pa.array(days.astype(np.int32), mask=rng.random(n) < share)
            .cast(pa.date32()),
            "f": pa.array(rng.choice([-1.5, 0.0, 2.5, np.nan], n)),
            "s": pa.array([f"w{int(v)}" for v in rng.integers(0, 50, n)],
                          mask=rng.random(n) < share),
            "nulls": pa.array(np.zeros(n, np.int64), mask=np.ones(n, bool) if part == 0
                              else rng.random(n) < 0.999),
        })
        pq.write_table(table, folder / f"part{part}.parquet",
                       row_group_size=int(rng.integers(1, 800)))
    n = 5000
    pq.write_table(pa.table({"dec": pa.array(
        [decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**6, 10**6, n)],
        pa.decimal128(12, 2))}), root / "dec_int.parquet", row_group_size=700,
        store_decimal_as_integer=True)
    schema = pa.schema([("k", pa.int64())])
    pq.write_table(schema.empty_table(), root / "empty.parquet")
    pq.write_table(pa.table({"k": rng.integers(0, 100, 900)}), root / "bare.parquet",
                   row_group_size=200, write_statistics=False)


def main() -> int:
    comm = world()
    root, seed = Path(sys.argv[1]), int(sys.argv[2])
    if comm.rank == 0:
        write_tables(root, seed)
    comm.Barrier()
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    for t in ("t", "dec_int", "empty", "bare"):
        source = root / t if t == "t" else root / f"{t}.parquet"
        pattern = f"{source}/*.parquet" if t == "t" else str(source)
        # tables, not views: DuckDB 2.0 answers MAX of a Parquet double from the footer, whose
        # max leaves NaN out (2.5 where its own table of the same rows gives NaN)
        con.execute(f"create table {t} as select * from read_parquet('{pattern}')")
    answer = executor.answer_from_statistics
    for sql, by_statistics in QUERIES:
        answered = []

        def watched(*args, _seen=answered):  # type: ignore[no-untyped-def]
            out = answer(*args)
            _seen.append(out is not None)
            return out

        executor.answer_from_statistics = watched
        try:
            got = query(sql, catalog, comm)
        finally:
            executor.answer_from_statistics = answer
        assert any(answered) == by_statistics, (sql, answered)
        if comm.rank == 0:
            ours = [tuple(_exact(v) for v in row.values()) for row in got.to_arrow().to_pylist()]
            theirs = [tuple(_exact(v) for v in row) for row in con.execute(sql).fetchall()]
            assert ours == theirs, f"seed {seed}: {sql}: ours {ours}, DuckDB {theirs}"
    if comm.rank == 0:
        print(f"statistics: {len(QUERIES)} queries agree on {comm.size} ranks (seed {seed})")
    return 0


def _exact(v: object) -> object:
    """A value as both sides spell it: NaN as a string, a DECIMAL as the double our results
    present it as (exact at these 15 digits), integers and dates as they are."""
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    if isinstance(v, datetime.datetime):
        return v.date()
    return v


if __name__ == "__main__":
    sys.exit(main())
