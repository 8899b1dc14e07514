"""The expression binder against DuckDB: every bound type is checked against DuckDB's
``typeof`` of the same expression over a table of the same schema, plus the shapes of the
bound trees and the errors for unsupported constructs and type mismatches."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest
import sqlglot
from hpc.domains.sql.binder.expressions import bind_expression
from hpc.domains.sql.binder.scope import Names, Scope
from hpc.domains.sql.errors import SQLError, UnsupportedSQL
from hpc.domains.sql.logical.expr import (
    FUNCTIONS,
    Aggregate,
    Call,
    Case,
    Expr,
    Literal,
    Ref,
    walk,
)
from hpc.domains.sql.logical.plan import Field
from hpc.domains.sql.logical.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    HUGEINT,
    INTEGER,
    INTERVAL,
    SMALLINT,
    TIMESTAMP,
    TINYINT,
    VARCHAR,
    SQLType,
    decimal,
)
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify

COLUMNS: dict[str, tuple[str, SQLType]] = {
    "i": ("INTEGER", INTEGER), "b": ("BIGINT", BIGINT), "d": ("DECIMAL(15,2)", decimal(15, 2)),
    "e": ("DECIMAL(5,3)", decimal(5, 3)), "f": ("DOUBLE", DOUBLE), "s": ("VARCHAR", VARCHAR),
    "dt": ("DATE", DATE), "ts": ("TIMESTAMP", TIMESTAMP), "flag": ("BOOLEAN", BOOLEAN),
    "si": ("SMALLINT", SMALLINT), "ti": ("TINYINT", TINYINT), "h": ("HUGEINT", HUGEINT),
}
SCHEMA = {"t": {c: sql for c, (sql, _) in COLUMNS.items()}}
ROW = "(1, 2, 3.5, 1.25, 2.5, 'x', DATE '2020-01-02', TIMESTAMP '2020-01-02 03:04:05', true, " \
      "1, 1, 1)"


class Subqueries:
    """A stand-in for the SELECT binder's subquery planner: records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, exp.Expression, Expr | None]] = []

    def __call__(self, kind: str, query: exp.Expression, operand: Expr | None,
                 node: exp.Expression) -> Expr:
        self.calls.append((kind, query, operand))
        return Ref(f"sub#{len(self.calls)}", INTEGER if kind == "scalar" else BOOLEAN)


def make_scope(subquery: Subqueries | None = None) -> Scope:
    columns = {("t", c): Field(f"t.{c}", t) for c, (_, t) in COLUMNS.items()}
    return Scope(columns, Names(), subquery=subquery)


def parse(text: str) -> exp.Expression:
    tree = sqlglot.parse_one(f"SELECT {text} FROM t", dialect="duckdb")
    tree = qualify(tree, schema=SCHEMA, dialect="duckdb", quote_identifiers=False)
    return tree.expressions[0]


def bind(text: str, scope: Scope | None = None, **kw: bool) -> Expr:
    return bind_expression(parse(text), scope or make_scope(), **kw)


@pytest.fixture(scope="module")
def duck() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (" + ", ".join(f"{c} {sql}" for c, (sql, _)
                                               in COLUMNS.items()) + ")")
    con.execute(f"INSERT INTO t VALUES {ROW}")
    return con


# Each expression's bound type must equal DuckDB's typeof(expression).
TYPE_CASES = [
    # columns and constants
    "i", "b", "d", "e", "f", "s", "dt", "ts", "flag", "si", "ti", "h",
    "1", "2147483647", "2147483648", "9223372036854775807", "9223372036854775808",
    "-2147483648", "0.05", "1.50", "123.456", "0.5", "00.5", "0.0", "1e3", "1.5e2",
    "12345678901234567890.5", "12345678901234567890123456789012345678.9", "'abc'", "NULL",
    "true", "false", "DATE '2020-01-01'", "TIMESTAMP '2020-01-01 10:00:00'",
    "TIMESTAMP '2020-01-01'", "INTERVAL '3' MONTH", "INTERVAL 3 DAY", "INTERVAL '1 year'",
    "INTERVAL '1 year 2 months'",
    # arithmetic
    "i + 1", "i - b", "i * 2", "i / 2", "7 // 2", "i // 2", "i % 2", "b // i", "-i", "-d",
    "-5", "-ti", "-h", "-(0.05)", "-1.5", "1 + 1", "1.5 + 1", "i + d", "i * d", "d * e",
    "d + e", "b * d", "e + 1",
    "coalesce(d, 12345678901234567890123456789012345.678)",
    "d + 12345678901234567890123456789012345.678",
    "d * 12345678901234567890123456789012345.678", "e * e", "d * d", "e * 1",
    "i * 1.5", "0.05 * d", "d + 0.05", "e + 0.05", "d % 2", "d % e", "e % 1.5", "f % 2",
    "i % f", "d / 2", "d // 2", "i // d", "d // e", "f // 2", "f + d", "f + i", "h + f",
    "ti + ti", "ti + 1", "ti + 127", "ti + 200", "ti + 1000", "ti + -1", "ti - 1", "ti * 2",
    "1 + ti", "si + 1", "si + 100000", "b + 1", "h + 1", "d + 1", "f + 1", "ti // 2",
    "ti % 2", "ti / 2", "ti + 1.5", "ti + 2147483648", "ti + i", "i + 2147483648",
    "ti - si", "ti * ti", "NULL + 1", "NULL / 2", "NULL // 2", "(i + 1) * (d - 2)",
    # dates
    "dt + INTERVAL 1 DAY", "dt - INTERVAL 1 DAY", "dt + INTERVAL '3' MONTH",
    "INTERVAL 3 DAY + dt", "ts + INTERVAL 1 DAY", "ts - INTERVAL '2 hours'", "dt - dt",
    "dt + 1", "1 + dt", "dt - 1", "dt + i", "dt + ti", "dt - si", "ts - ts", "ts - dt",
    "dt - ts", "INTERVAL 1 DAY + INTERVAL 1 DAY", "dt + NULL",
    # comparisons and logic
    "i = 1", "i <> d", "i < 1.5", "s >= 'a'", "dt = '2020-01-01'", "ts > '2020-01-01'",
    "'2020-01-01' = dt", "dt = ts", "dt < ts", "i = '1'", "d = '1.5'", "flag = true",
    "i BETWEEN 1 AND d", "dt BETWEEN '2020-01-01' AND '2020-02-01'", "i NOT BETWEEN 1 AND 2",
    "i IS NULL", "s IS NOT NULL", "i IS DISTINCT FROM b", "i IS NOT DISTINCT FROM d",
    "flag IS TRUE", "flag IS NOT FALSE", "flag AND i > 1", "flag OR NULL",
    "flag AND flag AND (i = 1 AND b = 2)", "NOT flag", "NOT i = 1", "i IN (1, 2.5)",
    "i NOT IN (1, 2)", "s IN ('a', 'b')", "dt IN ('2020-01-01', '2020-01-03')",
    "ti IN (1, 1000)", "s LIKE 'a%'", "s NOT LIKE 'a%'", "s ILIKE 'A%'",
    "s LIKE 'a!%' ESCAPE '!'", "s NOT ILIKE 'a'", "starts_with(s, 'a')",
    # CASE, COALESCE, NULLIF, casts
    "CASE WHEN flag THEN i ELSE d END", "CASE WHEN flag THEN 1 END",
    "CASE i WHEN 1 THEN s END", "CASE WHEN flag THEN 1 ELSE 2.5 END",
    "CASE WHEN flag THEN ti ELSE 1 END", "CASE WHEN flag THEN ti ELSE 1000 END",
    "CASE WHEN flag THEN NULL END", "CASE WHEN flag THEN dt ELSE '2020-01-01' END",
    "CASE i WHEN 1 THEN 'a' WHEN 2 THEN 'b' ELSE 'c' END",
    "coalesce(i, d)", "coalesce(i, 1.5)", "coalesce(i, NULL)", "coalesce(NULL, NULL)",
    "coalesce(s, 'a')", "coalesce(dt, ts)", "coalesce(ti, 1)", "coalesce(1, ti)",
    "coalesce(ti, 1000)", "coalesce(dt, '2020-01-01')", "nullif(i, 2)", "nullif(i, b)",
    "nullif(b, i)", "nullif(i, 2.5)", "nullif(ti, 1)", "nullif(NULL, 1)", "nullif(1, NULL)",
    "CAST(i AS DECIMAL)", "CAST(i AS NUMERIC)", "CAST(i AS DOUBLE)", "CAST(i AS TINYINT)",
    "CAST(i AS SMALLINT)", "CAST(i AS INT)", "CAST(i AS BIGINT)", "CAST(i AS HUGEINT)",
    "CAST(i AS VARCHAR)", "CAST(i AS TEXT)", "CAST(i AS DECIMAL(10))",
    "CAST(i AS DECIMAL(10, 2))", "CAST(s AS DATE)", "CAST(s AS TIMESTAMP)",
    "CAST(s AS BOOLEAN)", "TRY_CAST(s AS INT)", "i::BIGINT", "CAST(flag AS INT)",
    "CAST(i AS BOOLEAN)", "CAST(ts AS DATE)", "CAST(dt AS TIMESTAMP)", "CAST(d AS VARCHAR)",
    "CAST('2020-01-01' AS DATE)", "CAST(NULL AS INT)", "CAST(1 AS DOUBLE)",
    # string functions
    "lower(s)", "upper(s)", "length(s)", "length('abc')", "lower(NULL)", "concat(s, i)",
    "concat(i, i)", "concat(s, NULL)", "concat(NULL, NULL)", "concat('a', 1.5)", "s || s",
    "i || s", "i || i", "NULL || s", "s || 1", "dt || s", "s || s || s", "trim(s)",
    "ltrim(s)", "rtrim(s)", "trim(s, 'x')", "substring(s, 1, 2)", "substring(s, 2)",
    "substr(s, 2)", "substring(s, b)", "replace(s, 'a', 'b')", "strpos(s, 'a')",
    "position('a' IN s)", "instr(s, 'a')", "left(s, 2)", "right(s, 1)", "left(s, b)",
    "left(s, '2')",
    # date functions
    "date_trunc('month', dt)", "date_trunc('month', ts)", "date_trunc('hour', dt)",
    "date_trunc('week', dt)", "extract(year FROM dt)", "extract(epoch FROM ts)",
    "extract(epoch FROM dt)", "extract(second FROM ts)", "extract(dow FROM ts)",
    "extract(doy FROM dt)", "extract(quarter FROM dt)", "extract(hour FROM dt)",
    "year(dt)", "month(ts)", "day(dt)", "quarter(dt)", "dayofweek(dt)", "hour(ts)",
    "date_part('year', dt)", "date_diff('day', dt, dt)", "datediff('day', ts, ts)",
    "date_diff('month', dt, ts)", "date_diff('day', dt, '2020-01-01')",
    # numeric functions
    "abs(i)", "abs(d)", "abs(ti)", "abs(f)", "abs(h)", "abs(-1)", "abs(NULL)",
    "round(d, 1)", "round(d)", "round(i)", "round(f, 1)", "round(f)", "round(i, 1)",
    "round(d, -1)", "round(d, 5)", "round(e, 2)", "round(b, 2)", "round(ti)", "round(h)",
    "round(1.5)", "round(0.05, 1)", "round(i, i)", "round(NULL)", "floor(d)", "floor(i)",
    "floor(f)", "floor(h)", "floor(NULL)", "ceil(d)", "ceil(e)", "ceil(i)", "ceiling(f)",
    "power(i, 2)", "pow(d, 2)", "i ^ 2", "sqrt(i)", "sqrt(d)", "ln(d)", "log10(i)",
    "log(i)", "exp(i)", "sign(i)", "sign(d)", "sign(f)", "sign(b)", "sign(NULL)",
    "sqrt(NULL)",
    # aggregates
    "count(*)", "count(i)", "count(DISTINCT i)", "count(s)", "count(NULL)", "sum(i)",
    "sum(b)", "sum(d)", "sum(f)", "sum(ti)", "sum(si)", "sum(h)", "sum(e)", "sum(flag)",
    "sum(1)", "sum(1.5)", "sum(ti + 1)", "sum(DISTINCT i)", "sum(NULL)", "avg(i)", "avg(d)",
    "avg(f)", "avg(h)", "avg(e)", "avg(NULL)", "min(d)", "max(s)", "min(dt)", "max(ts)",
    "max(flag)", "min(ti)", "min(NULL)", "stddev(i)", "stddev_samp(f)", "stddev_pop(d)",
    "stddev(d)", "var_samp(i)", "variance(d)", "var_pop(h)", "median(i)", "median(d)",
    "median(f)", "median(dt)", "median(ts)", "median(b)", "median(si)", "median(h)",
    "median(e)", "median(s)", "median(NULL)", "quantile_cont(i, 0.5)",
    "quantile_cont(d, 0.25)", "quantile_cont(f, 0.5)", "quantile_cont(dt, 0.5)",
    "quantile_cont(ts, 0.5)", "quantile_cont(e, 0.5)", "quantile_cont(b, 0.9)",
    "percentile_cont(0.5) WITHIN GROUP (ORDER BY i)", "string_agg(s, ',')",
    "string_agg(s, ',' ORDER BY s)", "string_agg(i, ';')", "string_agg(s)",
    "string_agg(DISTINCT s, '|')", "bool_and(flag)", "bool_or(flag)", "first(i)",
    "first(d)", "sum(i) + 1", "sum(d) / count(*)", "avg(i) * 2", "max(i) - min(i)",
    "CASE WHEN count(*) > 1 THEN sum(d) ELSE 0 END",
]

# Where this engine deliberately differs from DuckDB's typeof (documented in the binder).
DELIBERATE: dict[str, str] = {}

# logical.types.common_type gives DOUBLE where the common DECIMAL needs more than 38 digits;
# DuckDB keeps DECIMAL(38, scale) (HUGEINT meets DECIMAL(p, s) as DECIMAL(38, s)).
WIDE_DECIMALS = [
    "h * d", "h + d", "h - d", "h * e", "h * 1.5", "h + 1.5", "coalesce(h, d)",
    "coalesce(h, e)", "coalesce(h, 1.5)", "CASE WHEN flag THEN h ELSE 0.5 END",
]


def duck_type(con: duckdb.DuckDBPyConnection, text: str) -> str:
    got = con.execute(f"SELECT typeof({text}) FROM t").fetchall()[0][0]
    return got.strip('"')


@pytest.mark.parametrize("text", TYPE_CASES)
def test_type_matches_duckdb(duck: duckdb.DuckDBPyConnection, text: str) -> None:
    bound = bind(text)
    assert str(bound.type) == DELIBERATE.get(text, duck_type(duck, text)), str(bound)
    for node in walk(bound):  # every Call names a function the physical layer knows
        if isinstance(node, Call):
            assert node.name in FUNCTIONS


@pytest.mark.parametrize("text", WIDE_DECIMALS)
def test_wide_decimals_match_duckdb(duck: duckdb.DuckDBPyConnection, text: str) -> None:
    assert str(bind(text).type) == duck_type(duck, text)


def test_float_is_double(duck: duckdb.DuckDBPyConnection) -> None:
    assert duck_type(duck, "CAST(i AS FLOAT)") == "FLOAT"  # DuckDB's 32-bit float
    assert bind("CAST(i AS FLOAT)").type == DOUBLE
    assert bind("CAST(i AS REAL)").type == DOUBLE


# --- shapes of bound trees -------------------------------------------------------------


def test_literals() -> None:
    assert bind("0.05") == Literal(Decimal("0.05"), decimal(3, 2))
    assert bind("DATE '1970-01-02'") == Literal(1, DATE)
    assert bind("DATE '1969-12-31'") == Literal(-1, DATE)
    assert bind("TIMESTAMP '1970-01-01 00:00:01.5'") == Literal(1_500_000, TIMESTAMP)
    assert bind("INTERVAL '3' MONTH") == Literal((3, 0, 0), INTERVAL)
    assert bind("INTERVAL 3 DAY") == Literal((0, 3, 0), INTERVAL)
    assert bind("INTERVAL '1 year'") == Literal((12, 0, 0), INTERVAL)
    assert bind("INTERVAL '1 day 2 hours'") == Literal((0, 1, 7_200_000_000), INTERVAL)
    assert bind("-5") == Literal(-5, INTEGER)
    assert bind("9223372036854775808") == Literal(2**63, HUGEINT)
    assert bind("NULL").type.kind == "null"


def test_operands_are_cast_to_the_common_type() -> None:
    e = bind("i + d")
    assert isinstance(e, Call) and e.name == "add" and e.type == decimal(16, 2)
    assert all(a.type == decimal(16, 2) for a in e.args)
    assert e.args[0] == Call("cast", (Ref("t.i", INTEGER),), decimal(16, 2))
    e = bind("i / 2")  # DuckDB's / is DOUBLE division
    assert e == Call("div", (Call("cast", (Ref("t.i", INTEGER),), DOUBLE), Literal(2.0, DOUBLE)),
                     DOUBLE)
    e = bind("ti + 1")  # the constant takes the column's width
    assert e == Call("add", (Ref("t.ti", TINYINT), Literal(1, TINYINT)), TINYINT)
    e = bind("d * e")  # a DECIMAL product keeps each operand's scale
    assert e == Call("mul", (Ref("t.d", decimal(15, 2)), Ref("t.e", decimal(5, 3))),
                     decimal(18, 5))
    e = bind("i * d")
    assert e.args[0] == Call("cast", (Ref("t.i", INTEGER),), decimal(10, 0))
    e = bind("d // 2")
    assert e.type == DOUBLE and all(a.type == DOUBLE for a in e.args)


def test_dates() -> None:
    e = bind("dt + INTERVAL 1 DAY")
    assert e == Call("date_add", (Call("cast", (Ref("t.dt", DATE),), TIMESTAMP),
                                  Literal((0, 1, 0), INTERVAL)), TIMESTAMP)
    assert bind("dt - dt") == Call("sub", (Ref("t.dt", DATE), Ref("t.dt", DATE)), BIGINT)
    assert bind("1 + dt") == Call("add", (Ref("t.dt", DATE), Literal(1, INTEGER)), DATE)
    e = bind("dt < '1970-01-11'")  # the string constant becomes a DATE constant
    assert e == Call("lt", (Ref("t.dt", DATE), Literal(10, DATE)), BOOLEAN)
    e = bind("ts >= '1970-01-01 00:00:01'")
    assert e.args[1] == Literal(1_000_000, TIMESTAMP)
    e = bind("extract(YEAR FROM dt)")
    assert e == Call("extract", (Literal("year", VARCHAR), Ref("t.dt", DATE)), BIGINT)
    assert bind("year(dt)") == e
    e = bind("date_diff('day', dt, ts)")
    assert e.args[0] == Literal("day", VARCHAR)
    assert e.args[1] == Call("cast", (Ref("t.dt", DATE),), TIMESTAMP)  # start, then end
    assert e.args[2] == Ref("t.ts", TIMESTAMP)
    e = bind("date_trunc('MONTH', dt)")
    assert e.args[0] == Literal("month", VARCHAR) and e.type == TIMESTAMP


def test_logic() -> None:
    e = bind("flag AND (i = 1 AND b = 2) AND NOT flag")
    assert isinstance(e, Call) and e.name == "and" and len(e.args) == 4
    e = bind("flag OR flag OR i > 2")
    assert e.name == "or" and len(e.args) == 3
    e = bind("i BETWEEN 1 AND 10")
    assert e.name == "and" and [a.name for a in e.args] == ["ge", "le"]
    e = bind("i IN (1, 2.5)")
    assert e.name == "in" and all(a.type == decimal(11, 1) for a in e.args)
    assert bind("s IS NOT NULL").name == "is_not_null"
    assert bind("i NOT IN (1, 2)").name == "not"
    e = bind("s NOT LIKE 'a!%' ESCAPE '!'")
    assert e.name == "not" and e.args[0] == Call(
        "like", (Ref("t.s", VARCHAR), Literal("a!%", VARCHAR), Literal("!", VARCHAR)), BOOLEAN)
    assert bind("s ILIKE 'a'").name == "ilike"


def test_case_and_nulls() -> None:
    e = bind("CASE i WHEN 1 THEN 'a' END")
    assert isinstance(e, Case) and e.default == Literal(None, VARCHAR)
    (cond, value), = e.whens
    assert cond == Call("eq", (Ref("t.i", INTEGER), Literal(1, INTEGER)), BOOLEAN)
    e = bind("CASE WHEN flag THEN i ELSE d END")
    assert e.whens[0][1] == Call("cast", (Ref("t.i", INTEGER),), decimal(15, 2))
    e = bind("coalesce(i, 1.5)")
    assert e.name == "coalesce" and e.args[1] == Literal(Decimal("1.5"), decimal(11, 1))
    e = bind("nullif(i, 2.5)")  # compared as DECIMAL, returned as INTEGER
    assert e.type == INTEGER and e.args[0].name == "nullif"


def test_concat_versus_dpipe() -> None:
    e = bind("concat(s, i)")  # CONCAT skips NULLs
    assert e == Call("concat", (Ref("t.s", VARCHAR), Call("cast", (Ref("t.i", INTEGER),),
                                                              VARCHAR)), VARCHAR)
    e = bind("s || i")  # || is NULL when an operand is
    assert isinstance(e, Case) and e.default.name == "concat"
    assert e.whens[0][1] == Literal(None, VARCHAR)
    assert bind("'a' || 'b'") == Call("concat", (Literal("a", VARCHAR), Literal("b", VARCHAR)),
                                      VARCHAR)


def test_functions() -> None:
    e = bind("round(d, 1)")
    assert e == Call("round", (Ref("t.d", decimal(15, 2)), Literal(1, INTEGER)), decimal(15, 1))
    e = bind("substring(s, 2, 3)")
    assert e.args[1:] == (Literal(2, BIGINT), Literal(3, BIGINT))
    assert bind("floor(i)").args[0] == Call("cast", (Ref("t.i", INTEGER),), DOUBLE)
    assert bind("log(i)").name == bind("log10(i)").name == "log10"
    assert bind("ltrim(s)").name == "ltrim" and bind("rtrim(s)").name == "rtrim"
    assert bind("position('a' IN s)").name == "strpos"


def test_aggregates() -> None:
    assert bind("count(*)") == Aggregate("count_star", (), BIGINT)
    e = bind("count(DISTINCT i)")
    assert e == Aggregate("count", (Ref("t.i", INTEGER),), BIGINT, distinct=True)
    e = bind("quantile_cont(i, 0.25)")
    assert e.name == "quantile_cont" and e.params == (0.25,)
    e = bind("string_agg(s, '; ' ORDER BY i DESC)")
    assert e.name == "string_agg" and e.params == ("; ",)
    (key,) = e.order
    assert key.expr == Ref("t.i", INTEGER) and not key.ascending and not key.nulls_first
    e = bind("percentile_cont(0.25) WITHIN GROUP (ORDER BY d DESC)")
    assert e.name == "quantile_cont" and e.params == (0.75,)
    e = bind("sum(i) + 1")
    assert isinstance(e.args[0], Aggregate) and e.type == HUGEINT
    assert bind("stddev(i)").name == "stddev_samp" and bind("variance(i)").name == "var_samp"


def test_aggregate_errors() -> None:
    with pytest.raises(SQLError, match=r"aggregate .*inside aggregate SUM"):
        bind("sum(max(i))")
    with pytest.raises(SQLError, match="not allowed here"):
        bind("sum(i) > 1", aggregates=False)
    assert bind("i > 1", aggregates=False).type == BOOLEAN


def test_subqueries() -> None:
    sub = Subqueries()
    scope = make_scope(sub)
    e = bind("i + (SELECT max(b) FROM t)", scope)
    assert e.name == "add" and sub.calls[-1][0] == "scalar"
    assert isinstance(sub.calls[-1][1], exp.Select)
    assert bind("EXISTS (SELECT 1 FROM t)", scope) == Ref("sub#2", BOOLEAN)
    assert sub.calls[-1][0] == "exists"
    e = bind("NOT EXISTS (SELECT 1 FROM t)", scope)
    assert e == Call("not", (Ref("sub#3", BOOLEAN),), BOOLEAN)
    bind("i IN (SELECT b FROM t)", scope)
    assert sub.calls[-1][0] == "in" and sub.calls[-1][2] == Ref("t.i", INTEGER)
    e = bind("i NOT IN (SELECT b FROM t)", scope)
    assert e.name == "not" and sub.calls[-1][0] == "in"
    bind("i = ANY (SELECT b FROM t)", scope)
    assert sub.calls[-1][0] == "any:eq"
    e = bind("i <> ALL (SELECT b FROM t)", scope)  # NOT (i = ANY ...)
    assert e.name == "not" and sub.calls[-1][0] == "any:eq"
    bind("i > ANY (SELECT b FROM t)", scope)
    assert sub.calls[-1][0] == "any:gt"
    e = bind("i > ALL (SELECT b FROM t)", scope)  # NOT (i <= ANY ...)
    assert e.name == "not" and sub.calls[-1][0] == "any:le"
    with pytest.raises(UnsupportedSQL, match="ANY"):
        bind("i > ANY (1, 2)", scope)
    with pytest.raises(UnsupportedSQL, match="subquery is not supported here"):
        bind("EXISTS (SELECT 1 FROM t)")


def test_aggregate_filter() -> None:
    e = bind("sum(i) FILTER (WHERE i > 1)")
    assert isinstance(e, Aggregate) and e.name == "sum" and e.filter is not None
    assert e.filter.type == BOOLEAN


# --- errors ---------------------------------------------------------------------------

UNSUPPORTED = [
    ("sum(i) OVER (ORDER BY s RANGE BETWEEN 1 PRECEDING AND CURRENT ROW)", "VARCHAR"),
    ("string_agg(s, ',' ORDER BY i) OVER ()", "ordered aggregate"),
    ("s SIMILAR TO 'a'", "SIMILARTO"),
    ("list_value(1, 2)", "ARRAY"),
    ("md5(s)", "MD5"),
    ("my_udf(i)", "my_udf"),
    ("CAST(i AS UTINYINT)", "UTINYINT"),
    ("log(2, i)", "base-10"),
    ("INTERVAL 1 DAY * 2", "INTERVAL"),
    ("i BETWEEN SYMMETRIC 1 AND 2", "SYMMETRIC"),
    ("INTERVAL (i) DAY", "constant"),
    ("quantile_cont(i, [0.5, 0.9])", "quantile"),
    ("count(DISTINCT i, b)", "DISTINCT"),
    ("extract(timezone_hour FROM ts)", "timezone_hour"),
]


@pytest.mark.parametrize(("text", "construct"), UNSUPPORTED)
def test_unsupported_names_construct_and_position(text: str, construct: str) -> None:
    with pytest.raises(UnsupportedSQL) as info:
        bind(f"1 +\n  {text}" if "OVER" in text else text)
    message = str(info.value)
    assert construct.lower() in message.lower()
    assert "line" in message and "column" in message


def test_window_position() -> None:
    with pytest.raises(UnsupportedSQL, match=r"WINDOW .* at line 2, column 3"):
        bind("1 +\n  sum(i) OVER (ORDER BY s RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING "
             "EXCLUDE CURRENT ROW)")


TYPE_ERRORS = [
    ("'a' + 1", ["+", "VARCHAR", "INTEGER"]),
    ("s + 1", ["+", "VARCHAR", "INTEGER"]),
    ("flag * 2", ["*", "BOOLEAN", "INTEGER"]),
    ("sum(s)", ["SUM", "VARCHAR"]),
    ("avg(dt)", ["AVG", "DATE"]),
    ("lower(i)", ["LOWER", "INTEGER"]),
    ("length(dt)", ["LENGTH", "DATE"]),
    ("s = 1", ["=", "VARCHAR", "INTEGER"]),
    ("s = i", ["=", "VARCHAR", "INTEGER"]),
    ("s < dt", ["<", "VARCHAR", "DATE"]),
    ("i IN (1, s)", ["IN", "VARCHAR", "INTEGER"]),
    ("CASE WHEN flag THEN i ELSE s END", ["CASE", "INTEGER", "VARCHAR"]),
    ("coalesce(dt, 1)", ["COALESCE", "DATE", "INTEGER"]),
    ("dt + b", ["+", "DATE", "BIGINT"]),
    ("dt + ts", ["+", "DATE", "TIMESTAMP"]),
    ("dt * 2", ["*", "DATE", "INTEGER"]),
    ("i AND flag", ["AND", "INTEGER"]),
    ("NOT s", ["NOT", "VARCHAR"]),
    ("s LIKE 1", ["LIKE", "INTEGER"]),
    ("abs(s)", ["ABS", "VARCHAR"]),
    ("sqrt(s)", ["SQRT", "VARCHAR"]),
    ("-s", ["-", "VARCHAR"]),
    ("bool_and(i)", ["BOOL_AND", "INTEGER"]),
    ("quantile_cont(s, 0.5)", ["QUANTILE_CONT", "VARCHAR"]),
    ("extract(year FROM i)", ["EXTRACT", "INTEGER"]),
    ("CAST(dt AS INT)", ["CAST", "DATE", "INTEGER"]),
    ("i = 'a'", ["=", "'a'", "INTEGER"]),
    ("substring(s, 1.5)", ["SUBSTRING", "DECIMAL(2,1)", "BIGINT"]),
]


@pytest.mark.parametrize(("text", "names"), TYPE_ERRORS)
def test_type_errors_name_operator_and_types(text: str, names: list[str]) -> None:
    with pytest.raises(SQLError) as info:
        bind(text)
    assert not isinstance(info.value, UnsupportedSQL)
    for name in names:
        assert name in str(info.value), str(info.value)
    assert "line 1" in str(info.value)


def test_bad_date_literal_names_it_and_its_position() -> None:
    with pytest.raises(SQLError, match=r"'2020-13-01'.* at line 1, column \d+"):
        bind("DATE '2020-13-01'")
    with pytest.raises(SQLError, match=r"'1995-02-30'"):
        bind("dt < '1995-02-30'")
    assert bind("TRY_CAST('x' AS DATE)") == Literal(None, DATE)


def test_unknown_column() -> None:
    node = sqlglot.parse_one("SELECT t.nope FROM t", dialect="duckdb").expressions[0]
    with pytest.raises(SQLError, match="unknown column t.nope"):
        bind_expression(node, make_scope())
