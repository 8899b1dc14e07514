"""Box moves (pack, unpack, copy): CPU kernels, and numba.cuda kernels under the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from hpc import pack
from tests.conftest import run_cudasim


def random_boxes(rng, shape, count):
    """Random boxes inside ``shape``; half of them share one extent (the grouped path)."""
    boxes = []
    shared = [int(rng.integers(1, max(2, s // 2))) for s in shape]
    for b in range(count):
        n = shared if b % 2 else [int(rng.integers(1, s + 1)) for s in shape]
        lo = [int(rng.integers(0, s - m + 1)) for s, m in zip(shape, n, strict=True)]
        boxes.append((*lo, *n))
    return boxes


def region(box):
    return tuple(slice(box[i], box[i] + box[3 + i]) for i in range(3))


@pytest.mark.parametrize("shape", [(1, 1, 40), (1, 300, 300), (20, 30, 64), (70, 80, 1)])
def test_pack_and_unpack_match_numpy_slicing(shape):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape)
    boxes = random_boxes(rng, shape, 6)
    sizes = [pack.count(b) for b in boxes]
    offsets = list(np.cumsum([0] + sizes[:-1]))
    buf = np.full(sum(sizes) + 2, np.nan)
    pack.BoxMove(shape, "pack", boxes, offsets)(a, buf)
    want = np.concatenate([a[region(b)].ravel() for b in boxes])
    assert np.array_equal(buf[:-2], want)
    assert np.isnan(buf[-2:]).all(), "pack wrote past its boxes"
    b = np.zeros_like(a)
    pack.BoxMove(shape, "unpack", boxes, offsets)(b, buf)
    for box in boxes:
        assert np.array_equal(b[region(box)], a[region(box)])
    mask = np.zeros(shape, bool)
    for box in boxes:
        mask[region(box)] = True
    assert (b[~mask] == 0).all(), "unpack wrote outside its boxes"


def test_copy_moves_boxes_within_the_array():
    a = np.arange(6 * 7 * 8, dtype=np.float64).reshape(6, 7, 8)
    src = [(0, 0, 6, 6, 7, 1), (0, 0, 1, 6, 7, 1), (1, 2, 2, 2, 3, 4)]
    dst = [(0, 0, 0, 6, 7, 1), (0, 0, 7, 6, 7, 1), (4, 4, 2, 2, 3, 4)]
    want = a.copy()
    for s, d in zip(src, dst, strict=True):
        want[region(d)] = a[region(s)]
    pack.BoxMove(a.shape, "copy", src, targets=dst)(a)
    assert np.array_equal(a, want)


def test_contiguity_and_flat_ranges():
    shape3 = (4, 5, 6)
    assert pack.is_contiguous((2, 0, 0, 1, 5, 6), shape3)
    assert pack.is_contiguous((0, 0, 0, 2, 5, 6), shape3)
    assert pack.is_contiguous((1, 3, 1, 1, 1, 4), shape3)
    assert not pack.is_contiguous((0, 0, 0, 2, 4, 6), shape3)
    assert not pack.is_contiguous((0, 0, 0, 1, 2, 5), shape3)
    a = np.arange(120).reshape(shape3)
    lo, hi = pack.flat_range((2, 1, 0, 1, 4, 6), shape3)
    assert np.array_equal(a.reshape(-1)[lo:hi], a[2, 1:5, :].ravel())


def test_as3d_is_a_view():
    a = np.zeros((4, 5))
    v = pack.as3d(a)
    v[0, 1, 2] = 3
    assert v.shape == (1, 4, 5) and a[1, 2] == 3


def test_bad_move_kind():
    with pytest.raises(ValueError, match="kind='swap'"):
        pack.BoxMove((1, 1, 4), "swap", [])


@pytest.mark.cudasim
@pytest.mark.timeout(300)
def test_cuda_kernels_under_the_simulator():
    proc = run_cudasim("check_pack_cudasim.py", timeout=240)
    assert "boxes ok" in proc.stdout
