"""The local join's paths against brute force on random sides: semi, anti and mark joins on
keys alone by the membership test (``MEMBERSHIP``), and inner and outer joins whose output
columns are gathered when read (``DEFER_JOINS``), chained so that rows compose. Keys repeat,
hold NULLs, are skewed to one value, and either side may be empty."""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.sql.physical import join as join_module
from hpc.domains.sql.physical.join import Side, join
from hpc.domains.sql.table import Column
from hypothesis import given, settings
from hypothesis import strategies as st


def _side(rng: np.random.Generator, n: int, prefix: str, keys: int, layout: str,
          nulls: bool) -> tuple[Side, list[np.ndarray], list[np.ndarray]]:
    """A side of ``n`` rows: ``keys`` key columns and a payload column (row number * 10)."""
    values, valids, cols = [], [], {}
    for k in range(keys):
        if layout == "skewed":  # most rows one key
            v = np.where(rng.random(n) < 0.8, 3, rng.integers(0, 6, n))
        elif layout == "dense":
            v = rng.permutation(n) if k == 0 else np.zeros(n, np.int64)
        else:
            v = rng.integers(0, max(1, n // 2), n)
        v = v.astype(np.int64)
        ok = rng.random(n) > 0.2 if nulls else np.ones(n, bool)
        values.append(v)
        valids.append(ok)
        cols[f"{prefix}k{k}"] = Column(v, "int", None, None if ok.all() else ok)
    cols[f"{prefix}pay"] = Column(np.arange(n, dtype=np.int64) * 10, "int")
    return Side(cols, n), values, valids


def _equal(lv, lok, rv, rok):  # type: ignore[no-untyped-def]
    """Matrix of (left row, right row) with every key equal and non-NULL."""
    eq = np.ones((len(lok[0]), len(rok[0])), bool)
    for a, av, b, bv in zip(lv, lok, rv, rok, strict=True):
        eq &= (a[:, None] == b[None, :]) & av[:, None] & bv[None, :]
    return eq


_CASES = dict(nl=st.integers(0, 40), nr=st.integers(0, 40), keys=st.integers(1, 2),
              layout=st.sampled_from(["random", "skewed", "dense"]), nulls=st.booleans(),
              seed=st.integers(0, 2**32 - 1))


@settings(max_examples=120, deadline=None)
@given(kind=st.sampled_from(["semi", "anti", "mark"]), null_aware=st.booleans(), **_CASES)
def test_marking_joins_match_brute_force(kind, null_aware, nl, nr, keys, layout, nulls, seed):
    rng = np.random.default_rng(seed)
    left, lv, lok = _side(rng, nl, "l", keys, layout, nulls)
    right, rv, rok = _side(rng, nr, "r", keys, layout, nulls)
    lkeys = [left.columns[f"lk{k}"] for k in range(keys)]
    rkeys = [right.columns[f"rk{k}"] for k in range(keys)]
    null_aware = null_aware and kind != "semi" and keys == 1
    nulls_flags = (nr > 0, bool(nr and not rok[0].all())) if null_aware else (False, False)
    matched = _equal(lv, lok, rv, rok).any(axis=1)
    unknown = np.zeros(nl, bool)
    if null_aware:
        unknown = (~lok[0] & (nr > 0)) | nulls_flags[1]
        unknown &= ~matched
    outs = []
    for membership in (True, False):  # the membership test and the pairs path
        join_module.MEMBERSHIP = membership
        try:
            out = join(kind, left, right, lkeys, rkeys, None, "m", null_aware, nulls_flags)
        finally:
            join_module.MEMBERSHIP = True
        if kind == "mark":
            m = out.columns["m"]
            valid = np.ones(nl, bool) if m.valid is None else np.asarray(m.valid)
            assert np.array_equal(valid, ~unknown)
            assert np.array_equal(np.asarray(m.values) & valid, matched)
            rows = np.arange(nl)
        else:
            want = matched if kind == "semi" else ~matched & ~unknown
            rows = np.asarray(out.columns["lpay"].values) // 10
            assert rows.tolist() == np.flatnonzero(want).tolist()
        outs.append(rows.tolist())
    assert outs[0] == outs[1]


@settings(max_examples=120, deadline=None)
@given(kind=st.sampled_from(["inner", "left"]), read_first=st.booleans(), **_CASES)
def test_chained_joins_gather_columns_when_read(kind, read_first, nl, nr, keys, layout, nulls,
                                                seed):
    # (left join right) join third: every payload column of the result is each side's row
    rng = np.random.default_rng(seed)
    left, lv, lok = _side(rng, nl, "l", keys, layout, nulls)
    right, rv, rok = _side(rng, nr, "r", keys, layout, nulls)
    third, tv, tok = _side(rng, max(1, nr // 2), "t", 1, "random", False)
    lkeys = [left.columns[f"lk{k}"] for k in range(keys)]
    rkeys = [right.columns[f"rk{k}"] for k in range(keys)]
    first = join(kind, left, right, lkeys, rkeys, None)
    li, ri = np.nonzero(_equal(lv, lok, rv, rok))
    if kind == "left":
        lonely = np.setdiff1d(np.arange(nl), li)
        li = np.concatenate([li, lonely])
        ri = np.concatenate([ri, np.full(len(lonely), -1)])
    pairs = sorted(zip(li.tolist(), ri.tolist(), strict=True))
    got = list(zip((np.asarray(first.columns["lpay"].values) // 10).tolist(),
                   _rows(first.columns["rpay"]), strict=True))
    assert sorted(got) == pairs
    if read_first:  # a column read between the joins is gathered there, the rest compose
        assert len(first.columns["lk0"].values) == len(pairs)
    # the second join on the left payload's row number modulo the third side's size
    link = Column(np.asarray(first.columns["lpay"].values) // 10 % len(tok[0]), "int")
    second = join("inner", first, third, [link], [third.columns["tk0"]], None)
    lrows = np.asarray(got)[:, 0] if got else np.zeros(0, np.int64)
    want = sorted((a, b, c) for (a, b), t in zip(got, lrows % len(tok[0]), strict=True)
                  for c in np.flatnonzero(tv[0] == t).tolist())
    have = sorted(zip((np.asarray(second.columns["lpay"].values) // 10).tolist(),
                      _rows(second.columns["rpay"]),
                      (np.asarray(second.columns["tpay"].values) // 10).tolist(), strict=True))
    assert have == want
    for k in range(keys):  # key columns carried through both joins, NULLs and all
        c = second.columns[f"lk{k}"]
        rows = np.asarray(second.columns["lpay"].values) // 10
        assert np.array_equal(np.asarray(c.values), lv[k][rows])
        valid = np.ones(len(rows), bool) if c.valid is None else np.asarray(c.valid)
        assert np.array_equal(valid, lok[k][rows])


def _rows(c: Column) -> list[int]:
    """A payload column's side rows, -1 where an outer join padded it with NULL."""
    values = np.asarray(c.values) // 10
    if c.valid is not None:
        values = np.where(np.asarray(c.valid), values, -1)
    return values.tolist()


@pytest.mark.parametrize("how", ["semi", "anti"])
def test_membership_of_a_few_probe_keys_against_many_sparse_build_keys(how):
    # many more build keys than probe keys, too spread for a bitmap: the build keys are
    # first cut to those some probe row has (NULL probe keys and NULL build keys match none)
    from hpc.domains.sql.join import hash_join

    rng = np.random.default_rng(7)
    build = rng.integers(-(2**62), 2**62, 50_000)
    probe = np.concatenate([rng.choice(build, 300), rng.integers(-(2**62), 2**62, 300)])
    pvalid = rng.random(len(probe)) > 0.1
    bvalid = rng.random(len(build)) > 0.1
    rows, _ = hash_join(probe, build, how, pvalid, bvalid)
    hit = np.isin(probe, build[bvalid]) & pvalid
    assert rows.tolist() == np.flatnonzero(hit if how == "semi" else ~hit).tolist()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), chunks=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_decimals_in_chunks_carried_through_joins_convert_the_rows_left(n, chunks, seed):
    # a DECIMAL column still in Parquet's chunks, through a join that keeps many rows and
    # one that keeps few: its values are the exact scaled values of the rows left
    from decimal import Decimal

    import pyarrow as pa
    from hpc.domains.sql.physical.lazy_decimals import lazy_decimal
    from hpc.domains.sql.table import Decimals

    rng = np.random.default_rng(seed)
    unscaled = rng.integers(-10**9, 10**9, n)
    cuts = np.sort(rng.integers(0, n + 1, chunks - 1))
    parts = np.split(unscaled, cuts)
    arrow = [pa.array([Decimal(int(v)).scaleb(-2) for v in p], type=pa.decimal128(18, 2))
             for p in parts]
    key = rng.integers(0, max(1, n // 3), n)
    dim = np.unique(rng.integers(0, max(1, n // 3), max(1, n // 2)))
    few = dim[: max(1, len(dim) // 4)]
    rows = np.flatnonzero(np.isin(key, few))  # (both joins keep fact rows in order)
    for deferred in (True, False):  # gathered when read, or converted at the first join
        join_module.DEFER_DECIMALS = deferred
        try:
            price = lazy_decimal(Decimals(arrow, n), 2)
            fact = Side({"k": Column(key, "int"), "price": price}, n)
            first = join("inner", fact, Side({"d": Column(dim, "int")}, len(dim)),
                         [fact.columns["k"]], [Column(dim, "int")], None)
            second = join("inner", first, Side({"f": Column(few, "int")}, len(few)),
                          [first.columns["k"]], [Column(few, "int")], None)
        finally:
            join_module.DEFER_DECIMALS = False
        assert second.columns["price"].kind == "decimal"
        assert np.asarray(second.columns["price"].values).tolist() == unscaled[rows].tolist()
