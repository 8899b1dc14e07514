"""The grouped IVF-Flat list scan (``scan_lists_gemm`` with its task split and shared
bounds), the small-search serial switch, the skewed data generator and ``hpc bench knn
--sweep``.

The kernel is checked against an independent reference, a NumPy float64 brute force over
the rows of each query's probed lists, on fresh random inputs: integer-valued vectors (so
the float32 GEMM is exact and ids *and* scores must match, ties to the smaller id), empty
and very uneven lists, k larger than the rows probed, duplicate rows, allow-lists, one or
all threads.
"""

from __future__ import annotations

import argparse

import numba
import numpy as np
import pytest
from hpc.domains.vector import FlatIndex, IVFFlatIndex, IVFPQIndex
from hpc.domains.vector import _kernels as K
from hpc.domains.vector.datasets import skewed_mixture, skewed_query_rows, skewed_rows
from hpc.domains.vector.ivf import group_pairs
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import fuzz


# -- the reference ------------------------------------------------------------------------------
def reference_topk(q, x, offsets, ids, probes, k, l2, mask):
    """Top-k by (score, id) over the rows of each query's probed lists, float64; scores as
    the kernel forms them (``||x||^2 - 2 q.x`` or ``-q.x``), ``inf`` / ``-1`` padding."""
    nq = q.shape[0]
    out_d = np.full((nq, k), np.inf)
    out_i = np.full((nq, k), -1, dtype=np.int64)
    x64, q64 = x.astype(np.float64), q.astype(np.float64)
    for r in range(nq):
        rows = [np.arange(offsets[lst], offsets[lst + 1]) for lst in probes[r] if lst >= 0]
        rows = np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)
        if mask is not None:
            rows = rows[mask[rows] != 0]
        dot = x64[rows] @ q64[r]
        score = (x64[rows] ** 2).sum(axis=1) - 2 * dot if l2 else -dot
        order = np.lexsort((ids[rows], score))[:k]
        out_d[r, : order.size] = score[order]
        out_i[r, : order.size] = ids[rows[order]]
    return out_d, out_i


def kernel_topk(q, x, offsets, ids, probes, k, l2, mask, block):
    """The library's grouped scan, merge and sort (what ``IVFFlatIndex`` runs)."""
    nq = q.shape[0]
    sizes = np.diff(offsets)
    threads = numba.get_num_threads()
    pair_query, tasks = group_pairs(probes, sizes, threads)
    cand_d, cand_p = K.init_heaps(nq, threads, k)
    qs = np.ascontiguousarray(q * np.float32(-2.0 if l2 else -1.0))
    norms = np.einsum("ij,ij->i", x, x).astype(np.float32)
    m = mask if mask is not None else np.zeros(1, dtype=np.uint8)
    bound = np.full(nq, np.inf, dtype=np.float32)
    with K.blas_single_threaded():
        K.scan_lists_gemm(
            qs, tasks, pair_query, offsets, x, norms, ids, m, mask is not None, l2, block,
            bound, cand_d, cand_p,
        )  # fmt: skip
    hd, hp = K.init_heaps(nq, k)
    K.merge_slots(cand_d, cand_p, ids, hd, hp)
    K.finish_heaps(hd, hp, ids)
    out_i = np.where(hp >= 0, ids[np.maximum(hp, 0)] if ids.size else -1, -1)
    return hd.astype(np.float64), out_i, bound


# -- strategies ---------------------------------------------------------------------------------
@st.composite
def scan_case(draw: st.DrawFn) -> dict:
    nlist = draw(st.integers(1, 12))
    shape = draw(st.sampled_from(["empty", "tiny", "zipf", "one_big"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if shape == "empty":
        sizes = np.zeros(nlist, dtype=np.int64)
    elif shape == "tiny":
        sizes = rng.integers(0, 4, size=nlist)
    elif shape == "zipf":  # very uneven, some lists empty
        sizes = (300 / np.arange(1, nlist + 1) ** 1.5).astype(np.int64) * rng.integers(0, 2, nlist)
    else:
        sizes = rng.integers(0, 3, size=nlist)
        # one list of one or more scan blocks, full or not (K.SCAN_BLOCK rows a block)
        b = K.SCAN_BLOCK
        sizes[rng.integers(nlist)] = rng.choice([b - 1, b, 2 * b + 1, 500])
    sizes = rng.permutation(sizes)
    dim = draw(st.sampled_from([1, 3, 8, 25, 50]))
    nq = draw(st.integers(1, 60))
    nprobe = draw(st.integers(1, nlist))
    total = int(sizes.sum())
    k = draw(st.one_of(st.integers(1, 12), st.just(total + draw(st.integers(0, 5)))))
    return dict(
        sizes=sizes, dim=dim, nq=nq, nprobe=nprobe, k=max(1, k), seed=seed,
        l2=draw(st.booleans()), distinct=draw(st.integers(1, 40)),
        masked=draw(st.booleans()), block=draw(st.sampled_from([3, 64, 1024])),
        serial=draw(st.booleans()), missing=draw(st.booleans()),
    )  # fmt: skip


@fuzz(60)
@given(scan_case())
def test_grouped_scan_equals_numpy_brute_force(case):
    rng = np.random.default_rng(case["seed"])
    sizes, dim, nq = case["sizes"], case["dim"], case["nq"]
    n = int(sizes.sum())
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pool = rng.integers(-6, 7, size=(case["distinct"], dim)).astype(np.float32)
    x = pool[rng.integers(0, pool.shape[0], size=n)]  # duplicates: ties broken by id
    ids = rng.permutation(4 * n + 3)[:n].astype(np.int64)
    q = rng.integers(-6, 7, size=(nq, dim)).astype(np.float32)
    nlist = sizes.shape[0]
    probes = np.stack([rng.choice(nlist, size=case["nprobe"], replace=False) for _ in range(nq)])
    if case["missing"]:  # probe slots without a list
        probes[rng.random(probes.shape) < 0.2] = -1
    mask = (rng.random(n) < 0.6).astype(np.uint8) if case["masked"] else None
    previous = numba.get_num_threads()
    if case["serial"]:
        numba.set_num_threads(1)
    try:
        d, i, bound = kernel_topk(q, x, offsets, ids, probes, case["k"], case["l2"], mask,
                                  case["block"])  # fmt: skip
    finally:
        numba.set_num_threads(previous)
    rd, ri = reference_topk(q, x, offsets, ids, probes, case["k"], case["l2"], mask)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(d, rd)
    # a bound is never better than the true k-th score (it would have dropped a result)
    full = ri[:, -1] >= 0
    assert (bound[full] >= rd[full, -1]).all()


@fuzz(40)
@given(
    st.lists(st.integers(0, 3000), min_size=1, max_size=40),
    st.lists(st.integers(0, 5000), min_size=40, max_size=40),
    st.integers(1, 64),
    st.integers(1, 300),
)
def test_list_tasks_cover_every_pair_once(counts, sizes, threads, tile):
    counts = np.array(counts, dtype=np.int64)
    sizes = np.array(sizes[: counts.size], dtype=np.int64)
    tasks = K.list_tasks(counts, sizes, threads, tile=tile)
    start = np.concatenate([[0], np.cumsum(counts)])
    covered = np.zeros(int(counts.sum()), dtype=np.int64)
    for lst, a0, a1 in tasks:
        assert start[lst] <= a0 < a1 <= start[lst + 1]
        assert a1 - a0 <= max(tile, 16)
        covered[a0:a1] += 1
    assert (covered == 1).all()
    work = (tasks[:, 2] - tasks[:, 1]) * sizes[tasks[:, 0]]
    assert (np.diff(work) <= 0).all()  # largest first
    # a task is at most 1 / (8 threads) of the work, or 16 queries of its list
    cap = max(1, int((counts * sizes).sum()) // (8 * threads))
    assert (work <= np.maximum(cap, 16 * sizes[tasks[:, 0]])).all()


def test_group_pairs_puts_every_query_nearest_list_first():
    rng = np.random.default_rng()
    probes = np.stack([rng.choice(20, size=5, replace=False) for _ in range(300)])
    sizes = rng.integers(0, 50, size=20)
    pair_query, tasks = group_pairs(probes, sizes, 2)
    first = tasks[: int((tasks[:, 1] < 300).sum())]
    assert sorted(pair_query[a] for _, a0, a1 in first for a in range(a0, a1)) == list(range(300))
    for lst, a0, a1 in tasks:  # every pair of a task probes the task's list
        assert all(lst in probes[pair_query[a]] for a in range(a0, a1))
    assert pair_query.shape[0] == probes.size


# -- the fused search of few queries (coarse step, scan, exact re-scoring in one kernel) ---------
@fuzz(40)
@given(scan_case(), st.integers(1, 30), st.booleans(), st.sampled_from([0, 65, 130]))
def test_fused_search_equals_numpy_brute_force(case, k_out, parallel, long_rows):
    """``search_lists`` (and its serial twin, and ``coarse_lists``) against NumPy in float64:
    the nprobe best lists by (score, list), then the k best rows of those by (distance, id),
    on integer-valued vectors (exact in float32, so ids and distances must match); short
    and long rows (``long_rows``), lists of one or several scan blocks."""
    rng = np.random.default_rng(case["seed"])
    sizes, dim, nq = case["sizes"], long_rows or case["dim"], min(case["nq"], 12)
    n, nlist = int(sizes.sum()), sizes.shape[0]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pool = rng.integers(-6, 7, size=(case["distinct"], dim)).astype(np.float32)
    x = pool[rng.integers(0, pool.shape[0], size=n)]  # duplicates: ties broken by id
    ids = rng.permutation(4 * n + 3)[:n].astype(np.int64)
    q = rng.integers(-6, 7, size=(nq, dim)).astype(np.float32)
    cents = rng.integers(-4, 5, size=(nlist, dim)).astype(np.float32)  # tied lists too
    cnorms = (cents**2).sum(axis=1)
    mask = (rng.random(n) < 0.6).astype(np.uint8) if case["masked"] else None
    l2, nprobe = case["l2"], case["nprobe"]
    kk = k_out + 8
    # the reference: lists by (score, list number), rows by (distance, id)
    q64, c64 = q.astype(np.float64), cents.astype(np.float64)
    cscore = (c64**2).sum(axis=1)[None, :] - 2 * q64 @ c64.T if l2 else -(q64 @ c64.T)
    ref_lists = np.stack([np.lexsort((np.arange(nlist), row))[:nprobe] for row in cscore])
    d_ref, i_ref = reference_topk(q, x, offsets, ids, ref_lists, k_out, l2, mask)
    d_ref = d_ref + (q64**2).sum(axis=1)[:, None] if l2 else -d_ref  # scores to distances
    d_ref[i_ref < 0] = np.inf if l2 else -np.inf
    # coarse step alone
    cd = np.empty((nq, nprobe), dtype=np.float32)
    cl = np.empty((nq, nprobe), dtype=np.int64)
    ct = np.ascontiguousarray(cents.T)
    K.coarse_lists(q, ct, cnorms, np.arange(nlist, dtype=np.int64), l2, cd, cl)
    np.testing.assert_array_equal(cl, ref_lists)
    np.testing.assert_array_equal(cd, np.take_along_axis(cscore, ref_lists, axis=1))
    # the whole search
    out_d = np.empty((nq, k_out), dtype=np.float32)
    out_i = np.empty((nq, k_out), dtype=np.int64)
    m = mask if mask is not None else np.zeros(1, dtype=np.uint8)
    kernel = K.search_lists if parallel else K.search_lists_serial
    kernel(
        q, ct, cnorms, np.arange(nlist, dtype=np.int64), nprobe, offsets, x,
        (x**2).sum(axis=1), ids, m, mask is not None, l2, kk, out_d, out_i,
    )  # fmt: skip
    np.testing.assert_array_equal(out_i, i_ref)
    np.testing.assert_array_equal(out_d, d_ref.astype(np.float32))


def test_one_query_search_equals_its_batch_and_flat():
    """A query searched alone (the serial fused kernel) finds what it finds in a batch (the
    parallel fused kernel) and in the separate coarse step and scan kernel, and at nprobe =
    nlist what the exact flat index finds."""
    ds = skewed_mixture(5000, nq=40, dim=20, clusters=50, metric="l2", k=10)
    ivf = IVFFlatIndex(20, 24, niter=5)
    ivf.train(ds.train)
    ivf.add(ds.train)
    batch = ivf.search(ds.test, 10, nprobe=5)
    for r in range(0, 40, 7):
        one = ivf.search(ds.test[r], 10, nprobe=5)
        np.testing.assert_array_equal(one[1], batch[1][r : r + 1])
        np.testing.assert_array_equal(one[0], batch[0][r : r + 1])
    # the per-query scan kernel (the host scan of the GPU backend for k > GPU_KMAX) agrees
    _, probes = ivf._coarse(ds.test[:30], 5)  # 30 x 5 pairs < 8 x 24: not the GEMM path
    d2, i2 = ivf._scan_cpu(ds.test[:30], 18, probes, None)
    np.testing.assert_array_equal(i2[:, :10], batch[1][:30])
    np.testing.assert_array_equal(d2[:, :10], batch[0][:30])
    d, i = ivf.search(ds.test[:5], 10, nprobe=24)
    assert (i == ds.neighbors[:5]).mean() > 0.99  # float32 near-ties aside
    np.testing.assert_allclose(d, ds.distances[:5], rtol=1e-5, atol=1e-5)


# -- the small-search switch and the index paths ------------------------------------------------
def test_serial_and_parallel_searches_agree(monkeypatch):
    ds = skewed_mixture(6000, nq=300, dim=24, clusters=60, metric="l2")
    flat = FlatIndex(24)
    flat.add(ds.train)
    ivf = IVFFlatIndex(24, 32, niter=5)
    ivf.train(ds.train)
    ivf.add(ds.train)
    pq = IVFPQIndex(24, 32, m=6, nbits=6, niter=5)
    pq.train(ds.train)
    pq.add(ds.train)
    searches = [
        lambda: flat.search(ds.test, 7),
        lambda: ivf.search(ds.test, 7, nprobe=8),  # grouped (300 x 8 pairs)
        lambda: ivf.search(ds.test[:3], 100, nprobe=4),  # per query, k > rows probed
        lambda: pq.search(ds.test, 7, nprobe=8, rerank=20),
    ]
    monkeypatch.setattr(K, "SERIAL_WORK", 0)
    parallel = [s() for s in searches]
    monkeypatch.setattr(K, "SERIAL_WORK", float("inf"))
    for s, (d0, i0) in zip(searches, parallel, strict=True):
        d1, i1 = s()
        np.testing.assert_array_equal(i1, i0)
        np.testing.assert_array_equal(d1, d0)
    assert numba.get_num_threads() >= 1


def test_ivf_on_skewed_lists_matches_flat_at_full_nprobe():
    ds = skewed_mixture(8000, nq=400, dim=16, clusters=80, k=10)  # cosine
    ivf = IVFFlatIndex(16, 64, "cosine", niter=8)
    ivf.train(ds.train)
    ivf.add(ds.train)
    sizes = ivf.list_sizes
    assert sizes.max() > 3 * sizes.mean()  # the skew the generator is for
    d, i = ivf.search(ds.test, 10, nprobe=64)
    assert (i == ds.neighbors).mean() > 0.999  # float32 near-ties aside
    np.testing.assert_allclose(d, ds.distances, rtol=1e-5, atol=1e-5)


# -- the skewed generator -----------------------------------------------------------------------
def test_skewed_rows_blocks_norms_and_cluster_sizes():
    kw = dict(dim=20, clusters=50, seed=5)
    whole = skewed_rows(0, 4000, **kw)
    assert whole.dtype == np.float32 and whole.shape == (4000, 20)
    np.testing.assert_array_equal(whole[1000:1700], skewed_rows(1000, 700, **kw))
    np.testing.assert_allclose(np.linalg.norm(whole, axis=1), 1.0, rtol=1e-5)
    raw = skewed_rows(0, 4000, **kw, normalize=False)
    assert np.linalg.norm(raw, axis=1).std() > 0.01
    assert not np.array_equal(skewed_query_rows(0, 50, **kw), whole[:50])
    # Zipf sizes: the nearest centre of each row, counted: a few big, a long tail
    from hpc.domains.vector.datasets import _skewed_model

    cdf, centres, scales, basis = _skewed_model(20, 50, 6, 1.0, 24.0, 5)
    assert np.all(np.diff(cdf) > 0) and cdf[-1] == 1.0
    weights = np.diff(np.concatenate([[0], cdf]))
    assert weights[0] > 20 * weights[-1]
    assert scales[0] < scales[-1]  # the big clusters are the dense ones
    np.testing.assert_allclose(basis.T @ basis, np.eye(6), atol=1e-10)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(intrinsic_dim=0), "intrinsic_dim"),
        (dict(clusters=0), "clusters"),
        (dict(zipf=-1.0), "zipf"),
    ],
)
def test_skewed_rows_rejects_bad_parameters(kw, message):
    with pytest.raises(ValueError, match=message):
        skewed_rows(0, 10, dim=8, **kw)


# -- the benchmark sweep ------------------------------------------------------------------------
def test_bench_knn_sweep_reports_every_point_and_the_worst(capsys):
    pytest.importorskip("faiss")
    from hpc.benchmarks import knn

    p = argparse.ArgumentParser()
    knn.add_arguments(p)
    args = p.parse_args(
        ["--sweep", "--sweep-points", "8:2000", "--nlist", "8", "--sweep-queries", "1,30",
         "--sweep-k", "1,10", "--sweep-nprobe", "1,2,4,8", "--exact-queries", "30",
         "--rerank", "20", "--nbits", "4"]
    )  # fmt: skip
    record = knn.run(args)
    rows = record["sweep"]
    assert len(rows) == 3 * 2 * 2  # flat, ivfflat, ivfpq x k x nq
    assert {r["case"] for r in rows} == {"flat", "ivfflat", "ivfpq"}
    worst = record["worst"]
    assert worst["ratio"] == min(r["ratio"] for r in rows)
    assert {"dim", "n", "case", "k", "nq", "ours_qps", "faiss_qps"} <= set(worst)
    assert all(r["m"] == 4 for r in rows if r["case"] == "ivfpq")  # sub-vectors of 2
    assert all(isinstance(r["load"], float) for r in rows)  # the load each was timed at
    assert "ratio" in capsys.readouterr().out


def test_bench_knn_qps_at_equal_recall_interpolates_time_per_query(monkeypatch):
    """The QPS at the target recall: time per query linear in recall between the last grid
    point below the target and the first reaching it, for each side (QPS per nprobe given,
    not timed; the two sides' points timed in one call)."""
    from hpc.benchmarks import knn

    rng = np.random.default_rng()
    qps = {p: float(v) for p, v in zip((2, 4, 8, 16), rng.uniform(100, 5000, 4), strict=True)}
    calls = []

    def timed(runs, nq):
        calls.append(len(runs))
        return [qps[search(pool)] for search, pool in runs]

    monkeypatch.setattr(knn, "_qps", timed)
    search = lambda q, p: p  # noqa: E731 - the "search" tells which nprobe was timed
    lo, hi = sorted(rng.uniform(0.5, 0.99, 2))
    target = lo + rng.uniform(0, 1) * (hi - lo)
    sides = [(search, None, [(2, lo - 0.1), (4, lo), (8, hi)]), (search, None, [(16, 0.99)])]
    (grid, eq), other = knn._qps_at_recall(sides, 1, target)
    assert calls == [3]  # both sides' points in turns: hi and lo of one, hi of the other
    w = (target - lo) / (hi - lo)
    assert grid == qps[8]
    np.testing.assert_allclose(1 / eq, (1 - w) / qps[4] + w / qps[8], rtol=1e-12)
    # reached at the first grid point, or never: the QPS there
    assert other == (qps[16], qps[16])
    assert knn._qps_at_recall([(search, None, [(2, 0.97)])], 1, 0.95) == [(qps[2], qps[2])]
    never = [(search, None, [(2, 0.5), (4, 0.6)])]
    assert knn._qps_at_recall(never, 1, 0.95) == [(qps[4], qps[4])]


@pytest.mark.parametrize("nq", [1, 3, 7, 50])
def test_bench_knn_qps_streams_distinct_batches_in_turns(nq):
    """``_qps`` times streams of distinct queries in turns: successive calls of a run take
    successive batches of ``nq`` rows of its pool, wrapping round, each of exactly ``nq``
    rows (one batch repeated keeps its lists in cache: a case no user's stream has), and
    the runs' windows alternate (each run timed across the same moments)."""
    from hpc.benchmarks import knn

    pools = [np.arange(20, dtype=np.float32)[:, None], np.arange(9, dtype=np.float32)[:, None]]
    seen: list[list[np.ndarray]] = [[], []]
    order: list[int] = []

    def run(r):
        def search(q):
            seen[r].append(q[:, 0].astype(int))
            if not order or order[-1] != r:
                order.append(r)

        return search

    qps = knn._qps([(run(0), pools[0]), (run(1), pools[1])], nq, seconds=0.003)
    assert len(qps) == 2 and all(v > 0 for v in qps)
    assert order[:4] == [0, 1, 0, 1]  # warm-up call of each, then windows in turns
    for r, pool in enumerate(pools):
        size = min(nq, pool.shape[0])
        batches = pool.shape[0] // size
        assert len(seen[r]) >= 2
        for turn, rows in enumerate(seen[r]):
            first = (turn % batches) * size
            np.testing.assert_array_equal(rows, np.arange(first, first + size))
