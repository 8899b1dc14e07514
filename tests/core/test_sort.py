"""``hpc.sort.stable_argsort`` against NumPy's stable argsort on fresh keys: few and many
bits, ties, sorted either way, every digit shared, short and long."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpc.sort import stable_argsort


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 100, 20_000, 70_001]),
       st.sampled_from([1, 7, 8, 9, 16, 33, 62]),
       st.sampled_from(["random", "ties", "ascending", "descending", "high_only"]))
def test_stable_argsort_is_numpys_stable_order(seed, n, bits, shape):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2**bits, n, dtype=np.int64)
    if shape == "ties":
        keys = keys % 5
    elif shape == "ascending":
        keys = np.sort(keys)
    elif shape == "descending":
        keys = np.sort(keys)[::-1].copy()
    elif shape == "high_only":  # low digits all equal: those passes are skipped
        keys = (keys >> 16) << 16
    assert np.array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


def test_negative_keys_are_refused():
    keys = np.arange(-5, 20_000, dtype=np.int64)
    with pytest.raises(ValueError, match="non-negative"):
        stable_argsort(keys)
