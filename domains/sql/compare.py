"""Comparing a result with a reference frame (DuckDB's, in tests and benchmarks): the same
rows, numbers equal to a relative tolerance, and the order where ORDER BY fixes it."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["same_rows"]


def _normal(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "M":
        return a.astype("datetime64[D]").astype(np.int64).astype(np.float64)
    if a.dtype.kind == "O" and len(a) and hasattr(a[0], "toordinal"):  # datetime.date
        return np.asarray([d.toordinal() - 719163 for d in a], dtype=np.float64)
    if a.dtype.kind in "biuf":
        return a.astype(np.float64)
    return a.astype(str)


def same_rows(ours: Any, ref: Any, ordered: bool, rtol: float = 1e-9) -> str | None:
    """None when the two pandas frames hold the same rows, else what differs.

    ``ordered``: compare row by row (the query's ORDER BY fixes the order); otherwise rows
    are sorted by every column first.
    """
    if list(ours.columns) != list(ref.columns):
        return f"columns {list(ours.columns)} != {list(ref.columns)}"
    if len(ours) != len(ref):
        return f"{len(ours)} rows != {len(ref)}"
    a = [_normal(ours[c].to_numpy()) for c in ours.columns]
    b = [_normal(ref[c].to_numpy()) for c in ref.columns]
    if not ordered and len(a[0]):
        oa = np.lexsort([x.astype(str) if x.dtype.kind == "f" else x for x in a][::-1])
        ob = np.lexsort([x.astype(str) if x.dtype.kind == "f" else x for x in b][::-1])
        a, b = [x[oa] for x in a], [x[ob] for x in b]
    for name, x, y in zip(ours.columns, a, b, strict=True):
        if x.dtype.kind == "f" and y.dtype.kind == "f":
            bad = ~(np.isclose(x, y, rtol=rtol, atol=0) | (np.isnan(x) & np.isnan(y)))
        else:
            bad = x.astype(str) != y.astype(str)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return f"column {name!r} row {i}: {x[i]!r} != {y[i]!r}"
    return None
