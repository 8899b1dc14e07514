"""The exchanges of a join whose keys are skewed: the rows of a few heavy key values stay on
the ranks that hold them, and the other side's rows with those values go to every rank.

A hash exchange on both sides of a join sends every row of one key value to one rank. A
value that holds a large share of one side's rows (a popular customer, a default code, NULL)
then leaves that rank with that share of the join's work and memory, however many ranks
run it. Before the exchanges, a sample of both sides' keys (evenly spaced rows of every
rank, weighted by its row count) names the *heavy* values: those whose rows, hashed, would
load their rank with at least :data:`HEAVY_SHARE` of a fair share more than the others
(``share * (ranks - 1) >= HEAVY_SHARE``: half of a side's rows on 2 ranks, a quarter on 3, a
hundred-and-twenty-sixth on 64). Their rows stay where they are; the other side's rows
with those values are broadcast to every rank, as long as the sample of that side puts the
copies within the broadcast limit (a value heavy on both sides is hashed as before: its
pairs could not be spread anyway); all other rows are hashed as before. Each pair of
matching rows still meets on exactly one rank, the staying row's, so a staying row comes
out once with all of its matches.

Where NULL keys never match (no key compared by ``IS NOT DISTINCT FROM``), a row with a NULL
key stays where it is on both sides: it meets nothing, so no rank needs it but its own (the
staying side's unmatched rows come out there; the other side's never come out). NULL keys
heavy as a value would be take this path even without a heavy value.

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
from hpc.collectives import allgather_rows, row_counts
from hpc.shuffle import hash_partition

from .columns import stack
from .device import kernels
from .exchange import _hashed_or_gathered, exchange, key_hash

__all__ = ["HEAVY_SHARE", "SAMPLES_PER_RANK", "staying_sides", "heavy_hashes",
           "choose_heavy", "skew_exchanges"]

HEAVY_SHARE = 0.5  # hashed, a heavy value would add half a fair share to its rank's rows
SAMPLES_PER_RANK = 256  # key hashes each rank offers from each side


SIDES = {"left": (0,), "semi": (0,), "anti": (0,), "right": (1,), "inner": (0, 1)}


def staying_sides(kind: str) -> tuple[int, ...]:
    """The sides (0 left, 1 right) whose heavy rows may stay where they are in a join of
    ``kind`` (none: plain hash exchanges)."""
    return SIDES.get(kind, ())


def _picks(n: int) -> np.ndarray:
    """This rank's sample rows: evenly spaced, at most :data:`SAMPLES_PER_RANK`."""
    return np.unique(np.linspace(0, n - 1, min(n, SAMPLES_PER_RANK)).astype(np.int64)) \
        if n else np.zeros(0, np.int64)


def _sample(keys: list[Column], n: int, nulls_meet: bool) -> np.ndarray:
    """Evenly spaced rows of this rank: ``(key hash as int64, rows it stands for as float64
    bits, NULL key)`` per row (the keys hashed at those rows only)."""
    picks = _picks(n)
    if not len(picks):
        return np.zeros((0, 3), np.int64)
    at = array_module(keys[0].values).asarray(picks)
    sampled = [k.gather(at) for k in keys]
    values = to_host(key_hash(sampled)).view(np.int64)
    null = np.zeros(len(picks), np.int64) if nulls_meet else \
        to_host(_null_rows(sampled, len(picks))).astype(np.int64)
    weights = np.full(len(picks), n / len(picks))
    return np.stack([values, weights.view(np.int64), null], axis=1)


def heavy_hashes(keys: list[list[Column]], rows: list[int], stay: int | None, comm: Any,
                 limit: int, nulls_meet: bool = True) -> tuple[int, np.ndarray, bool]:
    """Collective. :func:`choose_heavy` over every rank's sample of both sides (``keys``
    and ``rows``: both sides' on this rank; ``nulls_meet``: whether NULL keys meet, else
    rows with a NULL key are counted apart). The same answer on every rank."""
    mine = [_sample(keys[s], rows[s], nulls_meet) for s in (0, 1)]
    side_of = np.concatenate([np.full(len(m), s, np.int64) for s, m in enumerate(mine)])
    every = allgather_rows(np.concatenate([np.concatenate(mine), side_of[:, None]], axis=1),
                           comm)
    return choose_heavy(every, comm.Get_size(), stay, limit)


def choose_heavy(every: np.ndarray, ranks: int, stay: int | None,
                 limit: int) -> tuple[int, np.ndarray, bool]:
    """Which side's heavy rows stay (``stay``, or for None the side whose heavy rows are
    more), the key hashes (uint64, sorted) whose rows stay, and whether NULL keys are heavy
    (on either side), from a sample of both sides: rows ``(key hash as int64, rows it stands
    for as float64 bits, NULL key, side)``. A value (or NULL) is heavy where hashing would
    load its rank with at least :data:`HEAVY_SHARE` of a fair share more than the others:
    ``share * (ranks - 1) >= HEAVY_SHARE``. Values are kept the heaviest first while the
    other side's rows of them, which every rank receives, stay within ``limit`` rows by the
    sample (a broadcast side's limit)."""
    null = every[:, 2] == 1
    keys, ids = np.unique(every[:, 0], return_inverse=True)
    weights = every[:, 1].view(np.float64)
    sides = [every[:, 3] == s for s in (0, 1)]
    counts = [np.bincount(ids[on & ~null], weights=weights[on & ~null], minlength=len(keys))
              for on in sides]
    totals = [float(weights[on].sum()) for on in sides]
    null_heavy = any(t > 0 and float(weights[on & null].sum()) / t * (ranks - 1)
                     >= HEAVY_SHARE for on, t in zip(sides, totals, strict=True))
    best: tuple[float, int, np.ndarray] = (0.0, 0 if stay is None else stay,
                                           np.zeros(0, np.int64))
    for side in (0, 1) if stay is None else (stay,):
        if totals[side] <= 0:
            continue
        share = counts[side] / totals[side]
        heavy = np.flatnonzero(share * (ranks - 1) >= HEAVY_SHARE)
        heavy = heavy[np.argsort(-share[heavy], kind="stable")]
        kept = heavy[np.cumsum(counts[1 - side][heavy]) <= limit]
        mass = float(counts[side][kept].sum())
        if mass > best[0]:
            best = (mass, side, kept)
    return best[1], np.sort(keys[best[2]].view(np.uint64)), null_heavy


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
                   ) -> tuple[int | None, list[tuple[dict[str, Column], int]]]:
    """Collective. Both sides of a join (each ``(columns, rows, keys)`` on this rank) moved
    so that equal keys meet: the heavy values' rows of side ``stay`` (None: either, see
    :func:`heavy_hashes`) where they are, the other side's rows of them on every rank, the
    rest hashed. Where NULL keys never meet (``nulls_meet`` False: no key is ``IS NOT
    DISTINCT FROM``), rows with a NULL key stay where they are on both sides (they match
    nothing; the other side's unmatched rows never come out).
    Returns the side that stayed, None where nothing stayed (no heavy value, NULLs not
    heavy: both sides hashed as :func:`.exchange.exchange` hashes them; the sample hashed
    only its own rows), and both sides' new columns and row counts. The same answer on
    every rank."""
    if any(not columns for columns, _, _ in sides):  # only row counts to move
        return None, [exchange(c, n, "hash", k, comm) for c, n, k in sides]
    stay, heavy, null_heavy = heavy_hashes([k for _, _, k in sides], [n for _, n, _ in sides],
                                           stay, comm, limit, nulls_meet)
    if not len(heavy) and not null_heavy:  # both hashed, as exchange() hashes them
        return None, [_hashed_or_gathered(c, n, "hash", k, comm) for c, n, k in sides]
    size, rank = comm.Get_size(), comm.Get_rank()
    hashes = [key_hash(keys) for _, _, keys in sides]
    nulls = [None if nulls_meet else _null_rows(keys, n) for _, n, keys in sides]
    out: list[Any] = [None, None]
    hot_rows: Any = None
    for side in (stay, 1 - stay):  # heavy (and NULL) rows to this rank, the others hashed
        columns, n, keys = sides[side]
        xp = array_module(hashes[side])
        # (NumPy's isin makes a pass per value up to about a hundred values, then sorts)
        hot = kernels().member(xp, hashes[side].view(np.int64), heavy.view(np.int64)) \
            if len(heavy) else xp.zeros(n, bool)
        if side != stay:
            hot_rows = xp.flatnonzero(hot)  # (and NULL keys, which meet nothing, stay)
        if nulls[side] is not None:
            hot |= nulls[side]
        dest = xp.where(hot, rank, hash_partition(hashes[side].view(np.int64), size))
        out[side] = _hashed_or_gathered(columns, n, "hash", keys, comm, dest)
    if len(heavy):  # the other side's heavy rows of the other ranks too (the same on every
        columns, n = out[1 - stay]  # rank); this rank's stayed above
        everyone, _ = exchange({name: c.take(hot_rows) for name, c in sides[1 - stay][0].items()},
                               len(hot_rows), "broadcast", [], comm)
        counts = row_counts(len(hot_rows), comm)
        start, end = int(counts[:rank].sum()), int(counts[: rank + 1].sum())
        theirs = array_module(hot_rows).asarray(
            np.concatenate([np.arange(start), np.arange(end, int(counts.sum()))]))
        moved = {name: stack(columns[name], everyone[name].take(theirs)) for name in columns}
        out[1 - stay] = (moved, n + len(theirs))
    return stay, out
