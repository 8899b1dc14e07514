"""The optimizer's estimates from column statistics: the share of rows a filter keeps
(compared with the share DuckDB counts on the same random rows), the ranges read from
Parquet footers and from tables held in memory (the same on every rank), and the broadcast
side of a distributed join chosen by bytes."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pytest

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("sqlglot")
from hpc.domains.sql import Catalog, Table, pipeline  # noqa: E402
from hpc.domains.sql.logical import plan as P  # noqa: E402
from hpc.domains.sql.optimizer.cardinality import Cardinality  # noqa: E402
from hpc.domains.sql.optimizer.distribute import distribute  # noqa: E402
from hpc.domains.sql.statistics import parquet_range  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.conftest import mpi_script, run_mpi  # noqa: E402

ROWS = 20_000
EPOCH = datetime.date(1970, 1, 1)


def _random_table(rng: np.random.Generator, lo: int, span: int) -> pa.Table:
    """Uniform integers, dates and decimals over ``[lo, lo + span)`` (decimals in cents),
    doubles over the same interval, a 5-value string column, no order."""
    ints = rng.integers(lo, lo + span, ROWS)
    return pa.table({
        "i": ints,
        "d": pa.array(rng.integers(lo, lo + span, ROWS).astype("int32"), pa.int32()).cast(
            pa.date32()),
        "m": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in
                       rng.integers(lo * 100, (lo + span) * 100, ROWS)], pa.decimal128(12, 2)),
        "f": rng.uniform(lo, lo + span, ROWS),
        "s": pa.array(rng.choice(["a", "b", "c", "d", "e"], ROWS)),
    })


def _literal(column: str, v: float) -> str:
    if column == "d":
        return f"DATE '{EPOCH + datetime.timedelta(days=int(v))}'"
    if column == "m":
        return f"{v:.2f}"
    return str(int(v)) if column == "i" else repr(float(v))


def _filter(plan: P.Node) -> P.Filter:
    return next(n for n in P.nodes(plan) if isinstance(n, P.Filter))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), lo=st.integers(-10_000, 10_000),
       span=st.integers(50, 100_000), column=st.sampled_from("idmf"),
       cuts=st.lists(st.floats(-0.2, 1.2), min_size=1, max_size=3),
       ops=st.lists(st.sampled_from(["<", "<=", ">", ">="]), min_size=3, max_size=3),
       also=st.sampled_from(["", "s = 'c'", "s in ('a', 'e')", "not (s = 'b')",
                             "(s = 'a' or s = 'b')", "s like 'a%'"]),
       memory=st.booleans())
def test_a_filter_keeps_the_share_its_column_ranges_predict(
        tmp_path_factory, seed, lo, span, column, cuts, ops, also, memory):
    rng = np.random.default_rng(seed)
    root = tmp_path_factory.mktemp("card")
    table = _random_table(rng, lo, span)
    pq.write_table(table, root / "t.parquet", row_group_size=4096)
    terms = [f"{column} {op} {_literal(column, lo + c * span)}"
             for c, op in zip(cuts, ops, strict=False)]
    if also:
        terms.append(also)
    where = " and ".join(terms)
    catalog = Catalog.from_directory(root)
    if memory:
        catalog = catalog.in_memory()
    plan = pipeline.logical_plan(f"select i from t where {where}", catalog)
    cards = Cardinality(catalog, plan)
    scan = next(n for n in P.nodes(plan) if isinstance(n, P.Scan))
    estimated = cards.rows(_filter(plan)) / cards.rows(scan)
    con = duckdb.connect()
    con.register("t", table)
    counted = con.execute(f"select count(*) from t where {where}").fetchone()[0] / ROWS
    if "like" in also:  # no statistic describes LIKE: a quarter of the range's share
        counted_ranges = con.execute(
            f"select count(*) from t where {' and '.join(terms[:-1])}").fetchone()[0] / ROWS
        assert estimated == pytest.approx(counted_ranges * 0.25, abs=0.03)
        return
    # uniform values: the estimate misses only by the sample's noise (and the rows at
    # least 1 of a filter that keeps none)
    assert estimated == pytest.approx(counted, abs=0.03 + 1 / ROWS)


def test_parquet_ranges_are_the_columns_min_and_max_in_the_engines_units(tmp_path):
    rng = np.random.default_rng(7)
    table = _random_table(rng, -300, 2_000)
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1000)
    files = [tmp_path / "t.parquet"]
    con = duckdb.connect()
    con.register("t", table)
    for column, unit in (("i", "i"), ("d", "d - DATE '1970-01-01'"), ("m", "m::DOUBLE"),
                         ("f", "f")):
        want = con.execute(f"select min({unit}), max({unit}) from t").fetchone()
        assert parquet_range(files, column) == pytest.approx(tuple(map(float, want)))
    assert parquet_range(files, "s") is None
    catalog = Catalog.from_directory(tmp_path)
    assert catalog.value_range("t", "s") is None
    assert catalog.value_range("t", "d") == catalog.in_memory().value_range("t", "d")


def test_a_join_broadcasts_the_side_with_fewer_bytes_not_fewer_rows(tmp_path):
    """A dimension of 30k rows with 100-character strings against 200k facts of 12 bytes
    a row filtered to two fifths: 80k rows, but a third of the other side's bytes."""
    rng = np.random.default_rng(3)
    words = np.array(["".join(rng.choice(list("abcdefgh"), 100)) for _ in range(30_000)])
    pq.write_table(pa.table({"k": np.arange(30_000), "text": words}), tmp_path / "dim.parquet")
    pq.write_table(pa.table({"k": rng.integers(0, 30_000, 200_000),
                             "v": rng.integers(0, 1000, 200_000).astype("int32")}),
                   tmp_path / "fact.parquet")
    sql = ("select dim.text, fact.v from dim join fact on dim.k = fact.k "
           "where fact.v >= 100 and fact.v < 500")
    catalog = Catalog.from_directory(tmp_path)
    plan = distribute(pipeline.logical_plan(sql, catalog), catalog.num_rows, 2,
                      catalog=catalog)
    moved = [n for n in P.nodes(plan) if isinstance(n, P.Exchange) and n.how == "broadcast"]
    assert len(moved) == 1
    scanned = {n.table for n in P.nodes(moved[0]) if isinstance(n, P.Scan)}
    assert scanned == {"fact"}
    # to 15 other ranks the broadcast would move more than partitioning both sides
    plan = distribute(pipeline.logical_plan(sql, catalog), catalog.num_rows, 16,
                      catalog=catalog)
    assert not any(isinstance(n, P.Exchange) and n.how == "broadcast" for n in P.nodes(plan))


@pytest.mark.timeout(300)
def test_in_memory_statistics_and_plans_are_the_same_on_every_rank(tmp_path):
    """Each rank registers other rows; the ranges, key bounds and chosen plans agree, and
    the answers equal DuckDB's on the union of the ranks' rows."""
    run_mpi(2, [str(mpi_script("check_sql_cardinality.py")), str(tmp_path)], timeout=240)


def test_registered_table_ranges_span_its_values():
    rng = np.random.default_rng(11)
    values = rng.normal(size=1000)
    values[::7] = np.nan
    catalog = Catalog()
    catalog.register("t", Table.from_arrow(pa.table({"x": values, "n": np.arange(1000)})))
    assert catalog.value_range("t", "x") == (np.nanmin(values), np.nanmax(values))
    assert catalog.value_range("t", "n") == (0.0, 999.0)
    assert catalog.distinct_bound("t", "n") == 1000
