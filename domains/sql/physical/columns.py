"""Row-set helpers the operators share: grouping rows by key columns, the row order of
ORDER BY keys, and the rows of two columns one after the other."""

from __future__ import annotations

import numpy as np
from hpc.domains.sql import ops, strings
from hpc.domains.sql.table import Column, settle

from .aggregates import sort_rank
from .device import backend, xp

__all__ = ["carried_keys", "differing_rows", "group_keys", "sort_order", "stack"]


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
    """GROUP BY ``keys`` with their raw string columns (carried, see
    :mod:`..optimizer.raw_strings`) settled, except those the other keys determine: grouped
    by the settled keys, a raw key that holds one string (or NULL) in every group adds no
    group and stays raw (``GROUP BY c_custkey, c_name``), so the caller groups by the
    settled keys alone and takes the raw ones from each group's first row. Decided on this
    rank's rows: an exchange settles whatever stays raw before it ships rows. Also returns
    the grouping by the settled keys where it is the answer (every raw key kept), else
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
    out = [settle(k) if j in raw and j not in keep else k for j, k in enumerate(keys)]
    return out, grouped if len(keep) == len(raw) else None


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
    packed = _packed(arrays + [x.arange(n, dtype=np.int64)], n)
    if packed is not None:  # the row number last: keys unique, any sort is the stable one
        return np.argsort(packed)
    packed = _packed(arrays, n)
    if packed is not None:
        return np.argsort(packed, kind="stable")
    return x.lexsort(x.stack(arrays[::-1]))


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
