"""Exact k-NN: blocked GEMM (BLAS sgemm / cuBLAS) with a fused top-k selection.

Queries are taken in blocks of ``query_block`` rows and the database in blocks of
``db_block`` rows; each pair of blocks is one matrix product ``Q_b @ X_b.T`` whose scores are
folded at once into per-query selections (numba kernels on the CPU, numba.cuda kernels on
the GPU), so no ``nq x n`` distance matrix is ever held. The selected rows' distances are
then recomputed exactly (float64 accumulation), which keeps them accurate to float32
rounding even where ``||q||^2 + ||x||^2 - 2 q.x`` cancels, and order the results.

``FlatIndex.search`` on the CPU selects by threshold (:func:`_cpu_top_k`): it keeps every
row whose GEMM score is within the rounding bound of the k-th best, so one pass settles the
exact top k whatever the number of near-ties. On the GPU ``k + SPARE`` rows are kept by heap
and the queries they do not settle take an exhaustive float64 pass.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from hpc.backend import Backend, array_module, to_host
from hpc.dispatch import DeviceTable

from . import _kernels as K
from ._base import VectorIndex, check_k

__all__ = ["FlatIndex", "flat_search"]

QUERY_BLOCK = 16384  # queries per pass (heaps and results of one pass are held)
DB_BLOCK = 1024  # database rows per GEMM
TILE = 512  # queries per GEMM on the CPU (one task of a numba thread)
GPU_QUERY_BLOCK = 8192  # on the GPU: one (db_block x query_block) float32 score block, 1 GiB
GPU_DB_BLOCK = 32768

# the search's implementation and block sizes on each device (hpc.dispatch)
OPS = DeviceTable("vector.flat")
OPS.constants("cpu", query_block=QUERY_BLOCK, db_block=DB_BLOCK, half_storage=False)
OPS.constants("gpu", query_block=GPU_QUERY_BLOCK, db_block=GPU_DB_BLOCK, half_storage=True)
def _stable_argsort(xp: Any, a: Any) -> Any:
    try:
        return xp.argsort(a, axis=1, kind="stable")
    except TypeError:  # CuPy sorts stably and may not take ``kind``
        return xp.argsort(a, axis=1)


SPARE = 8  # extra candidates selected by FlatIndex.search before the exact re-sort


def flat_search(
    queries: Any,
    vectors: Any,
    norms: Any,
    ids: Any,
    k: int,
    l2: bool,
    mask: Any = None,
    backend: Backend | None = None,
    query_block: int | None = None,
    db_block: int | None = None,
    exact: bool = True,
) -> tuple[Any, Any]:
    """Local. The ``k`` best rows of ``vectors`` for every query.

    Parameters
    ----------
    queries : (nq, dim) float32 array
        On the backend's device.
    vectors : (n, dim) float32 (or float16 on the GPU) array
    norms : (n,) float32 array
        ``||x||^2`` of the rows (used for L2 only).
    ids : (n,) int64 array
        The id of every row; ties of score go to the smaller id.
    k : int
    l2 : bool
        Squared L2 distance (ascending) when True, inner product (descending) otherwise.
    mask : (n,) uint8 array, optional
        Only rows with a non-zero entry are eligible.
    exact : bool
        Recompute the selected rows' distances exactly (else: the GEMM's scores, and
        positions instead of ids are returned).

    Returns
    -------
    distances : (nq, k) float32
    ids : (nq, k) int64
        ``-1`` where fewer than ``k`` rows are eligible.
    """
    ops = OPS.on(backend if backend is not None else "cpu")
    return ops.search(
        queries, vectors, norms, ids, k, l2, mask,
        query_block or ops.query_block, db_block or ops.db_block, exact,
    )  # fmt: skip


@OPS.cpu("search")
def _cpu_flat_search(
    queries: np.ndarray,
    vectors: np.ndarray,
    norms: np.ndarray,
    ids: np.ndarray,
    k: int,
    l2: bool,
    mask: np.ndarray | None,
    query_block: int,
    db_block: int,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The CPU path: numba heaps folded from BLAS blocks, one task per query tile."""
    nq, n = queries.shape[0], vectors.shape[0]
    out_d = np.empty((nq, k), dtype=np.float32)
    out_i = np.empty((nq, k), dtype=np.int64)
    use_mask = mask is not None
    m = mask if use_mask else np.zeros(1, dtype=np.uint8)
    tile = min(TILE, query_block)
    threads = numba.get_num_threads()
    with K.blas_single_threaded():
        for q0 in range(0, nq, query_block):
            q1 = min(nq, q0 + query_block)
            qb = queries[q0:q1]
            ntiles = -(-(q1 - q0) // tile)
            # few queries: split the database too, so every thread has work
            nparts = max(1, min(threads // ntiles, n // max(db_block, 1)))
            hd, hp = K.init_heaps(nparts, q1 - q0, k)
            qs = np.ascontiguousarray(qb * np.float32(-2.0 if l2 else -1.0))
            # one task (a tile of queries, one part): the calling thread does it alone
            with K.serial_when_small(np.inf, ntiles * nparts):
                K.flat_select(
                    qs, vectors, norms, ids, m, use_mask, l2, tile, db_block, nparts, hd, hp
                )
            # the heaps' work is O(queries k): each parallel region costs a wake-up of
            # every thread, milliseconds where other processes share the cores
            with K.serial_when_small(float(q1 - q0) * k * max(nparts, qb.shape[1])):
                if nparts > 1:
                    K.merge_parts(hd, hp, ids)
                hd, hp = hd[0], hp[0]
                K.finish_heaps(hd, hp, ids)
                if exact:
                    K.exact_scores(qb, vectors, hp, ids, l2, out_d[q0:q1], out_i[q0:q1])
            if not exact:
                if l2:
                    hd += np.einsum("ij,ij->i", qb, qb)[:, None]
                out_d[q0:q1] = hd if l2 else -hd
                out_i[q0:q1] = hp
    return out_d, out_i


def _gpu_exact(xp: Any, qb: Any, vectors: Any, hp: Any, ids: Any, l2: bool) -> tuple[Any, Any]:
    """Exact float64 distances of the selected rows on the device, stably re-sorted."""
    valid = hp >= 0
    rows = vectors[xp.where(valid, hp, 0)].astype(xp.float64)  # (bq, k, dim)
    q64 = qb.astype(xp.float64)[:, None, :]
    if l2:
        key = ((rows - q64) ** 2).sum(axis=2)
    else:
        key = -(rows * q64).sum(axis=2)
    key = xp.where(valid, key, xp.inf)
    order = _stable_argsort(xp, key)
    key = xp.take_along_axis(key, order, axis=1)
    pos = xp.take_along_axis(hp, order, axis=1)
    out_i = xp.where(pos >= 0, ids[xp.where(pos >= 0, pos, 0)], -1)
    dist = key if l2 else -key
    return dist.astype(xp.float32), out_i.astype(xp.int64)


@OPS.gpu("search")
def _gpu_flat_search(
    queries: Any,
    vectors: Any,
    norms: Any,
    ids: Any,
    k: int,
    l2: bool,
    mask: Any,
    query_block: int,
    db_block: int,
    exact: bool,
) -> tuple[Any, Any]:
    """The GPU path (CuPy arrays; NumPy under the CUDA simulator)."""
    xp = array_module(queries)
    nq, n = queries.shape[0], vectors.shape[0]
    out_d = xp.empty((nq, k), dtype=xp.float32)
    out_i = xp.empty((nq, k), dtype=xp.int64)
    use_mask = mask is not None
    m = mask if use_mask else xp.zeros(1, dtype=xp.uint8)
    threads = 128
    kern = K.gpu_kernels() if k <= K.GPU_KMAX else None
    db_block = max(db_block, 1)
    for q0 in range(0, nq, query_block):
        q1 = min(nq, q0 + query_block)
        bq = q1 - q0
        qb = queries[q0:q1]
        hd = xp.full((bq, k), xp.inf, dtype=xp.float32)
        hp = xp.full((bq, k), -1, dtype=xp.int64)
        for x0 in range(0, n, db_block):
            x1 = min(n, x0 + db_block)
            xb = vectors[x0:x1]
            if xb.dtype != xp.float32:
                xb = xb.astype(xp.float32)
            st = xb @ qb.T  # (nb, bq): consecutive queries are adjacent in memory
            if kern is not None:
                nb = x1 - x0
                nseg = max(1, min(64, nb // max(4 * k, 256)))
                seg = math.ceil(nb / nseg)
                cand_d = xp.empty((bq, nseg, k), dtype=xp.float32)
                cand_p = xp.empty((bq, nseg, k), dtype=xp.int64)
                grid = ((bq + threads - 1) // threads, nseg)
                kern["select"][grid, threads](
                    st, norms, x0, ids, m, use_mask, l2, seg, cand_d, cand_p
                )
                kern["merge"][(bq + threads - 1) // threads, threads](hd, hp, cand_d, cand_p, ids)
            else:  # k beyond the heap kernels: sort-based selection
                sc = (norms[x0:x1][:, None] - 2.0 * st) if l2 else -st
                sc = sc.T.astype(xp.float32)
                pos = xp.broadcast_to(xp.arange(x0, x1, dtype=xp.int64), sc.shape)
                if use_mask:
                    sc = xp.where(m[x0:x1][None, :] != 0, sc, xp.inf)
                alld = xp.concatenate([hd, sc], axis=1)
                allp = xp.concatenate([hp, pos], axis=1)
                order = _stable_argsort(xp, alld)[:, :k]
                hd = xp.take_along_axis(alld, order, axis=1)
                hp = xp.take_along_axis(allp, order, axis=1)
                hp = xp.where(xp.isinf(hd), -1, hp)
        if kern is not None:
            kern["sort"][(bq + threads - 1) // threads, threads](hd, hp, ids)
        if exact:
            out_d[q0:q1], out_i[q0:q1] = _gpu_exact(xp, qb, vectors, hp, ids, l2)
        else:
            if l2:
                hd = hd + (qb * qb).sum(axis=1)[:, None]
            out_d[q0:q1] = hd if l2 else -hd
            out_i[q0:q1] = hp
    return out_d, out_i


def _gpu_exact_rows(index: FlatIndex, q: np.ndarray, qd: Any, pos: Any) -> tuple[Any, Any]:
    """Exact distances and ids of the selected rows on the device, in query blocks."""
    xp = array_module(qd)
    d, i = xp.empty(pos.shape, xp.float32), xp.empty(pos.shape, xp.int64)
    for q0 in range(0, q.shape[0], GPU_QUERY_BLOCK):
        q1 = min(q.shape[0], q0 + GPU_QUERY_BLOCK)
        d[q0:q1], i[q0:q1] = _gpu_exact(
            xp, qd[q0:q1], index._vectors, pos[q0:q1], index._dev_ids, index._l2
        )
    return to_host(d), to_host(i)


COLLECT_ENTRIES = 1 << 21  # candidate buffer entries of one pass of the CPU search
COLLECT_CAP = 4096  # candidates a query's buffer holds when there is room (few queries)


@OPS.cpu("top_k")
def _cpu_top_k(
    index: FlatIndex, q: np.ndarray, k: int, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``k`` on the CPU in one pass over the database: every row whose GEMM
    score may place it in the exact top k is collected (:func:`~._kernels.flat_collect`),
    then ordered by exact distance (float64 sums, ties to the smaller id)."""
    nq = q.shape[0]
    qnorm, xmax = index._score_scale(q)
    slack = index._slack(qnorm, xmax)
    least = k + max(32, k // 2)  # a cut per at least least - k candidates
    query_block = min(index.query_block or QUERY_BLOCK, max(1, COLLECT_ENTRIES // least))
    out_d = np.empty((nq, k), dtype=np.float32)
    out_i = np.empty((nq, k), dtype=np.int64)
    for q0 in range(0, nq, query_block):
        q1 = min(nq, q0 + query_block)
        out_d[q0:q1], out_i[q0:q1] = _collect_top_k(index, q[q0:q1], k, slack[q0:q1], mask, 0)
    return out_d, out_i


def _collect_top_k(
    index: FlatIndex, q: np.ndarray, k: int, slack: np.ndarray, mask: np.ndarray | None,
    cap: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """One pass of :func:`_cpu_top_k` over a block of queries with buffers of ``cap``
    candidates (0: as many as :data:`COLLECT_ENTRIES` allows, at least ``k + 32``, at most
    :data:`COLLECT_CAP` unless ``k`` needs more); queries whose buffer overflowed are
    repeated with four times the room (a buffer larger than the database cannot
    overflow)."""
    bq, n = q.shape[0], index.ntotal
    vectors, ids, l2 = index._vectors, index._ids, index._l2
    db_block = index.db_block or DB_BLOCK
    tile = min(TILE, bq)
    threads = numba.get_num_threads()
    # few queries: split the database too, so every thread has work
    nparts = max(1, min(threads // -(-bq // tile), n // max(db_block, 1)))
    least = k + max(32, k // 2)
    if not cap:
        cap = max(least, min(COLLECT_ENTRIES // (bq * nparts), max(COLLECT_CAP, 2 * k)))
    use_mask = mask is not None
    m = mask if use_mask else np.zeros(1, dtype=np.uint8)
    cd = np.empty((nparts, bq, cap), dtype=np.float32)
    cp = np.empty((nparts, bq, cap), dtype=np.int64)
    count = np.zeros((nparts, bq), dtype=np.int64)
    qs = np.ascontiguousarray(q * np.float32(-2.0 if l2 else -1.0))
    with K.blas_single_threaded():
        K.flat_collect(
            qs, vectors, index._norms, m, use_mask, l2, tile, db_block, k, slack, cd, cp, count
        )
    # O(candidates) work after the pass: on the calling thread unless there is much of it
    # (a parallel region wakes every thread: milliseconds where other processes share the
    # cores)
    pos = np.empty((bq, nparts * cap), dtype=np.int64)
    got = np.empty(bq, dtype=np.int64)
    with K.serial_when_small(8.0 * np.maximum(count, 0).sum()):
        K.collect_merge(cd, cp, count, k, slack, pos, got)
    width = max(k, int(got.max()))
    pos = np.ascontiguousarray(pos[:, :width])
    d = np.empty((bq, width), dtype=np.float32)
    i = np.empty((bq, width), dtype=np.int64)
    with K.serial_when_small(float(np.maximum(got, 0).sum()) * index.dim):
        K.exact_scores(q, vectors, pos, ids, l2, d, i)
    d, i = d[:, :k], i[:, :k]
    redo = np.flatnonzero(got < 0)
    if redo.size:
        d[redo], i[redo] = _collect_top_k(index, q[redo], k, slack[redo], mask, 4 * cap)
    return d, i


@OPS.gpu("top_k")
def _gpu_top_k(
    index: FlatIndex, q: np.ndarray, k: int, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``k`` on the GPU: ``k + SPARE`` rows selected by GEMM score, their
    exact distances, and an exhaustive pass for the queries the spare rows do not settle."""
    xp = index.backend.xp
    kk = k + SPARE  # 1. select k + SPARE rows by their GEMM scores
    qd = xp.asarray(q)
    approx, pos = flat_search(
        qd, index._vectors, index._norms, index._dev_ids, kk, index._l2,
        None if mask is None else xp.asarray(mask), index.backend, index.query_block,
        index.db_block, exact=False,
    )  # fmt: skip
    # 2. exact distances of the selected rows, ordered by (distance, id)
    d, i = _gpu_exact_rows(index, q, qd, pos)
    # 3. where a row left out by step 1 could still tie or beat the k-th exact distance
    #    (its GEMM score was within the rounding bound), decide exhaustively
    approx, pos = to_host(approx), to_host(pos)
    redo = index._uncertain(q, approx[:, -1], pos[:, -1], d[:, k - 1])
    if redo.size:
        d[redo, :k], i[redo, :k] = index._exhaustive(q[redo], k, d[redo, k - 1], mask)
    return np.ascontiguousarray(d[:, :k]), np.ascontiguousarray(i[:, :k])


class FlatIndex(VectorIndex):
    """Exact search over every stored vector.

    Parameters
    ----------
    dim : int
        Vector dimension.
    metric : {"l2", "ip", "cosine"}
        Squared Euclidean distance, inner product, or cosine similarity.
    backend : {"auto", "cpu", "gpu"}, Backend or None
        Where the vectors live and the search runs (default: ``HPC_BACKEND``).
    storage : {"float32", "float16"}
        Storage type of the vectors; ``float16`` halves GPU memory (GPU backend only; scores
        are accumulated in float32 and the returned distances recomputed from the stored
        values).
    query_block, db_block : int, optional
        Queries per pass and database rows per GEMM (defaults: 16384 and 1024 on the CPU,
        8192 and 32768 on the GPU).

    Examples
    --------
    >>> index = FlatIndex(128)
    >>> index.add(xb)
    >>> distances, ids = index.search(xq, k=10)
    """

    def __init__(
        self,
        dim: int,
        metric: str = "l2",
        backend: str | Backend | None = None,
        storage: str = "float32",
        query_block: int | None = None,
        db_block: int | None = None,
    ):
        super().__init__(dim, metric, backend)
        if storage not in ("float32", "float16"):
            raise ValueError(f"storage={storage!r}: expected 'float32' or 'float16'")
        if storage == "float16" and not OPS.on(self.backend).half_storage:
            raise ValueError("storage='float16' is for the GPU backend; the CPU stores float32")
        for name, v in (("query_block", query_block), ("db_block", db_block)):
            if v is not None and int(v) < 1:
                raise ValueError(f"{name}={v}: must be >= 1")
        self.storage = storage
        self.query_block, self.db_block = query_block, db_block
        xp = self.backend.xp
        self._vectors = xp.empty((0, self.dim), dtype=np.dtype(storage))
        self._norms = xp.empty(0, dtype=np.float32)
        self._dev_ids = xp.asarray(self._ids)

    def _params(self) -> dict[str, Any]:
        return {"storage": self.storage}

    @property
    def vectors(self) -> np.ndarray:
        """The stored vectors as float32 on the host (normalised under ``cosine``)."""
        return to_host(self._vectors).astype(np.float32)

    def train(self, x: Any = None) -> None:
        """Local. Nothing to learn for exact search (accepted for a uniform API)."""
        if x is not None:
            self._check_vectors(x, "training vectors")

    def add(self, x: Any, ids: Any = None) -> np.ndarray:
        """Local. Append vectors.

        Parameters
        ----------
        x : (n, dim) array
        ids : (n,) int array, optional
            Non-negative, unique, not yet in the index; default ``max id + 1 ..``.

        Returns
        -------
        numpy.ndarray
            The ids of the added vectors.
        """
        a = self._check_vectors(x)
        new_ids = self._check_new_ids(ids, a.shape[0])
        if a.shape[0] == 0:
            return new_ids
        xp = self.backend.xp
        dev = xp.asarray(a).astype(self._vectors.dtype)
        stored = dev.astype(xp.float32)
        self._vectors = xp.concatenate([self._vectors, dev])
        self._norms = xp.concatenate([self._norms, (stored * stored).sum(axis=1)])
        self._ids = np.concatenate([self._ids, new_ids])
        self._dev_ids = xp.asarray(self._ids)
        return new_ids

    def _keep_rows(self, keep: np.ndarray) -> None:
        xp = self.backend.xp
        k = xp.asarray(keep)
        self._vectors = xp.ascontiguousarray(self._vectors[k])
        self._norms = xp.ascontiguousarray(self._norms[k])
        self._ids = self._ids[keep]
        self._dev_ids = xp.asarray(self._ids)

    def search(
        self, queries: Any, k: int, filter: Any = None, **params: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """Local. The ``k`` nearest stored vectors of every query.

        Parameters
        ----------
        queries : (nq, dim) array
        k : int
            ``k >= 1``; larger than ``ntotal`` gives ``-1`` ids in the tail.
        filter : array of int, optional
            Allow-list: only vectors with these ids are returned.

        Returns
        -------
        distances : (nq, k) float32 numpy array
        ids : (nq, k) int64 numpy array

        Raises
        ------
        ValueError
            On a wrong dimension, NaN/inf queries, ``k <= 0`` or an unknown parameter.
        """
        if params:
            raise ValueError(f"FlatIndex.search: unknown parameter(s) {sorted(params)}")
        k = check_k(k)
        q = self._check_vectors(queries, "queries")
        with K.serial_when_small(float(q.shape[0]) * self.ntotal * self.dim):
            return self._search(q, k, filter)

    def _search(self, q: np.ndarray, k: int, filter: Any) -> tuple[np.ndarray, np.ndarray]:
        mask = self._filter_mask(filter)
        return OPS.on(self.backend).top_k(self, q, k, mask)

    def _slack(self, qnorm: np.ndarray, xmax: float) -> np.ndarray:
        """Local. Per query, how far above the k-th best GEMM score a row of the exact top
        k may score by GEMM: twice the GEMM rounding bound (see :meth:`_uncertain`) plus the
        float32 rounding of the exact distances that order the results."""
        u = 2.0**-24
        if self._l2:
            eps = 2 * (self.dim + 4) * u * (xmax + qnorm) ** 2
            size = (xmax + qnorm) ** 2 + qnorm**2 + eps
        else:
            eps = 2 * (self.dim + 4) * u * xmax * qnorm
            size = xmax * qnorm + eps
        return np.ascontiguousarray(2 * eps + 8 * u * size, dtype=np.float64)

    def _score_scale(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        """Local. ``(|q|, max |x|)`` in float64: the magnitudes the rounding bounds scale with."""
        qnorm = np.sqrt(np.einsum("ij,ij->i", q, q, dtype=np.float64))
        top = float(to_host(self._norms.max())) if self.ntotal else 0.0
        return qnorm, math.sqrt(max(top, 0.0) * (1 + 1e-5))

    def _uncertain(
        self, q: np.ndarray, worst: np.ndarray, worst_pos: np.ndarray, kth: np.ndarray
    ) -> np.ndarray:
        """Local. The queries whose top-k the GEMM selection does not settle.

        ``worst`` is the GEMM score (a distance, or an inner product) of the last of the
        ``k + SPARE`` selected rows, ``kth`` the exact k-th distance. Every row not selected
        scored no better than ``worst`` by GEMM, and a float32 GEMM score is within
        ``2 (dim + 4) u (|x| + |q|)^2`` (L2; ``... u |x| |q|`` for inner products, ``u =
        2**-24``) of the exact value. When ``worst`` minus that bound is still strictly worse
        than ``kth`` (with float32 rounding of the distances), no left-out row can tie or beat
        the k-th result. A heap that is not full selected every eligible row.
        """
        full = worst_pos >= 0
        if not full.any():
            return np.empty(0, dtype=np.int64)
        qnorm, xmax = self._score_scale(q)
        u = 2.0**-24
        if self._l2:
            w, t = worst.astype(np.float64), kth.astype(np.float64)
            eps = 2 * (self.dim + 4) * u * (xmax + qnorm) ** 2
        else:  # smaller is better: minus the inner products
            w, t = -worst.astype(np.float64), -kth.astype(np.float64)
            eps = 2 * (self.dim + 4) * u * xmax * qnorm
        margin = eps + 4 * u * (np.abs(w) + np.abs(t) + qnorm**2)
        with np.errstate(invalid="ignore"):
            settled = w - margin > t
        return np.flatnonzero(full & ~settled)

    def _exhaustive(
        self, q: np.ndarray, k: int, kth: np.ndarray, mask: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Local. The exact top-k of a few queries: every eligible row whose float64 score may
        reach the k-th exact distance ``kth`` found by the first pass (a bound the true
        top-k lies within) is a candidate; the candidates' exact distances decide."""
        x = to_host(self._vectors)
        if x.dtype != np.float32:
            x = x.astype(np.float32)
        qnorm, xmax = self._score_scale(q)
        q64 = q.astype(np.float64)
        u = 2.0**-53
        if self._l2:
            t = kth.astype(np.float64)
            slack = 8 * (self.dim + 4) * u * (xmax + qnorm) ** 2
        else:
            t = -kth.astype(np.float64)
            slack = 8 * (self.dim + 4) * u * xmax * qnorm
        limit = t + np.abs(t) * 2.0**-21 + slack
        found: list[list[np.ndarray]] = [[] for _ in range(q.shape[0])]
        step = 8192
        for x0 in range(0, x.shape[0], step):
            xb = x[x0 : x0 + step].astype(np.float64)
            s = xb @ q64.T  # (rows, queries)
            if self._l2:
                s = np.einsum("ij,ij->i", xb, xb)[:, None] + qnorm[None, :] ** 2 - 2.0 * s
            else:
                s = -s
            hit = s <= limit[None, :]
            if mask is not None:
                hit &= mask[x0 : x0 + step, None] != 0
            rows, cols = np.nonzero(hit)
            for c in np.unique(cols):
                found[c].append(rows[cols == c] + x0)
        out_d = np.empty((q.shape[0], k), dtype=np.float32)
        out_i = np.empty((q.shape[0], k), dtype=np.int64)
        for j, parts in enumerate(found):
            cand = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
            width = max(k, cand.size)
            hp = np.full((1, width), -1, dtype=np.int64)
            hp[0, : cand.size] = cand
            d = np.empty((1, width), dtype=np.float32)
            i = np.empty((1, width), dtype=np.int64)
            K.exact_scores(q[j : j + 1], x, hp, self._ids, self._l2, d, i)
            out_d[j], out_i[j] = d[0, :k], i[0, :k]
        return out_d, out_i

    def _state(self) -> dict[str, np.ndarray]:
        return {"ids": self._ids, "vectors": to_host(self._vectors)}

    def _set_state(self, state: dict[str, np.ndarray]) -> None:
        self._ids = np.empty(0, dtype=np.int64)
        xp = self.backend.xp
        self._vectors = xp.empty((0, self.dim), dtype=np.dtype(self.storage))
        self._norms = xp.empty(0, dtype=np.float32)
        vectors = np.asarray(state["vectors"], dtype=np.float32)
        if vectors.shape[0]:
            metric, self.metric = self.metric, "l2"  # stored vectors are already normalised
            try:
                self.add(vectors, state["ids"])
            finally:
                self.metric = metric
        self._dev_ids = xp.asarray(self._ids)
