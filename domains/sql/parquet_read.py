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
                    scaled: Collection[str] = ()) -> Any:
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
    """
    import pyarrow as pa

    whole = open_file()
    if threads < 2 or not groups:  # one thread: this one (pyarrow's pool costs ~0.2 ms)
        return whole.read_row_groups(list(groups), columns=list(columns), use_threads=False)
    schema = whole.schema_arrow
    pieces = _pieces(meta, schema, list(groups), list(columns), threads, set(scaled))
    if len(pieces) == len(columns):  # nothing cut: pyarrow's column per thread is the same
        return whole.read_row_groups(list(groups), columns=list(columns))
    rows = {g: meta.row_group(g).num_rows for g in groups}
    first = dict(zip(groups, np.cumsum([0] + [rows[g] for g in groups[:-1]]), strict=True))
    total = sum(rows.values())
    # a cut fixed-width column: each piece copies its values into one array, on its thread
    filled = {name: np.empty(total, dtype=_numpy_type(schema.field(name).type))
              for name in {p.name for p in pieces if p.fill}}

    def read(piece: _Piece) -> Any:
        column = open_file().read_row_groups(piece.groups, columns=[piece.name],
                                             use_threads=False).column(0)
        if piece.fill and column.null_count == 0:
            at = int(first[piece.groups[0]])
            for chunk in column.chunks:
                filled[piece.name][at : at + len(chunk)] = _values(chunk)
                at += len(chunk)
        return column

    order = sorted(range(len(pieces)), key=lambda i: -pieces[i].cost)  # largest first
    done = dict(zip(order, _executor(threads).map(read, [pieces[i] for i in order]),
                    strict=True))
    chunks: dict[str, list[Any]] = {}
    types: dict[str, Any] = {}
    for i, piece in enumerate(pieces):
        chunks.setdefault(piece.name, []).extend(done[i].chunks)
        types.setdefault(piece.name, done[i].type)  # a dictionary type where pyarrow keeps one
    out = {}
    for name in columns:
        t = types[name]
        if name in filled and not any(c.null_count for c in chunks[name]):
            chunks[name] = [pa.Array.from_buffers(t, total, [None, pa.py_buffer(filled[name])])]
        out[name] = pa.chunked_array(chunks[name], type=t)
    return pa.table(out)


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
