"""The Exchange operator: the only physical code that moves rows between ranks.

``hash`` sends every row to the rank its key columns' hash names, so equal keys meet on one
rank whatever the columns' dictionaries (a string hashes by its bytes, raw or sorted, a float
by its value, NULL keys together); ``broadcast`` gives every rank all rows; ``gather`` puts
all rows on rank 0, in rank order. Raw string columns (carried past joins, codes into
:class:`~hpc.domains.sql.strings.Entries`) cross hash, gather and broadcast exchanges as their
rows' bytes and arrive raw, one entry per row, so no rank sorts them; only a range exchange,
which compares its keys, settles them. Sorted dictionaries are merged across ranks where
codes must mean the same strings everywhere (:func:`global_dictionaries`). Also the few
global facts operators need (row counts), through the core's collectives.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from hpc.domains.sql import strings
from hpc.domains.sql.exchange import _arrays, _with_masks, allgather_columns, ship
from hpc.domains.sql.ops import host_column
from hpc.domains.sql.table import Column, Table, merge_dictionaries, settle, settle_columns
from numba import njit

from hpc.backend import array_module, get_backend
from hpc.collectives import allreduce
from hpc.shuffle import combined_hash, hash_destinations, shuffle

from .device import running_on

__all__ = ["exchange", "skewed", "global_dictionaries", "key_hash",
           "key_destinations",
           "range_destinations", "Ranks", "mark_global", "global_count_many", "agree"]

_global: dict[int, Any] = {}  # id -> weak reference of dictionaries equal on every rank


def mark_global(dictionary: Any) -> None:
    """Record that ``dictionary`` is the same on every rank (a scanned table's: the catalog
    merges them), so exchanges need not merge it again. Raw entries
    (:class:`~hpc.domains.sql.strings.Entries`) are never global: their codes are no
    dictionary's."""
    if isinstance(dictionary, strings.Entries):
        return
    _global[id(dictionary)] = weakref.ref(dictionary)
    if len(_global) > 1024:
        for key in [k for k, ref in _global.items() if ref() is None]:
            del _global[key]


def _is_global(dictionary: Any) -> bool:
    ref = _global.get(id(dictionary))
    return ref is not None and ref() is dictionary

_NULL_HASH = np.uint64(0x5BD1E9955BD1E995)


@njit(cache=True, nogil=True)
def _fnv(offsets, data, out):  # type: ignore[no-untyped-def]
    for i in range(len(out)):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = h


def _entry_hashes(dictionary: Any) -> np.ndarray:
    """A hash of every dictionary entry's UTF-8 bytes (the same on every rank)."""
    words = strings._plain(strings.arrow(dictionary))
    offsets, data = strings._buffers(words)
    out = np.empty(len(words), dtype=np.uint64)
    _fnv(offsets, data, out)
    return out


@njit(cache=True, nogil=True)
def _fnv_rows(offsets, data, codes, out):  # type: ignore[no-untyped-def]
    # _fnv of entry codes[i] for row i: the rows' strings hashed where entries outnumber rows
    for i in range(len(out)):
        c = codes[i]
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[c], offsets[c + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = h


def _column_hash(c: Column) -> Any:
    xp = array_module(c.values)
    if c.kind == "string":
        codes = c.values if c.valid is None else xp.where(c.valid, c.values, 0)  # a NULL
        if not len(c.dictionary):  # row's code may point anywhere
            h = xp.zeros(len(c), np.uint64)
        elif xp is np and len(c) < len(c.dictionary):  # (raw entries of a whole scan)
            offsets, data = strings._buffers(strings._plain(strings.arrow(c.dictionary)))
            h = np.empty(len(c), np.uint64)
            _fnv_rows(offsets, data, codes, h)
        else:
            h = xp.asarray(_entry_hashes(c.dictionary))[codes]
    elif c.values.dtype.kind == "f":
        h = (c.values.astype(np.float64) + 0.0).view(np.uint64)  # -0.0 as 0.0
    elif c.values.dtype.kind == "b":
        h = c.values.astype(np.uint64)
    else:  # (a view of 64-bit integers, not a copy)
        h = c.values.astype(np.int64, copy=False).view(np.uint64)
    if c.valid is not None:
        h = xp.where(c.valid, h, _NULL_HASH)
    return h


def key_hash(keys: list[Column]) -> Any:
    """One uint64 per row, equal wherever the key columns hold equal values (NULLs equal)."""
    return combined_hash([_column_hash(c) for c in keys])


def key_destinations(keys: list[Column], ranks: int) -> Any:
    """The rank of each row in a hash exchange over ``ranks``: ``hash_partition`` of
    :func:`key_hash`, the columns' hashes combined, partitioned and counted in one compiled
    pass on the host (:func:`hpc.shuffle.hash_destinations`); the ranks come back as one or
    two bytes a row, which :func:`hpc.shuffle.shuffle` reads as they are."""
    return hash_destinations([_column_hash(c) for c in keys], ranks)[0]


def _module(columns: dict[str, Column]) -> Any:
    """The array module of the columns' values (NumPy without columns)."""
    return array_module(next(iter(columns.values())).values) if columns else np



def exchange(columns: dict[str, Column], nrows: int, how: str, keys: list[Column],
             comm: Any, directions: list[tuple[bool, bool]] | None = None
             ) -> tuple[dict[str, Column], int]:
    """Collective. ``columns`` (this rank's ``nrows`` rows) moved as ``how`` says
    (``"hash"`` on ``keys``, ``"range"`` by ``keys`` sorted in ``directions`` ((ascending,
    nulls first) per key; without keys the rows stay: the ranks' rows in rank order are the
    sequence), ``"broadcast"``, ``"gather"``); the new columns and row count.

    Device columns stay on the device: :func:`hpc.shuffle.shuffle` and the core's
    collectives move device buffers (directly with CUDA-aware MPI, else staged through the
    host). Only a range exchange's sort keys visit the host, where the ranges are chosen from
    a sample."""
    if comm.Get_size() == 1:
        return columns, nrows
    if not columns:  # no column to carry: only the row count moves
        counts = np.asarray(_all_counts(nrows, comm))
        total = int(counts.sum())
        if how == "broadcast":
            return {}, total
        if how == "gather":
            return {}, total if comm.Get_rank() == 0 else 0
        return {}, int(np.array_split(np.arange(total), comm.Get_size())[comm.Get_rank()].size)
    order = list(columns)
    if how in ("hash", "gather"):
        return _hashed_or_gathered(columns, nrows, how, keys, comm)
    carried: dict[str, Column] = {}
    if how == "broadcast":  # carried strings travel as their rows' bytes
        carried = _broadcast_carried(columns, comm)
        columns = {n: c for n, c in columns.items() if n not in carried}
        if not columns:
            return {n: carried[n] for n in order}, len(next(iter(carried.values())))
    # a range exchange compares its keys: raw strings (carried past joins) settled here,
    # merged over the ranks below with the rest: every rank takes part in the same merges
    # whichever of its columns were raw; a key that is one of the columns is settled once
    settled = settle_columns(columns)
    once = {id(c): settled[n] for n, c in columns.items()}
    keys = [once[id(k)] if id(k) in once else settle(k) for k in keys]
    columns = global_dictionaries(settled, comm)
    if how == "range" and not keys:  # no order: the sequence is the ranks' rows in order
        out = columns
    elif how == "range":
        keys = list(global_dictionaries(dict(enumerate(keys)), comm).values())  # type: ignore
        order = [(host_column(k), a, f) for k, (a, f) in zip(keys, directions or [],
                                                             strict=True)]
        with running_on(get_backend("cpu")):  # the keys' sample and sort, on the host
            dest = _module(columns).asarray(range_destinations(order, nrows, comm))
        out = ship(columns, dest, comm)
    elif how == "broadcast":
        out = allgather_columns(columns, comm)
        if carried:
            out = {n: out[n] if n in out else carried[n] for n in order}
    else:
        raise ValueError(f"exchange {how!r}: expected hash, range, broadcast or gather")
    return out, len(next(iter(out.values())))


def _hashed_or_gathered(columns: dict[str, Column], nrows: int, how: str, keys: list[Column],
                        comm: Any, dest: Any = None) -> tuple[dict[str, Column], int]:
    """Collective. :func:`exchange` ``"hash"`` (on ``keys``: strings hash by their bytes,
    raw or not; or to the ranks ``dest`` names, one per row, where given) or ``"gather"`` of
    at least one column. The string columns raw on some rank travel as their rows' bytes
    (:func:`_ship_raw`) and arrive raw, one entry per row, so no rank sorts them; the others
    as codes into dictionaries merged over the ranks."""
    xp = _module(columns)
    raw = _raw_anywhere(columns, comm)
    hashes = None
    if dest is None and how == "hash" and keys and not raw:  # hashed in the shuffle's pass
        hashes = [_column_hash(c) for c in keys]
    elif dest is None and how == "hash" and keys:  # (raw strings follow the same ranks)
        dest = key_destinations(keys, comm.Get_size())
    elif dest is None:  # gathered on rank 0 (a hash exchange without keys: one partition)
        dest = xp.zeros(nrows, np.int64)
    fixed = global_dictionaries({n: c for n, c in columns.items() if n not in raw}, comm)
    for name in _with_masks(raw, comm):  # validity where some rank has one, shipped with
        c = raw[name]  # the fixed-width columns
        fixed["\0valid:" + name] = Column(xp.ones(len(c), bool) if c.valid is None
                                          else c.valid, "bool")
    moved = ship(fixed, dest, comm, hashes) if fixed else {}
    strings_moved = _ship_raw(raw, dest, comm)
    out = {}
    for name in columns:
        if name in raw:
            mask = moved.get("\0valid:" + name)
            c = strings_moved[name]
            out[name] = Column(xp.asarray(c.values), "string", c.dictionary,
                               None if mask is None else mask.values)
        else:
            out[name] = moved[name]
    return out, len(next(iter(out.values())))


def _raw_anywhere(columns: dict[str, Column], comm: Any) -> dict[str, Column]:
    """Collective. The string columns raw on some rank (by name, the same on every rank)."""
    names = sorted(n for n, c in columns.items() if c.kind == "string")  # same on every rank
    local = np.asarray([columns[n].raw for n in names], np.int64)
    raw = allreduce(local, "sum", comm) > 0 if names else local > 0
    return {n: columns[n] for n, r in zip(names, raw, strict=True) if r}


def _ship_raw(columns: dict[str, Column], dest: Any, comm: Any) -> dict[str, Column]:
    """Collective. String columns sent row by row to ranks ``dest`` as their rows' bytes
    (:func:`hpc.shuffle.shuffle_strings`; a NULL row as an empty string), in the order
    :func:`hpc.shuffle.shuffle` gives the other columns: raw
    :class:`~hpc.domains.sql.strings.Entries`, one entry per row received (validity not
    set: it travels with the fixed-width columns)."""
    import pyarrow as pa

    from hpc.backend import to_host
    from hpc.shuffle import shuffle_strings

    out = {}
    for name, c in columns.items():
        words = strings._plain(strings.arrow(c.dictionary))
        offsets, data = strings._buffers(words)
        codes = np.asarray(to_host(c.values))
        if not len(words):  # no entries: every row a NULL
            codes = np.full(len(c), -1, np.int64)
        elif c.valid is not None:  # a NULL row's code may point anywhere: sent empty
            codes = np.where(to_host(c.valid), codes, -1)
        got_offsets, got = shuffle_strings(offsets, data, dest, rows=codes, comm=comm)
        m = len(got_offsets) - 1
        if got.size < 2**31:  # plain strings (int32 offsets), as every other dictionary
            kind, got_offsets = pa.string(), got_offsets.astype(np.int32)
        else:
            kind = pa.large_string()
        received = pa.Array.from_buffers(kind, m, [None, pa.py_buffer(got_offsets),
                                                   pa.py_buffer(got)])
        out[name] = Column(np.arange(m, dtype=np.int32), "string", strings.Entries(received))
    return out


def _broadcast_carried(columns: dict[str, Column], comm: Any) -> dict[str, Column]:
    """Collective. The string columns raw on some rank (carried past joins, read at most entry
    by entry), each broadcast as its rows' strings in rank order: raw
    :class:`~hpc.domains.sql.strings.Entries` on every rank, one entry per row, so no rank
    sorts them (the settling a sorted dictionary needs is left to the few rows that remain,
    as on one rank)."""
    import pyarrow as pa

    from hpc.collectives import allgather_rows

    chosen = _raw_anywhere(columns, comm)
    masks = _arrays(chosen, _with_masks(chosen, comm))  # validity where some rank has one
    out = {}
    for name, c in chosen.items():
        entries = strings.arrow(c.dictionary)
        codes = np.asarray(c.values)
        if c.valid is not None and len(entries):
            codes = np.where(c.valid, codes, 0)  # a NULL row's code may point anywhere
        words = entries.take(pa.array(codes)) if len(entries) else \
            pa.array([""] * len(c), pa.string())
        everyone, _ = strings.allgather(comm, strings.Entries(words))
        mask = masks.get("\0valid:" + name)
        valid = None if mask is None else allgather_rows(mask, comm)
        out[name] = Column(np.arange(len(everyone), dtype=np.int32), "string",
                           strings.Entries(everyone), valid)
    return out


_SAMPLES_PER_RANK = 64  # sort keys each rank offers for choosing the ranges
SKEW_SHARE = 1.5  # a key value with more rows than this many ranks' fair share is skew


def skewed(keys: list[Column], n: int, comm: Any) -> bool:
    """Collective. Whether a sample of every rank's rows (evenly spaced, weighted by the
    rank's row count) shows one value of ``keys`` holding more than :data:`SKEW_SHARE`
    ranks' fair share of all rows: hashing on ``keys`` would leave one rank with it. The
    same answer on every rank."""
    size = comm.Get_size()
    if size == 1 or not keys:
        return False
    picks = np.unique(np.linspace(0, n - 1, min(n, _SAMPLES_PER_RANK)).astype(np.int64)) \
        if n else np.zeros(0, np.int64)
    weight = np.full(len(picks), n / max(len(picks), 1))
    sample = {str(j): host_column(k.take(array_module(k.values).asarray(picks)))
              for j, k in enumerate(keys)}
    sample["#w"] = Column(weight, "float")
    with running_on(get_backend("cpu")):  # the sample is on the host
        return _skewed(_everyones(sample, comm), size)


def _skewed(every: dict[str, Column], size: int) -> bool:
    """:func:`skewed` of every rank's sample (keys ``"0"``, ``"1"``, ... and weights
    ``"#w"``), on the host."""
    from .columns import group_keys

    total = float(every["#w"].values.sum())
    if total <= 0:
        return False
    ids, ngroups, _ = group_keys([every[str(j)] for j in range(len(every) - 1)],
                                 len(every["#w"]))
    shares = np.bincount(ids, weights=every["#w"].values, minlength=ngroups) / total
    return bool(shares.max() * size > SKEW_SHARE)


def range_destinations(keys: list[tuple[Column, bool, bool]], n: int, comm: Any) -> np.ndarray:
    """Collective. Per row, the rank whose range of sort keys (``(column, ascending,
    nulls_first)``, as ORDER BY) holds it: rank ``r``'s rows all sort before rank ``r + 1``'s,
    rows with equal keys go to one rank, and the ranges come from a sample of every rank's
    keys, so ranks get about equal rows unless one key value is most of them. String keys
    must have the same dictionary on every rank (:func:`global_dictionaries`)."""
    from .columns import sort_order, stack

    size = comm.Get_size()
    order = sort_order(keys, n)
    picks = order[np.linspace(0, n - 1, min(n, _SAMPLES_PER_RANK)).astype(np.int64)] if n \
        else np.zeros(0, np.int64)
    sample = allgather_columns({str(j): k.take(picks) for j, (k, _, _) in enumerate(keys)},
                               comm)
    cols = [sample[str(j)] for j in range(len(keys))]
    m = len(cols[0]) if cols else 0
    if m == 0:
        return np.zeros(n, np.int64)
    ranked = sort_order([(c, a, f) for c, (_, a, f) in zip(cols, keys, strict=True)], m)
    splitters = ranked[(np.arange(1, size) * m) // size]
    # local rows and splitters in one order, a row before a splitter equal to it: the number
    # of splitters before a row is its rank
    both = [(stack(k, c.take(splitters)), a, f) for (k, a, f), c in zip(keys, cols,
                                                                      strict=True)]
    is_splitter = np.concatenate([np.zeros(n, np.int64), np.ones(size - 1, np.int64)])
    both.append((Column(is_splitter, "int"), True, False))
    merged = sort_order(both, n + size - 1)
    before = np.cumsum(is_splitter[merged])
    dest = np.empty(n + size - 1, np.int64)
    dest[merged] = before
    return dest[:n]


class Ranks:
    """Collective construction. What a window operator needs of the other ranks when one
    sequence of rows is spread over them (rank ``r``'s rows all come before rank
    ``r + 1``'s): where this rank's rows start in the sequence, its length, per-rank figures,
    rows read at positions of the sequence, and requests answered by the rank they name."""

    def __init__(self, n: int, comm: Any) -> None:
        from hpc.collectives import row_counts

        self.comm = comm
        self.rank = comm.Get_rank()
        self.counts = row_counts(n, comm)
        self.offset = int(self.counts[: self.rank].sum())
        self.total = int(self.counts.sum())

    def gathered(self, values: np.ndarray) -> np.ndarray:
        """Collective. Every rank's ``values`` (a 1-D array of one length on every rank) as
        the rows of a 2-D array, in rank order."""
        from hpc.collectives import allgather_rows

        return np.asarray(allgather_rows(np.asarray(values)[None, :], self.comm))

    def fetch(self, columns: dict[str, Column], index: np.ndarray,
              counts: np.ndarray | None = None) -> dict[str, Column]:
        """Collective. Rows ``index`` (positions in ``[0, total)`` of a sequence of which this
        rank holds ``columns``' rows, rank ``r`` ``counts[r]`` of them: by default the
        window's sequence; a negative position: a NULL) of every column. Only the distinct
        positions other ranks hold travel: each rank's requests to all, then the answers to
        all."""
        from .columns import stack

        counts = self.counts if counts is None else np.asarray(counts, np.int64)
        lo = int(counts[: self.rank].sum())
        n = int(counts[self.rank])
        index = np.asarray(index, np.int64)
        local = (index >= lo) & (index < lo + n)
        none = index < 0
        if self.comm.Get_size() > 1:
            columns = global_dictionaries(columns, self.comm)
            wanted = np.unique(index[~local & ~none])
            asked = allgather_columns({"i": Column(wanted, "int")}, self.comm)["i"].values
            mine = np.unique(asked[(asked >= lo) & (asked < lo + n)])
            answers = allgather_columns(
                {"#": Column(mine, "int"), **{k: c.take(mine - lo) for k, c in columns.items()}},
                self.comm)
            found = np.asarray(answers.pop("#").values, np.int64)  # ascending: rank order
            columns = {k: stack(c, answers[k]) for k, c in columns.items()}
        else:
            found = np.zeros(0, np.int64)
        rows = np.where(local, index - lo, n + np.searchsorted(found, index))
        return {k: _rows_or_null(c, np.where(none, 0, rows), none) for k, c in columns.items()}

    def ask(self, requests: dict[str, np.ndarray], owner: np.ndarray,
            answer: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
            ) -> dict[str, np.ndarray]:
        """Collective. ``answer`` (every rank's function of the requests it receives, giving
        arrays of one dtype on every rank) of each request row, evaluated on the rank
        ``owner`` names: the rows go there, the answers come back in the requests' order."""
        if self.comm.Get_size() == 1:
            return answer(requests)
        n = len(owner)
        here = owner == self.rank  # answered without moving
        mine = answer({k: v[here] for k, v in requests.items()})
        away = np.flatnonzero(~here)
        sent = {**{k: v[away] for k, v in requests.items()}, "#slot": away,
                "#from": np.full(len(away), self.rank, np.int64)}
        got = shuffle(sent, owner[away], self.comm)
        replies = answer({k: v for k, v in got.items() if not k.startswith("#")})
        back = shuffle({**replies, "#slot": got["#slot"]}, got["#from"], self.comm)
        out = {}
        for k, v in mine.items():
            out[k] = np.empty(n, v.dtype)
            out[k][here] = v
            out[k][back["#slot"]] = back[k]
        return out

    def everyones(self, columns: dict[str, Column]) -> dict[str, Column]:
        """Collective. Every rank's rows of ``columns`` on every rank, in rank order (string
        codes mean the same strings everywhere)."""
        return _everyones(columns, self.comm)

    def on_root(self, columns: dict[str, Column], nrows: int) -> tuple[dict[str, Column], int]:
        """Collective. Every rank's rows on rank 0 (in rank order), none elsewhere."""
        return exchange(columns, nrows, "gather", [], self.comm)

    def from_root(self, columns: dict[str, Column]) -> dict[str, Column]:
        """Collective. Rank 0's rows of ``columns`` on every rank (the other ranks' rows are
        dropped)."""
        n = len(next(iter(columns.values()))) if self.rank == 0 and columns else 0
        return _everyones({k: c.take(np.arange(n)) for k, c in columns.items()}, self.comm)


def _everyones(columns: dict[str, Column], comm: Any) -> dict[str, Column]:
    """Collective. Every rank's rows of ``columns`` on every rank, in rank order, string
    codes into dictionaries merged over the ranks."""
    if comm.Get_size() == 1:
        return columns
    return allgather_columns(global_dictionaries(columns, comm), comm)


def _rows_or_null(c: Column, rows: np.ndarray, null: np.ndarray) -> Column:
    """Rows ``rows`` of ``c``, NULL where ``null`` (every row when ``c`` has none)."""
    if not len(c):
        return Column(np.zeros(len(rows), c.values.dtype), c.kind, c.dictionary,
                      np.zeros(len(rows), bool))
    out = c.take(rows)
    if not null.any():
        return out
    valid = ~null if out.valid is None else out.valid & ~null
    return Column(out.values, out.kind, out.dictionary, valid)


def _all_counts(n: int, comm: Any) -> list[int]:
    from hpc.collectives import allgather_object

    return list(allgather_object(int(n), comm))


def global_dictionaries(columns: dict[str, Column], comm: Any) -> dict[str, Column]:
    """Collective. String columns with one sorted dictionary over all ranks (codes remapped),
    so a code means the same string everywhere. Columns sharing one dictionary object share
    the merged one. A column is merged where any rank's dictionary is not known to be global
    (a rank's rows may come from a scan on one rank and from a computed column on another),
    so every rank takes part in the same merges."""
    if comm.Get_size() == 1:
        return columns
    names = sorted(n for n, c in columns.items() if c.kind == "string")  # same on every rank
    local = np.asarray([not _is_global(columns[n].dictionary) for n in names], np.int64)
    wanted = allreduce(local, "sum", comm) > 0 if len(names) else local > 0
    out = dict(columns)
    for name, merge in zip(names, wanted, strict=True):
        if merge:
            c = columns[name]  # (raw entries settled first: merged as a sorted dictionary)
            c = settle(c) if c.raw else Column(c.values, c.kind, c.dictionary, c.valid)
            merge_dictionaries(Table({"c": c}), comm)
            mark_global(c.dictionary)
            out[name] = c
    return out


def global_count_many(counts: list[int], comm: Any) -> np.ndarray:
    """Collective. The element-wise sums of ``counts`` (the same length on every rank)."""
    values = np.asarray(counts, dtype=np.int64)
    return allreduce(values, "sum", comm) if comm.Get_size() > 1 and len(values) else values


def agree(failure: Exception | None, comm: Any) -> None:
    """Collective. Raise on every rank when any rank failed: the first failing rank's error
    (an :class:`~hpc.domains.sql.errors.SQLError` naming the rank), so no rank waits for
    the others at the next exchange."""
    if comm.Get_size() == 1:
        if failure is not None:
            raise failure
        return
    from hpc.domains.sql.errors import SQLError

    from hpc.collectives import allgather_object

    messages = allgather_object(None if failure is None else str(failure), comm)
    for rank, message in enumerate(messages):
        if message is not None:
            if failure is not None and rank == comm.Get_rank():
                raise failure
            raise SQLError(f"{message} (on rank {rank})")
