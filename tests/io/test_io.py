"""hpc.io on one rank: bad input, corruption and truncation give clear errors, never bad data."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest
from hpc.io import (
    Checkpoint,
    CorruptDataError,
    LayoutMismatchError,
    StorageError,
    open_file,
    read_array,
    read_table,
    write_array,
    write_table,
    write_xdmf,
)

import hpc


@pytest.fixture
def decomp():
    return hpc.CartDecomposition((12, 10, 8), periodic=True, halo=1)


@pytest.fixture
def state(decomp):
    rng = np.random.default_rng(0)
    u = decomp.allocate(np.float64)
    decomp.interior(u)[...] = rng.standard_normal(decomp.local_shape)
    n = decomp.allocate(np.int32)
    decomp.interior(n)[...] = rng.integers(-1000, 1000, decomp.local_shape)
    return {"u": u, "n": n}


def test_array_round_trip_and_plain_h5py_view(tmp_path, decomp, state):
    path = tmp_path / "a.h5"
    write_array(path, "fields/u", state["u"], decomp, attrs={"units": "m/s"})
    back = read_array(path, "fields/u", decomp)
    assert back.shape == decomp.ghost_shape
    assert np.array_equal(decomp.interior(back), decomp.interior(state["u"]))
    ghosts = back.copy()
    ghosts[decomp.interior_slices] = 0
    assert not ghosts.any(), "ghost cells of a read array are zero, not stale data"
    with h5py.File(path, "r") as f:  # readable without this library, in natural order
        assert f["fields/u"].shape == (12, 10, 8)
        assert np.array_equal(f["fields/u"][...], decomp.interior(state["u"]))
        assert f["fields/u"].attrs["units"] == "m/s"
    with open_file(path, "r") as f:
        assert "fields" in f


def test_bad_arrays_are_refused_before_the_file_exists(tmp_path, decomp):
    path = tmp_path / "never.h5"
    with pytest.raises(StorageError, match="does not match its block"):
        write_array(path, "u", np.zeros((12, 10, 8)), decomp)
    with pytest.raises(StorageError, match="cannot be stored"):
        write_array(path, "u", np.zeros(decomp.ghost_shape, dtype="U3"), decomp)
    assert not path.exists(), "nothing half-written"


def test_reading_the_wrong_thing_names_it(tmp_path, decomp, state):
    path = tmp_path / "a.h5"
    write_array(path, "u", state["u"], decomp)
    with pytest.raises(StorageError, match=r"no such dataset.*'v'"):
        read_array(path, "v", decomp)
    other = hpc.CartDecomposition((12, 10, 9), halo=1)
    with pytest.raises(LayoutMismatchError, match=r"stored shape \(12, 10, 8\)"):
        read_array(path, "u", other)
    with pytest.raises(LayoutMismatchError, match="dtype"):
        read_array(path, "u", decomp, dtype=np.float32)
    with pytest.raises(StorageError, match="missing.h5"):
        read_array(tmp_path / "missing.h5", "u", decomp)


def test_table_round_trip_with_nan_nat_unicode_and_empty(tmp_path):
    cols = {
        "k": np.array([3, 1, 2], dtype=np.int16),
        "v": np.array([np.nan, 1.5, -np.inf]),
        "ok": np.array([True, False, True]),
        "name": np.array(["ü", "", "日本"], dtype=object),
        "t": np.array(["2024-01-01T12:00", "NaT", "1970-01-01"], dtype="datetime64[m]"),
    }
    path = tmp_path / "t.h5"
    assert write_table(path, "trades", cols) == 3
    back = read_table(path, "trades")
    assert list(back) == list(cols)
    assert back["k"].dtype == np.int16 and np.array_equal(back["k"], cols["k"])
    assert np.array_equal(back["v"], cols["v"], equal_nan=True)
    assert back["ok"].dtype == bool and np.array_equal(back["ok"], cols["ok"])
    assert back["name"].tolist() == ["ü", "", "日本"]
    assert back["t"].dtype == np.dtype("datetime64[m]")
    assert np.array_equal(back["t"], cols["t"], equal_nan=True)
    empty = {k: v[:0] for k, v in cols.items()}
    empty["name"] = np.array([], dtype=str)
    assert write_table(path, "none", empty) == 0
    assert all(len(v) == 0 for v in read_table(path, "none").values())
    with pytest.raises(StorageError, match=r"no column\(s\) \['zz'\]"):
        read_table(path, "trades", columns=["zz"])
    with pytest.raises(StorageError, match="no such table"):
        read_table(path, "nothing")


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"a": np.arange(3), "b": np.arange(4)}, "different lengths"),
        ({"a": np.zeros((2, 2))}, "is 2-D"),
        ({"a": np.array([1, "x"], dtype=object)}, "not numeric"),
        ({}, "at least one column"),
    ],
)
def test_bad_tables_are_refused_before_the_file_exists(tmp_path, columns, message):
    path = tmp_path / "t.h5"
    with pytest.raises(StorageError, match=message):
        write_table(path, "t", columns)
    assert not path.exists()


def test_checkpoint_metadata_keep_and_stale_temporaries(tmp_path, decomp, state):
    ckpt = Checkpoint(tmp_path, keep=2)
    (tmp_path / ".checkpoint_0000000001.h5.tmp-deadbeef").write_bytes(b"half")
    for step in (1, 2, 3):
        ckpt.save(step, state, decomp, attrs={"dt": 0.01, "step": step})
    assert ckpt.steps() == [2, 3] and ckpt.latest() == 3
    assert sorted(os.listdir(tmp_path)) == ["checkpoint_0000000002.h5", "checkpoint_0000000003.h5"]
    loaded = ckpt.load()
    assert loaded.step == 3 and loaded.attrs == {"dt": 0.01, "step": 3}
    assert loaded.meta["nranks"] == 1 and json.loads(loaded.meta["dims"]) == [1, 1, 1]
    assert loaded.meta["library_version"] == hpc.__version__ and loaded.meta["created"]
    for name in state:
        assert loaded.arrays[name].dtype == state[name].dtype
        assert np.array_equal(decomp.interior(loaded.arrays[name]), decomp.interior(state[name]))
    with pytest.raises(StorageError, match="JSON"):
        ckpt.save(4, state, decomp, attrs={"bad": object()})
    with pytest.raises(StorageError, match="non-negative"):
        ckpt.save(-1, state, decomp)
    assert ckpt.latest() == 3


def _saved(tmp_path, decomp, state):
    ckpt = Checkpoint(tmp_path)
    return ckpt, ckpt.save(7, state, decomp)


def test_a_flipped_byte_in_a_dataset_is_caught(tmp_path, decomp, state):
    ckpt, path = _saved(tmp_path, decomp, state)
    with h5py.File(path, "r") as f:
        where = f["u"].id.get_chunk_info(0).byte_offset + 100
    with open(path, "r+b") as fh:
        fh.seek(where)
        byte = fh.read(1)
        fh.seek(where)
        fh.write(bytes([byte[0] ^ 0x5A]))
    with pytest.raises(CorruptDataError, match=r"checkpoint_0000000007\.h5.*dataset 'u'"):
        ckpt.load(7, decomp)


def test_a_truncated_checkpoint_is_caught(tmp_path, decomp, state):
    ckpt, path = _saved(tmp_path, decomp, state)
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(CorruptDataError, match=r"checkpoint_0000000007\.h5"):
        ckpt.load(7, decomp)
    assert ckpt.latest() is None, "a damaged file is never taken for a checkpoint"


def test_a_missing_or_reshaped_dataset_is_caught(tmp_path, decomp, state):
    ckpt, path = _saved(tmp_path, decomp, state)
    with h5py.File(path, "r+") as f:
        del f["n"]
    with pytest.raises(CorruptDataError, match="missing.*dataset 'n'"):
        ckpt.load(7, decomp)
    with h5py.File(path, "r+") as f:
        f.create_dataset("n", data=np.zeros((12, 10, 7), np.int32), fletcher32=True)
    with pytest.raises(LayoutMismatchError, match=r"\(12, 10, 7\).*dataset 'n'"):
        ckpt.load(7, decomp)
    with h5py.File(path, "r+") as f:
        del f["n"]
        f.create_dataset("n", data=np.zeros((12, 10, 8), np.int64), fletcher32=True)
    with pytest.raises(LayoutMismatchError, match="int64.*dataset 'n'"):
        ckpt.load(7, decomp)


def test_a_checkpoint_without_its_marker_is_not_complete(tmp_path, decomp, state):
    ckpt, path = _saved(tmp_path, decomp, state)
    with h5py.File(path, "r+") as f:
        f.attrs["complete"] = 0
    assert ckpt.latest() is None
    with pytest.raises(CorruptDataError, match="complete"):
        ckpt.load(7, decomp)
    with pytest.raises(StorageError, match="no complete checkpoint"):
        ckpt.load()


def test_reader_layout_must_match_the_checkpoint(tmp_path, decomp, state):
    ckpt, _ = _saved(tmp_path, decomp, state)
    with pytest.raises(LayoutMismatchError, match="global shape"):
        ckpt.load(7, hpc.CartDecomposition((12, 10), halo=1))


def test_xdmf_sidecar_describes_the_datasets(tmp_path, decomp, state):
    path = tmp_path / "fields.h5"
    write_array(path, "u", state["u"], decomp)
    write_array(path, "n", state["n"], decomp)
    xmf = write_xdmf(path, ["u", "n"], spacing=(0.1, 0.1, 0.2))
    root = ET.parse(xmf).getroot()
    topo = root.find(".//Topology")
    assert topo.get("TopologyType") == "3DCoRectMesh" and topo.get("Dimensions") == "13 11 9"
    items = {a.get("Name"): a.find("DataItem") for a in root.iter("Attribute")}
    assert items["u"].text == "fields.h5:/u" and items["u"].get("Precision") == "8"
    assert items["n"].get("NumberType") == "Int" and items["n"].get("Dimensions") == "12 10 8"
