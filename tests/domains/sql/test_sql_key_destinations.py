"""The ranks of the engine's hash exchanges (``key_destinations``): the compiled pass gives
``hash_partition`` of ``key_hash`` on fresh random key columns of every kind (integers of
several widths, floats with -0.0 and NaN, booleans, strings, NULLs), and rows whose keys
are equal as SQL groups them (NULLs equal) go to the same rank."""

from __future__ import annotations

import numpy as np
from hpc.domains.sql import Column
from hpc.domains.sql.physical.exchange import key_destinations, key_hash
from hypothesis import given, settings
from hypothesis import strategies as st

from hpc.shuffle import hash_partition

_KINDS = ["int8", "int32", "int64", "uint16", "float32", "float64", "bool", "string"]


def _column(kind: str, n: int, rng: np.random.Generator, nulls: float) -> Column:
    pool = rng.integers(-3, 4, n)  # few distinct values: many equal keys
    if kind == "string":
        words = np.array(["", "a", "b", "é", "ab", "zz", "a\0"], dtype=object)
        values, kind_name, dictionary = (pool + 3).astype(np.int32), "string", words
    elif kind == "bool":
        values, kind_name, dictionary = pool > 0, "bool", None
    elif kind.startswith("float"):
        table = np.array([-0.0, 0.0, 1.5, np.nan, -2.0, np.inf, 7.0])
        values, kind_name, dictionary = table[pool + 3].astype(kind), "float", None
    else:
        dtype = np.dtype(kind)
        values = (pool if dtype.kind == "i" else pool + 3).astype(dtype)
        kind_name, dictionary = "int", None
    valid = rng.random(n) >= nulls if nulls else None
    return Column(values, kind_name, dictionary, valid)


def _python_key(c: Column, i: int) -> object:
    """Row ``i``'s value as SQL compares it: NULL as None, a string as its text, -0.0 as 0.0,
    NaN as one value, integers of any width as the integer."""
    if c.valid is not None and not c.valid[i]:
        return None
    v = c.values[i]
    if c.kind == "string":
        return str(c.dictionary[int(v)])
    if c.kind == "float":
        return "nan" if np.isnan(v) else float(v) + 0.0
    return int(v)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=3),
       st.integers(0, 3000), st.sampled_from([0.0, 0.3, 0.9]),
       st.sampled_from([1, 2, 3, 8, 300, 70_000]), st.integers(0, 2**32 - 1))
def test_key_destinations_are_the_hash_exchanges_ranks(kinds, n, nulls, ranks, seed):
    rng = np.random.default_rng(seed)
    keys = [_column(kind, n, rng, nulls) for kind in kinds]
    got = key_destinations(keys, ranks)
    want = hash_partition(key_hash(keys).view(np.int64), ranks)
    assert got.dtype.kind in "ui" and np.array_equal(got.astype(np.int64), want)
    assert n == 0 or 0 <= int(got.min()) and int(got.max()) < ranks
    seen: dict[tuple, int] = {}
    for i in range(n):  # equal keys, one rank
        rank = seen.setdefault(tuple(_python_key(c, i) for c in keys), int(got[i]))
        assert rank == int(got[i])


def test_int_columns_of_different_widths_meet() -> None:
    """An int32 key and an int64 key of the same values, and -0.0 against 0.0, go to the
    same ranks (a join of columns of different types)."""
    values = np.arange(-500, 500)
    narrow = key_destinations([Column(values.astype(np.int32), "int")], 5)
    wide = key_destinations([Column(values.astype(np.int64), "int")], 5)
    assert np.array_equal(narrow, wide)
    zeros = key_destinations([Column(np.array([0.0, -0.0, 0.0]), "float")], 7)
    assert len(set(zeros.tolist())) == 1
