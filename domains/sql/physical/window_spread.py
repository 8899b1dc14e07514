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

import functools
from collections.abc import Callable
from dataclasses import astuple, dataclass, replace

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
    with_default,
)

__all__ = ["Sequence", "sequence", "spread_function"]

State = tuple[np.ndarray, ...]


@dataclass
class Sequence:
    """This rank's rows of the sequence (sorted), as positions in the whole of it: each
    row's own ``i``, its partition ``[part_start, part_end)`` and its peers ``[peer_start,
    peer_end)``; ``keys``: the ORDER BY columns."""

    i: np.ndarray
    part_start: np.ndarray
    part_end: np.ndarray
    peer_start: np.ndarray
    peer_end: np.ndarray
    keys: list[Column]


def sequence(part_start: np.ndarray, part_end: np.ndarray, peer_start: np.ndarray,
             peer_end: np.ndarray, partition: list[Column], keys: list[Column],
             ranks: Ranks) -> Sequence:
    """Collective. The :class:`Sequence` of this rank's rows from their bounds within the
    rank (``partition``: the PARTITION BY columns, sorted): a partition that runs on from
    the rank before (equal keys at the edge) starts where it started there, one that runs
    on into the next ranks ends where it ends there."""
    n, off = len(part_start), ranks.offset
    i = np.arange(n, dtype=np.int64) + off
    if not partition:
        return Sequence(i, np.zeros(n, np.int64), np.full(n, ranks.total, np.int64),
                        peer_start + off, peer_end + off, keys)
    size, counts = len(ranks.counts), ranks.counts
    bounds = np.concatenate([[0], np.cumsum(counts)])
    edge = np.array([0, n - 1] if n else [], np.int64)
    edges = ranks.everyones({str(k): c.take(edge) for k, c in enumerate(partition)})
    lengths = ranks.gathered(np.array([part_end[0], n - part_start[-1]] if n else [0, 0],
                                      np.int64))  # per rank: its first and last partition's
    full = np.flatnonzero(counts > 0)
    joined = np.zeros(size, bool)  # a rank's first partition runs on from the rank before
    same = np.ones(max(len(full) - 1, 0), bool)
    for c in edges.values():
        v = peer_key(c)
        valid = np.ones(len(v), bool) if c.valid is None else c.valid
        same &= (v[1:-1:2] == v[2::2]) & (valid[1:-1:2] == valid[2::2])
    joined[full[1:]] = same
    last_start = bounds[1:] - lengths[:, 1]  # where each rank's last partition starts
    for before, q in zip(full[:-1], full[1:], strict=True):
        if joined[q] and lengths[q, 1] == counts[q]:
            last_start[q] = last_start[before]
    first_end = bounds[:-1] + lengths[:, 0]  # where each rank's first partition ends
    for q, after in zip(full[-2::-1], full[:0:-1], strict=True):
        if joined[after] and lengths[q, 0] == counts[q]:
            first_end[q] = first_end[after]
    start, end = part_start + off, part_end + off
    me, where = ranks.rank, int(np.searchsorted(full, ranks.rank))
    if n and joined[me]:
        start[part_start == 0] = last_start[full[where - 1]]
    if n and where + 1 < len(full) and joined[full[where + 1]]:
        end[part_end == n] = first_end[full[where + 1]]
    return Sequence(i, start, end, peer_start + off, peer_end + off, keys)


def spread_function(w: E.Window, batch: Batch, seq: Sequence, ranks: Ranks) -> Column:
    """Collective. Window function ``w`` of this rank's part of the sequence (``batch``,
    sorted as ``seq``)."""
    n = batch.nrows
    w = _unordered(w)
    i, ps, pe = seq.i, seq.part_start, seq.part_end
    size = pe - ps
    peer_start, peer_end = (seq.peer_start, seq.peer_end) if w.order else (ps, pe)
    if w.name == "row_number":
        return _make(i - ps + 1, w.type)
    if w.name == "rank":
        return _make(peer_start - ps + 1, w.type)
    if w.name == "dense_rank":
        return _make(_dense_rank(peer_start, ps, ranks) if w.order else np.ones(n, np.int64),
                     w.type)
    if w.name == "percent_rank":
        rank = (peer_start - ps).astype(np.float64)
        with np.errstate(all="ignore"):
            return _make(np.where(size > 1, rank / np.maximum(size - 1, 1), 0.0), w.type)
    if w.name == "cume_dist":
        with np.errstate(all="ignore"):
            return _make((peer_end - ps) / np.maximum(size, 1), w.type)
    if w.name == "ntile":
        return _make(ntile(i - ps, size, int(w.params[0])), w.type)
    if w.name in ("lag", "lead"):
        return _offset(w, batch, seq, ranks)
    fs, fe = _frame(w, seq, peer_start, peer_end, ranks)
    parts = segments(w.frame, fs, fe, i, peer_start, peer_end)
    if w.name in ("first_value", "last_value", "nth_value"):
        return _value(w, batch, parts, ranks)
    if w.distinct or w.name not in FRAMED:
        if w.partition or w.frame.exclude != "no_others" or not (
                w.frame.start.side == "unbounded_preceding" and
                w.frame.end.side == "unbounded_following"):
            raise unsupported_frame(w)
        return _whole(w, batch, ranks)
    return _aggregate(w, batch, parts, ranks)


def _dense_rank(peer_start: np.ndarray, part_start: np.ndarray, ranks: Ranks) -> np.ndarray:
    """Collective. Peer groups from the partition's start to each row's: a count of peer
    groups over the whole sequence (the first row of a rank starts one), less its count at
    the partition's first row (read where that lies)."""
    n, off = len(peer_start), ranks.offset
    new_peer = np.zeros(n, np.int64)
    new_peer[peer_start - off] = 1
    before = ranks.gathered(np.array([new_peer.sum()], np.int64))[:, 0][: ranks.rank].sum()
    groups = np.cumsum(new_peer) + before
    at_start = ranks.fetch({"g": Column(groups, "int")}, part_start)["g"].values
    return groups - at_start + 1


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

def _frame(w: E.Window, seq: Sequence, peer_start: np.ndarray, peer_end: np.ndarray,
           ranks: Ranks) -> tuple[np.ndarray, np.ndarray]:
    """Collective. Every row's frame ``[fs, fe)`` as positions in the whole sequence."""
    kind, i = w.frame.kind, seq.i
    ends = []
    for b, start in ((w.frame.start, True), (w.frame.end, False)):
        if b.side == "unbounded_preceding":
            ends.append(seq.part_start)
        elif b.side == "unbounded_following":
            ends.append(seq.part_end)
        elif b.side == "current" and kind != "rows":
            ends.append(peer_start if start else peer_end)
        elif b.side == "current":
            ends.append(i if start else i + 1)
        elif kind == "rows":
            step = int(b.offset) * (-1 if b.side == "preceding" else 1)
            ends.append(np.clip(i + step + (0 if start else 1), seq.part_start, seq.part_end))
        elif kind == "groups":
            ends.append(_group_bound(b, seq, peer_start, start, ranks))
        else:  # without PARTITION BY (the plan keeps such a window on its partitions' ranks)
            ends.append(_range_bound(b, w.order[0], seq.keys[0],
                                     peer_start if start else peer_end, start, ranks))
    fs, fe = ends
    return fs, np.maximum(fe, fs)


def _group_bound(b: E.Bound, seq: Sequence, peer_start: np.ndarray, start: bool,
                 ranks: Ranks) -> np.ndarray:
    """Collective. A GROUPS frame bound ``k PRECEDING / FOLLOWING`` as a position in the
    sequence: peer groups numbered over the whole sequence (each on one rank), the target
    group's first position read on the rank that holds it."""
    n, off = len(peer_start), ranks.offset
    new_peer = np.zeros(n, bool)
    new_peer[peer_start - off] = True
    counts = ranks.gathered(np.array([int(new_peer.sum())], np.int64))[:, 0]
    group = np.cumsum(new_peer) - 1 + counts[: ranks.rank].sum()
    at = ranks.fetch({"g": Column(group, "int")}, np.concatenate([seq.part_start,
                                                                  seq.part_end - 1]))
    first, last = at["g"].values[:n], at["g"].values[n:]
    starts = Column(np.flatnonzero(new_peer).astype(np.int64) + off, "int")
    return group_bound(b, group, first, last, seq.part_start, seq.part_end, start,
                       lambda g: ranks.fetch({"s": starts}, g, counts)["s"].values)


def _ascending(key: Column, term: E.SortKey, b: E.Bound) -> tuple[np.ndarray, np.ndarray]:
    """The ORDER BY key's values mapped to a domain where the sequence ascends (in
    :func:`~.window_frames.key_units`; descending keys mirrored: ``-v`` or ``~v``), and
    the values moved by ``b``'s offset in that domain (``k PRECEDING`` down, ``FOLLOWING``
    up)."""
    t = term.expr.type
    v = key_units(key, t)
    sign = (1 if b.side == "following" else -1) * (1 if term.ascending else -1)
    target = moved(v, t, b.offset, sign)
    if term.ascending:
        return v, target
    mirror = np.negative if v.dtype.kind == "f" else np.invert
    return mirror(v), mirror(target)


def _range_bound(b: E.Bound, term: E.SortKey, key: Column, peers: np.ndarray, start: bool,
                 ranks: Ranks) -> np.ndarray:
    """Collective. A RANGE bound ``k PRECEDING / FOLLOWING`` as a position in the sequence:
    among the non-NULL keys (one run of the sequence, each rank's part ascending in
    :func:`_ascending`'s domain), the first at or past (the end: past) the row's key moved
    by ``k``; the rank whose keys hold it searches them. A NULL key's frame is its peers."""
    u, moved_u = _ascending(key, term, b)
    valid = np.ones(len(u), bool) if key.valid is None else key.valid
    target = moved_u[valid]
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

def _offset(w: E.Window, batch: Batch, seq: Sequence, ranks: Ranks) -> Column:
    """LAG / LEAD: the row ``k`` before / after in the partition (IGNORE NULLS: the ``k``-th
    non-NULL row), or the default."""
    x = evaluate(w.args[0], batch)
    k = int(w.params[0]) * (1 if w.name == "lag" else -1)  # rows back
    i, ps, pe = seq.i, seq.part_start, seq.part_end
    if not w.ignore_nulls or k == 0:
        src = i - k
        ok = (src >= ps) & (src < pe)
        return with_default(w, batch, ranks.fetch({"x": x}, np.where(ok, src, -1))["x"], ok)
    n = len(i)
    valid = np.ones(n, bool) if x.valid is None else x.valid
    before, counts = _valid_before(valid, np.concatenate([i, i + 1, ps, pe]), ranks)
    j = before[:n] - k if k > 0 else before[n: 2 * n] - k - 1
    ok = (j >= before[2 * n: 3 * n]) & (j < before[3 * n:])
    value = ranks.fetch({"x": x.take(np.flatnonzero(valid))}, np.where(ok, j, -1), counts)["x"]
    return with_default(w, batch, value, ok)


def _value(w: E.Window, batch: Batch, parts: list[tuple[np.ndarray, np.ndarray]],
           ranks: Ranks) -> Column:
    """FIRST_VALUE, LAST_VALUE, NTH_VALUE: the row of the frame (its ordered ``parts``) at
    a position of the sequence (IGNORE NULLS: of its non-NULL rows)."""
    x = evaluate(w.args[0], batch)
    nth = int(w.params[0]) if w.name == "nth_value" else 1
    if not w.ignore_nulls:
        src, ok = position_in(parts, w.name, nth)
        return ranks.fetch({"x": x}, np.where(ok, src, -1))["x"]
    n = batch.nrows
    valid = np.ones(n, bool) if x.valid is None else x.valid
    bounds, counts = _valid_before(valid, np.concatenate([e for part in parts for e in part]),
                                   ranks)
    among = [(bounds[2 * k * n: (2 * k + 1) * n], bounds[(2 * k + 1) * n: (2 * k + 2) * n])
             for k in range(len(parts))]  # the parts as positions among the non-NULL rows
    j, ok = position_in(among, w.name, nth)
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

def _aggregate(w: E.Window, batch: Batch, parts: list[tuple[np.ndarray, np.ndarray]],
               ranks: Ranks) -> Column:
    """An aggregate over frames of any extent: its state combined from pieces, over each of
    the frame's ``parts``."""
    col, present = argument(w, batch)
    if w.name in VARIANCES:
        x = np.where(present, to_float(col, w.args[0].type), 0.0)
        moments = [_pieces(_spanned(lambda r, lo, hi: K.frame_moments(
            x[r], present[r], lo, hi), batch.nrows), merge_moments, fs, fe, ranks)
            for fs, fe in parts]
        count, _, m2 = functools.reduce(merge_moments, moments)
        return moments_column(w, count, m2)

    def merged(a: State, b: State) -> State:
        return astuple(combine(w, Stats(*a), Stats(*b)))

    states = [_pieces(_spanned(lambda r, lo, hi: astuple(frame_stats(
        w, col if r == slice(None) else col.take(np.arange(r.start, r.stop)), present[r],
        lo, hi)), batch.nrows), merged, fs, fe, ranks) for fs, fe in parts]
    return finish(w, col, Stats(*functools.reduce(merged, states)))


def _spanned(states: Callable[[slice, np.ndarray, np.ndarray], State], n: int
             ) -> Callable[[np.ndarray, np.ndarray], State]:
    """``compute(lo, hi)`` from ``states(rows, lo, hi)`` over only the rows the frames
    cover (its prefix sums and trees are built per call: a few frames, a few rows)."""
    def compute(lo: np.ndarray, hi: np.ndarray) -> State:
        a = int(lo.min()) if len(lo) else 0
        b = max(int(hi.max()) if len(hi) else 0, a)
        if a == 0 and b == n:
            return states(slice(None), lo, hi)
        return states(slice(a, b), lo - a, hi - a)
    return compute


def _pieces(compute: Callable[[np.ndarray, np.ndarray], State],
            merge: Callable[[State, State], State], fs: np.ndarray, fe: np.ndarray,
            ranks: Ranks) -> State:
    """Collective. Per row the state over its frame ``[fs, fe)`` of the sequence
    (``compute(lo, hi)``: the states over frames ``[lo, hi)`` of a rank's own rows): its
    part on this rank computed here for every row at once, merged with the states of its
    parts before and after this rank's rows (:func:`_elsewhere`)."""
    starts = np.concatenate([[0], np.cumsum(ranks.counts)])
    lo, hi = starts[ranks.rank], starts[ranks.rank + 1]
    fe = np.maximum(fe, fs)
    state = compute(np.clip(fs - lo, 0, hi - lo), np.clip(fe - lo, 0, hi - lo))
    nothing = np.zeros(1, np.int64)
    mine = compute(nothing, np.full(1, hi - lo, np.int64))
    per_rank = [ranks.gathered(np.asarray(m))[:, 0] for m in mine]
    for start, end in ((fs, np.minimum(fe, lo)), (np.maximum(fs, hi), fe)):
        rows = np.flatnonzero(start < end)
        other = _elsewhere(compute, merge, start[rows], end[rows], per_rank, ranks)
        state = _put(state, rows, merge(tuple(s[rows] for s in state), other))
    return state


def _elsewhere(compute: Callable[[np.ndarray, np.ndarray], State],
               merge: Callable[[State, State], State], fs: np.ndarray, fe: np.ndarray,
               per_rank: list[np.ndarray], ranks: Ranks) -> State:
    """Collective. Per row the state over ``[fs, fe)``, a non-empty span of the sequence
    on other ranks than this one: its part on the rank where it starts and its part on the
    rank where it ends, each computed there unless it is that rank's whole, merged with
    the whole-rank states (``per_rank``) of the ranks it covers; rows with equal spans (a
    partition's rows share their frame's ends) computed once."""
    first, again = _distinct_pairs(fs, fe, ranks.total)
    if len(first) < len(fs):
        state = _elsewhere(compute, merge, fs[first], fe[first], per_rank, ranks)
        return tuple(s[again] for s in state)
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
    nothing = np.zeros(1, np.int64)
    state = tuple(np.repeat(e, n) for e in compute(nothing, nothing))  # no rows: identity
    k = int(head.sum())
    state = _put(state, np.flatnonzero(head), tuple(parts[m][:k] for m in names))
    tails = tuple(parts[m][k:] for m in names)
    both = head[tail]  # tail rows that have a head piece too
    rows = np.flatnonzero(tail)
    state = _put(state, rows[~both], tuple(t[~both] for t in tails))
    rows = rows[both]
    state = _put(state, rows, merge(tuple(s[rows] for s in state),
                                    tuple(t[both] for t in tails)))
    spans = some & (whole_to > whole_from)  # rows covering whole ranks: one merge each
    if spans.any():
        key = whole_from[spans] * (size + 1) + whole_to[spans]
        kinds, which = np.unique(key, return_inverse=True)
        rows = np.flatnonzero(spans)
        folded = []
        for kind in kinds:  # the ranks' states folded once per distinct span
            lo_q, hi_q = divmod(int(kind), size + 1)
            acc = tuple(p[lo_q: lo_q + 1] for p in per_rank)
            for q in range(lo_q + 1, hi_q):
                acc = merge(acc, tuple(p[q: q + 1] for p in per_rank))
            folded.append(acc)
        whole = tuple(np.concatenate([f[j] for f in folded])[which.ravel()]
                      for j in range(len(per_rank)))
        state = _put(state, rows, merge(tuple(s[rows] for s in state), whole))
    return state


def _distinct_pairs(start: np.ndarray, end: np.ndarray, total: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct ``(start, end)`` pair (positions in ``[0, total]``)
    and every row's pair among them: equal pairs found among consecutive rows first (the
    rows of a partition share their frame's ends), then by sorting what remains."""
    if total < 2**31:
        key = start * (total + 1) + end
        run = np.ones(len(key), bool)
        run[1:] = key[1:] != key[:-1]
        runs = np.flatnonzero(run)
        _, at, which = np.unique(key[runs], return_index=True, return_inverse=True)
        return runs[at], which.ravel()[np.cumsum(run) - 1]
    order = np.lexsort((end, start))  # positions too large for one int64 key
    new = np.ones(len(order), bool)
    new[1:] = (np.diff(start[order]) != 0) | (np.diff(end[order]) != 0)
    slot = np.empty(len(order), np.int64)
    slot[order] = np.cumsum(new) - 1
    return order[new], slot


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

