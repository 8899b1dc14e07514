"""hpc.io.describe: the tables and arrays of files written by write_table and write_array, with
random columns and shapes, as read_table and read_array give them back."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from hpc.io import (
    CorruptDataError,
    MissingDataError,
    StorageError,
    describe,
    read_table,
    write_array,
    write_table,
)

import hpc
from hpc.comm import self_comm

_NUMBERS = ["<f8", "<f4", "<i8", "<i4", "<u2", "|i1", "<f2", ">i8"]  # table columns
_ARRAYS = [*_NUMBERS, "<c16", "<c8", "|b1"]


def _random_column(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "number":
        dtype = np.dtype(rng.choice(_NUMBERS))
        return (rng.standard_normal(n) * 100).astype(dtype)
    if kind == "bool":
        return rng.random(n) < 0.5
    if kind == "datetime":
        unit = str(rng.choice(["D", "s", "ms"]))
        return np.datetime64("2000-01-01", unit) + rng.integers(0, 10_000, n)
    words = np.array(["", "a", "bb", "é", "日本", "x y", "zz" * 20])
    return words[rng.integers(0, len(words), n)]


@pytest.mark.parametrize("seed", range(6))
def test_describe_matches_what_was_written_and_what_reads_back(tmp_path, seed):
    rng = np.random.default_rng(seed)
    path = tmp_path / "f.h5"
    tables, arrays = {}, {}
    for t in range(int(rng.integers(1, 4))):
        name = f"t{t}" if t % 2 == 0 else f"grp/t{t}"
        n = int(rng.integers(0, 50))
        kinds = rng.choice(["number", "bool", "datetime", "string"], int(rng.integers(1, 6)))
        columns = {f"c{j}": _random_column(rng, str(k), n) for j, k in enumerate(kinds)}
        write_table(path, name, columns, comm=self_comm())
        tables[name] = (n, columns)
    for a in range(int(rng.integers(1, 4))):
        name = f"a{a}" if a % 2 else f"fields/sub/a{a}"
        shape = tuple(int(s) for s in rng.integers(2, 7, int(rng.integers(1, 4))))
        dtype = np.dtype(rng.choice(_ARRAYS))
        decomp = hpc.CartDecomposition(shape, periodic=True, halo=1, comm=self_comm())
        write_array(path, name, decomp.allocate(dtype), decomp)
        arrays[name] = (shape, dtype)

    d = describe(path)
    assert list(d["tables"]) == sorted(tables)
    assert list(d["arrays"]) == sorted(arrays)
    for name, (n, columns) in tables.items():
        got = d["tables"][name]
        assert got["rows"] == n
        assert list(got["columns"]) == list(columns)  # the stored order
        back = read_table(path, name, comm=self_comm())
        for col, values in columns.items():
            info = got["columns"][col]
            if values.dtype.kind == "U":
                assert info == {"kind": "string", "dtype": "str",
                                "entries": len(set(values.tolist()))}
                assert back[col].dtype.kind == "U"
            else:
                kind = {"b": "bool", "M": "datetime"}.get(values.dtype.kind, "number")
                assert info == {"kind": kind, "dtype": values.dtype.str}
                assert back[col].dtype.str == info["dtype"]
    for name, (shape, dtype) in arrays.items():
        assert d["arrays"][name] == {"shape": shape, "dtype": dtype.str}


def test_describe_of_a_file_without_hpc_io_content(tmp_path):
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.zeros((3, 2), np.int16)
        f.create_group("empty")
    assert describe(path) == {"tables": {}, "arrays": {"x": {"shape": (3, 2), "dtype": "<i2"}}}


def test_describe_errors_name_the_file(tmp_path):
    with pytest.raises(MissingDataError, match="missing.h5"):
        describe(tmp_path / "missing.h5")
    (tmp_path / "text.h5").write_text("not HDF5\n")
    with pytest.raises(StorageError, match="text.h5"):
        describe(tmp_path / "text.h5")
    path = tmp_path / "broken.h5"
    write_table(path, "t", {"a": np.arange(3), "s": np.array(["x", "y", "z"])},
                comm=self_comm())
    with h5py.File(path, "a") as f:
        del f["t/_dictionary/s"]
    with pytest.raises(CorruptDataError, match="table 't'"):
        describe(path)
