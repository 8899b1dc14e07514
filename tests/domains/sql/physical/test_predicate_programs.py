"""Predicate programs: the rows a filter keeps through its program (one pass, NOT pushed to
the leaves, ranges merged, strings looked up by code) are the rows where DuckDB finds the
condition TRUE, on random tables with NULLs, NaNs and DECIMALs still in Parquet-like chunks,
under random trees of AND, OR and NOT."""

from __future__ import annotations

import datetime
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INTEGER,
    VARCHAR,
    SQLType,
)
from hpc.domains.sql.physical import executor, predicate_programs
from hpc.domains.sql.physical.join import Side
from hpc.domains.sql.physical.lazy_decimals import LazyDecimals
from hpc.domains.sql.table import Column, Decimals
from hypothesis import given, settings
from hypothesis import strategies as st

DEC = SQLType("decimal", 0, 15, 2)
WORDS = ["", "AIR", "AIR REG", "MAIL", "MED BOX", "SHIP", "ab", "ba%"]
_SQL_OP = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_EPOCH = datetime.date(1970, 1, 1)


def _b(name: str, *args: E.Expr) -> E.Expr:
    return E.Call(name, tuple(args), BOOLEAN)


def _literal(kind: str, draw: st.DrawFn) -> tuple[E.Expr, str]:
    """A constant of column ``kind``'s type (sometimes NULL), as an expression and as SQL."""
    if draw(st.integers(0, 12)) == 0:
        t = {"i": BIGINT, "f": DOUBLE, "d": DEC, "dt": DATE, "s": VARCHAR}[kind]
        return E.Literal(None, t), f"CAST(NULL AS {'VARCHAR' if kind == 's' else t})"
    if kind == "i":
        v = draw(st.integers(-4, 4))
        return E.Literal(v, BIGINT), f"{v}::BIGINT"
    if kind == "f":
        v = draw(st.sampled_from([-1.5, -0.0, 0.0, 0.5, 2.0, np.inf, -np.inf, np.nan]))
        return E.Literal(v, DOUBLE), f"'{v}'::DOUBLE"
    if kind == "d":
        v = Decimal(draw(st.integers(-600, 600))).scaleb(-2)
        return E.Literal(v, DEC), f"{v}::DECIMAL(15,2)"
    if kind == "dt":
        v = draw(st.integers(-3, 3))
        return E.Literal(v, DATE), f"DATE '{_EPOCH + datetime.timedelta(days=v)}'"
    w = draw(st.sampled_from(WORDS + ["AB", "zz"]))
    return E.Literal(w, VARCHAR), "'" + w + "'"


_TYPES = {"i": BIGINT, "j": BIGINT, "f": DOUBLE, "g": DOUBLE, "d": DEC, "dt": DATE,
          "s": VARCHAR, "b": BOOLEAN}


def _ref(name: str) -> E.Ref:
    return E.Ref(name, _TYPES[name])


@st.composite
def _leaf(draw: st.DrawFn) -> tuple[E.Expr, str]:
    shape = draw(st.sampled_from(["cmp", "cmp", "cmp", "between", "columns", "in", "in", "null",
                                  "bool", "like", "substring", "const", "arith"]))
    if shape in ("cmp", "between", "in"):
        name = draw(st.sampled_from(["i", "f", "d", "dt", "s"] if shape != "in"
                                    else ["i", "dt", "s"]))
        x = _ref(name)
        kind = "i" if name == "i" else name
        if shape == "cmp":
            op = draw(st.sampled_from(sorted(_SQL_OP)))
            lit, sql = _literal(kind, draw)
            if draw(st.booleans()):  # the constant on the left
                return _b(op, lit, x), f"({sql} {_SQL_OP[op]} {name})"
            return _b(op, x, lit), f"({name} {_SQL_OP[op]} {sql})"
        if shape == "between":
            (lo, lo_sql), (hi, hi_sql) = _literal(kind, draw), _literal(kind, draw)
            return (_b("and", _b("ge", x, lo), _b("le", x, hi)),
                    f"({name} BETWEEN {lo_sql} AND {hi_sql})")
        items = [_literal(kind, draw) for _ in range(draw(st.integers(1, 6)))]
        if name == "i":  # long lists too (searched, not scanned)
            items += [(E.Literal(v, BIGINT), f"{v}::BIGINT") for v in
                      draw(st.lists(st.integers(-40, 40), max_size=30))]
        return (_b("in", x, *[e for e, _ in items]),
                f"({name} IN ({', '.join(s for _, s in items)}))")
    if shape == "columns":
        a, b = draw(st.sampled_from([("i", "j"), ("f", "g"), ("j", "i")]))
        op = draw(st.sampled_from(sorted(_SQL_OP)))
        return _b(op, _ref(a), _ref(b)), f"({a} {_SQL_OP[op]} {b})"
    if shape == "null":
        name = draw(st.sampled_from(sorted(_TYPES)))
        op = draw(st.sampled_from(["is_null", "is_not_null"]))
        return _b(op, _ref(name)), f"({name} IS {'NOT ' if op == 'is_not_null' else ''}NULL)"
    if shape == "bool":
        return _ref("b"), "b"
    if shape == "like":
        pattern = draw(st.sampled_from(["A%", "%R%", "_A%", "%", "ba\\%"]))
        return (_b("like", _ref("s"), E.Literal(pattern, VARCHAR)),
                f"(s LIKE '{pattern}')")
    if shape == "substring":
        head = E.Call("substring", (_ref("s"), E.Literal(1, BIGINT), E.Literal(2, BIGINT)),
                      VARCHAR)
        items = draw(st.lists(st.sampled_from(["AI", "MA", "SH", "", "ab"]), min_size=1,
                              max_size=3))
        return (_b("in", head, *[E.Literal(w, VARCHAR) for w in items]),
                f"(substring(s, 1, 2) IN ({', '.join(repr(w) for w in items)}))")
    if shape == "const":
        v = draw(st.sampled_from([True, False, None]))
        return E.Literal(v, BOOLEAN), {True: "TRUE", False: "FALSE", None: "NULL"}[v]
    # arithmetic: no program expresses it (the usual evaluation, on the rows kept)
    k = draw(st.integers(-3, 3))
    return (_b("gt", E.Call("add", (_ref("i"), _ref("j")), BIGINT), E.Literal(k, BIGINT)),
            f"((i + j) > {k})")


def _tree(depth: int) -> st.SearchStrategy[tuple[E.Expr, str]]:
    if depth == 0:
        return _leaf()

    @st.composite
    def node(draw: st.DrawFn) -> tuple[E.Expr, str]:
        shape = draw(st.sampled_from(["leaf", "and", "or", "not"]))
        if shape == "leaf":
            return draw(_leaf())
        if shape == "not":
            e, sql = draw(_tree(depth - 1))
            return _b("not", e), f"(NOT {sql})"
        kids = [draw(_tree(depth - 1)) for _ in range(draw(st.integers(2, 3)))]
        word = " AND " if shape == "and" else " OR "
        return _b(shape, *[e for e, _ in kids]), "(" + word.join(s for _, s in kids) + ")"

    return node()


def _table(draw: st.DrawFn, n: int) -> tuple[dict[str, Column], pa.Table]:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def nulls() -> np.ndarray:
        return rng.random(n) > draw(st.sampled_from([0.0, 0.2, 0.6]))

    i, j = rng.integers(-4, 5, n), rng.integers(-4, 5, n)
    vi = nulls()
    f = rng.choice([-1.5, -0.0, 0.0, 0.5, 2.0, np.inf, -np.inf, np.nan], n)
    g = rng.choice([-1.5, 0.0, 0.5, np.nan], n)
    vf = nulls()
    d = rng.integers(-600, 601, n)
    cuts = np.sort(rng.integers(0, n + 1, draw(st.integers(0, 4))))
    chunks = [pa.array(part, pa.int64()) for part in np.split(d, cuts)]
    dt = rng.integers(-3, 4, n).astype(np.int32)
    vdt = nulls()
    codes = rng.integers(0, len(WORDS), n).astype(np.int32)
    vs = nulls()
    b = rng.random(n) > 0.5
    vb = nulls()
    cols = {"i": Column(i, "int", None, vi), "j": Column(j, "int"),
            "f": Column(f, "float", None, vf), "g": Column(g, "float"),
            "d": LazyDecimals(Decimals(chunks, n, 2), 2),
            "dt": Column(dt, "date", None, vdt),
            "s": Column(codes, "string", np.asarray(WORDS, dtype=object), vs),
            "b": Column(b, "bool", None, vb)}
    words = np.asarray(WORDS, dtype=object)[codes]
    frame = pa.table({
        "r": pa.array(np.arange(n)), "i": pa.array(i, mask=~vi), "j": pa.array(j),
        "f": pa.array(f, mask=~vf), "g": pa.array(g),
        "d": pa.array([Decimal(int(v)).scaleb(-2) for v in d], pa.decimal128(15, 2)),
        "dt": pa.array(dt, mask=~vdt).cast(pa.int32()).cast(pa.date32()),
        "s": pa.array(words, mask=~vs, type=pa.string()), "b": pa.array(b, mask=~vb)})
    return cols, frame


@pytest.fixture(autouse=True)
def _programs_on_any_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "PREDICATE_PROGRAMS", True)
    monkeypatch.setattr(executor, "PROGRAM_FROM", 0)
    monkeypatch.setattr(predicate_programs, "_PIECE", 1500)  # several pieces, uneven
    monkeypatch.setattr(predicate_programs, "_BLOCK", 512)  # several blocks a piece, uneven


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_program_rows_are_duckdbs(data):
    n = data.draw(st.sampled_from([0, 1, 7, 300, 1024, 2600]))
    cols, frame = _table(data.draw, n)
    conjuncts = [data.draw(_tree(2)) for _ in range(data.draw(st.integers(1, 3)))]
    condition = E.conjoin([e for e, _ in conjuncts])
    where = " AND ".join(s for _, s in conjuncts)
    con = duckdb.connect()
    con.register("t", frame)
    expected = [r for (r,) in con.execute(f"SELECT r FROM t WHERE {where} ORDER BY r")
                .fetchall()]
    # blocks as selection vectors after the first test, from 1/32 of the rows left, never
    sparse = data.draw(st.sampled_from([1, predicate_programs._SPARSE_AFTER, 10**9]))
    predicate_programs._SPARSE_AFTER, default = sparse, predicate_programs._SPARSE_AFTER
    try:
        rows = executor._rows_passing(condition, Side(cols, n))
        mask = executor._rows_passing(condition, Side(cols, n), as_mask=True)
    finally:
        predicate_programs._SPARSE_AFTER = default
    assert rows.tolist() == expected, where
    kept = np.flatnonzero(mask) if mask.dtype == np.bool_ else mask
    assert kept.tolist() == expected, where


def test_a_program_reads_decimals_in_their_chunks_and_merges_ranges():
    n = 5000
    d = np.arange(n, dtype=np.int64) % 1000
    lazy = LazyDecimals(Decimals([pa.array(d[:1234]), pa.array(d[1234:])], n, 2), 2)
    x = E.Ref("d", DEC)
    cond = _b("and", _b("ge", x, E.Literal(Decimal("1.00"), DEC)),
              _b("lt", x, E.Literal(Decimal("2.50"), DEC)))
    program, rest = predicate_programs.compile_predicate(E.conjuncts(cond), {"d": lazy}, n)
    assert program is not None and not rest
    assert len(program.leaves) == 1  # one range: 100 <= d <= 249
    rows = program.rows({"d": lazy}, n)
    assert lazy._values is None  # never converted whole
    assert rows.tolist() == np.flatnonzero((d >= 100) & (d < 250)).tolist()


def test_what_a_program_cannot_express_is_left_to_the_caller():
    cols = {"i": Column(np.arange(10), "int"), "k": Column(np.arange(10, dtype=np.int64),
                                                           "int")}
    arith = _b("gt", E.Call("add", (E.Ref("i", BIGINT), E.Ref("k", BIGINT)), BIGINT),
               E.Literal(3, BIGINT))
    plain = _b("lt", E.Ref("i", BIGINT), E.Literal(7, INTEGER))
    other = _b("ne", E.Ref("k", BIGINT), E.Literal(2, BIGINT))
    program, rest = predicate_programs.compile_predicate([arith, plain, other], cols, 10)
    assert program is not None and rest == [arith]
    program, rest = predicate_programs.compile_predicate([_b("or", arith, plain)], cols, 10)
    assert program is None
    # one test of a plain column is a program too (one pass, where NumPy makes three)
    program, rest = predicate_programs.compile_predicate([plain], cols, 10)
    assert program is not None and not rest
    assert program.rows(cols, 10).tolist() == list(range(7))
