"""The IVF-PQ list scan (``scan_pq``: rows scored four at a time) and the one-pass input
check (``check_rows``: finite values, zero rows, cosine normalisation).

References: a NumPy float64 evaluation of the PQ estimate from the index's own centroids,
codebooks and codes; NumPy's ``isfinite`` / ``einsum`` / division for the input check. Fresh
random inputs each run.
"""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.vector import FlatIndex, IVFPQIndex, load_index
from hpc.domains.vector import _kernels as K


def _seed() -> int:
    return int(np.random.SeedSequence().entropy % (1 << 32))


def pq_estimates(index: IVFPQIndex, q: np.ndarray) -> np.ndarray:
    """``(nq, ntotal)`` PQ estimates in float64, for every stored row as if its list were
    probed (the scan's score: L2 ``||q - c - r||^2``, else ``-q.(c + r)``)."""
    lists = np.repeat(np.arange(index.nlist), index.list_sizes)
    books = index.codebooks.astype(np.float64)
    recon = np.concatenate(
        [books[s][index.codes[:, s]] for s in range(index.m)], axis=1
    )  # (n, dim) residuals
    x = index.centroids.astype(np.float64)[lists] + recon
    q64 = q.astype(np.float64)
    if index.metric == "l2":
        return ((q64[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)
    return -(q64 @ x.T)


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_pq_scan_equals_float64_estimates(metric):
    """Every returned PQ estimate is the float64 estimate of its row (float32 rounding of
    a sum of ``m`` terms), and no row left out has a clearly better estimate; with an
    allow-list only allowed rows come back."""
    rng = np.random.default_rng(_seed())
    dim = int(rng.choice([8, 12, 24]))
    m = int(rng.choice([d for d in (2, 3, 4, 6) if dim % d == 0]))
    n, nlist, k = int(rng.integers(600, 1500)), int(rng.integers(4, 12)), int(rng.integers(1, 40))
    x = rng.standard_normal((n, dim)).astype(np.float32)
    q = rng.standard_normal((int(rng.integers(1, 9)), dim)).astype(np.float32)
    index = IVFPQIndex(dim, nlist, m=m, nbits=int(rng.integers(4, 9)), metric=metric, niter=4)
    index.train(x)
    index.add(x, ids=rng.permutation(n).astype(np.int64) * 3)
    allow = rng.choice(index.ids, size=n // 2, replace=False)
    for filt in (None, allow):
        d, ids = index.search(q, k, nprobe=nlist, filter=filt)
        qn = index._check_vectors(q, "queries")
        est = pq_estimates(index, qn)  # smaller is better
        keep = np.ones(n, dtype=bool) if filt is None else np.isin(index.ids, filt)
        pos = {int(v): p for p, v in enumerate(index.ids)}
        # the float32 terms' size: |q|^2 + |x|^2 (L2), |q| |x| (inner products)
        qmax = float(np.abs(qn).sum(axis=1).max())
        xmax = float(np.abs(x).sum(axis=1).max()) if metric != "cosine" else dim**0.5
        scale = (qmax + xmax) ** 2 if metric == "l2" else qmax * xmax
        for r in range(q.shape[0]):
            got = np.array([pos[int(v)] for v in ids[r]])
            assert keep[got].all()
            score = d[r].astype(np.float64) if metric == "l2" else -d[r].astype(np.float64)
            np.testing.assert_allclose(
                score, est[r, got], rtol=0, atol=4 * (m + dim) * 2**-24 * scale
            )
            assert np.all(np.diff(score) >= 0)
            worst_left = np.sort(est[r, keep])[k - 1]
            assert score[-1] <= worst_left + 8 * (m + dim) * 2**-24 * scale


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_pq_scores_do_not_depend_on_a_rows_place_in_its_list(metric, tmp_path):
    """A row's estimate is the same whether it is scored in a group of four or in a list's
    remainder: removing rows shifts the others, and their estimates stay bit for bit (a
    shard holds a list's rows at other places than one process does)."""
    rng = np.random.default_rng(_seed())
    dim, n, nlist = 16, 900, 5
    x = rng.standard_normal((n, dim)).astype(np.float32)
    q = rng.standard_normal((3, dim)).astype(np.float32)
    index = IVFPQIndex(dim, nlist, m=8, nbits=6, metric=metric, niter=3)
    index.train(x)
    index.add(x)
    index.save(tmp_path / "pq.h5")
    before_d, before_i = index.search(q, n, nprobe=nlist)
    for drop in (1, 2, 3):
        part = load_index(tmp_path / "pq.h5")
        gone = rng.choice(n, size=drop * 7, replace=False)
        part.remove(gone)
        d, i = part.search(q, n - gone.size, nprobe=nlist)
        for r in range(q.shape[0]):
            ref = dict(zip(before_i[r].tolist(), before_d[r].tolist(), strict=True))
            assert all(ref[int(a)] == b for a, b in zip(i[r], d[r], strict=True))


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_pq_scan_ties_go_to_the_smaller_id(metric):
    """Rows of equal estimate at the cut of the top-k: the scan tests a row against the
    heap's worst score before pushing it, and a row *equal* to that score must still be
    offered (the smaller id wins). Duplicated rows (same list, same codes: the same
    estimate bit for bit) stored in random id order; every returned row's duplicates of
    smaller id come back too, with or without an allow-list (reference: the definition)."""
    rng = np.random.default_rng(_seed())
    dim, m, nlist = 8, 4, int(rng.integers(2, 6))
    # few distinct rows, many copies: most cuts of the top-k fall inside a group of ties
    base = rng.integers(-3, 4, (int(rng.integers(20, 40)), dim)).astype(np.float32)
    x = np.repeat(base, rng.integers(4, 12, base.shape[0]), axis=0)
    n = x.shape[0]
    index = IVFPQIndex(dim, nlist, m=m, nbits=int(rng.integers(3, 6)), metric=metric, niter=3)
    index.train(x)
    index.add(x, ids=rng.permutation(n).astype(np.int64))
    lists = np.repeat(np.arange(nlist), index.list_sizes)
    key = [(int(lists[p]), index.codes[p].tobytes()) for p in range(n)]
    q = rng.integers(-3, 4, (4, dim)).astype(np.float32)
    allow = rng.choice(index.ids, size=n // 2, replace=False)
    for filt in (None, allow, None, allow):
        keep = np.ones(n, dtype=bool) if filt is None else np.isin(index.ids, filt)
        k = int(rng.integers(1, int(keep.sum()) + 1))
        d, got_ids = index.search(q, k, nprobe=nlist, filter=filt)
        for r in range(q.shape[0]):
            got = set(got_ids[r].tolist())
            assert len(got) == k
            for v in got:
                p = int(np.flatnonzero(index.ids == v)[0])
                twins = [p2 for p2 in range(n) if keep[p2] and key[p2] == key[p]]
                assert all(int(index.ids[p2]) in got for p2 in twins if index.ids[p2] < v)
            order = np.lexsort((got_ids[r], d[r] if metric == "l2" else -d[r]))
            assert np.array_equal(order, np.arange(k))


def test_check_rows_equals_numpy():
    """Counts and first rows of non-finite and zero rows, and the normalisation, against
    NumPy (integer-valued rows: the float64 sums are exact, so bit for bit; real rows of
    any scale: within one float32 rounding)."""
    rng = np.random.default_rng(_seed())
    for _ in range(20):
        n, dim = int(rng.integers(1, 60)), int(rng.integers(1, 300))
        a = rng.integers(-9, 10, (n, dim)).astype(np.float32)
        a[:, 0] = 11  # no zero rows
        norms = np.sqrt(np.einsum("ij,ij->i", a, a, dtype=np.float64))
        out = np.empty_like(a)
        assert K.check_rows(a, True, out) == (0, -1, 0, -1)
        assert np.array_equal(out, a / norms[:, None].astype(np.float32))
        r = (rng.standard_normal((n, dim)) * 10.0 ** rng.uniform(-15, 15)).astype(np.float32)
        ref = r / np.sqrt(np.einsum("ij,ij->i", r, r, dtype=np.float64))[:, None].astype(np.float32)
        K.check_rows(r, True, out)
        np.testing.assert_array_max_ulp(out, ref, maxulp=1)
        bad = rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False)
        zero = np.setdiff1d(rng.choice(n, size=int(rng.integers(0, n + 1))), bad)
        b = a.copy()
        b[zero] = 0
        b[bad, rng.integers(0, dim, bad.size)] = rng.choice([np.nan, np.inf, -np.inf], bad.size)
        first_bad = int(bad.min()) if bad.size else -1
        got = K.check_rows(b, True, np.empty_like(b))
        if bad.size:
            assert got == (bad.size, first_bad, 0, -1)
        else:
            assert got == (0, -1, zero.size, int(zero.min()) if zero.size else -1)
        assert K.check_rows(b, False, b)[:2] == (bad.size, first_bad)


def test_query_check_errors_and_identity():
    """The index's input check: the error names the count and the first bad row; l2 rows
    already float32 and contiguous come back as they are (no copy); cosine rows are
    normalised like NumPy's division by the float64 norm."""
    flat = FlatIndex(3)
    x = np.ones((4, 3), dtype=np.float32)
    assert flat._check_vectors(x) is x
    bad = x.copy()
    bad[2, 1] = np.nan
    bad[3, 0] = np.inf
    with pytest.raises(
        ValueError, match=r"2 row\(s\) hold NaN or infinite values \(first: row 2\)"
    ):
        flat._check_vectors(bad, "queries")
    cos = FlatIndex(3, "cosine")
    z = x.copy()
    z[1] = 0
    with pytest.raises(ValueError, match=r"1 zero vector\(s\) \(first: row 1\)"):
        cos._check_vectors(z)
    v = np.array([[3, 4, 0], [1, 2, 2]], dtype=np.int64)
    assert np.array_equal(
        cos._check_vectors(v), np.array([[0.6, 0.8, 0], [1 / 3, 2 / 3, 2 / 3]], np.float32)
    )
    assert cos._check_vectors(np.empty((0, 3))).shape == (0, 3)
    ro = np.array([[3, 4, 0]], dtype=np.float32)
    ro.setflags(write=False)  # read-only input (a memory map, an HDF5 read) is accepted
    assert flat._check_vectors(ro) is ro
    assert np.array_equal(cos._check_vectors(ro), np.array([[0.6, 0.8, 0]], np.float32))


def test_radix_selection_equals_lexsort():
    """The nearest-list selection above ``RADIX_MIN_SELECT`` (radix selection, then a heap
    sort): the ``nsel`` smallest by ``(score, position)`` as NumPy's ``lexsort`` orders
    them, on scores with many ties, both zeros, infinities and every sign."""
    rng = np.random.default_rng(_seed())
    for trial in range(300):
        n = int(rng.integers(1, 700))
        nsel = int(rng.integers(1, n + 1))
        if trial % 3 == 0:  # few distinct values: ties at the cut
            scores = rng.integers(-3, 4, n).astype(np.float32)
        else:
            scores = (rng.standard_normal(n) * 10.0 ** rng.uniform(-30, 30)).astype(np.float32)
        special = rng.random(n)
        scores[special < 0.05] = 0.0
        scores[(special >= 0.05) & (special < 0.1)] = -0.0
        scores[(special >= 0.1) & (special < 0.12)] = np.inf
        scores[(special >= 0.12) & (special < 0.14)] = -np.inf
        ld = np.empty(nsel, dtype=np.float32)
        lp = np.empty(nsel, dtype=np.int64)
        K._radix_smallest(scores, ld, lp)
        K._c_heapify(ld, lp, nsel, np.arange(n, dtype=np.int64))
        K._c_sort_heap(ld, lp, nsel, np.arange(n, dtype=np.int64))
        ref = np.lexsort((np.arange(n), scores))[:nsel]
        assert np.array_equal(lp, ref)
        assert np.array_equal(ld, scores[ref])
