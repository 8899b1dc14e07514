"""The differential suite's data: small tables rich in NULLs, duplicates, extreme values and
empty inputs (deterministic from a seed), and TPC-H at SF 0.001, written as Parquet files
into one directory that both engines read.

Tables (small row groups, so every rank of 2 or 3 holds some rows of each):

- ``t``: ``id`` (unique 0..), ``g`` (group key with NULLs), ``i`` (BIGINT: NULLs, zero,
  negatives, values near the int64 limits that cancel, so every sum fits), ``f`` (DOUBLE:
  large, small, negative, -0.0, NULLs), ``s`` (VARCHAR: NULL, '', spaces, case), ``d`` (DATE
  from 1900 to 2038, before 1970 too), ``m`` (DECIMAL(15,2)), ``b`` (BOOLEAN);
- ``u``: a join partner: ``k`` (keys with duplicates, NULLs, misses), ``w``, ``s``, ``d``,
  ``m`` (DECIMAL(15,2) stored as INT64, as DuckDB and tpchgen write it);
- ``e``: empty, the columns of ``u``; ``n``: three rows, every value NULL.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import numpy as np

SEED = 20261205
ROW_GROUP = 7  # rows per Parquet row group of the small tables
TPCH_SF = 0.001
TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders",
               "lineitem")
BIG = 9_000_000_000_000_000_000  # near int64's limit; +BIG and -BIG both appear once

_STRINGS = ["a", "A", "", " a", "a ", " ", "apple", "Apple", "APPLE", "banana split",
            "b%c", "b_c", "zeta", "x y z", "mañana", "1995", "abcabc"]
_DATES = [dt.date(1900, 2, 28), dt.date(1969, 12, 31), dt.date(1970, 1, 1),
          dt.date(1999, 12, 31), dt.date(2000, 2, 29), dt.date(2000, 3, 1),
          dt.date(1995, 6, 15), dt.date(2024, 12, 31), dt.date(2038, 1, 19),
          dt.date(1960, 7, 4)]
_DECIMALS = ["0.00", "-0.01", "0.01", "99.99", "-99.99", "12345678901.23", "-1234567.89",
             "1.10", "2.20", "3.30", "1000000.01", "0.50"]
_FLOATS = [0.0, -0.0, 1.5, -2.25, 3.0e12, 2.5e-12, -7.125e6, 1.0 / 3.0, 100.0, -0.5]


def _nullable(rng: np.random.Generator, values: list, rate: float) -> list:
    return [None if rng.random() < rate else v for v in values]


def small_tables(seed: int = SEED) -> dict[str, object]:
    """The small tables as ``pyarrow.Table`` s, the same for the same seed."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    n = 48
    ints: list[int | None] = [int(x) for x in rng.integers(-1000, 1000, n)]
    for k in range(4, n, 9):
        ints[k] = None
    # zeros, +-1 and the extremes, which cancel in any sum of all rows (sums stay in range)
    for k, v in {3: BIG, 21: -BIG, 7: 0, 11: 0, 16: -1, 30: 1}.items():
        ints[k] = v
    t = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "g": pa.array(_nullable(rng, [int(x) for x in rng.integers(0, 6, n)], 0.15),
                      pa.int64()),
        "i": pa.array(ints, pa.int64()),
        "f": pa.array(_nullable(rng, [_FLOATS[x] for x in rng.integers(0, len(_FLOATS), n)],
                                0.15), pa.float64()),
        "s": pa.array(_nullable(rng, [_STRINGS[x] for x in rng.integers(0, len(_STRINGS), n)],
                                0.15), pa.string()),
        "d": pa.array(_nullable(rng, [_DATES[x] for x in rng.integers(0, len(_DATES), n)],
                                0.15), pa.date32()),
        "m": pa.array(_nullable(rng, [Decimal(_DECIMALS[x])
                                      for x in rng.integers(0, len(_DECIMALS), n)], 0.15),
                      pa.decimal128(15, 2)),
        "b": pa.array(_nullable(rng, [bool(x) for x in rng.integers(0, 2, n)], 0.2),
                      pa.bool_()),
    })
    m = 24
    u = pa.table({
        "k": pa.array(_nullable(rng, [int(x) for x in rng.integers(0, 9, m)], 0.15), pa.int64()),
        "w": pa.array(_nullable(rng, [int(x) for x in rng.integers(-50, 50, m)], 0.1),
                      pa.int64()),
        "s": pa.array(_nullable(rng, [_STRINGS[x] for x in rng.integers(0, len(_STRINGS), m)],
                                0.15), pa.string()),
        "d": pa.array(_nullable(rng, [_DATES[x] for x in rng.integers(0, len(_DATES), m)],
                                0.15), pa.date32()),
        "m": pa.array(_nullable(rng, [Decimal(_DECIMALS[x])
                                      for x in rng.integers(0, len(_DECIMALS), m)], 0.15),
                      pa.decimal128(15, 2)),
    })
    e = u.schema.empty_table()
    nulls = pa.table({"k": pa.nulls(3, pa.int64()), "v": pa.nulls(3, pa.float64()),
                      "s": pa.nulls(3, pa.string()), "d": pa.nulls(3, pa.date32())})
    return {"t": t, "u": u, "e": e, "n": nulls}


def write(out: str | Path, seed: int = SEED) -> Path:
    """The small tables and TPC-H (SF ``TPCH_SF``, from tpchgen-cli) as ``out/<name>.parquet``;
    TPC-H rewritten in row groups of 500 rows (decimals stored as integers, as tpchgen does)
    so several ranks share each table."""
    import pyarrow.parquet as pq
    from hpc.domains.sql.tpch import generate

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in small_tables(seed).items():
        pq.write_table(table, out / f"{name}.parquet", row_group_size=ROW_GROUP,
                       store_decimal_as_integer=(name == "u"))
    generate(TPCH_SF, out, TPCH_TABLES)
    for name in ("orders", "lineitem", "partsupp", "part", "customer"):
        path = out / f"{name}.parquet"
        pq.write_table(pq.read_table(path), path, row_group_size=500,
                       store_decimal_as_integer=True)
    return out


def duckdb_over(directory: str | Path):
    """A DuckDB connection with a view per Parquet file of ``directory``."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 1")
    for path in sorted(Path(directory).glob("*.parquet")):
        con.execute(f"CREATE VIEW {path.stem} AS SELECT * FROM read_parquet('{path}')")
    return con
