"""Parquet row groups read on all of a rank's threads, balanced by bytes.

pyarrow's ``read_row_groups`` decodes one column per thread. A query's columns are rarely
of equal size (TPC-H Q6 reads ``l_extendedprice``, 41 MB compressed, beside three columns
of 5-10 MB; Q13 reads ``o_comment`` beside two integer columns), so one thread decodes the
large column while the others have finished. Here a column whose chunks the table converts
chunk by chunk anyway (decimals, strings) is also cut into runs of row groups, one per
thread; every piece is one single-threaded read, and the pieces are handed out largest
first. An integer, date or float column is cut only when it alone would outlast the
others (a query reading one large column): its pieces copy their values into one array on
their threads, which costs less than the thread it frees. Other columns stay whole, one
Arrow chunk used without a copy.

Given the file's bytes, 4- and 8-byte integer, date and float columns (decimals stored as
integers among them) skip pyarrow: our page kernels (:mod:`.parquet_pages`) decode each
column chunk, one task per chunk, straight into the column's one array, and the other
columns' pieces share the same threads. So do string columns, in two rounds: read as Arrow
dictionaries, the row groups' dictionary pages are joined into one dictionary first and every
chunk's indices become codes of it (one dictionary array for the column); read as strings,
each row's length is found first and its bytes then copied into one string array. Decoded
columns go to the threads in a few runs of row groups each, not a task per row group.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .strings import is_text

__all__ = ["read_row_groups"]

_pool: ThreadPoolExecutor | None = None
_pool_threads = 0


def read_row_groups(open_file: Callable[[], Any], meta: Any, groups: Sequence[int],
                    columns: Sequence[str], threads: int,
                    scaled: Collection[str] = (), data: Any = None,
                    unsorted: Collection[str] = ()) -> Any:
    """Row groups ``groups`` of ``columns`` as one ``pyarrow.Table``.

    Parameters
    ----------
    open_file : callable
        Returns a new ``pyarrow.parquet.ParquetFile`` on the file (each piece reads through
        its own reader; they share the file's map and footer).
    meta : pyarrow.parquet.FileMetaData
        The file's footer (the column chunks' sizes balance the pieces).
    groups : sequence of int
        Row groups, ascending.
    columns : sequence of str
        Top-level column names (flat columns).
    threads : int
        Threads to read on; with one, pyarrow reads on the calling thread; with no column
        to cut, pyarrow reads as usual.
    scaled : collection of str
        Integer columns holding decimals' unscaled values: cut like decimals, since the
        table converts their chunks one by one.
    data : buffer, optional
        The whole file's bytes (its memory map). With it, flat columns of 4- and 8-byte
        integers, dates and floats, and those of strings (as Arrow dictionaries where
        ``open_file`` reads them so, else as strings) are decoded by our page kernels
        (:mod:`.parquet_pages`), runs of column chunks per task, straight into one array per
        column.
    """
    import pyarrow as pa

    whole = open_file()
    schema = whole.schema_arrow
    groups, columns = list(groups), list(columns)
    native = _native_columns(meta, schema, columns) if data is not None and groups else {}
    rest = [name for name in columns if name not in native]
    if not native:
        if threads < 2 or not groups:  # one thread: this one (pyarrow's pool costs ~0.2 ms)
            return whole.read_row_groups(groups, columns=columns, use_threads=False)
        pieces = _pieces(meta, schema, groups, columns, threads, set(scaled))
        if len(pieces) == len(columns):  # nothing cut: pyarrow's column per thread is the same
            return whole.read_row_groups(groups, columns=columns)
    else:
        pieces = _pieces(meta, schema, groups, rest, threads, set(scaled)) if rest else []
    rows = {g: meta.row_group(g).num_rows for g in groups}
    first = dict(zip(groups, np.cumsum([0] + [rows[g] for g in groups[:-1]]), strict=True))
    total = sum(rows.values())
    # a cut fixed-width column: each piece copies its values into one array, on its thread
    filled = {name: np.empty(total, dtype=_numpy_type(schema.field(name).type))
              for name in {p.name for p in pieces if p.fill}}
    decoded = {name: _Decoded(meta, name, index, groups, total, schema.field(name).type)
               for name, index in native.items()}

    def read(piece: _Piece) -> Any:
        column = open_file().read_row_groups(piece.groups, columns=[piece.name],
                                             use_threads=False).column(0)
        if piece.fill and column.null_count == 0:
            at = int(first[piece.groups[0]])
            for chunk in column.chunks:
                filled[piece.name][at : at + len(chunk)] = _values(chunk)
                at += len(chunk)
        return column

    tasks: list[tuple[int, Callable[[], Any]]] = [
        (p.cost, (lambda p=p: read(p))) for p in pieces]
    # a decoded column's chunks in a few runs per thread: a task per chunk costs the pool's
    # Python (about 30 us a task) 53 times per column of a 6M-row table
    runs = {name: _runs(groups, d.costs, 4 * threads) for name, d in decoded.items()}
    text = [d for d in decoded.values() if d.text]
    if text:  # strings first, a short round: their pages read, their dictionaries joined
        _run([(cost, (lambda d=d, run=run: [d.decode(data, g, int(first[g])) for g in run]))
              for d in text for cost, run in runs[d.name]], threads)
        for d in text:
            d.merge(groups, sort=d.name not in unsorted)
    for name, d in decoded.items():  # (a string column's codes, beside the other columns)
        step = (lambda d, g: d.finish(g, int(first[g]))) if d.text else \
            (lambda d, g: d.decode(data, g, int(first[g])))
        tasks += [(cost, (lambda d=d, run=run, step=step: [step(d, g) for g in run]))
                  for cost, run in runs[name]]
    done = _run(tasks, threads)
    chunks: dict[str, list[Any]] = {}
    types: dict[str, Any] = {}
    for i, piece in enumerate(pieces):
        chunks.setdefault(piece.name, []).extend(done[i].chunks)
        types.setdefault(piece.name, done[i].type)  # a dictionary type where pyarrow keeps one
    out = {}
    for name in columns:
        if name in decoded:
            out[name] = decoded[name].array(schema.field(name).type, whole, groups)
            continue
        t = types[name]
        if name in filled and not any(c.null_count for c in chunks[name]):
            chunks[name] = [pa.Array.from_buffers(t, total, [None, pa.py_buffer(filled[name])])]
        out[name] = pa.chunked_array(chunks[name], type=t)
    return pa.table(out)


def _runs(groups: list[int], costs: list[int], parts: int) -> list[tuple[int, list[int]]]:
    """``groups`` cut into at most ``parts`` contiguous runs of about equal cost, each with
    its cost."""
    sizes = np.cumsum(costs)
    if not len(sizes):
        return []
    ends = np.searchsorted(sizes, sizes[-1] * np.arange(1, parts) / parts, side="right")
    bounds = np.unique(np.concatenate([[0], np.minimum(ends, len(groups)), [len(groups)]]))
    return [(int(sizes[hi - 1] - (sizes[lo - 1] if lo else 0)), groups[lo:hi])
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if hi > lo]


def _run(tasks: list[tuple[int, Callable[[], Any]]], threads: int) -> dict[int, Any]:
    """Every task's result by its place in ``tasks``, the largest (by cost) started first."""
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][0])
    if threads < 2:
        return {i: tasks[i][1]() for i in order}
    return dict(zip(order, _executor(threads).map(lambda i: tasks[i][1](), order), strict=True))


def _native_columns(meta: Any, arrow_schema: Any, columns: list[str]) -> dict[str, int]:
    """The columns our page kernels decode, with their index in the footer: flat columns
    whose Arrow type holds the physical values as they are (4- and 8-byte integers, decimals
    read as their integers, dates, floats), and strings (as Arrow dictionaries of int32
    codes, or as plain or large strings)."""
    import pyarrow as pa

    from .parquet_pages import native_dtype

    index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    out = {}
    for name in columns:
        i = index.get(name)
        if i is None:
            continue
        column = meta.schema.column(i)
        if column.max_repetition_level or column.max_definition_level > 1:
            continue
        t = arrow_schema.field(name).type
        if column.physical_type == "BYTE_ARRAY":  # strings, as codes or as themselves
            if (pa.types.is_dictionary(t) and t.value_type == pa.string()
                    and t.index_type == pa.int32()) or t in (pa.string(), pa.large_string()):
                out[name] = i
            continue
        dtype = native_dtype(column.physical_type)
        if dtype is None:
            continue
        bits = 8 * dtype.itemsize
        if ((pa.types.is_integer(t) and t.bit_width == bits)
                or (pa.types.is_floating(t) and t.bit_width == bits and dtype.kind == "f")
                or (pa.types.is_date32(t) and bits == 32)):
            out[name] = i
    return out


_NO_MASK = np.empty(0, np.bool_)


class _Decoded:
    """One column decoded chunk by chunk (:func:`decode`, per row group) into one
    array; a chunk the kernels do not read (:class:`~.parquet_pages.NotNative`) sends the
    whole column to pyarrow.

    A string column takes two rounds. Read as a dictionary (an Arrow dictionary type):
    :func:`decode` reads each chunk's pages and dictionary, :func:`merge` joins the chunks'
    dictionaries into one (sorted and distinct, unless ``sort`` is off: then one after
    another), and :func:`finish` turns each chunk's indices straight into codes of that
    dictionary; the column is then one dictionary array, with no per-row-group
    dictionaries left to merge row by row. Read as strings (a plain string type, however
    the pages store them): :func:`decode` finds each row's length and bytes, :func:`merge`
    lays the rows out one after another (Arrow's offsets), :func:`finish` copies each
    chunk's bytes there; the column is one string array."""

    def __init__(self, meta: Any, name: str, index: int, groups: list[int], total: int,
                 arrow_type: Any = None):
        import pyarrow as pa

        from .parquet_pages import NotNative, chunk_of

        self.name = name
        self.chunks: dict[int, Any] = {}
        self.native = True
        self.text = meta.schema.column(index).physical_type == "BYTE_ARRAY"
        self.plain = self.text and not pa.types.is_dictionary(arrow_type)  # rows' own bytes
        self.sources = np.empty(total if self.plain else 0, np.int64)  # (string_lengths)
        self.starts = np.empty(0, np.int64)  # a plain column's offsets, after merge
        self.bytes = np.empty(0, np.uint8)
        self.pages: dict[int, Any] = {}  # a text chunk's pages, between the rounds
        self.lookup: dict[int, np.ndarray] = {}  # a text chunk's indices -> codes
        self.dictionary: Any = None
        try:
            for g in groups:
                self.chunks[g] = chunk_of(meta.row_group(g).column(index),
                                          meta.schema.column(index), self.text, self.plain)
        except NotNative:
            self.native = False
        self.costs = [meta.row_group(g).column(index).total_uncompressed_size
                      + 8 * meta.row_group(g).num_rows for g in groups]
        rows = total if self.native else 0  # (a column left to pyarrow needs no arrays)
        dtype = next(iter(self.chunks.values())).dtype if self.chunks else np.dtype(np.int64)
        self.values = np.empty(rows, dtype)
        optional = meta.schema.column(index).max_definition_level > 0
        self.valid = np.empty(rows, np.bool_) if optional else None
        self.nulls: dict[int, int] = {}  # by row group: tasks on several threads write it

    def decode(self, data: Any, group: int, at: int) -> None:
        """A row group's chunk decoded into the column's array from row ``at`` (a string
        column's pages only read: see :func:`finish`)."""
        from .parquet_pages import NotNative, decode_pages, read_pages, string_lengths

        if not self.native:
            return
        chunk = self.chunks[group]
        try:
            pages = read_pages(data, chunk)
            if self.plain:  # each row's length (the values' array) and where its bytes are
                self.pages[group] = pages
                lengths, valid = self._arrays(group, at)
                self.nulls[group] = string_lengths(pages, lengths,
                                                   self.sources[at: at + chunk.rows], valid)
            elif self.text:
                self.pages[group] = pages
            else:
                self.nulls[group] = decode_pages(pages, *self._arrays(group, at))
        except NotNative:
            self.native = False

    def _arrays(self, group: int, at: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self.chunks[group].rows
        # (a required column's kernels take an empty mask: one compiled variant per type)
        valid = _NO_MASK if self.valid is None else self.valid[at: at + rows]
        return self.values[at: at + rows], valid

    def merge(self, groups: list[int], sort: bool) -> None:
        """A string column's one dictionary from its chunks' (between the rounds)."""
        import pyarrow as pa

        from .strings import sort_unique

        if not self.native:
            self.pages.clear()
            return
        if self.plain:  # the rows' bytes one after another
            self.starts = np.zeros(len(self.values) + 1, np.int64)
            self.starts[1:] = self.values  # (then summed in place: a cast inside cumsum is slow)
            np.cumsum(self.starts, out=self.starts)
            self.bytes = np.empty(int(self.starts[-1]), np.uint8)
            return
        parts = [self.pages[g].entries for g in groups]
        sizes = np.array([len(offsets) - 1 for offsets, _ in parts], np.int64)
        joined = pa.concat_arrays([
            pa.Array.from_buffers(pa.string(), len(offsets) - 1,
                                  [None, pa.py_buffer(offsets), pa.py_buffer(text)])
            for offsets, text in parts]) if parts else pa.array([], pa.string())
        if sort:
            self.dictionary, lookup = sort_unique(joined)
        else:
            self.dictionary, lookup = joined, np.arange(len(joined), dtype=np.int32)
        bases = np.concatenate([[0], np.cumsum(sizes)])
        for g, lo, hi in zip(groups, bases[:-1], bases[1:], strict=True):
            self.lookup[g] = lookup[lo:hi]

    def finish(self, group: int, at: int) -> None:
        """A string column's chunk: its indices as codes of the merged dictionary."""
        from .parquet_pages import NotNative, copy_strings, decode_pages

        if not self.native:
            return
        if self.plain:
            rows = self.chunks[group].rows
            copy_strings(self.pages.pop(group), self.values[at: at + rows],
                         self.sources[at: at + rows], self.starts[at: at + rows], self.bytes)
            return
        try:
            self.nulls[group] = decode_pages(self.pages.pop(group), *self._arrays(group, at),
                                             self.lookup[group])
        except NotNative:
            self.native = False

    def array(self, arrow_type: Any, reader: Any, groups: list[int]) -> Any:
        """The column as an Arrow array (its values' memory, no copy)."""
        import pyarrow as pa

        if not self.native:
            return reader.read_row_groups(groups, columns=[self.name],
                                          use_threads=False).column(0)
        nulls = sum(self.nulls.values())
        mask = None
        if self.valid is not None and nulls:
            mask = pa.py_buffer(np.packbits(self.valid, bitorder="little"))
        if self.plain:  # int32 offsets while they fit, as Arrow's string type
            wide = len(self.bytes) >= 2**31 or arrow_type == pa.large_string()
            starts = self.starts if wide else self.starts.astype(np.int32)
            return pa.chunked_array([pa.Array.from_buffers(
                pa.large_string() if wide else pa.string(), len(self.values),
                [mask, pa.py_buffer(starts), pa.py_buffer(self.bytes)], null_count=nulls)])
        if not self.text:
            return pa.chunked_array([pa.Array.from_buffers(
                arrow_type, len(self.values), [mask, pa.py_buffer(self.values)],
                null_count=nulls)])
        codes = pa.Array.from_buffers(pa.int32(), len(self.values),
                                      [mask, pa.py_buffer(self.values)], null_count=nulls)
        return pa.chunked_array([pa.DictionaryArray.from_arrays(codes, self.dictionary,
                                                                safe=False)], type=arrow_type)


@dataclass(frozen=True)
class _Piece:
    cost: int  # bytes decompressed and written
    name: str
    groups: list[int]
    fill: bool  # copied into the column's one array (a cut fixed-width column)


def _pieces(meta: Any, arrow_schema: Any, groups: list[int], columns: list[str],
            threads: int, scaled: set[str]) -> list[_Piece]:
    """The pieces to read, in the columns' order. The cost is the bytes decompressed and
    written: a dictionary-encoded decimal column of 5 MB pages takes as long to decode as
    96 MB of plain decimal128 values (TPC-H's ``l_discount``). Decimal and string columns
    are always cut (their chunks are converted one by one anyway); an integer, date or float
    column only while it alone costs more than a thread's share, since its pieces are then
    copied into one array."""
    import pyarrow as pa

    index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    costs: dict[str, np.ndarray] = {}
    cut: dict[str, bool] = {}
    for name in columns:
        column = index.get(name)
        if column is None:  # nested or renamed: pyarrow reads it whole
            costs[name], cut[name] = np.zeros(len(groups), np.int64), False
            continue
        t = arrow_schema.field(name).type
        costs[name] = np.array([meta.row_group(g).column(column).total_uncompressed_size
                                + _byte_width(t) * meta.row_group(g).num_rows
                                for g in groups], dtype=np.int64)
        cut[name] = (pa.types.is_decimal(t) or is_text(t) or pa.types.is_dictionary(t)
                     or name in scaled)
    share = sum(int(c.sum()) for c in costs.values()) / threads
    fill = {name for name in columns if not cut[name] and name in index
            and _numpy_type(arrow_schema.field(name).type) is not None
            and costs[name].sum() > share and len(groups) > 1}
    out = []
    for name in columns:
        parts = min(threads, len(groups)) if cut[name] or name in fill else 1
        sizes = np.cumsum(costs[name])
        # contiguous runs of about equal cost, each at least one row group
        ends = np.searchsorted(sizes, sizes[-1] * np.arange(1, parts) / parts, side="right")
        bounds = np.concatenate([[0], ends, [len(groups)]])
        bounds = np.minimum(np.maximum(bounds, np.arange(parts + 1)), len(groups))
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            if hi > lo:
                before = int(sizes[lo - 1]) if lo else 0
                out.append(_Piece(int(sizes[hi - 1]) - before, name, groups[lo:hi],
                                  name in fill))
    return out


def _numpy_type(t: Any) -> Any:
    """The NumPy dtype holding Arrow fixed-width type ``t``'s values as they are (dates as
    int32 days), or None (booleans are bits; decimals, strings)."""
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return t.to_pandas_dtype()
    if pa.types.is_date32(t):
        return np.int32
    return None


def _values(chunk: Any) -> np.ndarray:
    """A fixed-width Arrow array's values as NumPy, no copy."""
    dtype = _numpy_type(chunk.type)
    data = np.frombuffer(chunk.buffers()[1], dtype=dtype)
    return data[chunk.offset : chunk.offset + len(chunk)]


def _byte_width(t: Any) -> int:
    """Bytes per value Arrow writes for type ``t`` (a string view's 16 for text)."""
    try:
        return max(1, t.bit_width // 8)
    except ValueError:
        return 16


def _executor(threads: int) -> ThreadPoolExecutor:
    global _pool, _pool_threads
    if _pool is None or _pool_threads != threads:
        if _pool is not None:
            _pool.shutdown(wait=False)
        _pool = ThreadPoolExecutor(threads, thread_name_prefix="hpc-parquet")
        _pool_threads = threads
    return _pool
