"""Reproducible synthetic vector sets and the ann-benchmarks HDF5 layout.

Synthetic sets are Gaussian mixtures: ``clusters`` centres drawn in an ``intrinsic_dim``-
dimensional space, points scattered around them, then mapped into ``dim`` dimensions by a
fixed random orthonormal map (plus a little isotropic noise). Every row is a function of
``(seed, row number)`` only (counter-based Philox streams, :class:`hpc.RandomStreams`), so any
block of rows can be made on its own: each rank of a job makes just its shard.

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
    "ground_truth",
    "recall_at_k",
    "write_ann_hdf5",
    "read_ann_hdf5",
]

_CENTRES, _POINTS, _ASSIGN, _MAP, _NOISE = range(5)
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
