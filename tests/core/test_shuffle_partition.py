"""hpc.shuffle.group_by_destination: the counting sort that groups rows by destination rank,
against NumPy's stable argsort and bincount."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpc.shuffle import _CHUNK_ROWS, _take, group_by_destination, hash_partition


def _check(dest: np.ndarray, nparts: int) -> None:
    order, counts = group_by_destination(dest, nparts)
    assert order.dtype == np.int64 and counts.dtype == np.int64
    assert np.array_equal(order, np.argsort(dest, kind="stable"))
    assert np.array_equal(counts, np.bincount(dest, minlength=nparts))


@st.composite
def _destinations(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    nparts = draw(st.sampled_from([1, 2, 3, 8, 64, 1000]))
    # up to several chunks, so the threaded passes run, and lengths round the chunk size
    n = draw(
        st.one_of(
            st.integers(0, 3),
            st.integers(0, 2000),
            st.integers(_CHUNK_ROWS - 2, _CHUNK_ROWS + 2),
            st.integers(2 * _CHUNK_ROWS, 5 * _CHUNK_ROWS + 7),
        )
    )
    kind = draw(st.sampled_from(["uniform", "same", "skewed"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "uniform":
        dest = rng.integers(0, nparts, n)
    elif kind == "same":
        dest = np.full(n, rng.integers(0, nparts), dtype=np.int64)
    else:  # most rows to one destination, a few spread over the rest
        dest = np.where(rng.random(n) < 0.95, nparts - 1, rng.integers(0, nparts, n))
    dtypes = [np.int64, np.int32, np.int16] + ([np.uint8] if nparts <= 256 else [])
    return dest.astype(draw(st.sampled_from(dtypes))), nparts


@settings(max_examples=60, deadline=None)
@given(_destinations())
def test_counting_sort_equals_stable_argsort(case):
    dest, nparts = case
    _check(dest, nparts)


@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_one_row(n):
    _check(np.zeros(n, dtype=np.int64), 4)


def test_more_destinations_than_rows():
    # fewer histogram chunks than threads would give: every chunk row is one cell per part
    rng = np.random.default_rng()
    _check(rng.integers(0, 1 << 16, 3 * _CHUNK_ROWS), 1 << 16)


@pytest.mark.parametrize("bad", [-1, 4, 1 << 40])
def test_out_of_range_raises(bad):
    rng = np.random.default_rng()
    dest = rng.integers(0, 4, 3 * _CHUNK_ROWS)
    dest[len(dest) // 2] = bad
    with pytest.raises(ValueError, match=r"outside \[0, 4\)"):
        group_by_destination(dest, 4)


def _hash_reference(keys: np.ndarray, nparts: int) -> np.ndarray:
    # the Fibonacci hash in 64-bit NumPy arithmetic (wrapping), then the modulo
    k = keys.astype(np.uint64)
    h = (k * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    return (h % np.uint64(nparts)).astype(np.int64)


@settings(max_examples=40, deadline=None)
@given(
    n=st.one_of(st.integers(0, 100), st.integers(_CHUNK_ROWS, 3 * _CHUNK_ROWS)),
    nparts=st.sampled_from([1, 2, 3, 7, 8, 64, 1000, 2**31 - 1, 2**32 - 1]),
    dtype=st.sampled_from([np.int64, np.int32, np.int8, np.uint64, np.uint16]),
    seed=st.integers(0, 2**32 - 1),
)
def test_hash_partition_equals_numpy_formula(n, nparts, dtype, seed):
    info = np.iinfo(dtype)
    keys = np.random.default_rng(seed).integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    with np.errstate(over="ignore"):
        expected = _hash_reference(keys, nparts)
    assert np.array_equal(hash_partition(keys, nparts), expected)


@pytest.mark.parametrize(
    "dtype", [np.int64, np.float64, np.int32, np.float32, np.int16, np.bool_, "datetime64[ns]"]
)
@pytest.mark.parametrize("n", [0, 5, 3 * _CHUNK_ROWS + 1])
def test_shuffle_packing_equals_fancy_indexing(dtype, n):
    rng = np.random.default_rng()
    col = rng.integers(-(2**40), 2**40, n).astype(dtype)
    strided = rng.integers(0, 100, 2 * n)[::2].astype(np.int64, copy=False)
    order = rng.permutation(n)
    for c in (col, strided):
        got = _take(c, order)
        assert got.dtype == c.dtype and np.array_equal(got.view(np.uint8), c[order].view(np.uint8))
