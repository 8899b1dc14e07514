"""The SELECT binder and the logical optimizer passes: subqueries planned as joins (nothing
runs while planning), predicates and projections pushed down, errors naming the construct."""

from __future__ import annotations

import pytest
from hpc.domains.sql.binder.select import bind
from hpc.domains.sql.errors import SQLError, UnsupportedSQL
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.types import BIGINT, INTEGER, VARCHAR, decimal
from hpc.domains.sql.optimizer.distribute import distribute
from hpc.domains.sql.optimizer.prune import prune_columns
from hpc.domains.sql.optimizer.pushdown import push_filters

SCHEMA = {"a": {"k": INTEGER, "x": decimal(15, 2), "s": VARCHAR},
          "b": {"k": BIGINT, "y": VARCHAR}}


def _plan(sql: str) -> P.Node:
    return prune_columns(push_filters(bind(sql, SCHEMA)))


def _joins(plan: P.Node) -> list[P.Join]:
    return [n for n in P.nodes(plan) if isinstance(n, P.Join)]


def test_subqueries_become_joins_of_the_right_kind():
    cases = {
        "SELECT x FROM a WHERE k IN (SELECT k FROM b)": ("semi", False),
        "SELECT x FROM a WHERE k NOT IN (SELECT k FROM b)": ("anti", True),
        "SELECT x FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k)": ("semi", False),
        "SELECT x FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k)": ("anti", False),
        "SELECT x FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k) OR x > 1": ("mark",
                                                                                  False),
        "SELECT k, (SELECT MAX(y) FROM b) FROM a": ("single", False),
    }
    for sql, (kind, null_aware) in cases.items():
        (j,) = _joins(_plan(sql))
        assert (j.kind, j.null_aware) == (kind, null_aware), sql


def test_a_correlated_aggregate_is_grouped_by_its_correlation_and_count_reads_zero():
    plan = _plan("SELECT k, (SELECT COUNT(*) FROM b WHERE b.k = a.k) AS c FROM a")
    (j,) = _joins(plan)
    assert j.kind == "single"
    grouped = [n for n in P.nodes(j.right) if isinstance(n, P.Aggregate)]
    assert [str(e) for _, e in grouped[0].keys] == ["b.k"]
    assert "coalesce" in P.explain(plan)  # COUNT of an empty group is 0, not NULL


def test_where_equalities_turn_a_from_list_into_an_equi_join_and_filters_reach_the_scans():
    plan = _plan("SELECT s FROM a, b WHERE a.k = b.k AND b.y = 'z' AND a.x > 2")
    (j,) = _joins(plan)
    assert j.kind == "inner" and str(j.condition).startswith("eq(")
    assert isinstance(j.left, P.Filter) and isinstance(j.right, P.Filter)
    scans = {n.alias: [c for _, c, _ in n.columns] for n in P.nodes(plan)
             if isinstance(n, P.Scan)}
    assert scans == {"a": ["k", "x", "s"], "b": ["k", "y"]}


def test_a_filter_on_the_padded_side_of_an_outer_join_stays_above_it():
    plan = _plan("SELECT a.k FROM a LEFT JOIN b ON a.k = b.k WHERE b.y IS NULL")
    (j,) = _joins(plan)
    assert not isinstance(j.right, P.Filter)
    assert any(isinstance(n, P.Filter) and "is_null" in str(n.condition)
               for n in P.nodes(plan))


def test_exchanges_appear_only_for_several_ranks():
    plan = _plan("SELECT s, SUM(x) FROM a GROUP BY s ORDER BY 2 LIMIT 3")
    assert not any(isinstance(n, P.Exchange) for n in P.nodes(distribute(plan, lambda t: 10,
                                                                           1)))
    hows = [n.how for n in P.nodes(distribute(plan, lambda t: 10, 3))
            if isinstance(n, P.Exchange)]
    assert hows == ["gather", "hash"]


@pytest.mark.parametrize("sql, error, words", [
    ("SELECT x FROM a GROUP BY s", SQLError, "GROUP BY"),
    ("SELECT q FROM a", SQLError, "q"),
    ("SELECT (SELECT k, y FROM b) FROM a", SQLError, "2 columns"),
    ("SELECT x FROM a UNION SELECT y FROM b", SQLError, "DECIMAL.* on one side and VARCHAR"),
    ("SELECT x, k FROM a EXCEPT SELECT k FROM b", SQLError, "2 and 1 columns"),
    ("SELECT DISTINCT ON (k) x FROM a", UnsupportedSQL, "DISTINCT ON"),
    ("SELECT a.x, l.y FROM a RIGHT JOIN LATERAL (SELECT b.y FROM b WHERE b.k = a.k) AS l "
     "ON TRUE", SQLError, "RIGHT JOIN LATERAL at line 1.*only by INNER, LEFT or CROSS"),
    ("SELECT x FROM a LIMIT -1", (SQLError, UnsupportedSQL), "LIMIT"),
])
def test_errors_name_the_construct(sql, error, words):
    with pytest.raises(error, match=words):
        _plan(sql)


def test_a_string_only_its_scan_filter_reads_per_entry_is_read_raw():
    from hpc.domains.sql.optimizer.raw_strings import raw_strings

    plan = raw_strings(_plan("SELECT COUNT(*) FROM a WHERE s LIKE '%x%' AND k > 1"))
    (scan,) = [n for n in P.nodes(plan) if isinstance(n, P.Scan)]
    assert scan.raw == ("s",) and "s (raw)" in P.explain(plan)
    for sql in ("SELECT COUNT(*) FROM a WHERE s || 'y' = 'x'",  # not per entry
                "SELECT MEDIAN(s) FROM a WHERE k > 1",  # ordered by an aggregate
                "SELECT k, MAX(s) AS m FROM a GROUP BY k ORDER BY m",  # MAX's result sorted
                "SELECT COUNT(*) FROM a JOIN b ON a.s < b.y"):  # not an equi-join key
        plan = raw_strings(_plan(sql))
        assert all(not n.raw for n in P.nodes(plan) if isinstance(n, P.Scan)), sql
    # MIN/MAX compare bytes, COUNT(DISTINCT) and equi-join keys hash them: raw
    for sql in ("SELECT MAX(s), MIN(s) FROM a WHERE k > 1",
                "SELECT k, COUNT(DISTINCT s) FROM a GROUP BY k",
                "SELECT COUNT(*) FROM a JOIN b ON a.s = b.y"):
        plan = raw_strings(_plan(sql))
        assert any("s" in n.raw for n in P.nodes(plan) if isinstance(n, P.Scan)), sql
    # read again above the filter (compared by a sort): raw below it, settled by it on the
    # rows it keeps
    plan = raw_strings(_plan("SELECT s FROM a WHERE s LIKE '%x%' ORDER BY s"))
    (scan,) = [n for n in P.nodes(plan) if isinstance(n, P.Scan)]
    (filt,) = [n for n in P.nodes(plan) if isinstance(n, P.Filter)]
    assert scan.raw == ("s",) and filt.settle == ("a.s",)
    assert "then settle [a.s]" in P.explain(plan)
    # only passed on to the result: carried raw, the filter settles nothing
    plan = raw_strings(_plan("SELECT s FROM a WHERE s LIKE '%x%'"))
    (scan,) = [n for n in P.nodes(plan) if isinstance(n, P.Scan)]
    (filt,) = [n for n in P.nodes(plan) if isinstance(n, P.Filter)]
    assert scan.raw == ("s",) and filt.settle == ()


@pytest.mark.parametrize("sql, carried", [
    ("SELECT s FROM a", {"a.s"}),
    ("SELECT k, s AS name FROM a WHERE k > 1 LIMIT 3", {"a.s"}),
    ("SELECT k, s, SUM(x) FROM a GROUP BY k, s", {"a.s"}),  # a key: settled if not determined
    ("SELECT s FROM a ORDER BY s", set()),  # compared by the sort
    ("SELECT DISTINCT s FROM a", set()),
    ("SELECT MAX(s) FROM a", {"a.s"}),  # bytes compared in the aggregate, result passed on
    ("SELECT MAX(s) AS m FROM a GROUP BY k ORDER BY m", set()),  # MAX's result compared
    ("SELECT MEDIAN(s) FROM a", set()),
    ("SELECT COUNT(DISTINCT s) FROM a", {"a.s"}),  # told apart by hashing
    ("SELECT a.k FROM a JOIN b ON a.s = b.y", {"a.s", "b.y"}),  # an equi-join key: hashed
    ("SELECT a.k FROM a JOIN b ON a.s < b.y", set()),
    ("SELECT lower(s) FROM a", {"a.s"}),  # a per-entry function: its result is sorted
    ("SELECT s FROM a ORDER BY substring(s, 2, 3)", {"a.s"}),
    ("SELECT COUNT(*) FROM a WHERE length(s) > 3 AND s IN ('ab', 'cd')", {"a.s"}),
    ("SELECT s FROM a UNION SELECT s FROM a", set()),
    ("SELECT s FROM a WHERE s = 'x' OR k > 1", {"a.s"}),  # per entry, within an OR
    ("SELECT s FROM a WHERE s || 'y' = 'xy'", set()),  # a function of the string
    ("SELECT k, ROW_NUMBER() OVER (PARTITION BY s ORDER BY k) FROM a", set()),
])
def test_carried_strings_are_only_those_no_operator_compares(sql, carried):
    from hpc.domains.sql.optimizer.raw_strings import carried_columns

    assert carried_columns(_plan(sql)) == carried


def test_a_grouped_subquery_is_reduced_to_the_keys_its_partner_holds():
    from hpc.domains.sql.optimizer.reduce_groups import reduce_groups

    class Rows:  # the catalog's row counts: a is the fact table
        def num_rows(self, table: str) -> int:
            return {"a": 1_000_000, "b": 1_000}[table]

    sql = ("SELECT b.y FROM b WHERE b.y = 'z' AND b.k > "
           "(SELECT AVG(a.x) FROM a WHERE a.k = b.k)")
    plan = reduce_groups(_plan(sql), Rows())
    (agg,) = [n for n in P.nodes(plan) if isinstance(n, P.Aggregate)]
    assert isinstance(agg.input, P.Join) and agg.input.kind == "semi"
    assert any(isinstance(n, P.Scan) and n.table == "b" for n in P.nodes(agg.input.right))
    # NOT IN's null-aware join must see every NULL: never reduced
    plan = reduce_groups(_plan("SELECT b.y FROM b WHERE b.k NOT IN "
                               "(SELECT a.k FROM a GROUP BY a.k)"), Rows())
    assert not any(isinstance(n, P.Join) and n.kind == "semi" for n in P.nodes(plan))


@pytest.mark.parametrize(("b_rows", "reduced"), [
    (1_000, True), (600_000, True),  # keys estimated 1/4 of b (a filter) <= KEYS_AT_MOST
    (2_000_000, False),  # 500k keys: more than KEYS_AT_MOST
])
def test_a_grouped_subquery_is_reduced_only_by_few_keys(b_rows, reduced):
    from hpc.domains.sql.optimizer.reduce_groups import KEYS_AT_MOST, reduce_groups

    class Rows:
        def num_rows(self, table: str) -> int:
            return {"a": 100_000_000, "b": b_rows}[table]

    assert (b_rows / 4 <= KEYS_AT_MOST) == reduced
    sql = ("SELECT b.y FROM b WHERE b.y = 'z' AND b.k > "
           "(SELECT AVG(a.x) FROM a WHERE a.k = b.k)")
    plan = reduce_groups(_plan(sql), Rows())
    assert any(isinstance(n, P.Join) and n.kind == "semi" for n in P.nodes(plan)) == reduced


def test_an_aggregate_of_one_side_grouped_by_the_other_sides_join_key_runs_below_the_join():
    from hpc.domains.sql.optimizer.eager_aggregate import eager_aggregates

    class Catalog:  # b: 100 keys; a: 1000 rows, every one with a key of b
        def num_rows(self, table: str) -> int:
            return {"a": 1000, "b": 100}[table]

        def distinct_bound(self, table: str, column: str) -> int:
            return 100

        distinct_estimate = distinct_bound

    def eager(sql: str) -> P.Node:
        return eager_aggregates(push_filters(bind(sql, SCHEMA)), Catalog())

    sql = "SELECT b.k, COUNT(a.x) AS c, MAX(a.s) AS m FROM b LEFT JOIN a ON a.k = b.k GROUP BY b.k"
    plan = eager(sql)
    (j,) = _joins(plan)
    (pre,) = [n for n in P.nodes(j.right) if isinstance(n, P.Aggregate)]
    # a's rows grouped by a's join key (cast to b.k's type: the join reads the cast)
    assert [str(e) for _, e in pre.keys] == ["CAST(a.k AS BIGINT)"]
    assert pre.keys[0][0] in str(j.condition)
    assert "coalesce" in P.explain(plan)  # a key without partner: a COUNT of 0, not NULL
    assert plan.schema == push_filters(bind(sql, SCHEMA)).schema
    for sql in [
        "SELECT b.y, COUNT(a.x) FROM b LEFT JOIN a ON a.k = b.k GROUP BY b.y",  # not the key
        "SELECT b.k, COUNT(DISTINCT a.x) FROM b LEFT JOIN a ON a.k = b.k GROUP BY b.k",
        "SELECT b.k, COUNT(*) FROM b LEFT JOIN a ON a.k = b.k GROUP BY b.k",  # counts b's rows
        "SELECT b.k, AVG(a.x) FROM b JOIN a ON a.k = b.k GROUP BY b.k",
        "SELECT b.k, COUNT(a.x) FROM b JOIN a ON a.k = b.k AND a.x > b.k GROUP BY b.k",
        "SELECT b.k, COUNT(a.x), MAX(b.y) FROM b JOIN a ON a.k = b.k GROUP BY b.k",  # both
        # the join keeps few of a's rows (b filtered to one key): a's rows grouped in vain
        "SELECT b.k, COUNT(a.x) FROM b JOIN a ON a.k = b.k WHERE b.k = 7 GROUP BY b.k",
    ]:
        (j,) = _joins(eager(sql))
        assert not any(isinstance(n, P.Aggregate) for n in P.nodes(j)), sql
