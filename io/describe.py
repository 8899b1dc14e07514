"""What an hpc.io file holds: its tables (columns, kinds, dtypes, row counts) and its arrays
(shapes, dtypes), read from the layout :func:`~hpc.io.write_table` and
:func:`~hpc.io.write_array` write, without reading the data.

Examples
--------
>>> describe("tpch.h5")["tables"]["nation"]["rows"]          # doctest: +SKIP
25
>>> describe("fields.h5")["arrays"]["fields/u"]               # doctest: +SKIP
{'shape': (12, 10, 8), 'dtype': '<f8'}
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from .errors import CorruptDataError, from_os_error

__all__ = ["describe"]

_DICT = "_dictionary"  # as in .tables


def describe(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Local, read-only. The tables and arrays of an hpc.io HDF5 file.

    Returns
    -------
    dict
        ``{"tables": {name: table}, "arrays": {name: array}}``, names being paths in the file
        (``"fields/u"``), sorted. A table is ``{"rows": int, "columns": {column: {"kind",
        "dtype"}}}`` with the columns in their stored order: ``kind`` is "number", "bool",
        "datetime" or "string"; ``dtype`` the NumPy dtype :func:`~hpc.io.read_table` returns,
        as its string (``"<f8"``, ``"|b1"``, ``"<M8[D]"``), or "str" for strings, which also
        give ``"entries"``, the size of their dictionary. An array (any other dataset) is
        ``{"shape": tuple, "dtype": str}``.

    Raises
    ------
    StorageError
        When the file cannot be opened as HDF5 (:class:`MissingDataError` when it does not
        exist).
    CorruptDataError
        When a table lacks a part its layout declares.
    """
    import h5py

    tables: dict[str, Any] = {}
    arrays: dict[str, Any] = {}
    try:
        with h5py.File(path, "r") as f:

            def visit(group: Any) -> None:
                for name in sorted(group):
                    item = group.get(name)
                    if isinstance(item, h5py.Group):
                        if "hpc_table" in item.attrs:
                            tables[item.name.lstrip("/")] = _table(item, path)
                        else:
                            visit(item)
                    elif isinstance(item, h5py.Dataset):
                        arrays[item.name.lstrip("/")] = {
                            "shape": tuple(int(n) for n in item.shape),
                            "dtype": item.dtype.str,
                        }

            visit(f)
    except CorruptDataError:
        raise
    except OSError as exc:
        raise from_os_error(exc, "describing the file", path) from None
    return {"tables": tables, "arrays": arrays}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _table(group: Any, path: Any) -> dict[str, Any]:
    name = group.name.lstrip("/")
    try:
        rows = int(group.attrs["nrows"])
        names = json.loads(group.attrs["columns"])
        columns = {}
        for col in names:
            dset = group[col]
            kind = _text(dset.attrs["kind"])
            if kind == "string":
                columns[col] = {"kind": kind, "dtype": "str",
                                "entries": int(group[_DICT][col].shape[0])}
            elif kind == "datetime":
                unit = _text(dset.attrs["unit"])
                columns[col] = {"kind": kind, "dtype": np.dtype(f"datetime64[{unit}]").str}
            elif kind == "bool":
                columns[col] = {"kind": kind, "dtype": np.dtype(bool).str}
            else:
                columns[col] = {"kind": kind, "dtype": dset.dtype.str}
    except (KeyError, ValueError, TypeError) as exc:
        raise CorruptDataError(f"table {name!r} is incomplete or malformed: {exc}",
                               path=str(path), dataset=name) from None
    return {"rows": rows, "columns": columns}
