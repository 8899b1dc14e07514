"""Narrow row numbers and the one-pass key-indexed join of :mod:`hpc.domains.sql.join`.

:func:`~hpc.domains.sql.join.hash_join` returns int32 row numbers while both sides have at
most 2**31 rows (:func:`~hpc.domains.sql.join.pair_dtype`), int64 past that; an inner join
against unique, densely spread build keys whose sampled probe rows all match (foreign keys)
pairs every chunk of probe rows at its own rows' places in one pass, and moves the chunks
together when some row did not match after all. Every join kind and path is checked against
a NumPy reference on fresh random inputs, at both widths (the int64 width forced by lowering
the chooser's bound: 2**31 rows are never allocated), and SQL answers are checked to be the
same with the new paths on and off.
"""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.sql import join as join_module
from hpc.domains.sql.join import _CHUNK, _SERIAL_ROWS, HOW, hash_join, pair_dtype
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

I64 = np.iinfo(np.int64)


def _reference(probe, build, how, pvalid, bvalid):  # type: ignore[no-untyped-def]
    """Pairs by probe row, then build row: a stable sort of the (non-NULL) build keys and
    two binary searches per probe key."""
    rows = np.arange(len(build)) if bvalid is None else np.flatnonzero(bvalid)
    order = rows[np.argsort(build[rows], kind="stable")]
    keys = build[order]
    lo = np.searchsorted(keys, probe, "left")
    counts = np.searchsorted(keys, probe, "right") - lo
    if pvalid is not None:
        counts[~pvalid] = 0
    if how in ("semi", "anti"):
        found = np.flatnonzero(counts > 0 if how == "semi" else counts == 0)
        return found, np.full(len(found), -1)
    out = np.maximum(counts, 1) if how == "left" else counts
    left = np.repeat(np.arange(len(probe)), out)
    within = np.arange(len(left)) - np.repeat(np.cumsum(out) - out, out)
    paired = np.repeat(counts, out) > 0
    right = np.full(len(left), -1, dtype=np.int64)
    right[paired] = order[(np.repeat(lo, out) + within)[paired]]
    return left, right


def _build(rng: np.random.Generator, layout: str, n: int) -> np.ndarray:
    if layout == "dense":  # unique keys a few values apart: the key-indexed path
        return rng.permutation(n).astype(np.int64) * int(rng.integers(1, 4)) + int(
            rng.integers(-(2**40), 2**40))
    if layout == "sparse":  # unique, about 20 values apart: the rank (bitmap) path
        return rng.choice(20 * max(n, 1), n, replace=False).astype(np.int64) - 5
    if layout == "duplicates":  # every build key the same
        return np.full(n, int(rng.integers(I64.min, I64.max)), dtype=np.int64)
    if layout == "skewed":  # repeated keys, a few of them most rows (hash table, groups)
        return (rng.zipf(1.3, n) - 1) * 7919 - 3
    return rng.integers(I64.min, I64.max, n, endpoint=True)  # wide: hashing only


def _probe(rng: np.random.Generator, build: np.ndarray, n: int, misses: str) -> np.ndarray:
    """Probe keys drawn from the build keys (Zipf-skewed over them), with ``misses``: none
    (foreign keys), a few at random rows (the one-pass path's moved chunks), one chunk of
    none matching, or half."""
    if len(build) == 0:
        return rng.integers(-100, 100, n)
    p = build[(rng.zipf(1.2, n) - 1) % len(build)]
    if n == 0 or misses == "none":
        return p
    absent = int(build.max()) + 1 if build.max() < I64.max else int(build.min()) - 1
    if misses == "few":
        p[rng.integers(0, n, int(rng.integers(1, 4)))] = absent
    elif misses == "chunk":
        start = int(rng.integers(0, max(1, n - _CHUNK)))
        p[start:start + _CHUNK] = I64.min if build.min() > I64.min else absent
    else:
        p[rng.random(n) < 0.5] = absent
    return p


SIZES = [0, 1, 7, _CHUNK - 1, _CHUNK + 1, 2 * _CHUNK + 5, _SERIAL_ROWS + 3]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    n_probe=st.sampled_from(SIZES),
    n_build=st.sampled_from([0, 1, 5, 300, 3_000, _CHUNK + 9]),
    layout=st.sampled_from(["dense", "sparse", "duplicates", "skewed", "wide"]),
    misses=st.sampled_from(["none", "few", "chunk", "half"]),
    how=st.sampled_from(HOW),
    nulls=st.sampled_from([None, "probe", "build"]),
    wide=st.booleans(),
    radix=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_path_at_both_widths_equals_the_reference(n_probe, n_build, layout, misses, how,
                                                        nulls, wide, radix, seed, monkeypatch):
    """``wide``: the chooser's bound lowered so these sizes get int64 row numbers; the
    one-pass path taken from 2 probe rows on (its sample is then most rows)."""
    rng = np.random.default_rng(seed)
    if layout in ("duplicates", "skewed"):  # a probe row pairs with many build rows
        n_build = min(n_build, 40 if layout == "duplicates" else 300)
        n_probe = min(n_probe, 2 * _CHUNK + 5)
    build = _build(rng, layout, n_build)
    probe = _probe(rng, build, n_probe, misses)
    pvalid = rng.random(n_probe) > 0.01 if nulls == "probe" else None
    bvalid = rng.random(n_build) > 0.2 if nulls == "build" else None
    with monkeypatch.context() as mp:  # (one fixture for all of hypothesis's examples)
        mp.setattr(join_module, "_PLACE_ROWS", 2)
        if wide:
            mp.setattr(join_module, "_NARROW_ROWS", 0)
        if radix:
            mp.setattr(join_module, "RADIX_MIN", (0, 0))
        left, right = hash_join(probe, build, how, pvalid, bvalid)
        want = np.dtype(np.int64) if wide and max(n_probe, n_build) else np.dtype(np.int32)
        assert pair_dtype(n_probe, n_build) == want
    assert left.dtype == want and right.dtype == want
    want_left, want_right = _reference(probe, build, how, pvalid, bvalid)
    if radix and how in ("inner", "left"):  # radix pairs come by partition first
        got = np.lexsort((right, left))
        left, right = left[got], right[got]
    assert np.array_equal(left, want_left), (layout, misses, how, n_probe, n_build)
    assert np.array_equal(right, want_right), (layout, misses, how, n_probe, n_build)


@pytest.mark.parametrize("misses", ["none", "few", "chunk", "half"])
@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("n", [2 * _CHUNK + 3, 3 * _SERIAL_ROWS // 2 + 11])
def test_the_one_pass_path_forced_equals_the_reference(misses, nulls, n, monkeypatch):
    """The one-pass path whatever the sample says, on one thread and on all of them: rows
    that miss make their chunks move together (a whole chunk of misses moves nothing)."""
    rng = np.random.default_rng()
    build = _build(rng, "dense", 5_000)
    probe = _probe(rng, build, n, misses)
    valid = rng.random(n) > 1e-4 if nulls else None
    calls = []
    placed = join_module._direct_placed
    monkeypatch.setattr(join_module, "_PLACE_ROWS", 0)
    monkeypatch.setattr(join_module, "_sample_matches", lambda *a: True)
    monkeypatch.setattr(join_module, "_direct_placed",
                        lambda *a: calls.append(1) or placed(*a))  # type: ignore[func-returns-value]
    left, right = hash_join(probe, build, "inner", valid)
    assert calls == [1]
    want_left, want_right = _reference(probe, build, "inner", valid, None)
    assert np.array_equal(left, want_left) and np.array_equal(right, want_right)


def test_the_sample_sends_foreign_keys_one_pass_and_others_count_then_fill(monkeypatch):
    rng = np.random.default_rng()
    build = _build(rng, "dense", 5_000)
    calls = []
    placed = join_module._direct_placed
    monkeypatch.setattr(join_module, "_direct_placed",
                        lambda *a: calls.append(1) or placed(*a))  # type: ignore[func-returns-value]
    n = join_module._PLACE_ROWS + 7
    for misses, taken in (("none", [1]), ("half", [1]), ("chunk", [1]), ("none", [1, 1])):
        probe = _probe(rng, build, n, misses)
        left, right = hash_join(probe, build)
        assert calls == taken
        want_left, want_right = _reference(probe, build, "inner", None, None)
        assert np.array_equal(left, want_left) and np.array_equal(right, want_right)
    left, right = hash_join(probe[:100], build)  # short probes: count-then-fill
    assert calls == [1, 1]


def test_pair_dtype_chooser_bounds(monkeypatch):
    """int32 up to 2**31 rows on either side (the largest row number 2**31 - 1 and -1
    fit), int64 past it or with ``NARROW_PAIRS`` off."""
    assert pair_dtype(0, 0) == np.int32
    assert pair_dtype(2**31, 2**31) == np.int32
    assert pair_dtype(2**31 + 1, 1) == np.int64
    assert pair_dtype(1, 2**31 + 1) == np.int64
    assert np.iinfo(np.int32).max == 2**31 - 1
    monkeypatch.setattr(join_module, "NARROW_PAIRS", False)
    assert pair_dtype(5, 5) == np.int64
    left, right = hash_join(np.arange(5), np.arange(3))
    assert left.dtype == right.dtype == np.int64


def test_sql_answers_are_the_same_with_the_new_paths_off(monkeypatch):
    """Joins through the SQL engine (inner on foreign keys, with a NULL key and a missing
    one, left, semi and anti) answer the same with narrow pairs and the one-pass path as
    with int64 pairs counted then filled."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("sqlglot")
    from hpc.domains.sql import Catalog, Table, query

    rng = np.random.default_rng()
    n, m = join_module._PLACE_ROWS + 5_000, 3_000
    dim = pd.DataFrame({"k": rng.permutation(m) * 2 + 1, "d": rng.integers(0, 100, m)})
    fk = dim["k"].to_numpy()[(rng.zipf(1.2, n) - 1) % m].astype("float64")
    fk[rng.integers(0, n)] = np.nan  # a NULL key
    fk[rng.integers(0, n)] = 4  # a key without a dimension row
    fact = pd.DataFrame({"k": pd.array(fk, dtype="Int64"), "p": rng.integers(0, 100, n)})
    catalog = Catalog()
    catalog.register("fact", Table.from_pandas(fact))
    catalog.register("dim", Table.from_pandas(dim))
    sqls = [
        "select count(*) as n, sum(p) as sp, sum(d) as sd, sum(fact.k) as sk"
        " from fact join dim on fact.k = dim.k",
        "select count(*) as n, sum(d) as sd, count(d) as cd from fact left join dim"
        " on fact.k = dim.k",
        "select count(*) as n, sum(p) as sp from fact where k in (select k from dim)",
        "select count(*) as n, sum(p) as sp from fact where not exists"
        " (select * from dim where dim.k = fact.k)",
    ]
    new = [query(s, catalog).to_pandas().to_dict("list") for s in sqls]
    monkeypatch.setattr(join_module, "NARROW_PAIRS", False)
    monkeypatch.setattr(join_module, "PLACE_DIRECT", False)
    old = [query(s, catalog).to_pandas().to_dict("list") for s in sqls]
    assert new == old
    inner = fact.dropna().astype({"k": "int64"}).merge(dim, on="k")  # pandas as the reference
    assert new[0]["n"] == [len(inner)] == [n - 2]
    assert new[0]["sp"] == [int(inner["p"].sum())] and new[0]["sd"] == [int(inner["d"].sum())]
