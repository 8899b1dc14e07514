"""The k-th best integer by per-thread heaps (``scan_kernels.kth_value``), against a sort, on
fresh inputs: nearly all equal, distinct, sorted either way, masked, k from 1 to all."""

import numpy as np
import pytest
from hpc.domains.sql.scan_kernels import kth_value
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 5, 300, 70_000]),
       st.sampled_from(["equal", "few", "wide", "ascending", "descending"]),
       st.sampled_from([np.int64, np.int32, np.uint16]), st.booleans(), st.booleans(),
       st.integers(1, 400))
def test_kth_value_is_the_sorted_kth(seed, n, shape, dtype, masked, want_max, k):
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    if shape == "equal":
        v = np.where(rng.random(n) < 0.99, 1, rng.integers(0, 5, n))
    elif shape == "few":
        v = rng.integers(0, 4, n)
    else:
        v = rng.integers(0, top, n)
        if shape != "wide":
            v = np.sort(v)[:: 1 if shape == "ascending" else -1]
    v = v.astype(dtype)
    valid = rng.random(n) < 0.7 if masked else None
    kept = np.sort(v if valid is None else v[valid])
    got = kth_value(v, valid, k, want_max)
    if len(kept) < k:
        assert got is None
    else:
        assert got == (kept[-k] if want_max else kept[k - 1])


@pytest.mark.parametrize("want_max", [False, True])
def test_kth_value_over_several_threads_pieces(want_max):
    rng = np.random.default_rng(7)
    v = rng.integers(-10**12, 10**12, 500_000)
    for k in (1, 10, 1000, 60_000):
        expected = np.sort(v)[-k] if want_max else np.sort(v)[k - 1]
        assert kth_value(v, None, k, want_max) == expected
