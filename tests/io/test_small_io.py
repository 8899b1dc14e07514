"""Small arrays: written and read through rank 0 on several ranks, and a rewritten dataset
reused in place (no new file space, attributes replaced)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from hpc.io import read_array, write_array

import hpc
from tests.conftest import mpi_script, run_mpi


def test_rewriting_a_dataset_reuses_it_and_replaces_its_attributes(tmp_path):
    d = hpc.CartDecomposition((40, 30), periodic=False, halo=1)
    u = d.allocate(np.float64)
    path = tmp_path / "a.h5"
    sizes = []
    for step in range(3):
        d.interior(u)[...] = step
        attrs = {"step": step, f"only{step}": 1}
        write_array(path, "u", u, d, attrs=attrs)
        write_array(path, "c", u, d, checksum=True)
        sizes.append(path.stat().st_size)
        with h5py.File(path) as f:
            assert dict(f["u"].attrs) == attrs  # the previous write's attributes are gone
            assert f["c"].fletcher32
        assert (d.interior(read_array(path, "u", d)) == step).all()
        assert (d.interior(read_array(path, "c", d)) == step).all()
    assert sizes[1] == sizes[2]  # rewritten in place: the file does not grow


def test_a_dataset_of_another_layout_or_linked_elsewhere_is_replaced(tmp_path):
    d = hpc.CartDecomposition((8, 6), periodic=False, halo=1)
    path = tmp_path / "b.h5"
    write_array(path, "u", d.allocate(np.float64), d)
    with h5py.File(path, "a") as f:
        f["keep"] = f["u"]  # a second hard link: rewriting "u" must leave it as it was
    u = d.allocate(np.float32)
    d.interior(u)[...] = 7
    write_array(path, "u", u, d)  # another dtype: a new dataset
    v = d.allocate(np.float32)
    d.interior(v)[...] = 9
    write_array(path, "u", v, d, checksum=True)  # another layout: a new dataset
    write_array(path, "keep", v, d)  # linked twice: a new dataset, "u" untouched
    with h5py.File(path, "a") as f:
        assert f["u"].dtype == np.float32 and f["u"].fletcher32
        assert (f["u"][...] == 9).all() and (f["keep"][...] == 9).all()
        f["soft"] = h5py.SoftLink("/keep")
    w = d.allocate(np.float32)
    write_array(path, "soft", w, d)  # a soft link is replaced, not written through
    with h5py.File(path) as f:
        assert (f["keep"][...] == 9).all() and (f["soft"][...] == 0).all()


@pytest.mark.mpi
@pytest.mark.timeout(240)
def test_small_arrays_through_rank_0_agree_on_errors(tmp_path):
    proc = run_mpi(2, [str(mpi_script("check_small_io.py")), str(tmp_path)])
    lines: dict[int, list[str]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("rank "):
            rank, _, text = line[5:].partition(": ")
            lines.setdefault(int(rank), []).append(text)
    assert sorted(lines) == [0, 1]
    assert lines[0] == lines[1], proc.stdout  # the same outcomes, word for word
    out = lines[0]
    assert out[:2] == ["read back True", "read back True"]
    assert out[2].startswith("no directory: MissingDataError: opening for writing"), out[2]
    assert out[3].startswith("missing: MissingDataError"), out[3]
    assert out[4].startswith("layout: LayoutMismatchError"), out[4]
    assert out[5].startswith("no file: MissingDataError: opening with mode 'r'"), out[5]
    with h5py.File(tmp_path / "small.h5") as f:
        assert dict(f["u"].attrs) == {"step": 2}
