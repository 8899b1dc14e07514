"""Where rows move between ranks: :class:`~..logical.plan.Exchange` nodes placed by the
operators' needs and estimated sizes, so every other physical operator works on its rank's
rows alone.

Each node's rows are ``spread`` (any rows on any rank: a scan), on the ``root`` rank only (a
gathered result) or ``replicated`` (every rank holds all of them: a broadcast join side).
A join broadcasts its smaller side when that side is small (or NOT IN's null-aware side,
whose NULLs every rank must see), else hash-partitions both sides on the equi-join keys;
an aggregate whose aggregates combine from partial states runs in two phases (each rank's
states per group, hash-partitioned on the keys or gathered, merged), another aggregate
hash-partitions its rows on its keys (a scalar aggregate gathers them), DISTINCT drops each
rank's duplicates, then hash-partitions the rest on all columns; a window node's rows are
hash-partitioned on its PARTITION BY keys, or, where a sample shows one partition too big
for a rank (and its functions allow), one sequence over the ranks, range-partitioned by its
PARTITION BY values and ORDER BY (a partition may run over several ranks; the window
operator computes frames across them); without PARTITION BY always that sequence;
sorting, LIMIT and the result gather on rank 0, a LIMIT under ORDER BY keeping each rank's top rows
first; an ORDER BY of more rows than a broadcast side sorts in ranges of its keys, one per
rank, and the gather of the result keeps their order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.partial import COMBINING, combines

from .cardinality import Cardinality

__all__ = ["distribute", "estimate", "equi_keys", "broadcast_beats_hashing", "BROADCAST_ROWS"]

BROADCAST_ROWS = 100_000  # a join side estimated at most this many rows is broadcast


def estimate(node: P.Node, rows_of: Callable[[str], int]) -> float:
    """Rows ``node`` is expected to produce (over all ranks): the catalog's row counts and
    fixed selectivities (a filter keeps a quarter, a group-by a tenth)."""
    if isinstance(node, P.Scan):
        return float(rows_of(node.table))
    if isinstance(node, P.Values):
        return float(len(node.rows))
    if isinstance(node, P.SetOp):
        left, right = estimate(node.left, rows_of), estimate(node.right, rows_of)
        return left + right if node.kind == "union" else left
    if isinstance(node, P.Join):
        left, right = estimate(node.left, rows_of), estimate(node.right, rows_of)
        if node.kind in ("semi", "anti", "mark", "single", "left"):
            return left
        if node.kind == "right":
            return right
        if node.condition is None:
            return left * right
        return max(left, right) if node.kind != "full" else left + right
    inner = estimate(node.inputs[0], rows_of) if node.inputs else 1.0
    if isinstance(node, P.Filter):
        return max(inner * 0.25, 1.0)
    if isinstance(node, P.Aggregate):
        return max(inner * 0.1, 1.0) if node.keys else 1.0
    if isinstance(node, P.Distinct):
        return max(inner * 0.5, 1.0)
    if isinstance(node, P.Limit) and node.limit is not None:
        return min(inner, float(node.limit))
    return inner


def equi_keys(join: P.Join, null_safe: list[bool] | None = None
              ) -> tuple[list[E.Expr], list[E.Expr], list[E.Expr]]:
    """The condition's equalities between an expression of the left side and one of the
    right side (as two key lists) and the other conjuncts. With ``null_safe`` (a list it
    fills, one flag per key), ``IS NOT DISTINCT FROM`` pairs are keys too (NULL meets
    NULL), flagged True."""
    left = {f.name for f in join.left.schema}
    right = {f.name for f in join.right.schema}
    lk: list[E.Expr] = []
    rk: list[E.Expr] = []
    rest: list[E.Expr] = []
    names = ("eq",) if null_safe is None else ("eq", "is_not_distinct")
    for t in E.conjuncts(join.condition):
        if isinstance(t, E.Call) and t.name in names:
            a, b = t.args
            ra, rb = E.refs(a), E.refs(b)
            if ra and rb and ra <= right and rb <= left:
                a, b, ra, rb = b, a, rb, ra
            if ra and rb and ra <= left and rb <= right:
                lk.append(a)
                rk.append(b)
                if null_safe is not None:
                    null_safe.append(t.name == "is_not_distinct")
                continue
        rest.append(t)
    return lk, rk, rest


def broadcast_beats_hashing(rows: float, others: float, ranks: int, limit: int,
                            sent: float | None = None, kept: float | None = None) -> bool:
    """Whether a join side of ``rows`` rows (``sent`` bytes) is better broadcast than hash
    partitioned with the other side (``others`` rows, ``kept`` bytes) over ``ranks``: at
    most ``limit`` rows or a quarter of the other side's rows (or, with the bytes known,
    bytes), and, with the bytes known, the bytes it sends to the other ranks at most twice
    the other side's. ``limit`` 0 never broadcasts."""
    if limit <= 0:
        return False
    if sent is None or kept is None:
        return rows <= limit or rows * 4 <= others
    if not (rows <= limit or rows * 4 <= others or sent * 4 <= kept):
        return False
    return sent * (ranks - 1) <= 2 * kept


class _Sizes:
    """How many rows nodes are expected to produce, and whether a join side is worth
    broadcasting.

    Without statistics: a side of at most ``limit`` rows, or a quarter of the other side's,
    by the fixed estimates. With the catalog's statistics
    (:class:`~.cardinality.Cardinality`): a side of at most ``limit`` rows or a quarter of
    the other side's rows or bytes, and only where the bytes it sends to the other ranks are
    at most twice the other side's (a hash partitioning moves each side's rows once, but
    hashes and scatters every row of both, and waits for both sides to finish).
    """

    def __init__(self, plan: P.Node, rows_of: Callable[[str], int], ranks: int, limit: int,
                 catalog: object | None) -> None:
        self.rows_of, self.ranks, self.limit = rows_of, ranks, limit
        self.cards = None if catalog is None else Cardinality(catalog, plan)

    def rows(self, node: P.Node) -> float:
        return estimate(node, self.rows_of) if self.cards is None else self.cards.rows(node)

    def small(self, side: P.Node, other: P.Node) -> bool:
        """Whether broadcasting ``side`` beats partitioning both sides."""
        rows, others = self.rows(side), self.rows(other)
        if self.cards is None:
            return broadcast_beats_hashing(rows, others, self.ranks, self.limit)
        return broadcast_beats_hashing(rows, others, self.ranks, self.limit,
                                       self.cards.bytes(side), self.cards.bytes(other))

    def smaller(self, side: P.Node, other: P.Node) -> bool:
        if self.cards is None:
            return self.rows(side) < self.rows(other)
        return self.cards.bytes(side) < self.cards.bytes(other)


def distribute(plan: P.Node, rows_of: Callable[[str], int], ranks: int,
               broadcast_rows: int = BROADCAST_ROWS, catalog: object | None = None) -> P.Node:
    """``plan`` with the Exchange nodes ``ranks`` ranks need (none for one rank); a join side
    estimated at most ``broadcast_rows`` rows (or a quarter of the other side's) may be
    broadcast (0: only where a join needs it). With ``catalog``, its statistics estimate the
    rows (filters by value ranges, joins by key counts) and a side is broadcast only where
    that moves fewer bytes than partitioning both sides."""
    if ranks == 1:
        return plan
    return _place(plan, _Sizes(plan, rows_of, ranks, broadcast_rows, catalog))[0]


def _two_phase(node: P.Aggregate, child: P.Node) -> tuple[P.Node, str]:
    """An aggregate of spread rows whose aggregates combine from partial states: each rank
    groups its rows into states, the states move (by the keys' hash; without keys, to rank
    0), the final aggregate merges them."""
    partial = replace(node, input=child, phase="partial")
    keys = tuple((n, E.Ref(n, e.type)) for n, e in node.keys)
    moved = P.Exchange(partial, "hash", tuple(e for _, e in keys)) if keys else \
        P.Exchange(partial, "gather")
    return replace(node, input=moved, keys=keys, phase="final"), "spread" if keys else "root"


def _spreads(w: E.Window) -> bool:
    """Whether the window operator computes ``w`` with PARTITION BY over partitions that may
    run over several ranks: all but RANGE frames with an offset and aggregates that do not
    combine from states over frames (DISTINCT, MEDIAN, ...)."""
    bounds = (w.frame.start, w.frame.end)
    if w.frame.kind == "range" and any(b.offset is not None for b in bounds):
        return False
    return w.name in E.WINDOW_FUNCTIONS or (not w.distinct and w.name in COMBINING)


def _gather(node: P.Node, placement: str) -> P.Node:
    return node if placement == "root" else P.Exchange(node, "gather")


def _place(node: P.Node, sizes: _Sizes) -> tuple[P.Node, str]:
    """``node`` with its exchanges, and where its rows are."""
    if isinstance(node, P.Scan):
        return node, "spread"
    if isinstance(node, P.Values):
        return node, "root"
    if isinstance(node, P.Join):
        return _place_join(node, sizes)
    if isinstance(node, P.SetOp):
        return _place_set(node, sizes)
    child, where = _place(node.inputs[0], sizes)
    if isinstance(node, P.Filter | P.Project):
        return node.with_inputs((child,)), where
    if isinstance(node, P.Aggregate):
        if where == "spread" and all(combines(a) for _, a in node.aggregates):
            return _two_phase(node, child)
        if not node.keys:
            return node.with_inputs((_gather(child, where),)), "root"
        if where == "root":
            return node.with_inputs((child,)), "root"
        keys = tuple(e for _, e in node.keys)
        return node.with_inputs((P.Exchange(child, "hash", keys),)), "spread"
    if isinstance(node, P.Distinct):
        if where == "root":
            return node.with_inputs((child,)), "root"
        keys = tuple(E.Ref(f.name, f.type) for f in child.schema)
        local = node.with_inputs((child,))  # each rank's duplicates dropped before they move
        return node.with_inputs((P.Exchange(local, "hash", keys),)), "spread"
    if isinstance(node, P.Window):
        if where == "root":
            return node.with_inputs((child,)), "root"
        if node.partition and not all(_spreads(w) for _, w in node.functions):
            return node.with_inputs((P.Exchange(child, "hash", node.partition),)), "spread"
        # one sequence: ranges of the partitions' values and the ORDER BY per rank, where
        # a partition is too big for one rank (else hashed); no keys: the rows stay
        order = tuple(E.SortKey(e, True, True) for e in node.partition) + node.order
        how = "partition" if node.partition else "range"
        return node.with_inputs((P.Exchange(child, how, node.partition, order),)), "spread"
    if isinstance(node, P.Sort):
        if where == "spread" and sizes.rows(child) > sizes.limit:  # a distributed sort:
            # ranges of the keys per rank, each sorted there; a gather keeps rank order
            return node.with_inputs((P.Exchange(child, "range", (), node.keys),)), "spread"
        return node.with_inputs((_gather(child, where),)), "root"
    if isinstance(node, P.Limit):
        if isinstance(child, P.Sort) and node.limit is not None and \
                isinstance(child.input, P.Exchange) and child.input.how in ("gather", "range"):
            # each rank's top rows first: the gather moves at most ranks x (offset + limit)
            below = child.input.input
            top = P.Limit(P.Sort(below, child.keys), node.limit + node.offset, 0)
            child = replace(child, input=P.Exchange(top, "gather"))
            return node.with_inputs((child,)), "root"
        return node.with_inputs((_gather(child, where),)), "root"
    if isinstance(node, P.Output):
        return node.with_inputs((_gather(child, where),)), "root"
    if isinstance(node, P.Exchange):
        return node.with_inputs((child,)), "root" if node.how == "gather" else "spread"
    raise TypeError(f"distribute: unknown node {type(node).__name__}")


def _place_set(node: P.SetOp, sizes: _Sizes) -> tuple[P.Node, str]:
    """UNION ALL concatenates where the rows are; the others meet equal rows on one rank."""
    (left, lw), (right, rw) = (_place(c, sizes) for c in node.inputs)
    if lw == rw == "root":
        return node.with_inputs((left, right)), "root"
    if node.kind == "union" and node.all:
        return node.with_inputs((left, right)), "spread"
    sides = tuple(P.Exchange(c, "hash", tuple(E.Ref(f.name, f.type) for f in c.schema))
                  for c in (left, right))
    return node.with_inputs(sides), "spread"


def _place_join(node: P.Join, sizes: _Sizes) -> tuple[P.Node, str]:
    left, lwhere = _place(node.left, sizes)
    right, rwhere = _place(node.right, sizes)
    if lwhere == "root" and rwhere == "root":
        return node.with_inputs((left, right)), "root"
    lk, rk, _ = equi_keys(node, [])  # NULLs hash alike: null-safe keys partition too
    kind = node.kind
    if kind == "full" and not lk:  # no key to meet on: everything on rank 0
        return node.with_inputs((_gather(left, lwhere), _gather(right, rwhere))), "root"
    small_right = sizes.small(node.right, node.left)
    small_left = sizes.small(node.left, node.right)
    if kind != "full" and (node.null_aware or not lk) and kind != "right":
        return node.with_inputs((left, P.Exchange(right, "broadcast"))), lwhere
    if kind == "right" and (not lk or small_left):
        return node.with_inputs((P.Exchange(left, "broadcast"), right)), rwhere
    if kind == "inner" and small_left and sizes.smaller(node.left, node.right):
        return node.with_inputs((P.Exchange(left, "broadcast"), right)), rwhere
    if kind not in ("full", "right") and small_right:
        return node.with_inputs((left, P.Exchange(right, "broadcast"))), lwhere
    return node.with_inputs((P.Exchange(left, "hash", tuple(lk)),
                             P.Exchange(right, "hash", tuple(rk)))), "spread"
