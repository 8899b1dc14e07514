"""Aggregation before a join (eager aggregation, Yan and Larson 1995; HyPer's groupjoin).

``SELECT u.id, count(e.ts) FROM users u LEFT JOIN events e ON e.user_id = u.id GROUP BY
u.id`` joins every event to its user and then counts the joined rows per user. When the
aggregates read only one side's columns and the groups are those of the other side's join
keys, that side can be aggregated first, by its own join keys: the join then meets one row
per key instead of every row (millions of events become one partial count per user), and
the aggregate above it combines the partial results of each group's rows (a sum of counts,
a sum of sums, a minimum of minima).

It applies to inner and left joins on equalities of columns (``=`` or ``IS NOT DISTINCT
FROM``, nothing else in the condition), to COUNT, SUM, MIN and MAX without DISTINCT or
FILTER (and COUNT(*) of an inner join), read from the right side of a left join or either
side of an inner one, when the group keys include the other side's join columns. Those
keys make the aggregation move below the join over the rows it read above it, and the
join's input shrink, provided the join keeps most of that side's rows (estimated as join
ordering does: a join that drops most of them, the events of a few filtered users, would
leave the aggregate above it fewer rows than the pre-aggregate would read). A left row
without a partner gets NULL partial results: a COUNT is then COALESCEd to 0.
"""

from __future__ import annotations

from typing import Any

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

from .distribute import equi_keys
from .join_order import _Estimates, _sources

__all__ = ["eager_aggregates"]

_PARTIAL = {"count": "sum", "count_star": "sum", "sum": "sum", "min": "min", "max": "max"}


KEEPS = 0.5  # the join is estimated to keep at least this share of the pre side's rows


def eager_aggregates(plan: P.Node, catalog: Any) -> P.Node:
    """``plan`` with each aggregate over a join that qualifies (see the module) computed
    partly below the join."""
    plan = plan.with_inputs(tuple(eager_aggregates(c, catalog) for c in plan.inputs))
    if not (isinstance(plan, P.Aggregate) and plan.phase == "complete" and plan.keys
            and isinstance(plan.input, P.Join)):
        return plan
    join = plan.input
    if join.kind not in ("inner", "left") or join.null_aware or join.condition is None:
        return plan
    safe: list[bool] = []
    lk, rk, rest = equi_keys(join, safe)
    if rest or not lk:
        return plan
    read = set().union(*(E.refs(a) for _, a in plan.aggregates)) if plan.aggregates else set()
    left = {f.name for f in join.left.schema}
    right = {f.name for f in join.right.schema}
    if read and read <= right and _keeps(join, join.right, catalog):
        return _rewritten(plan, join, lk, rk, pre_left=False) or plan
    if read and read <= left and join.kind == "inner" and _keeps(join, join.left, catalog):
        return _rewritten(plan, join, rk, lk, pre_left=True) or plan
    return plan


def _keeps(join: P.Join, side: P.Node, catalog: Any) -> bool:
    """Whether ``join`` is estimated to keep most rows of ``side`` (:data:`KEEPS`): a join
    that drops most of them (the events of a few filtered users) would leave the aggregate
    above it fewer rows than the pre-aggregate would read."""
    leaves = [join.left, join.right]
    est = _Estimates(catalog, _sources(leaves))
    left, right = est.leaf_rows(join.left), est.leaf_rows(join.right)
    names = [{f.name for f in n.schema} for n in leaves]
    rows = est.join(left, names[0], right, names[1], E.conjuncts(join.condition))
    if join.kind == "left":
        rows = max(rows, left)
    return rows >= KEEPS * (left if side is join.left else right)


def _rewritten(plan: P.Aggregate, join: P.Join, kept_keys: list[E.Expr],
               pre_keys: list[E.Expr], pre_left: bool) -> P.Node | None:
    """``plan`` with its aggregates first computed on one side (``pre_left``: the left one)
    grouped by that side's join keys ``pre_keys``; None where it does not qualify: the
    group keys do not hold the other side's join keys ``kept_keys`` (as plain columns, or
    their equal partners), or an aggregate does not split into partial results."""
    grouped = {e for _, e in plan.keys}
    if not all(k in grouped or (isinstance(p, E.Ref) and p in grouped)
               for k, p in zip(kept_keys, pre_keys, strict=True)):
        return None
    side = join.left if pre_left else join.right
    other = {f.name for f in (join.right if pre_left else join.left).schema}
    # the pre-aggregate's keys: a column by its name, an expression (a CAST to the partner's
    # type) by a new one, which the join's condition then reads instead
    names = {k: k.name if isinstance(k, E.Ref) else f"{plan.aggregates[0][0]}#key{i}"
             for i, k in enumerate(pre_keys)} if plan.aggregates else {}
    if not all(E.refs(e) <= other | {n for k, n in names.items() if isinstance(k, E.Ref)}
               for _, e in plan.keys):
        return None  # a group key reads a column the partial results no longer hold
    partials: list[tuple[str, E.Aggregate]] = []
    finals: list[tuple[str, E.Aggregate]] = []
    zeroed: list[str] = []  # counts of a left join: NULL (no partner) means 0
    for name, agg in plan.aggregates:
        if (agg.name not in _PARTIAL or agg.distinct or agg.filter is not None or agg.order
                or (agg.name == "count_star" and join.kind != "inner")):
            return None
        partial = f"{name}#eager"
        partials.append((partial, agg))
        finals.append((name, E.Aggregate(_PARTIAL[agg.name], (E.Ref(partial, agg.type),),
                                         agg.type)))
        if agg.name in ("count", "count_star") and join.kind == "left":
            zeroed.append(name)
    keys = {n: k for k, n in names.items()}  # a column equal to two partners: one key
    pre = P.Aggregate(side, tuple(keys.items()), tuple(partials))
    inputs = (pre, join.right) if pre_left else (join.left, pre)
    condition = E.transform(join.condition, lambda e: E.Ref(names[e], e.type)
                            if e in names and not isinstance(e, E.Ref) else None)
    joined = P.Join(join.kind, *inputs, condition)
    above = P.Aggregate(joined, plan.keys,
                        tuple((f"{n}#sum" if n in zeroed else n, a) for n, a in finals))
    if not zeroed:
        return above
    return P.Project(above, tuple(
        (f.name, _zero_if_null(E.Ref(f"{f.name}#sum", f.type)) if f.name in zeroed
         else E.Ref(f.name, f.type)) for f in plan.schema))


def _zero_if_null(e: E.Expr) -> E.Expr:
    return E.Call("coalesce", (e, E.Literal(0, e.type)), e.type)
