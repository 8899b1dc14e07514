"""k-means for the coarse quantizer and the product quantizer, on the backend.

Lloyd iterations on a random sample (at most ``max_points_per_centroid`` points per centroid):
the assignment step is an exact top-1 search (:func:`hpc.domains.vector.flat.flat_search`,
blocked GEMM), the update a fixed-order float64 sum per cluster. Empty clusters take half of
the largest cluster (its centroid, nudged apart across its direction, so the split survives
the normalisation of spherical k-means). For the inner-product and cosine metrics the
centroids are normalised after every update (spherical k-means).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from hpc.backend import Backend, get_backend, to_host

from . import _kernels as K
from .flat import flat_search

__all__ = ["kmeans"]


@njit(parallel=True, cache=True)
def _min_sq_dist(x: np.ndarray, c: np.ndarray, mind: np.ndarray) -> None:  # pragma: no cover
    """k-means++: lower every point's distance to its nearest chosen centre by centre ``c``."""
    for i in prange(x.shape[0]):
        acc = 0.0
        for j in range(x.shape[1]):
            d = np.float64(x[i, j]) - np.float64(c[j])
            acc += d * d
        if acc < mind[i]:
            mind[i] = acc


SPLIT_EPS = 1.0 / 1024  # relative size of the nudge that separates the two halves of a split


def _split_empty(
    sums: np.ndarray, counts: np.ndarray, scale: float, rng: np.random.Generator
) -> None:
    """Give every empty cluster half of the currently largest one, in place (``counts`` of
    0 are left only where no cluster has two points: the centroid is a copy then).

    The two halves get the big cluster's centroid nudged apart by ``+-SPLIT_EPS * scale`` on
    every axis with random signs, a direction across the centroid: a nudge along the
    centroid (a scaling) would vanish in the normalisation of spherical k-means, leaving two
    equal centroids, one of which assignment leaves empty again at every iteration.
    """
    dim = sums.shape[1]
    for c in np.flatnonzero(counts == 0):
        big = int(np.argmax(counts))
        mean = sums[big] / counts[big]
        if counts[big] < 2:  # nothing to split (fewer distinct points than clusters): a copy
            sums[c] = mean
            continue
        nudge = SPLIT_EPS * scale * rng.choice(np.array([-1.0, 1.0]), size=dim)
        half = counts[big] // 2
        counts[c], counts[big] = half, counts[big] - half
        sums[c] = (mean + nudge) * counts[c]
        sums[big] = (mean - nudge) * counts[big]


def _init(x: np.ndarray, k: int, init: str, rng: np.random.Generator) -> np.ndarray:
    n = x.shape[0]
    if init == "random":
        return x[np.sort(rng.choice(n, size=k, replace=False))].copy()
    chosen = [int(rng.integers(n))]
    mind = np.full(n, np.inf)
    for _ in range(1, k):
        _min_sq_dist(x, x[chosen[-1]], mind)
        total = float(mind.sum())
        if total <= 0:  # fewer distinct points than centroids
            chosen.append(int(rng.integers(n)))
            continue
        cdf = np.cumsum(mind)
        chosen.append(int(min(n - 1, np.searchsorted(cdf, rng.uniform(0, cdf[-1]), "right"))))
    return x[np.array(chosen)].copy()


def kmeans(
    x: Any,
    k: int,
    niter: int = 20,
    init: str = "random",
    seed: int = 0,
    spherical: bool = False,
    max_points_per_centroid: int = 256,
    backend: str | Backend | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Local. Cluster the rows of ``x`` into ``k`` centroids.

    Parameters
    ----------
    x : (n, dim) float32 array
        ``n >= k``.
    k : int
    niter : int
        Lloyd iterations.
    init : {"random", "kmeans++"}
        Random distinct sample points, or D^2 sampling (Arthur and Vassilvitskii).
    seed : int
        Sampling and initialisation are reproducible from it.
    spherical : bool
        Assign by largest inner product and normalise the centroids.
    max_points_per_centroid : int
        Train on a random sample of at most ``k * max_points_per_centroid`` rows.

    Returns
    -------
    centroids : (k, dim) float32 numpy array
    assignment : (m,) int64 numpy array
        The cluster of every training row used (the sample, in sample order).
    """
    be = get_backend(backend)
    x = np.ascontiguousarray(to_host(x), dtype=np.float32)
    n = x.shape[0]
    if init not in ("random", "kmeans++"):
        raise ValueError(f"init={init!r}: expected 'random' or 'kmeans++'")
    if n < k:
        raise ValueError(f"k-means: {n} training vectors for {k} centroids (need n >= k)")
    rng = np.random.default_rng(seed)
    if n > k * max_points_per_centroid:
        x = x[np.sort(rng.choice(n, size=k * max_points_per_centroid, replace=False))]
        n = x.shape[0]
    niter = max(1, niter)
    snapshot, first = _resume(k, x.shape, niter, init, seed, spherical)
    if first is not None:  # a journaled run killed after iteration `it`: continue from there
        it0, centroids = first
    else:
        it0, centroids = 0, _init(x, k, init, rng)
    counter = _progress(niter + 1, it0)
    xp = be.xp
    xd = xp.asarray(x)
    assign = np.zeros(n, dtype=np.int64)
    # the nudge of a split: the root-mean-square coordinate of the data (0 only when all is)
    split_scale = float(np.sqrt(np.mean(np.square(x[: min(n, 4096)], dtype=np.float64))))
    for it in range(it0, niter + 1):
        if spherical:
            norms_c = np.sqrt((centroids.astype(np.float64) ** 2).sum(axis=1))
            centroids = (centroids / np.maximum(norms_c, 1e-30)[:, None]).astype(np.float32)
        cd = xp.asarray(centroids)
        cn = (cd * cd).sum(axis=1)
        _, a = flat_search(
            xd, cd, cn, xp.arange(k, dtype=xp.int64), 1, not spherical, backend=be, exact=False
        )
        assign = to_host(a)[:, 0].astype(np.int64)
        if counter is not None:
            counter.add(1)
        if it == niter:
            break
        sums = np.zeros((k, x.shape[1]), dtype=np.float64)
        counts = np.zeros(k, dtype=np.int64)
        K.kmeans_accumulate(x, assign, sums, counts)
        # the split directions depend on (seed, iteration) only: a resumed run splits alike
        _split_empty(sums, counts, split_scale, np.random.default_rng([abs(seed), it]))
        centroids = (sums / np.maximum(counts, 1)[:, None]).astype(np.float32)
        if snapshot is not None:
            snapshot.save(it + 1, {"centroids": centroids})
    if counter is not None:
        counter.close()
    return centroids, assign


def _resume(
    k: int, shape: tuple[int, ...], niter: int, init: str, seed: int, spherical: bool
) -> tuple[Any, tuple[int, np.ndarray] | None]:
    """The journal's state of this k-means run (inside ``with hpc.journal.Journal(...)``):
    the snapshot to save each iteration to, and ``(iteration, centroids)`` saved by a run
    that was killed (None: start afresh)."""
    from hpc.journal import active_journal

    journal = active_journal()
    if journal is None:
        return None, None
    meta = dict(k=k, n=shape[0], dim=shape[1], niter=niter, init=init, seed=seed)
    snapshot = journal.snapshot("kmeans", {**meta, "spherical": spherical})
    saved = snapshot.load()
    if saved is None:
        return snapshot, None
    step, arrays = saved
    return snapshot, (step, np.array(arrays["centroids"], dtype=np.float32))


def _progress(total: int, done: int) -> Any:
    """A counter of iterations for the progress bar of an enclosing phase (or None)."""
    from hpc.progress import active_phase

    phase = active_phase()
    if phase is None:
        return None
    counter = phase.counter(total)
    counter.resumed(done)
    return counter
