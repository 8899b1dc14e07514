"""Where tables come from: a directory of Parquet files (``<table>.parquet`` or
``<table>/*.parquet``), an HDF5 file of hpc.io tables, or tables held in memory (each rank its
own rows). The catalog gives sqlglot the schema and each rank its part of a table, and
watches the files: its :meth:`Catalog.version` changes when they do (plans are cached by it)."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from hpc.collectives import allreduce
from hpc.comm import resolve_comm

from . import strings
from .errors import SQLError
from .logical.types import SQLType
from .statistics import Summary, memory_ranges, parquet_range, parquet_value_bytes
from .table import Column, Table, merge_dictionaries, read_parquet

__all__ = ["Catalog"]

_SQL_TYPES = {"int": "BIGINT", "float": "DOUBLE", "date": "DATE", "string": "VARCHAR",
              "bool": "BOOLEAN"}


def _hdf5_kind(column: dict[str, Any]) -> str:
    """The SQL kind of an hpc.io table column (as :func:`hpc.io.describe` gives it)."""
    named = {"string": "string", "datetime": "date", "bool": "bool"}.get(column["kind"])
    return named or ("float" if np.dtype(column["dtype"]).kind == "f" else "int")


def _sql_type(t: Any) -> SQLType:
    """The logical type of an Arrow column type (as DuckDB reads the Parquet file)."""
    import pyarrow as pa

    from .logical import types as T

    if pa.types.is_decimal(t):
        return T.decimal(t.precision, t.scale)
    if pa.types.is_integer(t):
        return {8: T.TINYINT, 16: T.SMALLINT, 32: T.INTEGER}.get(t.bit_width, T.BIGINT)
    named = {"date": T.DATE, "float": T.DOUBLE, "bool": T.BOOLEAN, "string": T.VARCHAR}
    return named[_arrow_kind(t)]


def _kind_type(kind: str) -> SQLType:
    from .logical import types as T

    return {"int": T.BIGINT, "float": T.DOUBLE, "date": T.DATE, "string": T.VARCHAR,
            "bool": T.BOOLEAN}[kind]


def _arrow_kind(t: Any) -> str:
    import pyarrow as pa

    if pa.types.is_date(t):
        return "date"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float"
    if pa.types.is_boolean(t):
        return "bool"
    return "string"


class Catalog:
    """Named tables for :func:`hpc.domains.sql.query`.

    Examples
    --------
    >>> cat = Catalog.from_directory("tpch/")            # doctest: +SKIP
    >>> cat.register("t", Table.from_pandas(frame))       # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._parquet: dict[str, list[Path]] = {}
        self._hdf5: dict[str, Path] = {}
        self._memory: dict[str, Table] = {}
        self._kinds: dict[str, dict[str, str]] = {}
        self._rows: dict[str, int] = {}
        self._types: dict[str, dict[str, SQLType]] = {}  # where the kinds say too little
        self._bounds: dict[tuple[str, ...], Any] = {}  # distinct_bound's, value_range's, ...
        # an in-memory table's column ranges over all ranks (read when registered, so that
        # every rank's optimizer sees the same figures)
        self._ranges: dict[str, dict[str, tuple[float, float]]] = {}
        # what :meth:`version` watches: a Parquet table's folder (None for one file) and the
        # files' stamps when their metadata was read; an HDF5 file's stamp
        self._folders: dict[str, Path | None] = {}
        self._stamps: dict[Path, tuple[Any, ...] | None] = {}
        self._version = 0
        self._types_memo: dict[str, dict[str, SQLType]] | None = None

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Catalog:
        """Every ``<name>.parquet`` file, and every ``<name>/`` folder of Parquet parts."""
        root = Path(path)
        if not root.is_dir():
            raise SQLError(f"{root}: no such directory of Parquet tables")
        cat = cls()
        for entry in sorted(root.iterdir()):
            if entry.suffix == ".parquet" and entry.is_file():
                cat._read_parquet_table(entry.stem, entry, [entry])
            elif entry.is_dir() and sorted(entry.glob("*.parquet")):
                cat._read_parquet_table(entry.name, entry, sorted(entry.glob("*.parquet")))
        if not cat._kinds:
            raise SQLError(f"{root}: no Parquet tables (<name>.parquet or <name>/*.parquet)")
        return cat

    def _read_parquet_table(self, name: str, entry: Path, files: list[Path]) -> None:
        """Table ``name`` from its Parquet ``files`` (``entry``: the file, or their folder):
        the schema and row count from the footers, the files' stamps as they were read."""
        import pyarrow.parquet as pq

        stamps = {f: _stamp(f) for f in files}
        try:
            schema = pq.read_schema(files[0])
            rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        except (OSError, ValueError) as exc:  # Arrow's errors: empty, truncated, not Parquet
            raise SQLError(f"{entry}: not a readable Parquet file ({exc})") from None
        self._parquet[name] = files
        self._kinds[name] = {f.name: _arrow_kind(f.type) for f in schema}
        self._types[name] = {f.name: _sql_type(f.type) for f in schema}
        self._rows[name] = rows
        self._folders[name] = entry if entry.is_dir() else None
        self._stamps.update(stamps)
        if entry.is_dir():
            self._stamps[entry] = _stamp(entry)  # parts added or removed

    @classmethod
    def from_hdf5(cls, path: str | os.PathLike[str]) -> Catalog:
        """Every hpc.io table (see :func:`hpc.io.write_table`) at the top of an HDF5 file."""
        cat = cls()
        cat._read_hdf5(Path(path))
        if not cat._kinds:
            raise SQLError(f"{path}: no hpc.io tables in this HDF5 file")
        return cat

    def _read_hdf5(self, path: Path) -> None:
        """Every table at the top of the HDF5 file ``path``, and the file's stamp."""
        from hpc.io import describe

        stamp = _stamp(path)
        try:
            tables = describe(path)["tables"]
        except OSError as exc:
            raise SQLError(f"{path}: not a readable HDF5 file ({exc})") from exc
        for name, table in tables.items():
            if "/" in name or name in self._memory:  # in a group; or hidden by a registered
                continue  # table of that name
            self._hdf5[name] = path
            self._kinds[name] = {col: _hdf5_kind(c) for col, c in table["columns"].items()}
            self._rows[name] = table["rows"]
        self._stamps[path] = stamp

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Catalog:
        """A directory of Parquet files, or an HDF5 file."""
        if not Path(path).exists():
            raise SQLError(f"{path}: no such directory of Parquet tables or HDF5 file")
        return cls.from_directory(path) if Path(path).is_dir() else cls.from_hdf5(path)

    def register(self, name: str, table: Table, comm: Any = None) -> None:
        """Collective. An in-memory table: each rank passes its own rows (same columns);
        string dictionaries are merged over the ranks here."""
        comm = resolve_comm(comm)
        merge_dictionaries(table, comm)
        self._memory[name] = table.materialised()
        self._ranges[name] = memory_ranges(self._memory[name].columns, comm)
        self._kinds[name] = {n: c.kind for n, c in table.columns.items()}
        self._types.pop(name, None)
        self._bounds = {k: v for k, v in self._bounds.items() if k[0] != name}
        self._rows[name] = int(allreduce(table.num_rows, "sum", comm))
        self._parquet.pop(name, None)  # a file's table of that name is hidden from now on
        self._hdf5.pop(name, None)
        self._folders.pop(name, None)
        self._changed()

    def in_memory(self, backend: Any = None, comm: Any = None) -> Catalog:
        """Collective. A catalog of the same tables read once and held in memory: each rank
        its rows, on ``backend``'s device (default ``HPC_BACKEND``; GPU memory on the GPU
        backend), so queries skip the Parquet or HDF5 decoding."""
        from hpc.backend import get_backend

        from .ops import table_on

        comm = resolve_comm(comm)
        backend = get_backend(backend)
        out = Catalog()
        for name in self.tables:
            table = self.load(name, self.columns(name), comm)  # dictionaries already merged
            out._memory[name] = table_on(backend, table.materialised())
            out._ranges[name] = memory_ranges(out._memory[name].columns, comm)
            out._kinds[name] = dict(self._kinds[name])
            out._rows[name] = self._rows[name]
            if name in self._types:
                out._types[name] = dict(self._types[name])
        return out

    # -- versions ---------------------------------------------------------------------------
    def version(self) -> int:
        """A number that changes whenever a query's plan may: a table was registered, or a
        Parquet or HDF5 file was rewritten, or a part added to or removed from a table's
        folder (that table's schema, row count and statistics are then read again; a table
        whose files are gone leaves the catalog). Plans are cached by it
        (:func:`hpc.domains.sql.pipeline.logical_plan`). Costs a ``stat`` per file."""
        if any(_stamp(p) != s for p, s in self._stamps.items()):
            self._reread()
        return self._version

    def _reread(self) -> None:
        """Read the metadata of every table whose files changed again. A table whose files
        cannot be read now (being written) keeps what was read before and is tried again at
        the next :meth:`version`."""
        stale = {p for p, s in self._stamps.items() if _stamp(p) != s}
        for name, files in list(self._parquet.items()):
            folder = self._folders.get(name)
            watched = set(files) | ({folder} if folder is not None else set())
            if stale.isdisjoint(watched):
                continue
            parts = sorted(folder.glob("*.parquet")) if folder is not None and \
                folder.is_dir() else [p for p in files if p.is_file()]
            try:
                if parts:
                    self._read_parquet_table(name, folder or parts[0], parts)
                else:
                    self._forget(name)
            except SQLError:
                continue
            self._bounds = {k: v for k, v in self._bounds.items() if k[0] != name}
        for path in {p for p in self._hdf5.values() if p in stale}:
            names = [n for n, p in self._hdf5.items() if p == path]
            kept = {n: (self._kinds[n], self._rows[n]) for n in names}
            try:
                for name in names:
                    self._forget(name)
                if path.is_file():
                    self._read_hdf5(path)
            except SQLError:
                for name, (kinds, rows) in kept.items():
                    self._hdf5[name], self._kinds[name], self._rows[name] = path, kinds, rows
        self._changed()

    def _changed(self) -> None:
        """The tables changed: a new version; only the files of the tables left watched."""
        self._version += 1
        self._types_memo = None
        watched = {f for files in self._parquet.values() for f in files}
        watched |= {d for d in self._folders.values() if d is not None}
        watched |= set(self._hdf5.values())
        self._stamps = {p: s for p, s in self._stamps.items() if p in watched}

    def _forget(self, name: str) -> None:
        self._parquet.pop(name, None)
        self._ranges.pop(name, None)
        self._hdf5.pop(name, None)
        self._kinds.pop(name, None)
        self._rows.pop(name, None)
        self._types.pop(name, None)
        self._folders.pop(name, None)
        self._bounds = {k: v for k, v in self._bounds.items() if k[0] != name}

    # -- reading ----------------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        return sorted(self._kinds)

    def schema(self) -> dict[str, dict[str, str]]:
        """``{table: {column: SQL type}}`` for sqlglot."""
        return {t: {c: _SQL_TYPES[k] for c, k in cols.items()} for t, cols in self._kinds.items()}

    def types(self) -> dict[str, dict[str, SQLType]]:
        """``{table: {column: logical type}}``: Parquet's DECIMAL(p, s) and integer widths
        as DuckDB reads them; BIGINT, DOUBLE, DATE, VARCHAR, BOOLEAN from the other kinds.
        Built once per :meth:`version` (every query binds against it): do not modify it."""
        if self._types_memo is None:
            self._types_memo = {
                t: {c: self._types.get(t, {}).get(c) or _kind_type(k) for c, k in cols.items()}
                for t, cols in self._kinds.items()}
        return self._types_memo

    def columns(self, name: str) -> list[str]:
        return list(self._kinds[name])

    def num_rows(self, name: str) -> int:
        return self._rows[name]

    def distinct_bound(self, name: str, column: str) -> int:
        """An upper bound of the distinct values of an integer column (its value range, from
        Parquet's row-group statistics or the values held in memory), else the row count:
        the optimizer's estimate of how selective an equi-join on it is."""
        key = (name, column)
        cached = self._bounds.get(key)
        if cached is None:
            span = self._value_span(name, column)
            cached = self._rows[name] if span is None else max(1, min(span, self._rows[name]))
            self._bounds[key] = cached
        return cached

    def distinct_estimate(self, name: str, column: str) -> int:
        """An estimate of the distinct values of a column, for how many rows an equality with
        a constant keeps: :meth:`distinct_bound` for integers and dates; for a string column,
        the size of the dictionary Parquet wrote for its first row group where that is at
        most half the group's rows (a flag, a status, a nation: few values repeated
        everywhere), else the row count (names, comments: mostly distinct)."""
        key = (name, column, "estimate")
        cached = self._bounds.get(key)
        if cached is None:
            cached = self.distinct_bound(name, column)
            if self._kinds.get(name, {}).get(column) == "string":
                cached = self._string_distinct(name, column) or cached
            self._bounds[key] = cached
        return cached

    def _string_distinct(self, name: str, column: str) -> int | None:
        if name in self._memory:
            dictionary = getattr(self._memory[name][column], "dictionary", None)
            return None if dictionary is None else max(1, len(dictionary))
        if name not in self._parquet or not self._parquet[name]:
            return None
        import pyarrow.parquet as pq

        f = pq.ParquetFile(self._parquet[name][0], read_dictionary=[column])
        if f.metadata.num_row_groups == 0:
            return None
        values = f.read_row_group(0, columns=[column]).column(0)
        if values.num_chunks == 0 or not hasattr(values.chunk(0), "dictionary"):
            return None
        entries = max(len(c.dictionary) for c in values.chunks)
        return max(1, entries) if 2 * entries <= len(values) else None

    def value_range(self, name: str, column: str) -> tuple[float, float] | None:
        """``(min, max)`` of a numeric or date column (dates as days since 1970-01-01) over
        all ranks, from Parquet's row-group statistics or the values held in memory; None
        where unknown. Not collective: the same on every rank."""
        if self._kinds.get(name, {}).get(column) not in ("int", "date", "float"):
            return None
        if name in self._memory:
            return self._ranges.get(name, {}).get(column)
        key = (name, column, "range")
        if key not in self._bounds:
            files = self._parquet.get(name)
            self._bounds[key] = parquet_range(files, column) if files else None
        return self._bounds[key]

    def summary(self, name: str, column: str | None, extremes: bool = True
                ) -> Summary | None:
        """``column``'s exact rows, NULLs, least and greatest value over all of a Parquet
        table's files as they are now, from their row groups' statistics (no row read);
        without a column, the rows alone; without ``extremes``, the rows and NULLs alone.
        None for a table not in Parquet or where a statistic is missing (see
        :func:`~.statistics.exact_summary`). Not collective: every rank reads the same
        footers."""
        from .table import parquet_summary

        files = self._parquet.get(name)
        if not files:
            return None
        parts = [parquet_summary(str(f), column, extremes) for f in files]
        if any(p is None for p in parts):
            return None
        values = [p for p in parts if p is not None and p.lo is not None]
        return Summary(sum(p.rows for p in parts if p is not None),
                       sum(p.nulls for p in parts if p is not None),
                       min((p.lo for p in values), default=None),
                       max((p.hi for p in values), default=None))

    def value_bytes(self, name: str, column: str) -> float:
        """Bytes a row of ``column`` takes in memory, about: the value's width, or for a
        string column its Parquet bytes per row (plain: the length and 4; dictionary-encoded:
        the index and a share of the dictionary), 16 where unknown."""
        kind = self._kinds.get(name, {}).get(column)
        if kind != "string":
            return {"bool": 1.0, "date": 4.0}.get(kind or "", 8.0)
        if name in self._memory:
            return float(self._memory[name][column].values.dtype.itemsize)
        key = (name, column, "bytes")
        if key not in self._bounds:
            files = self._parquet.get(name)
            found = parquet_value_bytes(files, column) if files else None
            self._bounds[key] = max(4.0, found) if found is not None else 16.0
        return self._bounds[key]

    def _value_span(self, name: str, column: str) -> int | None:
        if self._kinds.get(name, {}).get(column) not in ("int", "date"):
            return None
        if name in self._memory:
            found = self._ranges.get(name, {}).get(column)
            return 1 if found is None else int(found[1]) - int(found[0]) + 1
        if name not in self._parquet:
            return None
        import pyarrow.parquet as pq

        lo = hi = None
        for f in self._parquet[name]:
            meta = pq.ParquetFile(f).metadata
            j = meta.schema.names.index(column)
            for g in range(meta.num_row_groups):
                stats = meta.row_group(g).column(j).statistics
                if stats is None or not stats.has_min_max:
                    return None
                a, b = stats.min, stats.max
                if not isinstance(a, int) or not isinstance(b, int):
                    return None
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        return None if lo is None else hi - lo + 1

    def load(self, name: str, columns: list[str], comm: Any = None,
             unsorted: Collection[str] = (), where: Any = None) -> Table:
        """Collective. This rank's rows of table ``name`` (only ``columns``). String columns
        in ``unsorted`` may come back with raw :class:`~.strings.Entries` dictionaries (from
        Parquet), for per-entry predicates only. ``where``: a condition over the table's
        column names that only the rows wanted satisfy: Parquet row groups whose statistics
        rule it out are not read (others may still hold rows that fail it)."""
        comm = resolve_comm(comm)
        if name in self._memory:
            t = self._memory[name]
            return Table({c: t[c] for c in columns}) if columns else _rows_only(t)
        if name in self._parquet:
            want = columns or self.columns(name)[:1]
            parts = [read_parquet(str(f), want, comm, unsorted, where)
                     for f in self._parquet[name]]
            table = parts[0] if len(parts) == 1 else _concat(parts, comm)
            return table if columns else _rows_only(table)
        return self._load_hdf5(name, columns, comm)

    def _load_hdf5(self, name: str, columns: list[str], comm: Any) -> Table:
        from hpc.io import read_table

        want = columns or self.columns(name)[:1]
        arrays = read_table(str(self._hdf5[name]), name, comm=comm, columns=want)
        cols = {}
        for c, a in arrays.items():
            if a.dtype.kind == "M":
                days = a.astype("datetime64[D]").astype(np.int64).astype(np.int32)
                cols[c] = Column(days, "date")
            elif a.dtype.kind in "US":
                words = a.astype(str)
                dictionary, codes = np.unique(words, return_inverse=True)
                cols[c] = Column(codes.astype(np.int32), "string", dictionary.astype(object))
            elif a.dtype.kind == "b":
                cols[c] = Column(a, "bool")
            else:
                cols[c] = Column(a, "float" if a.dtype.kind == "f" else "int")
        table = Table(cols)
        merge_dictionaries(table, comm)
        return table if columns else _rows_only(table)


class ScanCache:
    """The columns one query has read: a table scanned again (by a subquery, a view used
    twice, a self join) is decoded once. Loads go to ``catalog`` for the columns not read
    yet; a column first read with raw dictionary :class:`~.strings.Entries` is read again
    when a later scan needs it sorted."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._columns: dict[tuple[str, str, Any], Column] = {}  # table, column, where
        # derived and WITH tables computed whole, by their SQL and the WITH tables in scope:
        # one used twice (TPC-H Q15's revenue0) runs once
        self.derived: dict[Any, Table] = {}

    def load(self, name: str, columns: list[str], comm: Any = None,
             unsorted: Collection[str] = (), where: Any = None) -> Table:
        """Collective. As :meth:`Catalog.load` (every rank reads the same columns, since
        every rank runs the same plan); columns read under another ``where`` are other rows,
        kept apart."""
        if not columns:
            return self.catalog.load(name, columns, comm, where=where)
        missing = [c for c in columns if not self._has(name, c, c in unsorted, where)]
        if missing:
            table = self.catalog.load(name, missing, comm, [c for c in missing if c in unsorted],
                                      where)
            self._columns.update({(name, c, where): table[c] for c in missing})
        return Table({c: self._columns[(name, c, where)] for c in columns})

    def _has(self, name: str, column: str, unsorted: bool, where: Any) -> bool:
        hit = self._columns.get((name, column, where))
        return hit is not None and (unsorted or not hit.raw)


def _stamp(path: Path) -> tuple[Any, ...] | None:
    """What changes when a file is rewritten or replaced: its modification time, size and
    inode (a rewrite of the same size within the file system's timestamp granularity goes
    unseen); for a folder, the names in it too (its size and, within that granularity, its
    time stay when a part is added). None when it is gone."""
    try:
        st = os.stat(path)
        names = tuple(sorted(os.listdir(path))) if stat.S_ISDIR(st.st_mode) else ()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, names)


def _rows_only(t: Table) -> Table:
    """A table that keeps only its row count (``SELECT count(*)``)."""
    return Table({"\0rows": Column(np.zeros(t.num_rows, np.int8), "int")})


def _raw_entries(columns: list[Column]) -> tuple[strings.Entries, np.ndarray]:
    """Raw string columns of several files as one: their entries one after another, each
    part's codes moved past the entries before it."""
    import pyarrow as pa

    words = [strings.arrow(c.dictionary) for c in columns]
    if any(pa.types.is_large_string(w.type) for w in words) or sum(
            w.nbytes for w in words) >= 2**31:
        words = [w.cast(pa.large_string()) for w in words]
    else:
        words = [w.cast(pa.string()) for w in words]
    bases = np.cumsum([0] + [len(w) for w in words])
    dtype = np.int32 if bases[-1] < 2**31 else np.int64
    # a part without entries has only NULLs: their codes 0, any entry (or none at all)
    values = np.concatenate([np.asarray(c.values, dtype) + dtype(b) if len(w) else
                             np.zeros(len(c), dtype)
                             for c, w, b in zip(columns, words, bases, strict=False)])
    return strings.Entries(pa.concat_arrays(words)), values


def _concat(parts: list[Table], comm: Any) -> Table:
    cols = {}
    for name, first in parts[0].columns.items():
        dictionary = first.dictionary
        if first.kind == "string" and all(p[name].raw for p in parts):
            # raw entries (this rank's, not merged over the ranks) stay raw, one after another
            dictionary, values = _raw_entries([p[name] for p in parts])
        elif first.kind == "string":  # parts read separately: one dictionary for all
            dictionary = strings.merge([p[name].dictionary for p in parts])
            values = np.concatenate([  # a part without entries has only nulls: code 0
                strings.remap(p[name].dictionary, dictionary)[p[name].values]
                if len(p[name].dictionary) else np.zeros(len(p[name]), np.int32) for p in parts
            ])
        else:
            values = np.concatenate([p[name].values for p in parts])
        valids = [p[name].valid for p in parts]
        valid = None
        if any(v is not None for v in valids):
            valid = np.concatenate([np.ones(len(p[name]), bool) if v is None else v
                                    for p, v in zip(parts, valids, strict=True)])
        cols[name] = Column(values, first.kind, dictionary, valid)
    return Table(cols)
