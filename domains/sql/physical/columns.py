"""Row-set helpers the operators share: grouping rows by key columns, the row order of
ORDER BY keys, and the rows of two columns one after the other."""

from __future__ import annotations

import numpy as np
from hpc.domains.sql import ops, strings
from hpc.domains.sql.table import Column, settle

from hpc.sort import stable_argsort

from .aggregates import sort_rank
from .device import backend, xp

__all__ = ["carried_keys", "differing_rows", "group_keys", "sort_order", "stack",
           "top_candidates"]


def group_keys(cols: list[Column], n: int) -> tuple[np.ndarray, int, np.ndarray]:
    """Dense group ids of rows by key columns (NULL a value of its own), their count and
    each group's first row."""
    x = xp()
    if not cols:
        return x.zeros(n, np.int64), 1, x.zeros(1, np.int64)
    arrays, valids = [], []
    for c in cols:
        v = c.values
        if v.dtype.kind == "f":
            v = (v.astype(np.float64) + 0.0).view(np.int64)
        elif v.dtype.kind == "b":
            v = v.astype(np.int64)
        if c.valid is not None:
            v = x.where(c.valid, v, v.dtype.type(0))
        arrays.append(v)
        valids.append(c.valid)
    where = backend()  # the run's device's kernels (the CPU's outside a run)
    return ops.group_ids(where, ops.combine_ids(where, arrays, valids))


def carried_keys(keys: list[Column]) -> tuple[list[Column], tuple | None]:
    """GROUP BY ``keys`` with raw string columns among them (carried, see
    :mod:`..optimizer.raw_strings`), none of them sorted: a raw key that holds one string (or
    NULL) in every group of the other keys adds no group (``GROUP BY c_custkey, c_name``), so
    the grouping is by the other keys alone and the raw one is taken from each group's first
    row; the other raw keys group by their strings' first entries (found by hashing,
    :func:`~hpc.domains.sql.strings.entry_ids`). Decided on this rank's rows (an exchange
    ships raw strings as their rows' bytes, and the next aggregate decides again). Returns
    the keys as they are (the raw ones stay raw: settled above where something compares
    them) and the grouping where it differs from that of the keys that are not raw, else
    None."""
    raw = [j for j, k in enumerate(keys) if k.raw]
    if not raw:
        return keys, None
    others = [k for k in keys if not k.raw]
    keep: set[int] = set()
    grouped = None
    if others:
        grouped = group_keys(others, len(others[0]))
        keep = {j for j in raw if not differing_rows(grouped[0], grouped[2], keys[j])}
    if len(keep) == len(raw):
        return keys, grouped
    hashed = [Column(strings.entry_ids(keys[j].dictionary, keys[j].values), "int", None,
                     keys[j].valid) for j in raw if j not in keep]
    return keys, group_keys(others + hashed, len(keys[0]))


def differing_rows(ids: np.ndarray, first: np.ndarray, column: Column) -> int:
    """Rows of a raw string column whose string (or NULL) differs from their group's first
    row's ``first[ids[row]]`` (0: the column holds one string in every group)."""
    from hpc.domains.sql.scan_kernels import differs_in_group

    if len(column) == 0:
        return 0
    offsets, data = strings._buffers(strings._plain(column.dictionary.words))
    valid = np.zeros(0, bool) if column.valid is None else column.valid
    return int(differs_in_group(ids, first, column.values, offsets, data, valid,
                                column.valid is not None))


def stack(a: Column, b: Column) -> Column:
    """The rows of ``a`` then those of ``b`` (one type; strings through a merged
    dictionary)."""
    valid = None
    x = xp()
    if a.valid is not None or b.valid is not None:
        valid = x.concatenate([x.ones(len(a), bool) if a.valid is None else a.valid,
                               x.ones(len(b), bool) if b.valid is None else b.valid])
    if a.kind != "string":
        return Column(np.concatenate([a.values, b.values]), a.kind, None, valid)
    if a.dictionary is b.dictionary:
        return Column(np.concatenate([a.values, b.values]), a.kind, a.dictionary, valid)
    a, b = settle(a), settle(b)
    merged = strings.merge([a.dictionary, b.dictionary])
    codes = []
    for c in (a, b):  # (the remapping, from the host's dictionaries, goes to the codes)
        remap = strings.remap(c.dictionary, merged)
        codes.append(x.asarray(remap)[c.values] if len(remap) else x.zeros(len(c), np.int32))
    return Column(x.concatenate(codes).astype(np.int32), "string", merged, valid)


def sort_order(keys: list[tuple[Column, bool, bool]], n: int) -> np.ndarray:
    """Row order for ORDER BY keys ``(column, ascending, nulls_first)`` (stable; NULLs tie
    with each other)."""
    x = xp()
    if not keys:
        return x.arange(n)
    arrays = []
    for col, ascending, nulls_first in keys:
        v = col.values
        if v.dtype.kind == "f":  # by rank: NaN above +inf, as DuckDB orders it
            arrays.append(sort_rank(col, ascending, nulls_first))
            continue
        if v.dtype.kind == "b":
            v = v.astype(np.int8)
        if col.valid is not None:  # the values under NULLs are noise: make them tie
            v = x.where(col.valid, v, v.dtype.type(0))
        if not ascending:
            v = ~v.astype(np.int64)
        if col.valid is not None:
            null = (~col.valid).astype(np.int8)
            arrays.append(-null if nulls_first else null)
        arrays.append(v)
    packed = _packed(arrays, n)
    if packed is not None:
        return stable_argsort(packed)
    return x.lexsort(x.stack(arrays[::-1]))


_TOP_MIN_ROWS = 4096  # fewer rows are sorted whole


def top_candidates(col: Column, ascending: bool, k: int) -> np.ndarray | None:
    """Rows that can be among the first ``k`` of an ORDER BY whose first key is ``col``: every
    row whose value ties with or beats the ``k``-th best (by a selection, no sort) and every
    NULL. A superset of the first ``k`` rows whatever the later keys, in row order; None when
    the column is short, of floats or booleans, or has at most ``k`` values (sort it all).
    Raw strings are ranked by their bytes (:func:`~hpc.domains.sql.scan_kernels.kth_string`)
    with nothing sorted."""
    n = len(col)
    if k <= 0 or n < max(_TOP_MIN_ROWS, 2 * k) or xp() is not np:
        return None
    v = np.asarray(col.values)
    valid = None if col.valid is None else np.asarray(col.valid, bool)
    if col.raw:
        from hpc.domains.sql.scan_kernels import kth_string

        words = strings._plain(col.dictionary.words)
        mask = np.ones(n, bool) if valid is None else valid
        bound = kth_string(v, mask, *strings._buffers(words), k, not ascending)
        if bound < 0:
            return None
        entries = strings.compare(col.dictionary, words[int(bound)].as_py(),
                                  "less_equal" if ascending else "greater_equal")
        keep = entries[v]
    elif v.dtype.kind in "iu":
        from hpc.domains.sql.scan_kernels import kth_value

        if (n if valid is None else int(np.count_nonzero(valid))) <= k:
            return None
        bound = kth_value(v, valid, k, not ascending)
        keep = v <= bound if ascending else v >= bound
    else:
        return None
    if valid is not None:
        keep |= ~valid
    return np.flatnonzero(keep)


def _packed(arrays: list[np.ndarray], n: int) -> np.ndarray | None:
    """One int64 per row ordered as the rows' tuples of ``arrays`` (integer sort keys, the
    most significant first), each key offset by its minimum into the bits its range needs;
    None when they need more than 62 bits."""
    if not n:
        return None
    spans = []
    for a in arrays:
        lo, hi = int(a.min()), int(a.max())
        spans.append((lo, max(hi - lo, 0).bit_length()))
    if sum(bits for _, bits in spans) > 62:
        return None
    out = xp().zeros(n, np.int64)
    for a, (lo, bits) in zip(arrays, spans, strict=True):
        if bits:
            out = (out << bits) | (a.astype(np.int64) - lo)
    return out
