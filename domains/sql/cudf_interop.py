"""Tables to and from cuDF data frames on the GPU, without copying column data where cuDF
allows (numbers, booleans and category codes are shared device memory; dates become int32
day numbers, a device-side conversion; string categories travel through the host, being one
small dictionary). cuDF is optional: nothing else in the engine imports it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import strings
from .table import Column, Table

__all__ = ["from_cudf", "to_cudf"]


def _cudf() -> Any:
    try:
        import cudf
    except ImportError as exc:
        raise ImportError("cuDF interop needs the cudf package (RAPIDS); the engine itself "
                          "does not") from exc
    return cudf


def _device() -> Any:
    """The device array module (CuPy), through the GPU backend."""
    from hpc.backend import get_backend

    return get_backend("gpu").xp


def _validity(series: Any) -> Any:
    return series.notna().to_cupy() if series.null_count else None


def from_cudf(frame: Any) -> Table:
    """A :class:`Table` of device columns from a ``cudf.DataFrame``.

    Integer, float and boolean columns share cuDF's device buffers where cuDF hands them out
    without a copy (``to_cupy(copy=False)``; a column with nulls is filled first, a copy);
    string and categorical columns keep their codes on the device and their categories, as a
    sorted dictionary, on the host; datetime columns become int32 days.
    """
    _cudf()
    xp = _device()
    cols = {}
    for name in frame.columns:
        s = frame[name]
        valid = _validity(s)
        kind = str(s.dtype)
        if kind in ("object", "string", "str") or kind == "category":
            cat = s if kind == "category" else s.astype("category")
            entries = cat.cat.categories.to_arrow()
            order = strings.sort_order(entries)
            rank = np.empty(len(order), dtype=np.int32)
            rank[order] = np.arange(len(order), dtype=np.int32)
            codes = cat.cat.codes.to_cupy(na_value=0, copy=False)
            cols[name] = Column(xp.asarray(rank)[codes] if len(rank) else codes.astype(
                np.int32), "string", strings.to_numpy(entries.take(order)), valid)
        elif kind.startswith("datetime64"):
            seconds = s.astype("datetime64[s]").astype("int64").to_cupy(na_value=0)
            cols[name] = Column((seconds // 86400).astype(np.int32), "date", None, valid)
        elif kind == "bool":
            cols[name] = Column(s.to_cupy(na_value=False, copy=False), "bool", None, valid)
        elif np.dtype(kind).kind in "iuf":
            fill = 0.0 if np.dtype(kind).kind == "f" else 0
            values = s.to_cupy(copy=False) if valid is None else s.to_cupy(na_value=fill)
            cols[name] = Column(values, "float" if np.dtype(kind).kind == "f" else "int",
                                None, valid)
        else:
            raise TypeError(f"column {name!r}: unsupported cuDF dtype {kind}")
    return Table(cols)


def to_cudf(table: Table) -> Any:
    """A ``cudf.DataFrame`` of the table's columns (device columns are shared, host columns
    copied to the device); strings become categoricals over the sorted dictionary, dates
    ``datetime64[s]``, nulls restored from the validity masks."""
    cudf = _cudf()
    xp = _device()
    out = {}
    for name, c in table.columns.items():
        values = xp.asarray(c.values)
        if c.kind == "string":
            s = cudf.Series.from_categorical(_empty_categorical(c.dictionary),
                                             codes=values.astype(np.int32))
        elif c.kind == "date":
            s = cudf.Series(values.astype(np.int64) * 86400).astype("datetime64[s]")
        else:
            s = cudf.Series(values)
        if c.valid is not None:
            s = s.mask(~xp.asarray(c.valid))  # null where the mask is false
        out[name] = s
    return cudf.DataFrame(out)


def _empty_categorical(dictionary: np.ndarray) -> Any:
    import pandas as pd

    return pd.Categorical.from_codes([], categories=pd.Index(list(dictionary), dtype=object))
