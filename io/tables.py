"""Tables in HDF5: named 1-D columns, every rank appending its rows, read back in row blocks.

Layout of a table ``name``: a group with one dataset per column (attribute ``kind``), the column
order in the group's ``columns`` attribute and the row count in ``nrows``. Strings are stored as
``int32`` dictionary codes plus a fixed-length UTF-8 dictionary ``_dictionary/<column>`` (sorted,
the same on every rank; variable-length strings cannot be written in parallel). ``datetime64``
columns are ``int64`` counts of their unit (NaT is the int64 minimum); bools are HDF5 enums.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import h5py
import numpy as np

from hpc import collectives
from hpc.comm import resolve_comm
from hpc.decomposition import chunk

from . import faults
from .arrays import _agree, read_block, write_block
from .errors import CorruptDataError, MissingDataError, StorageError
from .files import Target, as_target

__all__ = ["write_table", "read_table"]

_DICT = "_dictionary"


def _kind(values: np.ndarray) -> str | None:
    k = values.dtype.kind
    if k in "biuf":
        return "bool" if k == "b" else "number"
    if k == "M":
        return "datetime"
    if k in "US":
        return "string"
    if k == "O" and all(isinstance(v, str) for v in values.tolist()):
        return "string"
    return None


def _describe_local(columns: Mapping[str, Any]) -> tuple[list[tuple[str, str, str]], str | None]:
    """[(name, kind, dtype str)], and this rank's error, if any."""
    spec, lengths = [], set()
    for name, col in columns.items():
        arr = np.asarray(col)
        if arr.ndim != 1:
            return spec, f"column {name!r} is {arr.ndim}-D; table columns are 1-D"
        kind = _kind(arr)
        if kind is None:
            return (
                spec,
                f"column {name!r}: dtype {arr.dtype} is not numeric, bool, datetime64 or str",
            )
        lengths.add(arr.shape[0])
        dt = arr.dtype.str if kind in ("number", "bool", "datetime") else "str"
        spec.append((str(name), kind, dt))
    if len(lengths) > 1:
        return spec, f"columns have different lengths {sorted(lengths)}"
    if not spec:
        return spec, "a table needs at least one column"
    return spec, None


def allgather_strings(comm: Any, words: list[str]) -> list[str]:
    """Every rank's strings, on every rank (see :func:`hpc.collectives.allgather_strings`)."""
    return collectives.allgather_strings(words, comm)


def _rows(comm: Any, n: int) -> tuple[int, int, np.ndarray]:
    counts = np.empty(comm.Get_size(), dtype=np.int64)
    comm.Allgather(np.array([n], dtype=np.int64), counts)
    offset = int(counts[: comm.Get_rank()].sum())
    return offset, int(counts.sum()), counts


def _gather_rows(comm: Any, values: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """Rank 0 receives every rank's rows in rank order (buffer-based Gatherv of the raw bytes,
    so dtypes MPI has no datatype for, such as ``float16``, arrive bit for bit)."""
    values = np.ascontiguousarray(values)
    nbytes = [int(c) * values.dtype.itemsize for c in counts]
    send = values.view(np.uint8)
    if comm.Get_rank() == 0:
        full = np.empty(int(counts.sum()), dtype=values.dtype)
        comm.Gatherv(send, (full.view(np.uint8), nbytes), root=0)
        return full
    comm.Gatherv(send, None, root=0)
    return None


def write_table(path_or_group: Any, name: str, columns: Mapping[str, Any], comm: Any = None) -> int:
    """Collective. Write a table: every rank contributes its rows, in rank order.

    Parameters
    ----------
    path_or_group : str, path or h5py.Group
        A file (appended to, created if missing) or an open group (from :func:`open_file`).
    name : str
        The table's group; an existing one is replaced.
    columns : mapping of str to 1-D array
        Equal-length columns: numeric, bool, ``datetime64`` or strings. Every rank passes the
        same names in the same order with the same kinds (a rank may pass zero rows).
    comm : MPI.Comm, optional
        Default :func:`hpc.comm.world`.

    Returns
    -------
    int
        The table's total row count.

    Raises
    ------
    StorageError
        On every rank and before the file is touched, if any rank's columns are malformed or
        disagree with rank 0's.
    """
    comm = resolve_comm(comm)
    spec, error = _describe_local(columns)
    if comm.Get_size() > 1:
        reference = comm.bcast(spec, root=0)
        if error is None and _comparable(spec) != _comparable(reference):
            error = (
                f"rank {comm.Get_rank()}: columns {_comparable(spec)} differ from rank 0's "
                f"{_comparable(reference)}"
            )
    error = _agree(comm, error)
    where = path_or_group.file.filename if isinstance(path_or_group, h5py.Group) else path_or_group
    if error:
        raise StorageError(error, path=str(where), dataset=name, all_ranks=True)
    n = len(np.asarray(next(iter(columns.values()))))
    offset, total, counts = _rows(comm, n)
    prepared = []  # (name, kind, stored values, dictionary or None, unit)
    for col_name, kind, _ in spec:
        values = np.asarray(columns[col_name])
        dictionary, unit = None, None
        if kind == "string":
            local_words = sorted(set(values.astype(str).tolist()))
            dictionary = sorted(set(allgather_strings(comm, local_words)))
            lookup = np.array(dictionary, dtype=str) if dictionary else np.array([], dtype=str)
            values = np.searchsorted(lookup, values.astype(str)).astype(np.int32)
        elif kind == "datetime":
            unit = np.datetime_data(values.dtype)[0]
            values = values.view(np.int64)
        prepared.append((col_name, kind, np.ascontiguousarray(values), dictionary, unit))

    nbytes = total * sum(values.itemsize for _, _, values, _, _ in prepared)
    with as_target(path_or_group, "a", comm, reserve=nbytes) as target:
        faults.inject("write", target.path, target.rank)
        parallel = target.kind == "mpio"
        group = None
        if target.does_io:
            if name in target.group:
                del target.group[name]
            group = target.group.create_group(name)
            group.attrs["hpc_table"] = 1
            group.attrs["nrows"] = total
            group.attrs["columns"] = json.dumps([c[0] for c in prepared])
            dicts = group.create_group(_DICT)
        for col_name, kind, values, dictionary, unit in prepared:
            if target.kind == "gather":
                full = _gather_rows(comm, values, counts)
                if group is not None:
                    dset = group.create_dataset(col_name, data=full)
            else:
                dset = group.create_dataset(col_name, shape=(total,), dtype=values.dtype)
                write_block(dset, values, (offset,), parallel)
            if group is not None:
                dset.attrs["kind"] = kind
                if unit:
                    dset.attrs["unit"] = unit
            if dictionary is not None:
                _write_dictionary(
                    dicts if group is not None else None, col_name, dictionary, target, parallel
                )
    return total


def _comparable(spec: Sequence[tuple[str, str, str]]) -> list[tuple[str, str]]:
    return [(n, k) for n, k, _ in spec]


def _write_dictionary(
    dicts: Any, col_name: str, words: list[str], target: Target, parallel: bool
) -> None:
    encoded = [w.encode("utf-8") for w in words]
    width = max([len(b) for b in encoded] + [1])
    dtype = h5py.string_dtype("utf-8", length=width)
    if dicts is None:
        return
    dset = dicts.create_dataset(col_name, shape=(len(encoded),), dtype=dtype)
    data = np.array(encoded, dtype=f"S{width}") if encoded else np.empty(0, f"S{width}")
    mine = data if target.rank == 0 or target.kind != "mpio" else data[:0]
    write_block(dset, mine, (0,), parallel, same_type=True)


def read_table(
    path_or_group: Any, name: str, comm: Any = None, columns: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Collective. This rank's contiguous block of rows of table ``name``.

    Rows are split over the ranks of ``comm`` in balanced contiguous blocks (rank 0 first), so
    concatenating the results in rank order gives the whole table. Strings come back as NumPy
    ``str`` arrays, datetimes in their stored unit.

    Raises
    ------
    StorageError
        If the table or a requested column does not exist.
    CorruptDataError
        If HDF5 cannot read the data.
    """
    comm = resolve_comm(comm)
    rank, size = comm.Get_rank(), comm.Get_size()
    with as_target(path_or_group, "r", comm) as target:
        faults.inject("read", target.path, target.rank)
        meta, error = None, None
        if target.does_io:
            meta, error = _table_meta(target.group, name, columns)
        if target.kind == "gather" and size > 1:
            meta = comm.bcast(meta, root=0)
        error = _agree(comm, error)
        if error:
            raise MissingDataError(error, path=target.path, dataset=name, all_ranks=True)
        total, names, kinds = meta
        start, stop = chunk(total, size, rank)
        out: dict[str, np.ndarray] = {}
        failure = None
        for col in names:
            kind, unit, dictionary = kinds[col]
            try:
                if target.kind == "gather":
                    values = _scatter_rows(comm, target, name, col, total)
                else:
                    dset = target.group[name][col]
                    values = read_block(
                        dset, (start,), (stop - start,), dset.dtype, target.kind == "mpio"
                    )
            except OSError as exc:
                failure = f"column {col!r}: HDF5 could not read the data: {exc}"
                break
            if kind == "string":
                words = np.array(dictionary, dtype=str) if dictionary else np.array([], str)
                values = words[values] if values.size else np.array([], dtype=str)
            elif kind == "datetime":
                values = values.view(f"datetime64[{unit}]")
            elif kind == "bool":
                values = values.astype(bool)
            out[col] = values
        failure = _agree(comm, failure)
        if failure:
            raise CorruptDataError(failure, path=target.path, dataset=name, all_ranks=True)
    return out


def _table_meta(group: Any, name: str, columns: Sequence[str] | None):
    if name not in group or "hpc_table" not in group[name].attrs:
        return None, "no such table"
    table = group[name]
    stored = json.loads(table.attrs["columns"])
    names = list(columns) if columns is not None else stored
    unknown = [c for c in names if c not in stored]
    if unknown:
        return None, f"no column(s) {unknown}; the table has {stored}"
    kinds = {}
    for col in names:
        dset = table[col]
        kind = dset.attrs["kind"]
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        unit = dset.attrs.get("unit")
        unit = unit.decode() if isinstance(unit, bytes) else unit
        dictionary = None
        if kind == "string":
            raw = table[_DICT][col][...]
            dictionary = [w.decode("utf-8") if isinstance(w, bytes) else str(w) for w in raw]
        kinds[col] = (kind, unit, dictionary)
    return (int(table.attrs["nrows"]), names, kinds), None


def _scatter_rows(comm: Any, target: Target, name: str, col: str, total: int) -> np.ndarray:
    size = comm.Get_size()
    counts = np.array([chunk(total, size, r)[1] - chunk(total, size, r)[0] for r in range(size)])
    if target.rank == 0:
        full = target.group[name][col][...]
        dtype_str = full.dtype.str
    else:
        full, dtype_str = None, None
    dtype = np.dtype(comm.bcast(dtype_str, root=0))
    mine = np.empty(int(counts[comm.Get_rank()]), dtype=dtype)
    nbytes = [int(c) * dtype.itemsize for c in counts]  # raw bytes: any dtype travels
    send = None if full is None else (np.ascontiguousarray(full).view(np.uint8), nbytes)
    comm.Scatterv(send, mine.view(np.uint8), root=0)
    return mine
