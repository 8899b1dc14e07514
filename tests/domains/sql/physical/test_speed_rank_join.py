"""The rank join (:func:`hpc.domains.sql.join._rank_join`): unique build keys looked up by
their bit and the count of bits below it, against a brute-force join on fresh random keys."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from hpc.domains.sql import join as J  # noqa: E402


def _brute(probe, valid, build, outer):  # type: ignore[no-untyped-def]
    """Pairs by a dictionary from key to build row (probe order)."""
    where = {int(k): j for j, k in enumerate(build)}
    right = np.array([where.get(int(k), -1) if valid is None or valid[i] else -1
                      for i, k in enumerate(probe)], dtype=np.int64)
    if outer:
        return np.arange(len(probe)), right
    left = np.flatnonzero(right >= 0)
    return left, right[left]


@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("nulls", [False, True])
def test_rank_join_equals_brute_force(outer: bool, nulls: bool) -> None:
    rng = np.random.default_rng()
    for _ in range(4):
        n = int(rng.integers(1, 5000))
        span = int(rng.integers(n, 60 * n + 2))  # sparse: past the direct join's 4 per key
        build = rng.choice(span, n, replace=False).astype(np.int64) + int(rng.integers(-99, 99))
        # probe keys inside and around the build keys' range, so misses on both sides
        size = int(rng.integers(span // 64, span // 64 + 40_000))  # enough rows for the bitmap
        probe = rng.integers(build.min() - 70, build.max() + 70, size)
        valid = rng.random(len(probe)) > 0.2 if nulls else None
        got = J._rank_join(probe, valid, build, outer, J._key_range(build))
        assert got is not None
        want = _brute(probe, valid, build, outer)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_rank_join_declines_repeated_keys_and_short_probes() -> None:
    build = np.array([5, 9, 9, 40], dtype=np.int64)
    assert J._rank_join(np.arange(50), None, build, False, J._key_range(build)) is None
    sparse = np.array([0, 1 << 20], dtype=np.int64)  # too sparse, and a bitmap of 16k words
    assert J._rank_join(np.arange(50), None, sparse, False, J._key_range(sparse)) is None
    # hash_join then pairs both build rows of the repeated key (through its hash table)
    left, right = J.hash_join(np.array([9, 1, 40]), build)
    assert sorted(zip(left.tolist(), right.tolist(), strict=True)) == [(0, 1), (0, 2), (2, 3)]


def test_hash_join_takes_rank_path_and_matches_hash_path() -> None:
    rng = np.random.default_rng()
    build = rng.choice(3_000_000, 100_000, replace=False).astype(np.int64)
    probe = rng.integers(0, 3_000_000, 400_000)
    J.RANK_JOIN = False
    try:
        want = J.hash_join(probe, build)
    finally:
        J.RANK_JOIN = True
    got = J.hash_join(probe, build)
    order_w = np.lexsort((want[1], want[0]))  # the hash path may be radix-ordered
    np.testing.assert_array_equal(got[0], want[0][order_w])
    np.testing.assert_array_equal(got[1], want[1][order_w])
