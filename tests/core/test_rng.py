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


@pytest.mark.parametrize("dim", [1, 2, 5, 8, 33, 64])
def test_uniforms_and_normals_are_the_reference_bijection_per_dimension(dim):
    """Every variate of the fill kernel (narrow rows: vectorised across rows; wide: along the
    row), odd last dimension included, against
    Philox4x32 of its counter (index low, index high, dimension // 2, stream): uniforms to the
    bit, normals by Box-Muller with libm to 1e-13."""
    rng = np.random.default_rng()
    seed, stream = int(rng.integers(0, 2**64, dtype=np.uint64)), int(rng.integers(0, 2**32))
    first = int(rng.integers(0, 2**40))
    rs = RandomStreams(seed, stream)
    u, z = rs.uniforms(first, 6, dim), rs.normals(first, 6, dim)
    key = [seed & 0xFFFFFFFF, seed >> 32]
    for p in range(6):
        index = first + p
        for j in range(dim):
            c = philox4x32([index & 0xFFFFFFFF, index >> 32, j // 2, stream], key)
            w = [int(v) for v in c]
            u1, u2 = [((w[a] >> 5) * 2**26 + (w[a + 1] >> 6) + 0.5) / 2**53 for a in (0, 2)]
            assert u[p, j] == (u1 if j % 2 == 0 else u2), (p, j)
            radius = np.sqrt(-2.0 * np.log(u1))
            ref = radius * (np.cos(2 * np.pi * u2) if j % 2 == 0 else np.sin(2 * np.pi * u2))
            assert z[p, j] == pytest.approx(ref, rel=1e-13, abs=1e-13), (p, j)


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
