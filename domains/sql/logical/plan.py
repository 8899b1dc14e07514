"""The logical plan: relational operators over named, typed columns.

Each node is immutable and knows its output ``schema`` (column names unique in the whole
plan, so a :class:`~.expr.Ref` means one column wherever it appears) and its ``inputs``.
Subqueries are joins here (semi, anti, mark, single), never executed while planning;
:class:`Exchange` is placed by the optimizer where rows move between ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from .expr import Aggregate as AggregateExpr
from .expr import Expr, SortKey, hashed_once
from .expr import Window as WindowExpr
from .partial import state_name, states
from .types import BOOLEAN, SQLType

__all__ = ["Field", "Node", "Scan", "Values", "Filter", "Project", "Join", "JOIN_KINDS", "SetOp",
           "SET_KINDS", "Aggregate", "Window", "Sort", "Limit", "Distinct", "Output", "Exchange",
           "explain", "expressions", "nodes"]


@dataclass(frozen=True)
class Field:
    """An output column: its plan-unique ``name`` and ``type``."""

    name: str
    type: SQLType


class Node:
    """Base of plan nodes. Immutable, so each computes its ``schema`` once and remembers
    its hash (a plan is hashed and its schemas read over and over while it is planned and
    run)."""

    @property
    def inputs(self) -> tuple[Node, ...]:
        return ()

    def with_inputs(self, inputs: tuple[Node, ...]) -> Node:
        return self

    @property
    def schema(self) -> tuple[Field, ...]:
        raise NotImplementedError

    def field(self, name: str) -> Field:
        for f in self.schema:
            if f.name == name:
                return f
        raise KeyError(f"{name!r} is not a column of {type(self).__name__}: "
                       f"{[f.name for f in self.schema]}")

    def describe(self) -> str:
        """One line for EXPLAIN."""
        return type(self).__name__


class _Unary(Node):
    input: Node

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Node, ...]) -> Node:
        (child,) = inputs
        if child is self.input:  # unchanged: a pass that rewrites nothing copies nothing
            return self
        return replace(self, input=child)  # type: ignore[type-var]

    @cached_property
    def schema(self) -> tuple[Field, ...]:
        return self.input.schema


@hashed_once
@dataclass(frozen=True)
class Scan(Node):
    """Table ``table`` of the catalog under ``alias``: ``columns`` are (output name, column of
    the table, type); ``raw``: string columns read with their file's dictionaries as they
    are (unsorted, with repeats: only per-entry predicates may read them); ``prune``: a
    condition over the output names that every row the plan keeps satisfies (the filter
    above, which still runs), by which row groups whose statistics rule it out are skipped
    (:mod:`~..optimizer.zone_maps`)."""

    table: str
    alias: str
    columns: tuple[tuple[str, str, SQLType], ...]
    raw: tuple[str, ...] = ()
    prune: Expr | None = None

    @cached_property
    def schema(self) -> tuple[Field, ...]:
        return tuple(Field(name, t) for name, _, t in self.columns)

    def describe(self) -> str:
        cols = ", ".join(source + (" (raw)" if source in self.raw else "")
                         for _, source, _ in self.columns)
        pruned = "" if self.prune is None else f" row groups by {self.prune}"
        return f"Scan {self.table} AS {self.alias} [{cols}]{pruned}"


@hashed_once
@dataclass(frozen=True)
class Values(Node):
    """Constant rows (a SELECT without FROM reads one row of no columns)."""

    rows: tuple[tuple[Expr, ...], ...]
    fields: tuple[Field, ...] = ()

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.fields

    def describe(self) -> str:
        return f"Values {len(self.rows)} row(s)"


@hashed_once
@dataclass(frozen=True)
class Filter(_Unary):
    """Rows of ``input`` where ``condition`` is TRUE (not FALSE, not NULL); ``settle``: raw
    string columns of the scan below (read only by per-entry predicates here) given a
    sorted dictionary of the strings the remaining rows hold, for the operators above."""

    input: Node
    condition: Expr
    settle: tuple[str, ...] = ()

    def describe(self) -> str:
        then = f", then settle [{', '.join(self.settle)}]" if self.settle else ""
        return f"Filter {self.condition}{then}"


@hashed_once
@dataclass(frozen=True)
class Project(_Unary):
    """Columns computed from ``input``'s: (name, expression) pairs."""

    input: Node
    exprs: tuple[tuple[str, Expr], ...]

    @cached_property
    def schema(self) -> tuple[Field, ...]:
        return tuple(Field(name, e.type) for name, e in self.exprs)

    def describe(self) -> str:
        return "Project " + ", ".join(
            name if str(e) == name else f"{name} := {e}" for name, e in self.exprs)


class _Binary(Node):
    left: Node
    right: Node

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def with_inputs(self, inputs: tuple[Node, ...]) -> Node:
        left, right = inputs
        if left is self.left and right is self.right:
            return self
        return replace(self, left=left, right=right)  # type: ignore[type-var]


JOIN_KINDS = ("inner", "left", "right", "full", "semi", "anti", "mark", "single")


@hashed_once
@dataclass(frozen=True)
class Join(_Binary):
    """A join of ``left`` and ``right`` on ``condition`` (None: every pair, a cross join).

    Kinds: ``inner``, ``left``, ``right``, ``full`` (outer joins pad with NULLs); ``semi`` /
    ``anti``: the left rows with / without a match; ``mark``: every left row plus the boolean
    column ``mark``, TRUE with a match, else FALSE (NULL where the join is null-aware and a
    comparison was NULL); ``single``: a left join that fails when a left row matches more
    than one right row (a scalar subquery).

    ``null_aware``: the number of trailing conjuncts of ``condition`` that are a quantified
    comparison (IN, NOT IN, ``op ANY``/``ALL``), judged with SQL's NULLs: a left row with no
    TRUE comparison but a NULL one is NULL (so an anti join drops it); 0 for a plain join.
    """

    kind: str
    left: Node
    right: Node
    condition: Expr | None = None
    mark: str | None = None
    null_aware: int = 0

    def __post_init__(self) -> None:
        if self.kind not in JOIN_KINDS:
            raise ValueError(f"join kind {self.kind!r}: expected one of {JOIN_KINDS}")
        if (self.kind == "mark") != (self.mark is not None):
            raise ValueError("a mark join, and only it, names its mark column")

    @cached_property
    def schema(self) -> tuple[Field, ...]:
        if self.kind in ("semi", "anti"):
            return self.left.schema
        if self.kind == "mark":
            return self.left.schema + (Field(self.mark or "", BOOLEAN),)
        return self.left.schema + self.right.schema

    def describe(self) -> str:
        kind = "cross" if self.kind == "inner" and self.condition is None else self.kind
        text = f"Join {kind.upper()}"
        if self.null_aware:
            text += " null-aware"
        if self.mark:
            text += f" mark {self.mark}"
        return text + (f" ON {self.condition}" if self.condition is not None else "")


SET_KINDS = ("union", "intersect", "except")


@hashed_once
@dataclass(frozen=True)
class SetOp(_Binary):
    """``left`` UNION / INTERSECT / EXCEPT ``right``, rows matched by position (both inputs
    have ``fields``' types, in order); ``all`` keeps duplicates (UNION ALL: every row;
    INTERSECT ALL: min of the two counts; EXCEPT ALL: the left count minus the right one),
    else the result's rows are distinct. NULLs equal each other."""

    kind: str
    all: bool
    left: Node
    right: Node
    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        if self.kind not in SET_KINDS:
            raise ValueError(f"set operation {self.kind!r}: expected one of {SET_KINDS}")

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.fields

    def describe(self) -> str:
        return f"{self.kind.upper()}{' ALL' if self.all else ''} -> " + ", ".join(
            f.name for f in self.fields)


@hashed_once
@dataclass(frozen=True)
class Aggregate(_Unary):
    """Groups of ``input`` by ``keys`` ((name, expression) pairs; none: one group, even over
    no rows), each group one row of its keys and ``aggregates`` ((name, aggregate) pairs).

    ``phase``: ``"complete"``; ``"partial"``, each group's partial states of the aggregates
    (:func:`~.partial.states`: their columns instead of the aggregates', one group even over
    no rows without keys); ``"final"``, ``input`` holds such states (its keys columns named
    as ``keys``' names), merged per group into the aggregates."""

    input: Node
    keys: tuple[tuple[str, Expr], ...]
    aggregates: tuple[tuple[str, AggregateExpr], ...]
    phase: str = "complete"

    @cached_property
    def schema(self) -> tuple[Field, ...]:
        keys = tuple(Field(n, e.type) for n, e in self.keys)
        if self.phase == "partial":
            return keys + tuple(Field(state_name(n, s), t) for n, a in self.aggregates
                                for s, t in states(a))  # type: ignore[arg-type]
        return keys + tuple(Field(n, e.type) for n, e in self.aggregates)

    def describe(self) -> str:
        keys = ", ".join(f"{n} := {e}" if str(e) != n else n for n, e in self.keys)
        aggs = ", ".join(f"{n} := {e}" for n, e in self.aggregates)
        phase = "" if self.phase == "complete" else f" ({self.phase})"
        return f"Aggregate{phase} by [{keys}] [{aggs}]"


@hashed_once
@dataclass(frozen=True)
class Window(_Unary):
    """Every row of ``input`` plus one column per window function of ``functions`` ((name,
    window expression) pairs, all with the same partition and order: ``partition`` and
    ``order``)."""

    input: Node
    partition: tuple[Expr, ...]
    order: tuple[SortKey, ...]
    functions: tuple[tuple[str, WindowExpr], ...]

    def __post_init__(self) -> None:
        if any(w.spec != (self.partition, self.order) for _, w in self.functions):
            raise ValueError("a Window node's functions share its partition and order")

    @cached_property
    def schema(self) -> tuple[Field, ...]:
        return self.input.schema + tuple(Field(n, w.type) for n, w in self.functions)

    def describe(self) -> str:
        spec = []
        if self.partition:
            spec.append("partition by " + ", ".join(map(str, self.partition)))
        if self.order:
            spec.append("order by " + ", ".join(map(str, self.order)))
        return f"Window [{'; '.join(spec)}] " + ", ".join(
            f"{n} := {w}" for n, w in self.functions)


@hashed_once
@dataclass(frozen=True)
class Sort(_Unary):
    """``input`` ordered by ``keys`` (stable: ties keep their order)."""

    input: Node
    keys: tuple[SortKey, ...]

    def describe(self) -> str:
        return "Sort " + ", ".join(map(str, self.keys))


@hashed_once
@dataclass(frozen=True)
class Limit(_Unary):
    """At most ``limit`` rows (None: all) after skipping ``offset``."""

    input: Node
    limit: int | None
    offset: int = 0

    def describe(self) -> str:
        return f"Limit {self.limit if self.limit is not None else 'ALL'} OFFSET {self.offset}"


@hashed_once
@dataclass(frozen=True)
class Distinct(_Unary):
    """The distinct rows of ``input`` (NULLs equal to each other)."""

    input: Node


@hashed_once
@dataclass(frozen=True)
class Output(_Unary):
    """The result: ``input``'s columns under the names the user sees (which may repeat)."""

    input: Node
    names: tuple[str, ...]

    def describe(self) -> str:
        pairs = zip(self.names, self.input.schema, strict=True)
        return "Output " + ", ".join(n if n == f.name else f"{n} := {f.name}" for n, f in pairs)


@hashed_once
@dataclass(frozen=True)
class Exchange(_Unary):
    """Rows moved between ranks: ``"hash"`` on ``keys`` (equal keys meet on one rank),
    ``"partition"`` (a window's: hashed on ``keys`` unless a sample shows one key value with
    more rows than a rank's share, then as ``"range"`` by ``order``),
    ``"range"`` by ``order`` (rank ``r``'s rows all sort before rank ``r + 1``'s, equal keys
    on one rank; without ``order`` no row moves and the ranks' rows in rank order are one
    sequence), ``"broadcast"`` (every rank gets all rows) or ``"gather"`` (rank 0 gets all
    rows)."""

    input: Node
    how: str
    keys: tuple[Expr, ...] = ()
    order: tuple[SortKey, ...] = ()

    def describe(self) -> str:
        keys = self.keys if self.how == "partition" else self.order or self.keys
        text = f" [{', '.join(map(str, keys))}]" if keys else ""
        return f"Exchange {self.how}{text}"


def expressions(node: Node) -> list[Expr]:
    """The expressions a node evaluates itself (not its inputs'); an Output reads every
    column of its input."""
    if isinstance(node, Filter):
        return [node.condition]
    if isinstance(node, Project):
        return [e for _, e in node.exprs]
    if isinstance(node, Join):
        return [node.condition] if node.condition is not None else []
    if isinstance(node, Aggregate):
        return [e for _, e in node.keys] + [a for _, a in node.aggregates]
    if isinstance(node, Sort):
        return [k.expr for k in node.keys]
    if isinstance(node, Window):
        return [w for _, w in node.functions]
    if isinstance(node, Exchange):
        return list(node.keys) + [k.expr for k in node.order]
    if isinstance(node, Output):
        from .expr import Ref

        return [Ref(f.name, f.type) for f in node.input.schema]
    return []


def nodes(plan: Node) -> list[Node]:
    """Every node of ``plan``, parents first."""
    out = [plan]
    for child in plan.inputs:
        out += nodes(child)
    return out


def explain(plan: Node, annotate: Any = None) -> str:
    """The plan as an indented tree, one node per line (``annotate(node)``: text appended to a
    node's line, as EXPLAIN ANALYZE's rows and times)."""
    lines: list[str] = []

    def visit(node: Node, depth: int) -> None:
        extra = annotate(node) if annotate is not None else ""
        lines.append("  " * depth + node.describe() + (f"  ({extra})" if extra else ""))
        for child in node.inputs:
            visit(child, depth + 1)

    visit(plan, 0)
    return "\n".join(lines)
