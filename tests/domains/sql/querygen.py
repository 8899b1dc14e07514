"""Random tables and random queries for differential fuzzing of the SQL engine against DuckDB.

The generator stays inside the grammar the engine supports today (see the module docstrings of
:mod:`hpc.domains.sql.planner`, :mod:`~hpc.domains.sql.expressions` and
:mod:`~hpc.domains.sql.subqueries`); a wrong answer is a bug, and a construct it produces that
the engine refuses (:class:`UnsupportedSQL`) is a bug of this generator. Extend it here as the
engine learns more SQL (``SHAPES``, ``_atom``, ``_from_clause``).

Tables (:func:`tables`): ``t``, ``u`` and ``r`` as ``pyarrow`` tables of 0 to ~30 rows, every
column nullable, some all-NULL, keys from small universes (duplicates, keys on one side only)
or skewed to one heavy hitter. Column kinds: int64, float64, string (non-ASCII, empty), date32
and decimal(9, 2).

Numbers are chosen so that every SUM the engine and DuckDB compute is exact whatever the
summation order: floats and decimals are multiples of 1/4 below 2**10 in magnitude, products
of two of them multiples of 1/16, and a few thousand of those add up exactly in float64 (DuckDB
sums decimals exactly). Only a final division (AVG, ``/`` by a constant) rounds, once, so
results are compared with a relative tolerance of ``RTOL`` (a few ulps), not a loose one.

Queries (:func:`queries`): projections, DISTINCT, GROUP BY with count, count(*),
count(DISTINCT), sum, min, max, avg and HAVING, global aggregates; window functions (ranking,
LAG/LEAD, value functions, aggregates over ROWS and RANGE frames, QUALIFY); set operations
(UNION, INTERSECT, EXCEPT, with and without ALL); ROLLUP, CUBE and GROUPING SETS; FROM one
table, inner joins (ON or WHERE, one or two keys, three tables), LEFT JOINs with ON filters and
anti-join filters; WHERE trees of AND/OR/NOT over comparisons, BETWEEN, IN lists with NULLs, IS
[NOT] NULL, LIKE, arithmetic, [NOT] IN (subquery), [NOT] EXISTS correlated by a key, scalar
subqueries. ORDER BY (with explicit NULLS FIRST/LAST) + LIMIT only where the order is total:
every output column (or every group key) is a sort key. A window function whose value depends
on the order of tied rows (ROW_NUMBER, LAG, a ROWS frame, ...) orders by every column of the
FROM clause after its own keys: rows still tied are equal in every column, so the multiset of
result rows is the same whichever of them comes first.

:func:`check` runs one query on both engines and returns what differs (None when equal).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

__all__ = ["SCHEMA", "RTOL", "Query", "tables", "queries", "cases", "normal_rows", "check",
           "to_arrow", "from_plain", "duckdb_over"]

#: kinds of the columns of each table (the join keys share kinds across tables)
SCHEMA: dict[str, dict[str, str]] = {
    "t": {"k": "int", "g": "int", "v": "int", "f": "float", "s": "string", "d": "date",
          "p": "decimal"},
    "u": {"k": "int", "w": "int", "x": "float", "s": "string", "d": "date"},
    "r": {"k": "int", "s": "string", "y": "int"},
}
#: one final rounding (AVG's division, ``/`` by a constant): DuckDB and the engine may round
#: in another order (sum/count vs running mean), a few ulps apart; every sum is exact
RTOL = 1e-12

WORDS = ["", "a", "ab", "abc", "b", "ba", "é", "éa", "z z"]
_EPOCH = dt.date(1970, 1, 1)
_DAY0 = (dt.date(1995, 1, 1) - _EPOCH).days


# -- tables -----------------------------------------------------------------------------------
def _values(kind: str, universe: int) -> st.SearchStrategy[Any]:
    """Plain Python values of a column kind (ints for dates: days since 1970)."""
    if kind == "int":
        return st.integers(-2, universe)
    if kind == "float":
        return st.integers(-2 * universe, 2 * universe).map(lambda q: q / 4) | st.just(-0.0)
    if kind == "decimal":
        return st.integers(-2 * universe, 2 * universe).map(lambda q: q * 25)  # hundredths
    if kind == "string":
        return st.sampled_from(WORDS[: 2 + universe % len(WORDS)] if universe < 8 else WORDS)
    return st.integers(_DAY0, _DAY0 + universe)  # date


@st.composite
def _column(draw, kind: str, n: int) -> list[Any]:
    mode = draw(st.sampled_from(["mixed", "mixed", "mixed", "no_nulls", "all_null", "skewed"]))
    if mode == "all_null":
        return [None] * n
    universe = draw(st.sampled_from([1, 2, 3, 5, 8, 40]))
    values = draw(st.lists(_values(kind, universe), min_size=n, max_size=n))
    if mode == "skewed" and n:  # one heavy hitter in three quarters of the rows
        for i in draw(st.lists(st.integers(0, n - 1), max_size=n)):
            values[i] = values[0]
    if mode != "no_nulls":
        nulls = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        rate = draw(st.sampled_from([2, 5]))
        values = [None if m and i % rate == 0 else v
                  for i, (v, m) in enumerate(zip(values, nulls, strict=True))]
    return values


@st.composite
def tables(draw, schema: dict[str, dict[str, str]] | None = None,
           max_rows: int = 30) -> dict[str, dict[str, list[Any]]]:
    """Plain tables ``{name: {column: values}}`` (JSON-able: dates as days, decimals as
    hundredths); :func:`to_arrow` makes them Arrow tables."""
    schema = schema or SCHEMA
    out = {}
    for name, columns in schema.items():
        n = draw(st.integers(0, max_rows) | st.integers(max_rows // 2, max_rows)
                 | st.sampled_from([0, 1, 2]))
        out[name] = {c: draw(_column(kind, n)) for c, kind in columns.items()}
    return out


def to_arrow(plain: dict[str, list[Any]], kinds: dict[str, str]) -> Any:
    """A plain table (see :func:`tables`) as a ``pyarrow.Table`` of the schema's types."""
    import pyarrow as pa

    arrays = {}
    for c, kind in kinds.items():
        values = plain[c]
        if kind == "int":
            arrays[c] = pa.array(values, pa.int64())
        elif kind == "float":
            arrays[c] = pa.array(values, pa.float64())
        elif kind == "string":
            arrays[c] = pa.array(values, pa.string())
        elif kind == "date":
            arrays[c] = pa.array([None if v is None else _EPOCH + dt.timedelta(days=v)
                                  for v in values], pa.date32())
        else:
            arrays[c] = pa.array([None if v is None else Decimal(v).scaleb(-2)
                                  for v in values], pa.decimal128(9, 2))
    return pa.table(arrays)


def from_plain(data: dict[str, dict[str, list[Any]]],
               schema: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """Every plain table as Arrow."""
    schema = schema or SCHEMA
    return {name: to_arrow(cols, schema[name]) for name, cols in data.items()}


# -- expressions ------------------------------------------------------------------------------
_NUMERIC = ("int", "float", "decimal")


def _literal(kind: str, draw) -> str:
    if kind == "int":
        return str(draw(st.integers(-2, 9) | st.integers(-3, 42)))
    if kind == "float":
        return repr(draw(st.integers(-20, 20) | st.integers(-160, 160)) / 4)
    if kind == "decimal":
        return f"{draw(st.integers(-20, 20) | st.integers(-160, 160)) * 25 / 100:.2f}"
    if kind == "string":
        return "'" + draw(st.sampled_from(WORDS + ["b%"])).replace("%", "") + "'"
    day = _EPOCH + dt.timedelta(days=_DAY0 + draw(st.integers(-1, 9) | st.integers(-2, 42)))
    return f"date '{day.isoformat()}'"


@dataclass
class _Scope:
    """The columns a WHERE or SELECT may read: ``(sql, kind)`` pairs."""

    columns: list[tuple[str, str]]

    def of(self, *kinds: str) -> list[tuple[str, str]]:
        return [c for c in self.columns if c[1] in kinds]


def _scope(aliases: list[tuple[str, str]]) -> _Scope:
    """``aliases``: ``(alias, table)`` pairs."""
    return _Scope([(f"{a}.{c}", k) for a, t in aliases for c, k in SCHEMA[t].items()])


def _numeric_expr(draw, scope: _Scope, depth: int = 1) -> tuple[str, str]:
    """An arithmetic expression over numeric columns: ``(sql, kind)``; sums stay exact."""
    col, kind = draw(st.sampled_from(scope.of(*_NUMERIC)))
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        return col, kind
    op = draw(st.sampled_from(["+", "-", "*", "+c", "*c", "neg", "case"]))
    if op in ("+", "-", "*"):
        other, okind = _numeric_expr(draw, scope, depth - 1)
        out_kind = "int" if kind == okind == "int" else "float"
        return f"({col} {op} {other})", out_kind
    if op == "+c":
        return f"({col} + {_literal('int', draw)})", kind
    if op == "*c":
        return f"({col} * {draw(st.sampled_from(['2', '-1', '0.5', '3']))})", (
            kind if kind != "int" else "float")
    if op == "neg":
        return f"(-{col})", kind
    cond = _predicate(draw, scope, 0)
    return f"(case when {cond} then {col} else {_literal('int', draw)} end)", (
        "int" if kind == "int" else "float")


def _atom(draw, scope: _Scope, subqueries: bool) -> str:
    """One comparison-like predicate."""
    choices = ["cmp", "cmp", "cmp_cols", "between", "in", "is_null", "like", "arith",
               "date_arith"]
    if subqueries:
        choices += ["in_sub", "exists", "scalar_sub"]
    choice = draw(st.sampled_from(choices))
    col, kind = draw(st.sampled_from(scope.columns))
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
    if choice == "cmp":
        other = "null" if draw(st.integers(0, 15)) == 0 else _literal(kind, draw)
        if draw(st.booleans()):
            return f"{other} {op} {col}"
        return f"{col} {op} {other}"
    if choice == "cmp_cols":
        family = _NUMERIC if kind in _NUMERIC else (kind,)
        other, _ = draw(st.sampled_from(scope.of(*family)))
        return f"{col} {op} {other}"
    if choice == "between":
        neg = "not " if draw(st.integers(0, 3)) == 0 else ""
        return f"{col} {neg}between {_literal(kind, draw)} and {_literal(kind, draw)}"
    if choice == "in":
        items = [_literal(kind, draw) for _ in range(draw(st.integers(1, 4)))]
        if draw(st.integers(0, 3)) == 0:
            items.insert(draw(st.integers(0, len(items))), "null")
        neg = "not " if draw(st.booleans()) else ""
        return f"{col} {neg}in ({', '.join(items)})"
    if choice == "is_null":
        return f"{col} is {'not ' if draw(st.booleans()) else ''}null"
    if choice == "like" and scope.of("string"):
        s, _ = draw(st.sampled_from(scope.of("string")))
        pattern = draw(st.sampled_from(["a%", "%a", "%b%", "_", "a_", "", "%", "é%"]))
        return f"{s} {'not ' if draw(st.booleans()) else ''}like '{pattern}'"
    if choice == "date_arith" and scope.of("date"):
        d, _ = draw(st.sampled_from(scope.of("date")))
        shift = draw(st.sampled_from(["+ 3", "- 10", "+ interval '1' month",
                                      "- interval '1' year", "+ interval '20' day"]))
        return f"{d} {shift} {op} {_literal('date', draw)}"
    if choice in ("arith", "like", "date_arith"):
        expr, ekind = _numeric_expr(draw, scope, 2)
        return f"{expr} {op} {_literal('int' if ekind == 'int' else 'float', draw)}"
    if choice == "in_sub":
        return _in_subquery(draw, scope, kind, col)
    if choice == "exists":
        return _exists(draw, scope)
    # a scalar aggregate of u compared with a numeric column
    num, _ = draw(st.sampled_from(scope.of(*_NUMERIC)))
    agg = draw(st.sampled_from(["avg(u2.w)", "min(u2.w)", "max(u2.x)", "sum(u2.w)",
                                "count(*)", "count(u2.x)"]))
    where = ""
    if draw(st.booleans()):
        where = f" where {_predicate(draw, _scope([('u2', 'u')]), 1)}"
    return f"{num} {op} (select {agg} from u as u2{where})"


_SUB_COLUMNS = {"int": ["k", "w"], "string": ["s"], "date": ["d"], "float": ["x"],
                "decimal": ["x", "w"]}


def _in_subquery(draw, scope: _Scope, kind: str, col: str) -> str:
    """``col [NOT] IN (SELECT <u column of a comparable kind> FROM u [WHERE ...])``."""
    inner = draw(st.sampled_from(_SUB_COLUMNS[kind]))
    where = ""
    if draw(st.booleans()):
        where = f" where {_predicate(draw, _scope([('u2', 'u')]), 1)}"
    distinct = "distinct " if draw(st.integers(0, 3)) == 0 else ""
    neg = "not " if draw(st.booleans()) else ""
    return f"{col} {neg}in (select {distinct}u2.{inner} from u as u2{where})"


def _exists(draw, scope: _Scope) -> str:
    """``[NOT] EXISTS`` of u correlated by an equality with an outer column of its kind."""
    pairs = [(o, i) for o, k in scope.columns for i in _SUB_COLUMNS.get(k, [])
             if k in ("int", "string", "date")]
    outer, inner = draw(st.sampled_from(pairs))
    terms = [f"u2.{inner} = {outer}"]
    if draw(st.booleans()):
        terms.append(_predicate(draw, _scope([("u2", "u")]), 0))
    neg = "not " if draw(st.booleans()) else ""
    return f"{neg}exists (select * from u as u2 where {' and '.join(terms)})"


def _predicate(draw, scope: _Scope, depth: int, subqueries: bool = False) -> str:
    """A WHERE tree: AND/OR/NOT over atoms."""
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        return _atom(draw, scope, subqueries)
    form = draw(st.sampled_from(["and", "or", "not"]))
    if form == "not":
        return f"not ({_predicate(draw, scope, depth - 1, subqueries)})"
    a = _predicate(draw, scope, depth - 1, subqueries)
    b = _predicate(draw, scope, depth - 1, subqueries)
    return f"({a} {form} {b})"


# -- queries ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Query:
    """A generated query and whether its ORDER BY fixes the row order."""

    sql: str
    ordered: bool


# join keys of each pair of tables, of equal kinds
_KEYS = {("t", "u"): [("k", "k"), ("g", "w"), ("s", "s"), ("d", "d"), ("f", "x"), ("v", "k")],
         ("u", "r"): [("k", "k"), ("s", "s"), ("w", "y")],
         ("t", "r"): [("k", "k"), ("s", "s"), ("g", "y")]}


def _from_clause(draw) -> tuple[str, list[tuple[str, str]], list[str], bool]:
    """``(FROM ..., [(alias, table)], WHERE terms it adds, left-joined)``."""
    form = draw(st.sampled_from(["t", "t", "inner", "inner", "where", "left", "left", "three",
                                 "three_left"]))
    if form == "t":
        return "t", [("t", "t")], [], False
    keys = draw(st.lists(st.sampled_from(_KEYS[("t", "u")]), min_size=1,
                         max_size=draw(st.sampled_from([1, 1, 1, 2])), unique=True))
    on = " and ".join(f"t.{a} = u.{b}" for a, b in keys)
    if form == "where":
        return "t, u", [("t", "t"), ("u", "u")], [on], False
    if form == "inner":
        return f"t join u on {on}", [("t", "t"), ("u", "u")], [], False
    if form == "left":
        if draw(st.booleans()):  # a filter of the joined table in ON
            on += f" and {_atom(draw, _scope([('u', 'u')]), False)}"
        return f"t left join u on {on}", [("t", "t"), ("u", "u")], [], True
    a, b = draw(st.sampled_from(_KEYS[("u", "r")] if draw(st.booleans()) else _KEYS[("t", "r")]))
    left = "u" if (a, b) in _KEYS[("u", "r")] and draw(st.booleans()) else "t"
    if left == "t" and (a, b) not in _KEYS[("t", "r")]:
        a, b = "k", "k"
    side = "left " if form == "three_left" else ""
    return (f"t join u on {on} {side}join r on {left}.{a} = r.{b}",
            [("t", "t"), ("u", "u"), ("r", "r")], [], form == "three_left")


def _where(draw, scope: _Scope, extra: list[str]) -> str:
    terms = list(extra)
    if draw(st.integers(0, 2)):
        terms.append(_predicate(draw, scope, draw(st.integers(0, 2)),
                                subqueries=draw(st.integers(0, 2)) == 0))
    return f" where {' and '.join(terms)}" if terms else ""


def _order(names: list[str], draw) -> str:
    parts = []
    for n in names:
        direction = draw(st.sampled_from(["", " desc"]))
        nulls = draw(st.sampled_from([" nulls first", " nulls last"]))
        parts.append(f"{n}{direction}{nulls}")
    return " order by " + ", ".join(parts)


def _aggregate(draw, scope: _Scope) -> str:
    fn = draw(st.sampled_from(["count(*)", "count", "count_distinct", "sum", "avg", "min",
                               "max"]))
    if fn == "count(*)":
        return fn
    if fn in ("sum", "avg"):
        expr, _ = _numeric_expr(draw, scope, 1)
        return f"{fn}({expr})"
    col, _ = draw(st.sampled_from(scope.columns))
    if fn == "count_distinct":
        return f"count(distinct {col})"
    return f"{fn}({col})"


@st.composite
def queries(draw) -> Query:
    """One random query over :data:`SCHEMA` (see the module docstring)."""
    from_, aliases, extra, _ = _from_clause(draw)
    scope = _scope(aliases)
    where = _where(draw, scope, extra)
    shape = draw(st.sampled_from(["project", "distinct", "group", "group", "global", "window",
                                  "window", "setop", "grouping_sets"]))
    if shape == "window":
        return _window_query(draw, from_, scope, where)
    if shape == "setop":
        return _set_operation(draw)
    if shape == "grouping_sets":
        return _grouping_sets(draw, from_, scope, where)
    if shape in ("project", "distinct"):
        items = []
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.integers(0, 3)) == 0 and shape == "project":
                expr, _ = _numeric_expr(draw, scope, 2)
                if draw(st.integers(0, 3)) == 0:
                    expr = f"{expr} / {draw(st.sampled_from(['4', '3', '-2.5']))}"
                items.append(expr)
            else:
                items.append(draw(st.sampled_from(scope.columns))[0])
        names = [f"c{i}" for i in range(len(items))]
        select = ", ".join(f"{e} as {n}" for e, n in zip(items, names, strict=True))
        distinct = "distinct " if shape == "distinct" else ""
        sql = f"select {distinct}{select} from {from_}{where}"
        if draw(st.booleans()):
            sql += _order(names, draw)
            if draw(st.booleans()):
                sql += f" limit {draw(st.integers(0, 12))}"
            return Query(sql, True)
        return Query(sql, False)
    aggs = [_aggregate(draw, scope) for _ in range(draw(st.integers(1, 4)))]
    if shape == "global":
        select = ", ".join(f"{a} as a{i}" for i, a in enumerate(aggs))
        return Query(f"select {select} from {from_}{where}", True)
    keys = draw(st.lists(st.sampled_from([c for c, _ in scope.columns]), min_size=1,
                         max_size=2, unique=True))
    names = [f"k{i}" for i in range(len(keys))]
    select = ", ".join([f"{k} as {n}" for k, n in zip(keys, names, strict=True)]
                       + [f"{a} as a{i}" for i, a in enumerate(aggs)])
    sql = f"select {select} from {from_}{where} group by {', '.join(keys)}"
    if draw(st.integers(0, 3)) == 0:
        having = draw(st.sampled_from(["count(*) > 1", "count(*) < 3", f"{aggs[0]} is not null",
                                       "min(" + keys[0] + ") is not null"]))
        sql += f" having {having}"
    if draw(st.booleans()):
        sql += _order(names, draw)
        if draw(st.booleans()):
            sql += f" limit {draw(st.integers(0, 8))}"
        return Query(sql, True)
    return Query(sql, False)


_RANKING = ["rank()", "dense_rank()", "percent_rank()", "cume_dist()"]


def _sort_terms(draw, columns: list[str]) -> list[str]:
    return [f"{c}{draw(st.sampled_from(['', ' desc']))}"
            f"{draw(st.sampled_from(['', ' nulls first', ' nulls last']))}" for c in columns]


def _window(draw, scope: _Scope) -> str:
    """One window function over ``scope``'s columns whose values do not depend on the order
    of rows tied on every column."""
    names = [c for c, _ in scope.columns]
    partition = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
    over = f"partition by {', '.join(partition)}" if partition else ""
    keys = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
    mode = draw(st.sampled_from(["ranking", "total", "total", "range", "whole"]))
    if mode == "ranking":  # ties are peers: the same value whatever their order
        order = ", ".join(_sort_terms(draw, keys))
        return f"{draw(st.sampled_from(_RANKING))} over ({over} order by {order})"
    if mode == "whole":
        return f"{_aggregate(draw, scope)} over ({over})"
    if mode == "range":  # one numeric key: peers and offsets by value
        key, kind = draw(st.sampled_from(scope.of(*_NUMERIC)))
        (term,) = _sort_terms(draw, [key])
        fn = draw(st.sampled_from(["count(*)", "sum", "min", "max", "avg", "count"]))
        arg, _ = draw(st.sampled_from(scope.of(*_NUMERIC)))
        call = fn if fn == "count(*)" else f"{fn}({arg})"
        step = {"int": ["0", "1", "2", "5"], "float": ["0", "0.25", "1.5", "10"],
                "decimal": ["0", "0.25", "1", "3.50"]}[kind]
        sides = ["preceding", "following"]
        ends = [(draw(st.sampled_from(step)), draw(st.sampled_from(sides))) for _ in range(2)]
        ends.sort(key=lambda e: (float(e[0]) * (1 if e[1] == "following" else -1),
                                 e[1] == "following"))  # PRECEDING first: SQL's rule
        bounds = [f"{v} {side}" for v, side in ends]
        a, b = sorted([draw(st.integers(-3, 3)), draw(st.integers(-3, 3))])
        frame = draw(st.sampled_from([
            "", f" range between {bounds[0]} and {bounds[1]}",
            " range between unbounded preceding and current row",
            f" range between current row and {draw(st.sampled_from(step))} following",
            f" range between {draw(st.sampled_from(step))} preceding and unbounded following",
            f" groups between {_bound(a)} and {_bound(b)}",
            f" groups between unbounded preceding and {_bound(b)}"]))
        return f"{call} over ({over} order by {term}{frame}{_exclusion(draw, frame)})"
    order = ", ".join(_sort_terms(draw, keys) + [n for n in names if n not in keys])
    col, kind = draw(st.sampled_from(scope.columns))
    fn = draw(st.sampled_from(["row_number", "ntile", "lag", "lead", "first_value",
                               "last_value", "nth_value", "agg_rows"]))
    if fn == "row_number":
        return f"row_number() over ({over} order by {order})"
    if fn == "ntile":
        return f"ntile({draw(st.integers(1, 7))}) over ({over} order by {order})"
    if fn in ("lag", "lead"):
        k = draw(st.integers(0, 3))
        default = f", {_literal(kind, draw)}" if draw(st.booleans()) else ""
        nulls = " ignore nulls" if draw(st.integers(0, 3)) == 0 else ""
        return f"{fn}({col}, {k}{default}{nulls}) over ({over} order by {order})"
    a, b = sorted([draw(st.integers(-3, 3)), draw(st.integers(-3, 3))])
    frame = draw(st.sampled_from([
        "", f" rows between {_bound(a)} and {_bound(b)}",
        f" rows between unbounded preceding and {_bound(b)}",
        f" rows between {_bound(a)} and unbounded following"]))
    frame += _exclusion(draw, frame)
    if fn == "agg_rows":
        agg = draw(st.sampled_from(["count(*)", "count", "sum", "min", "max", "avg"]))
        if agg == "count(*)":
            call = agg
        elif agg in ("sum", "avg"):
            call = f"{agg}({_numeric_expr(draw, scope, 1)[0]})"
        else:
            call = f"{agg}({col})"
        return f"{call} over ({over} order by {order}{frame})"
    nulls = " ignore nulls" if draw(st.integers(0, 3)) == 0 else ""
    arg = f"{col}, {draw(st.integers(1, 3))}" if fn == "nth_value" else col
    return f"{fn}({arg}{nulls}) over ({over} order by {order}{frame})"


def _bound(v: int) -> str:
    """A frame end ``v`` rows or groups from the current one."""
    return "current row" if v == 0 else (f"{-v} preceding" if v < 0 else f"{v} following")


def _exclusion(draw, frame: str) -> str:
    """Sometimes an EXCLUDE clause (only after an explicit frame, as SQL requires)."""
    if not frame or draw(st.integers(0, 2)):
        return ""
    return " exclude " + draw(st.sampled_from(["current row", "group", "ties", "no others"]))


def _window_query(draw, from_: str, scope: _Scope, where: str) -> Query:
    """Columns and window functions of them (the rows compared as a multiset), or the rows
    QUALIFY keeps."""
    cols = draw(st.lists(st.sampled_from([c for c, _ in scope.columns]), min_size=1,
                         max_size=3, unique=True))
    windows = [_window(draw, scope) for _ in range(draw(st.integers(1, 3)))]
    items = [f"{c} as c{i}" for i, c in enumerate(cols)] + [
        f"{w} as w{i}" for i, w in enumerate(windows)]
    sql = f"select {', '.join(items)} from {from_}{where}"
    if draw(st.integers(0, 4)) == 0:  # the first rows of each partition, in a total order
        names = [c for c, _ in scope.columns]
        part = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
        order = ", ".join(_sort_terms(draw, names))
        sql += (f" qualify row_number() over (partition by {', '.join(part)} order by {order})"
                f" <= {draw(st.integers(1, 3))}")
    return Query(sql, False)


def _set_operation(draw) -> Query:
    """``SELECT ... FROM t [WHERE] op SELECT ... FROM u [WHERE]`` over columns of one kind."""
    pairs = [("k", "k"), ("g", "w"), ("s", "s"), ("d", "d"), ("f", "x"), ("v", "w")]
    chosen = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=2, unique=True))
    left = ", ".join(f"t.{a} as c{i}" for i, (a, _) in enumerate(chosen))
    right = ", ".join(f"u.{b}" for _, b in chosen)
    lw = _where(draw, _scope([("t", "t")]), [])
    rw = _where(draw, _scope([("u", "u")]), [])
    op = draw(st.sampled_from(["union", "union all", "intersect", "intersect all", "except",
                               "except all"]))
    return Query(f"select {left} from t{lw} {op} select {right} from u{rw}", False)


def _grouping_sets(draw, from_: str, scope: _Scope, where: str) -> Query:
    """ROLLUP, CUBE or GROUPING SETS of one to three keys, with aggregates and GROUPING()."""
    keys = draw(st.lists(st.sampled_from([c for c, _ in scope.columns]), min_size=1,
                         max_size=3, unique=True))
    form = draw(st.sampled_from(["rollup", "cube", "sets"]))
    if form == "sets":
        sets = draw(st.lists(st.lists(st.sampled_from(keys), max_size=len(keys), unique=True),
                             min_size=1, max_size=3))
        if {k for s in sets for k in s} != set(keys):  # every key in some set (SQL's rule)
            sets.append(keys)
        group = "grouping sets (" + ", ".join(f"({', '.join(s)})" for s in sets) + ")"
    else:
        group = f"{form}({', '.join(keys)})"
    aggs = [_aggregate(draw, scope) for _ in range(draw(st.integers(1, 3)))]
    items = [f"{k} as k{i}" for i, k in enumerate(keys)] + [
        f"{a} as a{i}" for i, a in enumerate(aggs)] + [f"grouping({', '.join(keys)}) as gr"]
    return Query(f"select {', '.join(items)} from {from_}{where} group by {group}", False)


def cases(n_queries: int = 4) -> st.SearchStrategy[tuple[dict, list[Query]]]:
    """Tables and a few queries over them (one table draw serves several queries)."""
    return st.tuples(tables(), st.lists(queries(), min_size=1, max_size=n_queries))


# -- comparison -------------------------------------------------------------------------------
def _normal(value: Any) -> Any:
    """A result value comparable across engines: numbers (bools, ints, decimals) as floats,
    dates as days, strings as they are, NULL (and NaN) as None."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return float((value - _EPOCH).days)
    if isinstance(value, bool | int | Decimal | float):
        out = float(value)
        return None if math.isnan(out) else out
    return str(value)


def normal_rows(columns: list[list[Any]]) -> list[tuple[Any, ...]]:
    """Rows (tuples of :func:`_normal` values) from lists of column values."""
    return [tuple(_normal(v) for v in row) for row in zip(*columns, strict=True)]


def _sort_key(row: tuple[Any, ...]) -> tuple:
    # NULLs first; floats rounded so values a rounding apart sort alike
    return tuple((0, 0.0, "") if v is None else
                 (1, float(f"{v:.9g}"), "") if isinstance(v, float) else (2, 0.0, v)
                 for v in row)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=RTOL, abs_tol=0.0)
    return a == b


def compare(ours: list[tuple], ref: list[tuple], ordered: bool) -> str | None:
    """None when the rows are equal (as multisets, or in order), else what differs."""
    if len(ours) != len(ref):
        return f"{len(ours)} rows != {len(ref)}: ours {ours[:8]} duckdb {ref[:8]}"
    if not ordered:
        ours, ref = sorted(ours, key=_sort_key), sorted(ref, key=_sort_key)
    for i, (x, y) in enumerate(zip(ours, ref, strict=True)):
        if len(x) != len(y) or not all(_same(a, b) for a, b in zip(x, y, strict=True)):
            return f"row {i}: ours {x} != duckdb {y}"
    return None


def duckdb_over(directory: str, tables: list[str]) -> Any:
    """A DuckDB connection with a view of every table's Parquet file in ``directory``."""
    import duckdb

    con = duckdb.connect()
    for t in tables:
        con.execute(f"create view {t} as select * from read_parquet('{directory}/{t}.parquet')")
    return con


def duckdb_rows(con: Any, sql: str) -> list[tuple]:
    return normal_rows(list(zip(*con.execute(sql).fetchall(), strict=True)) or
                       [[] for _ in con.description])


def engine_rows(table: Any) -> list[tuple]:
    """Rows of an engine result (:class:`hpc.domains.sql.Table`)."""
    arrow = table.to_arrow()
    return normal_rows([arrow.column(i).to_pylist() for i in range(arrow.num_columns)])


def check(sql: str, ordered: bool, catalog: Any, con: Any, comm: Any = None,
          options: Any = None) -> str | None:
    """Collective (``comm``). What differs between the engine's rows (on rank 0) and
    DuckDB's (``con``, on rank 0) for ``sql``; None when equal (and on other ranks)."""
    from hpc.domains.sql import query

    result = query(sql, catalog, comm, options)
    if con is None:
        return f"rank holds {result.num_rows} rows" if result.num_rows else None
    return compare(engine_rows(result), duckdb_rows(con, sql), ordered)
