"""Equi-joins on string keys by probing a hash table of the smaller side's strings
(:func:`~hpc.domains.sql.string_hash.match_rows`, :func:`~hpc.domains.sql.strings.equal_codes`):
against Python's own dictionaries on fresh random strings, and joins of every kind against
DuckDB on Parquet tables whose strings are raw or dictionary encoded, with NULLs, empty
strings, NUL bytes, non-ASCII, repeats and empty tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hpc.domains.sql import Catalog, query, strings
from hpc.domains.sql.string_hash import match_rows
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.domains.sql.duckdb_agreement import differences

# short strings of a few characters (repeats, NULs, non-ASCII, the empty string) and long
# ones of one length alike in their first and last 8 bytes (the probe filter's hash), so
# that only their middles tell them apart
_SHORT = st.text("ab\0é", max_size=4)
_LONG = st.builds(lambda m: "prefix-x" + m + "-suffix!", st.text("xy\0\u4e2d", min_size=3,
                                                                  max_size=3))
_TEXT = st.one_of(_SHORT, _LONG, st.text("pq", min_size=7, max_size=17))


def _array(words: list[str], large: bool, skip: bool) -> pa.Array:
    """``words`` as an Arrow array, with 64-bit offsets where ``large``, and a slice of a
    longer array (offsets not starting at 0) where ``skip``."""
    t = pa.large_string() if large else pa.string()
    return pa.array(["skipped", *words], t).slice(1) if skip else pa.array(words, t)


@settings(max_examples=80, deadline=None)
@given(st.lists(_TEXT, max_size=60), st.lists(_TEXT, max_size=200), st.booleans(),
       st.booleans(), st.booleans())
@example([], ["a"], False, False, False)
@example(["", "\0"], ["", "\0\0", "\0"], True, True, False)
def test_match_rows_equal_python(table, probe, large, skip, numbered):
    """First rows of the table's strings and each probing string's first equal table row."""
    first_seen: dict[str, int] = {}
    want_first = [first_seen.setdefault(w, i) for i, w in enumerate(table)]
    base = len(table) + 5 if numbered else None
    want_match = [first_seen.get(w, -1 if base is None else base + i)
                  for i, w in enumerate(probe)]
    t, p = _array(table, large, skip), _array(probe, not large and skip, skip)
    first, match = match_rows(*strings._buffers(t), *strings._buffers(p), unmatched=base)
    assert first.dtype == np.int64 and match.dtype == np.int64
    assert first.tolist() == want_first
    assert match.tolist() == want_match


def test_match_rows_many_strings():
    """Enough strings for the parallel probe and a table larger than its caches: against a
    Python dictionary."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    table = [f"k{int(k)}" + "~" * int(k % 11) for k in rng.integers(0, 40_000, 30_000)]
    probe = [f"k{int(k)}" + "~" * int(k % 11) for k in rng.integers(0, 80_000, 120_000)]
    first_seen: dict[str, int] = {}
    want_first = [first_seen.setdefault(w, i) for i, w in enumerate(table)]
    first, match = match_rows(*strings._buffers(pa.array(table)),
                              *strings._buffers(pa.array(probe)))
    assert first.tolist() == want_first, seed
    assert match.tolist() == [first_seen.get(w, -1) for w in probe], seed


@settings(max_examples=40, deadline=None)
@given(st.lists(_TEXT, max_size=40), st.lists(_TEXT, max_size=40), st.booleans(),
       st.booleans())
def test_equal_codes_match_exactly_equal_strings(a, b, a_sorted, b_sorted):
    """Codes of two dictionaries (raw entries or sorted, distinct ones) are equal across
    them exactly when the strings are, whichever side is the smaller."""

    def dictionary(words: list[str], ordered: bool) -> np.ndarray | strings.Entries:
        if ordered:
            return strings.to_numpy(pa.array(sorted(set(words), key=str.encode), pa.string()))
        return strings.Entries(pa.array(words, pa.string()))

    da, db = dictionary(a, a_sorted), dictionary(b, b_sorted)
    wa, wb = strings.arrow(da).to_pylist(), strings.arrow(db).to_pylist()
    ca, cb = strings.equal_codes(da, db)
    assert len(ca) == len(wa) and len(cb) == len(wb)
    got = {(i, j) for i in range(len(wa)) for j in range(len(wb)) if ca[i] == cb[j]}
    assert got == {(i, j) for i in range(len(wa)) for j in range(len(wb)) if wa[i] == wb[j]}


# pieces of strings, one or two at a time: repeats, NULs, non-ASCII, '' (not NULL), and
# long strings alike in their first and last 8 bytes
_PIECES = ["a", "b", "ab", "", "\0", "a\0", "é", "\u4e2d", "Z", "head----x----tail",
           "head----yy---tail", "head----x\0---tail"]


def _words(rng: np.random.Generator, n: int, nulls: float) -> pa.Array:
    i, j = rng.integers(0, len(_PIECES), (2, n))
    two = rng.random(n) < 0.4
    words = [_PIECES[x] + (_PIECES[y] if t else "") for x, y, t in zip(i, j, two,
                                                                     strict=True)]
    return pa.array(words, pa.string(), mask=rng.random(n) < nulls)


def _tables(root: Path, seed: int, sizes: tuple[int, int]) -> None:
    """Tables l (a, i) and r (b, c, j): strings dictionary encoded or plain, a file each."""
    rng = np.random.default_rng(seed)
    for name, n, cols in (("l", sizes[0], ("a",)), ("r", sizes[1], ("b", "c"))):
        columns = {c: _words(rng, n, float(rng.choice([0.0, 0.2, 1.0]))) for c in cols}
        columns["i" if name == "l" else "j"] = pa.array(rng.integers(0, 4, n))
        pq.write_table(pa.table(columns), root / f"{name}.parquet",
                       use_dictionary=bool(rng.random() < 0.5))


_QUERIES = (
    "select a, i, b, j from l join r on a = b",
    "select a, i, b, j from l join r on a = b and i = j",
    "select a, i, b, j from l join r on a = c and i < j",
    "select a, i, b from l left join r on a = b",
    "select a, b, j from l right join r on a = b",
    "select a, i, b, j from l full join r on a = b",
    "select a, i from l where a in (select b from r)",
    "select a, i from l where a not in (select b from r)",
    "select a, i from l where exists (select 1 from r where r.b = l.a)",
    "select a, i from l where not exists (select 1 from r where r.b = l.a and r.j <> l.i)",
    "select a, i, b, j from l join r on a is not distinct from b",
    "select a, b from l join r on lower(a) = b",
    "select a, count(*) as n from l join r on a = b group by a",
    "select x.b, y.c from r x join r y on x.b = y.c",
)


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([(0, 5), (5, 0), (7, 30), (60, 4),
                                                   (300, 200)]))
@example(seed=3, sizes=(0, 0))
@example(seed=5, sizes=(600, 400))
def test_string_joins_equal_duckdb(tmp_path_factory, seed, sizes):
    """Joins of every kind on string keys (raw or dictionary encoded, NULL or not): their
    rows equal DuckDB's. (About 0.5 s an example.)"""
    root = tmp_path_factory.mktemp("sj")
    _tables(root, seed, sizes)
    catalog = Catalog.from_directory(root)
    con = duckdb.connect()
    for t in ("l", "r"):
        con.execute(f"create view {t} as select * from read_parquet('{root / t}.parquet')")
    bad = []
    for sql in _QUERIES:
        differs = differences(query(sql, catalog).to_pandas(), con.execute(sql).df())
        if differs is not None:
            bad.append(f"{sql}: {differs}")
    assert not bad, f"seed {seed}, sizes {sizes}:\n" + "\n".join(bad)
