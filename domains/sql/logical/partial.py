"""Aggregates computed in two phases over ranks: each rank's partial states per group, moved
to the rank of the group's keys, merged there. Which aggregates combine that way (COUNT,
SUM, AVG, MIN, MAX, BOOL_AND, BOOL_OR, the variances; not DISTINCT counts and sums, MEDIAN,
quantiles, STRING_AGG) and the state columns each leaves (:func:`states`)."""

from __future__ import annotations

from .expr import Aggregate
from .types import BIGINT, DOUBLE, SQLType, sum_type

__all__ = ["COMBINING", "combines", "states", "state_name"]

_SAME = frozenset({"min", "max", "bool_and", "bool_or"})  # merged by themselves
_VARIANCES = frozenset({"stddev_samp", "stddev_pop", "var_samp", "var_pop"})
# aggregates whose states over sets of rows combine (without DISTINCT, except MIN / MAX /
# BOOL_*): over ranks, and over a window frame's pieces
COMBINING = frozenset({"count_star", "count", "sum", "avg"}) | _SAME | _VARIANCES


def combines(agg: Aggregate) -> bool:
    """Whether ``agg`` is computed from per-rank partial states."""
    if agg.order or agg.name not in COMBINING:
        return False
    return not agg.distinct or agg.name in _SAME


def states(agg: Aggregate) -> list[tuple[str, SQLType]]:
    """The partial state columns of ``agg`` (a suffix and a type each): COUNT its count,
    SUM and MIN / MAX / BOOL_* their own value, AVG a sum and a count, a variance its count,
    mean and sum of squared deviations."""
    if agg.name in ("count_star", "count"):
        return [("n", BIGINT)]
    if agg.name == "sum" or agg.name in _SAME:
        return [("v", agg.type)]
    if agg.name == "avg":
        return [("s", sum_type(agg.args[0].type)), ("n", BIGINT)]
    if agg.name in _VARIANCES:
        return [("n", BIGINT), ("mean", DOUBLE), ("m2", DOUBLE)]
    raise ValueError(f"{agg.name} has no partial states")


def state_name(name: str, suffix: str) -> str:
    """The column of aggregate ``name``'s state ``suffix``."""
    return f"{name}#{suffix}"
