"""Vector search: exact search against NumPy brute force and FAISS, IVF recall, sharding,
storage, datasets, bad input, the GPU kernels under the CUDA simulator, CLI and benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hpc.domains.vector import (
    FlatIndex,
    IVFFlatIndex,
    IVFPQIndex,
    ShardedIndex,
    load_index,
)
from hpc.domains.vector.datasets import (
    gaussian_mixture,
    mixture_rows,
    read_ann_hdf5,
    recall_at_k,
    write_ann_hdf5,
)
from hpc.io import LayoutMismatchError

from tests.conftest import mpi_script, run_cudasim, run_mpi


def _brute(x: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """Float64 scores, smaller is better, of every (query, vector) pair."""
    x64, q64 = x.astype(np.float64), q.astype(np.float64)
    if metric == "cosine":
        x64 = x64 / np.linalg.norm(x64, axis=1)[:, None]
        q64 = q64 / np.linalg.norm(q64, axis=1)[:, None]
    if metric == "l2":
        return ((q64[:, None, :] - x64[None, :, :]) ** 2).sum(axis=2)
    return -(q64 @ x64.T)


def _check_exact(d, i, x, q, metric, k, ids=None):
    """Results equal brute force up to ties: the sorted distances match (1e-5 relative) and
    every returned id has the distance reported for it."""
    ids = np.arange(len(x)) if ids is None else ids
    score = _brute(x, q, metric)
    sign = 1.0 if metric == "l2" else -1.0
    kk = min(k, len(x))
    ref = np.sort(score, axis=1)[:, :kk] * sign
    scale = np.abs(score).max() if score.size else 1.0
    np.testing.assert_allclose(d[:, :kk], ref, rtol=1e-5, atol=1e-6 * scale)
    pos = {int(v): j for j, v in enumerate(ids)}
    for row in range(len(q)):
        got = [pos[int(v)] for v in i[row, :kk]]
        assert len(set(got)) == kk, "ids are distinct"
        np.testing.assert_allclose(score[row, got] * sign, d[row, :kk], rtol=1e-5, atol=1e-6)
    assert (i[:, kk:] == -1).all()
    tail = np.inf if metric == "l2" else -np.inf
    assert (d[:, kk:] == tail).all()
    # ordering: best first
    if kk > 1:
        assert (np.diff(d[:, :kk] * sign, axis=1) >= 0).all()


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_flat_equals_numpy_brute_force(metric):
    rng = np.random.default_rng()
    n, nq, dim = int(rng.integers(500, 3000)), 37, int(rng.integers(3, 70))
    x = (rng.standard_normal((n, dim)) * rng.uniform(0.1, 10)).astype(np.float32)
    x[n // 3 : n // 3 + 20] = x[:20]  # duplicate vectors
    q = rng.standard_normal((nq, dim)).astype(np.float32)
    ids = rng.permutation(10 * n)[:n]
    index = FlatIndex(dim, metric, query_block=16, db_block=int(rng.integers(50, 400)))
    index.add(x, ids)
    for k in (1, 10, n + 5):  # k larger than the database
        d, i = index.search(q, k)
        assert d.dtype == np.float32 and i.dtype == np.int64 and d.shape == (nq, k)
        _check_exact(d, i, x, q, metric, k, ids)
    # duplicates: querying a duplicated vector returns both copies, smaller id first
    d, i = index.search(x[:1], 2)
    pair = sorted([int(ids[0]), int(ids[n // 3])])
    if metric == "l2":
        assert i[0].tolist() == pair and d[0, 0] == d[0, 1] == 0
    # default block sizes, other code path (several database parts for few queries)
    big = FlatIndex(dim, metric, db_block=64)
    big.add(x, ids)
    _check_exact(*big.search(q[:3], 4), x, q[:3], metric, 4, ids)


def test_flat_matches_faiss_index_flat_l2():
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng()
    x = rng.standard_normal((20000, 48)).astype(np.float32)
    q = rng.standard_normal((200, 48)).astype(np.float32)
    ours = FlatIndex(48)
    ours.add(x)
    d, i = ours.search(q, 10)
    peer = faiss.IndexFlatL2(48)
    peer.add(x)
    fd, fi = peer.search(q, 10)
    np.testing.assert_allclose(d, fd, rtol=1e-4, atol=1e-4)
    assert recall_at_k(i, fi) >= 0.999  # the same sets, near-ties in float32 aside


def test_empty_database_filter_and_remove():
    rng = np.random.default_rng()
    empty = FlatIndex(5)
    d, i = empty.search(rng.standard_normal((3, 5)), 4)
    assert (i == -1).all() and np.isinf(d).all()
    x = rng.standard_normal((400, 5)).astype(np.float32)
    q = rng.standard_normal((6, 5)).astype(np.float32)
    for index in (FlatIndex(5), IVFFlatIndex(5, 8), IVFPQIndex(5, 4, m=5, nbits=4)):
        index.train(x)
        index.add(x)
        allow = rng.choice(400, size=30, replace=False)
        d, i = index.search(
            q, 40, filter=allow, **({} if isinstance(index, FlatIndex) else {"nprobe": 64})
        )
        assert np.isin(i[:, :30], allow).all() and (i[:, 30:] == -1).all()
        if not isinstance(index, IVFPQIndex):
            _check_exact(d, i, x[np.sort(allow)], q, "l2", 40, np.sort(allow))
        gone = rng.choice(400, size=100, replace=False)
        assert index.remove(gone) == 100 and index.ntotal == 300
        assert index.remove(gone) == 0
        _, i = index.search(q, 300, **({} if isinstance(index, FlatIndex) else {"nprobe": 64}))
        assert not np.isin(i, gone).any() and (np.sort(i, axis=1) >= 0).all()
        index.add(x[gone[:5]], ids=gone[:5])  # ids come back
        assert index.ntotal == 305


def test_ivf_flat_recall_rises_with_nprobe_and_is_exact_at_nlist():
    ds = gaussian_mixture(
        8000,
        nq=100,
        dim=24,
        clusters=30,
        intrinsic_dim=12,
        seed=int(np.random.default_rng().integers(2**32)),
        k=10,
    )
    for metric, init in (("l2", "random"), ("l2", "kmeans++"), ("cosine", "random")):
        truth = ds.neighbors
        if metric != "l2":
            ref = FlatIndex(24, metric)
            ref.add(ds.train)
            _, truth = ref.search(ds.test, 10)
        index = IVFFlatIndex(24, 32, metric, init=init)
        index.train(ds.train)
        index.add(ds.train)
        assert index.list_sizes.sum() == 8000
        recalls = [
            recall_at_k(index.search(ds.test, 10, nprobe=p)[1], truth) for p in (1, 2, 4, 8, 32)
        ]
        assert all(b >= a for a, b in zip(recalls, recalls[1:], strict=False)), recalls
        assert recalls[0] < 1.0 and recalls[-1] == 1.0, recalls


def test_ivfpq_estimates_and_reranking():
    ds = gaussian_mixture(6000, nq=80, dim=32, clusters=20, intrinsic_dim=16, seed=3, k=10)
    index = IVFPQIndex(32, 16, m=8, nbits=8)
    index.train(ds.train)
    index.add(ds.train)
    plain = [recall_at_k(index.search(ds.test, 10, nprobe=p)[1], ds.neighbors) for p in (1, 16)]
    reranked = [
        recall_at_k(index.search(ds.test, 10, nprobe=p, rerank=60)[1], ds.neighbors)
        for p in (1, 4, 16)
    ]
    assert reranked[-1] >= 0.95 and reranked[-1] > plain[-1] and reranked[0] < reranked[-1]
    # PQ distances estimate the true ones; re-ranked distances are exact
    d, i = index.search(ds.test, 10, nprobe=16)
    true = _brute(ds.train, ds.test, "l2")[np.arange(80)[:, None], i]
    assert np.median(np.abs(d - true) / true) < 0.2
    d, i = index.search(ds.test, 10, nprobe=16, rerank=60)
    np.testing.assert_allclose(
        d, _brute(ds.train, ds.test, "l2")[np.arange(80)[:, None], i], rtol=1e-5
    )


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_sharded_equals_single_process(nranks):
    seed = str(np.random.default_rng().integers(2**31))
    proc = run_mpi(nranks, [str(mpi_script("check_vector_sharded.py")), seed])
    assert f"on {nranks} rank(s): PASS" in proc.stdout


def test_sharded_in_one_process_is_the_index():
    rng = np.random.default_rng()
    x = rng.standard_normal((500, 8)).astype(np.float32)
    single, sharded = FlatIndex(8), ShardedIndex(FlatIndex(8))
    single.add(x)
    sharded.add(x)
    q = rng.standard_normal((5, 8))
    for a, b in zip(single.search(q, 3), sharded.search(q, 3), strict=True):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="expected a vector index"):
        ShardedIndex(object())


def test_save_load_round_trip_and_clear_errors(tmp_path):
    rng = np.random.default_rng()
    x = rng.standard_normal((700, 16)).astype(np.float32)
    q = rng.standard_normal((9, 16)).astype(np.float32)
    made = [
        FlatIndex(16, "cosine"),
        IVFFlatIndex(16, 8, "ip"),
        IVFPQIndex(16, 8, m=4, nbits=5),
        IVFPQIndex(16, 4, m=2, nbits=4, keep_vectors=False),
    ]
    for j, index in enumerate(made):
        index.train(x)
        index.add(x, ids=rng.permutation(5000)[:700])
        index.remove(index.ids[:50])
        path = tmp_path / f"index{j}.h5"
        index.save(path)
        back = type(index).load(path)
        again = load_index(path)
        assert type(back) is type(index) and back.ntotal == 650 and again.ntotal == 650
        params = {} if isinstance(index, FlatIndex) else {"nprobe": 3}
        for a, b in zip(index.search(q, 5, **params), back.search(q, 5, **params), strict=True):
            assert np.array_equal(a, b)
        assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    with pytest.raises(LayoutMismatchError, match="holds a FlatIndex, not a IVFFlatIndex"):
        IVFFlatIndex.load(tmp_path / "index0.h5")
    import h5py

    with h5py.File(tmp_path / "index0.h5", "a") as f:
        f.attrs["format_version"] = 99
    with pytest.raises(LayoutMismatchError, match="format version 99"):
        load_index(tmp_path / "index0.h5")
    write_ann_hdf5(tmp_path / "data.h5", gaussian_mixture(50, nq=3, dim=4, clusters=2))
    with pytest.raises(LayoutMismatchError, match="not a vector index file"):
        load_index(tmp_path / "data.h5")
    # a save that fails leaves neither a partial file nor a temporary
    bad = FlatIndex(16)
    bad._state = lambda: {"ids": np.zeros(3, np.int64), "vectors": object()}
    with pytest.raises(TypeError):
        bad.save(tmp_path / "broken.h5")
    assert not any(p.name.startswith((".broken", "broken")) for p in tmp_path.iterdir())


def test_bad_input_gives_clear_errors():
    rng = np.random.default_rng()
    index = FlatIndex(4)
    index.add(rng.standard_normal((10, 4)))
    with pytest.raises(ValueError, match="dimension 5 does not match the index dimension 4"):
        index.add(rng.standard_normal((3, 5)))
    with pytest.raises(ValueError, match="dimension 3 does not match"):
        index.search(rng.standard_normal((2, 3)), 1)
    nan = rng.standard_normal((3, 4))
    nan[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite values .first: row 1"):
        index.add(nan)
    with pytest.raises(ValueError, match="NaN"):
        index.search(nan, 2)
    for k in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="k="):
            index.search(rng.standard_normal((2, 4)), k)
    with pytest.raises(ValueError, match="already in the index"):
        index.add(rng.standard_normal((2, 4)), ids=[3, 99])
    with pytest.raises(ValueError, match="not unique"):
        index.add(rng.standard_normal((2, 4)), ids=[50, 50])
    with pytest.raises(ValueError, match="metric="):
        FlatIndex(4, "hamming")
    with pytest.raises(ValueError, match="dim="):
        FlatIndex(0)
    with pytest.raises(ValueError, match="zero vector"):
        FlatIndex(4, "cosine").add(np.zeros((1, 4)))
    with pytest.raises(ValueError, match="not a multiple of m"):
        IVFPQIndex(10, 4, m=3)
    with pytest.raises(ValueError, match="nbits="):
        IVFPQIndex(8, 4, m=2, nbits=9)
    ivf = IVFFlatIndex(4, 16)
    with pytest.raises(ValueError, match="not trained"):
        ivf.add(rng.standard_normal((3, 4)))
    with pytest.raises(ValueError, match="10 training vectors for nlist=16"):
        ivf.train(rng.standard_normal((10, 4)))
    ivf.train(rng.standard_normal((100, 4)))
    with pytest.raises(ValueError, match="nprobe="):
        ivf.search(rng.standard_normal((1, 4)), 1, nprobe=0)
    pq = IVFPQIndex(4, 2, m=2, nbits=4, keep_vectors=False)
    pq.train(rng.standard_normal((100, 4)))
    with pytest.raises(ValueError, match="keep_vectors=True"):
        pq.search(rng.standard_normal((1, 4)), 1, rerank=10)
    with pytest.raises(ValueError, match="unknown parameter"):
        index.search(rng.standard_normal((1, 4)), 1, nprobe=3)


def test_synthetic_sets_are_reproducible_by_row_and_ann_hdf5_round_trips(tmp_path):
    kw = dict(dim=20, clusters=7, intrinsic_dim=5, seed=11)
    whole = mixture_rows(0, 300, **kw)
    assert np.array_equal(whole[120:200], mixture_rows(120, 80, **kw))
    assert not np.array_equal(whole, mixture_rows(0, 300, **{**kw, "seed": 12}))
    # intrinsic dimension: the centred data lies (up to the ambient noise) in 5 dimensions
    sv = np.linalg.svd(whole - whole.mean(axis=0), compute_uv=False)
    assert sv[5] < 0.05 * sv[4]
    ds = gaussian_mixture(500, nq=20, k=7, **kw)
    _check_exact(ds.distances, ds.neighbors, ds.train, ds.test, "l2", 7)
    write_ann_hdf5(tmp_path / "set.h5", ds)
    import h5py

    with h5py.File(tmp_path / "set.h5") as f:  # the ann-benchmarks convention: true distances
        assert set(f) == {"train", "test", "neighbors", "distances"}
        assert f.attrs["distance"] == "euclidean"
        np.testing.assert_allclose(f["distances"][...] ** 2, ds.distances, rtol=1e-5)
    back = read_ann_hdf5(tmp_path / "set.h5")
    assert np.array_equal(back.train, ds.train) and np.array_equal(back.neighbors, ds.neighbors)
    np.testing.assert_allclose(back.distances, ds.distances, rtol=1e-5)
    assert np.array_equal(
        read_ann_hdf5(tmp_path / "set.h5", slice(100, 150)).train, ds.train[100:150]
    )


@pytest.mark.cudasim
@pytest.mark.timeout(300)
def test_gpu_kernels_under_the_cuda_simulator():
    proc = run_cudasim("check_vector_cudasim.py")
    assert "equal the CPU kernels" in proc.stdout


@pytest.mark.gpu
def test_gpu_flat_and_ivf_equal_the_cpu():
    rng = np.random.default_rng()
    x = rng.standard_normal((50000, 64)).astype(np.float32)
    q = rng.standard_normal((300, 64)).astype(np.float32)
    for metric in ("l2", "ip"):
        cpu, gpu = FlatIndex(64, metric, backend="cpu"), FlatIndex(64, metric, backend="gpu")
        cpu.add(x)
        gpu.add(x)
        for k in (10, 300):
            dc, ic = cpu.search(q, k)
            dg, ig = gpu.search(q, k)
            np.testing.assert_allclose(dg, dc, rtol=1e-5)
            assert recall_at_k(ig, ic) > 0.999
        half = FlatIndex(64, metric, backend="gpu", storage="float16")
        half.add(x)
        assert recall_at_k(half.search(q, 10)[1], ic[:, :10]) > 0.9
    cpu, gpu = IVFFlatIndex(64, 64, backend="cpu"), IVFFlatIndex(64, 64, backend="gpu")
    for index in (cpu, gpu):
        index.train(x)
        index.add(x)
    assert recall_at_k(gpu.search(q, 10, nprobe=64)[1], cpu.search(q, 10, nprobe=64)[1]) > 0.999


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_cli_build_search_and_sharded_eval(tmp_path):
    exe = [sys.executable, "-m", "hpc", "vector"]
    data = tmp_path / "data.h5"
    write_ann_hdf5(data, gaussian_mixture(3000, nq=50, dim=16, clusters=10, seed=5, k=10))
    out = subprocess.run(
        [
            *exe,
            "build",
            "--data",
            str(data),
            "--index",
            "ivfflat",
            "--nlist",
            "16",
            "--out",
            str(tmp_path / "ix.h5"),
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert out.returncode == 0, out.stderr
    out = subprocess.run(
        [
            *exe,
            "search",
            "--index",
            str(tmp_path / "ix.h5"),
            "--data",
            str(data),
            "-k",
            "10",
            "--nprobe",
            "16",
            "--json",
            "--out",
            str(tmp_path / "hits.h5"),
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["recall"] == 1.0
    proc = run_mpi(
        2,
        [
            "-m",
            "hpc",
            "vector",
            "eval",
            "--data",
            str(data),
            "--index",
            "ivfpq",
            "--nlist",
            "8",
            "--m",
            "8",
            "--nbits",
            "8",
            "--rerank",
            "100",
            "--nprobe",
            "1,2,8",
            "--plot",
            str(tmp_path / "r.png"),
            "--json",
        ],
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["ranks"] == 2 and record["train"] == 3000
    recalls = [r["recall"] for r in record["sweep"]]
    assert recalls == sorted(recalls) and recalls[-1] > 0.95
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.timeout(300)
def test_bench_knn_prints_the_json_contract_last():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpc",
            "bench",
            "knn",
            "--json",
            "--n",
            "10000",
            "--queries",
            "100",
            "--dim",
            "32",
            "--nlist",
            "64",
            "--m",
            "8",
            "--nprobe",
            "1,4,16,64",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["bench"] == "knn" and record["backend"] == "cpu"
    exact, ivf, pq = record["cases"]
    peer = exact["peers"]["faiss"]
    assert peer["recall_vs_ours"] > 0.999  # FAISS agrees with our exact search
    assert exact["ratio"]["faiss"] == pytest.approx(exact["ours"]["qps"] / peer["qps"])
    assert ivf["ours"]["recall"] >= 0.95 and ivf["peers"]["faiss"]["recall"] >= 0.95
    assert pq["ours"]["recall"] >= 0.8 and "faiss_build" in pq["ratio"]


def test_ivf_grouped_list_gemm_equals_per_query_scan(monkeypatch):
    from hpc.domains.vector import ivf as ivf_module

    rng = np.random.default_rng()
    x = rng.standard_normal((4000, 20)).astype(np.float32)
    q = rng.standard_normal((300, 20)).astype(np.float32)
    allow = rng.choice(4000, size=1500, replace=False)
    for metric in ("l2", "ip"):
        index = IVFFlatIndex(20, 16, metric)
        index.train(x)
        index.add(x)
        for params in ({"nprobe": 3}, {"nprobe": 5, "filter": allow}):
            monkeypatch.setattr(ivf_module, "gemm_min_pairs_per_list", lambda dim: 0.0)
            d1, i1 = index.search(q, 10, **params)
            monkeypatch.setattr(ivf_module, "gemm_min_pairs_per_list", lambda dim: float("inf"))
            d0, i0 = index.search(q, 10, **params)
            np.testing.assert_allclose(d1, d0, rtol=1e-5, atol=1e-5)
            assert (i1 == i0).mean() > 0.999  # float32 GEMM rounding at near-ties aside

