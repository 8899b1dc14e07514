"""Parquet row groups read on all of a rank's threads, balanced by bytes.

pyarrow's ``read_row_groups`` decodes one column per thread. A query's columns are rarely
of equal size (TPC-H Q6 reads ``l_extendedprice``, 41 MB compressed, beside three columns
of 5-10 MB; Q13 reads ``o_comment`` beside two integer columns), so one thread decodes the
large column while the others have finished. Here a column whose chunks the table converts
chunk by chunk anyway (decimals, strings) is also cut into runs of row groups, one per
thread; every piece is one single-threaded read, and the pieces are handed out largest
first. Other columns stay whole: one Arrow chunk is used without a copy, while pieces would
have to be concatenated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["read_row_groups"]

_pool: ThreadPoolExecutor | None = None
_pool_threads = 0


def read_row_groups(open_file: Callable[[], Any], meta: Any, groups: Sequence[int],
                    columns: Sequence[str], threads: int) -> Any:
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
        Threads to read on; with one, or with no column to cut, pyarrow reads as usual.
    """
    import pyarrow as pa

    whole = open_file()
    if threads < 2 or not groups:
        return whole.read_row_groups(list(groups), columns=list(columns))
    pieces = _pieces(meta, whole.schema_arrow, list(groups), list(columns), threads)
    if len(pieces) == len(columns):  # nothing cut: pyarrow's column per thread is the same
        return whole.read_row_groups(list(groups), columns=list(columns))

    def read(piece: tuple[int, str, list[int]]) -> Any:
        _, name, part = piece
        return open_file().read_row_groups(part, columns=[name], use_threads=False).column(0)

    order = sorted(range(len(pieces)), key=lambda i: -pieces[i][0])  # largest first
    done = dict(zip(order, _executor(threads).map(read, [pieces[i] for i in order]),
                    strict=True))
    chunks: dict[str, list[Any]] = {}
    types: dict[str, Any] = {}
    for i, (_, name, _) in enumerate(pieces):
        chunks.setdefault(name, []).extend(done[i].chunks)
        types.setdefault(name, done[i].type)  # a dictionary type where pyarrow keeps one
    return pa.table({name: pa.chunked_array(chunks[name], type=types[name])
                     for name in columns})


def _pieces(meta: Any, arrow_schema: Any, groups: list[int], columns: list[str],
            threads: int) -> list[tuple[int, str, list[int]]]:
    """``(cost, column, row groups)`` per piece, in the columns' order. The cost is the
    bytes decompressed and written: a dictionary-encoded decimal column of 5 MB pages takes
    as long to decode as 96 MB of plain decimal128 values (TPC-H's ``l_discount``)."""
    import pyarrow as pa

    index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    out = []
    for name in columns:
        column = index.get(name)
        if column is None:  # nested or renamed: pyarrow reads it whole
            out.append((0, name, groups))
            continue
        t = arrow_schema.field(name).type
        width = _byte_width(t)
        sizes = np.cumsum([meta.row_group(g).column(column).total_uncompressed_size
                           + width * meta.row_group(g).num_rows for g in groups])
        cut = (pa.types.is_decimal(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
               or pa.types.is_string_view(t) or pa.types.is_dictionary(t))
        parts = min(threads, len(groups)) if cut else 1
        # contiguous runs of about equal bytes, each at least one row group
        ends = np.searchsorted(sizes, sizes[-1] * np.arange(1, parts) / parts, side="right")
        bounds = np.concatenate([[0], ends, [len(groups)]])
        bounds = np.minimum(np.maximum(bounds, np.arange(parts + 1)), len(groups))
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            if hi > lo:
                before = int(sizes[lo - 1]) if lo else 0
                out.append((int(sizes[hi - 1]) - before, name, groups[lo:hi]))
    return out


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
