"""Exact search by threshold selection (``flat_collect``): every row whose GEMM score may
place it in the exact top k is collected, then ordered by exact distance.

Checked against an independent NumPy float64 brute force on fresh random inputs, bit for bit
(ids and float32 distances, ties to the smaller id): near-ties by the hundred (tiny
perturbations of a few vectors, real-valued, so the GEMM's rounding decides the cut), buffers
forced small so they overflow and the pass is repeated with more room, several database
parts for one query, large k, filters, and the serial switch for one task.
"""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.vector import FlatIndex
from hpc.domains.vector import _kernels as K
from hpc.domains.vector import flat as flat_module


def reference(x, q, metric, k, ids, eligible=None):
    """Top-k by (float32 distance, id): distances summed in float64, rounded to float32."""
    x64, q64 = x.astype(np.float64), q.astype(np.float64)
    if metric == "cosine":  # the index normalises in float32: do the same
        x64 = (x / np.linalg.norm(x64, axis=1)[:, None].astype(np.float32)).astype(np.float64)
        q64 = (q / np.linalg.norm(q64, axis=1)[:, None].astype(np.float32)).astype(np.float64)
    if metric == "l2":
        key = ((q64[:, None, :] - x64[None, :, :]) ** 2).sum(axis=2).astype(np.float32)
    else:
        key = -(q64 @ x64.T).astype(np.float32)
    rows = np.arange(x.shape[0]) if eligible is None else np.flatnonzero(eligible)
    out_i = np.full((q.shape[0], k), -1, dtype=np.int64)
    out_d = np.full((q.shape[0], k), np.inf if metric == "l2" else -np.inf, dtype=np.float32)
    for r in range(q.shape[0]):
        order = rows[np.lexsort((ids[rows], key[r, rows]))][:k]
        out_i[r, : order.size] = ids[order]
        out_d[r, : order.size] = key[r, order] * (1 if metric == "l2" else -1)
    return out_d, out_i


def near_ties(rng, n, dim, centres=3, noise=1e-6):
    """``n`` rows, each a centre plus a perturbation at the GEMM's rounding level."""
    base = rng.standard_normal((centres, dim)).astype(np.float32)
    x = base[rng.integers(0, centres, size=n)]
    return (x + rng.standard_normal((n, dim)).astype(np.float32) * noise).astype(np.float32)


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_near_ties_overflowing_buffers_equal_brute_force(monkeypatch, metric):
    rng = np.random.default_rng()
    n, dim = int(rng.integers(1500, 2500)), int(rng.integers(5, 40))
    x = near_ties(rng, n, dim)
    q = np.concatenate([x[:3], rng.standard_normal((4, dim)).astype(np.float32)])
    ids = rng.permutation(4 * n)[:n].astype(np.int64)
    # small buffers: hundreds of rows within the rounding slack overflow them, and the pass
    # is repeated with four times the room until none does
    monkeypatch.setattr(flat_module, "COLLECT_CAP", 40)
    monkeypatch.setattr(flat_module, "COLLECT_ENTRIES", 64)
    caps: list[int] = []
    passes = flat_module._collect_top_k

    def counted(index, q, k, slack, mask, cap):
        caps.append(cap)
        return passes(index, q, k, slack, mask, cap)

    monkeypatch.setattr(flat_module, "_collect_top_k", counted)
    for db_block in (None, 37):
        index = FlatIndex(dim, metric, db_block=db_block)
        index.add(x, ids)
        for k in (1, 17, 300):
            d, i = index.search(q, k)
            want_d, want_i = reference(x, q, metric, k, ids)
            np.testing.assert_array_equal(i, want_i)
            np.testing.assert_array_equal(d, want_d)
    assert max(caps) > 0, "no buffer overflowed: the repeated pass was not exercised"


def test_one_query_several_parts_filter_and_k_beyond_n_equal_brute_force():
    rng = np.random.default_rng()
    n, dim = 3000, 24
    x = np.concatenate([near_ties(rng, n // 2, dim), rng.standard_normal((n // 2, dim))])
    x = x.astype(np.float32)
    q = x[rng.integers(0, n, size=2)] + np.float32(1e-3)
    ids = np.arange(n, dtype=np.int64)
    index = FlatIndex(dim, "l2", db_block=64)  # one query, several database parts
    index.add(x)
    allow = rng.choice(n, size=n // 3, replace=False)
    eligible = np.isin(ids, allow)
    for k in (5, 100, n // 3 + 4):  # the last: more than the allowed rows
        for one in (q[:1], q):
            d, i = index.search(one, k, filter=allow)
            want_d, want_i = reference(x, one, "l2", k, ids, eligible)
            np.testing.assert_array_equal(i, want_i)
            np.testing.assert_array_equal(d, want_d)


def test_serial_switch_restores_threads_and_nests():
    import numba

    threads = numba.get_num_threads()
    with K.serial_when_small(np.inf, tasks=1):
        assert numba.get_num_threads() == 1
        with K.serial_when_small(0.0), K.dynamic_schedule():
            assert numba.get_num_threads() == 1
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == threads
    with K.serial_when_small(np.inf, tasks=2):
        assert numba.get_num_threads() == threads
