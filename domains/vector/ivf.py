"""Inverted-file indexes: IVF-Flat and IVF-PQ (product quantization, optional re-ranking).

A coarse quantizer (k-means, ``nlist`` centroids) splits the database into inverted lists,
held in CSR form: ``list_offsets[l] .. list_offsets[l + 1]`` are the rows of list ``l`` in
the stored arrays (``ids``, ``vectors`` or ``codes``). A search finds the ``nprobe`` nearest
centroids of every query (an exact top-k over the centroids) and scans only those lists, in a
numba kernel parallel over queries (one numba.cuda thread per (query, list) on the GPU for
IVF-Flat). On the CPU an IVF-Flat search of few queries is one kernel from centroids to
exact distances (``search_lists``; one query: on the calling thread); many queries scan
each list once for all the queries probing it (GEMMs, :func:`group_pairs`).

IVF-PQ encodes the residual ``x - c`` of every vector by ``m`` sub-quantizers of
``2**nbits`` codewords each; distances are asymmetric (the query is not quantized), from
lookup tables; ``rerank=R`` recomputes the exact distances of the best ``R`` candidates from
the raw vectors (kept when ``keep_vectors=True``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpc.backend import Backend, to_host
from hpc.dispatch import DeviceTable

from . import _kernels as K
from ._base import VectorIndex, check_k
from .flat import SPARE, flat_search
from .kmeans import kmeans

__all__ = ["IVFFlatIndex", "IVFPQIndex"]

# vectors per block of list filling (``add``): rows are assigned and encoded in blocks of this
# many, whatever the batching, so a journaled build resumes bitwise (hpc.run.map_blocks)
FILL_BLOCK = 1 << 15
# queries from which the coarse step is a blocked GEMM (flat_search); fewer take one numba
# kernel (``coarse_lists``): a GEMM's blocks, heaps and Python cost ~20 us for one query,
# several times its arithmetic (1024 lists x d = 50)
COARSE_GEMM_MIN_QUERIES = 32
# the mask argument of a search without a filter (never written; writeable all the same:
# a read-only array is another numba type, another compilation of every kernel taking it)
_NO_MASK = np.zeros(1, dtype=np.uint8)


def _cut(result: tuple[np.ndarray, np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` of results selected with spare candidates."""
    d, i = result
    return np.ascontiguousarray(d[:, :k]), np.ascontiguousarray(i[:, :k])


def group_pairs(
    probes: np.ndarray, list_sizes: np.ndarray, threads: int
) -> tuple[np.ndarray, np.ndarray]:
    """Local. The (query, probe slot) pairs of ``probes`` grouped by list (their queries),
    and the tasks of :func:`~._kernels.scan_lists_gemm` over them: ``(pair_query, tasks)``.

    The pairs of slot 0 (every query's nearest list) come first, in tasks of their own,
    then the others. Those first tasks fill each query's heap from the list most likely to
    hold its neighbours, so the bound they leave is close to the final k-th score, and the
    other lists offer few rows to the heaps (on a skewed 400k x 50 set at nprobe 16, about
    110 heap candidates per query instead of 220 in list order). Probe entries ``-1``
    (no list) are left out.
    """
    nq, nprobe = probes.shape
    nlist = list_sizes.shape[0]
    flat = probes.reshape(-1)
    later = (np.arange(flat.shape[0]) % nprobe > 0).astype(np.int64)
    key = flat + nlist * later
    order = np.argsort(key, kind="stable")
    order = order[flat[order] >= 0]
    counts = np.bincount(key[order], minlength=2 * nlist)
    first = K.list_tasks(counts[:nlist], list_sizes, threads)
    rest = K.list_tasks(counts[nlist:], list_sizes, threads)
    rest[:, 1:] += counts[:nlist].sum()
    tasks = np.ascontiguousarray(np.concatenate([first, rest]))
    return (order // nprobe).astype(np.int64), tasks


def gemm_min_pairs_per_list(dim: int) -> float:
    """(query, probed list) pairs per list, on average, from which a batch scans each probed
    list once, as a GEMM with the queries probing it, instead of each query its own lists.

    Per query, a list is read from memory once for every query probing it (about 0.5 more
    than the pairs per list on skewed data, where big lists draw more queries); a GEMM
    reads it once but pays a heap fold per (query, row). The wider the rows, the more the
    reads weigh: ``6 sqrt(128 / dim)`` pairs, within the measured range 3.5 to 8. Measured
    on 2 cores, skewed cosine data, batches of distinct queries, per query against grouped
    QPS: d = 384, 3.9 pairs: 1474 / 1983 (k = 1), 1502 / 1782 (k = 100); 1.9: 1002 / 975;
    d = 128, 3.9: 2640 / 2868, 2488 / 2379; 6.25: 1662 / 2470, 1614 / 1975; 2.0: 2685 /
    2155. (A single threshold of 8 left d = 384 per query at 6.25 pairs: 0.9x FAISS.)
    """
    return float(np.clip(6.0 * np.sqrt(128.0 / dim), 3.5, 8.0))


class _IVF(VectorIndex):
    """Coarse quantizer, inverted lists and the parts of search both IVF types share."""

    def __init__(
        self,
        dim: int,
        nlist: int,
        metric: str = "l2",
        backend: str | Backend | None = None,
        niter: int = 20,
        init: str = "random",
        seed: int = 0,
        max_points_per_centroid: int = 256,
    ):
        super().__init__(dim, metric, backend)
        if isinstance(nlist, bool) or not isinstance(nlist, (int, np.integer)) or nlist < 1:
            raise ValueError(f"nlist={nlist!r}: must be a positive integer")
        if init not in ("random", "kmeans++"):
            raise ValueError(f"init={init!r}: expected 'random' or 'kmeans++'")
        self.nlist = int(nlist)
        self.niter, self.init, self.seed = int(niter), init, int(seed)
        self.max_points_per_centroid = int(max_points_per_centroid)
        self.centroids: np.ndarray | None = None
        self.list_offsets = np.zeros(self.nlist + 1, dtype=np.int64)
        self._dev: dict[str, Any] = {}

    def _params(self) -> dict[str, Any]:
        return {
            "nlist": self.nlist,
            "niter": self.niter,
            "init": self.init,
            "seed": self.seed,
            "max_points_per_centroid": self.max_points_per_centroid,
        }

    @property
    def is_trained(self) -> bool:
        return self.centroids is not None

    @property
    def list_sizes(self) -> np.ndarray:
        """How many vectors every inverted list holds."""
        return np.diff(self.list_offsets)

    def _require_trained(self, what: str) -> None:
        if not self.is_trained:
            raise ValueError(f"{self.kind}.{what}: the index is not trained (call train first)")

    def _train_coarse(self, x: np.ndarray) -> np.ndarray:
        if x.shape[0] < self.nlist:
            raise ValueError(
                f"{self.kind}.train: {x.shape[0]} training vectors for nlist={self.nlist} "
                "(need at least nlist)"
            )
        centroids, _ = kmeans(
            x,
            self.nlist,
            niter=self.niter,
            init=self.init,
            seed=self.seed,
            spherical=not self._l2,
            max_points_per_centroid=self.max_points_per_centroid,
            backend=self.backend,
        )
        self.centroids = centroids
        self._dev.clear()
        return centroids

    def _coarse(self, q: np.ndarray, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        """Local. The ``nprobe`` nearest lists of every query and their coarse scores
        (``||q - c||^2`` for L2, ``q.c`` otherwise), on the host, nearest first."""
        return LIST_SCAN.on(self.backend).coarse(self, q, nprobe)

    def _coarse_gemm(self, q: np.ndarray, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_coarse` by a flat search of the centroids (blocked GEMMs, on the backend)."""
        assert self.centroids is not None
        xp = self.backend.xp
        c = self._device("centroids", self.centroids)
        d, lists = flat_search(
            xp.asarray(q), c, self._centroid_norms(), self._list_numbers(), nprobe, self._l2,
            backend=self.backend, exact=False,
        )  # fmt: skip
        return to_host(d), to_host(lists)

    def _coarse_cpu(self, q: np.ndarray, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_coarse` on the CPU: few queries in one kernel (``coarse_lists``)."""
        assert self.centroids is not None
        nq = q.shape[0]
        if nq >= COARSE_GEMM_MIN_QUERIES:
            return self._coarse_gemm(q, nprobe)
        d = np.empty((nq, nprobe), dtype=np.float32)
        lists = np.empty((nq, nprobe), dtype=np.int64)
        cn, numbers = self._centroid_norms(), self._list_numbers()
        K.coarse_lists(q, self._centroid_columns(), cn, numbers, self._l2, d, lists)
        if self._l2:  # scores ||c||^2 - 2 q.c to distances, as the flat search gives them
            d += np.einsum("ij,ij->i", q, q)[:, None]
        else:
            np.negative(d, out=d)
        return d, lists

    def _centroid_norms(self) -> Any:
        """``||c||^2`` of the centroids on the device (computed once, not per search)."""
        if "centroid_norms" not in self._dev:
            assert self.centroids is not None
            self._device("centroid_norms", (self.centroids**2).sum(axis=1))
        return self._dev["centroid_norms"]

    def _centroid_columns(self) -> np.ndarray:
        """The centroids as columns, ``(dim, nlist)`` on the host (for ``coarse_lists``)."""
        if "centroid_columns" not in self._dev:
            assert self.centroids is not None
            self._dev["centroid_columns"] = np.ascontiguousarray(self.centroids.T)
        return self._dev["centroid_columns"]

    def _list_numbers(self) -> Any:
        """``0 .. nlist - 1`` on the device: the ids of the centroids (ties to the lower)."""
        if "list_numbers" not in self._dev:
            self._device("list_numbers", np.arange(self.nlist, dtype=np.int64))
        return self._dev["list_numbers"]

    def _device(self, name: str, value: Any) -> Any:
        """A device mirror of a host array (cached until the index changes; on the CPU the
        array itself)."""
        if name not in self._dev:
            self._dev[name] = self.backend.xp.asarray(value)
        return self._dev[name]

    def _assign(self, x: np.ndarray) -> np.ndarray:
        # the GEMM whatever the number of rows: a row's list must not depend on its batch
        _, lists = self._coarse_gemm(x, 1)
        return lists[:, 0].astype(np.int64)

    def _fill(self, a: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Local. Every row's list and (``m > 0``) its ``m`` PQ codes, computed in blocks of
        :data:`FILL_BLOCK` rows by :func:`hpc.run.map_blocks`: inside a journal the finished
        blocks are journaled, inside a progress phase they are counted."""
        from hpc.run import map_blocks

        n = a.shape[0]
        block = min(FILL_BLOCK, n)
        nblocks = -(-n // block)
        width = block * (1 + m)

        def rows(first: int, count: int) -> np.ndarray:
            out = np.full((count, width), -1.0)
            for r in range(count):
                lo, hi = (first + r) * block, min(n, (first + r + 1) * block)
                lists = self._assign(a[lo:hi])
                out[r, : hi - lo] = lists
                if m:
                    codes = self.encode(a[lo:hi], lists)  # type: ignore[attr-defined]
                    out[r, block : block + (hi - lo) * m] = codes.reshape(-1)
            return out

        got = map_blocks(rows, nblocks, width, executor="local")
        lists = got[:, :block].reshape(-1)[:n].astype(np.int64)
        if not m:
            return lists, None
        codes = got[:, block:].reshape(nblocks * block, m)[:n].astype(np.uint8)
        return lists, codes

    def _merge_rows(self, lists: np.ndarray, ids: np.ndarray, rows: dict[str, np.ndarray]) -> None:
        """Insert new rows into the CSR arrays (stable: older rows first within a list)."""
        old_lists = np.repeat(np.arange(self.nlist, dtype=np.int64), self.list_sizes)
        keys = np.concatenate([old_lists, lists])
        order = np.argsort(keys, kind="stable")
        self._ids = np.concatenate([self._ids, ids])[order]
        for name, new in rows.items():
            setattr(self, name, np.concatenate([getattr(self, name), new])[order])
        counts = np.bincount(keys, minlength=self.nlist)
        self.list_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._dev.clear()

    def _keep_rows(self, keep: np.ndarray) -> None:
        kept_before = np.concatenate([[0], np.cumsum(keep)]).astype(np.int64)
        self.list_offsets = kept_before[self.list_offsets]
        self._ids = self._ids[keep]
        for name in self._row_arrays():
            setattr(self, name, np.ascontiguousarray(getattr(self, name)[keep]))
        self._dev.clear()

    def _row_arrays(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _search_work(self, nq: int, nprobe: int, per_row: int | None = None) -> float:
        """Multiply-adds of a search, roughly: the coarse step and ``nprobe`` lists of
        average size at ``per_row`` (default ``dim``) each, per query."""
        mean = self.ntotal / self.nlist
        return float(nq) * self.dim * self.nlist + nq * nprobe * mean * (per_row or self.dim)

    def _check_nprobe(self, nprobe: Any) -> int:
        if nprobe is None:
            return 1
        if isinstance(nprobe, bool) or not isinstance(nprobe, (int, np.integer)) or nprobe < 1:
            raise ValueError(f"nprobe={nprobe!r}: must be a positive integer")
        return min(int(nprobe), self.nlist)

    def _finish(
        self, q: np.ndarray, hd: np.ndarray, hp: np.ndarray, vectors: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sorted results from the heaps: exact distances when ``vectors`` is given."""
        nq, k = hp.shape
        # O(queries k) work: no parallel region (a wake-up of every thread) unless large
        if vectors is not None:
            out_d = np.empty((nq, k), dtype=np.float32)
            out_i = np.empty((nq, k), dtype=np.int64)
            with K.serial_when_small(float(nq) * k * self.dim):
                K.exact_scores(q, vectors, hp, self._ids, self._l2, out_d, out_i)
            return out_d, out_i
        with K.serial_when_small(float(nq) * k * self.dim):
            K.finish_heaps(hd, hp, self._ids)
        ids = np.where(hp >= 0, self._ids[np.maximum(hp, 0)] if self.ntotal else -1, -1)
        d = hd if self._l2 else -hd
        return d.astype(np.float32), ids.astype(np.int64)

    def _state_common(self) -> dict[str, np.ndarray]:
        self._require_trained("save")
        assert self.centroids is not None
        return {"ids": self._ids, "centroids": self.centroids, "list_offsets": self.list_offsets}


class IVFFlatIndex(_IVF):
    """Inverted lists of full float32 vectors.

    Parameters
    ----------
    dim : int
    nlist : int
        Number of inverted lists (k-means centroids).
    metric : {"l2", "ip", "cosine"}
    backend : {"auto", "cpu", "gpu"}, Backend or None
    niter : int
        k-means iterations.
    init : {"random", "kmeans++"}
        k-means initialisation.
    seed : int
        Training sample and initialisation.
    max_points_per_centroid : int
        k-means trains on at most ``nlist * max_points_per_centroid`` sampled vectors.

    Examples
    --------
    >>> index = IVFFlatIndex(128, nlist=1024)
    >>> index.train(xb)
    >>> index.add(xb)
    >>> distances, ids = index.search(xq, k=10, nprobe=16)
    """

    def __init__(self, dim: int, nlist: int, metric: str = "l2", **kw: Any):
        super().__init__(dim, nlist, metric, **kw)
        self.vectors = np.empty((0, self.dim), dtype=np.float32)
        self.norms = np.empty(0, dtype=np.float32)

    def _row_arrays(self) -> list[str]:
        return ["vectors", "norms"]

    def train(self, x: Any) -> None:
        """Local. Learn the coarse centroids by k-means on (a sample of) ``x``."""
        self._train_coarse(self._check_vectors(x, "training vectors"))

    def add(self, x: Any, ids: Any = None) -> np.ndarray:
        """Local. Add vectors to their nearest lists; returns their ids (see ``FlatIndex.add``)."""
        self._require_trained("add")
        a = self._check_vectors(x)
        new_ids = self._check_new_ids(ids, a.shape[0])
        if a.shape[0]:
            lists, _ = self._fill(a, 0)
            self._merge_rows(lists, new_ids, {"vectors": a, "norms": np.einsum("ij,ij->i", a, a)})
        return new_ids

    def search(
        self, queries: Any, k: int, nprobe: int | None = None, filter: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Local. Approximate k-NN by scanning the ``nprobe`` nearest lists of each query.

        Parameters
        ----------
        queries : (nq, dim) array
        k : int
        nprobe : int, optional
            Lists scanned per query (default 1; ``nprobe = nlist`` is exact).
        filter : array of int, optional
            Allow-list of ids.

        Returns
        -------
        distances, ids : (nq, k) numpy arrays (exact distances of the returned vectors)
        """
        k = check_k(k)
        self._require_trained("search")
        nprobe = self._check_nprobe(nprobe)
        q = self._check_vectors(queries, "queries")
        return LIST_SCAN.on(self.backend).search(self, q, k, nprobe, self._filter_mask(filter))

    def _search_cpu(
        self, q: np.ndarray, k: int, nprobe: int, mask: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The CPU search: many queries by grouped GEMMs of the lists, few in one kernel
        (coarse step, scan and exact re-scoring: ``search_lists``)."""
        nq = q.shape[0]
        work = self._search_work(nq, nprobe)
        if self._grouped(nq, nprobe):
            with K.serial_when_small(work, nq):
                _, probes = self._coarse_gemm(q, nprobe)
                # spare candidates: the exact (distance, id) order cuts
                return _cut(self._scan_cpu(q, k + SPARE, probes, mask), k)
        assert self.centroids is not None
        out_d = np.empty((nq, k), dtype=np.float32)
        out_i = np.empty((nq, k), dtype=np.int64)
        m = mask if mask is not None else _NO_MASK
        args = (
            q, self._centroid_columns(), self._centroid_norms(), self._list_numbers(), nprobe,
            self.list_offsets, self.vectors, self.norms, self._ids, m, mask is not None,
            self._l2, k + SPARE, out_d, out_i,
        )  # fmt: skip
        if nq == 1:  # no thread count to switch, no pool to wake
            K.search_lists_serial(*args)
            return out_d, out_i
        with K.serial_when_small(work, nq), K.dynamic_schedule():
            K.search_lists(*args)
        return out_d, out_i

    def _grouped(self, nq: int, nprobe: int) -> bool:
        """Whether ``nq`` queries of ``nprobe`` probes scan lists as GEMMs."""
        return nq * nprobe >= gemm_min_pairs_per_list(self.dim) * self.nlist

    def _scan_cpu(
        self, q: np.ndarray, k: int, probes: np.ndarray, mask: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The CPU scan of the probed lists: exact distances of the ``k`` best, by query."""
        hd, hp = K.init_heaps(q.shape[0], k)
        m = mask if mask is not None else np.zeros(1, dtype=np.uint8)
        if self._grouped(q.shape[0], probes.shape[1]):
            self._scan_grouped(q, k, probes, m, mask is not None, hd, hp)
            return self._finish(q, hd, hp, self.vectors)
        with K.dynamic_schedule():
            K.scan_lists(
                q, probes, self.list_offsets, self.vectors, self.norms, self._ids, m,
                mask is not None, self._l2, hd, hp,
            )  # fmt: skip
        return self._finish(q, hd, hp, self.vectors)

    def _scan_grouped(
        self,
        q: np.ndarray,
        k: int,
        probes: np.ndarray,
        m: np.ndarray,
        use_mask: bool,
        hd: np.ndarray,
        hp: np.ndarray,
    ) -> None:
        """Many queries: GEMMs of each inverted list with the queries that probe it
        (:func:`group_pairs`, :func:`~._kernels.scan_lists_gemm`)."""
        import numba

        nq = probes.shape[0]
        threads = numba.get_num_threads()
        pair_query, tasks = group_pairs(probes, self.list_sizes, threads)
        cand_d, cand_p = K.init_heaps(nq, threads, k)  # one heap per (query, thread)
        qs = np.ascontiguousarray(q * np.float32(-2.0 if self._l2 else -1.0))
        previous = numba.get_parallel_chunksize()
        numba.set_parallel_chunksize(1)  # tasks differ in cost: hand them out one by one
        try:
            with K.blas_single_threaded():
                K.scan_lists_gemm(
                    qs, tasks, pair_query, self.list_offsets, self.vectors, self.norms,
                    self._ids, m, use_mask, self._l2, 1024,
                    np.full(nq, np.inf, dtype=np.float32), cand_d, cand_p,
                )  # fmt: skip
        finally:
            numba.set_parallel_chunksize(previous)
        with K.serial_when_small(float(nq) * threads * k * 8):
            K.merge_slots(cand_d, cand_p, self._ids, hd, hp)

    def _gpu_search(
        self, q: np.ndarray, k: int, probes: np.ndarray, mask: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        from .flat import _gpu_exact

        xp = self.backend.xp
        kern = K.gpu_kernels()
        nq, nprobe = probes.shape
        ids = self._device("ids", self._ids)
        vectors = self._device("vectors", self.vectors)
        qd, pd = xp.asarray(q), xp.asarray(probes)
        hd = xp.full((nq, k), xp.inf, dtype=xp.float32)
        hp = xp.full((nq, k), -1, dtype=xp.int64)
        cand_d = xp.empty((nq, nprobe, k), dtype=xp.float32)
        cand_p = xp.empty((nq, nprobe, k), dtype=xp.int64)
        m = xp.asarray(mask) if mask is not None else xp.zeros(1, dtype=xp.uint8)
        threads = 64
        blocks = (nq + threads - 1) // threads
        kern["scan_lists"][(blocks, nprobe), threads](
            qd,
            pd,
            self._device("offsets", self.list_offsets),
            vectors,
            self._device("norms", self.norms),
            ids,
            m,
            mask is not None,
            self._l2,
            cand_d,
            cand_p,
        )
        kern["merge"][blocks, threads](hd, hp, cand_d, cand_p, ids)
        kern["sort"][blocks, threads](hd, hp, ids)
        d, i = _gpu_exact(xp, qd, vectors, hp, ids, self._l2)
        return to_host(d), to_host(i)

    def _state(self) -> dict[str, np.ndarray]:
        return {**self._state_common(), "vectors": self.vectors}

    def _set_state(self, state: dict[str, np.ndarray]) -> None:
        self.centroids = np.asarray(state["centroids"], dtype=np.float32)
        self.list_offsets = np.asarray(state["list_offsets"], dtype=np.int64)
        self._ids = np.asarray(state["ids"], dtype=np.int64)
        self.vectors = np.ascontiguousarray(state["vectors"], dtype=np.float32)
        self.norms = np.einsum("ij,ij->i", self.vectors, self.vectors)
        self._dev.clear()


# the coarse step and the IVF-Flat search on each device (chosen once per call by the backend)
LIST_SCAN = DeviceTable("vector.ivf")
LIST_SCAN.cpu("coarse")(_IVF._coarse_cpu)
LIST_SCAN.gpu("coarse")(_IVF._coarse_gemm)
LIST_SCAN.cpu("search")(IVFFlatIndex._search_cpu)


@LIST_SCAN.gpu("search")
def _search_gpu(
    index: IVFFlatIndex, q: np.ndarray, k: int, nprobe: int, mask: Any
) -> tuple[np.ndarray, np.ndarray]:
    with K.serial_when_small(index._search_work(q.shape[0], nprobe), q.shape[0]):
        _, probes = index._coarse(q, nprobe)
        kk = k + SPARE  # spare candidates: the exact (distance, id) order cuts
        if kk > K.GPU_KMAX:  # wider than the GPU heap kernels: the host scan
            return _cut(index._scan_cpu(q, kk, probes, mask), k)
        return _cut(index._gpu_search(q, kk, probes, mask), k)


class IVFPQIndex(_IVF):
    """Inverted lists of product-quantized residuals, with optional exact re-ranking.

    Parameters
    ----------
    dim : int
    nlist : int
    m : int
        Sub-quantizers; ``dim`` must be a multiple of ``m``.
    nbits : int
        Bits per sub-quantizer code, 1 to 8 (``2**nbits`` codewords; training needs at least
        that many vectors).
    metric : {"l2", "ip", "cosine"}
    keep_vectors : bool
        Keep the raw vectors for ``search(..., rerank=R)`` (costs ``4 * dim`` bytes each).
    **kw
        ``backend``, ``niter``, ``init``, ``seed``, ``max_points_per_centroid`` as for
        :class:`IVFFlatIndex`.

    Notes
    -----
    List scanning runs in the CPU kernel on either backend (the coarse search and training
    use the backend).
    """

    def __init__(
        self,
        dim: int,
        nlist: int,
        m: int = 8,
        nbits: int = 8,
        metric: str = "l2",
        keep_vectors: bool = True,
        **kw: Any,
    ):
        super().__init__(dim, nlist, metric, **kw)
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"m={m!r}: must be a positive integer")
        if self.dim % m:
            raise ValueError(f"m={m}: the dimension {self.dim} is not a multiple of m")
        if not isinstance(nbits, (int, np.integer)) or not 1 <= nbits <= 8:
            raise ValueError(f"nbits={nbits!r}: must be an integer from 1 to 8")
        self.m, self.nbits, self.keep_vectors = int(m), int(nbits), bool(keep_vectors)
        self.ksub, self.dsub = 1 << self.nbits, self.dim // self.m
        self.codebooks: np.ndarray | None = None
        self.precomputed: np.ndarray | None = None
        self.codes = np.empty((0, self.m), dtype=np.uint8)
        self.vectors = np.empty((0, self.dim), dtype=np.float32)

    def _params(self) -> dict[str, Any]:
        return {
            **super()._params(),
            "m": self.m,
            "nbits": self.nbits,
            "keep_vectors": self.keep_vectors,
        }

    @property
    def is_trained(self) -> bool:
        return self.centroids is not None and self.codebooks is not None

    def _row_arrays(self) -> list[str]:
        return ["codes", "vectors"] if self.keep_vectors else ["codes"]

    def train(self, x: Any) -> None:
        """Local. Learn the coarse centroids, then one codebook per sub-space on the
        residuals of (a sample of) ``x``."""
        a = self._check_vectors(x, "training vectors")
        if a.shape[0] < self.ksub:
            raise ValueError(
                f"IVFPQIndex.train: {a.shape[0]} training vectors for 2**nbits={self.ksub} "
                "codewords (need at least that many)"
            )
        self._train_coarse(a)
        limit = self.ksub * self.max_points_per_centroid
        if a.shape[0] > limit:
            rng = np.random.default_rng(self.seed + 1)
            a = a[np.sort(rng.choice(a.shape[0], size=limit, replace=False))]
        assert self.centroids is not None
        res = a - self.centroids[self._assign(a)]
        res = np.ascontiguousarray(res, dtype=np.float32)
        # all sub-quantizers trained together: Lloyd iterations from distinct sample rows
        niter = max(1, self.niter)
        snapshot, saved = self._pq_resume(res.shape[0], niter)
        if saved is not None:  # a journaled build killed after iteration `start`
            start, books = saved
        else:
            start = 0
            rng = np.random.default_rng(self.seed + 2)
            books = np.empty((self.m, self.ksub, self.dsub), dtype=np.float32)
            for s in range(self.m):
                rows = np.sort(rng.choice(res.shape[0], size=self.ksub, replace=False))
                books[s] = res[rows, s * self.dsub : (s + 1) * self.dsub]
        codes = np.empty((res.shape[0], self.m), dtype=np.uint8)
        for it in range(start, niter):
            K.assign_to_codes(res, books, codes)
            K.pq_update(res, codes, books)
            if snapshot is not None:
                snapshot.save(it + 1, {"codebooks": books})
        self.codebooks = books
        self._precompute()

    def _pq_resume(self, n: int, niter: int) -> tuple[Any, tuple[int, np.ndarray] | None]:
        """The journal's state of the codebook iterations (inside ``with Journal(...)``)."""
        from hpc.journal import active_journal

        journal = active_journal()
        if journal is None:
            return None, None
        meta = dict(m=self.m, ksub=self.ksub, dsub=self.dsub, n=n, niter=niter, seed=self.seed)
        snapshot = journal.snapshot("pq-codebooks", meta)
        saved = snapshot.load()
        if saved is None:
            return snapshot, None
        step, arrays = saved
        return snapshot, (step, np.array(arrays["codebooks"], dtype=np.float32))

    def _precompute(self) -> None:
        """``||r||^2 + 2 c.r`` per (list, sub-space, code): the query-independent L2 term."""
        assert self.centroids is not None and self.codebooks is not None
        c = self.centroids.reshape(self.nlist, self.m, self.dsub).astype(np.float64)
        b = self.codebooks.astype(np.float64)
        self.precomputed = (
            (b**2).sum(axis=2)[None, :, :] + 2.0 * np.einsum("lsd,sjd->lsj", c, b)
        ).astype(np.float32)

    def encode(self, x: np.ndarray, lists: np.ndarray) -> np.ndarray:
        """Local. PQ codes ``(n, m)`` uint8 of the residuals of ``x`` to ``lists``."""
        assert self.centroids is not None and self.codebooks is not None
        res = np.ascontiguousarray(x - self.centroids[lists], dtype=np.float32)
        codes = np.empty((x.shape[0], self.m), dtype=np.uint8)
        K.assign_to_codes(res, self.codebooks, codes)
        return codes

    def add(self, x: Any, ids: Any = None) -> np.ndarray:
        """Local. Encode and add vectors; returns their ids (see ``FlatIndex.add``)."""
        self._require_trained("add")
        a = self._check_vectors(x)
        new_ids = self._check_new_ids(ids, a.shape[0])
        if a.shape[0]:
            lists, codes = self._fill(a, self.m)
            rows = {"codes": codes}
            if self.keep_vectors:
                rows["vectors"] = a
            self._merge_rows(lists, new_ids, rows)
        return new_ids

    def search(
        self,
        queries: Any,
        k: int,
        nprobe: int | None = None,
        rerank: int | None = None,
        filter: Any = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Local. Approximate k-NN from PQ codes of the ``nprobe`` nearest lists.

        Parameters
        ----------
        queries : (nq, dim) array
        k : int
        nprobe : int, optional
            Lists scanned per query (default 1).
        rerank : int, optional
            Re-rank the best ``max(rerank, k)`` PQ candidates by exact distance (needs
            ``keep_vectors=True``). Without it the distances are PQ estimates.
        filter : array of int, optional
            Allow-list of ids.
        """
        k = check_k(k)
        self._require_trained("search")
        nprobe = self._check_nprobe(nprobe)
        if rerank is not None and rerank != 0:
            if not isinstance(rerank, (int, np.integer)) or rerank < 0:
                raise ValueError(f"rerank={rerank!r}: must be a non-negative integer")
            if not self.keep_vectors:
                raise ValueError("rerank needs the raw vectors: build with keep_vectors=True")
        q = self._check_vectors(queries, "queries")
        mask = self._filter_mask(filter)
        with K.serial_when_small(self._search_work(q.shape[0], nprobe, self.m), q.shape[0]):
            return self._search_pq(q, k, nprobe, rerank, mask)

    def _search_pq(
        self, q: np.ndarray, k: int, nprobe: int, rerank: int | None, mask: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        coarse, probes = self._coarse(q, nprobe)
        kr = max(k, int(rerank or 0))
        hd, hp = K.init_heaps(q.shape[0], kr)
        m = mask if mask is not None else np.zeros(1, dtype=np.uint8)
        assert self.codebooks is not None and self.precomputed is not None
        assert self.centroids is not None
        with K.dynamic_schedule():
            K.scan_pq(
                q, probes, np.ascontiguousarray(coarse, dtype=np.float32), self.list_offsets,
                self.codes, self.codebooks, self.centroids, self.precomputed, self._ids, m,
                mask is not None, self._l2, hd, hp,
            )  # fmt: skip
        if rerank:
            d, i = self._finish(q, hd, hp, self.vectors)
            return np.ascontiguousarray(d[:, :k]), np.ascontiguousarray(i[:, :k])
        return self._finish(q, hd, hp, None)

    def _exact_for_ids(self, q: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Local. Exact distances of the candidate ids this index holds (sorted; others
        are dropped, ``-1`` at the end): the re-ranking step of a sharded search."""
        order = np.argsort(self._ids, kind="stable")
        sorted_ids = self._ids[order]
        where = np.searchsorted(sorted_ids, cand)
        where = np.minimum(where, max(self.ntotal - 1, 0))
        held = (cand >= 0) & (self.ntotal > 0)
        if self.ntotal:
            held &= sorted_ids[where] == cand
        hp = np.where(held, order[where] if self.ntotal else -1, -1).astype(np.int64)
        return self._finish(self._check_vectors(q, "queries"), hp * 0, hp, self.vectors)

    def _state(self) -> dict[str, np.ndarray]:
        assert self.codebooks is not None
        state = {**self._state_common(), "codebooks": self.codebooks, "codes": self.codes}
        if self.keep_vectors:
            state["vectors"] = self.vectors
        return state

    def _set_state(self, state: dict[str, np.ndarray]) -> None:
        self.centroids = np.asarray(state["centroids"], dtype=np.float32)
        self.codebooks = np.asarray(state["codebooks"], dtype=np.float32)
        self.list_offsets = np.asarray(state["list_offsets"], dtype=np.int64)
        self._ids = np.asarray(state["ids"], dtype=np.int64)
        self.codes = np.ascontiguousarray(state["codes"], dtype=np.uint8)
        if self.keep_vectors:
            self.vectors = np.ascontiguousarray(state["vectors"], dtype=np.float32)
        self._precompute()
        self._dev.clear()
