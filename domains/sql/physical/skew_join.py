"""The exchanges of a join whose keys are skewed: the rows of a few heavy key values stay on
the ranks that hold them, and the other side's rows with those values go to every rank.

A hash exchange on both sides of a join sends every row of one key value to one rank. A
value that holds a large share of one side's rows (a popular customer, a default code, NULL)
then leaves that rank with that share of the join's work and memory, however many ranks
run it. Before the exchanges, a sample of the staying side's keys (evenly spaced rows of
every rank, weighted by its row count) names the *heavy* values: those holding at least
:data:`HEAVY_SHARE` of a rank's fair share of that side's rows. Their rows stay where they
are; the other side's rows with those values are broadcast to every rank, as long as the
sample of that side puts the copies within the broadcast limit (a value heavy on both sides
is hashed as before: its pairs could not be spread anyway); all other rows are hashed as
before. Each pair of matching rows still meets on exactly one rank, the staying row's, so a
staying row comes out once with all of its matches.

Where NULL keys never match (no key compared by ``IS NOT DISTINCT FROM``), a row with a NULL
key stays too on the staying side and is dropped on the other: it meets nothing, and the
other side's unmatched rows never come out.

Values are compared by their key hash (the one the hash exchange partitions by): a value
that merely shares a heavy value's hash is treated as heavy on both sides alike, which moves
its rows differently but still meets them.

Which side may stay: the side each of whose rows must come out once with all of its
matches, the left of a left, semi or anti join, the right of a right join; either side of an
inner join, the one whose heavy values hold more rows. Full joins, and the joins that judge
NULLs over the other side (NOT IN) or count a row's matches (scalar subqueries, marks), keep
the plain hash exchanges.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hpc.domains.sql.table import Column

from hpc.backend import array_module, to_host
from hpc.collectives import allgather_rows
from hpc.shuffle import hash_partition

from .columns import stack
from .exchange import _hashed_or_gathered, exchange, key_hash

__all__ = ["HEAVY_SHARE", "SAMPLES_PER_RANK", "staying_sides", "heavy_hashes",
           "skew_exchanges"]

HEAVY_SHARE = 0.5  # a key value with half a rank's fair share of a side's rows is heavy
SAMPLES_PER_RANK = 256  # key hashes each rank offers from each side


SIDES = {"left": (0,), "semi": (0,), "anti": (0,), "right": (1,), "inner": (0, 1)}


def staying_sides(kind: str) -> tuple[int, ...]:
    """The sides (0 left, 1 right) whose heavy rows may stay where they are in a join of
    ``kind`` (none: plain hash exchanges)."""
    return SIDES.get(kind, ())


def _sample(hashes: Any, nulls: Any, n: int) -> np.ndarray:
    """Evenly spaced rows of this rank: ``(key hash as int64, rows it stands for as float64
    bits, NULL key)`` per row."""
    if not n:
        return np.zeros((0, 3), np.int64)
    picks = np.unique(np.linspace(0, n - 1, min(n, SAMPLES_PER_RANK)).astype(np.int64))
    at = array_module(hashes).asarray(picks)
    values = to_host(hashes[at]).view(np.int64)
    null = to_host(nulls[at]).astype(np.int64) if nulls is not None else \
        np.zeros(len(picks), np.int64)
    weights = np.full(len(picks), n / len(picks))
    return np.stack([values, weights.view(np.int64), null], axis=1)


def heavy_hashes(hashes: list[Any], nulls: list[Any], rows: list[int], stay: int | None,
                 comm: Any, limit: int) -> tuple[int, np.ndarray, bool]:
    """Collective. Which side's heavy rows stay (``stay``, or for None the side whose heavy
    rows are more), the key hashes (uint64, sorted) whose rows stay, and whether the sample
    met a NULL key. Heavy: values (NULL keys aside) with :data:`HEAVY_SHARE` of a rank's
    fair share of that side's rows, the heaviest first while the other side's rows of them,
    which every rank receives, stay within ``limit`` rows by the sample (a broadcast side's
    limit). ``hashes``, ``nulls`` (rows whose key has a NULL, or None where NULLs meet) and
    ``rows``: both sides' on this rank. The same answer on every rank."""
    size = comm.Get_size()
    mine = [_sample(hashes[s], nulls[s], rows[s]) for s in (0, 1)]
    side_of = np.concatenate([np.full(len(m), s, np.int64) for s, m in enumerate(mine)])
    every = allgather_rows(np.concatenate([np.concatenate(mine), side_of[:, None]], axis=1),
                           comm)
    null = every[:, 2] == 1
    keys, ids = np.unique(every[:, 0], return_inverse=True)
    weights = every[:, 1].view(np.float64)
    counts = [np.bincount(ids[(every[:, 3] == s) & ~null],
                          weights=weights[(every[:, 3] == s) & ~null], minlength=len(keys))
              for s in (0, 1)]
    totals = [float(weights[every[:, 3] == s].sum()) for s in (0, 1)]
    best: tuple[float, int, np.ndarray] = (0.0, 0 if stay is None else stay,
                                           np.zeros(0, np.int64))
    for side in (0, 1) if stay is None else (stay,):
        if totals[side] <= 0:
            continue
        share = counts[side] / totals[side]
        heavy = np.flatnonzero(share * size >= HEAVY_SHARE)
        heavy = heavy[np.argsort(-share[heavy], kind="stable")]
        kept = heavy[np.cumsum(counts[1 - side][heavy]) <= limit]
        mass = float(counts[side][kept].sum())
        if mass > best[0]:
            best = (mass, side, kept)
    return best[1], np.sort(keys[best[2]].view(np.uint64)), bool(null.any())


def _null_rows(keys: list[Column], n: int) -> Any:
    """Rows where some key is NULL."""
    xp = array_module(keys[0].values)
    out = xp.zeros(n, dtype=bool)
    for k in keys:
        if k.valid is not None:
            out |= ~k.valid
    return out


def skew_exchanges(sides: list[tuple[dict[str, Column], int, list[Column]]],
                   stay: int | None, comm: Any, limit: int, nulls_meet: bool = True,
                   ) -> tuple[int, list[tuple[dict[str, Column], int]]] | None:
    """Collective. Both sides of a join (each ``(columns, rows, keys)`` on this rank) moved
    so that equal keys meet: the heavy values' rows of side ``stay`` (None: either, see
    :func:`heavy_hashes`) where they are, the other side's rows of them on every rank, the
    rest hashed. Where NULL keys never meet (``nulls_meet`` False: no key is ``IS NOT
    DISTINCT FROM``), the staying side's rows with a NULL key stay too and the other side's
    are dropped (they match nothing, and that side's unmatched rows never come out).
    Returns the side that stayed and both sides' new columns and row counts; None where
    there is nothing to keep (no heavy value, no NULL key seen) or a side has no column to
    carry: the caller hashes both sides as usual. The same answer on every rank."""
    if any(not columns for columns, _, _ in sides):
        return None
    hashes = [key_hash(keys) for _, _, keys in sides]
    nulls = [None if nulls_meet else _null_rows(keys, n) for _, n, keys in sides]
    stay, heavy, null_seen = heavy_hashes(hashes, nulls, [n for _, n, _ in sides], stay,
                                          comm, limit)
    if not len(heavy) and not null_seen:
        return None
    size, rank = comm.Get_size(), comm.Get_rank()
    other = 1 - stay
    out: list[Any] = [None, None]
    columns, n, keys = sides[stay]
    xp = array_module(hashes[stay])
    hot = xp.isin(hashes[stay], xp.asarray(heavy))
    if nulls[stay] is not None:
        hot |= nulls[stay]
    dest = xp.where(hot, rank, hash_partition(hashes[stay].view(np.int64), size))
    out[stay] = _hashed_or_gathered(columns, n, "hash", keys, comm, dest)
    # the other side: its other rows hashed, its heavy values' rows to every rank
    columns, n, keys = sides[other]
    xp = array_module(hashes[other])
    hot = xp.isin(hashes[other], xp.asarray(heavy))
    cold = ~hot if nulls[other] is None else ~hot & ~nulls[other]
    cold_rows = xp.flatnonzero(cold)
    spread, _ = _hashed_or_gathered({name: c.take(cold_rows) for name, c in columns.items()},
                                    len(cold_rows), "hash", [k.take(cold_rows) for k in keys],
                                    comm)
    if len(heavy):  # (the same on every rank)
        hot_rows = xp.flatnonzero(hot if nulls[other] is None else hot & ~nulls[other])
        everyone, _ = exchange({name: c.take(hot_rows) for name, c in columns.items()},
                               len(hot_rows), "broadcast", [], comm)
        spread = {name: stack(spread[name], everyone[name]) for name in columns}
    out[other] = (spread, len(next(iter(spread.values()))))
    return stay, out
