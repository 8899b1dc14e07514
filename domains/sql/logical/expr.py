"""The logical plan's expression tree: a handful of immutable node types, each typed.

No sqlglot node and no array lives here. Every scalar operator and function is a
:class:`Call` with a name from :data:`FUNCTIONS` (so the physical layer dispatches on one
string table), CASE is :class:`Case`, an aggregate is :class:`Aggregate` (found only in an
aggregate plan node's list), and a column is a :class:`Ref` to a name unique in the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .types import BOOLEAN, SQLType

__all__ = ["Expr", "Ref", "Literal", "Call", "Case", "Aggregate", "SortKey", "Bound", "Frame",
           "FRAME_EXCLUSIONS", "Window", "FUNCTIONS", "AGGREGATES", "WINDOW_FUNCTIONS",
           "WHOLE_PARTITION", "walk", "transform", "refs", "conjuncts", "conjoin", "TRUE"]

# Scalar functions, by the name a Call carries (the binder maps SQL spellings onto these).
FUNCTIONS = frozenset({
    # arithmetic and comparison
    "add", "sub", "mul", "div", "intdiv", "mod", "neg",
    "eq", "ne", "lt", "le", "gt", "ge", "is_distinct", "is_not_distinct",
    # logic and NULL tests (and/or take two or more arguments)
    "and", "or", "not", "is_null", "is_not_null", "is_true", "is_false",
    # membership: in(x, v1, v2, ...); like(x, pattern[, escape]); ilike as like, case-folded
    "in", "like", "ilike", "starts_with",
    # NULL handling and conversion; cast's target is the Call's type
    "coalesce", "nullif", "cast", "try_cast",
    # strings
    "lower", "upper", "length", "concat", "trim", "ltrim", "rtrim", "substring", "replace",
    "strpos", "left", "right",
    # dates: date_trunc(part, x), extract(part, x), date_diff(part, a, b); interval values
    # are Literals of type INTERVAL holding (months, days, microseconds)
    "date_trunc", "extract", "date_diff", "date_add", "date_sub",
    # numbers
    "abs", "round", "floor", "ceil", "power", "sqrt", "ln", "log10", "exp", "sign",
})

# Aggregate functions (an Aggregate node's ``name``).
AGGREGATES = frozenset({
    "count_star", "count", "sum", "avg", "min", "max", "stddev_samp", "stddev_pop",
    "var_samp", "var_pop", "median", "quantile_cont", "string_agg", "bool_and", "bool_or",
    "first",  # any value of the group: a decorrelated scalar subquery's single row
    "grouping",  # GROUPING(keys): a bit per key, 1 where the grouping set leaves it out
})


# Window functions of their own (every aggregate may also be windowed).
WINDOW_FUNCTIONS = frozenset({
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile",
    "lag", "lead", "first_value", "last_value", "nth_value",
})


_T = TypeVar("_T", bound=type)


def hashed_once(cls: _T) -> _T:
    """A frozen dataclass whose instances remember their hash: a tree's hash is its whole
    subtree's, and plans and expressions are hashed over and over (dictionaries of nodes in
    the optimizer and the executor), which otherwise walks the subtree every time. The
    remembered hash is not pickled (a string's hash differs between processes)."""
    plain = cls.__hash__

    def __hash__(self: Any) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = plain(self)
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self: Any) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    cls.__hash__ = __hash__  # type: ignore[assignment]
    cls.__getstate__ = __getstate__  # type: ignore[attr-defined]
    cls._plain_hash = plain  # type: ignore[attr-defined]
    return cls


class Expr:
    """Base of expression nodes: every node has a ``type`` and its ``children``."""

    type: SQLType

    @property
    def children(self) -> tuple[Expr, ...]:
        return ()

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return self


@hashed_once
@dataclass(frozen=True)
class Ref(Expr):
    """The column ``name`` of the node's input (names are unique in a plan)."""

    name: str
    type: SQLType

    def __str__(self) -> str:
        return self.name


@hashed_once
@dataclass(frozen=True)
class Literal(Expr):
    """A constant: ``None`` for NULL; int, float, :class:`decimal.Decimal` (DECIMAL), str,
    bool, int days since 1970-01-01 (DATE), int microseconds (TIMESTAMP) or a
    ``(months, days, microseconds)`` tuple (INTERVAL)."""

    value: Any
    type: SQLType

    def __str__(self) -> str:
        if self.value is None:
            return "NULL"
        if self.type.kind == "varchar":
            return "'" + str(self.value).replace("'", "''") + "'"
        if self.type.kind in ("date", "timestamp", "interval", "decimal"):
            return f"{self.type}({self.value})"
        return str(self.value)


@hashed_once
@dataclass(frozen=True)
class Call(Expr):
    """Scalar function ``name`` (one of :data:`FUNCTIONS`) of ``args``."""

    name: str
    args: tuple[Expr, ...]
    type: SQLType

    def __post_init__(self) -> None:
        if self.name not in FUNCTIONS:
            raise ValueError(f"unknown scalar function {self.name!r}")

    @property
    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, args=tuple(children))

    def __str__(self) -> str:
        if self.name == "cast":
            return f"CAST({self.args[0]} AS {self.type})"
        return f"{self.name}({', '.join(map(str, self.args))})"


@hashed_once
@dataclass(frozen=True)
class Case(Expr):
    """``CASE WHEN c1 THEN v1 ... ELSE default END`` (``whens``: (condition, value) pairs;
    the simple form ``CASE x WHEN a ...`` is bound as ``x = a`` conditions)."""

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr
    type: SQLType

    @property
    def children(self) -> tuple[Expr, ...]:
        return tuple(e for pair in self.whens for e in pair) + (self.default,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        c = tuple(children)
        whens = tuple((c[2 * i], c[2 * i + 1]) for i in range(len(self.whens)))
        return replace(self, whens=whens, default=c[-1])

    def __str__(self) -> str:
        arms = " ".join(f"WHEN {c} THEN {v}" for c, v in self.whens)
        return f"CASE {arms} ELSE {self.default} END"


@hashed_once
@dataclass(frozen=True)
class SortKey:
    """An ORDER BY term: ``expr`` ascending or not, NULLs first or last."""

    expr: Expr
    ascending: bool = True
    nulls_first: bool = False

    def __str__(self) -> str:
        return (f"{self.expr} {'ASC' if self.ascending else 'DESC'} "
                f"NULLS {'FIRST' if self.nulls_first else 'LAST'}")


@hashed_once
@dataclass(frozen=True)
class Aggregate(Expr):
    """Aggregate ``name`` (one of :data:`AGGREGATES`) of ``args`` over a group; ``distinct``
    for ``COUNT(DISTINCT x)`` and the like; ``order``: STRING_AGG's ORDER BY; ``params``:
    constant arguments (QUANTILE_CONT's fraction, STRING_AGG's separator); ``filter``: the
    ``FILTER (WHERE ...)`` condition, only rows where it is TRUE count."""

    name: str
    args: tuple[Expr, ...]
    type: SQLType
    distinct: bool = False
    order: tuple[SortKey, ...] = ()
    params: tuple[Any, ...] = field(default=())
    filter: Expr | None = None

    def __post_init__(self) -> None:
        if self.name not in AGGREGATES:
            raise ValueError(f"unknown aggregate {self.name!r}")

    @property
    def children(self) -> tuple[Expr, ...]:
        own = self.args + tuple(k.expr for k in self.order)
        return own + ((self.filter,) if self.filter is not None else ())

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        c = tuple(children)
        n, m = len(self.args), len(self.args) + len(self.order)
        order = tuple(replace(k, expr=e) for k, e in zip(self.order, c[n:m], strict=True))
        return replace(self, args=c[:n], order=order,
                       filter=c[m] if self.filter is not None else None)

    def __str__(self) -> str:
        inner = ", ".join(map(str, self.args)) or "*"
        if self.distinct:
            inner = "DISTINCT " + inner
        if self.params:
            inner += ", " + ", ".join(map(repr, self.params))
        if self.order:
            inner += " ORDER BY " + ", ".join(map(str, self.order))
        where = f" FILTER (WHERE {self.filter})" if self.filter is not None else ""
        return f"{self.name}({inner}){where}"


BOUND_SIDES = ("unbounded_preceding", "preceding", "current", "following",
               "unbounded_following")


@dataclass(frozen=True)
class Bound:
    """One end of a window frame: ``side`` (one of :data:`BOUND_SIDES`) and, for
    ``preceding`` / ``following``, the constant ``offset`` (rows for ROWS frames, peer
    groups for GROUPS frames, for RANGE frames a value of the ORDER BY key's type or, over a
    DATE or TIMESTAMP key, an interval as ``(months, days, microseconds)``)."""

    side: str
    offset: Any = None

    def __post_init__(self) -> None:
        if self.side not in BOUND_SIDES:
            raise ValueError(f"frame bound {self.side!r}: expected one of {BOUND_SIDES}")

    def __str__(self) -> str:
        words = self.side.replace("_", " ").upper()
        if self.side == "current":
            return "CURRENT ROW"
        if isinstance(self.offset, tuple):  # an INTERVAL: (months, days, microseconds)
            months, days, micros = self.offset
            return f"INTERVAL '{months} months {days} days {micros} microseconds' {words}"
        return f"{self.offset} {words}" if self.offset is not None else words


FRAME_EXCLUSIONS = ("no_others", "current", "group", "ties")


@dataclass(frozen=True)
class Frame:
    """A window frame: ``kind`` ``"rows"`` (positions), ``"range"`` (ORDER BY values) or
    ``"groups"`` (peer groups; in the last two CURRENT ROW means the row and its peers), from
    ``start`` to ``end``, both included, less the rows ``exclude`` names (one of
    :data:`FRAME_EXCLUSIONS`: none, the row itself, its peer group, its peers but itself)."""

    kind: str
    start: Bound
    end: Bound
    exclude: str = "no_others"

    def __post_init__(self) -> None:
        if self.exclude not in FRAME_EXCLUSIONS:
            raise ValueError(f"frame exclusion {self.exclude!r}: expected one of "
                             f"{FRAME_EXCLUSIONS}")

    def __str__(self) -> str:
        text = f"{self.kind.upper()} BETWEEN {self.start} AND {self.end}"
        if self.exclude != "no_others":
            text += " EXCLUDE " + self.exclude.replace("_", " ").upper().replace(
                "CURRENT", "CURRENT ROW")
        return text


WHOLE_PARTITION = Frame("rows", Bound("unbounded_preceding"), Bound("unbounded_following"))


@hashed_once
@dataclass(frozen=True)
class Window(Expr):
    """Window function ``name`` (one of :data:`WINDOW_FUNCTIONS` or :data:`AGGREGATES`) of
    ``args`` over the rows of the current row's partition (equal ``partition`` values)
    ordered by ``order``, within ``frame``. ``params``: constant arguments (NTILE's bucket
    count, LAG/LEAD's offset, NTH_VALUE's position); ``ignore_nulls`` for the value
    functions; ``distinct`` and ``filter`` as for :class:`Aggregate`. LAG/LEAD's default is
    their second argument."""

    name: str
    args: tuple[Expr, ...]
    type: SQLType
    partition: tuple[Expr, ...] = ()
    order: tuple[SortKey, ...] = ()
    frame: Frame = WHOLE_PARTITION
    params: tuple[Any, ...] = ()
    ignore_nulls: bool = False
    distinct: bool = False
    filter: Expr | None = None

    def __post_init__(self) -> None:
        if self.name not in WINDOW_FUNCTIONS and self.name not in AGGREGATES:
            raise ValueError(f"unknown window function {self.name!r}")

    @property
    def children(self) -> tuple[Expr, ...]:
        own = self.args + self.partition + tuple(k.expr for k in self.order)
        return own + ((self.filter,) if self.filter is not None else ())

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        c = tuple(children)
        a, p = len(self.args), len(self.args) + len(self.partition)
        o = p + len(self.order)
        order = tuple(replace(k, expr=e) for k, e in zip(self.order, c[p:o], strict=True))
        return replace(self, args=c[:a], partition=c[a:p], order=order,
                       filter=c[o] if self.filter is not None else None)

    @property
    def spec(self) -> tuple[tuple[Expr, ...], tuple[SortKey, ...]]:
        """What a window plan node shares among its functions: partition and order."""
        return self.partition, self.order

    def __str__(self) -> str:
        inner = ", ".join(map(str, self.args))
        if self.distinct:
            inner = "DISTINCT " + inner
        if self.params:
            inner += (", " if inner else "") + ", ".join(map(repr, self.params))
        text = f"{self.name}({inner})" + (" IGNORE NULLS" if self.ignore_nulls else "")
        if self.filter is not None:
            text += f" FILTER (WHERE {self.filter})"
        over = []
        if self.partition:
            over.append("PARTITION BY " + ", ".join(map(str, self.partition)))
        if self.order:
            over.append("ORDER BY " + ", ".join(map(str, self.order)))
        if self.name not in _FRAMELESS:
            over.append(str(self.frame))
        return f"{text} OVER ({' '.join(over)})"


# window functions that ignore the frame
_FRAMELESS = frozenset({"row_number", "rank", "dense_rank", "percent_rank", "cume_dist",
                        "ntile", "lag", "lead"})

TRUE = Literal(True, BOOLEAN)


def walk(e: Expr) -> Iterator[Expr]:
    """``e`` and all its descendants, parents first."""
    yield e
    for c in e.children:
        yield from walk(c)


def transform(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """``e`` rebuilt bottom-up: each node is replaced by ``fn(node)`` where that is not None."""
    children = e.children
    if children:
        new = tuple(transform(c, fn) for c in children)
        if any(a is not b for a, b in zip(new, children, strict=True)):
            e = e.with_children(new)
    out = fn(e)
    return e if out is None else out


def refs(e: Expr) -> set[str]:
    """The column names ``e`` reads."""
    return {n.name for n in walk(e) if isinstance(n, Ref)}


def conjuncts(e: Expr | None) -> list[Expr]:
    """The AND-ed terms of a condition."""
    if e is None:
        return []
    if isinstance(e, Call) and e.name == "and":
        return [t for a in e.args for t in conjuncts(a)]
    return [e]


def conjoin(terms: list[Expr]) -> Expr | None:
    """The AND of ``terms`` (None for no terms)."""
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else Call("and", tuple(terms), BOOLEAN)
