"""Fused SUMs of integer and DECIMAL arithmetic per group against Python's unbounded
integers: random expression trees over columns with NULLs and values near the int64 and
DECIMAL limits, each operation checked as SQL checks it (the sums exact, or no answer
where an operation or a sum overflows); and the operation-at-a-time path on the same
trees."""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.sql.errors import SQLError
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.types import SQLType
from hpc.domains.sql.physical.checked import group_sums_many
from hpc.domains.sql.physical.evaluate import Batch, evaluate
from hpc.domains.sql.physical.sum_programs import SumPrograms, compile_sums
from hpc.domains.sql.table import Column
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import fuzz

I64 = (-(2**63), 2**63 - 1)
BIG = [2**31, 3037000500, 2**40, 2**62, 2**63 - 1, -(2**63), 10**17, 10**18 - 1]
COLUMNS = {  # name -> type
    "a": SQLType("decimal", precision=9, scale=2),
    "b": SQLType("decimal", precision=18, scale=3),
    "i": SQLType("integer", 32),
    "j": SQLType("integer", 64),
}


def _limits(t: SQLType) -> tuple[int, int]:
    if t.kind == "integer" and t.bits < 64:
        return -(2 ** (t.bits - 1)), 2 ** (t.bits - 1) - 1
    if t.kind == "decimal" and t.precision <= 18:
        return -(10**t.precision) + 1, 10**t.precision - 1
    return I64


def _scale(t: SQLType) -> int:
    return t.scale if t.kind == "decimal" else 0


def _call(name: str, args: tuple[E.Expr, ...], precision: int) -> E.Expr:
    """``name(args)`` with a result type the fused path takes as DuckDB's arithmetic does:
    a sum at the larger scale, a product at the sum of the scales."""
    kinds = {a.type.kind for a in args}
    if kinds == {"integer"}:
        return E.Call(name, args, SQLType("integer", 64 if precision > 12 else 32))
    scales = [_scale(a.type) for a in args]
    scale = sum(scales) if name == "mul" else max(scales)
    return E.Call(name, args, SQLType("decimal", precision=max(precision, scale, 1),
                                      scale=scale))


leaves = st.one_of(
    st.sampled_from([E.Ref(n, t) for n, t in COLUMNS.items()]),
    st.integers(-50, 50).map(lambda v: E.Literal(v, SQLType("integer", 32))),
)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    binary = st.tuples(st.sampled_from(["add", "sub", "mul"]), children, children,
                       st.integers(4, 18)).map(lambda t: _call(t[0], (t[1], t[2]), t[3]))
    neg = st.tuples(children, st.integers(4, 18)).map(lambda t: _call("neg", (t[0],), t[1]))
    return st.one_of(binary, neg)


trees = st.recursive(leaves, _extend, max_leaves=6)


def _reference(e: E.Expr, row: dict[str, int | None]) -> tuple[int | None, bool]:
    """The value of ``e`` on one row (None: NULL) and whether an operation whose operands
    were not NULL left int64 or its type's range."""
    if isinstance(e, E.Ref):
        return row[e.name], False
    if isinstance(e, E.Literal):
        return int(e.value) * 10 ** _scale(e.type), False
    t = e.type
    args = (E.Literal(0, t), e.args[0]) if e.name == "neg" else e.args
    name = "sub" if e.name == "neg" else e.name
    values, bad = [], False
    for a in args:
        v, b = _reference(a, row)
        bad |= b
        if v is not None and t.kind == "decimal" and name != "mul":
            v = v * 10 ** (t.scale - _scale(a.type))  # aligned up to the result's scale
            bad |= not I64[0] <= v <= I64[1]
        values.append(v)
    x, y = values
    if x is None or y is None:
        return None, bad
    r = {"add": x + y, "sub": x - y, "mul": x * y}[name]
    lo, hi = _limits(t)
    return r, bad or not lo <= r <= hi


def _table(rows: list[tuple[int, ...]]) -> dict[str, Column]:
    cols = {}
    for k, (name, t) in enumerate(COLUMNS.items()):
        values = np.array([r[k] for r in rows], dtype=np.int64)
        valid = np.array([r[k + 4] for r in rows], dtype=bool)
        lo, hi = _limits(t)
        values = np.clip(values, lo, hi)  # a column holds values of its type
        cols[name] = Column(values, "decimal" if t.kind == "decimal" else "int", None, valid)
    return cols


def _check(exprs: list[E.Expr], cols: dict[str, Column], ids: np.ndarray, ngroups: int):
    n = len(ids)
    rows = [{k: (int(c.values[r]) if c.valid is None or c.valid[r] else None)
             for k, c in cols.items()} for r in range(n)]
    programs = compile_sums(exprs)
    if programs is None:  # nothing to fuse: one argument without arithmetic
        assert len(exprs) == 1 and isinstance(exprs[0], E.Ref | E.Literal)
        programs = SumPrograms()
        programs.add(exprs[0])
    got = programs.sums(Batch(cols, n), ids, ngroups)
    per_row = [[_reference(e, row) for row in rows] for e in exprs]
    if any(bad for values in per_row for _, bad in values):
        assert got is None
        with pytest.raises(SQLError, match="overflow"):
            batch = Batch(cols, n)
            for e in exprs:
                evaluate(e, batch)
        return
    want = []
    for values in per_row:
        sums, counts = [0] * ngroups, [0] * ngroups
        for g, (v, _) in zip(ids.tolist(), values, strict=True):
            if v is not None:
                sums[g] += v
                counts[g] += 1
        want.append((sums, counts))
    if any(not I64[0] <= s <= I64[1] for sums, _ in want for s in sums):
        assert got is None
        return
    assert got is not None
    for (sums, counts, over), (w_sums, w_counts) in zip(got, want, strict=True):
        assert [int(s) for s in sums] == w_sums
        assert [int(c) for c in counts] == w_counts
        assert not over.any()
    # the operation-at-a-time path gives the same sums
    batch = Batch(cols, n)
    args = [evaluate(e, batch) for e in exprs]
    plain = group_sums_many(ids, [a.values for a in args], [a.valid for a in args], ngroups)
    for (sums, counts, _), (p_sums, p_counts, _) in zip(got, plain, strict=True):
        assert np.array_equal(sums, p_sums) and np.array_equal(counts, p_counts)


values = st.one_of(st.integers(-(10**6), 10**6),
                   st.sampled_from([v for v in BIG + [-v for v in BIG] if I64[0] <= v <= I64[1]]),
                   st.integers(*I64))
row = st.tuples(values, values, values, values,
                st.booleans(), st.booleans(), st.booleans(), st.booleans())


@fuzz(150)
@given(st.lists(trees, min_size=1, max_size=4), st.lists(row, min_size=1, max_size=40),
       st.integers(1, 5), st.data())
def test_random_trees_on_rows_near_the_limits(exprs, rows, ngroups, data):
    ids = np.array(data.draw(st.lists(st.integers(0, ngroups - 1), min_size=len(rows),
                                      max_size=len(rows))), dtype=np.int64)
    _check(exprs, _table(rows), ids, ngroups)


@pytest.mark.parametrize("ngroups", [3, 5000])
def test_blocks_chunks_and_shared_arguments_on_many_rows(ngroups):
    # more rows than a block and than a chunk; Q1's shape: a product that a later SUM
    # multiplies again, SUM and AVG of one column
    rng = np.random.default_rng(ngroups)
    n = 70_001
    a, b = COLUMNS["a"], COLUMNS["b"]
    cols = {
        "a": Column(rng.integers(-(10**6), 10**6, n), "decimal", None, rng.random(n) > 0.1),
        "b": Column(rng.integers(-(10**6), 10**6, n), "decimal"),
        "i": Column(rng.integers(-100, 100, n), "int"),
        "j": Column(rng.integers(-100, 100, n), "int", None, rng.random(n) > 0.5),
    }
    ids = rng.integers(0, ngroups, n)
    one = E.Literal(1, SQLType("integer", 32))
    rest = _call("sub", (one, E.Ref("b", b)), 18)
    product = _call("mul", (E.Ref("a", a), rest), 18)
    exprs = [E.Ref("a", a), product, _call("mul", (product, _call("add", (one, E.Ref(
        "i", COLUMNS["i"])), 9)), 18), E.Ref("a", a), E.Ref("j", COLUMNS["j"])]
    _check(exprs, cols, ids, ngroups)
