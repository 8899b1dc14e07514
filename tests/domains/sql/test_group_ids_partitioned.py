"""Group ids of many rows (the partitioned, all-threads path of ``aggregate.group_ids``)
against NumPy's ``unique``: ids dense and numbered in order of first appearance, each
group's first row, on fresh keys of every shape the hashed path takes."""

import numpy as np
from hpc.domains.sql import aggregate
from hypothesis import given, settings
from hypothesis import strategies as st


def _reference(keys: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.ravel()], len(first), np.sort(first)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1 << 18, 300_001]),
       st.sampled_from(["distinct", "many", "few", "extremes", "skewed"]))
def test_partitioned_group_ids_are_uniques_in_first_appearance_order(seed, n, shape):
    rng = np.random.default_rng(seed)
    top = np.iinfo(np.int64)
    if shape == "distinct":
        keys = rng.permutation(n).astype(np.int64) * 1_000_003 - 2**40
    elif shape == "many":
        keys = rng.integers(-2**62, 2**62, n // 3)[rng.integers(0, n // 3, n)]
    elif shape == "few":  # a wide range, few values: not the dense or small-span paths
        keys = rng.choice(np.array([top.min, -1, 0, 2**61, top.max]), n)
    elif shape == "extremes":
        keys = rng.integers(top.min, top.max, n, endpoint=True)
    else:  # one hot key and a long tail
        keys = np.where(rng.random(n) < 0.6, 2**50, rng.integers(0, 2**60, n))
    keys = keys.astype(np.int64)
    ids, groups, first = aggregate.group_ids(keys)
    want_ids, want_groups, want_first = _reference(keys)
    assert groups == want_groups
    assert np.array_equal(ids, want_ids)
    assert np.array_equal(first, want_first)
