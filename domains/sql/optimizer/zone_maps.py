"""Zone maps: a scan right under a filter is given the filter's terms that row-group
statistics can judge (``Scan.prune``), so that it skips the Parquet row groups whose
min/max and NULL counts rule them out (:func:`~..statistics.groups_may_match`). The filter
still runs on the rows read: skipping is only ever a saving.

Judged terms: a column compared with a constant (``= <> < <= > >=``), ``IN`` a list of
constants, ``IS [NOT] NULL``, and AND / OR of them; a column of doubles is not judged
(NaN lies outside its statistics). Data clustered on a column (time series written in
time order, tables sorted on a key) then reads only the row groups a range or equality on
that column can match; data in no order loses nothing but the statistics' reading.
"""

from __future__ import annotations

from dataclasses import replace

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

__all__ = ["zone_maps"]

_COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})


def zone_maps(plan: P.Node) -> P.Node:
    """``plan`` with each filtered scan's judged terms in its ``prune``."""
    inputs = tuple(zone_maps(c) for c in plan.inputs)
    plan = plan.with_inputs(inputs) if inputs else plan
    if isinstance(plan, P.Filter) and isinstance(plan.input, P.Scan):
        scan = plan.input
        names = {name for name, _, _ in scan.columns}
        terms = [t for t in E.conjuncts(plan.condition) if _judged(t, names)]
        if terms:
            return plan.with_inputs((replace(scan, prune=E.conjoin(terms)),))
    return plan


def _column(e: E.Expr, names: set[str]) -> bool:
    return isinstance(e, E.Ref) and e.name in names and e.type.kind != "double"


def _judged(t: E.Expr, names: set[str]) -> bool:
    """Whether row-group statistics can judge every part of ``t``."""
    if not isinstance(t, E.Call):
        return False
    if t.name in ("and", "or"):
        return all(_judged(a, names) for a in t.args)
    if t.name in _COMPARISONS and len(t.args) == 2:
        a, b = t.args
        return (_column(a, names) and isinstance(b, E.Literal)) or \
            (_column(b, names) and isinstance(a, E.Literal))
    if t.name == "in":
        return bool(t.args) and _column(t.args[0], names) and \
            all(isinstance(v, E.Literal) for v in t.args[1:])
    if t.name in ("is_null", "is_not_null"):
        return _column(t.args[0], names)
    return False
