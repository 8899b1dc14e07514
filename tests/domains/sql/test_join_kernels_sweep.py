"""The join kernels over the shapes of ``hpc bench join --sweep``, against a NumPy reference.

The sweep joins unique build keys (a permutation, every other value) with probe keys drawn
uniformly (about half match) or Zipf-skewed over the build keys (all match, a few keys take
most rows), and swaps the sides when the build is the larger one, so duplicate-heavy skewed
keys become the build side. These cases reach the key-indexed path's chunks where every row
matches (written by a flat loop), where none or some do (the cursor loop), with each row's
build row kept between the passes or looked up again, and the grouped hash and radix paths
for repeated keys. Keys are NULL-free int64, near either end of the range too.
"""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.sql import join as join_module
from hpc.domains.sql.join import _CHUNK, _SERIAL_ROWS, hash_join
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

I64 = np.iinfo(np.int64)


def _pairs_reference(probe: np.ndarray, build: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inner-join pairs by probe row, then build row: the build rows sorted by key (stable),
    each probe key's run of equal keys found by binary search."""
    by_key = np.argsort(build, kind="stable")
    sorted_keys = build[by_key]
    first = np.searchsorted(sorted_keys, probe, side="left")
    runs = np.searchsorted(sorted_keys, probe, side="right") - first
    left = np.repeat(np.arange(len(probe), dtype=np.int64), runs)
    run_start = np.repeat(np.cumsum(runs) - runs, runs)
    offset_in_run = np.arange(len(left)) - run_start
    right = by_key[np.repeat(first, runs) + offset_in_run]
    return left, right.astype(np.int64)


def _sweep_tables(rng: np.random.Generator, n_build: int, n_probe: int, keys: str,
                  base: int) -> tuple[np.ndarray, np.ndarray]:
    """Build keys ``base + 2 * permutation`` (unique, dense enough for the key-indexed path);
    probe keys uniform over twice their range (some in no build key's range, ``base`` near
    an end of int64 puts them past it) or Zipf ranks over the build keys."""
    build = base + 2 * rng.permutation(n_build).astype(np.int64)
    if keys == "skewed":
        if n_build == 0:
            return np.empty(0, dtype=np.int64), build
        probe = build[(rng.zipf(1.2, n_probe) - 1) % n_build]
    else:
        span = max(1, 4 * n_build)
        # the offsets are drawn in Python ints: base + offset may leave int64 at the ends,
        # those keys are clipped to it (they then match nothing or the end key)
        off = rng.integers(-span // 4, span, n_probe)
        probe = np.clip(off.astype(object) + base, I64.min, I64.max).astype(np.int64)
    return probe, build


SIZES = [0, 1, 7, 1000, _CHUNK - 3, _CHUNK + 5, 3 * _CHUNK + 11, _SERIAL_ROWS + 17]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    n_build=st.sampled_from(SIZES[:6]),
    n_probe=st.sampled_from(SIZES),
    keys=st.sampled_from(["uniform", "skewed"]),
    base=st.sampled_from([1, -(10**12), I64.min, I64.max - 2 * (3 * _CHUNK + 11)]),
    swap=st.booleans(),
    kept=st.booleans(),
    radix=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_sweep_shapes_equal_the_reference(n_build, n_probe, keys, base, swap, kept, radix,
                                          seed):
    """``swap``: the table built on the probe keys (duplicate-heavy when skewed), as the
    benchmark and the engine do when the build side is the larger; ``kept``: the key-indexed
    path keeps each probe row's build row between its passes; ``radix``: the partitioned
    hash path for any size."""
    rng = np.random.default_rng(seed)
    probe, build = _sweep_tables(rng, n_build, n_probe, keys, base)
    if swap:
        probe, build = build, probe
    old = join_module._DIRECT_CACHED, join_module.RADIX_MIN
    join_module._DIRECT_CACHED = 0 if kept else 1 << 40
    if radix:
        join_module.RADIX_MIN = (0, 0)
    try:
        left, right = hash_join(probe, build)
    finally:
        join_module._DIRECT_CACHED, join_module.RADIX_MIN = old
    want_left, want_right = _pairs_reference(probe, build)
    # (int32 row numbers: both sides have under 2**31 rows, join.pair_dtype)
    assert left.dtype == np.int32 and right.dtype == np.int32
    if radix:  # radix-partitioned pairs come by partition first
        got = np.lexsort((right, left))
        left, right = left[got], right[got]
    assert np.array_equal(left, want_left), (keys, n_build, n_probe, swap)
    assert np.array_equal(right, want_right), (keys, n_build, n_probe, swap)


@pytest.mark.parametrize("matching", ["all", "none", "alternate", "first_chunk"])
def test_direct_chunks_every_match_pattern(matching):
    """The key-indexed path's three kinds of chunk side by side, in one call, on all threads
    (more rows than ``_SERIAL_ROWS``): every row matches, none does, some do."""
    rng = np.random.default_rng(7)
    build = rng.permutation(5000).astype(np.int64) * 3 - 40
    n = _SERIAL_ROWS + 3 * _CHUNK + 1
    probe = build[rng.integers(0, len(build), n)]
    if matching == "none":
        probe = probe + 1  # between build keys: no match
    elif matching == "alternate":
        probe[::2] += 1
    elif matching == "first_chunk":  # one full chunk, then mixed, then none
        probe[_CHUNK:2 * _CHUNK:3] += 1
        probe[2 * _CHUNK:] += 1
    for kept in (0, 1 << 40):
        old = join_module._DIRECT_CACHED
        join_module._DIRECT_CACHED = kept
        try:
            left, right = hash_join(probe, build)
        finally:
            join_module._DIRECT_CACHED = old
        want_left, want_right = _pairs_reference(probe, build)
        assert np.array_equal(left, want_left) and np.array_equal(right, want_right)


def test_sweep_point_equals_duckdb():
    """One skewed point of the sweep, both sides' orientations, against DuckDB's count and
    payload sums (the benchmark's own check, at a test's size)."""
    duckdb = pytest.importorskip("duckdb")
    pa = pytest.importorskip("pyarrow")
    rng = np.random.default_rng(11)
    for n_build, n_probe in ((1000, 200_000), (200_000, 3000)):
        probe, build = _sweep_tables(rng, n_build, n_probe, "skewed", 1)
        p_pay = rng.integers(0, 1000, n_probe)
        b_pay = rng.integers(0, 1000, n_build)
        if n_build <= n_probe:
            left, right = hash_join(probe, build)
        else:  # the table on the smaller side, as the benchmark builds it
            right, left = hash_join(build, probe)
        ours = [len(left), int(p_pay[left].sum() + b_pay[right].sum())]
        con = duckdb.connect()
        con.register("p", pa.table({"k": probe, "v": p_pay}))
        con.register("b", pa.table({"k": build, "w": b_pay}))
        want = con.execute("SELECT count(*), sum(v) + sum(w) FROM p JOIN b USING (k)").fetchone()
        assert ours == [int(want[0]), int(want[1])]
