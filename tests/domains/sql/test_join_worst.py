"""hash_join at the join benchmark's weakest points, against brute force: build keys that
repeat joined through an array of unique, dense probe keys (the sides swapped, pairs put back
in probe order), membership through a larger tag filter, and the benchmark's point, whose
materialisation follows the engine's (a side whose rows are all of its rows in order kept)."""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.sql import join


def _pairs(probe: np.ndarray, build: np.ndarray, probe_valid: np.ndarray | None = None,
           build_valid: np.ndarray | None = None) -> list[tuple[int, int]]:
    """Brute force: every (probe row, build row) with equal non-null keys, by probe row, then
    build row."""
    rows: dict[int, list[int]] = {}
    for j, k in enumerate(build.tolist()):
        if build_valid is None or build_valid[j]:
            rows.setdefault(k, []).append(j)
    return [(i, j) for i, k in enumerate(probe.tolist())
            if probe_valid is None or probe_valid[i] for j in rows.get(k, [])]


def _got(left: np.ndarray, right: np.ndarray) -> list[tuple[int, int]]:
    return list(zip(left.tolist(), right.tolist(), strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_repeated_build_keys_against_unique_dense_probe_keys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_probe = int(rng.integers(1, 3000))
    n_build = int(rng.integers(max(1, n_probe // 2), 4000))
    # unique probe keys over at most 3 values a key, in random order, offset anywhere
    offset = int(rng.integers(-(2**40), 2**40))
    probe = rng.permutation(int(n_probe * rng.choice([1.0, 1.5, 3.0])))[:n_probe] + offset
    # build keys repeat; some miss every probe key (below, above, between)
    build = rng.integers(probe.min() - 20, probe.max() + 20, n_build)
    if seed % 2:  # every build key among the probe keys (the one-pass pairing inside)
        build = rng.choice(probe, n_build)
    build_valid = rng.random(n_build) < 0.8 if seed % 3 == 0 else None
    left, right = join.hash_join(probe, build, build_valid=build_valid)
    assert left.dtype == right.dtype == join.pair_dtype(len(probe), len(build))
    assert _got(left, right) == _pairs(probe, build, None, build_valid)
    b = build if build_valid is None else build[build_valid]
    assert join._swapped_direct(probe, b, left.dtype) is not None  # the path under test


def test_swapped_join_of_a_long_probe_stays_in_probe_order() -> None:
    rng = np.random.default_rng(11)
    n = 300_000  # past the serial limit: the threaded kernels run
    probe = rng.permutation(2 * n)[:n].astype(np.int64)
    build = rng.choice(probe, n // 2)  # Zipf-like: a few probe keys take many build rows
    build[: n // 8] = probe[17]
    left, right = join.hash_join(probe, build)
    assert np.array_equal(probe[left], build[right])
    order = np.lexsort((right, left))
    assert np.array_equal(order, np.arange(len(left)))  # by probe row, then build row
    want = np.isin(build, probe).sum()
    assert len(left) == want
    assert np.array_equal(np.sort(right), np.flatnonzero(np.isin(build, probe)))


def test_swap_left_alone_where_it_does_not_apply() -> None:
    rng = np.random.default_rng(3)
    probe = rng.integers(0, 50, 400)  # repeated probe keys: no array of probe rows
    build = rng.integers(0, 50, 300)
    assert join._swapped_direct(probe, build, np.dtype(np.int32)) is None
    assert _got(*join.hash_join(probe, build)) == _pairs(probe, build)
    # null probe keys: the usual paths, nulls match nothing
    probe = np.arange(400, dtype=np.int64)
    valid = rng.random(400) < 0.7
    assert _got(*join.hash_join(probe, build, probe_valid=valid)) == _pairs(probe, build, valid)
    # a probe far longer than the build: the build's table, not an array of probe rows
    long = np.arange(100_000, dtype=np.int64)
    assert join._swapped_direct(long, build, np.dtype(np.int32)) is None


@pytest.mark.parametrize("n_build", [40, 1000, 5000])
def test_membership_of_many_keys_in_a_small_sparse_set(n_build: int) -> None:
    rng = np.random.default_rng(n_build)
    build = rng.integers(-(2**50), 2**50, n_build)  # too sparse for a bitmap: a hash table
    probe = rng.integers(-(2**50), 2**50, 200_000)
    probe[rng.random(len(probe)) < 0.02] = rng.choice(build, 1)[0]
    probe[::97] = rng.choice(build, len(probe[::97]))
    want = np.isin(probe, build)
    semi, _ = join.hash_join(probe, build, how="semi")
    anti, _ = join.hash_join(probe, build, how="anti")
    assert np.array_equal(semi, np.flatnonzero(want))
    assert np.array_equal(anti, np.flatnonzero(~want))
    assert np.array_equal(join.matched(probe, build), want)


@pytest.mark.parametrize("keys,kept", [("skewed", True), ("uniform", False)])
def test_benchmark_point_agrees_with_duckdb(keys: str, kept: bool) -> None:
    pytest.importorskip("duckdb")
    from mpi4py import MPI

    from benchmarks.join import _cpu_point

    point = _cpu_point(MPI.COMM_SELF, 3000, 200, keys, reps=1, polars=False)
    assert point["answers_agree"] is True
    assert point["side_kept"] is kept  # skewed: every probe row matches once, kept as is
    if keys == "skewed":
        assert point["size"]["matches"] == 3000
