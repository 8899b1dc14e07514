"""LIKE by the word-at-a-time search (:func:`~hpc.domains.sql.string_hash.like_rows`)
against Python's regular expressions, and LIKE, CONCAT, LOWER, UPPER, SUBSTRING and
LENGTH over raw (unsorted) and dictionary-encoded Parquet strings against DuckDB, on
fresh random strings with NULLs, empty strings, NUL bytes, non-ASCII and repeats."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hpc.domains.sql import Catalog, query, strings
from hpc.domains.sql.pipeline import explain
from hpc.domains.sql.string_hash import like_rows
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.domains.sql.duckdb_agreement import differences

_ALPHABET = "ab\0é"


def _like_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(p) for p in pattern.split("%")), re.DOTALL)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(_ALPHABET, max_size=30), max_size=40),
       st.text(_ALPHABET + "%", max_size=8), st.booleans())
@example(["aaaa", "a", "aa", ""], "a%a", False)
@example(["ab" * 20 + "\0", "b" * 17], "%ab%\0", True)
def test_like_rows_equal_python(words, pattern, skip):
    """Every string's LIKE (literal parts between %), in a sliced array or not, against
    Python's regular expression of the pattern."""
    array = pa.array(["x", *words], pa.string()).slice(1) if skip else pa.array(words)
    got = like_rows(*strings._buffers(array), [p.encode() for p in pattern.split("%")])
    regex = _like_regex(pattern)
    assert got.tolist() == [regex.fullmatch(w) is not None for w in words]


def test_like_rows_long_strings():
    """Parts found near a string's end and at the buffer's end (the last 8 places are read
    one at a time), in strings longer than a word, many of them (the parallel loop)."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcg\0"))
    words = ["".join(rng.choice(letters, int(k))) for k in rng.integers(0, 60, 20_000)]
    for pattern in ("%gab%", "%g%", "a%bb%c", "%cab", "%aaaa%bbb%", "%a\0g%"):
        got = like_rows(*strings._buffers(pa.array(words)),
                        [p.encode() for p in pattern.split("%")])
        regex = _like_regex(pattern)
        want = [regex.fullmatch(w) is not None for w in words]
        assert got.tolist() == want, (seed, pattern)


_PIECES = ["a", "b", "ab", "", "\0", "é", "\u4e2d", "Z", "green", "Gr", "PROMO x",
           "long string past a word a"]


def _words(rng: np.random.Generator, n: int, nulls: float, pieces: int) -> pa.Array:
    index = rng.integers(0, len(_PIECES), (pieces, n))
    words = ["".join(_PIECES[k] for k in index[:, r]) for r in range(n)]
    return pa.array(words, pa.string(), mask=rng.random(n) < nulls)


def _table(root: Path, seed: int, n: int) -> None:
    """Table t (s: few distinct strings, s2: many, s3: sometimes all NULL; i, x), plain or
    dictionary encoded."""
    rng = np.random.default_rng(seed)
    pq.write_table(pa.table({
        "s": _words(rng, n, 0.1, 1), "s2": _words(rng, n, 0.1, 4),
        "s3": _words(rng, n, float(rng.choice([0.3, 1.0])), 2),
        "i": rng.integers(0, 3, n), "x": rng.random(n)}), root / "t.parquet",
        use_dictionary=bool(rng.random() < 0.5))


_QUERIES = (
    "select s2, i from t where s2 like '%a%'",
    "select s2 from t where s2 like '%green%' or s like 'PROMO%'",
    "select s2 from t where s2 not like '%a%b%'",
    "select s2 from t where s2 like 'a%a'",
    "select s2 from t where s2 like '%\0%'",
    "select s2 from t where s2 like '%é'",
    "select s2 from t where s2 like 'ab'",
    "select s2 from t where s2 like '%'",
    "select s2 from t where s2 like ''",
    "select s2 from t where s2 like 'a_'",
    "select s3 from t where s3 like '%b%'",
    "select concat(lower(s), ' ', upper(substring(s2, 1, 3))) as label, length(s3) as k, "
    "count(*) as n, sum(x) as sx from t group by 1, 2",
    "select concat(s, s3) as c, count(*) as n from t group by 1",
    "select concat(s, '-', i, '-', s3) as c from t",
    "select concat(s2, s) as c from t",
    "select length(s2) as k, count(*) as n from t where s2 like '%b%' group by 1",
    "select concat(s3) as c, count(*) as n from t group by 1",
)


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0, 7, 300, 6000]))
@example(seed=1, n=6000)
def test_string_functions_equal_duckdb(tmp_path_factory, seed, n):
    """LIKE, CONCAT (over few distinct combinations of its arguments, and many), LOWER,
    UPPER, SUBSTRING and LENGTH of raw or dictionary-encoded strings: rows equal DuckDB's.
    (About 0.3 s an example.)"""
    root = tmp_path_factory.mktemp("sf")
    _table(root, seed, n)
    catalog = Catalog.from_directory(root)
    assert "s2 (raw)" in explain(_QUERIES[0], catalog)
    con = duckdb.connect()
    con.execute(f"create view t as select * from read_parquet('{root / 't.parquet'}')")
    bad = []
    for sql in _QUERIES:
        differs = differences(query(sql, catalog).to_pandas(), con.execute(sql).df())
        if differs is not None:
            bad.append(f"{sql!r}: {differs}")
    assert not bad, f"seed {seed}, n {n}:\n" + "\n".join(bad)
