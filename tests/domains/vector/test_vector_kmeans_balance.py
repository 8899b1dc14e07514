"""k-means: empty clusters are split off the largest one, in a way spherical k-means keeps.

An empty cluster takes half of the largest cluster, the two centroids nudged apart. A nudge
along the centroid (a scaling, as before) vanishes when spherical k-means normalises the
centroids: the two are equal but for float32 rounding, and only that noise splits their
points. The nudge now goes across the centroid. The reference is a brute-force
nearest-centroid assignment in float64 on fresh random data.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

# the module (the package's ``kmeans`` attribute is the function of the same name)
km = importlib.import_module("hpc.domains.vector.kmeans")


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def test_split_conserves_counts_and_separates_directions():
    rng = np.random.default_rng()
    k, dim = 30, 12
    counts = rng.integers(2, 500, size=k)
    counts[rng.choice(k, size=9, replace=False)] = 0
    means = _unit(rng.standard_normal((k, dim)))
    sums = means * counts[:, None]
    before = counts.copy()
    km._split_empty(sums, counts, 1.0 / np.sqrt(dim), rng)
    assert counts.sum() == before.sum()
    assert (counts > 0).all()
    cent = _unit(sums / counts[:, None])
    # every direction is distinct after normalisation (a split along the centroid is not)
    gap = 1 - cent @ cent.T
    np.fill_diagonal(gap, 1.0)
    assert gap.min() > 1e-9
    # each new centroid sits next to the cluster it was split from
    for c in np.flatnonzero(before == 0):
        assert np.max(cent[c] @ means.T) > 1 - 1e-4


def test_split_of_single_points_copies_the_centroid():
    sums = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    counts = np.array([1, 0, 1])
    km._split_empty(sums, counts, 1.0, np.random.default_rng())
    np.testing.assert_array_equal(counts, [1, 0, 1])  # nothing to split: no count made up
    assert np.isfinite(sums).all() and np.abs(sums[1]).sum() > 0


@pytest.mark.parametrize("spherical", [True, False])
def test_kmeans_from_duplicate_centroids_ends_with_no_empty_cluster(monkeypatch, spherical):
    """Start from an initialisation with 8 copies of one centroid (what a random start picks
    on data with repeated rows): the copies are split apart, no cluster ends empty, and the
    returned assignment is the brute-force nearest centroid."""
    rng = np.random.default_rng()
    n, dim, k = 3000, 16, 24
    x = rng.standard_normal((n, dim)) + 3 * rng.standard_normal((6, dim))[rng.integers(0, 6, n)]
    x = (_unit(x) if spherical else x).astype(np.float32)
    pick = np.concatenate([np.zeros(8, dtype=np.int64), rng.choice(np.arange(1, n), k - 8)])
    monkeypatch.setattr(km, "_init", lambda x, k, init, rng: x[pick].copy())
    cent, assign = km.kmeans(x, k, niter=12, spherical=spherical)
    assert np.bincount(assign, minlength=k).min() > 0
    x64, c64 = x.astype(np.float64), cent.astype(np.float64)
    if spherical:
        np.testing.assert_allclose(np.linalg.norm(c64, axis=1), 1.0, rtol=1e-6)
        score = x64 @ c64.T
        best = np.argmax(score, axis=1)
    else:
        score = -((x64[:, None, :] - c64[None, :, :]) ** 2).sum(axis=2)
        best = np.argmax(score, axis=1)
    chosen = np.take_along_axis(score, assign[:, None], axis=1)[:, 0]
    top = score[np.arange(n), best]
    # the same centroid, or one scoring equal within float32 rounding of the GEMM
    assert np.all((assign == best) | (top - chosen <= 1e-5 * (1 + np.abs(top))))
