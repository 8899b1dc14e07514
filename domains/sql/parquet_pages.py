"""Parquet column chunks of fixed-width values decoded by our own kernels.

pyarrow decodes a page into an Arrow array, and the engine then copies or converts it. Here
a column chunk of INT32, INT64, FLOAT or DOUBLE values is decoded straight into the engine's
array: the page headers are read with the footer's Thrift reader, the pages are
decompressed by Arrow's codecs, and the kernels below expand the RLE/bit-packed hybrid
runs (dictionary indices, definition levels) and gather the dictionary's values. The
kernels hold no GIL, so the chunks of a scan decode on all of a rank's threads at once.

What is read: data pages v1 and v2, PLAIN and dictionary (``PLAIN_DICTIONARY``,
``RLE_DICTIONARY``) encodings mixed in one chunk (a writer falls back to PLAIN when its
dictionary grows too large), required and optional flat columns, every codec Arrow has.
Anything else (other encodings, nested columns, byte arrays) raises
:class:`NotNative`, and the caller reads the chunk with pyarrow instead.

Scans do not use these kernels yet: decoding alone, they are not faster than pyarrow's
(2.5-4 ns a dictionary index against pyarrow's 1.3-2, measured on a loaded machine). They
are the base of what pyarrow cannot do: predicates evaluated on a chunk's dictionary and
values gathered only for the rows a filter keeps (late materialisation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np

from .parquet_footer import _Reader

__all__ = ["NotNative", "Chunk", "chunk_of", "decode_chunk", "native_dtype"]

# parquet.thrift
_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 1, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY = 0, 2, 3, 8
_HEADER_MAX = 1 << 16  # a page header's bytes at most (statistics included)
_BLOCK = 1024  # dictionary indices unpacked, checked and gathered a block at a time

_PHYSICAL = {"INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
             "FLOAT": np.dtype(np.float32), "DOUBLE": np.dtype(np.float64)}


class NotNative(Exception):
    """A column chunk these kernels do not decode (the caller falls back to pyarrow)."""


def native_dtype(physical_type: str) -> np.dtype | None:
    """The NumPy type a Parquet physical type decodes to here, or None (not decoded here)."""
    return _PHYSICAL.get(physical_type)


@dataclass(frozen=True)
class Chunk:
    """Where one column chunk lies in its file and how to decode it.

    Attributes
    ----------
    start, size : int
        The chunk's first byte (its dictionary page, else its first data page) and its
        compressed bytes.
    rows : int
        Values in the chunk (the row group's rows, for a flat column).
    dtype : numpy.dtype
        The physical type's NumPy type.
    codec : str
        Arrow's codec name (``"snappy"``, ``"zstd"``, ...), or None when uncompressed.
    max_definition : int
        0 for a required column, 1 for an optional flat one.
    """

    start: int
    size: int
    rows: int
    dtype: np.dtype
    codec: str | None
    max_definition: int


# Parquet's codec names -> Arrow's (Parquet's old LZ4 is Hadoop's framing: left to pyarrow)
_CODECS = {"UNCOMPRESSED": None, "SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli",
           "ZSTD": "zstd", "LZ4_RAW": "lz4_raw"}


def chunk_of(column: Any, schema_column: Any) -> Chunk:
    """The :class:`Chunk` of a ``pyarrow.parquet.ColumnChunkMetaData`` and its
    ``ColumnSchema``; raises :class:`NotNative` for a chunk not decoded here."""
    dtype = native_dtype(column.physical_type)
    if dtype is None:
        raise NotNative(f"physical type {column.physical_type}")
    if schema_column.max_repetition_level or schema_column.max_definition_level > 1:
        raise NotNative("a nested column")
    if column.compression not in _CODECS:
        raise NotNative(f"codec {column.compression}")
    starts = [column.data_page_offset]
    if column.has_dictionary_page and column.dictionary_page_offset:
        starts.append(column.dictionary_page_offset)
    return Chunk(min(starts), column.total_compressed_size, column.num_values, dtype,
                 _CODECS[column.compression], schema_column.max_definition_level)


_codecs: dict[str, Any] = {}


def _codec(name: str) -> Any:
    import pyarrow as pa

    codec = _codecs.get(name)
    if codec is None:
        codec = _codecs[name] = pa.Codec(name)
    return codec


def _inflate(chunk: Chunk, raw: memoryview, size: int) -> np.ndarray:
    if chunk.codec is None:
        return np.frombuffer(raw, np.uint8)
    return np.frombuffer(_codec(chunk.codec).decompress(raw, decompressed_size=size), np.uint8)


def decode_chunk(data: Any, chunk: Chunk, values: np.ndarray, valid: np.ndarray) -> int:
    """Decode ``chunk`` of the file's bytes ``data`` into ``values`` (and, for an optional
    column, ``valid``), both of ``chunk.rows`` elements; returns the number of NULLs.

    A NULL's value is 0. Raises :class:`NotNative` for a page these kernels do not read,
    and ``ValueError`` for a chunk whose pages do not add up (a damaged file).
    """
    if chunk.rows == 0:  # (a writer may point an empty chunk at no page at all)
        return 0
    view = memoryview(data)
    at, end = chunk.start, chunk.start + chunk.size
    dictionary: np.ndarray | None = None
    row = nulls = 0
    while at < end:
        reader = _Reader(view[at: min(end, at + _HEADER_MAX)])
        header = {f.id: f.value for f in reader.struct()}
        at += reader.at
        kind, size, stored = header[1], header[2], header[3]
        raw = view[at: at + stored]
        at += stored
        if kind == _DICTIONARY_PAGE:
            page = {f.id: f.value for f in header[7]}
            if page.get(2, _PLAIN) not in (_PLAIN, _PLAIN_DICTIONARY):
                raise NotNative(f"dictionary page encoding {page.get(2)}")
            dictionary = _inflate(chunk, raw, size)[: page[1] * chunk.dtype.itemsize]
            dictionary = dictionary.view(chunk.dtype)
            continue
        if kind == _DATA_PAGE:
            page = {f.id: f.value for f in header[5]}
            count, encoding = page[1], page[2]
            body = _inflate(chunk, raw, size)
            levels_end = 0
            if chunk.max_definition:
                if page.get(3, _RLE) != _RLE:
                    raise NotNative(f"definition level encoding {page.get(3)}")
                levels_end = 4 + int(body[:4].view(np.uint32)[0])
            levels = body[4: levels_end]
            payload = body[levels_end:]
        elif kind == _DATA_PAGE_V2:
            page = {f.id: f.value for f in header[8]}
            count, encoding = page[1], page[4]
            if page.get(6, 0):
                raise NotNative("repetition levels (a nested column)")
            levels_end = page.get(5, 0)
            levels = np.frombuffer(raw[:levels_end], np.uint8)
            payload = (_inflate(chunk, raw[levels_end:], size - levels_end)
                       if page.get(7, True) else np.frombuffer(raw[levels_end:], np.uint8))
        elif kind == _INDEX_PAGE:
            continue
        else:
            raise NotNative(f"page type {kind}")
        if row + count > chunk.rows:
            raise ValueError(f"Parquet column chunk at byte {chunk.start}: its pages hold "
                             f"more than its {chunk.rows} values")
        present = count
        if chunk.max_definition:
            present = _levels(levels, count, valid, row)
            nulls += count - present
        if encoding == _PLAIN:
            plain = payload[: present * chunk.dtype.itemsize].view(chunk.dtype)
            if len(plain) < present:
                raise ValueError(f"Parquet page at byte {at - stored}: {len(plain)} of "
                                 f"{present} values")
            if chunk.max_definition:
                _scatter(plain, valid, values, row, count)
            else:
                values[row: row + count] = plain
        elif encoding in (_PLAIN_DICTIONARY, _RLE_DICTIONARY):
            if dictionary is None:
                raise ValueError(f"Parquet page at byte {at - stored}: dictionary-encoded "
                                 "without a dictionary page")
            got = _gather_hybrid(_padded(payload), 1, len(payload), int(payload[0]),
                                 dictionary, values, valid, row, count,
                                 chunk.max_definition > 0)
            if got < present:
                raise ValueError(f"Parquet page at byte {at - stored}: {got} of {present} "
                                 "dictionary indices")
        else:
            raise NotNative(f"value encoding {encoding}")
        row += count
    if row != chunk.rows:
        raise ValueError(f"Parquet column chunk at byte {chunk.start}: {row} values, "
                         f"expected {chunk.rows}")
    return nulls


def _padded(payload: np.ndarray) -> np.ndarray:
    """``payload`` in an 8-byte aligned buffer with 16 zero bytes after it (the kernels read
    bit-packed values as aligned 64-bit words, one past the last)."""
    out = np.zeros(len(payload) // 8 + 3, np.uint64).view(np.uint8)
    out[: len(payload)] = payload
    return out


def _levels(levels: np.ndarray, count: int, valid: np.ndarray, row: int) -> int:
    """Definition levels (max 1) of ``count`` values into ``valid[row:]``; values present."""
    got = _expand_levels(levels, 0, len(levels), 1, valid, row, count)
    if got < count:
        raise ValueError(f"Parquet page: {got} of {count} definition levels")
    return int(np.count_nonzero(valid[row: row + count]))


@nb.njit(cache=True, nogil=True)
def _varint(buf: np.ndarray, pos: int) -> tuple[int, int]:
    out = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (int(b) & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


@nb.njit(cache=True, nogil=True, inline="always")
def _fixed(buf: np.ndarray, pos: int, width_bytes: int) -> int:
    """An RLE run's value: ``width_bytes`` little-endian bytes."""
    value = 0
    for j in range(width_bytes):
        value |= np.int64(buf[pos + j]) << (8 * j)
    return value


@nb.njit(cache=True, nogil=True, inline="always")
def _next_packed(buf: np.ndarray, pos: int, acc: int, bits: int, width: int,
                 mask: int) -> tuple[int, int, int, int]:
    """The next ``width``-bit value of a bit-packed run read byte by byte: ``(value, pos,
    acc, bits)`` with the bytes read so far held in ``acc``'s low ``bits``."""
    while bits < width:
        acc |= np.int64(buf[pos]) << bits
        pos += 1
        bits += 8
    return acc & mask, pos, acc >> width, bits - width


@nb.njit(cache=True, nogil=True)
def _expand_levels(buf: np.ndarray, pos: int, end: int, width: int, out: np.ndarray,
                   at: int, n: int) -> int:
    """Expand an RLE/bit-packed hybrid run list of ``n`` definition levels into
    ``out[at:at+n]`` as ``level != 0`` (present); returns the levels read."""
    k = 0
    mask = (np.int64(1) << width) - 1
    width_bytes = (width + 7) // 8
    while k < n and pos < end:
        head, pos = _varint(buf, pos)
        if head & 1:
            count = (head >> 1) * 8
            if pos + (count * width + 7) // 8 > end:
                return k
            acc = np.int64(0)
            bits = 0
            for _ in range(count):
                level, pos, acc, bits = _next_packed(buf, pos, acc, bits, width, mask)
                if k < n:
                    out[at + k] = level != 0
                    k += 1
        else:
            value = _fixed(buf, pos, width_bytes)
            pos += width_bytes
            m = min(head >> 1, n - k)
            out[at + k: at + k + m] = value != 0
            k += m
    return k


@nb.njit(cache=True, nogil=True)
def _gather_hybrid(buf: np.ndarray, pos: int, end: int, width: int, dictionary: np.ndarray,
                   out: np.ndarray, valid: np.ndarray, at: int, n: int,
                   optional: bool) -> int:
    """Dictionary indices (RLE/bit-packed hybrid of ``width`` bits) of the present values of
    ``out[at:at+n]`` (all of them, or where ``valid`` says so), gathered from
    ``dictionary``; a NULL's value is 0. Returns the indices used; an index outside the
    dictionary stops the page (fewer indices than values: the caller's error)."""
    if not optional:
        return _gather_required(buf, pos, end, width, dictionary, out, at, n)
    row = at
    stop = at + n
    used = 0
    size = len(dictionary)
    mask = (np.int64(1) << width) - 1
    width_bytes = (width + 7) // 8
    while row < stop and pos < end:
        head, pos = _varint(buf, pos)
        if head & 1:
            count = (head >> 1) * 8
            if pos + (count * width + 7) // 8 > end:
                return used
            acc = np.int64(0)
            bits = 0
            for _ in range(count):
                index, pos, acc, bits = _next_packed(buf, pos, acc, bits, width, mask)
                while row < stop and not valid[row]:
                    out[row] = 0
                    row += 1
                if row >= stop:
                    break
                if index >= size:
                    return used
                out[row] = dictionary[index]
                row += 1
                used += 1
        else:
            index = _fixed(buf, pos, width_bytes)
            pos += width_bytes
            if index >= size:
                return used
            value = dictionary[index]
            repeat = head >> 1
            while repeat > 0 and row < stop:
                if valid[row]:
                    out[row] = value
                    repeat -= 1
                    used += 1
                else:
                    out[row] = 0
                row += 1
    while row < stop and not valid[row]:
        out[row] = 0
        row += 1
    return used


@nb.njit(cache=True, nogil=True, boundscheck=False)
def _gather_required(buf: np.ndarray, pos: int, end: int, width: int,
                     dictionary: np.ndarray, out: np.ndarray, at: int, n: int) -> int:
    """:func:`_gather_hybrid` of a column without NULLs. ``buf`` is 8-byte aligned with 8
    bytes of padding after ``end``: a bit-packed value is cut from two aligned 64-bit
    words, without a loop over its bytes."""
    words = buf[: (len(buf) // 8) * 8].view(np.uint64)
    scratch = np.empty(_BLOCK, np.int64)
    k = 0
    size = len(dictionary)
    mask = (np.uint64(1) << np.uint64(width)) - np.uint64(1)
    width_bytes = (width + 7) // 8
    while k < n and pos < end:
        head, pos = _varint(buf, pos)
        if head & 1:
            groups = head >> 1
            count = min(groups * 8, n - k)
            if pos + (count * width + 7) // 8 > end:
                return k
            first = pos * 8
            for block in range(0, count, _BLOCK):
                m = min(_BLOCK, count - block)
                top = np.int64(0)
                for i in range(m):  # the block's indices first: a loop without branches
                    bit = first + (block + i) * width
                    q = bit >> 6
                    r = np.uint64(bit & 63)
                    # the high word's bits above r, shifted in two steps as r may be 0
                    v = (words[q] >> r) | ((words[q + 1] << np.uint64(1)) <<
                                           (np.uint64(63) - r))
                    index = np.int64(v & mask)
                    top = max(top, index)
                    scratch[i] = index
                if top >= size:
                    return k + block
                for i in range(m):
                    out[at + k + block + i] = dictionary[scratch[i]]
            k += count
            pos += groups * width
        else:
            index = _fixed(buf, pos, width_bytes)
            pos += width_bytes
            if index >= size:
                return k
            m = min(head >> 1, n - k)
            out[at + k: at + k + m] = dictionary[index]
            k += m
    return k


@nb.njit(cache=True, nogil=True)
def _scatter(plain: np.ndarray, valid: np.ndarray, out: np.ndarray, at: int, n: int) -> None:
    """The present values ``plain`` at the rows of ``out[at:at+n]`` ``valid`` marks; 0 at
    the others."""
    j = 0
    for i in range(at, at + n):
        if valid[i]:
            out[i] = plain[j]
            j += 1
        else:
            out[i] = 0
