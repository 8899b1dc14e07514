"""hpc.rng: Philox4x32-10 against published vectors and randomgen; streams by global index."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from hpc.rng import RandomStreams, philox4x32
from tests.conftest import run_cudasim

# Random123's known-answer vectors (kat_vectors, philox4x32_10): counter, key, result
KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    (
        [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
        [0xA4093822, 0x299F31D0],
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
    ),
]


@pytest.mark.parametrize("counter, key, expected", KAT)
def test_philox_matches_the_published_vectors(counter, key, expected):
    assert philox4x32(counter, key).tolist() == expected


def test_philox_matches_randomgen_on_fresh_counters_and_keys():
    randomgen = pytest.importorskip("randomgen")
    rng = np.random.default_rng()
    for _ in range(50):
        c = [int(v) for v in rng.integers(0, 2**32, 4)]
        k = [int(v) for v in rng.integers(0, 2**32, 2)]
        counter = sum(v << (32 * i) for i, v in enumerate(c))
        key = k[0] | k[1] << 32
        # randomgen advances the counter before each block
        ref = randomgen.Philox(key=key, counter=(counter - 1) % 2**128, number=4, width=32)
        assert philox4x32(c, k).tolist() == [int(v) for v in ref.random_raw(4)], (c, k)


def test_any_slice_of_paths_is_the_same_numbers():
    rs = RandomStreams(seed=7, stream=1)
    whole = rs.normals(10**12, 1000, 7)
    cuts = [0, 1, 333, 334, 1000]
    parts = [rs.normals(10**12 + a, b - a, 7) for a, b in zip(cuts, cuts[1:], strict=False)]
    assert np.vstack(parts).tobytes() == whole.tobytes()
    # fewer dimensions are a prefix of more (each pair of dimensions is one Philox block)
    assert rs.normals(10**12, 1000, 4).tobytes() == whole[:, :4].copy().tobytes()
    assert RandomStreams(7, 1).uniforms(5, 3, 2).tobytes() == rs.uniforms(5, 3, 2).tobytes()


def test_seeds_and_streams_are_distinct_and_uncorrelated():
    n = 20000
    base = RandomStreams(seed=1).normals(0, n, 2)
    for other in (RandomStreams(seed=2), RandomStreams(seed=1, stream=1), RandomStreams(2**63)):
        z = other.normals(0, n, 2)
        assert not np.array_equal(z, base)
        r = np.corrcoef(z[:, 0], base[:, 0])[0, 1]
        assert abs(r) < 5 / np.sqrt(n), (other, r)


def test_normals_and_uniforms_have_the_right_distribution():
    rs = RandomStreams(seed=2026)
    z = rs.normals(0, 200_000, 3)
    for j in range(3):
        assert stats.kstest(z[:, j], "norm").pvalue > 1e-3, j
    # the two normals of one Box-Muller pair, and the next pair, are uncorrelated
    for a, b in ((0, 1), (1, 2)):
        assert abs(np.corrcoef(z[:, a], z[:, b])[0, 1]) < 5 / np.sqrt(len(z))
    u = rs.uniforms(0, 200_000, 2)
    assert 0.0 < u.min() and u.max() < 1.0
    assert stats.kstest(u.ravel(), "uniform").pvalue > 1e-3


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="seed"):
        RandomStreams(-1)
    with pytest.raises(ValueError, match="stream"):
        RandomStreams(1, stream=2**32)
    with pytest.raises(ValueError, match="indices"):
        RandomStreams(1).normals(2**64 - 1, 2, 1)
    with pytest.raises(ValueError, match="4 words"):
        philox4x32([1, 2, 3], [0, 0])


@pytest.mark.cudasim
def test_gpu_streams_under_the_simulator_equal_the_cpu_streams():
    run_cudasim("check_rng_cudasim.py")
