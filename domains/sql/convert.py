"""Parquet tables to one HDF5 file of hpc.io tables (and so to parallel storage), every rank
writing its own rows. The file appears only when complete (:func:`hpc.io.atomic_output`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from hpc.collectives import allgather_object
from hpc.comm import resolve_comm
from hpc.errors import on_all_ranks

from .catalog import Catalog
from .errors import SQLError

__all__ = ["convert"]


def _numpy_column(table: str, name: str, c: Any) -> np.ndarray:
    if c.valid is not None and not c.valid.all():
        raise SQLError(f"table {table!r} column {name!r}: has nulls, which hpc.io tables "
                       "do not store")
    if c.kind == "string":
        return c.dictionary.astype(str)[c.values] if len(c) else np.zeros(0, dtype="U1")
    if c.kind == "date":
        return c.values.astype(np.int64).astype("datetime64[D]")
    return c.values


def convert(source: str | os.PathLike[str], out: str | os.PathLike[str],
            comm: Any = None) -> Path:
    """Collective. Copy every Parquet table of directory ``source`` into HDF5 file ``out``
    (one hpc.io table per Parquet table: strings, dates as ``datetime64[D]``, numbers).

    Raises
    ------
    SQLError
        If ``source`` holds no Parquet tables, or a column has nulls; if ``out`` is a
        directory or its directory does not exist (nothing is written).
    """
    from hpc.io import atomic_output, write_table

    comm = resolve_comm(comm)
    catalog = Catalog.from_directory(source)
    out = Path(out)
    if out.is_dir():  # checked before anything is written: every rank sees the same
        raise SQLError(f"{out}: is a directory, not an HDF5 file to write")
    if not out.parent.is_dir():
        raise SQLError(f"{out}: no such directory {str(out.parent)!r} to write into")
    with atomic_output(out, comm) as tmp:
        for name in catalog.tables:
            table = catalog.load(name, catalog.columns(name), comm)
            columns, error = None, None
            try:
                columns = {c: _numpy_column(name, c, col) for c, col in table.columns.items()}
            except SQLError as exc:  # this rank's rows only: agreed before writing
                error = str(exc)
            errors = [e for e in allgather_object(error, comm) if e]
            if errors:
                raise on_all_ranks(SQLError(errors[0]))
            write_table(str(tmp), name, columns, comm=comm)
    return out
