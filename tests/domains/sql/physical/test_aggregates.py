"""Differential tests of the physical aggregates against DuckDB: random columns rich in NULLs,
duplicates, extremes and empty groups, grouped by a small key; each aggregate's SQL text is
bound by our binder, its arguments evaluated and reduced by
:func:`~hpc.domains.sql.physical.aggregates.aggregate_column`, and compared with DuckDB's
``SELECT k, agg FROM t GROUP BY k`` group by group."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import given

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")
sqlglot = pytest.importorskip("sqlglot")

from hpc.domains.sql.binder.expressions import bind_expression  # noqa: E402
from hpc.domains.sql.errors import SQLError  # noqa: E402
from hpc.domains.sql.logical import types as T  # noqa: E402
from hpc.domains.sql.logical.expr import AGGREGATES, Aggregate  # noqa: E402
from hpc.domains.sql.physical.aggregates import aggregate_column  # noqa: E402
from hpc.domains.sql.physical.evaluate import evaluate  # noqa: E402
from hpc.domains.sql.table import Column  # noqa: E402

from tests.domains.sql.physical.test_evaluate import (  # noqa: E402
    SCHEMA,
    batch_of,
    duck,
    python_values,
    same,
    scope,
    tables,
)
from tests.fuzz import fuzz  # noqa: E402

NGROUPS = 4  # k is in 0..3


def bind_aggregate(sql: str) -> Aggregate:
    tree = sqlglot.parse_one(f"SELECT {sql} FROM t", dialect="duckdb")
    e = bind_expression(tree.expressions[0], scope())
    assert isinstance(e, Aggregate), e
    return e


def ours(agg: Aggregate, data: dict[str, list[Any]]) -> Column:
    batch = batch_of(data)
    ids = np.asarray(data["k"], dtype=np.int64)
    args = [evaluate(a, batch) for a in agg.args]
    order = [evaluate(k.expr, batch) for k in agg.order]
    return aggregate_column(agg, ids, NGROUPS, args, order=order)


def check(sql: str, data: dict[str, list[Any]], con: Any) -> None:
    """DuckDB's ``SELECT k, sql ... GROUP BY k`` equals ours in every group present; groups
    without rows give NULL (COUNT: 0)."""
    agg = bind_aggregate(sql)
    try:
        want = dict(con.execute(f"SELECT k, {sql} FROM t GROUP BY k").fetchall())
    except (duckdb.OutOfRangeException, duckdb.InvalidInputException):
        with pytest.raises(SQLError):  # the arguments' own errors (overflow): ours too
            ours(agg, data)
        return
    try:
        col = ours(agg, data)
    except SQLError as exc:  # only a SUM beyond 64 bits, which DuckDB holds in 128
        assert "SUM" in str(exc) and any(
            v is not None and abs(int(v)) >= 2**63 for v in want.values()), (sql, exc)
        return
    assert len(col) == NGROUPS, sql
    got = python_values(col, agg.type)
    # DuckDB interpolates DECIMAL quantiles in DOUBLE in a way we match to one unit of the
    # last digit (and DOUBLE's precision) only: its exact formula was not found
    unit = (Decimal(1).scaleb(-agg.type.scale) if agg.type.kind == "decimal"
            and agg.name in ("median", "quantile_cont") else Decimal(0))
    for g in range(NGROUPS):
        if g in want:
            close = (unit and got[g] is not None and want[g] is not None
                     and abs(got[g] - want[g]) <= unit + abs(want[g]) * Decimal("1e-15"))
            assert close or same(got[g], want[g]), (
                f"{sql} (bound {agg}) group {g}: ours {got[g]!r}, DuckDB {want[g]!r}\n{data}")
        else:
            assert got[g] == (0 if agg.name in ("count", "count_star") else None), (sql, g)


AGGREGATE_SQL = [
    "count(*)", "count(i)", "count(s)", "count(distinct i)", "count(distinct s)",
    "count(distinct f)", "count(distinct dt)", "sum(i)", "sum(b)", "sum(d)", "sum(e)",
    "sum(f)", "sum(distinct i)", "sum(distinct d)", "sum(bo)", "avg(i)", "avg(b)", "avg(d)",
    "avg(e)", "avg(f)", "avg(distinct j)", "min(i)", "max(i)", "min(b)", "max(d)", "min(e)",
    "min(f)", "max(f)", "min(s)", "max(s)", "min(dt)", "max(dt)", "min(ts)", "max(ts)",
    "min(bo)", "max(bo)", "stddev_samp(f)", "stddev_pop(i)", "var_samp(d)", "var_pop(f)",
    "stddev(j)", "variance(e)", "median(i)", "median(d)", "median(f)", "median(dt)",
    "median(ts)", "median(s)", "median(e)", "quantile_cont(f, 0.25)",
    "quantile_cont(d, 0.1)", "quantile_cont(i, 0.9)", "quantile_cont(ts, 0.3)",
    "quantile_cont(e, 0.75)", "string_agg(s, ',')", "string_agg(s, '-' order by s desc)",
    "string_agg(distinct s, '|' order by s)", "string_agg(s, ',' order by i nulls first, s)",
    "string_agg(u, '' order by f desc nulls last, u)", "bool_and(bo)", "bool_or(bo)",
    "first(i)", "first(s)", "min(i + j)", "sum(d * i)", "count(distinct case when bo then s end)",
]


@fuzz(15)
@given(data=tables(max_rows=30))
def test_aggregates_equal_duckdb(data: dict[str, list[Any]]) -> None:
    con = duck(data)
    con.execute("SET threads = 1")  # FIRST and STRING_AGG follow the input order
    for sql in AGGREGATE_SQL:
        check(sql, data, con)


def test_every_aggregate_is_covered() -> None:
    # GROUPING() is given its value per grouping set by the SELECT binder, never reduced
    assert {bind_aggregate(sql).name for sql in AGGREGATE_SQL} == set(AGGREGATES) - {
        "grouping"}


def test_sum_overflow_raises() -> None:
    """A BIGINT sum past 64 bits raises (this engine holds HUGEINT in int64); one that
    comes back into range is exact."""
    agg = bind_aggregate("sum(b)")
    big = Column(np.array([2**62, 2**62, -5], dtype=np.int64), "int")
    ids = np.zeros(3, dtype=np.int64)
    assert aggregate_column(agg, ids, 1, [big]).values[0] == 2**63 - 5
    with pytest.raises(SQLError, match="SUM"):
        aggregate_column(agg, ids, 1, [Column(np.array([2**62, 2**62, 5], dtype=np.int64), "int")])


def test_empty_input() -> None:
    """No rows: COUNT is 0, everything else NULL, in every group."""
    data = {c: [] for c in SCHEMA}
    for sql in ["count(*)", "sum(i)", "median(d)", "string_agg(s, ',')", "min(s)",
                "first(dt)", "var_samp(f)", "bool_or(bo)"]:
        col = ours(bind_aggregate(sql), data)
        want = [0] * NGROUPS if sql == "count(*)" else [None] * NGROUPS
        assert python_values(col, bind_aggregate(sql).type) == want, sql
    assert isinstance(T.HUGEINT, T.SQLType)
