"""Differential fuzzing against DuckDB: random tables (NULLs, duplicates, skewed and missing
keys, empty tables, all-NULL columns; ints, floats, strings, dates, decimals) and random queries
from :mod:`tests.domains.sql.querygen`, on one rank and on two; and SQL's three-valued logic of
``[NOT] IN`` with NULLs (in the set, in the probed value, an empty set) with regressions of what
the fuzzing found."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("sqlglot")

from hpc.domains.sql import Catalog, Table, query  # noqa: E402

from tests.conftest import ROOT, mpi_script, run_mpi  # noqa: E402
from tests.domains.sql import querygen  # noqa: E402
from tests.fuzz import draw, fuzz  # noqa: E402


def _engines(arrow: dict[str, object]):
    """The engine's catalog and a DuckDB connection over the same Arrow tables."""
    catalog, con = Catalog(), duckdb.connect()
    for name, table in arrow.items():
        catalog.register(name, Table.from_arrow(table))
        con.register(name, table)
    return catalog, con


def _assert_equal(sql: str, ordered: bool, catalog, con) -> None:
    problem = querygen.check(sql, ordered, catalog, con)
    assert problem is None, f"{sql}\n{problem}"


# -- NOT IN and NULLs -------------------------------------------------------------------------
def _null_tables() -> dict[str, object]:
    """t: probed values with a NULL; u: a NULL among its keys; e: empty; n: only NULLs;
    strings and dates alike."""
    import datetime as dt

    day = dt.date(1995, 1, 1)
    return {
        "t": pa.table({"k": pa.array([0, 1, 2, None, 5, 1], pa.int64()),
                       "s": pa.array(["a", "b", None, "c", "a", "z"]),
                       "d": pa.array([day, None, day + dt.timedelta(3), day, None, day],
                                     pa.date32())}),
        "u": pa.table({"k": pa.array([1, None, 7], pa.int64()),
                       "s": pa.array(["a", None, "q"]),
                       "d": pa.array([day, None, day], pa.date32()),
                       "w": pa.array([1, 2, 3], pa.int64())}),
        "e": pa.table({"k": pa.array([], pa.int64()), "s": pa.array([], pa.string())}),
        "n": pa.table({"k": pa.array([None, None], pa.int64()),
                       "s": pa.array([None, None], pa.string())}),
        # strings all NULL in the rows of the second rank (3-row groups on 2 ranks)
        "m": pa.table({"s": pa.array(["x", "a", "x", None, None, None])}),
    }


NULL_IN_QUERIES = [
    # a NULL in the subquery: NOT IN keeps no row, IN only the hits
    "select count(*) as n from t where t.k not in (select u.k from u)",
    "select count(*) as n from t where not (t.k in (select u.k from u))",
    "select count(*) as n from t where t.k in (select u.k from u)",
    "select count(*) as n from t where t.s not in (select u.s from u)",
    "select count(*) as n from t where t.d not in (select u.d from u)",
    # without the NULL (filtered out in the subquery): NOT IN keeps the misses, not NULL t.k
    "select count(*) as n from t where t.k not in (select u.k from u where u.w <> 2)",
    "select count(*) as n from t where t.s not in (select u.s from u where u.k is not null)",
    # an empty set: IN is false and NOT IN true, even for a NULL t.k
    "select count(*) as n from t where t.k not in (select e.k from e)",
    "select count(*) as n from t where t.k in (select e.k from e) or t.k is null",
    "select count(*) as n from t where t.s not in (select e.s from e)",
    "select count(*) as n from t where t.k not in (select u.k from u where u.w > 5)",
    # only NULLs: unknown for every row
    "select count(*) as n from t where t.k not in (select n.k from n)",
    "select count(*) as n from t where t.k in (select n.k from n) is null",
    # all-NULL string columns (no dictionary entries: on one rank, or on all)
    "select count(*) as n from t where t.s not in (select n.s from n)",
    "select m.s as s, count(*) as c from m group by m.s order by s nulls first",
    "select count(*) as n from m where m.s in (select t.s from t)",
    "select t.k as k, n.s as s from t left join n on t.s = n.s order by k nulls first",
    "select count(*) as c from t join m on t.s = m.s",
    # the value of IN itself (true, false or null) in the output, grouped by it
    "select t.k as k, t.k in (select u.k from u) as a, t.k not in (select e.k from e) as b "
    "from t order by k nulls first",
    "select t.k not in (select u.k from u where u.w <> 2) as x, count(*) as n from t "
    "group by t.k not in (select u.k from u where u.w <> 2) order by x nulls first",
    # literal lists with NULLs
    "select count(*) as n from t where t.k not in (1, null)",
    "select count(*) as n from t where t.k in (1, null)",
    "select count(*) as n from t where not (t.k in (null))",
    "select count(*) as n from t where t.s not in ('a', null)",
    "select count(*) as n from t where t.d not in (date '1995-01-01', null)",
    "select t.k as k, t.k not in (1, null) as a, t.k in (2, null) as b from t "
    "order by k nulls first",
    # a list of columns: the OR of the equalities
    "select count(*) as n from t join u on t.s = u.s where t.k not in (u.k, u.w)",
    # NULL compared with any kind is NULL (no type error)
    "select count(*) as n from t where not (t.d <= null) or t.s = null or t.k > null",
    # correlated NOT EXISTS is not NOT IN: a NULL key never matches
    "select count(*) as n from t where not exists (select * from u where u.k = t.k)",
    # IN in HAVING, on an aggregate
    "select t.s as s, count(*) as n from t group by t.s "
    "having count(*) not in (select u.w from u where u.w > 1) order by s nulls first",
]


@pytest.fixture(scope="module")
def null_engines():
    return _engines(_null_tables())


@pytest.mark.parametrize("sql", NULL_IN_QUERIES)
def test_in_and_not_in_with_nulls_equal_duckdb(null_engines, sql):
    """Three-valued IN: ``x NOT IN (S)`` is NULL when S holds a NULL and x is not found, or
    x is NULL and S is not empty; TRUE for an empty S. DuckDB's rows."""
    _assert_equal(sql, True, *null_engines)


def test_not_in_a_set_with_a_null_keeps_no_row_on_tpch_like_keys():
    """The reported case: ``c_custkey NOT IN (SELECT custkey FROM t)`` with a NULL in t is
    0 rows (not the count of the unmatched keys)."""
    customer = pa.table({"c_custkey": pa.array(range(1, 7501), pa.int64())})
    t = pa.table({"custkey": pa.array([3, None, *range(10, 175)], pa.int64())})
    catalog, con = _engines({"customer": customer, "t": t})
    sql = "select count(*) from customer where c_custkey not in (select custkey from t)"
    assert query(sql, catalog).to_pandas().iloc[0, 0] == con.execute(sql).fetchone()[0] == 0


# -- regressions of what the fuzzing found ----------------------------------------------------
def test_left_join_of_an_empty_table_outputs_null_strings():
    """A LEFT JOIN of an empty table gives string columns with no dictionary entries, only
    nulls: they decode to NULLs (once an IndexError in ``Table.to_arrow``)."""
    arrow = {"t": pa.table({"k": pa.array([1, 2, None], pa.int64())}),
             "r": pa.table({"k": pa.array([], pa.int64()), "s": pa.array([], pa.string())})}
    catalog, con = _engines(arrow)
    for sql in ["select t.k, r.s from t left join r on t.k = r.k order by t.k nulls last",
                "select r.s as s, count(*) as n from t left join r on t.k = r.k group by r.s"]:
        _assert_equal(sql, True, catalog, con)


def test_null_sort_keys_tie_so_the_next_key_decides():
    """Rows whose first ORDER BY key is NULL are ordered by the next key (the values stored
    under a NULL must not order them)."""
    import pyarrow as pa

    t = pa.table({"k": [0, 0, 1, 3, 2], "v": pa.array([None, 0, None, None, 5], pa.int64())})
    catalog, con = _engines({"t": t})
    for sql in [
        "select t.k as k, (t.k + t.v) / 4 as a, t.k / 4 as b from t "
        "order by a nulls first, b desc nulls first",
        "select t.k as k, t.v + t.k as a from t order by a desc nulls last, k",
    ]:
        _assert_equal(sql, True, catalog, con)


# -- random queries ---------------------------------------------------------------------------
@fuzz(60)
@given(querygen.cases())
def test_fuzz_random_queries_equal_duckdb(case):
    """Random tables and a few random queries over them: DuckDB's rows (in order where the
    ORDER BY is total), never an error (the generator stays in the supported grammar)."""
    data, queries = case
    catalog, con = _engines(querygen.from_plain(data))
    for q in queries:
        _assert_equal(q.sql, q.ordered, catalog, con)


@fuzz(15)
@given(querygen.cases(), st.sampled_from([1, 2, 3, 7, 1000]), st.booleans(), st.booleans(),
       st.sampled_from(["snappy", "zstd", "none"]), st.sampled_from(["1.0", "2.0"]))
def test_fuzz_random_queries_over_parquet_equal_duckdb(tmp_path_factory, case, group_rows,
                                                      dictionary, decimals_as_integers,
                                                      codec, version):
    """The random cases read from Parquet files in one process, written every way a user's
    writer may: row groups of 1 row to all rows, dictionary or plain pages, decimals stored
    as integers or fixed-length bytes, codecs, page versions. The scan's own paths (our page
    kernels, dictionary merging, row groups skipped by their statistics, decimals summed
    from the file's chunks) against DuckDB over the same Arrow tables."""
    data, queries = case
    arrow = querygen.from_plain(data)
    directory = tmp_path_factory.mktemp("parquet_case")
    for name, table in arrow.items():
        pq.write_table(table, directory / f"{name}.parquet", row_group_size=group_rows,
                       use_dictionary=dictionary, compression=codec,
                       store_decimal_as_integer=decimals_as_integers,
                       data_page_version=version)
    catalog, con = Catalog.from_directory(str(directory)), duckdb.connect()
    for name, table in arrow.items():
        con.register(name, table)
    for q in queries:
        _assert_equal(q.sql, q.ordered, catalog, con)


def _write_case(directory, arrow: dict[str, object], queries) -> dict:
    directory.mkdir()
    for name, table in arrow.items():
        pq.write_table(table, directory / f"{name}.parquet", row_group_size=3)
    return {"dir": str(directory), "queries": [[q.sql, q.ordered] for q in queries]}


@pytest.mark.mpi
def test_fuzz_random_queries_on_two_ranks_equal_duckdb(tmp_path):
    """The generated cases (drawn here, run as one job) over Parquet files of 3-row groups,
    so each rank holds part of every table (the NULL of a NOT IN subquery on either rank);
    plus the NOT IN cases with the subquery's NULL in its last row group (rank 1's) and a
    string column whose rows on rank 1 are all NULL (an empty dictionary there: once an
    IndexError on that rank alone while merging dictionaries, and a hang)."""
    manifest = [_write_case(tmp_path / f"case{i}", querygen.from_plain(data), queries)
                for i, (data, queries) in enumerate(draw(querygen.cases(), 20))]
    nulls = _null_tables()
    nulls["u"] = nulls["u"].take([0, 2, 1])  # the NULL last: read by the second rank
    manifest.append(_write_case(tmp_path / "nulls", nulls,
                                [querygen.Query(sql, True) for sql in NULL_IN_QUERIES]))
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(manifest))
    path_env = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])  # the generator
    proc = run_mpi(2, [str(mpi_script("check_sql_fuzz.py")), str(path)], timeout=150,
                   env={"PYTHONPATH": path_env})
    assert f"of {len(manifest)} cases on 2 ranks" in proc.stdout, proc.stdout
