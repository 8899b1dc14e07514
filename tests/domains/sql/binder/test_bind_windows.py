"""Binding window functions: the window plan nodes (one per partition and order), DuckDB's
frame defaults, named windows, QUALIFY, and the errors that name the construct."""

from __future__ import annotations

import pytest
from hpc.domains.sql.binder.select import bind
from hpc.domains.sql.errors import SQLError, UnsupportedSQL
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.types import BIGINT, DOUBLE, INTEGER, VARCHAR, decimal

SCHEMA = {"a": {"k": INTEGER, "x": decimal(15, 2), "s": VARCHAR, "f": DOUBLE}}


def _windows(sql: str) -> list[P.Window]:
    return [n for n in P.nodes(bind(sql, SCHEMA)) if isinstance(n, P.Window)]


def test_one_window_node_per_partition_and_order():
    nodes = _windows("SELECT row_number() OVER (PARTITION BY k ORDER BY x), "
                     "rank() OVER (PARTITION BY k ORDER BY x), "
                     "sum(x) OVER (ORDER BY f), count(*) OVER () FROM a")
    assert sorted(len(n.functions) for n in nodes) == [1, 1, 2]
    shared = next(n for n in nodes if len(n.functions) == 2)
    assert [str(e) for e in shared.partition] == ["a.k"]
    assert {w.name for _, w in shared.functions} == {"row_number", "rank"}


def test_frame_defaults_are_duckdbs():
    (ordered,) = _windows("SELECT sum(x) OVER (ORDER BY k) FROM a")
    (whole,) = _windows("SELECT sum(x) OVER (PARTITION BY k) FROM a")
    (rows,) = _windows("SELECT sum(x) OVER (ORDER BY k ROWS 2 PRECEDING) FROM a")
    frame = ordered.functions[0][1].frame
    assert (frame.kind, frame.start.side, frame.end.side) == ("range", "unbounded_preceding",
                                                              "current")
    assert whole.functions[0][1].frame == E.WHOLE_PARTITION
    frame = rows.functions[0][1].frame
    assert (frame.kind, frame.start, frame.end) == ("rows", E.Bound("preceding", 2),
                                                    E.Bound("current"))


def test_result_types():
    (node,) = _windows("SELECT row_number() OVER w, percent_rank() OVER w, sum(x) OVER w, "
                       "lag(k, 1, 2.5) OVER w, avg(k) OVER w FROM a WINDOW w AS (ORDER BY f)")
    types = [w.type for _, w in node.functions]
    assert types[:3] == [BIGINT, DOUBLE, decimal(38, 2)]
    assert types[3].kind == "decimal" and types[4] == DOUBLE


def test_named_windows_and_their_refinements():
    (node,) = _windows("SELECT sum(x) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) "
                       "FROM a WINDOW w AS (PARTITION BY s ORDER BY k)")
    (_, w), = node.functions
    assert [str(e) for e in w.partition] == ["a.s"] and w.frame.kind == "rows"


def test_aggregates_of_groups_inside_windows():
    plan = bind("SELECT k, sum(sum(x)) OVER (ORDER BY k) FROM a GROUP BY k", SCHEMA)
    kinds = [type(n).__name__ for n in P.nodes(plan)]
    assert kinds.index("Window") < kinds.index("Aggregate")  # the window above the grouping


def test_qualify_filters_above_the_window():
    plan = bind("SELECT k FROM a QUALIFY row_number() OVER (PARTITION BY s ORDER BY k) = 1",
                SCHEMA)
    kinds = [type(n).__name__ for n in P.nodes(plan)]
    assert kinds.index("Filter") < kinds.index("Window")


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT k FROM a WHERE row_number() OVER () > 1", "WHERE cannot contain window"),
    ("SELECT k FROM a GROUP BY k HAVING rank() OVER (ORDER BY k) = 1", "HAVING"),
    ("SELECT sum(row_number() OVER ()) FROM a", "inside an aggregate"),
    ("SELECT sum(x) OVER (ORDER BY k, s RANGE 1 PRECEDING) FROM a", "exactly one ORDER BY"),
    ("SELECT sum(x) OVER w FROM a", "unknown window 'w'"),
    ("SELECT ntile(0) OVER (ORDER BY k) FROM a", "at least 1"),
    ("SELECT rank() IGNORE NULLS OVER (ORDER BY k) FROM a", "IGNORE NULLS"),
    ("SELECT sum(x) OVER (ORDER BY k ROWS BETWEEN CURRENT ROW AND 1 PRECEDING) FROM a",
     "starts after it ends"),
])
def test_errors_name_the_problem(sql, words):
    with pytest.raises(SQLError) as info:
        bind(sql, SCHEMA)
    assert words.lower() in str(info.value).lower()
    assert not isinstance(info.value, UnsupportedSQL) or "window" in words.lower()


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT sum(x) OVER (ORDER BY s RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM a",
     "VARCHAR"),
    ("SELECT sum(x) OVER (ORDER BY x RANGE BETWEEN 0.125 PRECEDING AND CURRENT ROW) FROM a",
     "more decimals"),
    ("SELECT lag(x, k) OVER (ORDER BY k) FROM a", "constant integer"),
])
def test_unsupported_constructs_are_named(sql, words):
    with pytest.raises(UnsupportedSQL, match=words):
        bind(sql, SCHEMA)
