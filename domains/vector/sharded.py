"""An index sharded over MPI ranks: every rank holds a shard, queries go to all, the per-rank
top-k lists are merged into the global top-k.

Arrays move with :mod:`hpc.collectives` (raw buffers, nothing pickled): training samples are
gathered to rank 0, trained state and queries broadcast, and the per-rank results merged up a
binomial tree of the ``(nq, k)`` distance and id arrays (:func:`hpc.collectives.merge_topk`;
ties of distance go to the smaller id, as within one index), then broadcast. Results equal
those of one index holding all the data: the training sample is the same rows in rank order,
default ids are global row numbers, and the selection does not depend on which rank holds a
row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpc.collectives import (
    allgather_object,
    allreduce,
    bcast_array,
    bcast_object,
    gather_rows,
    merge_topk,
    row_counts,
)
from hpc.comm import resolve_comm

from . import _kernels as K
from ._base import VectorIndex, check_k
from .ivf import _IVF, IVFPQIndex

__all__ = ["ShardedIndex"]


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
        kinds = allgather_object(index.kind, self.comm)  # small metadata, once
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
        return int(allreduce(int(self.local.ntotal), "sum", self.comm))

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
        full = gather_rows(self._raw(x, "training vectors"), root, comm)
        error = None
        if comm.rank == root:
            try:
                self.local.train(full)
            except ValueError as exc:
                error = str(exc)
        error = bcast_object(error, root, comm)
        if error:
            raise ValueError(error)
        self.local.centroids = bcast_array(self._on_root(self.local.centroids), root, comm)
        self.local._dev.clear()
        if isinstance(self.local, IVFPQIndex):
            self.local.codebooks = bcast_array(self._on_root(self.local.codebooks), root, comm)
            self.local._precompute()

    def _on_root(self, a: Any, root: int = 0) -> Any:
        """``a`` as float32 on ``root``, None elsewhere (what :func:`bcast_array` sends)."""
        return np.ascontiguousarray(a, dtype=np.float32) if self.comm.rank == root else None

    def add(self, x: Any, ids: Any = None) -> np.ndarray:
        """Collective. Every rank adds its rows; default ids number the rows globally (rank 0's
        first), continuing after the largest id of any shard."""
        comm = self.comm
        a = self._raw(x, "vectors")
        if ids is None:
            counts = row_counts(a.shape[0], comm)
            mine = int(self.local._ids.max()) + 1 if self.local.ntotal else 0
            top = allreduce(mine, "max", comm)
            start = int(top) + int(counts[: comm.rank].sum())
            ids = np.arange(start, start + a.shape[0], dtype=np.int64)
        return self.local.add(a, ids)

    def remove(self, ids: Any) -> int:
        """Collective. Remove these ids from whichever shard holds them; the total removed."""
        return int(allreduce(int(self.local.remove(ids)), "sum", self.comm))

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
        q = bcast_array(q, root, comm)
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
        ascending = self.metric == "l2"

        def merge(d1, i1, d2, i2):
            return K.merge_sorted(d1, i1, d2, i2, ascending)

        d, i = merge_topk(d, i, root, self.comm, merge)
        return bcast_array(d, root, self.comm), bcast_array(i, root, self.comm)
