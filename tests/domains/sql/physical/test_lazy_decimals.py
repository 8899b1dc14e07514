"""Late-converted DECIMAL columns: a gather of few rows (or of a filter's ascending rows)
converted from Parquet's chunks alone equals the whole column converted and then gathered,
for any chunking, scale and row order."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hpc.domains.sql.physical.lazy_decimals import SELECTIVE, LazyDecimals, lazy_decimal
from hpc.domains.sql.table import Decimals
from hypothesis import given, settings
from hypothesis import strategies as st


def _column(values: list[list[int]], scales: list[int]) -> Decimals:
    """Decimal128 chunks of unscaled ``values`` at per-chunk ``scales``."""
    chunks = [pa.array([Decimal(v).scaleb(-s) for v in part], type=pa.decimal128(38, s))
              for part, s in zip(values, scales, strict=True)]
    return Decimals(chunks, sum(len(p) for p in values))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_few_rows_convert_as_the_whole_column_would(data):
    nchunks = data.draw(st.integers(1, 4))
    scale = data.draw(st.integers(0, 4))
    scales = [data.draw(st.integers(0, scale)) for _ in range(nchunks)]
    parts = [data.draw(st.lists(st.integers(-10**12, 10**12), min_size=0, max_size=40))
             for _ in range(nchunks)]
    n = sum(map(len, parts))
    # the exact scaled values, independently: each chunk's integers raised to the scale
    expected = np.array([v * 10 ** (scale - s) for part, s in zip(parts, scales, strict=True)
                         for v in part], dtype=np.int64)
    few = data.draw(st.booleans())  # few rows (any order), or as many as a filter keeps
    rows = data.draw(st.lists(st.integers(0, max(n - 1, 0)),
                              max_size=max(n // SELECTIVE, 0) if few else n))
    index = np.array(rows if n else [], dtype=np.int64)
    ascending = data.draw(st.booleans())
    if ascending:
        index = np.sort(index)  # a filter's rows, else a join's (any order, repeats)
    lazy = lazy_decimal(_column(parts, scales), scale)
    assert isinstance(lazy, LazyDecimals)
    got = lazy.gather(index)
    assert got.kind == "decimal" and got.valid is None
    np.testing.assert_array_equal(got.values, expected[index])
    # converted only the rows: few of them, or a filter's (ascending) of any number
    ascending = len(index) < 2 or bool((index[1:] >= index[:-1]).all())
    assert lazy._values is None or (SELECTIVE * len(index) > n and not ascending)
    np.testing.assert_array_equal(lazy.values, expected)  # then the whole column


def test_a_gather_of_many_rows_converts_the_column_once():
    lazy = lazy_decimal(_column([[1, 2, 3, 4]], [2]), 2)
    got = lazy.take(np.array([3, 2, 1, -1]))  # -1: a NULL row of an outer join
    np.testing.assert_array_equal(got.values[:3], [4, 3, 2])
    assert got.valid.tolist() == [True, True, True, False]
    assert lazy._values is not None


@pytest.mark.parametrize("value", [2**62, -(2**62)])
def test_values_wider_than_the_scale_allows_take_the_whole_column_path(value):
    # 2**62 at scale 0 raised to scale 2 leaves int64: the chunk path declines it
    lazy = lazy_decimal(_column([[value] + [1] * 15], [0]), 2)
    assert lazy._converted(np.array([0])) is None
