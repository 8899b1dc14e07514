"""Halo exchange equals ``np.pad`` of the global array (1-3-D, halo 1-3, random shapes) on one
rank in this process and on two under mpirun; the pack kernels (serial, threaded, and the one
call over a table of groups) against NumPy slicing for runs of 1, 2, 3 and more elements."""

from __future__ import annotations

import numpy as np
import pytest

from hpc import pack
from tests.conftest import mpi_script, run_mpi
from tests.core.check_halo_pad import check_case, random_cases


def _region(box):
    return tuple(slice(box[i], box[i] + box[3 + i]) for i in range(3))


@pytest.mark.parametrize("method", ["p2p", "rma"])
@pytest.mark.parametrize("pattern", ["sweep", "direct"])
def test_one_rank_matches_np_pad(method, pattern):
    from hpc.comm import world

    comm = world()
    if comm.size != 1:
        pytest.skip("a one-rank test")
    for shape, periodic, halo in random_cases(np.random.default_rng(11), 1, 18):
        check_case(shape, periodic, halo, method, pattern, comm)


def test_one_rank_large_wrap_matches_np_pad():
    """Faces large enough for the threaded kernel (when numba has threads)."""
    from hpc.comm import world

    check_case((36, 150, 150), (True, True, True), 3, "p2p", "sweep", world())
    check_case((700, 300), (True, False), 2, "p2p", "sweep", world())


@pytest.mark.mpi
@pytest.mark.timeout(200)
def test_two_ranks_match_np_pad():
    proc = run_mpi(2, [str(mpi_script("check_halo_pad.py"))], timeout=180)
    assert "cases passed on 2 ranks" in proc.stdout


@pytest.mark.parametrize("n2", [1, 2, 3, 5, 40])
@pytest.mark.parametrize("threaded", [False, True])
def test_kernels_move_the_boxes_numpy_slicing_moves(n2, threaded, monkeypatch):
    if threaded:
        monkeypatch.setattr(pack, "_PARALLEL_MIN", 0)
    rng = np.random.default_rng(n2)
    shape = (9, 11, 3 * n2 + 5)  # n = n2 + 5 owned cells between two halos of n2
    a = rng.standard_normal(shape)
    n = shape[2] - 2 * n2
    # the two faces of the last axis wrapped: both land in the same rows
    src = [(0, 0, n2, 9, 11, n2), (0, 0, n, 9, 11, n2)]
    dst = [(0, 0, n + n2, 9, 11, n2), (0, 0, 0, 9, 11, n2)]
    want = a.copy()
    for s, d in zip(src, dst, strict=True):
        want[_region(d)] = a[_region(s)]
    move = pack.BoxMove(shape, "copy", src, targets=dst)
    got = a.copy()
    move(got)
    assert np.array_equal(got, want)
    if threaded and pack.numba.get_num_threads() > 1:
        assert move._parallel_calls and move._table is None
    elif not threaded:
        assert move._table is not None and not move._parallel_calls
    boxes = [*dst, (1, 2, n2, 3, 4, n2)]  # disjoint; two groups of sizes
    sizes = [pack.count(b) for b in boxes]
    offsets = list(np.cumsum([0] + sizes[:-1]))
    buf = np.full(sum(sizes) + 1, np.nan)
    pack.BoxMove(shape, "pack", boxes, offsets)(a, buf)
    assert np.array_equal(buf[:-1], np.concatenate([a[_region(b)].ravel() for b in boxes]))
    assert np.isnan(buf[-1])
    back = np.zeros_like(a)
    pack.BoxMove(shape, "unpack", boxes, offsets)(back, buf)
    mask = np.zeros(shape, bool)
    for b in boxes:
        assert np.array_equal(back[_region(b)], a[_region(b)])
        mask[_region(b)] = True
    assert (back[~mask] == 0).all()
    assert not pack.BoxMove(shape, "copy", [], targets=[])
