"""Decomposition properties on virtual rank counts (no MPI needed), and its input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpc import CartDecomposition, chunk, plan_dims

shapes = st.lists(st.integers(1, 70), min_size=1, max_size=3).map(tuple)


@settings(max_examples=300, deadline=None)
@given(shape=shapes, nranks=st.integers(1, 64), data=st.data())
def test_blocks_tile_the_domain_once_and_are_balanced(shape, nranks, data):
    periodic = tuple(data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape))))
    plans = CartDecomposition.plan(shape, nranks, periodic=periodic, halo=1)
    cover = np.zeros(shape, dtype=np.int64)
    for d in plans:
        cover[d.local_slices] += 1
        assert d.local_shape == tuple(s.stop - s.start for s in d.local_slices)
        assert d.offset == tuple(s.start for s in d.local_slices)
    assert (cover == 1).all(), "every cell is owned by exactly one rank"
    assert math.prod(plans[0].dims) == nranks
    for axis in range(len(shape)):
        extents = {d.local_shape[axis] for d in plans}
        assert max(extents) - min(extents) <= 1, f"axis {axis} unbalanced: {sorted(extents)}"


@settings(max_examples=200, deadline=None)
@given(shape=shapes, nranks=st.integers(1, 64), periodic=st.booleans())
def test_neighbours_are_mutual(shape, nranks, periodic):
    plans = CartDecomposition.plan(shape, nranks, periodic=periodic)
    for d in plans:
        for direction, peer in d.neighbours.items():
            if peer is None:
                continue
            back = tuple(-s for s in direction)
            assert plans[peer].neighbour(back) == d.rank
            # the neighbour's block touches ours along every axis of the direction
            for axis, s in enumerate(direction):
                mine, theirs = d.local_slices[axis], plans[peer].local_slices[axis]
                n = shape[axis]
                if s == 1:
                    assert theirs.start % n == mine.stop % n
                elif s == -1:
                    assert mine.start % n == theirs.stop % n
                else:
                    assert mine == theirs


def test_chunk_spreads_the_remainder_over_the_low_ranks():
    assert [chunk(10, 4, i) for i in range(4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert [chunk(2, 4, i) for i in range(4)] == [(0, 1), (1, 2), (2, 2), (2, 2)]


def test_plan_dims_prefers_small_surfaces_and_honours_fixed_entries():
    assert plan_dims(16, (1000, 1000)) == (4, 4)  # faces of 250 beat slabs of 1000
    assert plan_dims(4, (100, 100)) == (4, 1)  # equal face area: fewer neighbours win
    assert plan_dims(4, (1000, 10)) == (4, 1)
    assert plan_dims(64, (256, 256, 256)) == (4, 4, 4)
    assert plan_dims(6, (60, 60), dims=(0, 3)) == (2, 3)
    with pytest.raises(ValueError, match="cannot be completed"):
        plan_dims(6, (60, 60), dims=(4, 0))


def test_index_maps_round_trip():
    d = CartDecomposition.plan((10, 7), 4, halo=2)[3]
    g = (d.offset[0] + 1, d.offset[1])
    assert d.owns(g)
    assert d.local_to_global(d.global_to_local(g)) == g
    assert d.global_to_local(d.offset) == (2, 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(global_shape=(4, 4, 4, 4)), "1-D, 2-D or 3-D"),
        (dict(global_shape=(4, 0)), "at least one cell"),
        (dict(global_shape=(4, 4), periodic=(True,)), "entries"),
        (dict(global_shape=(4,), halo=-1), "halo=-1"),
        (dict(global_shape=(4, 4), dims=(3, 1)), "cannot be completed"),
    ],
)
def test_bad_input_names_the_problem(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CartDecomposition(**kwargs)


def test_allocate_and_interior_on_one_rank():
    d = CartDecomposition((5, 6), halo=2)
    a = d.allocate(np.float32)
    assert a.shape == (9, 10) and a.dtype == np.float32 and a.flags.c_contiguous
    d.interior(a)[...] = 1
    assert a.sum() == 30
    with pytest.raises(ValueError, match="does not match"):
        d.interior(np.zeros((5, 6)))
    g = np.arange(30.0).reshape(5, 6)
    assert np.array_equal(d.gather(d.scatter(g)), g)
