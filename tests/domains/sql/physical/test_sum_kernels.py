"""The grouped SUM kernel's paths against independent references: DECIMAL columns summed
straight from Parquet's chunks (integer and decimal128 chunks, chunks at a lower scale,
values past 64 bits), one-int64 accumulation against Python's unbounded sums near the
limits (the accumulator emptied into halves, or halves from the start), CASTs up in scale
inside a program, dense group ids with their first rows, and whole queries against
DuckDB (COUNT(*) counted with the sums, a filter's dropped rows)."""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.sql.aggregate import group_ids
from hpc.domains.sql.errors import SQLError
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.types import SQLType
from hpc.domains.sql.physical.evaluate import Batch, evaluate
from hpc.domains.sql.physical.lazy_decimals import LazyDecimals
from hpc.domains.sql.physical.sum_programs import compile_sums
from hpc.domains.sql.table import Column, Decimals

pa = pytest.importorskip("pyarrow")


def _exact(values: np.ndarray, valid: np.ndarray | None, ids: np.ndarray, ngroups: int
           ) -> tuple[list[int], list[int]]:
    """Sums and counts per group in Python integers (no wrap)."""
    sums, counts = [0] * ngroups, [0] * ngroups
    ok = np.ones(len(ids), bool) if valid is None else valid
    for g, v, o in zip(ids.tolist(), values.tolist(), ok.tolist(), strict=True):
        if o:
            sums[g] += int(v)
            counts[g] += 1
    return sums, counts


def _lazy(parts: list[np.ndarray], scale: int, decimal128: bool, chunk_scales: list[int]
          ) -> LazyDecimals:
    """A scanned DECIMAL(18, scale) column over Arrow chunks of the unscaled ``parts``."""
    chunks = []
    for p, s in zip(parts, chunk_scales, strict=True):
        if decimal128:
            from decimal import Decimal

            chunks.append(pa.array([Decimal(int(v)).scaleb(-s) for v in p],
                                   pa.decimal128(38, s)))
        else:
            chunks.append(pa.array(p, pa.int64()))
    n = sum(len(p) for p in parts)
    source = Decimals(chunks, n, None if decimal128 else chunk_scales[0])
    return LazyDecimals(source, scale)


@pytest.mark.parametrize("decimal128", [False, True])
def test_sums_read_from_parquet_chunks_equal_python_sums(decimal128):
    rng = np.random.default_rng(7 + decimal128)
    sizes = [0, 3000, 1, 2500]  # an empty chunk, a one-row chunk, chunks across blocks
    parts = [rng.integers(-(10**12), 10**12, k) for k in sizes]
    col = _lazy(parts, 2, decimal128, [2] * len(parts))
    n = sum(sizes)
    ids = rng.integers(0, 7, n)
    t = SQLType("decimal", precision=18, scale=2)
    ref = E.Ref("x", t)
    programs = compile_sums([ref, E.Call("mul", (ref, E.Literal(3, SQLType("integer", 32))),
                                         SQLType("decimal", precision=18, scale=2))])
    (sums, counts, over), (tripled, _, _) = programs.sums(Batch({"x": col}, n), ids, 7)
    assert col._values is None  # summed where it lies: never converted whole
    want, want_counts = _exact(np.concatenate(parts), None, ids, 7)
    assert [int(s) for s in sums] == want and [int(c) for c in counts] == want_counts
    assert [int(s) for s in tripled] == [3 * w for w in want]
    assert not over.any()


def test_chunks_at_a_lower_scale_are_scaled_and_too_wide_values_fall_back():
    rng = np.random.default_rng(3)
    parts = [rng.integers(-(10**6), 10**6, 1500), rng.integers(-(10**6), 10**6, 1500)]
    col = _lazy(parts, 4, True, [4, 1])  # the second chunk at scale 1: times 1000
    ids = rng.integers(0, 3, 3000)
    t = SQLType("decimal", precision=18, scale=4)
    (sums, _, _), = compile_sums([E.Ref("x", t)]).sums(Batch({"x": col}, 3000), ids, 3)
    want, _ = _exact(np.concatenate([parts[0], parts[1] * 1000]), None, ids, 3)
    assert [int(s) for s in sums] == want
    # a value past 64 bits at the column's scale: no answer (the usual path decides)
    wide = _lazy([np.array([1, 2 * 10**16, 3])], 4, True, [1])
    assert compile_sums([E.Ref("x", t)]).sums(Batch({"x": wide}, 3), np.zeros(3, np.int64),
                                               1) is None
    assert wide._values is None


@pytest.mark.parametrize("ngroups", [2, 20_000])
@pytest.mark.parametrize("magnitude", [2**20, 2**50, 2**58, 2**62])
@pytest.mark.parametrize("skewed", [False, True])
def test_int64_accumulation_near_the_limits_equals_python_sums(ngroups, magnitude, skewed):
    # blocks whose bounds add past 2**62 (few groups: the accumulators emptied into
    # halves; many groups: halves from then on), blocks past 2**52 (halves at once), and
    # group sums that leave int64 (no answer), with NULLs
    rng = np.random.default_rng(magnitude % 1000 + ngroups)
    n = 60_000
    values = rng.integers(-magnitude, magnitude, n)
    if skewed:
        values[rng.random(n) < 0.5] = magnitude - 1  # mostly one sign: large group sums
    valid = rng.random(n) > 0.2
    ids = np.sort(rng.integers(0, ngroups, n)) if ngroups > 2 else rng.integers(0, ngroups, n)
    t = SQLType("integer", 64)
    col = Column(values, "int", None, valid)
    got = compile_sums([E.Ref("x", t)]).sums(Batch({"x": col}, n), ids, ngroups)
    want, counts = _exact(values, valid, ids, ngroups)
    if any(not -(2**63) <= s < 2**63 for s in want):
        assert got is None
        return
    assert got is not None
    (sums, got_counts, over), = got
    assert [int(s) for s in sums] == want and [int(c) for c in got_counts] == counts
    assert not over.any()


def test_casts_up_in_scale_inside_programs_are_checked_as_evaluate_checks_them():
    rng = np.random.default_rng(11)
    n = 5000
    i32 = SQLType("integer", 32)
    x = Column(rng.integers(-(2**31), 2**31, n), "int", None, rng.random(n) > 0.1)
    ids = rng.integers(0, 4, n)
    up = E.Call("cast", (E.Ref("x", i32),), SQLType("decimal", precision=18, scale=4))
    same = E.Call("cast", (E.Ref("x", i32),), SQLType("integer", 64))
    programs = compile_sums([up, same])
    assert not programs.leaves[0].name == "cast"  # the CASTs are operations of the program
    got = programs.sums(Batch({"x": x}, n), ids, 4)
    batch = Batch({"x": x}, n)
    for (sums, counts, _), e in zip(got, [up, same], strict=True):
        c = evaluate(e, batch)
        want, want_counts = _exact(c.values, c.valid, ids, 4)
        assert [int(s) for s in sums] == want and [int(k) for k in counts] == want_counts
    # a CAST whose values leave the target's range: no answer, and the usual path raises
    narrow = E.Call("cast", (E.Ref("x", i32),), SQLType("decimal", precision=9, scale=2))
    assert compile_sums([narrow]).sums(Batch({"x": x}, n), ids, 4) is None
    with pytest.raises(SQLError):
        evaluate(narrow, Batch({"x": x}, n))


@pytest.mark.parametrize("span", [10, 5000, 300_000])
def test_dense_group_ids_and_first_rows_equal_numpy(span):
    rng = np.random.default_rng(span)
    keys = rng.integers(-span // 2, span - span // 2, 200_000)
    if span == 300_000:
        keys = np.sort(keys)  # a clustered key (lineitem by l_orderkey)
    ids, n, first = group_ids(keys)
    distinct, first_row, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first_row)  # groups numbered in order of first appearance
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    assert n == len(distinct)
    assert np.array_equal(ids, rank[inverse.ravel()])
    assert np.array_equal(first, np.sort(first_row))


def test_grouped_sums_counts_and_a_dense_filter_equal_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    pq = pytest.importorskip("pyarrow.parquet")
    from hpc.domains.sql import Catalog, query
    from hpc.domains.sql.compare import same_rows

    def decimals(unscaled: np.ndarray) -> pa.Array:  # DECIMAL(15, 2) of unscaled int64
        words = np.empty(2 * len(unscaled), np.int64)
        words[0::2], words[1::2] = unscaled, unscaled >> 63
        return pa.Array.from_buffers(pa.decimal128(15, 2), len(unscaled),
                                     [None, pa.py_buffer(words)])

    rng = np.random.default_rng(5)
    n = 300_000
    table = pa.table({
        "k": pa.array(rng.choice(["A", "N", "R"], n)),
        "s": pa.array(rng.choice(["F", "O"], n)),
        "o": pa.array(rng.integers(0, 200_000, n)),
        "q": decimals(rng.integers(100, 5000, n)),
        "p": decimals(rng.integers(-(10**9), 10**9, n)),
        "d": decimals(rng.integers(0, 11, n)),
        "day": pa.array(rng.integers(0, 1000, n), pa.int32()),
    })
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=70_000,
                   store_decimal_as_integer=True)  # INT64 decimals, as TPC-H's files
    sql = {
        "few": "select k, s, sum(q) as a, sum(p * (1 - d)) as b, avg(d) as c, "
               "count(*) as n from t where day < 990 group by k, s order by k, s",
        "many": "select o, sum(q) as a, count(*) as n from t group by o "
                "having sum(q) > 30 order by o",
    }
    con = duckdb.connect()
    con.execute(f"create view t as select * from read_parquet('{tmp_path}/t.parquet')")
    for text in sql.values():
        ours = query(text, Catalog.from_directory(tmp_path)).to_pandas()
        assert same_rows(ours, con.execute(text).df(), ordered=True) is None
