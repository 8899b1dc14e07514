"""Overflow-checked int64 arithmetic against Python's unbounded integers."""

from __future__ import annotations

import itertools

import numpy as np
from hpc.domains.sql.physical.checked import checked
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import fuzz

I64 = (-(2**63), 2**63 - 1)
EDGES = [0, 1, -1, 2, -2, 3037000499, 3037000500, -3037000500, 2**31, 2**32, 2**62, -(2**62),
         2**63 - 1, -(2**63)]
OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


def _expect(op: str, x: int, y: int, lo: int, hi: int) -> tuple[int | None, bool]:
    exact = OPS[op](x, y)
    return (exact if I64[0] <= exact <= I64[1] else None), not lo <= exact <= hi


def test_every_pair_of_edge_values():
    for (x, y), op in itertools.product(itertools.product(EDGES, EDGES), OPS):
        out, bad = checked(op, np.array([x]), np.array([y]), None, *I64)
        exact, over = _expect(op, x, y, *I64)
        assert bad == over, (op, x, y)
        if not over:
            assert int(out[0]) == exact


@fuzz(200)
@given(st.lists(st.tuples(st.integers(*I64), st.integers(*I64), st.booleans()), min_size=1,
                max_size=40), st.sampled_from(sorted(OPS)),
       st.integers(1, 18))
def test_random_rows_with_a_decimal_range_and_nulls(rows, op, digits):
    lo, hi = -(10**digits) + 1, 10**digits - 1
    a = np.array([r[0] for r in rows], dtype=np.int64)
    b = np.array([r[1] for r in rows], dtype=np.int64)
    valid = np.array([r[2] for r in rows])
    _, bad = checked(op, a, b, valid, lo, hi)
    want = any(_expect(op, int(x), int(y), lo, hi)[1] for x, y, v in rows if v)
    assert bad == want


@fuzz(100)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(*I64), st.booleans()), max_size=60))
def test_group_sums_are_exact_or_say_they_overflow(rows):
    from hpc.domains.sql.physical.checked import group_sums

    ids = np.array([r[0] for r in rows], dtype=np.int64)
    values = np.array([r[1] for r in rows], dtype=np.int64)
    mask = np.array([r[2] for r in rows], dtype=bool)
    sums, counts, over = group_sums(ids, values, mask, 5)
    for g in range(5):
        exact = sum(v for i, v, m in rows if i == g and m)
        assert counts[g] == sum(1 for i, _, m in rows if i == g and m)
        assert bool(over[g]) == (not I64[0] <= exact <= I64[1])
        if not over[g]:
            assert int(sums[g]) == exact


@fuzz(100)
@given(st.lists(st.integers(*I64), min_size=0, max_size=30), st.integers(*I64),
       st.sampled_from(sorted(OPS)), st.booleans(), st.booleans())
def test_a_constant_operand_is_read_for_every_row(values, constant, op, first, view):
    # a constant as a Python scalar or as a column broadcast from one value (stride 0), on
    # either side: the same rows as the constant written out, and no row more
    column = np.array(values, dtype=np.int64)
    if view:
        const = np.broadcast_to(np.array(constant, dtype=np.int64), column.shape)
    else:
        const = constant
    a, b = (const, column) if first else (column, const)
    out, bad = checked(op, a, b, None, *I64)
    assert len(out) == len(values)
    expect = [_expect(op, *((constant, v) if first else (v, constant)), *I64) for v in values]
    assert bad == any(over for _, over in expect)
    if not bad:
        assert out.tolist() == [e for e, _ in expect]


@fuzz(20)
@given(st.integers(0, 3), st.sampled_from([1, 3, 5000]), st.integers(0, 2**32))
def test_fused_group_sums_equal_each_column_summed_alone(columns, ngroups, seed):
    """Several columns' sums in one pass (chunked over rows above 65,536 rows, the chunks
    fewer when the groups are many) equal each column's exact sums, NULLs skipped, and
    an overflowing group is flagged."""
    from hpc.domains.sql.physical.checked import group_sums_many

    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 7, 70_000]))
    ids = rng.integers(0, ngroups, n)
    values = [rng.integers(-(2**40), 2**40, n) for _ in range(columns + 1)]
    if n:
        values[0][ids == 0] = 2**62  # group 0 of the first column overflows with 2 rows
    masks = [None if k % 2 else rng.random(n) < 0.8 for k in range(columns + 1)]
    got = group_sums_many(ids, values, masks, ngroups)
    for v, m, (sums, counts, over) in zip(values, masks, got, strict=True):
        keep = np.ones(n, bool) if m is None else m
        exact = np.zeros(ngroups, dtype=object)  # Python integers: unbounded
        np.add.at(exact, ids[keep], v[keep].astype(object))
        assert np.array_equal(counts, np.bincount(ids[keep], minlength=ngroups))
        fits = np.array([I64[0] <= int(x) <= I64[1] for x in exact])
        assert np.array_equal(over, ~fits)
        assert all(int(a) == int(b) for a, b in zip(sums[fits], exact[fits], strict=True))
