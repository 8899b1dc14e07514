"""The local join: this rank's left rows against the right rows the exchanges brought, for
every join kind, by a hash join on the equi-keys (a nested loop in blocks without them),
then the other conjuncts on the candidate pairs.

Each kind from the surviving pairs ``(l, r)``: inner the pairs; left / right / full the
pairs plus the unmatched rows padded with NULLs; semi / anti the left rows with / without
a pair; mark every left row with TRUE (a pair), NULL (no pair but a NULL comparison, for
NOT IN's null-aware join) or FALSE; single a left join that fails where a left row has
two pairs (a scalar subquery of more than one row). A semi, anti or mark join without
other conjuncts makes no pairs: the device's membership test marks the left rows. The
columns of a join's rows are gathered when read (late materialisation, :func:`_rows_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hpc.domains.sql import ops, strings
from hpc.domains.sql.errors import SQLError
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.table import Column, Deferred, Rows, deferred_gather

from .device import backend, kernels
from .device import xp as _xp
from .evaluate import Batch, evaluate
from .lazy_decimals import LazyDecimals

__all__ = ["Side", "join"]

_PAIR_BLOCK = 1 << 22  # a nested-loop join makes at most this many pairs at a time


@dataclass
class Side:
    """One side of a join on this rank: its columns and row count."""

    columns: dict[str, Column]
    nrows: int


def _key_values(x: Column, y: Column) -> tuple[np.ndarray, np.ndarray]:
    """Two key columns of one type as comparable int64 arrays (strings by the first entry of
    either dictionary that holds them, found by hashing; floats by value)."""
    if x.kind == "string":
        if x.dictionary is y.dictionary and not x.raw:
            return x.values.astype(np.int64), y.values.astype(np.int64)
        rx, ry = strings.equal_codes(x.dictionary, y.dictionary)
        # (the remapping tables, from the host's dictionaries, go where the codes are)
        return (_xp().asarray(rx)[x.values] if len(rx) else _xp().zeros(len(x), np.int64),
                _xp().asarray(ry)[y.values] if len(ry) else _xp().zeros(len(y), np.int64))
    if x.values.dtype.kind == "f" or y.values.dtype.kind == "f":
        return ((x.values.astype(np.float64) + 0.0).view(np.int64),
                (y.values.astype(np.float64) + 0.0).view(np.int64))
    return x.values.astype(np.int64, copy=False), y.values.astype(np.int64, copy=False)


def null_safe_keys(lkeys: list[Column], rkeys: list[Column], safe: list[bool]
                   ) -> tuple[list[Column], list[Column]]:
    """Key columns where the pairs flagged ``safe`` (``IS NOT DISTINCT FROM``) match NULL
    with NULL: such a pair becomes its values with NULLs read as a fixed value and a second
    key, whether the value is NULL, neither of which is NULL."""
    left, right = [], []
    for a, b, flag in zip(lkeys, rkeys, safe, strict=True):
        if not flag or (a.valid is None and b.valid is None):
            left.append(a)
            right.append(b)
            continue
        for out, c in ((left, a), (right, b)):
            valid = _xp().ones(len(c), bool) if c.valid is None else c.valid
            zero = _xp().zeros(1, c.values.dtype)
            out.append(Column(np.where(valid, c.values, zero), c.kind, c.dictionary))
            out.append(Column(valid.astype(np.int64), "int"))
    return left, right


def _valid(cols: list[Column], n: int) -> np.ndarray | None:
    out = None
    for c in cols:
        if c.valid is not None:
            out = c.valid if out is None else out & c.valid
    return out


def _keys(lcols: list[Column], rcols: list[Column], nl: int,
          nr: int) -> tuple[np.ndarray, Any, np.ndarray, Any]:
    """One int64 key per row of each side (equal exactly when every key is) and the rows
    whose keys hold no NULL."""
    pairs = [_key_values(a, b) for a, b in zip(lcols, rcols, strict=True)]
    if len(pairs) == 1:
        lk, rk = pairs[0]
    else:
        both = [np.concatenate([a, b]) for a, b in pairs]
        ids = ops.combine_ids(backend(), both, [None] * len(both))
        lk, rk = ids[:nl], ids[nl:]
    return lk, _valid(lcols, nl), rk, _valid(rcols, nr)


def _pairs(left: Side, right: Side, lkeys: list[Column], rkeys: list[Column],
           swap: bool = False):
    """Candidate pairs: equal non-NULL keys, or every pair without keys (in blocks). With
    ``swap``, the pairs in any order (a semi, anti or mark join only marks the left rows),
    so a right side much larger than the left probes a hash table of the left's keys."""
    if lkeys:
        lk, lv, rk, rv = _keys(lkeys, rkeys, left.nrows, right.nrows)
        if swap and right.nrows > _BUILD_LARGER * left.nrows:
            ri, li = _pairs_of(rk, lk, rv, lv)  # the smaller side is the hash table
        else:
            li, ri = _pairs_of(lk, rk, lv, rv)
        yield li, ri
        return
    if left.nrows * right.nrows == 0:
        yield _xp().zeros(0, np.int64), _xp().zeros(0, np.int64)
        return
    step = max(1, _PAIR_BLOCK // max(right.nrows, 1))
    for lo in range(0, left.nrows, step):
        hi = min(left.nrows, lo + step)
        li = _xp().repeat(_xp().arange(lo, hi, dtype=np.int64), right.nrows)
        ri = _xp().tile(_xp().arange(right.nrows, dtype=np.int64), hi - lo)
        yield li, ri


def _pairs_of(probe: np.ndarray, build: np.ndarray, probe_valid: Any, build_valid: Any
              ) -> tuple[np.ndarray, np.ndarray]:
    """The row pairs with equal keys (neither NULL), by the run's device's hash join."""
    return kernels().join(_xp(), probe, build, "inner", probe_valid, build_valid)


_BUILD_LARGER = 2  # a marking join builds its right side unless this many times the left
# a semi, anti or mark join without a residual condition tests membership (_marked), not
# pairs: measured 2.8x faster for 57k left rows against 3.8M right rows, several of them
# matching each left row
MEMBERSHIP = True


def _truth(e: E.Expr, left: Side, right: Side, li: np.ndarray,
           ri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where ``e`` is TRUE and where it is NULL over the pairs."""
    used = E.refs(e)
    cols = {n: c.take(li) for n, c in left.columns.items() if n in used}
    cols.update({n: c.take(ri) for n, c in right.columns.items() if n in used})
    v = evaluate(e, Batch(cols, len(li)))
    values = v.values if v.values.dtype == np.bool_ else v.values.astype(np.bool_)
    if v.valid is None:
        return values, _xp().zeros(len(li), bool)
    return values & v.valid, ~v.valid


def join(kind: str, left: Side, right: Side, lkeys: list[Column], rkeys: list[Column],
         residual: E.Expr | None, mark: str | None = None, null_aware: bool = False,
         nulls: tuple[bool, bool] = (False, False)) -> Side:
    """The rows of ``left <kind> right`` on this rank.

    Parameters
    ----------
    lkeys, rkeys : list of Column
        The equi-join keys of each side (evaluated on its rows), equal in number.
    residual : Expr or None
        The other conjuncts, evaluated on the key-matched pairs.
    null_aware : bool
        NOT IN's join (mark or anti): a left row with no match is NULL (so not kept by an
        anti join) where a comparison with it was NULL: its key is NULL and the right side
        has rows, or the right side holds a NULL key.
    nulls : (bool, bool)
        For a null-aware join: whether the right side (all of it, over every rank) has any
        row, and whether any right key is NULL.
    """
    if kind == "right":  # a left join seen from the other side
        out = join("left", right, left, rkeys, lkeys, residual)
        order = list(left.columns) + list(right.columns)
        return Side({n: out.columns[n] for n in order}, out.nrows)
    if MEMBERSHIP and residual is None and lkeys and kind in ("semi", "anti", "mark"):
        return _marked(kind, left, right, lkeys, rkeys, mark, null_aware, nulls)
    li_parts, ri_parts, unknown_parts = [], [], []
    for li, ri in _pairs(left, right, lkeys, rkeys, kind in ("semi", "anti", "mark")):
        if residual is not None and len(li):
            true, null = _truth(residual, left, right, li, ri)
            if null_aware:
                unknown_parts.append(li[null])
            li, ri = li[true], ri[true]
        li_parts.append(li)
        ri_parts.append(ri)
    li = np.concatenate(li_parts) if li_parts else _xp().zeros(0, np.int64)
    ri = np.concatenate(ri_parts) if ri_parts else _xp().zeros(0, np.int64)
    matched = _xp().zeros(left.nrows, bool)
    matched[li] = True
    if kind == "inner":
        return _take(left, right, li, ri)
    if kind in ("semi", "anti") and not null_aware:
        rows = np.flatnonzero(matched if kind == "semi" else ~matched)
        return Side({n: c.take(rows) for n, c in left.columns.items()}, len(rows))
    if kind in ("mark", "anti"):
        return _judged(kind, left, lkeys, matched, unknown_parts, mark, null_aware, nulls)
    return _left_join_rest(kind, left, right, li, ri, matched)


def _marked(kind: str, left: Side, right: Side, lkeys: list[Column], rkeys: list[Column],
            mark: str | None, null_aware: bool, nulls: tuple[bool, bool]) -> Side:
    """A semi, anti or mark join on keys alone: which left rows have a match, by the
    device's membership test (a bitmap or a set of the keys, no pairs made: a left row
    with many matches is marked once, and the side with more rows is never paired
    row by row)."""
    lk, lv, rk, rv = _keys(lkeys, rkeys, left.nrows, right.nrows)
    if kind in ("semi", "anti") and not null_aware:
        rows, _ = kernels().join(_xp(), lk, rk, kind, lv, rv)
        return Side({n: c.take(rows) for n, c in left.columns.items()}, len(rows))
    rows, _ = kernels().join(_xp(), lk, rk, "semi", lv, rv)
    matched = _xp().zeros(left.nrows, bool)
    matched[rows] = True
    return _judged(kind, left, lkeys, matched, [], mark, null_aware, nulls)


def _judged(kind: str, left: Side, lkeys: list[Column], matched: np.ndarray,
            unknown_parts: list[np.ndarray], mark: str | None, null_aware: bool,
            nulls: tuple[bool, bool]) -> Side:
    """A mark or null-aware anti join's rows from which left rows have a pair
    (``matched``) and which have a pair whose condition was NULL (``unknown_parts``)."""
    unknown = _xp().zeros(left.nrows, bool)
    for part in unknown_parts:
        unknown[part] = True
    if null_aware:
        right_rows, right_null = nulls
        key_null = _valid(lkeys, left.nrows)
        if key_null is not None and right_rows:
            unknown |= ~key_null
        if right_null:
            unknown[:] = True
    unknown &= ~matched
    if kind == "anti":
        rows = np.flatnonzero(~matched & ~unknown)
        return Side({n: c.take(rows) for n, c in left.columns.items()}, len(rows))
    out = dict(left.columns)
    out[mark or ""] = Column(matched, "bool", None, ~unknown if unknown.any() else None)
    return Side(out, left.nrows)


def _left_join_rest(kind: str, left: Side, right: Side, li: np.ndarray, ri: np.ndarray,
                    matched: np.ndarray) -> Side:
    """A left, single or full join's rows: the pairs and the unmatched left rows, in left
    row order (a full join's unmatched right rows after them)."""
    if kind == "single" and len(li):
        counts = np.bincount(li, minlength=left.nrows)
        if counts.max() > 1:
            raise SQLError("More than one row returned by a subquery used as an expression")
    lonely = np.flatnonzero(~matched)
    li_all = np.concatenate([li, lonely])
    ri_all = np.concatenate([ri, _xp().full(len(lonely), -1, np.int64)])
    order = np.argsort(li_all, kind="stable")
    li_all, ri_all = li_all[order], ri_all[order]
    if kind == "full":
        seen = _xp().zeros(right.nrows, bool)
        seen[ri] = True
        extra = np.flatnonzero(~seen)
        li_all = np.concatenate([li_all, _xp().full(len(extra), -1, np.int64)])
        ri_all = np.concatenate([ri_all, extra])
    return _take(left, right, li_all, ri_all)


def _take(left: Side, right: Side, li: np.ndarray, ri: np.ndarray) -> Side:
    cols = _rows_of(left, li)
    cols.update(_rows_of(right, ri))
    return Side(cols, len(li))


def _rows_of(side: Side, rows: np.ndarray) -> dict[str, Column]:
    """The columns of ``side`` at ``rows``; as they are where ``rows`` is every row in order
    (a lookup into a dimension table that every row matches once keeps the probe side as
    it is, not copied column by column)."""
    n = side.nrows
    if len(rows) == n and n and rows[0] == 0 and rows[-1] == n - 1 and (
            n < 2 or bool(np.all(rows[1:] > rows[:-1]))):
        return dict(side.columns)
    if not DEFER_JOINS or not kernels().host_kernels or not len(rows) or int(rows.min()) < 0:
        return {name: c.take(rows) for name, c in side.columns.items()}
    # late materialisation: host columns gathered when read, a later join's or filter's
    # rows composed with these, so a column carried through several joins is gathered once,
    # for the rows left, and one nothing reads (a key already joined on) never; others
    # (strings, decimals in Parquet's chunks unless DEFER_DECIMALS) are gathered now
    shared = Rows(rows)
    out = {}
    for name, c in side.columns.items():
        later = _deferred(c, shared)
        out[name] = c.take(rows) if later is None else later
    return out


DEFER_JOINS = True  # a join's output columns gathered when read (see _rows_of)
# ... and decimals still in Parquet's chunks (off: a join whose 910k rows later joins cut
# to 7k gained 15 ms of CPU, but joins whose rows stay many lost up to 14 ms, their rows
# converted later through an unordered index, which costs a sort per column, where at the
# first join the rows ascend)
DEFER_DECIMALS = False


def _deferred(c: Column, rows: Rows) -> Column | None:
    """Column ``c`` at ``rows``, gathered when read (None where it is gathered now)."""
    if type(c) in (Column, Deferred):
        return deferred_gather(c, rows)
    if DEFER_DECIMALS and type(c) is LazyDecimals:  # host chunks: asking for its array
        return Deferred(c, rows)  # module (deferred_gather) would convert all its rows
    return None
