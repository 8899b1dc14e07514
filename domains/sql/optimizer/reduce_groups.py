"""Semi-join reduction of grouped subqueries: a grouped relation joined on its grouping keys
needs only the groups whose keys the other side has, so its input is first semi-joined with
those keys (a decorrelated subquery aggregates a fact table per correlation key; it then
aggregates the rows of the few keys the outer query keeps, not all of them).

The keys come from the smallest part of the other side that holds them, found by going down
through inner joins only (their rows' keys are among that part's): a filtered dimension scan
rather than the whole join. That part is planned twice, once for the keys; it must be
estimated small. The reduction is a plain semi join in the plan, so EXPLAIN shows it.
"""

from __future__ import annotations

from typing import Any

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

from .distribute import BROADCAST_ROWS, equi_keys, estimate

__all__ = ["reduce_groups"]

REDUCES = 4  # the keys' source is estimated at most 1/REDUCES of the grouped rows
KEYS_AT_MOST = 4 * BROADCAST_ROWS  # and at most this many rows (planned twice: it must be
# small, and few keys are what reduces the groups)
_JOINS = ("inner", "left", "single", "semi")  # kinds where unmatched groups are never read


def reduce_groups(plan: P.Node, catalog: Any, names: Any = None) -> P.Node:
    """``plan`` with grouped join inputs restricted to the keys their partners hold."""
    counter = names if names is not None else _Counter()
    plan = plan.with_inputs(tuple(reduce_groups(c, catalog, counter) for c in plan.inputs))
    if not (isinstance(plan, P.Join) and plan.kind in _JOINS and not plan.null_aware):
        return plan
    lk, rk, _ = equi_keys(plan)
    if not lk:
        return plan
    right = _restricted(plan.right, lk, rk, plan.left, catalog, counter)
    return plan if right is None else P.Join(plan.kind, plan.left, right, plan.condition,
                                             plan.mark, plan.null_aware)


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def fresh(self) -> str:
        self.n += 1
        return f"reduce#{self.n}"


def _restricted(node: P.Node, lk: list[E.Expr], rk: list[E.Expr], partner: P.Node,
                catalog: Any, counter: _Counter) -> P.Node | None:
    """``node`` (a grouped relation under projections and filters) with its aggregate's
    input semi-joined with the partner's keys, or None where that does not apply."""
    if isinstance(node, P.Project | P.Filter):
        passed = {n for n, e in node.exprs if isinstance(e, E.Ref) and e.name == n} if \
            isinstance(node, P.Project) else {f.name for f in node.schema}
        if not all(isinstance(k, E.Ref) and k.name in passed for k in rk):
            return None
        inner = _restricted(node.input, lk, rk, partner, catalog, counter)
        return None if inner is None else node.with_inputs((inner,))
    if not isinstance(node, P.Aggregate):
        return None
    keys = dict(node.keys)
    pairs = [(lo, keys[k.name]) for lo, k in zip(lk, rk, strict=True)
             if isinstance(k, E.Ref) and k.name in keys]
    if not pairs:
        return None
    needed = set().union(*(E.refs(lo) for lo, _ in pairs))
    source = _smallest_holder(partner, needed)
    rows = catalog.num_rows
    if estimate(source, rows) > min(KEYS_AT_MOST, estimate(node.input, rows) / REDUCES):
        return None  # the keys would cost about as much as the groups they save
    fresh = [counter.fresh() for _ in pairs]
    keyset = P.Distinct(P.Project(source, tuple((f, lo) for f, (lo, _) in
                                                 zip(fresh, pairs, strict=True))))
    condition = E.conjoin([E.Call("eq", (e, E.Ref(f, lo.type)), E.TRUE.type)
                           for f, (lo, e) in zip(fresh, pairs, strict=True)])
    return node.with_inputs((P.Join("semi", node.input, keyset, condition),))


def _smallest_holder(node: P.Node, needed: set[str]) -> P.Node:
    """The part of ``node`` under inner joins only that still has every column ``needed``."""
    while isinstance(node, P.Join) and node.kind == "inner":
        for child in node.inputs:
            if needed <= {f.name for f in child.schema}:
                node = child
                break
        else:
            break
    return node
