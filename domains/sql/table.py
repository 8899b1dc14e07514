"""Columnar tables: named columns of NumPy arrays, strings dictionary-encoded.

Types: integers and floats as themselves; decimals as float64 (exact to about 15 significant
digits, what TPC-H needs; say so to users); dates as int32 days since 1970-01-01 (``kind`` =
``"date"``); strings as int32 codes into a *sorted* dictionary, so comparing codes compares
strings; nulls as a boolean validity mask (``valid``, None when there are none).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hpc.backend import array_module
from hpc.jit import serial_below

from . import strings

__all__ = ["Column", "Decimals", "Deferred", "Rows", "deferred_gather", "Table", "read_parquet",
           "merge_dictionaries", "settle", "settle_columns", "parquet_summary"]


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

    @property
    def xp(self) -> Any:
        """The array module of the values: NumPy, or CuPy on the GPU backend."""
        return array_module(self.values)

    @property
    def raw(self) -> bool:
        """Whether the codes point into raw :class:`~.strings.Entries` (equal strings may
        have different codes; no order): :func:`settle` before comparing codes."""
        return isinstance(self.dictionary, strings.Entries)

    def gather(self, index: np.ndarray) -> Column:
        """Rows ``index`` (all valid row numbers: a filter's survivors)."""
        valid = None if self.valid is None else gather_rows(self.valid, index)
        return Column(gather_rows(self.values, index), self.kind, self.dictionary, valid)

    def take(self, index: np.ndarray) -> Column:
        """Rows ``index`` (``-1``: a null row, as an outer join produces)."""
        if len(self) and (len(index) == 0 or int(index.min()) >= 0):
            return self.gather(index)
        missing = index < 0
        if len(self):  # -1 reads row 0, then the mask below nulls it
            safe = array_module(index).where(missing, 0, index)
            values = gather_rows(self.values, safe)
            valid = None if self.valid is None else gather_rows(self.valid, safe)
        else:  # nothing to read: every row is a null (a rank that got no build rows)
            values = array_module(self.values).zeros(len(index), dtype=self.values.dtype)
            valid = None
        if missing.any():
            valid = ~missing if valid is None else valid & ~missing
        return Column(values, self.kind, self.dictionary, valid)


class Decimals(Column):
    """A decimal column without nulls as Parquet gave it, made float64 when first read: Arrow
    decimal128 chunks, or integer chunks of the unscaled values with ``scale`` (Parquet's
    INT32/INT64 decimals, :mod:`.parquet_footer`). A filter's survivors are converted
    straight from the chunks, so a column carried past a selective filter is never converted
    whole (TPC-H Q6, Q14 and Q15 keep 1-4% of ``lineitem``: 6M conversions of
    ``l_extendedprice`` become 60-240k)."""

    def __init__(self, chunks: list[Any], n: int, scale: int | None = None) -> None:
        self._chunks = chunks
        self._n = n
        self._scale = scale
        self._values: np.ndarray | None = None
        self.kind, self.dictionary, self.valid = "float", None, None

    @property
    def values(self) -> np.ndarray:  # type: ignore[override]
        if self._values is None:
            self._values = _decimal_to_float(self._chunks, self._n, self._scale)
            self._chunks = []
        return self._values

    @values.setter
    def values(self, values: np.ndarray) -> None:
        self._values = values

    def __len__(self) -> int:
        return self._n

    @property
    def xp(self) -> Any:
        return np  # Arrow's host chunks: asking must not convert them

    def chunk_words(self) -> list[tuple[int, np.ndarray, int, int]]:
        """``(first row, words, stride, scale)`` per chunk (no copies): value ``i`` is
        ``words[stride i]``, an integer chunk's own values (stride 1) or the low word of the
        little-endian pair ``words[2 i], words[2 i + 1]`` of Arrow's decimal128 buffer."""
        out, start = [], 0
        for c in self._chunks:
            words, stride = _unscaled_words(c)
            scale = c.type.scale if self._scale is None else self._scale
            out.append((start, words, stride, scale))
            start += len(c)
        return out

    def unscaled(self, scale: int) -> np.ndarray | None:
        """The exact values times ``10**scale`` as int64 (None once converted to float, or
        where a value needs more than 64 bits)."""
        if self._values is not None and not self._chunks:
            return None
        pieces = self.chunk_words()
        if len(pieces) == 1 and pieces[0][2] == 1 and pieces[0][3] == scale and \
                pieces[0][1].dtype == np.int64 and len(pieces[0][1]) == self._n:
            return pieces[0][1]  # one chunk of int64 at this scale: the values as they are
        if pieces and all(p[1].dtype == np.int64 and 0 <= scale - p[3] <= 18 for p in pieces):
            from .scan_kernels import read_only_list, unscaled_into

            out = np.empty(self._n, dtype=np.int64)
            bad = unscaled_into(out, np.array([p[0] for p in pieces], np.int64),
                                read_only_list([p[1] for p in pieces]),
                                np.array([p[2] for p in pieces], np.int64),
                                np.array([10 ** (scale - p[3]) for p in pieces], np.int64))
            return None if bad else out
        out = np.empty(self._n, dtype=np.int64)
        bounds = [p[0] for p in pieces] + [self._n]
        for (start, words, stride, own), stop in zip(pieces, bounds[1:], strict=True):
            low = words[0::stride][: stop - start]
            if stride == 2 and bool(np.any(words[1::2][: stop - start] != (low >> 63))):
                return None
            if own > scale:
                return None
            if own == scale:
                out[start:stop] = low
            else:
                out[start:stop] = low * (10 ** (scale - own))
        return out

    def gather(self, index: np.ndarray) -> Column:
        if (self._values is not None or not isinstance(index, np.ndarray)
                or _SELECTIVE * len(index) > self._n or not len(self._chunks)):
            return super().gather(index)
        from .scan_kernels import decimal_gather, read_only_list

        parts = self.chunk_words()
        starts = np.array([p[0] for p in parts], dtype=np.int64)
        order, bounds = chunk_positions(starts, index, self._n)
        out = np.empty(len(index), dtype=np.float64)
        if decimal_gather(read_only_list([p[1] for p in parts]), starts, parts[0][2], index,
                          order, bounds, float(10 ** parts[0][3]), out):
            return super().gather(index)  # wider than 64 bits: Arrow's cast
        return Column(out, "float")


_SELECTIVE = 4  # gathers of at most 1/_SELECTIVE of the rows convert only those rows


def chunk_positions(starts: np.ndarray, index: np.ndarray, n: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``index`` of a column of ``n`` rows held in chunks that start at rows ``starts``,
    grouped by chunk: ``(order, bounds)``, the positions in ``index`` of chunk ``c``'s rows
    being ``order[bounds[c]:bounds[c + 1]]`` (``order`` empty for an ascending ``index``, a
    filter's rows: then ``bounds[c]`` to ``bounds[c + 1]`` themselves)."""
    if len(index) < 2 or bool((index[1:] >= index[:-1]).all()):
        return np.empty(0, dtype=np.int64), np.searchsorted(index, np.append(starts, n))
    # a join's rows: grouped by chunk first (a stable radix sort of 16-bit ids)
    chunk = np.searchsorted(starts, index, side="right") - 1
    order = np.argsort(chunk.astype(np.int16 if len(starts) < 2**15 else np.int64),
                       kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(chunk, minlength=len(starts)))])
    return order, bounds


class Rows:
    """Row numbers that the columns of one filtered or joined frame share (NumPy, in any
    order). A later gather of all those columns by one index composes it with these rows
    once."""

    def __init__(self, index: np.ndarray) -> None:
        self.index = index
        self._next: tuple[np.ndarray, Rows] | None = None

    def then(self, index: np.ndarray) -> Rows:
        """These rows' ``index``-th ones (kept for the frame's next column)."""
        if self._next is None or self._next[0] is not index:
            self._next = (index, Rows(gather_rows(self.index, index)))
        return self._next[1]


def _gathered(name: str) -> property:
    """An attribute of a :class:`Deferred` column's gathered column (read and written)."""
    return property(lambda self: getattr(self._column(), name),
                    lambda self, value: setattr(self._column(), name, value))


class Deferred(Column):
    """Rows ``rows`` of column ``base``, gathered when first read (late materialisation).

    A filter on a fact table often keeps many rows (TPC-H Q3 keeps half of ``lineitem``)
    that a join then cuts to a few (1% in Q3): the join's rows compose with the filter's,
    so a column it carries is gathered once, for the rows left, and a decimal column is
    converted only for those rows, straight from Parquet's chunks. Read before that, it is
    gathered as a filter would have."""

    def __init__(self, base: Column, rows: Rows) -> None:
        self._base: Column | None = base
        self._rows = rows
        self._done: Column | None = None
        self.kind, self.dictionary = base.kind, base.dictionary

    values = _gathered("values")  # type: ignore[assignment]
    valid = _gathered("valid")  # type: ignore[assignment]

    def _column(self) -> Column:
        if self._done is None:
            assert self._base is not None
            self._done = self._base.gather(self._rows.index)
            self._base = None
        return self._done

    def __len__(self) -> int:
        return len(self._rows.index)

    @property
    def xp(self) -> Any:
        return np

    def gather(self, index: np.ndarray) -> Column:
        if self._done is not None or not isinstance(index, np.ndarray):
            return super().gather(index)
        assert self._base is not None
        return Deferred(self._base, self._rows.then(index))


def deferred_gather(column: Column, rows: Rows) -> Column:
    """``column.gather(rows.index)``: deferred until read for host columns (a deferred
    column's rows compose), at once for device columns."""
    if isinstance(column, Deferred) or column.xp is not np:
        return column.gather(rows.index)
    return Deferred(column, rows)


def gather_rows(values: Any, index: Any) -> Any:
    """``values.take(index)``: a numba kernel on all threads for large NumPy arrays (no
    negative-index or bounds tests), the array's own ``take`` otherwise (CuPy, object
    arrays, short ones)."""
    if (isinstance(values, np.ndarray) and isinstance(index, np.ndarray) and values.ndim == 1
            and index.ndim == 1 and len(index) >= _KERNEL_ROWS and index.dtype.kind in "iu"
            and (values.dtype.kind in "biu" or values.dtype in (np.float32, np.float64))):
        from .scan_kernels import gather_parallel

        # on all threads whether the rows ascend (a filter's survivors: measured 2x faster
        # than one thread on two cores) or jump about (a join's rows: threads overlap the
        # cache misses). Under MPI each rank has its share of the cores (hpc.backend)
        out = np.empty(len(index), dtype=values.dtype)
        gather_parallel(values, index, out)
        return out
    return values.take(index)


_KERNEL_ROWS = 1 << 16  # below this the call costs more than it saves


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

    def materialised(self) -> Table:
        """The same table with every column's values converted (no :class:`Decimals` left
        waiting): what a table held in memory for many queries should be."""
        return Table({n: Column(c.values, c.kind, c.dictionary, c.valid)
                      if isinstance(c, Decimals) else c for n, c in self.columns.items()})

    # -- interop --------------------------------------------------------------------------
    @classmethod
    def from_arrow(cls, table: Any, unsorted: Collection[str] = (),
                   scales: dict[str, int] | None = None) -> Table:
        """From a ``pyarrow.Table`` (chunks combined; decimals to float64). String columns
        named in ``unsorted`` keep their dictionaries as :class:`~.strings.Entries`: only
        per-entry predicates may read them. Integer columns named in ``scales`` hold the
        unscaled values of decimals with that scale (Parquet's INT32/INT64 decimals read as
        integers, :mod:`.parquet_footer`)."""
        scales = scales or {}
        return cls({name: _from_arrow_column(name, table.column(name), name not in unsorted,
                                             scales.get(name))
                    for name in table.column_names})

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` (strings decoded, dates as date32, nulls restored)."""
        import pyarrow as pa

        arrays = {}
        for name, c in self.columns.items():
            mask = None if c.valid is None else ~c.valid
            if c.kind == "string" and len(c) and not len(c.dictionary):
                # no entries: every row is a null (an outer join's rows of an empty table)
                arrays[name] = pa.nulls(len(c), pa.string())
            elif c.kind == "string":
                arrays[name] = pa.array(
                    c.dictionary[c.values] if len(c) else [], type=pa.string(), mask=mask
                )
            elif c.kind == "date":
                arrays[name] = pa.array(c.values.astype(np.int32), type=pa.int32(), mask=mask).cast(
                    pa.date32()
                )
            elif c.kind == "timestamp":  # int64 microseconds since 1970
                arrays[name] = pa.array(c.values.astype(np.int64), type=pa.int64(),
                                        mask=mask).cast(pa.timestamp("us"))
            else:
                arrays[name] = pa.array(c.values, mask=mask)
        return pa.table(arrays)

    @classmethod
    def from_pandas(cls, frame: Any) -> Table:
        import pyarrow as pa

        return cls.from_arrow(pa.Table.from_pandas(frame, preserve_index=False))

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()


def _from_arrow_column(name: str, chunked: Any, sort: bool = True,
                       scale: int | None = None) -> Column:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = chunked.type
    chunks = list(chunked.chunks) if hasattr(chunked, "chunks") else [chunked]
    chunks = chunks or [pa.array([], type=t)]
    valid = None
    if chunked.null_count:
        valid = np.asarray(pc.is_valid(chunked).to_numpy(zero_copy_only=False), dtype=bool)
    if strings.is_text(t) and not sort:  # filter-only plain strings: the rows are the entries
        return Column(np.arange(len(chunked), dtype=np.int32), "string",
                      strings.Entries(_plain_words(chunks)), valid)
    if strings.is_text(t):  # plain strings: the distinct ones found by hashing, then sorted
        unique, codes = strings.sort_unique(_plain_words(chunks))
        return Column(codes, "string", strings.to_numpy(unique), valid)
    if pa.types.is_dictionary(t):
        codes, dictionary = _dictionary_codes(chunks, len(chunked), sort)
        return Column(codes, "string", dictionary, valid)
    if scale is not None and pa.types.is_integer(t):  # an integer-stored decimal
        if valid is None:
            return Decimals(chunks, len(chunked), scale)
        return Column(_decimal_to_float(chunks, len(chunked), scale), "float", None, valid)
    if pa.types.is_decimal(t):
        if valid is None and all(pa.types.is_decimal128(c.type) for c in chunks):
            return Decimals(chunks, len(chunked))
        return Column(_decimal_to_float(chunks, len(chunked)), "float", None, valid)
    if pa.types.is_date32(t):
        return Column(_concat([c.cast(pa.int32()) for c in chunks], 0), "date", None, valid)
    if pa.types.is_boolean(t):
        return Column(np.asarray(_concat(chunks, False), bool), "bool", None, valid)
    if pa.types.is_integer(t):
        return Column(_concat(chunks, 0), "int", None, valid)
    if pa.types.is_floating(t):
        return Column(_concat(chunks, 0), "float", None, valid)
    from .errors import SQLError

    raise SQLError(f"column {name!r}: unsupported type {t} (numbers, decimals, strings, dates "
                   "and booleans are)")


def _plain_words(chunks: list[Any]) -> Any:
    """Text chunks as one plain Arrow string array without nulls (large past 2 GiB)."""
    import pyarrow as pa

    wide = sum(c.nbytes for c in chunks) >= 2**31
    words = [strings._plain(c.cast(pa.large_string()) if wide else c) for c in chunks]
    return pa.concat_arrays(words) if len(words) != 1 else words[0]


def _concat(chunks: list[Any], fill: Any) -> np.ndarray:
    """Arrow chunks as one NumPy array: no copy for a single chunk (``combine_chunks`` would
    copy it), one copy for several."""
    if len(chunks) == 1:
        return _numpy(chunks[0], fill)
    return np.concatenate([_numpy(c, fill) for c in chunks])


def _dictionary_codes(chunks: list[Any], n: int, sort: bool = True) -> tuple[np.ndarray, Any]:
    """int32 codes and one sorted dictionary for dictionary-encoded chunks (each row group has
    its own dictionary): the chunks' dictionaries sorted together once, duplicates merged, no
    ``unify_dictionaries`` (a hash table over every string, as slow as the sort). Without
    ``sort``, the chunks' dictionaries concatenated as :class:`~.strings.Entries`."""
    import pyarrow as pa

    from .scan_kernels import codes_into, read_only_list

    parts, bases, seen = [], [], {}
    total = 0
    for c in chunks:
        d = c.dictionary
        key = (d.offset, len(d), *(b.address if b is not None else 0 for b in d.buffers()))
        if key not in seen:  # a dictionary shared by chunks is sorted once
            seen[key] = total
            parts.append(strings._plain(d))
            total += len(d)
        bases.append(seen[key])
    if any(pa.types.is_large_string(p.type) for p in parts) or sum(
            p.nbytes for p in parts) >= 2**31:
        parts = [p.cast(pa.large_string()) for p in parts]
    entries = pa.concat_arrays(parts) if parts else pa.array([], pa.string())
    if sort:
        unique, lookup = strings.sort_unique(entries)
    else:
        unique, lookup = entries, np.arange(len(entries), dtype=np.int32)
    out = strings.to_numpy(unique) if sort else strings.Entries(unique)
    if (len(chunks) == 1 and len(chunks[0]) and len(lookup) == len(entries)
            and np.array_equal(lookup, np.arange(len(lookup)))):
        # one dictionary, already sorted and distinct (our page kernels merge a column's
        # row groups so): the indices are the codes, no pass over the rows
        return np.asarray(_numpy(chunks[0].indices, 0), dtype=np.int32), out
    codes = np.empty(n, dtype=np.int32)  # (every row written below: no memset first)
    starts, used, indices = [], [], []
    start = 0
    for c, base in zip(chunks, bases, strict=True):
        if len(c) and len(c.dictionary):
            indices.append(np.asarray(_numpy(c.indices, 0), dtype=np.int32))
            starts.append(start)
            used.append(base)
        else:  # an empty dictionary: every row null, code 0
            codes[start: start + len(c)] = 0
        start += len(c)
    codes[start:] = 0
    if indices:
        codes_into(codes, np.asarray(starts, np.int64), lookup, np.asarray(used, np.int64),
                   read_only_list(indices))
    return codes, out


def _numpy(arr: Any, fill: Any) -> np.ndarray:
    """An Arrow array as NumPy (nulls replaced by ``fill``; no copy where Arrow allows)."""
    if arr.null_count:
        arr = arr.fill_null(fill)
    return arr.to_numpy(zero_copy_only=False)


def _unscaled_words(chunk: Any) -> tuple[np.ndarray, int]:
    """A decimal128 or integer chunk's buffer as ``(words, stride)``: value ``i`` is (the
    low word of) ``words[stride i]`` (no copy)."""
    import pyarrow as pa

    if pa.types.is_decimal128(chunk.type):
        words = np.frombuffer(chunk.buffers()[1], dtype=np.int64)
        return words[2 * chunk.offset : 2 * (chunk.offset + len(chunk))], 2
    words = np.frombuffer(chunk.buffers()[1], dtype=chunk.type.to_pandas_dtype())
    return words[chunk.offset : chunk.offset + len(chunk)], 1


def _decimal_to_float(chunks: list[Any], n: int, scale: int | None = None) -> np.ndarray:
    """Decimals to float64: the unscaled integers read straight from each chunk's buffer
    (decimal128, or integer chunks of the unscaled values with ``scale``) and divided by
    10**scale in one parallel pass (much faster than a cast, and correctly rounded while they
    are below 2**53); only decimal128 values wider than 64 bits take Arrow's cast, so a value
    converts the same whatever else its chunk holds."""
    import pyarrow as pa

    from .scan_kernels import decimal_to_float

    out = np.empty(n, dtype=np.float64)
    start = 0
    for c in chunks:
        part = out[start : start + len(c)]
        start += len(c)
        if not len(c):
            continue
        if scale is not None or pa.types.is_decimal128(c.type):
            words, stride = _unscaled_words(c)
            divisor = float(10 ** (c.type.scale if scale is None else scale))
            if decimal_to_float(words, stride, divisor, part):
                wide = words[1::2] != (words[0::2] >> 63)
                part[wide] = _numpy(c.cast(pa.float64()), 0.0)[wide]
            if c.null_count:
                part[~c.is_valid().to_numpy(zero_copy_only=False)] = 0.0
            continue
        part[:] = _numpy(c.cast(pa.float64()), 0.0)
    return out


def read_parquet(path: str, columns: list[str] | None = None, comm: Any = None,
                 unsorted: Collection[str] = (), where: Any = None) -> Table:
    """Collective. This rank's part of a Parquet file: whole row groups when there are at
    least as many as ranks (contiguous runs, balanced by rows), else a contiguous row range.
    String dictionaries are merged over the ranks (buffer-based), so codes mean the same
    string everywhere and can be shuffled; those of the ``unsorted`` string columns stay
    this rank's raw :class:`~.strings.Entries` (see :meth:`Table.from_arrow`). ``where``
    (an expression over the file's column names): only the row groups whose statistics
    allow it are read (:func:`~.statistics.groups_may_match`)."""

    from hpc.comm import resolve_comm

    comm = resolve_comm(comm)
    size = comm.Get_size()
    try:
        mapped = _mapped(path)
        meta = mapped.meta
        schema = meta.schema.to_arrow_schema()
        # strings stored plain are read plain (an Arrow dictionary would hash every row):
        # raw, each row its own entry; sorted, their distinct strings found by our hashing
        dictionaries = [f.name for f in schema if strings.is_text(f.type)
                        and not _stored_plain(meta, schema, f.name)]
        pf = mapped.open(dictionaries)
    except Exception as exc:  # noqa: BLE001 - name the file whatever pyarrow raised
        raise OSError(f"{path}: not a readable Parquet file ({exc})") from exc
    if columns is not None:
        missing = [c for c in columns if c not in pf.schema_arrow.names]
        if missing:
            raise KeyError(f"{path}: no column(s) {missing}; columns: {pf.schema_arrow.names}")
    every = range(pf.metadata.num_row_groups)
    if where is None:
        kept = list(every)
    else:
        from .statistics import groups_may_match

        kept = groups_may_match(meta, where, mapped.zones)
    rows = sum(pf.metadata.row_group(g).num_rows for g in kept)
    with serial_below(rows // size):  # a small table's kernels: one thread
        return _read_part(mapped, pf, dictionaries, columns, unsorted, comm, kept)


def _read_part(mapped: _MappedFile, pf: Any, dictionaries: list[str],
               columns: list[str] | None, unsorted: Collection[str], comm: Any,
               kept: list[int]) -> Table:
    """:func:`read_parquet`'s rows of this rank from the row groups ``kept``, strings merged
    over the ranks."""
    size, rank = comm.Get_size(), comm.Get_rank()
    groups = len(kept)
    if groups >= size:
        rows = np.array([pf.metadata.row_group(g).num_rows for g in kept])
        cut = np.searchsorted(np.cumsum(rows), np.arange(1, size) * rows.sum() / size)
        bounds = np.concatenate([[0], np.minimum(cut + 1, groups), [groups]])
        bounds = np.maximum.accumulate(bounds)
        mine = kept[int(bounds[rank]):int(bounds[rank + 1])]
        if mine:
            arrow = _read_groups(mapped, dictionaries, mine, columns or pf.schema_arrow.names,
                                 unsorted)
        else:
            arrow = pf.schema_arrow.empty_table()
        if columns is not None and not mine:
            arrow = arrow.select(columns)
    else:
        if groups == pf.metadata.num_row_groups:
            arrow = pf.read(columns=columns)
        elif groups:
            arrow = pf.read_row_groups(kept, columns=columns)
        else:
            arrow = pf.schema_arrow.empty_table()
            arrow = arrow if columns is None else arrow.select(columns)
        n = arrow.num_rows
        lo, hi = rank * n // size, (rank + 1) * n // size
        arrow = arrow.slice(lo, hi - lo)
    return merge_dictionaries(Table.from_arrow(arrow, unsorted, mapped.scales), comm)


def _read_groups(mapped: _MappedFile, dictionaries: list[str], groups: list[int],
                 columns: list[str], unsorted: Collection[str] = ()) -> Any:
    """Row groups ``groups`` on this rank's threads (:mod:`.parquet_read`)."""
    import numba

    from .parquet_read import read_row_groups

    return read_row_groups(lambda: mapped.open(dictionaries), mapped.meta, groups, columns,
                           numba.get_num_threads(), scaled=mapped.scales, data=mapped.whole,
                           unsorted=unsorted)


@dataclass(frozen=True)
class _MappedFile:
    """A Parquet file's memory map and footer (``meta``); ``reading`` is the footer pyarrow
    reads through, in which integer-stored decimals are plain integers with the ``scales``
    given (:mod:`.parquet_footer`)."""

    source: Any
    meta: Any
    reading: Any
    scales: dict[str, int]
    zones: dict[str, Any] = field(default_factory=dict, compare=False)  # statistics once read
    whole: Any = field(default=None, compare=False)  # the file's bytes: a view of the map

    def open(self, dictionaries: list[str]) -> Any:
        """A new ``pyarrow.parquet.ParquetFile`` reading the mapped file (string columns
        ``dictionaries`` as Arrow dictionaries, no pre-buffering)."""
        import pyarrow.parquet as pq

        return pq.ParquetFile(self.source, metadata=self.reading, read_dictionary=dictionaries,
                              pre_buffer=False)


def _mapped(path: str) -> _MappedFile:
    """The file's memory map and footer, opened once and kept while the file is unchanged
    (same inode, size and modification time).

    Pages are decoded straight from the mapped file, not first copied into buffers
    (pre-buffering pays off on object stores, not on a local or parallel file system):
    TPC-H SF1's 22 queries 9% faster. Keeping the map saves mapping the file's pages into
    the process again on every read (a page fault per 4 kB: 27k for TPC-H Q13's columns of
    ``orders``): 3.6% faster again. Only the mapping and the footer are kept; every read
    decompresses and decodes its pages anew."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    st = os.stat(path)
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _maps.get(path)
    if hit is None or hit[0] != key:
        mapped = pa.memory_map(path)
        whole = mapped.read_buffer()  # from byte 0, a view (readers read at offsets)
        hit = (key, replace(_integer_decimal_reading(mapped, pq.read_metadata(mapped)),
                            whole=whole))
        _maps.pop(path, None)  # a changed file's old map goes
        if len(_maps) >= _MAPS_KEPT:  # then the oldest: keep the open files bounded
            _maps.pop(next(iter(_maps)))
        _maps[path] = hit
    return hit[1]


def parquet_summary(path: str, column: str | None, extremes: bool = True) -> Any:
    """A column's exact :class:`~.statistics.Summary` in a Parquet file, from its footer
    (kept with the file's map while the file is unchanged), or None; without a column,
    the file's rows alone; without ``extremes``, its rows and NULLs alone."""
    from .statistics import Summary, exact_summary

    try:
        mapped = _mapped(path)
    except Exception:  # noqa: BLE001 - unreadable: the scan it spared says why
        return None
    if column is None:
        return Summary(mapped.meta.num_rows, 0, None, None)
    key = ("summary", column, extremes)  # (beside the zone maps' statistics, by name)
    if key not in mapped.zones:
        mapped.zones[key] = exact_summary(mapped.meta, column, extremes)
    return mapped.zones[key]


def _integer_decimal_reading(source: Any, meta: Any) -> _MappedFile:
    """The mapped file with a reading footer in which its INT32/INT64 decimals are plain
    integers: pyarrow then writes their 4 or 8 bytes a row instead of 16-byte decimal128
    values (TPC-H's ``l_discount`` decodes in 10 ms instead of 23). Without the Arrow schema
    stored in the footer, text read without a dictionary comes as plain strings where it
    may have come as string views (which the table casts to plain strings anyway); a file
    in which any other column's Arrow type would change keeps its own footer."""
    import struct

    import pyarrow as pa
    import pyarrow.parquet as pq

    from .parquet_footer import integer_decimals

    as_is = _MappedFile(source, meta, meta, {})
    size = source.size()
    tail = source.read_at(8, size - 8)
    if size < 12 or tail[4:] != b"PAR1":  # an encrypted footer ("PARE"): read as it is
        return as_is
    length = struct.unpack("<I", tail[:4])[0]
    try:
        rewritten = integer_decimals(source.read_at(length, size - 8 - length))
    except (ValueError, IndexError):  # a footer pyarrow reads and we do not: leave it be
        return as_is
    if not rewritten.scales:
        return as_is
    footer = rewritten.footer
    reading = pq.read_metadata(pa.BufferReader(
        b"PAR1" + footer + struct.pack("<I", len(footer)) + b"PAR1"))
    before = pq.ParquetFile(source, metadata=meta).schema_arrow
    after = pq.ParquetFile(source, metadata=reading).schema_arrow
    same = before.names == after.names and all(
        pa.types.is_integer(b.type) if a.name in rewritten.scales
        else a.type == b.type or (strings.is_text(a.type) and strings.is_text(b.type))
        for a, b in zip(before, after, strict=True))
    return _MappedFile(source, meta, reading, rewritten.scales) if same else as_is


_maps: dict[str, tuple[Any, _MappedFile]] = {}
_MAPS_KEPT = 256


def _stored_plain(meta: Any, schema: Any, name: str) -> bool:
    """Whether a string column is best read as plain strings, each row its own entry: its
    pages hold the strings themselves (no dictionary page, or the writer fell back from its
    dictionary: TPC-H's comments), so reading it as a dictionary would mean hashing every
    row; or its dictionaries are most of its bytes (names, addresses, phones: nearly every
    row a distinct string), which pyarrow reads plain in half the time. Dictionary-encoded
    pages hold indices, at most 4 bytes a row."""
    index = schema.get_field_index(name)
    rows = meta.num_rows
    data = dictionaries = 0
    for g in range(meta.num_row_groups):
        chunk = meta.row_group(g).column(index)
        if not chunk.has_dictionary_page:
            return True
        pages = chunk.data_page_offset - chunk.dictionary_page_offset
        dictionaries += pages
        data += chunk.total_compressed_size - pages
    return rows > 0 and (data > 4 * rows or dictionaries > data)


def settle(column: Column, comm: Any = None) -> Column:
    """Collective over ``comm`` (when given). A string column whose codes point into raw
    :class:`~.strings.Entries` as one with a sorted dictionary of the strings its rows hold
    (merged over the ranks, so codes mean the same everywhere); other columns unchanged.

    Carried strings (a GROUP BY key another key determines, an output column) stay raw
    through filters and joins and are settled once, on the rows that remain: often the few
    a LIMIT keeps."""
    if not column.raw:
        return column
    import pyarrow as pa

    words = column.dictionary.words
    if len(words) == 0:  # every row a null
        words = pa.array([""], type=pa.string())
    if len(column) < len(words):  # fewer rows than entries: sort just the rows' strings
        unique, values = strings.sort_unique(words.take(np.asarray(column.values)))
    else:
        unique, lookup = strings.sort_unique(words)
        values = gather_rows(lookup, column.values)
    out = Column(values, "string", strings.to_numpy(unique), column.valid)
    if comm is not None:
        merge_dictionaries(Table({"c": out}), comm)
    return out


def settle_columns(columns: dict[str, Column], comm: Any = None) -> dict[str, Column]:
    """Collective over ``comm``. :func:`settle` of every column (a column held under several
    names is settled once)."""
    done: dict[int, Column] = {}
    for c in columns.values():
        if c.raw and id(c) not in done:
            done[id(c)] = settle(c, comm)
    return {n: done.get(id(c), c) for n, c in columns.items()} if done else columns


def merge_dictionaries(table: Table, comm: Any) -> Table:
    """Collective. Give every string column one sorted dictionary over all ranks (codes
    remapped in place), so equal codes mean equal strings everywhere."""
    if comm.Get_size() == 1:
        return table
    for c in table.columns.values():
        if c.kind == "string" and not c.raw:
            everyone, base = strings.allgather(comm, c.dictionary)
            merged, code = strings.sort_unique(everyone)
            remap = code[base : base + len(c.dictionary)]
            if len(c) and not len(remap):  # no entries: every row a null, its code any
                c.values = array_module(c.values).zeros_like(c.values)
            elif len(c):  # (the codes may live on a device, the dictionaries on the host)
                c.values = array_module(c.values).asarray(remap)[c.values]
            c.dictionary = strings.to_numpy(merged)
    return table
