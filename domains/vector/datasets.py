"""Reproducible synthetic vector sets and the ann-benchmarks HDF5 layout.

Synthetic sets are Gaussian mixtures: ``clusters`` centres drawn in an ``intrinsic_dim``-
dimensional space, points scattered around them, then mapped into ``dim`` dimensions by a
fixed random orthonormal map (plus a little isotropic noise). Every row is a function of
``(seed, row number)`` only (counter-based Philox streams, :class:`hpc.RandomStreams`), so any
block of rows can be made on its own: each rank of a job makes just its shard.

:func:`skewed_rows` makes sets shaped like real embeddings (word vectors, for instance):
many clusters of Zipf-distributed sizes, the large ones dense, in a low-dimensional subspace,
optionally normalised for cosine. Their inverted lists are very uneven, which the uniform
mixture does not show.

The ann-benchmarks layout is one HDF5 file with the datasets ``train`` (n x dim float32),
``test`` (nq x dim), ``neighbors`` (nq x k int) and ``distances`` (nq x k float) and the
attribute ``distance`` (``"euclidean"``: true, not squared, distances; ``"angular"``: cosine
distance ``1 - cos``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from hpc.rng import RandomStreams

__all__ = [
    "Dataset",
    "gaussian_mixture",
    "mixture_rows",
    "query_rows",
    "skewed_rows",
    "skewed_query_rows",
    "skewed_mixture",
    "ground_truth",
    "recall_at_k",
    "write_ann_hdf5",
    "read_ann_hdf5",
]

_CENTRES, _POINTS, _ASSIGN, _MAP, _NOISE, _SCALE = range(6)
_QUERY_OFFSET = 1 << 48  # query rows use their own range of the same streams


@dataclass
class Dataset:
    """A vector set with queries and (optionally) exact ground truth.

    Attributes
    ----------
    train : (n, dim) float32
    test : (nq, dim) float32
    neighbors : (nq, k) int64 or None
    distances : (nq, k) float32 or None
        Squared L2 distances (``metric="l2"``) or similarities, as the indexes return them.
    metric : str
    """

    train: np.ndarray
    test: np.ndarray
    neighbors: np.ndarray | None = None
    distances: np.ndarray | None = None
    metric: str = "l2"


def _mixture_model(
    dim: int, clusters: int, intrinsic_dim: int, seed: int, spread: float
) -> tuple[np.ndarray, np.ndarray]:
    centres = RandomStreams(seed, _CENTRES).normals(0, clusters, intrinsic_dim, "cpu") * spread
    g = RandomStreams(seed, _MAP).normals(0, dim, intrinsic_dim, "cpu")
    basis, _ = np.linalg.qr(g)  # (dim, intrinsic_dim), orthonormal columns
    return centres, basis


def mixture_rows(
    first: int,
    count: int,
    dim: int = 128,
    clusters: int = 100,
    intrinsic_dim: int | None = None,
    seed: int = 0,
    spread: float = 4.0,
    noise: float = 0.05,
) -> np.ndarray:
    """Local. Rows ``first .. first + count - 1`` of a Gaussian-mixture set, a float32 NumPy
    array (made on the CPU on either backend).

    Parameters
    ----------
    first, count : int
        Row range (any range can be made on its own, with the same values).
    dim : int
        Ambient dimension.
    clusters : int
        Mixture components (uniform weights).
    intrinsic_dim : int, optional
        Dimension of the subspace holding the structure (default ``dim``).
    seed : int
    spread : float
        Standard deviation of the centres relative to the within-cluster one (1).
    noise : float
        Standard deviation of the isotropic ambient noise.
    """
    intrinsic_dim = dim if intrinsic_dim is None else int(intrinsic_dim)
    if not 1 <= intrinsic_dim <= dim:
        raise ValueError(f"intrinsic_dim={intrinsic_dim}: must be in [1, dim={dim}]")
    if clusters < 1:
        raise ValueError(f"clusters={clusters}: must be >= 1")
    centres, basis = _mixture_model(dim, clusters, intrinsic_dim, seed, spread)
    u = RandomStreams(seed, _ASSIGN).uniforms(first, count, 1, "cpu")[:, 0]
    which = np.minimum((u * clusters).astype(np.int64), clusters - 1)
    local = centres[which] + RandomStreams(seed, _POINTS).normals(
        first, count, intrinsic_dim, "cpu"
    )
    out = local @ basis.T
    if noise:
        out += noise * RandomStreams(seed, _NOISE).normals(first, count, dim, "cpu")
    return out.astype(np.float32)


def query_rows(first: int, count: int, **kw: Any) -> np.ndarray:
    """Local. Query rows of the mixture of :func:`mixture_rows` (same keywords): drawn from
    the same distribution, from a range of row numbers no base set reaches."""
    return mixture_rows(_QUERY_OFFSET + int(first), count, **kw)


def gaussian_mixture(
    n: int,
    nq: int = 100,
    dim: int = 128,
    clusters: int = 100,
    intrinsic_dim: int | None = None,
    seed: int = 0,
    k: int | None = None,
    metric: str = "l2",
    **kw: Any,
) -> Dataset:
    """Local. ``n`` base vectors and ``nq`` queries from the same mixture; with ``k``, exact
    ground truth by :class:`~hpc.domains.vector.FlatIndex`.

    Examples
    --------
    >>> ds = gaussian_mixture(10_000, nq=100, dim=64, clusters=50, intrinsic_dim=16, k=10)
    >>> ds.train.shape, ds.neighbors.shape
    ((10000, 64), (100, 10))
    """
    args = dict(dim=dim, clusters=clusters, intrinsic_dim=intrinsic_dim, seed=seed, **kw)
    train = mixture_rows(0, n, **args)
    test = query_rows(0, nq, **args)
    ds = Dataset(train, test, metric=metric)
    if k:
        ds.distances, ds.neighbors = ground_truth(train, test, k, metric)
    return ds


def _skewed_model(
    dim: int, clusters: int, intrinsic_dim: int, zipf: float, density: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative cluster weights, centres (intrinsic space), within-cluster scales and the
    orthonormal map of :func:`skewed_rows`."""
    rank = np.arange(1, clusters + 1, dtype=np.float64)
    weights = rank**-zipf
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    centres = RandomStreams(seed, _CENTRES).normals(0, clusters, intrinsic_dim, "cpu")
    # a large cluster is a dense one: scale ~ weight**(-density / intrinsic_dim), so its
    # density (points per unit volume) grows as weight**density ...
    scales = (weights / weights[0]) ** (-density / intrinsic_dim)
    # ... times a log-normal factor, so clusters of one size differ too
    scales *= np.exp(0.25 * RandomStreams(seed, _SCALE).normals(0, clusters, 1, "cpu")[:, 0])
    scales *= 0.5 / np.sqrt(np.mean(scales**2))  # mean within-cluster sd 0.5 per axis
    g = RandomStreams(seed, _MAP).normals(0, dim, intrinsic_dim, "cpu")
    basis, _ = np.linalg.qr(g)
    return cdf, centres, scales, basis


def skewed_rows(
    first: int,
    count: int,
    dim: int = 50,
    clusters: int = 2000,
    intrinsic_dim: int | None = None,
    zipf: float = 1.0,
    density: float = 24.0,
    noise: float = 0.005,
    normalize: bool = True,
    seed: int = 0,
) -> np.ndarray:
    """Local. Rows ``first .. first + count - 1`` of a skewed, clustered set shaped like
    real embeddings (word vectors), a float32 NumPy array.

    Cluster ``c`` (``c = 1 .. clusters``) draws a fraction ``c**-zipf / H`` of the rows (a
    Zipf law: a few huge clusters, a long tail of small ones). Its centre is a standard
    normal point of an ``intrinsic_dim``-dimensional space; its points are normal around it
    with a scale that shrinks with the cluster's weight (``weight**(-density /
    intrinsic_dim)``, times a log-normal factor), so the big clusters are also the dense
    ones. k-means, which spends centroids on squared error rather than on points, then
    leaves some inverted lists tens of times longer than the mean: the unevenness IVF
    indexes meet on real embeddings and not on uniform mixtures. The intrinsic space is
    mapped into ``dim`` dimensions by a fixed random orthonormal map, isotropic noise is
    added, and with ``normalize`` every row is scaled to unit length (for ``cosine``).

    Like :func:`mixture_rows`, every row depends on ``(seed, row number)`` only.

    Parameters
    ----------
    first, count : int
        Row range.
    dim : int
        Ambient dimension.
    clusters : int
        Number of clusters.
    intrinsic_dim : int, optional
        Dimension of the subspace holding the structure (default ``max(2, dim // 3)``;
        word vectors of dimension 50 have an intrinsic dimension of roughly 10 to 20).
    zipf : float
        Exponent of the cluster-size law (0: equal sizes; 1: Zipf).
    density : float
        How much denser the big clusters are (0: all of one scale).
    noise : float
        Standard deviation of the isotropic ambient noise (per axis, before normalising).
    normalize : bool
        Scale every row to unit L2 norm.
    seed : int

    Examples
    --------
    >>> x = skewed_rows(0, 400_000, dim=50)              # unit rows, for metric="cosine"
    >>> q = skewed_query_rows(0, 10_000, dim=50)
    """
    intrinsic_dim = max(2, dim // 3) if intrinsic_dim is None else int(intrinsic_dim)
    intrinsic_dim = min(intrinsic_dim, dim)
    if not 1 <= intrinsic_dim <= dim:
        raise ValueError(f"intrinsic_dim={intrinsic_dim}: must be in [1, dim={dim}]")
    if clusters < 1:
        raise ValueError(f"clusters={clusters}: must be >= 1")
    if zipf < 0 or density < 0:
        raise ValueError(f"zipf={zipf}, density={density}: must be >= 0")
    cdf, centres, scales, basis = _skewed_model(dim, clusters, intrinsic_dim, zipf, density, seed)
    u = RandomStreams(seed, _ASSIGN).uniforms(first, count, 1, "cpu")[:, 0]
    which = np.minimum(np.searchsorted(cdf, u, side="right"), clusters - 1)
    z = RandomStreams(seed, _POINTS).normals(first, count, intrinsic_dim, "cpu")
    out = (centres[which] + scales[which, None] * z) @ basis.T
    if noise:
        out += noise * RandomStreams(seed, _NOISE).normals(first, count, dim, "cpu")
    if normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-30)
    return out.astype(np.float32)


def skewed_query_rows(first: int, count: int, **kw: Any) -> np.ndarray:
    """Local. Query rows for :func:`skewed_rows` (same keywords): the same distribution (so
    queries, like the base, fall mostly in the big clusters), row numbers no base reaches."""
    return skewed_rows(_QUERY_OFFSET + int(first), count, **kw)


def skewed_mixture(
    n: int,
    nq: int = 100,
    dim: int = 50,
    k: int | None = None,
    metric: str = "cosine",
    **kw: Any,
) -> Dataset:
    """Local. ``n`` base rows and ``nq`` queries of :func:`skewed_rows` (keywords passed
    on), with exact ground truth when ``k`` is given.

    Examples
    --------
    >>> ds = skewed_mixture(20_000, nq=100, dim=50, clusters=200, k=10)
    >>> ds.metric
    'cosine'
    """
    kw = {"normalize": metric == "cosine", **kw}
    train = skewed_rows(0, n, dim=dim, **kw)
    test = skewed_query_rows(0, nq, dim=dim, **kw)
    ds = Dataset(train, test, metric=metric)
    if k:
        ds.distances, ds.neighbors = ground_truth(train, test, k, metric)
    return ds


def ground_truth(
    train: np.ndarray, test: np.ndarray, k: int, metric: str = "l2", backend: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Local. Exact ``(distances, neighbors)`` of ``test`` in ``train`` (FlatIndex)."""
    from .flat import FlatIndex

    index = FlatIndex(train.shape[1], metric, backend=backend)
    index.add(train)
    return index.search(test, k)


def recall_at_k(found: np.ndarray, truth: np.ndarray, k: int | None = None) -> float:
    """Local. Mean fraction of the true ``k`` nearest ids found among the first ``k``
    returned (k defaults to the width of ``found``)."""
    k = found.shape[1] if k is None else int(k)
    f = np.asarray(found)[:, :k]
    t = np.asarray(truth)[:, :k]
    hits = (f[:, :, None] == t[:, None, :]) & (t[:, None, :] >= 0)
    return float(hits.any(axis=1).sum() / max(t.size, 1))


def write_ann_hdf5(path: str | os.PathLike[str], ds: Dataset) -> None:
    """Local. Write ``ds`` in the ann-benchmarks layout (distances converted to its
    convention: Euclidean, or ``1 - cos`` for ``angular``)."""
    from hpc.io import open_file

    from hpc.comm import self_comm

    if ds.metric not in ("l2", "cosine"):
        raise ValueError(f"metric={ds.metric!r}: the ann-benchmarks layout has euclidean/angular")
    with open_file(path, "w", comm=self_comm()) as f:
        f.attrs["distance"] = "euclidean" if ds.metric == "l2" else "angular"
        f.attrs["dimension"] = ds.train.shape[1]
        f.attrs["point_type"] = "float"
        f.create_dataset("train", data=np.asarray(ds.train, dtype=np.float32))
        f.create_dataset("test", data=np.asarray(ds.test, dtype=np.float32))
        if ds.neighbors is not None and ds.distances is not None:
            d = np.asarray(ds.distances, dtype=np.float64)
            d = np.sqrt(np.maximum(d, 0)) if ds.metric == "l2" else 1.0 - d
            f.create_dataset("neighbors", data=np.asarray(ds.neighbors, dtype=np.int32))
            f.create_dataset("distances", data=d.astype(np.float32))


def read_ann_hdf5(path: str | os.PathLike[str], rows: slice | None = None) -> Dataset:
    """Local. Read an ann-benchmarks file (``rows``: a slice of ``train`` only, e.g. a rank's
    shard); distances come back in this library's convention (squared L2, or cosine
    similarity for ``angular``)."""
    from hpc.io import LayoutMismatchError, open_file

    from hpc.comm import self_comm

    with open_file(path, "r", comm=self_comm()) as f:
        missing = [n for n in ("train", "test") if n not in f]
        if missing:
            raise LayoutMismatchError(f"not an ann-benchmarks file: no {missing}", path=str(path))
        kind = f.attrs.get("distance", "euclidean")
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind not in ("euclidean", "angular"):
            raise LayoutMismatchError(f"distance {kind!r} is not supported", path=str(path))
        metric = "l2" if kind == "euclidean" else "cosine"
        train = f["train"][rows if rows is not None else slice(None)].astype(np.float32)
        test = f["test"][...].astype(np.float32)
        neighbors = distances = None
        if "neighbors" in f and "distances" in f:
            neighbors = f["neighbors"][...].astype(np.int64)
            d = f["distances"][...].astype(np.float64)
            distances = (d**2 if metric == "l2" else 1.0 - d).astype(np.float32)
    return Dataset(train, test, neighbors, distances, metric)


def ann_train_size(path: str | os.PathLike[str]) -> int:
    """Local. Rows of ``train`` in an ann-benchmarks file."""
    from hpc.io import LayoutMismatchError, open_file

    from hpc.comm import self_comm

    with open_file(path, "r", comm=self_comm()) as f:
        train = f.get("train")
        if not isinstance(train, h5py.Dataset) or train.ndim != 2:
            raise LayoutMismatchError(
                "not an ann-benchmarks file: no 2-D dataset 'train'", path=str(path)
            )
        return int(train.shape[0])
