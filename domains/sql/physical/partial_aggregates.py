"""The two phases of an aggregate over ranks (:mod:`~..logical.partial`): the partial states
of a rank's rows per group, and the aggregate from the states of a group's rows (one per
rank that held the group). The merge reproduces the one-phase arithmetic: exact int64 sums
and counts, AVG's sum divided once, variances from counts, means and squared deviations
(Chan et al.)."""

from __future__ import annotations

import numpy as np
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.partial import states
from hpc.domains.sql.logical.types import BIGINT, SQLType, sum_type
from hpc.domains.sql.table import Column

from .aggregates import aggregate_column, group_moments, variance_column
from .evaluate import _make

__all__ = ["partial_states", "merged"]


def partial_states(agg: E.Aggregate, ids: np.ndarray, ngroups: int, args: list[Column],
                   arg_types: list[SQLType]) -> dict[str, Column]:
    """The state columns of ``agg`` (by suffix, as :func:`~..logical.partial.states`) over
    the rows of every group ``0 <= g < ngroups`` (``ids``)."""
    suffixes = [s for s, _ in states(agg)]
    if agg.name == "avg":
        t = arg_types[0]
        total = E.Aggregate("sum", agg.args, sum_type(t))
        count = E.Aggregate("count", agg.args, BIGINT)
        return {"s": aggregate_column(total, ids, ngroups, args, arg_types),
                "n": aggregate_column(count, ids, ngroups, args, arg_types)}
    if suffixes == ["n", "mean", "m2"]:
        return _moments(ids, ngroups, args[0], arg_types[0])
    return {suffixes[0]: aggregate_column(agg, ids, ngroups, args, arg_types)}


def _moments(ids: np.ndarray, ngroups: int, col: Column, t: SQLType) -> dict[str, Column]:
    mask = np.ones(len(ids), bool) if col.valid is None else np.asarray(col.valid, bool)
    counts, mean, m2 = group_moments(ids, ngroups, col, t, mask)
    return {"n": Column(counts, "int"), "mean": Column(mean, "float"),
            "m2": Column(m2, "float")}


def merged(agg: E.Aggregate, ids: np.ndarray, ngroups: int, parts: dict[str, Column]
           ) -> Column:
    """``agg`` of every group from the states of its rows (``parts``: the state columns by
    suffix); every group has at least one row."""
    kinds = dict(states(agg))
    if agg.name in ("count_star", "count"):
        n = _exact_sum(ids, ngroups, parts["n"])
        return _make(n.values, agg.type)
    if agg.name == "avg":
        t = agg.args[0].type
        total = _exact_sum(ids, ngroups, parts["s"], kinds["s"])
        n = _exact_sum(ids, ngroups, parts["n"]).values
        sums = total.values.astype(np.float64)
        if t.kind == "decimal":
            sums = sums / float(10 ** t.scale)
        present = n > 0
        with np.errstate(all="ignore"):
            return _make(sums / np.where(present, n, 1), agg.type, present)
    if "m2" in parts:
        return _variance(agg, ids, ngroups, parts)
    again = E.Aggregate("sum" if agg.name == "sum" else agg.name, (E.Ref("v", agg.type),),
                        agg.type)
    return aggregate_column(again, ids, ngroups, [parts["v"]], [agg.type])


def _exact_sum(ids: np.ndarray, ngroups: int, col: Column, t: SQLType = BIGINT) -> Column:
    """The exact sum of ``col`` per group (NULL where a group has no non-NULL value)."""
    total = E.Aggregate("sum", (E.Ref("x", t),), sum_type(t) if t.kind != "integer" else t)
    return aggregate_column(total, ids, ngroups, [col], [t])


def _variance(agg: E.Aggregate, ids: np.ndarray, ngroups: int, parts: dict[str, Column]
              ) -> Column:
    n_i = parts["n"].values.astype(np.float64)
    mean_i, m2_i = parts["mean"].values, parts["m2"].values
    n = np.bincount(ids, weights=n_i, minlength=ngroups)[:ngroups]
    with np.errstate(all="ignore"):
        mean = np.bincount(ids, weights=n_i * mean_i, minlength=ngroups)[:ngroups] / \
            np.maximum(n, 1)
        spread = np.where(n_i > 0, n_i * (mean_i - mean[ids]) ** 2, 0.0)
        m2 = (np.bincount(ids, weights=m2_i, minlength=ngroups)[:ngroups] +
              np.bincount(ids, weights=spread, minlength=ngroups)[:ngroups])
    return variance_column(agg.name, agg.type, n, m2)
