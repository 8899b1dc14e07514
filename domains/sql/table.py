"""Columnar tables: named columns of NumPy arrays, strings dictionary-encoded.

Types: integers and floats as themselves; decimals as float64 (exact to about 15 significant
digits, what TPC-H needs; say so to users); dates as int32 days since 1970-01-01 (``kind`` =
``"date"``); strings as int32 codes into a *sorted* dictionary, so comparing codes compares
strings; nulls as a boolean validity mask (``valid``, None when there are none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import strings

__all__ = ["Column", "Table", "read_parquet", "merge_dictionaries"]


@dataclass
class Column:
    """One column: ``values``, its ``kind`` (``"int"``, ``"float"``, ``"bool"``, ``"date"``,
    ``"string"``), the sorted ``dictionary`` of a string column and the ``valid`` mask."""

    values: np.ndarray
    kind: str
    dictionary: np.ndarray | None = None
    valid: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def gather(self, index: np.ndarray) -> Column:
        """Rows ``index`` (all valid row numbers: a filter's survivors)."""
        valid = None if self.valid is None else self.valid.take(index)
        return Column(self.values.take(index), self.kind, self.dictionary, valid)

    def take(self, index: np.ndarray) -> Column:
        """Rows ``index`` (``-1``: a null row, as an outer join produces)."""
        if len(self) and (len(index) == 0 or int(index.min()) >= 0):
            return self.gather(index)
        missing = index < 0
        values = self.values[np.where(missing, 0, index)] if len(self) else self.values[:0]
        if len(self) == 0 and len(index):
            values = np.zeros(len(index), dtype=self.values.dtype)
        valid = None if self.valid is None else self.valid[np.where(missing, 0, index)]
        if missing.any():
            valid = ~missing if valid is None else valid & ~missing
        return Column(values, self.kind, self.dictionary, valid)


class Table:
    """Named, equal-length columns.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = Table.from_arrow(pa.table({"k": [3, 1], "s": ["b", "a"]}))
    >>> t.num_rows, t["s"].dictionary.tolist(), t["s"].values.tolist()
    (2, ['a', 'b'], [1, 0])
    """

    def __init__(self, columns: dict[str, Column]) -> None:
        lengths = {name: len(c) for name, c in columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"columns have different lengths: {lengths}")
        self.columns = dict(columns)

    def __getitem__(self, name: str) -> Column:
        try:
            return self.columns[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; columns: {list(self.columns)}") from None

    @property
    def num_rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def take(self, index: np.ndarray) -> Table:
        return Table({n: c.take(index) for n, c in self.columns.items()})

    # -- interop --------------------------------------------------------------------------
    @classmethod
    def from_arrow(cls, table: Any) -> Table:
        """From a ``pyarrow.Table`` (chunks combined; decimals to float64)."""
        return cls(
            {name: _from_arrow_column(name, table.column(name)) for name in table.column_names}
        )

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` (strings decoded, dates as date32, nulls restored)."""
        import pyarrow as pa

        arrays = {}
        for name, c in self.columns.items():
            mask = None if c.valid is None else ~c.valid
            if c.kind == "string":
                arrays[name] = pa.array(
                    c.dictionary[c.values] if len(c) else [], type=pa.string(), mask=mask
                )
            elif c.kind == "date":
                arrays[name] = pa.array(c.values.astype(np.int32), type=pa.int32(), mask=mask).cast(
                    pa.date32()
                )
            else:
                arrays[name] = pa.array(c.values, mask=mask)
        return pa.table(arrays)

    @classmethod
    def from_pandas(cls, frame: Any) -> Table:
        import pyarrow as pa

        return cls.from_arrow(pa.Table.from_pandas(frame, preserve_index=False))

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()


def _from_arrow_column(name: str, chunked: Any) -> Column:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(chunked.type) and hasattr(chunked, "unify_dictionaries"):
        chunked = chunked.unify_dictionaries()  # one dictionary for all chunks
    arr = chunked.combine_chunks() if hasattr(chunked, "combine_chunks") else chunked
    t = arr.type
    valid = None
    if arr.null_count:
        valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_dictionary(t):  # Parquet's own dictionary: no re-encoding of the strings
        entries = arr.dictionary.cast(pa.string())
        order = strings.sort_order(entries)
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        indices = _numpy(arr.indices, 0)
        codes = rank[indices] if len(rank) else indices.astype(np.int32)
        column = Column(codes.astype(np.int32, copy=False), "string",
                        strings.to_numpy(entries.take(order)), valid)
        return _dedupe(column)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        words = arr.cast(pa.string()).fill_null("")
        encoded = pc.dictionary_encode(words)
        dictionary = np.asarray(encoded.dictionary.to_numpy(zero_copy_only=False), dtype=object)
        order = strings.sort_order(encoded.dictionary)
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        codes = rank[encoded.indices.to_numpy(zero_copy_only=False)]
        return Column(codes.astype(np.int32), "string", dictionary[order], valid)
    if pa.types.is_date32(t):
        days = _numpy(arr.cast(pa.int32()), 0)
        return Column(days.astype(np.int32), "date", None, valid)
    if pa.types.is_decimal(t):
        return Column(_decimal_to_float(arr), "float", None, valid)
    if pa.types.is_boolean(t):
        return Column(
            np.asarray(_numpy(arr, False), bool),
            "bool",
            None,
            valid,
        )
    if pa.types.is_integer(t):
        return Column(_numpy(arr, 0), "int", None, valid)
    if pa.types.is_floating(t):
        return Column(_numpy(arr, 0), "float", None, valid)
    raise TypeError(f"column {name!r}: unsupported Arrow type {t}")


def _numpy(arr: Any, fill: Any) -> np.ndarray:
    """An Arrow array as NumPy (nulls replaced by ``fill``; no copy where Arrow allows)."""
    if arr.null_count:
        arr = arr.fill_null(fill)
    return arr.to_numpy(zero_copy_only=False)


def _decimal_to_float(arr: Any) -> np.ndarray:
    """decimal128 to float64: the unscaled integers read straight from the buffer when they
    fit in 64 bits (the common case, much faster than a cast), divided by 10**scale."""
    import pyarrow as pa

    if pa.types.is_decimal128(arr.type) and len(arr):
        words = np.frombuffer(arr.buffers()[1], dtype=np.int64)
        words = words[2 * arr.offset : 2 * (arr.offset + len(arr))]
        lo, hi = words[0::2], words[1::2]
        if np.array_equal(hi, lo >> 63):  # the high word is only the sign
            out = lo / float(10**arr.type.scale)
            return np.where(arr.is_valid().to_numpy(zero_copy_only=False), out, 0.0) \
                if arr.null_count else out
    return _numpy(arr.cast(pa.float64()), 0.0)


def _is_text(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _dedupe(c: Column) -> Column:
    """One code per distinct string (a dictionary may repeat a value)."""
    import pyarrow.compute as pc

    words = strings.arrow(c.dictionary)
    if len(words) < 2 or not pc.any(pc.equal(words[1:], words[:-1])).as_py():
        return c
    unique = strings.merge([c.dictionary])
    return Column(strings.remap(c.dictionary, unique)[c.values], "string", unique, c.valid)


def read_parquet(path: str, columns: list[str] | None = None, comm: Any = None) -> Table:
    """Collective. This rank's part of a Parquet file: whole row groups when there are at
    least as many as ranks (contiguous runs, balanced by rows), else a contiguous row range.
    String dictionaries are merged over the ranks (buffer-based), so codes mean the same
    string everywhere and can be shuffled."""
    import pyarrow.parquet as pq

    from hpc.comm import resolve_comm

    comm = resolve_comm(comm)
    size, rank = comm.Get_size(), comm.Get_rank()
    try:
        schema = pq.read_schema(path)
        strings = [f.name for f in schema if _is_text(f.type)]
        pf = pq.ParquetFile(path, read_dictionary=strings)
    except Exception as exc:  # noqa: BLE001 - name the file whatever pyarrow raised
        raise OSError(f"{path}: not a readable Parquet file ({exc})") from exc
    if columns is not None:
        missing = [c for c in columns if c not in pf.schema_arrow.names]
        if missing:
            raise KeyError(f"{path}: no column(s) {missing}; columns: {pf.schema_arrow.names}")
    groups = pf.metadata.num_row_groups
    if groups >= size:
        rows = np.array([pf.metadata.row_group(g).num_rows for g in range(groups)])
        cut = np.searchsorted(np.cumsum(rows), np.arange(1, size) * rows.sum() / size)
        bounds = np.concatenate([[0], np.minimum(cut + 1, groups), [groups]])
        bounds = np.maximum.accumulate(bounds)
        mine = list(range(int(bounds[rank]), int(bounds[rank + 1])))
        arrow = pf.read_row_groups(mine, columns=columns) if mine else pf.schema_arrow.empty_table()
        if columns is not None and not mine:
            arrow = arrow.select(columns)
    else:
        n = pf.metadata.num_rows
        lo, hi = rank * n // size, (rank + 1) * n // size
        arrow = pf.read(columns=columns).slice(lo, hi - lo)
    return merge_dictionaries(Table.from_arrow(arrow), comm)


def merge_dictionaries(table: Table, comm: Any) -> Table:
    """Collective. Give every string column one sorted dictionary over all ranks (codes
    remapped in place), so equal codes mean equal strings everywhere."""
    from hpc.io.tables import allgather_strings

    if comm.Get_size() == 1:
        return table
    for c in table.columns.values():
        if c.kind == "string":
            everyone = np.asarray(allgather_strings(comm, c.dictionary.tolist()), dtype=object)
            merged = strings.merge([everyone])
            remap = strings.remap(c.dictionary, merged)
            c.values = remap[c.values] if len(c) else c.values
            c.dictionary = merged
    return table
