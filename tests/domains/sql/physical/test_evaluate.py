"""Differential tests of the physical expression evaluator against DuckDB: random columns rich
in NULLs, zeros, negatives, extremes, empty strings and far dates; each expression's SQL text
is bound by our binder and evaluated by :func:`~hpc.domains.sql.physical.evaluate.evaluate`,
and DuckDB runs the same text over the same data. Both must give the same values, or both
fail at run time (overflow, division by zero, a string that does not convert)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
sqlglot = pytest.importorskip("sqlglot")

from hpc.domains.sql.binder.expressions import bind_expression  # noqa: E402
from hpc.domains.sql.binder.scope import Names, Scope  # noqa: E402
from hpc.domains.sql.errors import SQLError, UnsupportedSQL  # noqa: E402
from hpc.domains.sql.logical import types as T  # noqa: E402
from hpc.domains.sql.logical.expr import Literal  # noqa: E402
from hpc.domains.sql.logical.plan import Field  # noqa: E402
from hpc.domains.sql.physical.evaluate import Batch, evaluate  # noqa: E402
from hpc.domains.sql.table import Column  # noqa: E402

from tests.fuzz import fuzz  # noqa: E402

# -- random tables ---------------------------------------------------------------------------
SCHEMA: dict[str, T.SQLType] = {
    "i": T.INTEGER, "j": T.INTEGER, "b": T.BIGINT, "d": T.decimal(9, 2),
    "e": T.decimal(18, 4), "f": T.DOUBLE, "g": T.DOUBLE, "s": T.VARCHAR, "u": T.VARCHAR,
    "n": T.VARCHAR, "dt": T.DATE, "dt2": T.DATE, "ts": T.TIMESTAMP, "bo": T.BOOLEAN,
    "bo2": T.BOOLEAN, "k": T.INTEGER,
}
DUCK_TYPES = {"i": "INTEGER", "j": "INTEGER", "b": "BIGINT", "d": "DECIMAL(9,2)",
              "e": "DECIMAL(18,4)", "f": "DOUBLE", "g": "DOUBLE", "s": "VARCHAR",
              "u": "VARCHAR", "n": "VARCHAR", "dt": "DATE", "dt2": "DATE",
              "ts": "TIMESTAMP", "bo": "BOOLEAN", "bo2": "BOOLEAN", "k": "INTEGER"}
DAY_MIN = (dt.date(1, 1, 1) - dt.date(1970, 1, 1)).days
DAY_MAX = (dt.date(9999, 12, 31) - dt.date(1970, 1, 1)).days
_US = 86_400_000_000

_ints = st.one_of(st.sampled_from([0, 1, -1, 2, -2, 7, -7, 10, 2**31 - 1, -(2**31)]),
                  st.integers(-1000, 1000))
_bigs = st.one_of(st.sampled_from([0, 1, -1, 2**62, -(2**62), 2**63 - 1, -(2**63) + 1,
                                   10**18, 3]), st.integers(-10**6, 10**6))
_dec9 = st.one_of(st.sampled_from([0, 1, -1, 50, -50, 150, -250, 10**9 - 1, -(10**9) + 1,
                                   125, -125]), st.integers(-10**6, 10**6))
_dec18 = st.one_of(st.sampled_from([0, 5, -5, 10**18 - 1, -(10**18) + 1, 12345, 5000]),
                   st.integers(-10**9, 10**9))
_floats = st.one_of(st.sampled_from([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e300, -1e300,
                                     1e-300, 123456.789, 1e16, float("inf"),
                                     float("nan")]),
                    st.floats(-1e6, 1e6, allow_nan=False))
_texts = st.one_of(st.sampled_from(["", " ", "a", "A", "ab", "abc", " a ", "a%b", "a_b",
                                    "é", "Éa", "x\\y", "hello", "aa", "ba"]),
                   st.text(alphabet="abAB %_é\\x-1", max_size=6))
_numbers = st.sampled_from(["0", "1", "-1", " 12 ", "1.5", "2.5", "-2.5", "1e3", "abc", "",
                            "99999999999", "1.255", "2024-01-05", "2024-1-5 10:11:12.5",
                            "true", "f", "yes", "0.001", "+7", "2023-02-29"])
_days = st.one_of(st.sampled_from([0, -1, DAY_MIN, DAY_MAX, 19723, 19783, 11016, -25567,
                                   19722, 19753]), st.integers(-30000, 40000))
_micros = st.one_of(st.sampled_from([0, -1, DAY_MIN * _US, DAY_MAX * _US + _US - 1,
                                     1704067199_999999, 1704067200_000000]),
                    st.integers(-(10**15), 4 * 10**15))
_bools = st.booleans()

STRATEGIES = {"i": _ints, "j": _ints, "b": _bigs, "d": _dec9, "e": _dec18, "f": _floats,
              "g": _floats, "s": _texts, "u": _texts, "n": _numbers, "dt": _days,
              "dt2": _days, "ts": _micros, "bo": _bools, "bo2": _bools,
              "k": st.integers(0, 3)}


@st.composite
def tables(draw: Any, max_rows: int = 24) -> dict[str, list[Any]]:
    """A table of random rows: ``{column: [value or None]}``."""
    n = draw(st.integers(0, max_rows))
    out = {}
    for name, strategy in STRATEGIES.items():
        nulls = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
        values = draw(st.lists(strategy, min_size=n, max_size=n))
        flags = draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
        out[name] = [None if f < nulls and name != "k" else v
                     for v, f in zip(values, flags, strict=True)]
    return out


def to_column(values: list[Any], t: T.SQLType) -> Column:
    """Our physical column of Python values (None: NULL)."""
    valid = np.array([v is not None for v in values], dtype=bool)
    mask = None if valid.all() else valid
    if t.kind == "varchar":
        dictionary = np.array(sorted({v for v in values if v is not None}), dtype=object)
        index = {s: k for k, s in enumerate(dictionary)}
        codes = np.array([index.get(v, 0) for v in values], dtype=np.int32)
        return Column(codes, "string", dictionary, mask)
    kind = {"integer": "int", "decimal": "decimal", "double": "float", "date": "date",
            "timestamp": "timestamp", "boolean": "bool"}[t.kind]
    dtype = {"date": np.int32, "double": np.float64, "boolean": np.bool_}.get(t.kind, np.int64)
    fill = 7 if t.kind != "boolean" else True  # values under NULLs are arbitrary
    return Column(np.array([fill if v is None else v for v in values], dtype=dtype), kind,
                  None, mask)


def to_arrow(data: dict[str, list[Any]]) -> Any:
    cols, names = [], []
    for name, t in SCHEMA.items():
        values = data[name]
        if t.kind == "decimal":
            arr = pa.array([None if v is None else Decimal(v).scaleb(-t.scale) for v in values],
                           pa.decimal128(t.precision, t.scale))
        elif t.kind == "date":
            arr = pa.array(values, pa.int32()).cast(pa.date32())
        elif t.kind == "timestamp":
            arr = pa.array(values, pa.int64()).cast(pa.timestamp("us"))
        elif t.kind == "integer":
            arr = pa.array(values, pa.int32() if t.bits == 32 else pa.int64())
        elif t.kind == "double":
            arr = pa.array(values, pa.float64())
        elif t.kind == "boolean":
            arr = pa.array(values, pa.bool_())
        else:
            arr = pa.array(values, pa.string())
        cols.append(arr)
        names.append(name)
    rid = pa.array(range(len(data["i"])), pa.int64())
    return pa.Table.from_arrays([rid, *cols], names=["rid", *names])


def duck(data: dict[str, list[Any]]) -> Any:
    con = duckdb.connect()
    arrow = to_arrow(data)
    con.register("src", arrow)
    cols = ", ".join(f"{c} {ty}" for c, ty in DUCK_TYPES.items())
    con.execute(f"CREATE TABLE t (rid BIGINT, {cols})")
    con.execute("INSERT INTO t SELECT * FROM src")
    return con


def batch_of(data: dict[str, list[Any]]) -> Batch:
    n = len(data["i"])
    return Batch({f"t.{c}": to_column(data[c], t) for c, t in SCHEMA.items()}, n)


def scope() -> Scope:
    return Scope({("t", c): Field(f"t.{c}", t) for c, t in SCHEMA.items()}, Names())


def bind(sql: str) -> Any:
    tree = sqlglot.parse_one(f"SELECT {sql} FROM t", dialect="duckdb")
    return bind_expression(tree.expressions[0], scope())


# -- comparing ---------------------------------------------------------------------------------
def python_values(col: Column, t: T.SQLType) -> list[Any]:
    """Our column as DuckDB's Python values."""
    out: list[Any] = []
    for r in range(len(col)):
        if col.valid is not None and not col.valid[r]:
            out.append(None)
            continue
        v = col.values[r]
        if t.kind == "varchar":
            out.append(str(col.dictionary[int(v)]))
        elif t.kind == "decimal":
            out.append(Decimal(int(v)).scaleb(-t.scale))
        elif t.kind in ("date", "timestamp"):
            try:
                if t.kind == "date":
                    out.append(dt.date(1970, 1, 1) + dt.timedelta(days=int(v)))
                else:
                    out.append(dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(v)))
            except OverflowError:  # before year 1 or after 9999: DuckDB gives a string
                out.append(_FAR)
        elif t.kind == "double":
            out.append(float(v))
        elif t.kind == "boolean":
            out.append(bool(v))
        else:
            out.append(int(v))
    return out


_FAR = object()  # a date Python's calendar cannot hold


def same(a: Any, b: Any) -> bool:
    if a is _FAR:
        return isinstance(b, str)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dt.datetime) != isinstance(b, dt.datetime):
        return False
    return a == b


def check(sql: str, data: dict[str, list[Any]], con: Any | None = None) -> None:
    """``SELECT sql FROM t`` in DuckDB and in our evaluator agree (values, or both fail)."""
    e = bind(sql)
    con = con or duck(data)
    try:
        want = [r[0] for r in con.execute(f"SELECT {sql} FROM t ORDER BY rid").fetchall()]
        duck_error = None
    except (duckdb.ConversionException, duckdb.OutOfRangeException,
            duckdb.InvalidInputException) as exc:
        want, duck_error = None, exc
    try:
        col = evaluate(e, batch_of(data))
        got = python_values(col, e.type)
        our_error = None
    except UnsupportedSQL:
        raise
    except SQLError as exc:
        got, our_error = None, exc
    if duck_error is not None or our_error is not None:
        assert (duck_error is None) == (our_error is None), (
            f"{sql}: DuckDB {duck_error!r}, ours {our_error!r}\nbound {e}\n{data}")
        return
    assert len(col) == len(want), sql
    bad = [(r, g, w) for r, (g, w) in enumerate(zip(got, want, strict=True)) if not same(g, w)]
    assert not bad, (f"{sql} (bound {e}): rows (row, ours, DuckDB) {bad[:5]}\n"
                     f"{ {c: [v[r] for r, _, _ in bad[:3]] for c, v in data.items()} }")


# -- the expressions ---------------------------------------------------------------------------
ARITHMETIC = [
    "i + j", "i - j", "i * j", "b + i", "b * b", "b - b", "-b", "-i", "d + d", "d - e",
    "d * d", "e * e", "d * i", "d + i", "e + 1", "d * 1.5", "i / j", "d / i", "f / g",
    "b / j", "i // j", "i % j", "b // i", "b % i", "f // 2", "f % g", "d % d", "e % d",
    "d // d", "i + 1.25", "f + d", "f * i", "i * 2.5", "abs(i)", "abs(d)", "abs(f)", "abs(b)",
    "sign(i)", "sign(f)", "sign(d)", "round(f)", "round(f, 2)", "round(f, -2)", "round(d)",
    "round(d, 1)", "round(e, 2)", "round(i)", "round(e, -2)", "floor(f)", "ceil(f)",
    "floor(d)", "ceil(d)", "floor(i)", "ceil(e)", "power(f, 2)", "power(i, 0.5)",
    "sqrt(f)", "ln(f)", "log10(d)", "exp(i / 1000)", "sqrt(d)",
]
COMPARISONS = [
    "i = j", "i < j", "i >= b", "d < e", "d = i", "f > g", "f = g", "f <= i", "d > f",
    "s = u", "s < u", "s >= u", "s = 'a'", "s > 'ab'", "'ab' <= s", "s <> ''", "s < 'é'",
    "dt < dt2", "dt = dt2", "dt <= ts", "ts > '2000-01-01'", "dt > '1999-12-31'",
    "bo = bo2", "bo < bo2", "i is distinct from j", "s is not distinct from u",
    "f is distinct from g", "i between j and 100", "i in (1, 2, -7)", "i in (1, null)",
    "s in ('a', 'ab', '')", "s in ('a', null)", "d in (1.5, 0.01, -1.25)",
    "dt in (DATE '2024-01-01', DATE '1970-01-01')", "i in (j, 3)", "i not in (1, 2)",
    "i not in (1, null)", "s in (u, 'a')",
]
LOGIC = [
    "bo and bo2", "bo or bo2", "not bo", "bo and i > 0", "bo or s = 'a' or i > 3",
    "bo and bo2 and i < 0", "bo is true", "bo is false", "bo is null", "s is not null",
    "not (bo or bo2)", "coalesce(i, j, 5)", "coalesce(s, u)", "coalesce(s, 'zz')",
    "coalesce(d, e)", "coalesce(dt, dt2)", "nullif(i, j)", "nullif(s, 'a')", "nullif(d, 1)",
    "case when i > 0 then 'pos' when i < 0 then 'neg' else s end",
    "case when bo then i else j end", "case when bo then d when bo2 then e end",
    "case i when 1 then 'one' when -1 then 'minus' end", "case when j <> 0 then i // j end",
    "case when j = 0 then null else i % j end", "case when bo then s else u end",
    "case when f > 0 then f end", "case when i > 0 then dt else dt2 end",
]
STRINGS = [
    "lower(s)", "upper(s)", "length(s)", "concat(s, u)", "concat(s, '-', i)", "s || u",
    "s || '!'", "concat(s, null, u)", "trim(s)", "ltrim(s)", "rtrim(s)", "trim(s, 'a')",
    "substring(s, 2)", "substring(s, 0, 2)", "substring(s, -2)", "substring(s, 2, 3)",
    "substring(s, -3, 2)", "substring(s, 1, 0)", "substring(s, 3, -2)",
    "substring(s, -1, -2)", "replace(s, 'a', 'xy')", "replace(s, '', 'q')", "strpos(s, 'a')",
    "strpos(s, '')", "strpos(s, 'b%')", "left(s, 2)", "right(s, 2)", "left(s, -1)",
    "right(s, -1)", "left(s, 0)", "s like 'a%'", "s like '%b'", "s like 'a_b'",
    "s like '%\\%'", "s not like '%a%'", "s ilike 'A%'", "s like 'a$%b' escape '$'",
    "s ilike '%É%'", "starts_with(s, 'a')", "starts_with(s, '')", "s like ''",
    "upper(s) = upper(u)", "lower(s) < u",
]
DATES = [
    "dt + 1", "dt - 7", "dt - dt2", "dt + interval 1 month", "dt - interval 1 month",
    "dt + interval 1 year", "dt + interval 3 day", "ts + interval 2 hour",
    "ts - interval 13 month", "interval 1 month + dt", "extract(year from dt)",
    "extract(month from dt)", "extract(day from dt)", "extract(quarter from dt)",
    "extract(dow from dt)", "extract(isodow from dt)", "extract(doy from dt)",
    "extract(week from dt)", "extract(isoyear from dt)", "extract(epoch from dt)",
    "extract(hour from ts)", "extract(minute from ts)", "extract(second from ts)",
    "extract(millisecond from ts)", "extract(microsecond from ts)", "extract(epoch from ts)",
    "extract(year from ts)", "extract(decade from dt)", "extract(century from dt)",
    "extract(millennium from dt)",
    "year(dt)", "date_trunc('month', dt)", "date_trunc('year', dt)",
    "date_trunc('quarter', dt)", "date_trunc('week', dt)", "date_trunc('day', ts)",
    "date_trunc('hour', ts)", "date_trunc('minute', ts)", "date_trunc('second', ts)",
    "date_trunc('week', ts)", "date_trunc('decade', dt)", "date_trunc('century', dt)",
    "date_trunc('millennium', dt)",
    "date_diff('day', dt, dt2)", "date_diff('month', dt, dt2)", "date_diff('year', dt, dt2)",
    "date_diff('quarter', dt, dt2)", "date_diff('week', dt, dt2)",
    "date_diff('hour', ts, dt)", "date_diff('minute', dt, ts)", "date_diff('second', ts, dt)",
    "date_diff('day', ts, dt)", "date_diff('week', ts, dt)", "date_diff('decade', dt, dt2)",
    "date_diff('millisecond', ts, dt)",
]
CASTS = [
    "cast(i as bigint)", "cast(b as integer)", "cast(b as smallint)", "cast(i as tinyint)",
    "cast(d as integer)", "cast(e as bigint)", "cast(f as integer)", "cast(f as bigint)",
    "cast(f as decimal(9,2))", "cast(d as decimal(4,1))", "cast(e as decimal(10,1))",
    "cast(i as decimal(5,1))", "cast(d as double)", "cast(i as double)", "cast(bo as integer)",
    "cast(i as boolean)", "cast(f as boolean)", "cast(dt as timestamp)", "cast(ts as date)",
    "cast(i as varchar)", "cast(b as varchar)", "cast(d as varchar)", "cast(e as varchar)",
    "cast(f as varchar)", "cast(dt as varchar)", "cast(ts as varchar)", "cast(bo as varchar)",
    "cast(n as integer)", "cast(n as bigint)", "cast(n as double)", "cast(n as decimal(9,2))",
    "cast(n as date)", "cast(n as timestamp)", "cast(n as boolean)", "try_cast(n as integer)",
    "try_cast(n as double)", "try_cast(n as decimal(5,2))", "try_cast(n as date)",
    "try_cast(n as timestamp)", "try_cast(n as boolean)", "try_cast(b as integer)",
    "try_cast(f as integer)", "cast(d as decimal(18,6))", "cast(e as decimal(4,0))",
    "try_cast(e as decimal(4,0))", "cast(cast(i as varchar) as integer)",
]

ALL = ARITHMETIC + COMPARISONS + LOGIC + STRINGS + DATES + CASTS


@pytest.mark.parametrize("group", ["ARITHMETIC", "COMPARISONS", "LOGIC", "STRINGS", "DATES",
                                   "CASTS"])
@fuzz(12)
@given(data=tables())
def test_expressions_equal_duckdb(group: str, data: dict[str, list[Any]]) -> None:
    con = duck(data)
    for sql in globals()[group]:
        check(sql, data, con)


def test_every_function_is_covered() -> None:
    """Every scalar function name appears in some tested expression's bound tree."""
    from hpc.domains.sql.logical.expr import FUNCTIONS, Call, walk

    seen = {n.name for sql in ALL for n in walk(bind(sql)) if isinstance(n, Call)}
    assert FUNCTIONS - seen <= {"date_sub"}, sorted(FUNCTIONS - seen)


def test_fixed_cases() -> None:
    """Edges worth a fixed example: DuckDB's truncating // and %, overflow, errors."""
    data = {c: [None] * 3 for c in SCHEMA}
    data.update(i=[-7, 7, -7], j=[2, -2, -2], b=[2**63 - 1, -(2**63) + 1, 5],
                d=[-125, 125, 250], e=[5000, -5000, 15000], n=["1.5", "x", None],
                s=["a%b", "x\\y", ""], dt=[19753, -1, 0], ts=[0, -1, 1704067200_000000],
                k=[0, 1, 2])
    con = duck(data)
    for sql in ["i // j", "i % j", "b + 1", "b * 2", "-b", "round(d, 1)", "cast(d as integer)",
                "cast(n as integer)", "try_cast(n as integer)", "s like 'a\\%b'",
                "dt + interval 1 month", "cast(ts as varchar)", "i // 0", "i % 0",
                "f // 0", "date_diff('week', dt, dt2)"]:
        check(sql, data, con)


def test_literal_and_empty_batches() -> None:
    """A constant evaluates to a full column; an empty batch gives empty columns."""
    batch = Batch({}, 4)
    col = evaluate(Literal("x", T.VARCHAR), batch)
    assert len(col) == 4 and list(col.dictionary) == ["x"]
    col = evaluate(Literal(None, T.decimal(9, 2)), batch)
    assert col.kind == "decimal" and not col.valid.any()
    data = {c: [] for c in SCHEMA}
    con = duck(data)
    for sql in ["i + j", "concat(s, u)", "cast(n as date)", "case when bo then s end"]:
        check(sql, data, con)


@fuzz(10)
@given(data=tables())
def test_date_sub_parts_equal_duckdb(data: dict[str, list[Any]]) -> None:
    """DATE_SUB(part, a, b) (whole parts between two dates or timestamps, DuckDB's) and
    date_add(x, INTERVAL), built as trees: the binder reads sqlglot's DateAdd/DateSub
    differently."""
    from hpc.domains.sql.logical.expr import Call, Ref

    con = duck(data)
    batch = batch_of(data)
    for part in ["day", "week", "month", "quarter", "year", "hour", "minute"]:
        for a, b in [("dt", "dt2"), ("ts", "ts")]:
            if a == "dt" and part in ("hour", "minute"):
                continue
            ta = SCHEMA[a]
            e = Call("date_sub", (Literal(part, T.VARCHAR), Ref(f"t.{a}", ta),
                                  Ref(f"t.{b}", SCHEMA[b])), T.BIGINT)
            other = "dt" if b == "dt2" else "ts"
            sql = f"date_sub('{part}', {a}, {b if b == 'dt2' else other})"
            want = [r[0] for r in con.execute(f"SELECT {sql} FROM t ORDER BY rid").fetchall()]
            got = python_values(evaluate(e, batch), T.BIGINT)
            assert got == want, (sql, got, want)
    e = Call("date_add", (Ref("t.dt", T.DATE), Literal((1, 2, 0), T.INTERVAL)), T.DATE)
    want = [r[0] for r in con.execute(
        "SELECT CAST(date_add(dt, INTERVAL '1 month 2 days') AS DATE) FROM t ORDER BY rid"
    ).fetchall()]
    got = python_values(evaluate(e, batch), T.DATE)
    assert all(same(g, w) for g, w in zip(got, want, strict=True)), (got, want)


def test_short_circuit_retries_failing_operands() -> None:
    """A CASE branch or an AND/OR operand that raises is evaluated again on the rows that
    reach it only (so guarded divisions do not fail)."""
    data = {c: [None] * 3 for c in SCHEMA}
    data.update(i=[7, 8, 9], j=[0, 2, 0], k=[0, 1, 2])
    batch = batch_of(data)
    for sql, want in [("case when j <> 0 then i // j else -1 end", [-1, 4, -1]),
                      ("j <> 0 and i // j = 4", [False, True, False]),
                      ("j = 0 or i % j = 0", [True, True, True])]:
        e = bind(sql)
        assert python_values(evaluate(e, batch), e.type) == want, sql
    with pytest.raises(SQLError, match="Division by zero"):
        evaluate(bind("i // j"), batch)


def test_calendar_parts_of_many_rows_equal_pythons_calendar():
    """EXTRACT and DATE_TRUNC over many rows whose days repeat (computed once per day of
    their range) and over days spread wide (computed per row) equal Python's calendar."""
    from hpc.domains.sql.physical.evaluate import _day_part, _trunc_days, by_day

    rng = np.random.default_rng(7)
    epoch = dt.date(1970, 1, 1)
    for days in (rng.integers(9000, 11000, 50_000), rng.integers(DAY_MIN, DAY_MAX, 50_000)):
        dates = [epoch + dt.timedelta(days=int(d)) for d in days[:: 97]]
        cases = {
            "year": [d.year for d in dates], "month": [d.month for d in dates],
            "doy": [d.timetuple().tm_yday for d in dates],
            "week": [d.isocalendar()[1] for d in dates],
        }
        for part, want in cases.items():
            got = by_day(lambda d, p=part: _day_part(p, d), days)[:: 97]
            assert got.tolist() == want, part
        month = by_day(lambda d: _trunc_days("month", d), days)[:: 97]
        assert [epoch + dt.timedelta(days=int(m)) for m in month] == [
            d.replace(day=1) for d in dates]
