"""Review of raw string columns (issue 27): MIN/MAX, COUNT(DISTINCT), equi-joins, GROUP BY
and ORDER BY ... LIMIT over strings kept raw, tables of several Parquet files (dictionary
encoded and plain, several row groups), against DuckDB on the same files.

NULLs among the strings and as keys, all-NULL columns, empty strings, NUL bytes, non-ASCII,
strings that are prefixes of each other, ties at a LIMIT's cut, LIMIT 0 and OFFSETs past the
rows; results of MIN/MAX compared afterwards, ROLLUP/CUBE/GROUPING SETS, windows, UNIONs and
subqueries over such columns."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hpc.domains.sql import Catalog, query
from hpc.domains.sql.pipeline import explain
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.domains.sql.duckdb_agreement import differences

# pieces, one or two at a time: repeats, shared prefixes ('a' < 'a\0' < 'ab'), NUL bytes,
# non-ASCII, upper case before lower, the empty string (not NULL)
# and long strings alike in their first 8 or 32 bytes (the sort's prefix words)
_PIECES = ["a", "ab", "b", "", "é", "\0", "a\0", "zz", "\u4e2d", "B", "p" * 31 + "q", "p" * 32,
           "p" * 32 + "\0", "p" * 40 + "é", "p" * 8, "p" * 7 + "\xff"]


def _words(rng: np.random.Generator, n: int, nulls: float) -> pa.Array:
    first = rng.integers(0, len(_PIECES), n)
    second = rng.integers(0, len(_PIECES), n)
    pair = rng.random(n) < 0.5
    words = [_PIECES[a] + (_PIECES[b] if p else "") for a, b, p in zip(first, second, pair,
                                                                       strict=True)]
    return pa.array(words, pa.string(), mask=rng.random(n) < nulls)


def _write(path: Path, table: pa.Table, rng: np.random.Generator) -> None:
    """One Parquet part, its strings dictionary encoded or plain (or a dictionary the writer
    gives up on after a few bytes), in row groups of a random size."""
    encoding = int(rng.integers(0, 3))
    extra = {"dictionary_pagesize_limit": 16} if encoding == 2 else {}
    dictionary: bool | list[str] = encoding > 0
    pq.write_table(table, path, use_dictionary=dictionary,
                   row_group_size=max(1, int(rng.integers(1, max(2, table.num_rows)))),
                   **extra)


def _tables(root: Path, seed: int, n: int, parts: int) -> None:
    """Folders t/ (g, v, s, s2) and u/ (k, w) of several parts; a part may hold no rows and
    column s may be NULL throughout."""
    rng = np.random.default_rng(seed)
    (root / "t").mkdir()
    (root / "u").mkdir()
    sizes = rng.multinomial(n, [1 / parts] * parts)
    if parts > 1 and rng.random() < 0.3:  # a part with no rows
        sizes[0] += sizes[-1]
        sizes[-1] = 0
    s_nulls = 1.0 if rng.random() < 0.15 else 0.2
    for i, m in enumerate(sizes):
        _write(root / "t" / f"p{i}.parquet", pa.table({
            "g": rng.integers(0, 4, m), "v": rng.integers(0, 20, m),
            "s": _words(rng, m, s_nulls), "s2": _words(rng, m, 0.1)}), rng)
    for i, m in enumerate(rng.multinomial(int(rng.choice([0, 3, 30])), [0.5, 0.5])):
        _write(root / "u" / f"p{i}.parquet",
               pa.table({"k": _words(rng, m, 0.15), "w": rng.integers(0, 5, m)}), rng)


def _disagreements(root: Path, queries: tuple[str, ...]) -> list[str]:
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    for t in sorted(p.name for p in root.iterdir() if p.is_dir()):
        con.execute(f"create view {t} as select * from read_parquet('{root / t}/*.parquet')")
    bad = []
    for sql in queries:
        differs = differences(query(sql, catalog).to_pandas(), con.execute(sql).df(),
                              "order by" in sql)
        if differs is not None:
            bad.append(f"{sql}: {differs}")
    return bad


# every ORDER BY orders the rows it returns completely (ties are equal rows)
_QUERIES = (
    # MIN/MAX and COUNT(DISTINCT), alone, grouped, filtered, of an expression
    "select min(s) as lo, max(s) as hi, count(s) as c, count(distinct s) as d, count(*) as n "
    "from t",
    "select g, min(s) as lo, max(s) as hi, count(distinct s) as d from t group by g order by g",
    "select max(s) filter (where g = 2) as m, min(s) filter (where v > 10) as n from t",
    "select max(s || 'x') as m, min(length(s)) as l from t",
    "select max(s) as m from t where g = 99",
    "select s, max(s2) as m2, min(s2) as n2 from t group by s order by s nulls first",
    "select u.k, max(t.s) as m from u join t on u.w = t.g group by u.k order by u.k",
    # their results compared afterwards: HAVING, ORDER BY, CASE, a join, a UNION
    "select g, max(s) as hi from t group by g having max(s) > 'a' order by hi, g",
    "select g, min(s) as lo from t group by g order by lo desc nulls last, g limit 3",
    "select min(s) as lo from t group by g order by lo nulls first",
    "select g, case when max(s) = min(s) then 'same' else 'diff' end as c from t group by g "
    "order by g",
    "select t.g, m.hi from t join (select g, max(s) as hi from t group by g) m on t.s = m.hi "
    "order by t.g, m.hi",
    "select max(s) as m from t union select max(s2) from t order by m",
    "select (select max(k) from u) as mk, max(s) as ms from t",
    # GROUP BY a raw key: alone, with others, ROLLUP/CUBE/GROUPING SETS, DISTINCT aggregates
    "select s, count(*) as n from t group by s order by s nulls first",
    "select s, count(*) as n from t group by s order by s desc nulls last limit 5",
    "select s, g, count(*) as n from t group by s, g order by s, g",
    "select s, s2, count(*) as n from t group by s, s2 order by n desc, s, s2 limit 7",
    "select g, s, count(*) as n, sum(v) as sv from t group by rollup(g, s) "
    "order by g nulls first, s nulls first, grouping(s)",
    "select g, s, count(*) as n from t group by cube(g, s) "
    "order by g nulls last, s nulls last, grouping(g), grouping(s)",
    "select g, s, count(*) as n from t group by grouping sets ((g), (s), ()) "
    "order by g, s, grouping(g), grouping(s)",
    "select g, s, count(distinct s2) as d from t group by rollup(g, s) "
    "order by g, s, grouping(s)",
    "select s, count(distinct v) as d, count(distinct s2) as d2 from t group by s order by s",
    "select g from t group by g having count(distinct s) > 1 order by g",
    "select s, count(*) as n from t group by s having s > 'a' order by n desc, s limit 3",
    "select s, sum(v) as sv from t group by s order by sv desc, s limit 3",
    "select coalesce(s, '?') as c, count(*) as n from t group by coalesce(s, '?') order by c",
    "select count(*) as n from (select distinct s from t) x",
    "select distinct s from t order by s limit 4",
    # ORDER BY ... LIMIT with a raw key: NULLS FIRST/LAST, DESC, ties, OFFSET, LIMIT 0
    "select s, v from t order by s, v limit 5",
    "select s, v, g from t order by s desc, v, g limit 5 offset 3",
    "select s, v, g from t order by s nulls first, v desc, g limit 10",
    "select s, v, g from t order by s desc nulls last, v desc, g desc limit 10 offset 2",
    "select s, v, g from t order by s, v, g limit 0",
    "select s, v, g from t order by s, v, g limit 5 offset 100000",
    "select s from t order by s limit 3 offset 1",
    "select s, s2 from t order by s2 desc, s desc limit 8",
    "select s, v, g from t order by v, s desc nulls first, g limit 6",
    "select g, v, s from t order by g, v, s limit 20",
    "select s, v from t where s like 'a%' order by s, v limit 4",
    "select s, v from t where s is null order by v, g limit 3",
    "select s, v from t where s = '' order by v limit 3",
    "select s from t where g = 1 union select k from u order by s nulls first",
    "select s from t union all select k from u order by s nulls last limit 7",
    # equi-joins on raw keys: inner, LEFT, FULL, semi, anti, self-joins, raw against sorted
    "select count(*) as n from t join u on t.s = u.k",
    "select t.s, u.k, u.w from t join u on t.s = u.k order by t.s, u.w",
    "select t.s, u.w from t left join u on t.s = u.k order by t.s nulls first, u.w nulls first, "
    "t.v",
    "select t.s, u.k from t full join u on t.s = u.k order by t.s nulls first, u.k nulls first",
    "select u.k, count(t.s) as c from u left join t on u.k = t.s group by u.k "
    "order by u.k nulls first",
    "select t.s, u.k from t left join u on t.s = u.k where u.k is null order by t.s limit 5",
    "select count(*) as n from t where s in (select k from u)",
    "select count(*) as n from t where s not in (select k from u)",
    "select count(*) as n from t where exists (select 1 from u where u.k = t.s)",
    "select count(*) as n from t where not exists (select 1 from u where u.k = t.s)",
    "select count(*) as n from t a join t b on a.s = b.s",
    "select count(*) as n from t a join t b on a.s = b.s2",
    "select a.s, count(*) as n from t a join t b on a.s = b.s and a.g = b.g group by a.s "
    "order by a.s",
    "select max(a.s) as m from t a join u on a.s = u.k",
    # the cut of a LIMIT past half the rows, under an OFFSET, in a subquery, before a join
    "select s, v, g from t order by s, v, g limit 2100 offset 10",
    "select s, v, g from t order by s desc nulls first, v, g limit 2400",
    "select s2, s, v from t order by s2 nulls first, s desc, v limit 30 offset 2490",
    "select s, v, g from t order by s, v, g offset 4990",
    "select * from (select s, v from t order by s desc, v limit 7) x order by v, s",
    "select x.s, u.w from (select s from t order by s nulls first limit 40) x "
    "join u on x.s = u.k order by x.s, u.w",
    "select s from (select s from t order by s limit 3) a union all "
    "select s from (select s from t order by s desc limit 3) b order by s",
    "select max(s) as m, g from t group by g order by m desc nulls first, g limit 2",
    # joins on a raw key with a sorted side, or with other conditions beside the key
    "select count(*) as n from t join (select distinct k from u) d on t.s = d.k",
    "select count(*) as n from t join u on t.s = u.k where u.k > 'a'",
    "select count(*) as n from t join u on t.s = u.k and t.s < 'b'",
    "select count(*) as n from t join u on t.s = u.k and t.g <> u.w",
    "select t.s, u.k from t join u on t.s = u.k and t.s2 < u.k order by t.s, u.k limit 9",
    "select a.s, b.s2 from t a join t b on a.s = b.s2 and a.v = b.v order by a.s, b.s2 "
    "limit 10",
    "select t.s, t.g, count(*) as n from t left join u on t.s = u.k group by t.s, t.g "
    "order by n desc, t.s nulls first, t.g limit 6",
    # MIN/MAX results grouped and joined again
    "select m, count(*) as n from (select g, max(s) as m from t group by g, v) x group by m "
    "order by m nulls first",
    "select x.m, count(*) as n from (select v, min(s) as m from t group by v) x "
    "join t on x.m = t.s2 group by x.m order by x.m",
    "select v, count(distinct s) as d, max(s) as m, min(s2) as m2 from t group by v "
    "order by v",
    "select upper(max(s)) as u from t",
    "select s from t intersect select k from u order by s",
    "select s from t except select k from u order by s nulls first",
    "select g, string_agg(s, ',' order by s) as a from t where v < 2 group by g order by g",
    # DISTINCT aggregates beside CUBE, FILTER, expressions; MIN/MAX results filtered,
    # joined to one another, in a UNION
    "select g, count(distinct s) filter (where v < 5) as d from t group by g order by g",
    "select g, s2, count(distinct s) as d, max(s) as m from t group by cube(g, s2) "
    "order by g nulls first, s2 nulls first, grouping(g), grouping(s2)",
    "select count(distinct s) as d, count(distinct s2) as d2, count(distinct s || s2) as d3 "
    "from t",
    "select s, count(distinct g) as d from t group by s order by d desc, s nulls first limit 4",
    "select g, max(s) as m from t group by g union all select g, min(s) from t group by g "
    "order by g, m nulls first",
    "select g, m from (select g, max(s) as m from t group by g) x where m like 'a%' order by g",
    "select a.g, a.m, b.m from (select g, max(s) as m from t group by g) a "
    "join (select g, min(s2) as m from t group by g) b on a.m = b.m order by a.g",
    "select s, s2, v from t where s = s2 order by s, s2, v limit 10",
    "select case when s is null then 'n' else s end as c, count(*) as n from t group by c "
    "order by c limit 10",
    "select s, max(v) as m from t group by s order by s desc nulls first limit 3 offset 1",
    "select max(s) as m, min(s) as l from t where s > 'a'",
    # windows over a raw column
    "select s, row_number() over (partition by g order by v, s) as r from t order by s, r "
    "limit 10",
    "select g, s, rank() over (partition by g order by s) as r from t order by g, r, s limit 15",
    "select g, s, dense_rank() over (partition by g order by s desc nulls last) as r from t "
    "order by g, r, s limit 12",
    "select s, count(*) over (partition by s) as c from t order by c desc, s limit 8",
)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 5, 40, 300]), st.integers(1, 3))
@example(seed=7, n=5000, parts=2)  # past the rows where ORDER BY ... LIMIT selects first
@example(seed=11, n=0, parts=2)
def test_raw_string_queries_equal_duckdb(tmp_path_factory, seed, n, parts):
    """Several Parquet parts per table, each dictionary encoded or plain: every query's rows
    equal DuckDB's. (About 2 s an example.)"""
    root = tmp_path_factory.mktemp("raw")
    _tables(root, seed, n, parts)
    catalog = Catalog.from_directory(root)
    for sql, column in (("select max(s) as m, count(distinct s) as d from t", "s"),
                        ("select s, v from t order by s, v limit 5", "s"),
                        ("select s, count(*) as n from t group by s order by n limit 3", "s"),
                        ("select count(*) as n from t join u on t.s = u.k", "k")):
        assert f"{column} (raw)" in explain(sql, catalog), f"{sql}: {column} is not read raw"
    bad = _disagreements(root, _QUERIES)
    assert not bad, f"seed {seed}, n {n}, parts {parts}:\n" + "\n".join(bad)


def _folder(root: Path, parts: list[tuple[list[str | None], bool]]) -> Path:
    (root / "t").mkdir()
    for i, (words, dictionary) in enumerate(parts):
        m = len(words)
        pq.write_table(pa.table({"g": np.arange(m, dtype=np.int64) % 3,
                                 "s": pa.array(words, pa.string())}),
                       root / "t" / f"p{i}.parquet", use_dictionary=dictionary)
    return root


_ALL_NULL_QUERIES = (
    "select count(distinct s) as d from t",
    "select s, count(*) as n from t group by s",
    "select g, s, count(*) as n from t group by g, s order by g, s",
    "select count(*) as n from t a join t b on a.s = b.s",
    "select s, g from t order by s, g limit 3",
    "select s, g from t order by s nulls first, g limit 3",
    "select count(*) as n from t where s in (select s from t)",
    "select min(s) as lo, max(s) as hi from t",
    "select g, max(s) as m from t group by g order by g",
)


def test_all_null_parts_after_others_equal_duckdb(tmp_path):
    """An all-NULL dictionary-encoded part after a plain one (its codes point at the next
    part's entries, which hold strings): the NULLs stay NULL."""
    root = _folder(tmp_path, [([None] * 9, True), (["x", None, "a"], False)])
    bad = _disagreements(root, _ALL_NULL_QUERIES)
    assert not bad, "\n".join(bad)


def test_all_null_dictionary_column(tmp_path):
    """Nine NULL strings, dictionary encoded, one file: COUNT(DISTINCT) is 0 and GROUP BY
    gives one NULL group, as DuckDB's."""
    root = _folder(tmp_path, [([None] * 9, True)])
    bad = _disagreements(root, _ALL_NULL_QUERIES)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("first_dictionary", [False, True])
def test_all_null_part_after_strings(tmp_path, first_dictionary):
    """A folder of two parts: strings, then nine NULLs dictionary encoded. COUNT(DISTINCT),
    GROUP BY, a self-join, IN and ORDER BY ... LIMIT on the column equal DuckDB's."""
    root = _folder(tmp_path, [(["x", None, "a"], first_dictionary), ([None] * 9, True)])
    bad = _disagreements(root, _ALL_NULL_QUERIES)
    assert not bad, "\n".join(bad)


_EMPTY_SIDE_QUERIES = (
    "select count(distinct u.k) as c from t left join u on t.g = u.w and u.w = 3",
    "select u.k, count(*) as n from t left join u on t.g = u.w and u.w = 3 group by u.k",
    "select t.s, count(distinct u.k) as c from t left join u on t.g = u.w and u.w = 3 "
    "group by t.s order by t.s",
    "select count(distinct u.k) as c from t left join u on t.s = u.k and u.w = 3",
)


def _outer_tables(root: Path, dictionary: bool) -> Path:
    pq.write_table(pa.table({"g": np.arange(5, dtype=np.int64),
                             "s": pa.array(["a", "b", "c", "a", "b"])}), root / "t.parquet")
    pq.write_table(pa.table({"w": np.array([10, 11], np.int64),
                             "k": pa.array(["x", None], pa.string())}), root / "u.parquet",
                   use_dictionary=dictionary)
    return root


def _flat_disagreements(root: Path, queries: tuple[str, ...]) -> list[str]:
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    for t in ("t", "u"):
        con.execute(f"create view {t} as select * from read_parquet('{root / t}.parquet')")
    return [f"{sql}: {d}" for sql in queries
            if (d := differences(query(sql, catalog).to_pandas(), con.execute(sql).df(),
                                 "order by" in sql)) is not None]


@pytest.mark.parametrize("dictionary", [False, True])
def test_outer_join_nulls_of_a_raw_column_equal_duckdb(tmp_path, dictionary):
    """A LEFT JOIN that matches nothing: the right side's raw strings all NULL (their entries
    there): MIN/MAX, COUNT(DISTINCT), GROUP BY and ORDER BY ... LIMIT of them."""
    root = _outer_tables(tmp_path, dictionary)
    bad = _flat_disagreements(root, (
        "select min(u.k) as a, max(u.k) as b from t left join u on t.g = u.w",
        "select count(distinct u.k) as c from t left join u on t.g = u.w",
        "select u.k, count(*) as n from t left join u on t.g = u.w group by u.k",
        "select t.g, u.k, count(*) as n from t left join u on t.g = u.w group by t.g, u.k "
        "order by t.g",
        "select t.g, u.k from t left join u on t.g = u.w order by u.k, t.g limit 3",
        "select max(u.k) as m from t left join u on t.g = u.w and u.w = 3",
    ))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dictionary", [False, True])
def test_outer_join_against_an_emptied_side(tmp_path, dictionary):
    """``t LEFT JOIN u ON ... AND u.w = 3`` (no such u rows): COUNT(DISTINCT u.k) is 0 and
    GROUP BY u.k one NULL group, as DuckDB's."""
    root = _outer_tables(tmp_path, dictionary)
    bad = _flat_disagreements(root, _EMPTY_SIDE_QUERIES)
    assert not bad, "\n".join(bad)
