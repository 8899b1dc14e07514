"""Distinct strings by hashing, the sort of a subset of strings, and MIN/MAX and
COUNT(DISTINCT) of raw string columns: against Python's own set, sort and min/max, and
against DuckDB."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hpc.domains.sql import Catalog, query, strings
from hpc.domains.sql.pipeline import explain
from hpc.domains.sql.scan_kernels import group_minmax_strings, sort_strings
from hpc.domains.sql.string_hash import first_rows
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.domains.sql.duckdb_agreement import differences

# short strings from a few characters (many repeats, shared prefixes, NULs, non-ASCII) and
# longer ones (several 8-byte words, a tail)
_TEXT = st.one_of(st.text("ab\0é", max_size=5), st.text("xyz\u4e2d", min_size=6, max_size=40))


def _buffers(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return strings._buffers(pa.array(words, pa.string()))


def _first_seen(words: list[str]) -> list[int]:
    seen: dict[str, int] = {}
    return [seen.setdefault(w, i) for i, w in enumerate(words)]


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXT, max_size=300), st.integers(0, 2**32 - 1))
def test_first_rows_and_sorted_subsets_equal_python(words, seed):
    offsets, data = _buffers(words)
    assert first_rows(offsets, data).tolist() == _first_seen(words)
    rng = np.random.default_rng(seed)
    rows = np.flatnonzero(rng.random(len(words)) < 0.5)
    got = [words[i] for i in sort_strings(offsets, data, rows)]
    assert got == sorted((words[i] for i in rows), key=str.encode)


def test_first_rows_over_many_partitions_and_sort_unique():
    """Enough strings for thousands of hash partitions (and a slice of a bigger array, so
    the offsets do not start at zero): the first row of each string and the sorted distinct
    strings with every row's code."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    n = 60_000
    pool = [f"w{int(k)}" + "-" * int(k % 13) for k in rng.integers(0, 20_000, 25_000)]
    words = [pool[int(i)] for i in rng.integers(0, len(pool), n)]
    words += ["", "\0", "é" * 9]
    sliced = pa.array(["skip", *words], pa.string()).slice(1)
    offsets, data = strings._buffers(sliced)
    assert first_rows(offsets, data).tolist() == _first_seen(words), seed
    unique, code = strings.sort_unique(sliced)
    want = sorted(set(words), key=str.encode)
    assert unique.to_pylist() == want, seed
    assert np.array_equal(np.asarray(want, dtype=object)[code], np.asarray(words, object)), seed


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.none() | _TEXT), max_size=200))
def test_group_minmax_strings_equals_python(rows):
    words = [w for _, w in rows]
    offsets, data = _buffers(["" if w is None else w for w in words])
    ids = np.array([g for g, _ in rows], np.int64)
    mask = np.array([w is not None for w in words], bool)
    codes = np.arange(len(rows), dtype=np.int32)
    for want_max, pick in ((False, min), (True, max)):
        out, seen = group_minmax_strings(ids, codes, mask, 5, offsets, data, want_max)
        for g in range(5):
            members = [w for k, w in rows if k == g and w is not None]
            assert bool(seen[g]) == bool(members)
            if members:
                assert words[out[g]] == pick(members, key=str.encode)


_QUERIES = (
    "select max(note) as hi, min(note) as lo, count(*) as n from t",
    "select g, min(note) as lo, max(note) as hi from t group by g order by g",
    "select g, max(note) filter (where v > 50) as hi from t group by g order by g",
    "select max(t.note) as hi from t join u on t.g = u.g where u.w < 3",
    "select count(distinct note) as d, count(note) as c, count(*) as n from t",
    "select g, count(distinct note) filter (where v < 70) as d from t group by g order by g",
    # equi-joins on raw strings (NULL keys never match), outer and semi
    "select count(*) as n, count(distinct t.note) as d from t join u on t.note = u.tag",
    "select t.g, t.note, u.w from t left join u on u.tag = t.note order by t.g, t.note, u.w",
    "select count(*) as n from t where note in (select tag from u)",
    "select count(*) as n from t where note not in (select tag from u where tag is not null)",
    # ORDER BY under a LIMIT: the cut found over the raw bytes (NULLs first or last, ties)
    "select note, g, v from t order by note desc nulls first, g, v limit 7",
    "select note, v from t order by note, v limit 5 offset 3",
    "select g, v, note from t order by v desc, note nulls first, g limit 9",
    # a raw GROUP BY key grouped by hashing, sorted only for the LIMIT's cut
    "select note, count(*) as n, max(v) as m from t group by note order by n desc, note "
    "limit 4",
    "select g, note, count(*) as n from t group by g, note order by g, n, note limit 12",
    # the result compared: its column is sorted, not raw
    "select g, max(note) as hi from t group by g having max(note) > 'm' order by hi, g",
    "select g, min(note) as lo from t group by g order by lo desc nulls last, g limit 3",
)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 37, 400, 9000]))
@example(seed=5, n=9000)  # past the row count where ORDER BY ... LIMIT selects before sorting
def test_min_max_of_raw_strings_equal_duckdb(tmp_path_factory, seed, n):
    """A free-text column stored plain (read raw: no sorted dictionary) with NULLs, empty
    strings and shared prefixes; MIN/MAX alone, grouped, filtered, past a join, and
    compared afterwards; COUNT and COUNT(DISTINCT); equi-joins on it; ORDER BY it under a
    LIMIT; GROUP BY it."""
    root = tmp_path_factory.mktemp("raw")
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(["m", "n", "é", "zz", " "], int(rng.integers(0, 9))))
             for _ in range(n)]
    note = pa.array(words, pa.string(), mask=rng.random(n) < 0.2)
    pq.write_table(pa.table({"g": rng.integers(0, 6, n), "v": rng.integers(0, 100, n),
                             "note": note}), root / "t.parquet", use_dictionary=False,
                   row_group_size=max(n // 3, 1))
    tags = [None if rng.random() < 0.1 else
            "".join(rng.choice(["m", "n", "é", "zz", " "], int(rng.integers(0, 4))))
            for _ in range(12)]
    pq.write_table(pa.table({"g": np.arange(12) % 6, "w": rng.integers(0, 6, 12),
                             "tag": pa.array(tags, pa.string())}), root / "u.parquet",
                   use_dictionary=False)
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    for t in ("t", "u"):
        con.execute(f"create view {t} as select * from read_parquet('{root / t}.parquet')")
    for sql in _QUERIES[:5]:
        assert "note (raw)" in explain(sql, catalog), f"{sql}: the column is not read raw"
    assert "tag (raw)" in explain(_QUERIES[6], catalog), "the join key is not read raw"
    for sql in _QUERIES:
        differs = differences(query(sql, catalog).to_pandas(), con.execute(sql).df(),
                              "order by" in sql)
        assert differs is None, f"{sql}: {differs} (seed {seed}, n {n})"
