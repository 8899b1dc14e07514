"""Window functions over one sequence of rows spread over the ranks: a window without
PARTITION BY, its rows range-partitioned by the ORDER BY (rank ``r``'s rows all before rank
``r + 1``'s, peers on one rank) or, without ORDER BY, the ranks' rows in rank order.

Every frame is a half-open range of positions in the whole sequence. Ranking is arithmetic
on those positions; LAG, LEAD and the value functions read the row at a position wherever it
lies (:meth:`~.exchange.Ranks.fetch`; IGNORE NULLS: a position among the non-NULL rows); a
RANGE frame's ends with an offset are found by value on the rank whose keys hold them; an
aggregate's state over a frame is combined from its part on the rank where it starts, its
part on the rank where it ends (each computed there, :meth:`~.exchange.Ranks.ask`) and the
whole-rank states of the ranks between. What does not combine from states (DISTINCT, MEDIAN,
...) over the whole sequence aggregates its arguments alone on rank 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple, replace
from decimal import Decimal

import numpy as np
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.table import Column

from . import window_kernels as K
from .evaluate import Batch, _make, evaluate, to_float
from .exchange import Ranks
from .window_frames import (
    FRAMED,
    VARIANCES,
    Stats,
    argument,
    combine,
    filtered,
    finish,
    frame_stats,
    merge_moments,
    moments_column,
    ntile,
    partition_aggregates,
    shift,
    unsupported_frame,
    with_default,
)

__all__ = ["spread_function"]

State = tuple[np.ndarray, ...]


def spread_function(w: E.Window, batch: Batch, peer_start: np.ndarray,
                    peer_end: np.ndarray, keys: list[Column], ranks: Ranks) -> Column:
    """Collective. Window function ``w`` of this rank's part of the sequence (``batch``,
    sorted; ``peer_start`` / ``peer_end``: each row's peers as positions in it; ``keys``:
    the ORDER BY columns)."""
    n = batch.nrows
    off, total = ranks.offset, ranks.total
    w = _unordered(w)
    i = np.arange(n, dtype=np.int64) + off
    if w.order:
        peer_start, peer_end = peer_start + off, peer_end + off
    else:  # every row is a peer of every other
        if w.name == "dense_rank":
            return _make(np.ones(n, np.int64), w.type)
        peer_start, peer_end = np.zeros(n, np.int64), np.full(n, total, np.int64)
    if w.name == "row_number":
        return _make(i + 1, w.type)
    if w.name == "rank":
        return _make(peer_start + 1, w.type)
    if w.name == "dense_rank":  # peer groups here plus those of the ranks before
        new_peer = np.zeros(n, np.int64)
        new_peer[peer_start - off] = 1
        groups = ranks.gathered(np.array([new_peer.sum()], np.int64))[:, 0]
        return _make(np.cumsum(new_peer) + groups[: ranks.rank].sum(), w.type)
    if w.name == "percent_rank":
        rank = peer_start.astype(np.float64)
        return _make(rank / (total - 1) if total > 1 else np.zeros(n), w.type)
    if w.name == "cume_dist":
        return _make(peer_end / max(total, 1), w.type)
    if w.name == "ntile":
        return _make(ntile(i, np.full(n, total), int(w.params[0])), w.type)
    if w.name in ("lag", "lead"):
        return _offset(w, batch, i, ranks)
    fs, fe = _frame(w, i, peer_start, peer_end, keys, ranks)
    if w.name in ("first_value", "last_value", "nth_value"):
        return _value(w, batch, fs, fe, ranks)
    if w.distinct or w.name not in FRAMED:
        if not (w.frame.start.side == "unbounded_preceding" and
                w.frame.end.side == "unbounded_following"):
            raise unsupported_frame(w)
        return _whole(w, batch, ranks)
    return _aggregate(w, batch, fs, fe, ranks)


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


# ---------------------------------------------------------------------------------------
# Frames as positions in the sequence
# ---------------------------------------------------------------------------------------

def _frame(w: E.Window, i: np.ndarray, peer_start: np.ndarray, peer_end: np.ndarray,
           keys: list[Column], ranks: Ranks) -> tuple[np.ndarray, np.ndarray]:
    """Collective. Every row's frame ``[fs, fe)`` as positions in the whole sequence (row
    ``r`` at ``i[r]``)."""
    kind, total = w.frame.kind, ranks.total
    ends = []
    for b, start in ((w.frame.start, True), (w.frame.end, False)):
        if b.side == "unbounded_preceding":
            ends.append(np.zeros(len(i), np.int64))
        elif b.side == "unbounded_following":
            ends.append(np.full(len(i), total, np.int64))
        elif b.side == "current" and kind == "range":
            ends.append(peer_start if start else peer_end)
        elif b.side == "current":
            ends.append(i if start else i + 1)
        elif kind == "rows":
            step = int(b.offset) * (-1 if b.side == "preceding" else 1)
            ends.append(np.clip(i + step + (0 if start else 1), 0, total))
        else:
            ends.append(_range_bound(b, w.order[0], keys[0], peer_start if start else peer_end,
                                     start, ranks))
    fs, fe = ends
    return fs, np.maximum(fe, fs)


def _ascending(key: Column, term: E.SortKey, b: E.Bound) -> tuple[np.ndarray, float | int]:
    """The ORDER BY key's values mapped to a domain where the sequence ascends (a DECIMAL's
    unscaled integers; descending keys mirrored: ``-v`` or ``~v``), and ``b``'s offset in
    its units. In that domain ``k PRECEDING`` is ``u - k`` and ``k FOLLOWING`` ``u + k``."""
    t = term.expr.type
    if t.kind == "double":
        u = key.values.astype(np.float64)
        return (u if term.ascending else -u), float(b.offset)
    u = key.values.astype(np.int64)
    offset = int(Decimal(str(b.offset)).scaleb(t.scale if t.kind == "decimal" else 0))
    return (u if term.ascending else ~u), offset


def _range_bound(b: E.Bound, term: E.SortKey, key: Column, peers: np.ndarray, start: bool,
                 ranks: Ranks) -> np.ndarray:
    """Collective. A RANGE bound ``k PRECEDING / FOLLOWING`` as a position in the sequence:
    among the non-NULL keys (one run of the sequence, each rank's part ascending in
    :func:`_ascending`'s domain), the first at or past (the end: past) the row's key moved
    by ``k``; the rank whose keys hold it searches them. A NULL key's frame is its peers."""
    u, offset = _ascending(key, term, b)
    valid = np.ones(len(u), bool) if key.valid is None else key.valid
    target = shift(u[valid], -offset if b.side == "preceding" else offset)
    mine = u[valid]  # this rank's non-NULL keys: one run, ascending
    counts = ranks.gathered(np.array([len(mine)], np.int64))[:, 0]
    lowest = -np.inf if u.dtype.kind == "f" else np.iinfo(np.int64).min
    lasts = ranks.gathered(mine[-1:] if len(mine) else np.array([lowest], u.dtype))[:, 0]
    has = np.flatnonzero(counts)  # an empty rank: the last key of the one before it
    carried = np.maximum.accumulate(np.where(counts > 0, np.arange(len(counts)), -1))
    lasts = np.where(carried >= 0, lasts[np.maximum(carried, 0)], lowest)
    side = "left" if start else "right"
    owner = np.minimum(np.searchsorted(lasts, target, side), len(counts) - 1) if len(has) \
        else np.zeros(len(target), np.int64)
    found = ranks.ask({"t": target}, owner,
                      lambda r: {"j": np.searchsorted(mine, r["t"], side).astype(np.int64)})
    nulls_before = ranks.total - int(counts.sum()) if term.nulls_first else 0
    before = np.concatenate([[0], np.cumsum(counts)])
    out = peers.copy()
    out[valid] = nulls_before + before[owner] + found["j"]
    return out


# ---------------------------------------------------------------------------------------
# Rows at positions: LAG, LEAD, FIRST_VALUE, LAST_VALUE, NTH_VALUE
# ---------------------------------------------------------------------------------------

def _offset(w: E.Window, batch: Batch, i: np.ndarray, ranks: Ranks) -> Column:
    """LAG / LEAD: the row ``k`` before / after (IGNORE NULLS: the ``k``-th non-NULL row),
    or the default."""
    x = evaluate(w.args[0], batch)
    k = int(w.params[0]) * (1 if w.name == "lag" else -1)  # rows back
    if not w.ignore_nulls or k == 0:
        src = i - k
        ok = (src >= 0) & (src < ranks.total)
        return with_default(w, batch, ranks.fetch({"x": x}, np.where(ok, src, -1))["x"], ok)
    valid = np.ones(len(i), bool) if x.valid is None else x.valid
    before, counts = _valid_before(valid, np.concatenate([i, i + 1]), ranks)
    j = before[: len(i)] - k if k > 0 else before[len(i):] - k - 1
    ok = (j >= 0) & (j < counts.sum())
    value = ranks.fetch({"x": x.take(np.flatnonzero(valid))}, np.where(ok, j, -1), counts)["x"]
    return with_default(w, batch, value, ok)


def _value(w: E.Window, batch: Batch, fs: np.ndarray, fe: np.ndarray, ranks: Ranks
           ) -> Column:
    """FIRST_VALUE, LAST_VALUE, NTH_VALUE: the frame's row at a position of the sequence
    (IGNORE NULLS: of its non-NULL rows)."""
    x = evaluate(w.args[0], batch)
    nth = int(w.params[0]) if w.name == "nth_value" else 1
    if not w.ignore_nulls:
        src = fe - 1 if w.name == "last_value" else fs + nth - 1
        ok = (src >= fs) & (src < fe)
        return ranks.fetch({"x": x}, np.where(ok, src, -1))["x"]
    n = batch.nrows
    valid = np.ones(n, bool) if x.valid is None else x.valid
    bounds, counts = _valid_before(valid, np.concatenate([fs, fe]), ranks)
    first, stop = bounds[:n], bounds[n:]
    j = stop - 1 if w.name == "last_value" else first + nth - 1
    ok = (j >= first) & (j < stop)
    return ranks.fetch({"x": x.take(np.flatnonzero(valid))}, np.where(ok, j, -1), counts)["x"]


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


# ---------------------------------------------------------------------------------------
# Aggregates
# ---------------------------------------------------------------------------------------

def _aggregate(w: E.Window, batch: Batch, fs: np.ndarray, fe: np.ndarray, ranks: Ranks
               ) -> Column:
    """An aggregate over frames of any extent: its state combined from pieces."""
    col, present = argument(w, batch)
    if w.name in VARIANCES:
        x = np.where(present, to_float(col, w.args[0].type), 0.0)
        count, _, m2 = _pieces(lambda lo, hi: K.frame_moments(x, present, lo, hi),
                               merge_moments, fs, fe, ranks)
        return moments_column(w, count, m2)
    state = _pieces(lambda lo, hi: astuple(frame_stats(w, col, present, lo, hi)),
                    lambda a, b: astuple(combine(w, Stats(*a), Stats(*b))), fs, fe, ranks)
    return finish(w, col, Stats(*state))


def _pieces(compute: Callable[[np.ndarray, np.ndarray], State],
            merge: Callable[[State, State], State], fs: np.ndarray, fe: np.ndarray,
            ranks: Ranks) -> State:
    """Collective. Per row the state over its frame ``[fs, fe)`` of the sequence: the
    frame's part on the rank where it starts and its part on the rank where it ends, each
    computed there (``compute(lo, hi)``: the states over frames ``[lo, hi)`` of that rank's
    rows) unless it is that rank's whole, merged with the whole-rank states of the ranks it
    covers."""
    n, size = len(fs), len(ranks.counts)
    starts = np.concatenate([[0], np.cumsum(ranks.counts)])
    some = fs < fe
    a = np.clip(np.searchsorted(starts, fs, "right") - 1, 0, size - 1)
    b = np.clip(np.searchsorted(starts, fe - 1, "right") - 1, 0, size - 1)
    first_end = np.minimum(fe, starts[a + 1])
    # a part that is its rank's whole counts among the whole ranks
    head = some & ~((fs == starts[a]) & (first_end == starts[a + 1]))
    tail = some & (b > a) & (fe < starts[b + 1])
    whole_from = np.where(head, a + 1, a)
    whole_to = np.where(tail | (b <= a) & head, b, b + 1)  # whole ranks: [whole_from, whole_to)
    lo = np.concatenate([(fs - starts[a])[head], np.zeros(int(tail.sum()), np.int64)])
    hi = np.concatenate([(first_end - starts[a])[head], (fe - starts[b])[tail]])
    owner = np.concatenate([a[head], b[tail]])

    def answer(r: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {str(k): v for k, v in enumerate(compute(r["lo"], r["hi"]))}

    parts = ranks.ask({"lo": lo, "hi": hi}, owner, answer)
    names = sorted(parts, key=int)
    empty = compute(np.zeros(n, np.int64), np.zeros(n, np.int64))
    state = tuple(np.array(e) for e in empty)
    k = int(head.sum())
    rows = np.flatnonzero(head)
    state = _put(state, rows, tuple(parts[m][:k] for m in names))
    rows = np.flatnonzero(tail)
    state = _put(state, rows, merge(tuple(s[rows] for s in state),
                                    tuple(parts[m][k:] for m in names)))
    mine = compute(np.zeros(1, np.int64), np.full(1, int(ranks.counts[ranks.rank]), np.int64))
    per_rank = [ranks.gathered(np.asarray(m)) for m in mine]  # each (size, 1)
    for q in range(size):
        rows = np.flatnonzero(some & (whole_from <= q) & (q < whole_to))
        if len(rows):
            whole = tuple(np.repeat(p[q], len(rows)) for p in per_rank)
            state = _put(state, rows, merge(tuple(s[rows] for s in state), whole))
    return state


def _put(state: State, rows: np.ndarray, values: State) -> State:
    for s, v in zip(state, values, strict=True):
        s[rows] = v
    return state


def _whole(w: E.Window, batch: Batch, ranks: Ranks) -> Column:
    """An aggregate of the whole sequence that does not combine from per-rank states
    (DISTINCT, MEDIAN, STRING_AGG, ...): its argument columns alone gathered on rank 0,
    aggregated there, the one value sent back to every rank."""
    columns = {f"a{k}": evaluate(a, batch) for k, a in enumerate(w.args)}
    if w.filter is not None:
        columns["keep"] = Column(filtered(w.filter, batch), "bool")
    gathered, m = ranks.on_root(columns, batch.nrows)
    args = [gathered[f"a{k}"] for k in range(len(w.args))]
    keep = None if w.filter is None else np.asarray(gathered["keep"].values, bool)
    value = partition_aggregates(w, args, keep, np.zeros(m, np.int64))
    one = ranks.from_root({"v": value.take(np.zeros(min(m, 1), np.int64))})["v"]
    return one.take(np.zeros(batch.nrows if len(one) else 0, np.int64))

