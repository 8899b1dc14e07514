"""What the window operator computes per frame, shared by its evaluation on one rank
(:mod:`.window`) and over a sequence spread over the ranks (:mod:`.window_spread`): an
aggregate's argument and its state over frames (from which frames combine), the column from
a state, variances from moments, and the small arithmetic of NTILE, LAG / LEAD's default
and saturating offsets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
from hpc.domains.sql import dates
from hpc.domains.sql.errors import SQLError, UnsupportedSQL
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.partial import COMBINING
from hpc.domains.sql.logical.types import SQLType
from hpc.domains.sql.table import Column

from . import window_kernels as K
from .aggregates import aggregate_column, variance_column
from .columns import stack
from .device import kernels, xp
from .evaluate import Batch, _make, _rescale, evaluate, to_float

__all__ = ["FRAMED", "VARIANCES", "Stats", "argument", "combine", "filtered", "finish",
           "frame_count", "frame_stats", "group_bound", "key_units", "merge_moments",
           "moments_column", "moved", "ntile", "partition_aggregates", "peer_key",
           "position_in", "segments", "shift", "unsupported_frame", "with_default"]

_INT64 = np.iinfo(np.int64)

VARIANCES = frozenset({"stddev_samp", "stddev_pop", "var_samp", "var_pop"})


def peer_key(c: Column) -> np.ndarray:
    """Values equal exactly where SQL calls them peers (NULLs equal to each other; floats:
    -0.0 is 0.0, NaNs are one value)."""
    v = c.values
    if v.dtype.kind == "f":
        v = np.where(np.isnan(v), np.nan, v + 0.0).view(np.int64)
    elif v.dtype.kind == "b":
        v = v.astype(np.int8)
    if c.valid is not None:
        v = np.where(c.valid, v, v.dtype.type(0))
    return v


def unsupported_frame(w: E.Window) -> UnsupportedSQL:
    """The error for an aggregate computed over whole partitions only (DISTINCT, MEDIAN,
    STRING_AGG, ...) asked over a smaller frame."""
    return UnsupportedSQL(f"{w.name.upper()}{' DISTINCT' if w.distinct else ''} over a "
                          "window frame smaller than the partition is not supported")


FRAMED = COMBINING  # aggregates computed over frames smaller than the partition


def argument(w: E.Window, batch: Batch) -> tuple[Column, np.ndarray]:
    """An aggregate's argument column (COUNT(*): a column of ones) and the rows it counts:
    non-NULL, where its FILTER holds."""
    if w.name == "count_star" or w.args[0].type.kind == "null":
        col = Column(xp().ones(batch.nrows, np.int64), "int")
        present = xp().full(batch.nrows, w.name == "count_star")
    else:
        col = evaluate(w.args[0], batch)
        present = xp().ones(batch.nrows, bool) if col.valid is None else col.valid.copy()
    if w.filter is not None:
        present &= filtered(w.filter, batch)
    return col, present


def filtered(condition: E.Expr, batch: Batch) -> np.ndarray:
    """Rows where a FILTER condition is TRUE."""
    f = evaluate(condition, batch)
    return f.values.astype(bool, copy=False) & (True if f.valid is None else f.valid)


def partition_aggregates(w: E.Window, args: list[Column], keep: np.ndarray | None,
                          pid: np.ndarray) -> Column:
    """``w``'s aggregate of the argument rows ``args`` of each partition ``pid`` (where
    ``keep``: its FILTER), on each row."""
    ngroups = int(pid.max()) + 1 if len(pid) else 0
    ids = pid if keep is None else np.where(keep, pid, ngroups)  # dropped: an extra group
    agg = E.Aggregate(w.name, w.args, w.type, w.distinct, (), w.params)
    column = aggregate_column(agg, ids, ngroups + (keep is not None), args,
                              [a.type for a in w.args])
    return column.take(pid)


def frame_count(present: np.ndarray, fs: np.ndarray, fe: np.ndarray) -> np.ndarray:
    before = xp().zeros(len(present) + 1, np.int64)
    xp().cumsum(present, out=before[1:])
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
    count = frame_count(present, fs, fe)
    mod = xp()
    reduce = kernels().window_frame_reduce
    zeros = mod.zeros(len(fs), np.float64)
    nans = mod.zeros(len(fs), np.int64)
    if w.name in ("count", "count_star"):
        return Stats(count, count, zeros, nans)
    v = col.values
    if w.name in ("sum", "avg"):
        if _exact(w):
            x = np.where(present, v.astype(np.int64), 0)
            exact = mod.zeros(len(x) + 1, np.int64)
            approx = mod.zeros(len(x) + 1, np.float64)
            with np.errstate(over="ignore"):
                mod.cumsum(x, out=exact[1:])  # modulo 2**64: exact wherever the sum fits
                total = exact[fe] - exact[fs]
            mod.cumsum(x.astype(np.float64), out=approx[1:])
            return Stats(count, total, approx[fe] - approx[fs], nans)
        x = np.where(present, to_float(col, w.args[0].type), 0.0)
        return Stats(count, reduce(mod, x, present, fs, fe, K.SUM, 0.0), zeros, nans)
    op = K.MAX if _wants_max(w) else K.MIN
    if v.dtype.kind == "f":
        nan = np.isnan(v) & present
        numbers = present & ~nan
        fill = -np.inf if op == K.MAX else np.inf
        out = reduce(mod, np.where(numbers, v, fill).astype(np.float64), numbers, fs, fe, op,
                     fill)
        return Stats(count, out, zeros, frame_count(nan, fs, fe))
    fill = np.int64(_INT64.min if op == K.MAX else _INT64.max)
    return Stats(count, reduce(mod, v.astype(np.int64), present, fs, fe, op, fill), zeros,
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


def moments_column(w: E.Window, n: np.ndarray, m2: np.ndarray) -> Column:
    """A variance or standard deviation from each frame's count and sum of squared
    deviations."""
    return variance_column(w.name, w.type, n, m2)


def ntile(r: np.ndarray, size: np.ndarray, buckets: int) -> np.ndarray:
    """NTILE's bucket of the ``r``-th row (from 0) of a partition of ``size`` rows: the first
    ``size % buckets`` buckets hold one row more."""
    q = size // buckets
    big = (size % buckets) * (q + 1)
    return np.where(r < big, r // (q + 1), size % buckets + (r - big) // np.maximum(q, 1)) + 1


def shift(v: np.ndarray, delta: float | int) -> np.ndarray:
    """``v + delta``, saturating at the int64 limits."""
    if v.dtype.kind == "f":
        return v + delta
    with np.errstate(over="ignore"):
        out = v + np.int64(delta)
    if delta > 0:
        return np.where(out < v, _INT64.max, out)
    return np.where(out > v, _INT64.min, out)


def with_default(w: E.Window, batch: Batch, value: Column, ok: np.ndarray) -> Column:
    """LAG / LEAD's ``value``, or their default argument where not ``ok``."""
    if len(w.args) < 2 or not len(value):
        return value
    both = stack(value, evaluate(w.args[1], batch))  # one dictionary for strings
    n = len(value)
    return both.take(np.where(ok, xp().arange(n), n + xp().arange(n)))


def merge_moments(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]
                  ) -> tuple[np.ndarray, ...]:
    """Row by row, the moments (count, mean, squared deviations) of two sets of rows
    combined (Chan et al.)."""
    na, ma, qa = a
    nb, mb, qb = b
    total = na + nb
    with np.errstate(all="ignore"):
        delta = mb - ma
        mean = np.where(nb == 0, ma, np.where(na == 0, mb, ma + delta * nb / total))
        m2 = np.where((na == 0) | (nb == 0), qa + qb, qa + qb + delta * delta * na * nb / total)
    return total, mean, m2


# ---------------------------------------------------------------------------------------
# Frame ends by value (RANGE) and by peer group (GROUPS), and EXCLUDE
# ---------------------------------------------------------------------------------------

def key_units(key: Column, t: SQLType) -> np.ndarray:
    """An ORDER BY key's values in the units a RANGE frame's offset moves them by: floats, a
    DECIMAL's unscaled integers, a DATE's or TIMESTAMP's microseconds, integers."""
    if t.kind == "double":
        return key.values.astype(np.float64)
    if t.kind == "date":
        return key.values.astype(np.int64) * dates.DAY_US
    return key.values.astype(np.int64)


def moved(units: np.ndarray, t: SQLType, offset: Any, sign: int) -> np.ndarray:
    """:func:`key_units` values moved by ``sign`` times a RANGE frame's ``offset`` (a number
    of the key's type, or an interval ``(months, days, microseconds)``), saturating."""
    if isinstance(offset, tuple):
        months, days, micros = (sign * int(v) for v in offset)
        return dates.shift_micros(units, months, days, micros)
    if t.kind == "double":
        return shift(units, sign * float(offset))
    scale = t.scale if t.kind == "decimal" else 0
    return shift(units, sign * int(Decimal(str(offset)).scaleb(scale)))


def group_bound(b: E.Bound, group: np.ndarray, first: np.ndarray, last: np.ndarray,
                part_start: np.ndarray, part_end: np.ndarray, start: bool,
                group_start: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """A GROUPS frame's end ``k PRECEDING / FOLLOWING`` as a position: the start of the peer
    group ``k`` before / after the row's (``group``: its number; ``first``, ``last``: the
    numbers of its partition's first and last groups), or past it for the frame's end;
    clipped to the partition. ``group_start(g)``: the first position of groups ``g``
    (called once)."""
    k = int(b.offset)
    target = group - k if b.side == "preceding" else group + k
    if start:  # the first row of the target group; none after the partition's last
        at = group_start(np.clip(target, first, last))
        return np.where(target > last, part_end, at)
    after = group_start(np.clip(target + 1, first, last))  # the end: the next group's start
    end = np.where(target + 1 > last, part_end, after)
    return np.where(target < first, part_start, end)


def segments(frame: E.Frame, fs: np.ndarray, fe: np.ndarray, i: np.ndarray,
             peer_start: np.ndarray, peer_end: np.ndarray
             ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every row's frame ``[fs, fe)`` less the rows its EXCLUDE clause removes, as ranges of
    positions in order (at most three: before the removed rows, the row itself where EXCLUDE
    TIES keeps it, after them); empty ranges are ``(fs, fs)``."""
    if frame.exclude == "no_others":
        return [(fs, fe)]
    cut_start, cut_end = (i, i + 1) if frame.exclude == "current" else (peer_start, peer_end)
    before = (fs, np.clip(cut_start, fs, fe))
    after = (np.clip(cut_end, fs, fe), fe)
    if frame.exclude != "ties":
        return [before, after]
    inside = (fs <= i) & (i < fe)
    return [before, (np.where(inside, i, fs), np.where(inside, i + 1, fs)), after]


def position_in(parts: list[tuple[np.ndarray, np.ndarray]], name: str, nth: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """The position FIRST_VALUE, LAST_VALUE or NTH_VALUE (``nth``) reads in each row's
    frame made of the ordered ranges ``parts``, and whether there is one."""
    src = xp().full(len(parts[0][0]), -1, np.int64)
    found = xp().zeros(len(src), bool)
    if name == "last_value":
        for lo, hi in parts:
            has = hi > lo
            src = np.where(has, hi - 1, src)
            found |= has
        return src, found
    left = xp().full(len(src), nth - 1, np.int64)  # rows still to pass over
    for lo, hi in parts:
        length = hi - lo
        hit = ~found & (left < length)
        src = np.where(hit, lo + left, src)
        found |= hit
        left = left - length
    return src, found
