"""An index sharded over MPI ranks: every rank holds a shard, queries go to all, the per-rank
top-k lists are merged into the global top-k.

Every data path is buffer-based (upper-case mpi4py calls): training samples are gathered with
``Gatherv``, trained state and queries broadcast with ``Bcast``, and the per-rank results
merged up a binomial tree of ``Send``/``Recv`` of the ``(nq, k)`` distance and id arrays
(ties of distance go to the smaller id, as within one index), then broadcast. Results equal
those of one index holding all the data: the training sample is the same rows in rank order,
default ids are global row numbers, and the selection does not depend on which rank holds a
row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from hpc.comm import resolve_comm

from . import _kernels as K
from ._base import VectorIndex, check_k
from .ivf import _IVF, IVFPQIndex

__all__ = ["ShardedIndex"]


def _bcast_array(comm: Any, a: np.ndarray | None, dtype: Any, root: int = 0) -> np.ndarray:
    """Broadcast an array of known dtype: its shape first (int64), then the data."""
    ndim = np.array([a.ndim if comm.Get_rank() == root and a is not None else 0], np.int64)
    comm.Bcast(ndim, root=root)
    shape = np.array(a.shape if comm.Get_rank() == root and a is not None else [0] * ndim[0])
    shape = np.ascontiguousarray(shape, dtype=np.int64)
    comm.Bcast(shape, root=root)
    if comm.Get_rank() == root and a is not None:
        buf = np.ascontiguousarray(a, dtype=dtype)
    else:
        buf = np.empty(tuple(int(s) for s in shape), dtype=dtype)
    comm.Bcast(buf, root=root)
    return buf


class ShardedIndex:
    """Collective. One index per rank of ``comm``, searched as one.

    Parameters
    ----------
    index : FlatIndex, IVFFlatIndex or IVFPQIndex
        This rank's shard (empty; every rank passes the same type and parameters).
    comm : MPI.Comm, optional
        Default :func:`hpc.comm.world`.

    Examples
    --------
    >>> shard = ShardedIndex(IVFFlatIndex(128, nlist=256))   # under mpirun -n 4
    >>> shard.train(x_local); shard.add(x_local)             # each rank its rows
    >>> d, ids = shard.search(queries, k=10, nprobe=8)       # the same answer on every rank
    """

    def __init__(self, index: VectorIndex, comm: Any = None):
        if not isinstance(index, VectorIndex):
            raise ValueError(f"index: expected a vector index, got {type(index).__name__}")
        self.comm = resolve_comm(comm)
        self.local = index
        kinds = self.comm.allgather(index.kind)  # small metadata, once
        if len(set(kinds)) != 1:
            raise ValueError(f"ShardedIndex: ranks hold different index types {kinds}")

    @property
    def dim(self) -> int:
        return self.local.dim

    @property
    def metric(self) -> str:
        return self.local.metric

    @property
    def ntotal(self) -> int:
        """Collective. Vectors over all shards."""
        out = np.zeros(1, np.int64)
        self.comm.Allreduce(np.array([self.local.ntotal], np.int64), out, op=MPI.SUM)
        return int(out[0])

    def _raw(self, x: Any, what: str) -> np.ndarray:
        """Checked float32 rows, not yet normalised (the shard's own calls normalise)."""
        self.local._check_vectors(x, what)
        return np.ascontiguousarray(np.asarray(x, dtype=np.float32).reshape(-1, self.dim))

    def train(self, x: Any) -> None:
        """Collective. Train on every rank's rows of ``x`` together (gathered on rank 0 in rank
        order, trained there, the learnt arrays broadcast)."""
        comm, root = self.comm, 0
        if not isinstance(self.local, _IVF):
            return
        a = self._raw(x, "training vectors")
        counts = np.empty(comm.Get_size(), np.int64)
        comm.Allgather(np.array([a.shape[0]], np.int64), counts)
        full = np.empty((int(counts.sum()), self.dim), np.float32) if comm.rank == root else None
        comm.Gatherv(a, (full, counts * self.dim) if comm.rank == root else None, root=root)
        error = None
        if comm.rank == root:
            try:
                self.local.train(full)
            except ValueError as exc:
                error = str(exc)
        error = comm.bcast(error, root=root)
        if error:
            raise ValueError(error)
        self.local.centroids = _bcast_array(comm, self.local.centroids, np.float32, root)
        self.local._dev.clear()
        if isinstance(self.local, IVFPQIndex):
            self.local.codebooks = _bcast_array(comm, self.local.codebooks, np.float32, root)
            self.local._precompute()

    def add(self, x: Any, ids: Any = None) -> np.ndarray:
        """Collective. Every rank adds its rows; default ids number the rows globally (rank 0's
        first), continuing after the largest id of any shard."""
        comm = self.comm
        a = self._raw(x, "vectors")
        if ids is None:
            counts = np.empty(comm.Get_size(), np.int64)
            comm.Allgather(np.array([a.shape[0]], np.int64), counts)
            top = np.zeros(1, np.int64)
            mine = int(self.local._ids.max()) + 1 if self.local.ntotal else 0
            comm.Allreduce(np.array([mine], np.int64), top, op=MPI.MAX)
            start = int(top[0]) + int(counts[: comm.rank].sum())
            ids = np.arange(start, start + a.shape[0], dtype=np.int64)
        return self.local.add(a, ids)

    def remove(self, ids: Any) -> int:
        """Collective. Remove these ids from whichever shard holds them; the total removed."""
        out = np.zeros(1, np.int64)
        self.comm.Allreduce(np.array([self.local.remove(ids)], np.int64), out, op=MPI.SUM)
        return int(out[0])

    def search(
        self, queries: Any, k: int, root: int = 0, **params: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """Collective. The global top-k of the queries given on rank ``root`` (others may
        pass None); every rank returns the same ``(distances, ids)``.

        ``params`` (``nprobe``, ``rerank``, ``filter``) go to every shard's ``search``.
        """
        comm = self.comm
        k = check_k(k)
        q = None
        if comm.rank == root:
            q = self._raw(queries, "queries")
        q = _bcast_array(comm, q, np.float32, root)
        rerank = params.get("rerank")
        if isinstance(self.local, IVFPQIndex) and rerank:
            # the single-index semantics: the global best max(k, rerank) by PQ estimate,
            # then exact distances of those candidates (each rank re-ranks the ones it holds)
            kr = max(k, int(rerank))
            d, i = self.local.search(q, kr, **{**params, "rerank": None})
            d, i = self._merged(d, i, root)
            d, i = self.local._exact_for_ids(q, i)
            d, i = self._merged(d, i, root)
            return np.ascontiguousarray(d[:, :k]), np.ascontiguousarray(i[:, :k])
        d, i = self.local.search(q, k, **params)
        return self._merged(d, i, root)

    def _merged(self, d: np.ndarray, i: np.ndarray, root: int) -> tuple[np.ndarray, np.ndarray]:
        """Collective. The global merge of every rank's sorted lists, on every rank."""
        d, i = self._tree_merge(np.ascontiguousarray(d), np.ascontiguousarray(i), root)
        self.comm.Bcast(d, root=root)
        self.comm.Bcast(i, root=root)
        return d, i

    def _tree_merge(self, d: np.ndarray, i: np.ndarray, root: int) -> tuple[np.ndarray, ...]:
        """Binomial-tree reduction of sorted top-k lists onto ``root``."""
        comm = self.comm
        size = comm.Get_size()
        rel = (comm.rank - root) % size
        ascending = self.metric == "l2"
        step = 1
        bd, bi = np.empty_like(d), np.empty_like(i)
        while step < size:
            if rel % (2 * step) == 0:
                src = rel + step
                if src < size:
                    peer = (src + root) % size
                    comm.Recv(bd, source=peer, tag=11)
                    comm.Recv(bi, source=peer, tag=12)
                    d, i = K.merge_sorted(d, i, bd, bi, ascending)
            elif rel % (2 * step) == step:
                peer = (rel - step + root) % size
                comm.Send(d, dest=peer, tag=11)
                comm.Send(i, dest=peer, tag=12)
                break
            step *= 2
        return d, i
