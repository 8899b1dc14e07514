"""Merged runs and short-run moves of :mod:`hpc.pack`, against NumPy slicing and ``np.pad``."""

from __future__ import annotations

import numpy as np
import pytest

import hpc
from hpc import pack


def _flat_indices(box, shape3):
    """Flat indices of ``box`` in C order, by brute force."""
    idx = np.arange(np.prod(shape3)).reshape(shape3)
    lo, n = box[:3], box[3:]
    return idx[tuple(slice(lo[k], lo[k] + n[k]) for k in range(3))].ravel()


def _random_box(rng, shape3):
    lo = [int(rng.integers(0, s)) for s in shape3]
    n = [int(rng.integers(1, s - lo_k + 1)) for s, lo_k in zip(shape3, lo, strict=True)]
    # often span whole rows or planes, the cases that merge
    if rng.random() < 0.5:
        lo[2], n[2] = 0, shape3[2]
        if rng.random() < 0.5:
            lo[1], n[1] = 0, shape3[1]
    return (*lo, *n)


def test_merged_runs_visit_the_same_elements_in_the_same_order():
    rng = np.random.default_rng()
    for _ in range(300):
        shape3 = tuple(int(x) for x in rng.integers(1, 7, size=3))
        box = _random_box(rng, shape3)
        n0, n1, n2 = pack.merge_runs(box[3:], shape3)
        assert n0 * n1 * n2 == pack.count(box)
        start = (box[0] * shape3[1] + box[1]) * shape3[2] + box[2]
        s0, s1 = shape3[1] * shape3[2], shape3[2]
        walked = [
            start + i * s0 + j * s1 + k for i in range(n0) for j in range(n1) for k in range(n2)
        ]
        np.testing.assert_array_equal(walked, _flat_indices(box, shape3))


def test_whole_rows_and_planes_become_one_run_per_plane_and_one_run():
    shape3 = (5, 6, 7)
    assert pack.merge_runs((5, 2, 7), shape3) == (5, 1, 14)
    assert pack.merge_runs((3, 6, 7), shape3) == (1, 1, 126)
    assert pack.merge_runs((5, 6, 2), shape3) == (5, 6, 2)  # strided: unchanged


@pytest.mark.parametrize("width", [1, 2, 3])
def test_large_strided_moves_match_numpy_slicing(width):
    """Faces of the last axis of a large array: pack, unpack and a periodic wrap copy, each
    against slices (the short-run kernel, one loop per run length)."""
    rng = np.random.default_rng()
    shape3 = (40, 61, 70 + width)
    a = rng.standard_normal(shape3)
    n = shape3[2] - 2 * width
    lo_face = (0, 0, width, shape3[0], shape3[1], width)
    hi_face = (0, 0, n, shape3[0], shape3[1], width)
    size = pack.count(lo_face)
    sl = np.s_[:, :, width : 2 * width], np.s_[:, :, n : n + width]

    packer = pack.BoxMove(shape3, "pack", [lo_face, hi_face], offsets=[0, size])
    buf = np.empty(2 * size)
    packer(a, buf)
    np.testing.assert_array_equal(buf, np.concatenate([a[sl[0]].ravel(), a[sl[1]].ravel()]))

    b = np.zeros(shape3)
    pack.BoxMove(shape3, "unpack", [lo_face, hi_face], offsets=[0, size])(b, buf)
    expect = np.zeros(shape3)
    expect[sl[0]], expect[sl[1]] = a[sl[0]], a[sl[1]]
    np.testing.assert_array_equal(b, expect)

    wrapped = a.copy()
    ghosts = [(0, 0, 0, shape3[0], shape3[1], width), (0, 0, n + width, *shape3[:2], width)]
    pack.BoxMove(shape3, "copy", [hi_face, lo_face], targets=ghosts)(wrapped)
    expect = a.copy()
    expect[:, :, :width], expect[:, :, n + width :] = a[sl[1]], a[sl[0]]
    np.testing.assert_array_equal(wrapped, expect)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("halo", [1, 2, 3])
@pytest.mark.parametrize("components", [1, 2])
def test_exchange_on_one_rank_equals_a_periodic_pad(halo, components):
    """Every axis wraps onto this rank (all phases are self-copies, chained in one call):
    ghosts equal ``np.pad(..., mode="wrap")`` of the owned cells, bit for bit."""
    shape = (30, 60, 80)
    d = hpc.CartDecomposition(shape, periodic=True, halo=halo)
    rng = np.random.default_rng()
    owned = rng.standard_normal((components, *shape))
    with hpc.HaloExchange(d, np.float64, components=components) as ex:
        a = np.full(ex.array_shape, np.nan)
        inner = tuple(slice(halo, halo + s) for s in shape)
        if components == 1:
            a[inner] = owned[0]
        else:
            a[(slice(None), *inner)] = owned
        ex.exchange(a)
    pad = [(0, 0)] + [(halo, halo)] * 3
    expect = np.pad(owned, pad, mode="wrap")
    np.testing.assert_array_equal(a.reshape(expect.shape), expect)


@pytest.mark.parametrize("rows", [3, 40])
def test_large_moves_of_whole_rows_and_planes_match_numpy_slicing(rows):
    """Boxes of whole rows (one run per plane) and whole planes (one run), large enough for the
    threaded kernel where there are threads: pack, then unpack and copy, against slices."""
    rng = np.random.default_rng()
    shape3 = (12, 90, 230)
    a = rng.standard_normal(shape3)
    rows_box = (0, 2, 0, shape3[0], rows, shape3[2])  # whole rows of every plane
    planes_box = (3, 0, 0, 4, shape3[1], shape3[2])  # whole planes
    sl = [np.s_[:, 2 : 2 + rows, :], np.s_[3:7]]
    sizes = [pack.count(rows_box), pack.count(planes_box)]
    buf = np.empty(sum(sizes))
    pack.BoxMove(shape3, "pack", [rows_box, planes_box], offsets=[0, sizes[0]])(a, buf)
    np.testing.assert_array_equal(buf, np.concatenate([a[sl[0]].ravel(), a[sl[1]].ravel()]))
    b = np.zeros(shape3)
    pack.BoxMove(shape3, "unpack", [rows_box, planes_box], offsets=[0, sizes[0]])(b, buf)
    expect = np.zeros(shape3)
    expect[sl[0]], expect[sl[1]] = a[sl[0]], a[sl[1]]
    np.testing.assert_array_equal(b, expect)
    c = a.copy()
    target = (0, 2 + rows, 0, shape3[0], rows, shape3[2])
    pack.BoxMove(shape3, "copy", [rows_box], targets=[target])(c)
    expect = a.copy()
    expect[:, 2 + rows : 2 + 2 * rows] = a[sl[0]]
    np.testing.assert_array_equal(c, expect)


def _region(box):
    return tuple(slice(box[k], box[k] + box[3 + k]) for k in range(3))


@pytest.mark.parametrize("threaded", [False, True])
@pytest.mark.parametrize("boxes", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("width", [1, 2, 3, 4, 7, 31])
def test_short_runs_in_any_number_of_boxes_match_numpy_slicing(width, boxes, threaded, monkeypatch):
    """Groups of 1-5 equally sized boxes of short runs (moved two boxes at a time, an odd one
    alone) of every run length the specialised loops handle, copied, packed and unpacked,
    on one thread and split over threads: the same elements as NumPy slicing moves."""
    if threaded:
        monkeypatch.setattr(pack, "_PARALLEL_MIN", 0)
    rng = np.random.default_rng()
    # disjoint column bands of width ``width``: sources in even bands, targets in odd ones
    shape3 = (int(rng.integers(2, 6)), int(rng.integers(3, 30)), 2 * boxes * width + 3)
    a = rng.standard_normal(shape3)
    i0, j0 = int(rng.integers(0, 2)), int(rng.integers(0, 3))
    n0, n1 = shape3[0] - i0, shape3[1] - j0
    src = [(i0, j0, 2 * b * width, n0, n1, width) for b in range(boxes)]
    dst = [(i0, j0, (2 * b + 1) * width, n0, n1, width) for b in reversed(range(boxes))]

    move = pack.BoxMove(shape3, "copy", src, targets=dst)
    got = a.copy()
    move(got)
    want = a.copy()
    for s, d in zip(src, dst, strict=True):
        want[_region(d)] = a[_region(s)]
    np.testing.assert_array_equal(got, want)

    size = pack.count(src[0])
    offsets = [b * size for b in range(boxes)]
    buf = np.full(boxes * size + 1, np.nan)
    pack.BoxMove(shape3, "pack", src, offsets)(a, buf)
    np.testing.assert_array_equal(buf[:-1], np.concatenate([a[_region(s)].ravel() for s in src]))
    assert np.isnan(buf[-1])  # nothing written past the boxes
    back = np.zeros(shape3)
    pack.BoxMove(shape3, "unpack", dst, offsets)(back, buf)
    want = np.zeros(shape3)
    for s, d in zip(src, dst, strict=True):
        want[_region(d)] = a[_region(s)]
    np.testing.assert_array_equal(back, want)
