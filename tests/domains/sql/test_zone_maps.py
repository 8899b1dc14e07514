"""Zone maps: scans skip the Parquet row groups whose statistics rule the filter out. Every
row group holding a matching row is read (checked group by group with DuckDB), groups are
skipped where the data is clustered, and answers equal DuckDB's on 1 and 2 ranks, with
NULLs, strings, dates, decimals, IN lists, OR, and filters that keep no group."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pytest

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("sqlglot")
from hpc.domains.sql import Catalog, pipeline, query  # noqa: E402
from hpc.domains.sql.logical import plan as P  # noqa: E402
from hpc.domains.sql.logical.expr import Ref, transform  # noqa: E402
from hpc.domains.sql.statistics import groups_may_match  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.conftest import mpi_script, run_mpi  # noqa: E402
from tests.domains.sql.duckdb_agreement import differences  # noqa: E402

EPOCH = datetime.date(1970, 1, 1)


def _unprefixed(scan):
    """``scan.prune`` over the file's column names."""
    names = {name: source for name, source, _ in scan.columns}
    return transform(scan.prune, lambda e: Ref(names[e.name], e.type)
                     if isinstance(e, Ref) else None)


def clustered_table(rng: np.random.Generator, rows: int, nulls: float) -> pa.Table:
    """Columns in ascending order (with NULLs sprinkled in): integers, dates, decimals,
    strings; a double and an unordered integer beside them."""
    k = np.sort(rng.integers(-500, 500, rows))
    null = rng.random(rows) < nulls
    words = np.array([f"w{v:04d}" for v in np.sort(rng.integers(0, 2000, rows))], dtype=str)
    return pa.table({
        "k": pa.array(k, mask=null),
        "d": pa.array(np.sort(rng.integers(9000, 9400, rows)).astype(np.int32),
                      pa.int32()).cast(pa.date32()),
        "m": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in
                       np.sort(rng.integers(0, 100_000, rows))], pa.decimal128(12, 2)),
        "s": pa.array(words, mask=rng.random(rows) < nulls),
        "x": rng.normal(size=rows),
        "u": rng.integers(0, 50, rows),
    })


def _value(column: str, rng: np.random.Generator) -> str:
    if column == "k":
        return str(int(rng.integers(-600, 600)))
    if column == "d":
        return f"DATE '{EPOCH + datetime.timedelta(days=int(rng.integers(8990, 9410)))}'"
    if column == "m":
        return f"{rng.integers(-100, 100_100) / 100:.2f}"
    if column == "s":
        return f"'w{int(rng.integers(0, 2100)):04d}'"
    return str(int(rng.integers(-5, 55)))


def random_predicate(rng: np.random.Generator, depth: int = 0) -> str:
    """Comparisons, IN lists and NULL tests of one column under AND / OR, sometimes with a
    term no statistic judges (a double, an expression)."""
    roll = rng.random()
    if depth < 2 and roll < 0.3:
        op = " and " if rng.random() < 0.6 else " or "
        return "(" + op.join(random_predicate(rng, depth + 1) for _ in range(2)) + ")"
    column = str(rng.choice(["k", "d", "m", "s", "u"]))
    if roll < 0.4:
        return f"{column} in ({', '.join(_value(column, rng) for _ in range(3))})"
    if roll < 0.47:
        return f"{column} is {'not ' if rng.random() < 0.5 else ''}null"
    if roll < 0.52:
        return f"x > {rng.normal():.3f}"
    if roll < 0.55:
        return "k + 1 > 0"
    if roll < 0.58:
        return f"{column} = NULL"
    op = str(rng.choice(["=", "<>", "<", "<=", ">", ">="]))
    if rng.random() < 0.5:
        return f"{column} {op} {_value(column, rng)}"
    flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    return f"{_value(column, rng)} {flipped} {column}"


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), rows=st.sampled_from([0, 1, 37, 3000]),
       group=st.sampled_from([1, 50, 400]), nulls=st.sampled_from([0.0, 0.1, 0.9]))
def test_no_row_group_holding_a_match_is_skipped(tmp_path_factory, seed, rows, group, nulls):
    rng = np.random.default_rng(seed)
    root = tmp_path_factory.mktemp("zones")
    table = clustered_table(rng, rows, nulls)
    pq.write_table(table, root / "t.parquet", row_group_size=group)
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    con.register("t", table)
    con.register("numbered", table.append_column("rn", pa.array(np.arange(rows))))
    meta = pq.ParquetFile(root / "t.parquet").metadata
    assert all(meta.row_group(g).num_rows == group for g in range(meta.num_row_groups - 1))
    for _ in range(4):
        where = random_predicate(rng)
        sql = f"select k, d, m, s, u from t where {where}"
        scan = next(n for n in P.nodes(pipeline.logical_plan(sql, catalog))
                    if isinstance(n, P.Scan))
        got = query(sql, catalog)
        differs = differences(got.to_pandas(), con.execute(sql).df())
        assert differs is None, f"{where}: {differs}"
        if scan.prune is None:
            continue
        kept = set(groups_may_match(meta, _unprefixed(scan)))
        holding = {g for (g,) in con.execute(
            f"select distinct rn // {group} from numbered where {where}").fetchall()}
        assert holding <= kept, f"{where}: row groups {sorted(holding - kept)} skipped"


def test_a_range_on_a_clustered_column_reads_only_its_row_groups(tmp_path):
    rng = np.random.default_rng(5)
    table = clustered_table(rng, 20_000, 0.0)
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1000)
    meta = pq.ParquetFile(tmp_path / "t.parquet").metadata
    catalog = Catalog.from_directory(tmp_path)
    sql = "select count(*) as n, sum(u) as s from t where d >= DATE '1994-09-01' " \
          "and d < DATE '1994-09-15' and u < 40"
    scan = next(n for n in P.nodes(pipeline.logical_plan(sql, catalog))
                if isinstance(n, P.Scan))
    assert scan.prune is not None and "u" in str(scan.prune)
    d = np.array(table.column("d").cast(pa.int32()))
    lo, hi = (datetime.date(1994, 9, 1) - EPOCH).days, (datetime.date(1994, 9, 15) - EPOCH).days
    holding = {g for g in range(20) if ((d[g * 1000:(g + 1) * 1000] >= lo)
                                        & (d[g * 1000:(g + 1) * 1000] < hi)).any()}
    # the sorted column's groups only
    assert set(groups_may_match(meta, _unprefixed(scan))) == holding
    assert len(holding) <= 2
    con = duckdb.connect()
    con.register("t", table)
    differs = differences(query(sql, catalog).to_pandas(), con.execute(sql).df())
    assert differs is None, differs


@pytest.mark.timeout(300)
def test_skipped_row_groups_on_two_ranks(tmp_path):
    """Fewer row groups kept than ranks, none kept, many kept: answers equal DuckDB's."""
    run_mpi(2, [str(mpi_script("check_sql_zone_maps.py")), str(tmp_path)], timeout=240)


@pytest.mark.timeout(600)
def test_bench_tpch_reads_the_fact_tables_sorted_by_date(tmp_path):
    """``hpc bench tpch --layout by-date``: lineitem and orders rewritten in date order,
    the answers still DuckDB's, the layout in the record."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "HPC_CACHE": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "hpc", "bench", "tpch", "--sf", "0.01", "--layout", "by-date",
         "--queries", "6,14", "--reps", "1", "--no-polars", "--json"],
        capture_output=True, text=True, env=env, timeout=500)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["size"]["layout"] == "by-date"
    assert all(q["equal_to_duckdb"] for q in record["queries"].values())
    for table, column in (("lineitem", "l_shipdate"), ("orders", "o_orderdate")):
        dates = pq.read_table(tmp_path / "tpch-sf0.01-by-date" / f"{table}.parquet",
                              columns=[column]).column(0).cast(pa.int32()).to_numpy()
        assert (np.diff(dates) >= 0).all()
        generated = pq.read_metadata(tmp_path / "tpch-sf0.01" / f"{table}.parquet").num_rows
        assert len(dates) == generated


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_carried_strings_cross_ranks_in_a_broadcast(tmp_path, nranks):
    """Raw string columns broadcast as their rows' bytes (unsorted, NULLs kept): answers
    equal DuckDB's through the result, a hash exchange and an outer join."""
    run_mpi(nranks, [str(mpi_script("check_sql_carried_strings.py")), str(tmp_path)],
            timeout=240)
