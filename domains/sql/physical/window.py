"""The window operator: one column per window function of a
:class:`~..logical.plan.Window` node, over this rank's rows (the plan brings every row of a
partition to one rank).

The rows are sorted once by (partition, ORDER BY keys); in that order each row knows the
bounds of its partition, of its peers (rows tied on every ORDER BY key) and of its frame,
all as integer arrays. Ranking and offset functions are arithmetic on those arrays; value
functions read one position of the frame; aggregates over the whole partition are the
grouped aggregates of :mod:`.aggregates`, over other frames prefix sums (exact integer
sums and counts) or segment trees. Results go back to the input's row order.

Written once for both devices: arrays come from :func:`.device.xp`, and the frame kernels
(segment trees, RANGE bounds) from the run's kernels (:func:`.device.kernels`: the numba
kernels of :mod:`.window_kernels` on the CPU, the array programs of :mod:`.window_device`
on the GPU). GROUPS frames, EXCLUDE and a sequence spread over ranks run on the host
(:func:`.executor.on_host`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from hpc.domains.sql.errors import SQLError
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.table import Column

from .columns import group_keys, sort_order, stack
from .device import kernels, xp
from .evaluate import Batch, _make, evaluate, to_float
from .exchange import Ranks, agree
from .window_frames import (
    FRAMED,
    VARIANCES,
    argument,
    combine,
    filtered,
    finish,
    frame_stats,
    group_bound,
    key_units,
    merge_moments,
    moments_column,
    moved,
    ntile,
    partition_aggregates,
    peer_key,
    position_in,
    segments,
    unsupported_frame,
)
from .window_spread import sequence, spread_function

__all__ = ["window_columns"]

T = TypeVar("T")


@dataclass
class _Layout:
    """Per row, in the sorted order: its partition ``[part_start, part_end)`` and its peers
    ``[peer_start, peer_end)`` (half-open position ranges), and the ORDER BY keys: their
    terms and sorted columns."""

    part_start: np.ndarray
    part_end: np.ndarray
    peer_start: np.ndarray
    peer_end: np.ndarray
    order: tuple[E.SortKey, ...]
    keys: list[Column]

    @property
    def n(self) -> int:
        return len(self.part_start)

    @property
    def position(self) -> np.ndarray:
        return xp().arange(self.n, dtype=np.int64)


def window_columns(node: P.Window, batch: Batch, ranks: Ranks | None = None
                   ) -> dict[str, Column]:
    """The columns of ``node``'s window functions over ``batch`` (in its row order).

    ``ranks``: the node's rows are one sequence spread over the ranks (range-partitioned
    by its PARTITION BY values and ORDER BY, a partition possibly over several ranks;
    :class:`~.exchange.Ranks`): the functions take the other ranks' rows into account
    (:mod:`.window_spread`). Collective then.

    Raises
    ------
    SQLError
        An integer SUM over a frame that overflows 64 bits.
    UnsupportedSQL
        An aggregate this engine computes over whole partitions only (DISTINCT, MEDIAN,
        STRING_AGG, ...) over a smaller frame.
    """
    n = batch.nrows
    part_cols = [evaluate(e, batch) for e in node.partition]
    order_cols = [evaluate(k.expr, batch) for k in node.order]
    order = [(c, k.ascending, k.nulls_first) for c, k in zip(order_cols, node.order,
                                                             strict=True)]
    perm: np.ndarray | None = None  # no PARTITION BY, no ORDER BY: the rows as they are
    if ranks is None and (part_cols or order):
        pid, _, _ = group_keys(part_cols, n)
        perm = sort_order([(Column(pid, "int"), True, False)] + order, n)
        pid = pid[perm]
    elif part_cols or order:  # the sequence's order: partitions by their values, as the
        perm = sort_order([(c, True, True) for c in part_cols] + order, n)  # range exchange
        part_cols = [c.take(perm) for c in part_cols]
        pid = _runs(part_cols, n)
    else:
        pid = xp().zeros(n, np.int64)
    read = set().union(*(E.refs(w) for _, w in node.functions))
    sorted_batch = batch if perm is None else batch.subset(perm, read)
    layout = _layout(pid, node.order, order_cols if perm is None else
                     [c.take(perm) for c in order_cols])
    inverse = None
    if perm is not None:
        inverse = xp().empty(n, np.int64)
        inverse[perm] = xp().arange(n)
    out = {}
    if ranks is not None:  # no rank may fail alone while the others wait in a collective
        _agreed(lambda: [evaluate(e, sorted_batch) for _, w in node.functions
                         for e in (*w.args, *([w.filter] if w.filter is not None else []))],
                ranks)
        seq = sequence(layout.part_start, layout.part_end, layout.peer_start, layout.peer_end,
                       part_cols, layout.keys, ranks)
    for name, w in node.functions:
        if ranks is None:
            column = _function(w, sorted_batch, layout, pid)
        else:
            column = _agreed(lambda w=w: spread_function(w, sorted_batch, seq, ranks), ranks)
        out[name] = column if inverse is None else column.take(inverse)
    return out


def _runs(columns: list[Column], n: int) -> np.ndarray:
    """Per row of sorted ``columns``, the number of its run of equal rows (from 0)."""
    new = np.zeros(n, bool)
    new[:1] = True
    for c in columns:
        v = peer_key(c)
        new[1:] |= v[1:] != v[:-1]
        if c.valid is not None:
            new[1:] |= c.valid[1:] != c.valid[:-1]
    return np.cumsum(new) - 1


def _agreed(step: Callable[[], T], ranks: Ranks) -> T:
    """``step()``, raising on every rank when it raised SQLError on any (``step`` fails,
    if at all, before its collectives or after them)."""
    result, failure = None, None
    try:
        result = step()
    except SQLError as exc:
        failure = exc
    agree(failure, ranks.comm)
    return result  # type: ignore[return-value]


def _runs_of(new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per position, the start of its run (the last ``new`` at or before it) and the run's
    (exclusive) end (the next ``new`` after it); ``new[0]`` is set."""
    x = xp()
    heads = x.flatnonzero(new)
    run = x.cumsum(new) - 1
    ends = x.empty(len(heads), np.int64)
    ends[:-1] = heads[1:]
    ends[-1:] = len(new)
    return heads[run], ends[run]


def _layout(pid: np.ndarray, order: tuple[E.SortKey, ...], keys: list[Column]) -> _Layout:
    n = len(pid)
    x = xp()
    if not keys and (not n or bool(pid[0] == pid[-1])):  # one partition, every row a peer
        ends = (x.zeros(n, np.int64), x.full(n, n, np.int64))
        return _Layout(*ends, *ends, order, keys)
    new_part = x.ones(n, bool)
    new_part[1:] = pid[1:] != pid[:-1]
    new_peer = new_part.copy()
    for c in keys:
        v = peer_key(c)
        new_peer[1:] |= v[1:] != v[:-1]
        if c.valid is not None:
            new_peer[1:] |= c.valid[1:] != c.valid[:-1]
    return _Layout(*_runs_of(new_part), *_runs_of(new_peer), order, keys)


# ---------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------


def _function(w: E.Window, batch: Batch, lay: _Layout, pid: np.ndarray) -> Column:
    i = lay.position
    size = lay.part_end - lay.part_start
    if w.name == "row_number":
        return _make(i - lay.part_start + 1, w.type)
    if w.name == "rank":
        return _make(lay.peer_start - lay.part_start + 1, w.type)
    if w.name == "dense_rank":
        new_peer = xp().zeros(lay.n, np.int64)
        new_peer[lay.peer_start] = 1
        c = xp().cumsum(new_peer)
        return _make(c - c[lay.part_start] + 1 if lay.n else c, w.type)
    if w.name == "percent_rank":
        with np.errstate(all="ignore"):
            rank = (lay.peer_start - lay.part_start).astype(np.float64)
            return _make(np.where(size > 1, rank / np.maximum(size - 1, 1), 0.0), w.type)
    if w.name == "cume_dist":
        with np.errstate(all="ignore"):
            return _make((lay.peer_end - lay.part_start) / np.maximum(size, 1), w.type)
    if w.name == "ntile":
        return _make(ntile(i - lay.part_start, size, int(w.params[0])), w.type)
    if w.name in ("lag", "lead"):
        return _offset(w, batch, lay)
    fs, fe = _frame(w.frame, lay)
    parts = segments(w.frame, fs, fe, i, lay.peer_start, lay.peer_end)
    if w.name in ("first_value", "last_value", "nth_value"):
        return _value(w, batch, parts)
    return _aggregate(w, batch, lay, pid, parts)


def _pick(col: Column, src: np.ndarray, ok: np.ndarray) -> Column:
    """Row ``src[r]`` of ``col`` where ``ok[r]``, else NULL."""
    if not len(col):
        return col
    taken = col.take(np.where(ok, src, 0))
    valid = ok if taken.valid is None else ok & taken.valid
    return Column(taken.values, taken.kind, taken.dictionary, valid)


def _valid_positions(col: Column) -> tuple[np.ndarray, np.ndarray]:
    """The positions of non-NULL rows, and per position ``p`` the count of them before
    ``p`` (length n + 1)."""
    x = xp()
    valid = x.ones(len(col), bool) if col.valid is None else col.valid
    before = x.zeros(len(col) + 1, np.int64)
    x.cumsum(valid, out=before[1:])
    return x.flatnonzero(valid), before


def _offset(w: E.Window, batch: Batch, lay: _Layout) -> Column:
    """LAG / LEAD: the row ``k`` before / after in the partition (IGNORE NULLS: the
    ``k``-th non-NULL row), else the default."""
    x = evaluate(w.args[0], batch)
    k = int(w.params[0]) * (1 if w.name == "lag" else -1)  # rows back
    i = lay.position
    if not w.ignore_nulls or k == 0:
        src = i - k
    else:
        positions, before = _valid_positions(x)
        j = before[:-1] - k if k > 0 else before[1:] - k - 1
        src = np.where((j >= 0) & (j < len(positions)),
                       positions[np.clip(j, 0, max(len(positions) - 1, 0))]
                       if len(positions) else -1, -1 if k > 0 else lay.n)
    ok = (src >= lay.part_start) & (src < lay.part_end)
    value = _pick(x, src, ok)
    if len(w.args) < 2 or not len(value):
        return value
    default = evaluate(w.args[1], batch)
    both = stack(value, default)  # one dictionary for strings
    return both.take(np.where(ok, i, lay.n + i))


def _frame(frame: E.Frame, lay: _Layout) -> tuple[np.ndarray, np.ndarray]:
    """Every row's frame as a half-open position range ``[fs, fe)``."""
    fs = _bound(frame.start, frame.kind, lay, start=True)
    fe = _bound(frame.end, frame.kind, lay, start=False)
    return fs, np.maximum(fe, fs)


def _bound(b: E.Bound, kind: str, lay: _Layout, start: bool) -> np.ndarray:
    i = lay.position
    if b.side == "unbounded_preceding":
        return lay.part_start
    if b.side == "unbounded_following":
        return lay.part_end
    if b.side == "current":
        if kind != "rows":
            return lay.peer_start if start else lay.peer_end
        return i if start else i + 1
    if kind == "rows":
        step = int(b.offset) * (-1 if b.side == "preceding" else 1)
        return np.clip(i + step + (0 if start else 1), lay.part_start, lay.part_end)
    if kind == "groups":
        return _group_bound(b, lay, start)
    return _range_bound(b, lay, start)


def _group_bound(b: E.Bound, lay: _Layout, start: bool) -> np.ndarray:
    """A GROUPS frame bound ``k PRECEDING / FOLLOWING``: peer groups numbered in order."""
    x = xp()
    if not lay.n:
        return x.zeros(0, np.int64)
    new_peer = x.zeros(lay.n, bool)
    new_peer[lay.peer_start] = True
    group = x.cumsum(new_peer) - 1
    starts = x.flatnonzero(new_peer)
    return group_bound(b, group, group[lay.part_start], group[lay.part_end - 1],
                       lay.part_start, lay.part_end, start, lambda g: starts[g])


def _range_bound(b: E.Bound, lay: _Layout, start: bool) -> np.ndarray:
    """A RANGE frame bound ``offset PRECEDING / FOLLOWING``: by the values of the one ORDER
    BY key, searched within the non-NULL rows of the partition (a NULL key's frame is its
    peers, the other NULLs)."""
    (key,), (term,) = lay.keys, lay.order
    ascending, t = term.ascending, term.expr.type
    v = key_units(key, t)
    towards_larger = (b.side == "following") == ascending
    target = moved(v, t, b.offset, 1 if towards_larger else -1)
    x = xp()
    valid = x.ones(lay.n, bool) if key.valid is None else key.valid
    nulls = x.zeros(lay.n + 1, np.int64)
    x.cumsum(~valid, out=nulls[1:])
    in_part = nulls[lay.part_end] - nulls[lay.part_start]
    lo = lay.part_start + (in_part if term.nulls_first else 0)
    hi = lay.part_end - (0 if term.nulls_first else in_part)
    found = kernels().window_range_bounds(x, v, lo, hi, target, ascending, not start)
    peers = lay.peer_start if start else lay.peer_end
    return np.where(valid, found, peers)


def _value(w: E.Window, batch: Batch, parts: list[tuple[np.ndarray, np.ndarray]]
           ) -> Column:
    """FIRST_VALUE, LAST_VALUE, NTH_VALUE over each row's frame (its ordered ``parts``)."""
    x = evaluate(w.args[0], batch)
    nth = int(w.params[0]) if w.name == "nth_value" else 1
    if not w.ignore_nulls:
        return _pick(x, *position_in(parts, w.name, nth))
    positions, before = _valid_positions(x)  # the frame's parts among the non-NULL rows
    j, ok = position_in([(before[lo], before[hi]) for lo, hi in parts], w.name, nth)
    src = positions[np.clip(j, 0, max(len(positions) - 1, 0))] if len(positions) else j
    return _pick(x, src, ok)


# ---------------------------------------------------------------------------------------
# Aggregates over frames
# ---------------------------------------------------------------------------------------


def _aggregate(w: E.Window, batch: Batch, lay: _Layout, pid: np.ndarray,
               parts: list[tuple[np.ndarray, np.ndarray]]) -> Column:
    """An aggregate over each row's frame: its state over each of the frame's ``parts``,
    combined."""
    if len(parts) == 1 and np.array_equal(parts[0][0], lay.part_start) and \
            np.array_equal(parts[0][1], lay.part_end):
        return _whole_partition(w, batch, pid)
    col, present = argument(w, batch)
    if w.distinct or w.name not in FRAMED:
        raise unsupported_frame(w)
    if w.name in VARIANCES:
        x = np.where(present, to_float(col, w.args[0].type), 0.0)
        moments = [kernels().window_frame_moments(xp(), x, present, lo, hi) for lo, hi in parts]
        n, _, m2 = functools.reduce(merge_moments, moments)
        return moments_column(w, n, m2)
    states = [frame_stats(w, col, present, lo, hi) for lo, hi in parts]
    return finish(w, col, functools.reduce(lambda a, b: combine(w, a, b), states))


def _whole_partition(w: E.Window, batch: Batch, pid: np.ndarray) -> Column:
    """An aggregate whose frame is every row's whole partition: the grouped aggregate of
    each partition, repeated on its rows (any aggregate, DISTINCT too)."""
    keep = None if w.filter is None else filtered(w.filter, batch)
    return partition_aggregates(w, [evaluate(a, batch) for a in w.args], keep, pid)
