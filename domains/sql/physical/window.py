"""The window operator: one column per window function of a
:class:`~..logical.plan.Window` node, over this rank's rows (the plan brings every row of a
partition to one rank).

The rows are sorted once by (partition, ORDER BY keys); in that order each row knows the
bounds of its partition, of its peers (rows tied on every ORDER BY key) and of its frame,
all as integer arrays. Ranking and offset functions are arithmetic on those arrays; value
functions read one position of the frame; aggregates over the whole partition are the
grouped aggregates of :mod:`.aggregates`, over other frames prefix sums (exact integer
sums and counts) or the segment trees of :mod:`.window_kernels`. Results go back to the
input's row order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TypeVar

import numpy as np
from hpc.domains.sql.errors import SQLError, UnsupportedSQL
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.types import SQLType
from hpc.domains.sql.table import Column

from . import window_kernels as K
from .aggregates import aggregate_column
from .columns import group_keys, sort_order, stack
from .evaluate import Batch, _make, _rescale, evaluate, to_float
from .exchange import Ranks, agree

__all__ = ["window_columns"]

_INT64 = np.iinfo(np.int64)
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
        return np.arange(self.n, dtype=np.int64)


def window_columns(node: P.Window, batch: Batch, ranks: Ranks | None = None
                   ) -> dict[str, Column]:
    """The columns of ``node``'s window functions over ``batch`` (in its row order).

    ``ranks``: the node has no PARTITION BY and its rows are one sequence range-partitioned
    over the ranks by its ORDER BY (:class:`~.exchange.Ranks`): the functions take the other
    ranks' rows into account (global row numbers, the rows just before and after, the
    aggregates of the ranks before and after). Collective then.

    Raises
    ------
    SQLError
        An integer SUM over a frame that overflows 64 bits.
    UnsupportedSQL
        An aggregate this engine computes over whole partitions only (DISTINCT, MEDIAN,
        STRING_AGG, ...) over a smaller frame.
    """
    n = batch.nrows
    pid, _, _ = group_keys([evaluate(e, batch) for e in node.partition], n)
    order_cols = [evaluate(k.expr, batch) for k in node.order]
    perm = sort_order([(Column(pid, "int"), True, False)] + [
        (c, k.ascending, k.nulls_first) for c, k in zip(order_cols, node.order, strict=True)],
        n)
    read = set().union(*(E.refs(w) for _, w in node.functions))
    sorted_batch = batch.subset(perm, read)
    layout = _layout(pid[perm], node.order, [c.take(perm) for c in order_cols])
    inverse = np.empty(n, np.int64)
    inverse[perm] = np.arange(n)
    out = {}
    if ranks is not None:  # no rank may fail alone while the others wait in a collective
        _agreed(lambda: [evaluate(e, sorted_batch) for _, w in node.functions
                         for e in (*w.args, *([w.filter] if w.filter is not None else []))],
                ranks)
    for name, w in node.functions:
        if ranks is None:
            column = _function(w, sorted_batch, layout, pid[perm])
        else:
            column = _agreed(lambda w=w: _spread_function(w, sorted_batch, layout, ranks),
                             ranks)
        out[name] = column.take(inverse)
    return out


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


def _starts(new: np.ndarray) -> np.ndarray:
    """Per position, the position of the last ``new`` at or before it."""
    n = len(new)
    return np.maximum.accumulate(np.where(new, np.arange(n), 0)) if n else np.zeros(0, np.int64)


def _ends(new: np.ndarray) -> np.ndarray:
    """Per position, the (exclusive) end of its run: the next ``new`` after it."""
    n = len(new)
    if not n:
        return np.zeros(0, np.int64)
    last = np.ones(n, bool)
    last[:-1] = new[1:]
    return np.minimum.accumulate(np.where(last, np.arange(n), n)[::-1])[::-1] + 1


def _equal_key(c: Column) -> np.ndarray:
    """Values equal exactly where SQL calls them peers (NULLs equal to each other)."""
    v = c.values
    if v.dtype.kind == "f":
        v = np.where(np.isnan(v), np.nan, v + 0.0).view(np.int64)
    elif v.dtype.kind == "b":
        v = v.astype(np.int8)
    if c.valid is not None:
        v = np.where(c.valid, v, np.zeros(1, v.dtype))
    return v


def _layout(pid: np.ndarray, order: tuple[E.SortKey, ...], keys: list[Column]) -> _Layout:
    n = len(pid)
    new_part = np.ones(n, bool)
    new_part[1:] = pid[1:] != pid[:-1]
    new_peer = new_part.copy()
    for c in keys:
        v = _equal_key(c)
        new_peer[1:] |= v[1:] != v[:-1]
        if c.valid is not None:
            new_peer[1:] |= c.valid[1:] != c.valid[:-1]
    return _Layout(_starts(new_part), _ends(new_part), _starts(new_peer), _ends(new_peer),
                   order, keys)


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
        new_peer = np.zeros(lay.n, np.int64)
        new_peer[lay.peer_start] = 1
        c = np.cumsum(new_peer)
        return _make(c - c[lay.part_start] + 1 if lay.n else c, w.type)
    if w.name == "percent_rank":
        with np.errstate(all="ignore"):
            rank = (lay.peer_start - lay.part_start).astype(np.float64)
            return _make(np.where(size > 1, rank / np.maximum(size - 1, 1), 0.0), w.type)
    if w.name == "cume_dist":
        with np.errstate(all="ignore"):
            return _make((lay.peer_end - lay.part_start) / np.maximum(size, 1), w.type)
    if w.name == "ntile":
        return _make(_ntile(i - lay.part_start, size, int(w.params[0])), w.type)
    if w.name in ("lag", "lead"):
        return _offset(w, batch, lay)
    fs, fe = _frame(w.frame, lay)
    if w.name in ("first_value", "last_value", "nth_value"):
        return _value(w, batch, fs, fe)
    return _aggregate(w, batch, lay, pid, fs, fe)


def _ntile(r: np.ndarray, size: np.ndarray, buckets: int) -> np.ndarray:
    """NTILE's bucket of the ``r``-th row (from 0) of a partition of ``size`` rows: the first
    ``size % buckets`` buckets hold one row more."""
    q = size // buckets
    big = (size % buckets) * (q + 1)
    return np.where(r < big, r // (q + 1), size % buckets + (r - big) // np.maximum(q, 1)) + 1


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
    valid = np.ones(len(col), bool) if col.valid is None else col.valid
    before = np.zeros(len(col) + 1, np.int64)
    np.cumsum(valid, out=before[1:])
    return np.flatnonzero(valid), before


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
        if kind == "range":
            return lay.peer_start if start else lay.peer_end
        return i if start else i + 1
    if kind == "rows":
        step = int(b.offset) * (-1 if b.side == "preceding" else 1)
        return np.clip(i + step + (0 if start else 1), lay.part_start, lay.part_end)
    return _range_bound(b, lay, start)


def _range_bound(b: E.Bound, lay: _Layout, start: bool) -> np.ndarray:
    """A RANGE frame bound ``offset PRECEDING / FOLLOWING``: by the values of the one ORDER
    BY key, searched within the non-NULL rows of the partition (a NULL key's frame is its
    peers, the other NULLs)."""
    (key,), (term,) = lay.keys, lay.order
    ascending, t = term.ascending, term.expr.type
    v = key.values
    if t.kind == "double":
        offset: float | int = float(b.offset)
        v = v.astype(np.float64)
    else:  # the key's physical units: a DECIMAL's unscaled integer
        offset = int(Decimal(str(b.offset)).scaleb(t.scale if t.kind == "decimal" else 0))
        v = v.astype(np.int64)
    towards_larger = (b.side == "following") == ascending
    target = _shift(v, offset if towards_larger else -offset)
    valid = np.ones(lay.n, bool) if key.valid is None else key.valid
    nulls = np.zeros(lay.n + 1, np.int64)
    np.cumsum(~valid, out=nulls[1:])
    in_part = nulls[lay.part_end] - nulls[lay.part_start]
    lo = lay.part_start + (in_part if term.nulls_first else 0)
    hi = lay.part_end - (0 if term.nulls_first else in_part)
    found = K.range_bounds(v, lo, hi, target, ascending, not start)
    peers = lay.peer_start if start else lay.peer_end
    return np.where(valid, found, peers)


def _shift(v: np.ndarray, delta: float | int) -> np.ndarray:
    """``v + delta``, saturating at the int64 limits."""
    if v.dtype.kind == "f":
        return v + delta
    with np.errstate(over="ignore"):
        out = v + np.int64(delta)
    if delta > 0:
        return np.where(out < v, _INT64.max, out)
    return np.where(out > v, _INT64.min, out)


def _value(w: E.Window, batch: Batch, fs: np.ndarray, fe: np.ndarray) -> Column:
    """FIRST_VALUE, LAST_VALUE, NTH_VALUE over each row's frame."""
    x = evaluate(w.args[0], batch)
    nth = int(w.params[0]) if w.name == "nth_value" else 1
    if not w.ignore_nulls:
        src = fe - 1 if w.name == "last_value" else fs + nth - 1
        return _pick(x, src, (src >= fs) & (src < fe))
    positions, before = _valid_positions(x)
    j = before[fe] - 1 if w.name == "last_value" else before[fs] + nth - 1
    ok = (j >= before[fs]) & (j < before[fe])
    src = positions[np.clip(j, 0, max(len(positions) - 1, 0))] if len(positions) else fs
    return _pick(x, src, ok)


# ---------------------------------------------------------------------------------------
# Aggregates over frames
# ---------------------------------------------------------------------------------------

_FRAMED = frozenset({"count_star", "count", "sum", "avg", "min", "max", "stddev_samp",
                     "stddev_pop", "var_samp", "var_pop", "bool_and", "bool_or"})


def _aggregate(w: E.Window, batch: Batch, lay: _Layout, pid: np.ndarray, fs: np.ndarray,
               fe: np.ndarray) -> Column:
    if np.array_equal(fs, lay.part_start) and np.array_equal(fe, lay.part_end):
        return _whole_partition(w, batch, pid)
    col, present = _argument(w, batch)
    if w.distinct or w.name not in _FRAMED:
        raise UnsupportedSQL(f"{w.name.upper()}{' DISTINCT' if w.distinct else ''} over a "
                             "window frame smaller than the partition is not supported")
    if w.name in ("stddev_samp", "stddev_pop", "var_samp", "var_pop"):
        return _variance(w, col, w.args[0].type, present, _frame_count(present, fs, fe), fs,
                         fe)
    return finish(w, col, frame_stats(w, col, present, fs, fe))


def _argument(w: E.Window, batch: Batch) -> tuple[Column, np.ndarray]:
    """An aggregate's argument column (COUNT(*): a column of ones) and the rows it counts:
    non-NULL, where its FILTER holds."""
    if w.name == "count_star" or w.args[0].type.kind == "null":
        col = Column(np.ones(batch.nrows, np.int64), "int")
        present = np.full(batch.nrows, w.name == "count_star")
    else:
        col = evaluate(w.args[0], batch)
        present = np.ones(batch.nrows, bool) if col.valid is None else col.valid.copy()
    if w.filter is not None:
        present &= _filtered(w.filter, batch)
    return col, present


def _filtered(condition: E.Expr, batch: Batch) -> np.ndarray:
    """Rows where a FILTER condition is TRUE."""
    f = evaluate(condition, batch)
    return np.asarray(f.values, bool) & (True if f.valid is None else f.valid)


def _whole_partition(w: E.Window, batch: Batch, pid: np.ndarray) -> Column:
    """An aggregate whose frame is every row's whole partition: the grouped aggregate of
    each partition, repeated on its rows (any aggregate, DISTINCT too)."""
    keep = None if w.filter is None else _filtered(w.filter, batch)
    return _partition_aggregates(w, [evaluate(a, batch) for a in w.args], keep, pid)


def _partition_aggregates(w: E.Window, args: list[Column], keep: np.ndarray | None,
                          pid: np.ndarray) -> Column:
    """``w``'s aggregate of the argument rows ``args`` of each partition ``pid`` (where
    ``keep``: its FILTER), on each row."""
    ngroups = int(pid.max()) + 1 if len(pid) else 0
    ids = pid if keep is None else np.where(keep, pid, ngroups)  # dropped: an extra group
    agg = E.Aggregate(w.name, w.args, w.type, w.distinct, (), w.params)
    column = aggregate_column(agg, ids, ngroups + (keep is not None), args,
                              [a.type for a in w.args])
    return column.take(pid)


def _frame_count(present: np.ndarray, fs: np.ndarray, fe: np.ndarray) -> np.ndarray:
    before = np.zeros(len(present) + 1, np.int64)
    np.cumsum(present, out=before[1:])
    return before[fe] - before[fs]


@dataclass
class Stats:
    """An aggregate's state over each of some frames, from which frames combine: the rows
    it counts, its sum (integers and DECIMAL: exact int64, modulo 2**64, with ``rough``, a
    float estimate that shows an overflow) or its extreme (the identity where no row), and
    for a float MIN / MAX the NaNs among the rows."""

    count: np.ndarray
    value: np.ndarray
    rough: np.ndarray
    nans: np.ndarray


def _exact(w: E.Window) -> bool:
    return w.args[0].type.kind in ("integer", "decimal", "boolean") if w.args else True


def _wants_max(w: E.Window) -> bool:
    return w.name in ("max", "bool_or")


def frame_stats(w: E.Window, col: Column, present: np.ndarray, fs: np.ndarray,
                fe: np.ndarray) -> Stats:
    """The state of COUNT, SUM, AVG, MIN, MAX, BOOL_AND or BOOL_OR over every frame
    ``[fs, fe)`` of ``col``'s rows where ``present``."""
    count = _frame_count(present, fs, fe)
    zeros = np.zeros(len(fs), np.float64)
    nans = np.zeros(len(fs), np.int64)
    if w.name in ("count", "count_star"):
        return Stats(count, count, zeros, nans)
    v = col.values
    if w.name in ("sum", "avg"):
        if _exact(w):
            x = np.where(present, v.astype(np.int64), 0)
            exact = np.zeros(len(x) + 1, np.int64)
            approx = np.zeros(len(x) + 1, np.float64)
            with np.errstate(over="ignore"):
                np.cumsum(x, out=exact[1:])  # modulo 2**64: exact wherever the sum fits
                total = exact[fe] - exact[fs]
            np.cumsum(x.astype(np.float64), out=approx[1:])
            return Stats(count, total, approx[fe] - approx[fs], nans)
        x = np.where(present, to_float(col, w.args[0].type), 0.0)
        return Stats(count, K.frame_reduce(x, present, fs, fe, K.SUM, 0.0), zeros, nans)
    op = K.MAX if _wants_max(w) else K.MIN
    if v.dtype.kind == "f":
        nan = np.isnan(v) & present
        numbers = present & ~nan
        fill = -np.inf if op == K.MAX else np.inf
        out = K.frame_reduce(np.where(numbers, v, fill).astype(np.float64), numbers, fs, fe,
                             op, fill)
        return Stats(count, out, zeros, _frame_count(nan, fs, fe))
    fill = np.int64(_INT64.min if op == K.MAX else _INT64.max)
    return Stats(count, K.frame_reduce(v.astype(np.int64), present, fs, fe, op, fill), zeros,
                 nans)


def combine(w: E.Window, a: Stats, b: Stats) -> Stats:
    """The state over the rows of both ``a``'s and ``b``'s frames (row by row)."""
    if w.name in ("sum", "avg", "count", "count_star"):
        with np.errstate(over="ignore"):
            value = a.value + b.value
    else:
        value = np.maximum(a.value, b.value) if _wants_max(w) else np.minimum(a.value, b.value)
    return Stats(a.count + b.count, value, a.rough + b.rough, a.nans + b.nans)


def finish(w: E.Window, col: Column, st: Stats) -> Column:
    """The aggregate's column from its state over each row's frame."""
    has = st.count > 0
    if w.name in ("count", "count_star"):
        return _make(st.count, w.type)
    t = w.args[0].type
    if w.name in ("sum", "avg"):
        if not _exact(w):
            total = st.value
            if w.name == "avg":
                with np.errstate(all="ignore"):
                    total = total / np.maximum(st.count, 1)
            return _make(total, w.type, has)
        overflow = np.abs(st.rough - st.value.astype(np.float64)) > 2.0 ** 62
        scale = t.scale if t.kind == "decimal" else 0
        if w.name == "avg":  # DuckDB sums in 128 bits: past 64, the float sum
            sums = np.where(overflow, st.rough, st.value.astype(np.float64)) / 10.0 ** scale
            with np.errstate(all="ignore"):
                return _make(sums / np.maximum(st.count, 1), w.type, has)
        if bool((overflow & has).any()):
            raise SQLError(f"overflow in SUM over a window frame: the sum does not fit the 64 "
                           f"bits this engine holds {w.type} in")
        total = st.value
        if w.type.kind == "decimal" and w.type.scale != scale:
            total = _rescale(total, scale, w.type.scale, has, w.type, "SUM")
        return _make(total, w.type, has)
    v = col.values
    if v.dtype.kind == "f":  # a NaN is above every number, as DuckDB orders it
        numbers = st.count - st.nans
        out = np.where((st.nans > 0) & (_wants_max(w) | (numbers == 0)), np.nan, st.value)
        return _make(out, w.type, has)
    out = np.where(has, st.value, 0)
    if v.dtype.kind == "b":
        return _make(out.astype(bool), w.type, has)
    return _make(out.astype(v.dtype), w.type, has, col.dictionary)


def _variance(w: E.Window, col: Column, t: SQLType, present: np.ndarray, count: np.ndarray,
              fs: np.ndarray, fe: np.ndarray) -> Column:
    x = np.where(present, to_float(col, t), 0.0)
    n, _, m2 = K.frame_moments(x, present, fs, fe)
    return _moments_column(w, n, m2)


def _moments_column(w: E.Window, n: np.ndarray, m2: np.ndarray) -> Column:
    """A variance or standard deviation from each frame's count and sum of squared
    deviations."""
    sample = w.name.endswith("_samp")
    denom = n - 1 if sample else n
    ok = denom > 0
    with np.errstate(all="ignore"):
        var = np.where(n == 1, 0.0, m2 / np.where(ok, denom, 1))
    out = np.sqrt(var) if w.name.startswith("stddev") else var
    return _make(out, w.type, ok)


# ---------------------------------------------------------------------------------------
# One sequence over several ranks
# ---------------------------------------------------------------------------------------

def _spread_function(w: E.Window, batch: Batch, lay: _Layout, ranks: Ranks) -> Column:
    """A window function over this rank's part of the sequence (its peers all here: the
    range exchange keeps equal keys on one rank; without ORDER BY every row of the sequence
    is a peer of every other)."""
    i, n = lay.position, lay.n
    off, total = ranks.offset, ranks.total
    w = _unordered(w)
    if w.order:
        peer_start, peer_end = lay.peer_start + off, lay.peer_end + off
    else:
        peer_start, peer_end = np.zeros(n, np.int64), np.full(n, total, np.int64)
    if w.name == "row_number":
        return _make(i + off + 1, w.type)
    if w.name == "rank":
        return _make(peer_start + 1, w.type)
    if w.name == "dense_rank":
        if not w.order:
            return _make(np.ones(n, np.int64), w.type)
        new_peer = np.zeros(n, np.int64)
        new_peer[lay.peer_start] = 1
        groups = ranks.gathered(np.array([new_peer.sum()], np.int64))[:, 0]
        return _make(np.cumsum(new_peer) + groups[: ranks.rank].sum(), w.type)
    if w.name == "percent_rank":
        rank = peer_start.astype(np.float64)
        return _make(rank / (total - 1) if total > 1 else np.zeros(n), w.type)
    if w.name == "cume_dist":
        return _make(peer_end / max(total, 1), w.type)
    if w.name == "ntile":
        return _make(_ntile(i + off, np.full(n, total), int(w.params[0])), w.type)
    if w.name in ("lag", "lead"):
        if w.ignore_nulls and int(w.params[0]):
            return _spread_offset_valid(w, batch, lay, ranks)
        return _spread_offset(w, batch, lay, ranks)
    if w.name in ("first_value", "last_value", "nth_value"):
        return _spread_value(w, batch, lay, ranks, peer_start, peer_end)
    whole = w.frame.start.side == "unbounded_preceding" and (
        w.frame.end.side == "unbounded_following")
    if w.distinct or w.name not in _FRAMED:
        if not whole:
            raise UnsupportedSQL(f"{w.name.upper()}{' DISTINCT' if w.distinct else ''} over "
                                 "a window frame smaller than the partition is not supported")
        return _spread_whole(w, batch, ranks)
    if w.name in ("stddev_samp", "stddev_pop", "var_samp", "var_pop"):
        return _spread_variance(w, batch, lay, ranks)
    return _spread_aggregate(w, batch, lay, ranks)


def _unordered(w: E.Window) -> E.Window:
    """``w`` with a RANGE frame's CURRENT ROW bounds made UNBOUNDED where it has no ORDER BY
    (every row is then a peer of the current one: the frame is the whole partition)."""
    if w.order or w.frame.kind != "range":
        return w
    start, end = w.frame.start, w.frame.end
    if start.side == "current":
        start = E.Bound("unbounded_preceding")
    if end.side == "current":
        end = E.Bound("unbounded_following")
    return replace(w, frame=E.Frame("range", start, end))


def _global_bound(b: E.Bound, kind: str, i: np.ndarray, peer_start: np.ndarray,
                  peer_end: np.ndarray, total: int, start: bool) -> np.ndarray:
    """A ROWS or RANGE (without offset) frame bound as a position in the whole sequence
    (row ``r`` at ``i[r]``)."""
    if b.side == "unbounded_preceding":
        return np.zeros(len(i), np.int64)
    if b.side == "unbounded_following":
        return np.full(len(i), total, np.int64)
    if b.side == "current":
        if kind == "range":
            return peer_start if start else peer_end
        return i if start else i + 1
    step = int(b.offset) * (-1 if b.side == "preceding" else 1)
    return np.clip(i + step + (0 if start else 1), 0, total)


def _valid_before(valid: np.ndarray, at: np.ndarray, ranks: Ranks
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Collective. Per position ``at[r]`` of the sequence (``0..total``), the non-NULL rows
    (``valid``: this rank's) before it; and every rank's count of them."""
    counts = ranks.gathered(np.array([int(valid.sum())], np.int64))[:, 0]
    n, off = len(valid), ranks.offset
    before = np.zeros(n + 1, np.int64)
    np.cumsum(valid, out=before[1:])
    before += counts[: ranks.rank].sum()
    here = (at >= off) & (at <= off + n)
    far = ~here & (at < ranks.total)
    fetched = ranks.fetch({"b": Column(before[:-1], "int")}, np.where(far, at, -1))["b"].values
    out = np.where(here, before[np.clip(at - off, 0, n)],
                   np.where(far, fetched, counts.sum()))
    return out.astype(np.int64), counts


def _spread_value(w: E.Window, batch: Batch, lay: _Layout, ranks: Ranks,
                  peer_start: np.ndarray, peer_end: np.ndarray) -> Column:
    """FIRST_VALUE, LAST_VALUE, NTH_VALUE: each frame's row found by its position in the
    sequence (IGNORE NULLS: in the sequence of non-NULL rows) and read where it lies."""
    x = evaluate(w.args[0], batch)
    i = lay.position + ranks.offset
    kind, total = w.frame.kind, ranks.total
    fs = _global_bound(w.frame.start, kind, i, peer_start, peer_end, total, True)
    fe = np.maximum(_global_bound(w.frame.end, kind, i, peer_start, peer_end, total, False), fs)
    nth = int(w.params[0]) if w.name == "nth_value" else 1
    if not w.ignore_nulls:
        src = fe - 1 if w.name == "last_value" else fs + nth - 1
        ok = (src >= fs) & (src < fe)
        return ranks.fetch({"x": x}, np.where(ok, src, -1))["x"]
    valid = np.ones(lay.n, bool) if x.valid is None else x.valid
    bounds, counts = _valid_before(valid, np.concatenate([fs, fe]), ranks)
    first, stop = bounds[: lay.n], bounds[lay.n:]
    j = stop - 1 if w.name == "last_value" else first + nth - 1
    ok = (j >= first) & (j < stop)
    return ranks.fetch({"x": x.take(np.flatnonzero(valid))}, np.where(ok, j, -1), counts)["x"]


def _spread_offset_valid(w: E.Window, batch: Batch, lay: _Layout, ranks: Ranks) -> Column:
    """LAG / LEAD IGNORE NULLS: the ``k``-th non-NULL row before / after, by its position
    among the sequence's non-NULL rows."""
    x = evaluate(w.args[0], batch)
    k = int(w.params[0]) * (1 if w.name == "lag" else -1)  # rows back
    valid = np.ones(lay.n, bool) if x.valid is None else x.valid
    i = lay.position + ranks.offset
    before, counts = _valid_before(valid, np.concatenate([i, i + 1]), ranks)
    j = before[: lay.n] - k if k > 0 else before[lay.n:] - k - 1
    ok = (j >= 0) & (j < counts.sum())
    value = ranks.fetch({"x": x.take(np.flatnonzero(valid))}, np.where(ok, j, -1), counts)["x"]
    return _with_default(w, batch, value, ok)


def _with_default(w: E.Window, batch: Batch, value: Column, ok: np.ndarray) -> Column:
    """LAG / LEAD's ``value``, or their default argument where not ``ok``."""
    if len(w.args) < 2 or not len(value):
        return value
    both = stack(value, evaluate(w.args[1], batch))  # one dictionary for strings
    n = len(value)
    return both.take(np.where(ok, np.arange(n), n + np.arange(n)))


def _spread_whole(w: E.Window, batch: Batch, ranks: Ranks) -> Column:
    """An aggregate of the whole sequence that does not combine from per-rank states
    (DISTINCT, MEDIAN, STRING_AGG, ...): its argument columns alone gathered on rank 0,
    aggregated there, the one value sent back to every rank."""
    columns = {f"a{k}": evaluate(a, batch) for k, a in enumerate(w.args)}
    if w.filter is not None:
        columns["keep"] = Column(_filtered(w.filter, batch), "bool")
    gathered, m = ranks.on_root(columns, batch.nrows)
    args = [gathered[f"a{k}"] for k in range(len(w.args))]
    keep = None if w.filter is None else np.asarray(gathered["keep"].values, bool)
    value = _partition_aggregates(w, args, keep, np.zeros(m, np.int64))
    one = ranks.from_root({"v": value.take(np.zeros(min(m, 1), np.int64))})["v"]
    return one.take(np.zeros(batch.nrows if len(one) else 0, np.int64))


def _extended(columns: dict[str, Column], before: int, after: int, ranks: Ranks
              ) -> tuple[dict[str, Column], int]:
    """Collective. ``columns`` with the ``before`` rows of the sequence before this rank's
    and the ``after`` rows after them around them, and how many came before."""
    if not before and not after:
        return columns, 0
    prior, nxt = ranks.halo(columns, before, after)
    out = {k: stack(stack(prior[k], c), nxt[k]) for k, c in columns.items()}
    return out, len(next(iter(prior.values())))


def _spread_offset(w: E.Window, batch: Batch, lay: _Layout, ranks: Ranks) -> Column:
    k = int(w.params[0]) * (1 if w.name == "lag" else -1)  # rows back
    x = evaluate(w.args[0], batch)
    ext, hb = _extended({"x": x}, max(k, 0), max(-k, 0), ranks)
    src = hb + lay.position - k
    ok = (src >= 0) & (src < len(ext["x"]))
    return _with_default(w, batch, _pick(ext["x"], src, ok), ok)


def _spread_aggregate(w: E.Window, batch: Batch, lay: _Layout, ranks: Ranks) -> Column:
    """An aggregate over frames that may reach into other ranks: the rows within its
    offsets come from the neighbouring ranks, an UNBOUNDED end adds the aggregate of every
    rank before (or after) this one."""
    start, end, kind = w.frame.start, w.frame.end, w.frame.kind
    if (start.side, end.side) in (("following", "unbounded_following"),
                                  ("unbounded_preceding", "preceding")):
        return _spread_open_end(w, batch, lay, ranks)
    before = max([int(b.offset) for b in (start, end) if b.side == "preceding"], default=0)
    after = max([int(b.offset) for b in (start, end) if b.side == "following"], default=0)
    col, present = _argument(w, batch)
    ext, hb = _extended({"x": col, "p": Column(present, "bool")}, before, after, ranks)
    x, p = ext["x"], np.asarray(ext["p"].values, bool)
    n, size, i = lay.n, len(x), lay.position + hb
    fs = _spread_bound(start, kind, i, lay, hb, size, True)
    fe = np.maximum(_spread_bound(end, kind, i, lay, hb, size, False), fs)
    stats = frame_stats(w, x, p, fs, fe)
    # every rank's aggregate of its own rows, for the UNBOUNDED ends
    mine = frame_stats(w, col, present, np.zeros(1, np.int64), np.full(1, n, np.int64))
    every = [ranks.gathered(a) for a in (mine.count, mine.value, mine.rough, mine.nans)]
    per_rank = [Stats(*(a[r] for a in every)) for r in range(len(every[0]))]
    if start.side == "unbounded_preceding":
        stats = combine(w, stats, _repeat(_fold(w, per_rank[: ranks.rank], mine), n))
    if end.side == "unbounded_following":
        stats = combine(w, stats, _repeat(_fold(w, per_rank[ranks.rank + 1:], mine), n))
    return finish(w, col, stats)


def _spread_variance(w: E.Window, batch: Batch, lay: _Layout, ranks: Ranks) -> Column:
    """A variance over frames that may reach into other ranks: the moments (count, mean,
    squared deviations) of the rows within its offsets (from the neighbouring ranks) merged
    with those of every rank before (or after) for an UNBOUNDED end."""
    start, end, kind = w.frame.start, w.frame.end, w.frame.kind
    before = max([int(b.offset) for b in (start, end) if b.side == "preceding"], default=0)
    after = max([int(b.offset) for b in (start, end) if b.side == "following"], default=0)
    col, present = _argument(w, batch)
    x = np.where(present, to_float(col, w.args[0].type), 0.0)
    ext, hb = _extended({"x": Column(x, "float"), "p": Column(present, "bool")}, before,
                        after, ranks)
    xe, pe = ext["x"].values, np.asarray(ext["p"].values, bool)
    n, i = lay.n, lay.position + hb
    fs = _spread_bound(start, kind, i, lay, hb, len(xe), True)
    fe = np.maximum(_spread_bound(end, kind, i, lay, hb, len(xe), False), fs)
    moments = K.frame_moments(xe, pe, fs, fe)
    own = K.frame_moments(x, present, np.zeros(1, np.int64), np.full(1, n, np.int64))
    every = ranks.gathered(np.concatenate(own))  # per rank: count, mean, squared deviations
    if start.side == "unbounded_preceding":
        for part in every[: ranks.rank]:
            moments = _merge_moments(moments, part)
    if end.side == "unbounded_following":
        for part in every[ranks.rank + 1:]:
            moments = _merge_moments(moments, part)
    return _moments_column(w, moments[0], moments[2])


def _merge_moments(a: tuple[np.ndarray, ...], b: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each row's moments ``a`` (count, mean, squared deviations) combined with one set of
    rows' ``b`` (Chan et al.)."""
    na, ma, qa = a
    nb, mb, qb = (float(v) for v in b)
    if nb == 0:
        return a
    total = na + nb
    delta = mb - ma
    return total, ma + delta * nb / total, qa + qb + delta * delta * na * nb / total


def _spread_open_end(w: E.Window, batch: Batch, lay: _Layout, ranks: Ranks) -> Column:
    """An aggregate over ``k FOLLOWING`` to UNBOUNDED FOLLOWING (or UNBOUNDED PRECEDING to
    ``k PRECEDING``): every rank's states from each of its positions to the sequence's end
    (from its start to each position), read at the frame's first (last) row, wherever that
    lies."""
    col, present = _argument(w, batch)
    n, pos = lay.n, lay.position
    mine = frame_stats(w, col, present, np.zeros(1, np.int64), np.full(1, n, np.int64))
    every = [ranks.gathered(a) for a in (mine.count, mine.value, mine.rough, mine.nans)]
    per_rank = [Stats(*(a[r] for a in every)) for r in range(len(every[0]))]
    step = int((w.frame.start if w.frame.start.offset is not None else w.frame.end).offset)
    if w.frame.end.side == "unbounded_following":  # [p, end) at every position p
        later = _repeat(_fold(w, per_rank[ranks.rank + 1:], mine), n)
        states = combine(w, frame_stats(w, col, present, pos, np.full(n, n, np.int64)), later)
        at = pos + ranks.offset + step
        at = np.where(at < ranks.total, at, -1)
    else:  # [start, p] at every position p
        earlier = _repeat(_fold(w, per_rank[: ranks.rank], mine), n)
        states = combine(w, earlier, frame_stats(w, col, present, np.zeros(n, np.int64),
                                                 pos + 1))
        at = pos + ranks.offset - step
    parts = {k: Column(a, "float" if a.dtype.kind == "f" else "int")
             for k, a in zip("cvrn", (states.count, states.value, states.rough, states.nans),
                             strict=True)}
    got = ranks.fetch(parts, at)
    empty = at < 0  # the frame starts after the last row (ends before the first)
    identity = _identity(w, states.value)
    return finish(w, col, Stats(*(np.where(empty, fill, got[k].values) for k, fill in
                                  zip("cvrn", (0, identity, 0.0, 0), strict=True))))


def _fold(w: E.Window, parts: list[Stats], like: Stats) -> Stats:
    """The state over all ``parts`` (one frame each); the state of no rows when none
    (``like``: a state of the same value type)."""
    if not parts:
        zero = np.zeros(1, np.int64)
        return Stats(zero, np.full(1, _identity(w, like.value), like.value.dtype),
                     np.zeros(1, np.float64), zero)
    out = parts[0]
    for st in parts[1:]:
        out = combine(w, out, st)
    return out


def _identity(w: E.Window, like: np.ndarray) -> object:
    """The value of an aggregate's state over no rows."""
    if w.name in ("sum", "avg", "count", "count_star"):
        return 0
    if like.dtype.kind == "f":
        return -np.inf if _wants_max(w) else np.inf
    return _INT64.min if _wants_max(w) else _INT64.max


def _repeat(st: Stats, n: int) -> Stats:
    return Stats(*(np.repeat(a, n) for a in (st.count, st.value, st.rough, st.nans)))


def _spread_bound(b: E.Bound, kind: str, i: np.ndarray, lay: _Layout, hb: int, size: int,
                  start: bool) -> np.ndarray:
    """A frame bound in the positions of this rank's rows among their neighbours (``hb``
    rows before, ``size`` in all; row ``r`` at ``i[r]``); an UNBOUNDED end stops at this
    rank's rows (the other ranks' aggregates are added)."""
    if b.side == "unbounded_preceding":
        return np.full(lay.n, hb, np.int64)
    if b.side == "unbounded_following":
        return np.full(lay.n, hb + lay.n, np.int64)
    if b.side == "current":
        if kind == "range":
            return hb + (lay.peer_start if start else lay.peer_end)
        return i + (0 if start else 1)
    step = int(b.offset) * (-1 if b.side == "preceding" else 1)
    return np.clip(i + step + (0 if start else 1), 0, size)
