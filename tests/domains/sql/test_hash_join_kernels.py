"""The join kernels of :mod:`hpc.domains.sql.join` against a NumPy reference on random inputs.

Hypothesis draws the shape of a case (sizes on both sides of the kernels' size thresholds, key
layout, nulls, join kind, radix partitioning forced or not); NumPy's generator draws the keys,
so large cases stay cheap to describe. Key layouts reach every path: unique dense build keys
(looked up by key), repeated keys (grouped rows), all keys equal, Zipf-skewed keys, keys spread
over the whole int64 range and keys at its extremes (hashing, tag filters, bitmaps).
"""

from __future__ import annotations

import numpy as np
from hpc.domains.sql import join as join_module
from hpc.domains.sql.join import _CHUNK, _SCREEN_ROWS, _SERIAL_ROWS, hash_join, matched
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

I64 = np.iinfo(np.int64)
LAYOUTS = ("dense", "repeated", "same", "skewed", "wide", "extremes")


def _keys(rng: np.random.Generator, layout: str, n: int) -> np.ndarray:
    """``n`` build keys laid out as ``layout``."""
    if layout == "dense":  # unique, at most a few values apart: the direct lookup
        return rng.permutation(n).astype(np.int64) * int(rng.integers(1, 4)) - 7
    if layout == "repeated":
        return rng.integers(-50, 50 + n // 4, n)
    if layout == "same":
        return np.full(n, int(rng.integers(I64.min, I64.max)), dtype=np.int64)
    if layout == "skewed":
        return (rng.zipf(1.3, n) - 1) * 1_000_003 - 10**12
    if layout == "wide":
        return rng.integers(I64.min, I64.max, n, endpoint=True)
    # extremes: both ends of int64 and a few values next to them
    edge = np.array([I64.min, I64.min + 1, -1, 0, 1, I64.max - 1, I64.max], dtype=np.int64)
    return rng.choice(edge, n)


def _probe_keys(rng: np.random.Generator, build: np.ndarray, n: int, hit: float) -> np.ndarray:
    """``n`` probe keys: about ``hit`` of them drawn from the build keys, the rest anywhere
    (below, inside and above the build keys' range, int64 extremes included)."""
    other = rng.integers(I64.min, I64.max, n, endpoint=True)
    small = rng.random(n) < 0.3
    other[small] = rng.integers(-100, 100, int(small.sum()))
    if n:
        other[rng.integers(0, n, min(n, 4))] = [I64.min, I64.max, -1, 0][: min(n, 4)]
    if len(build) == 0:
        return other
    take = rng.random(n) < hit
    return np.where(take, build[rng.integers(0, len(build), n)], other)


def _reference(probe, build, how, pvalid, bvalid):  # type: ignore[no-untyped-def]
    """Pairs ordered by probe row, then build row, from a stable sort of the build keys."""
    rows = np.arange(len(build)) if bvalid is None else np.flatnonzero(bvalid)
    order = rows[np.argsort(build[rows], kind="stable")]
    keys = build[order]
    lo = np.searchsorted(keys, probe, "left")
    hi = np.searchsorted(keys, probe, "right")
    counts = hi - lo
    if pvalid is not None:
        counts[~pvalid] = 0
    if how in ("semi", "anti"):
        rows = np.flatnonzero(counts > 0 if how == "semi" else counts == 0)
        return rows, np.full(len(rows), -1)
    if how == "left":  # an unmatched probe row keeps one pair, build row -1
        counts_out = np.maximum(counts, 1)
    else:
        counts_out = counts
    left = np.repeat(np.arange(len(probe)), counts_out)
    first = np.repeat(np.cumsum(counts_out) - counts_out, counts_out)
    within = np.arange(len(left)) - first
    start = np.repeat(lo, counts_out)
    matched_row = np.repeat(counts, counts_out) > 0
    right = np.full(len(left), -1, dtype=np.int64)
    right[matched_row] = order[(start + within)[matched_row]]
    return left, right


SIZES = [0, 1, 2, 9, 300, _CHUNK - 1, _CHUNK + 1, 3 * _CHUNK + 7, _SCREEN_ROWS + 5,
         _SERIAL_ROWS + 9]
BUILD_SIZES = [0, 1, 3, 100, 2_000, _CHUNK + 3]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    n_probe=st.sampled_from(SIZES),
    n_build=st.sampled_from(BUILD_SIZES),
    layout=st.sampled_from(LAYOUTS),
    hit=st.sampled_from([0.0, 0.01, 0.5, 1.0]),
    nulls=st.booleans(),
    how=st.sampled_from(["inner", "left", "semi", "anti"]),
    radix=st.booleans(),
    kept=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_join_pairs_equal_the_numpy_reference(n_probe, n_build, layout, hit, nulls, how, radix,
                                              kept, seed):
    """Every join kind; ``radix`` forces the radix-partitioned path, ``kept`` the direct
    lookup that keeps each probe row's build row between its passes (large lookup arrays)."""
    rng = np.random.default_rng(seed)
    if layout in ("same", "extremes") or (layout == "skewed" and hit > 0.1):
        n_build = min(n_build, 100)  # every probe row pairs with a large share of the rows
        n_probe = min(n_probe, 3 * _CHUNK + 7)
    build = _keys(rng, layout, n_build)
    probe = _probe_keys(rng, build, n_probe, hit)
    pvalid = rng.random(n_probe) > 0.2 if nulls else None
    bvalid = rng.random(n_build) > 0.2 if nulls else None
    old = join_module.RADIX_MIN, join_module._DIRECT_CACHED
    if radix:
        join_module.RADIX_MIN = (0, 0)
    if kept:
        join_module._DIRECT_CACHED = 0
    try:
        left, right = hash_join(probe, build, how, pvalid, bvalid)
    finally:
        join_module.RADIX_MIN, join_module._DIRECT_CACHED = old
    want_left, want_right = _reference(probe, build, how, pvalid, bvalid)
    # (int32 row numbers: both sides have under 2**31 rows, join.pair_dtype)
    assert left.dtype == np.int32 and right.dtype == np.int32
    if radix and how in ("inner", "left"):
        # radix-partitioned pairs come by partition first: compare them sorted
        got = np.lexsort((right, left))
        left, right = left[got], right[got]
    assert np.array_equal(left, want_left), (layout, how, n_probe, n_build)
    assert np.array_equal(right, want_right), (layout, how, n_probe, n_build)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    n_probe=st.sampled_from(SIZES),
    n_build=st.sampled_from(BUILD_SIZES + [5 * _CHUNK]),
    layout=st.sampled_from(LAYOUTS),
    hit=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_matched_equals_isin(n_probe, n_build, layout, hit, seed):
    rng = np.random.default_rng(seed)
    build = _keys(rng, layout, n_build)
    probe = _probe_keys(rng, build, n_probe, hit)
    assert np.array_equal(matched(probe, build), np.isin(probe, build))


def test_edge_cases():
    """Empty sides, one row, narrow integer dtypes, all keys equal on both sides."""
    empty = np.empty(0, dtype=np.int64)
    for how in ("inner", "left", "semi", "anti"):
        for p, b in ((empty, empty), (empty, np.arange(3)), (np.arange(3), empty),
                     (np.array([5]), np.array([5])), (np.array([5]), np.array([6]))):
            left, right = hash_join(p, b, how)
            want = _reference(p.astype(np.int64), b.astype(np.int64), how, None, None)
            assert np.array_equal(left, want[0]) and np.array_equal(right, want[1])
    p = np.full(_SERIAL_ROWS + 5, 3, dtype=np.int8)
    b = np.full(40, 3, dtype=np.int16)
    left, right = hash_join(p, b)
    assert len(left) == len(p) * len(b)
    assert np.array_equal(left, np.repeat(np.arange(len(p)), len(b)))
    assert np.array_equal(right, np.tile(np.arange(len(b)), len(p)))
