"""Parquet column chunks of fixed-width values decoded by our own kernels.

pyarrow decodes a page into an Arrow array, and the engine then copies or converts it. Here
a column chunk of INT32, INT64, FLOAT or DOUBLE values is decoded straight into the scan's
array: one kernel reads the chunk's Thrift page headers, each page is decompressed into one
buffer (Snappy by cramjam, the other codecs by Arrow's), and one kernel expands every page's
RLE/bit-packed hybrid runs (dictionary indices, definition levels) and gathers the
dictionary's values. The kernels hold no GIL, so the chunks of a scan decode on all of a
rank's threads at once (:mod:`.parquet_read`).

What pays (one thread, against pyarrow reading the same 6M-row columns): Snappy. On 8-byte
keys and prices that compress by only 1.4-1.9x it is 65% of pyarrow's time, and cramjam's
decompressor runs at 1.5-2.2x the speed of the one Arrow ships (57 MB of such pages: 77 ms
against 35). The index kernel walks the bit-packed words with one cursor and looks each
index up in the same loop (1.1-1.8 ns an index; cutting each index out of the two words it
spans took twice that), and there is no Python per page beyond the decompression call. A
scan of four such columns on two threads: 75 ms with pyarrow, 43 ms here.

Dictionary-encoded strings (:func:`decode_text_chunk`) go the same way: the dictionary
page's strings become one offsets array and one bytes array, and the data pages' indices
are expanded into int32 codes by the same kernels (looked up in an identity dictionary).
pyarrow builds an Arrow dictionary array per row group through a general reader; on a
column of a few distinct strings (flags, modes, segments) the indices are all there is.

What is read: data pages v1 and v2, PLAIN and dictionary (``PLAIN_DICTIONARY``,
``RLE_DICTIONARY``) encodings mixed in one chunk (a writer falls back to PLAIN when its
dictionary grows too large), required and optional flat columns, every codec Arrow has;
strings only where every data page is dictionary-encoded. Anything else (other encodings,
nested columns, strings stored plain) raises :class:`NotNative`, and the caller reads the
column with pyarrow instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np

__all__ = ["NotNative", "Chunk", "Pages", "chunk_of", "copy_strings", "decode_chunk",
           "decode_pages", "decode_text_chunk", "native_dtype", "read_pages", "string_lengths"]

# parquet.thrift
_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 1, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY = 0, 2, 3, 8

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
    text : bool
        Strings (``BYTE_ARRAY``): ``dtype`` is then int32 (the codes of a dictionary-encoded
        chunk, :func:`decode_pages`; a chunk's lengths, :func:`string_lengths`).
    plain : bool
        Strings read as themselves (:func:`string_lengths`, :func:`copy_strings`): PLAIN data
        pages allowed beside dictionary-encoded ones.
    """

    start: int
    size: int
    rows: int
    dtype: np.dtype
    codec: str | None
    max_definition: int
    text: bool = False
    plain: bool = False


# Parquet's codec names -> Arrow's (Parquet's old LZ4 is Hadoop's framing: left to pyarrow)
_CODECS = {"UNCOMPRESSED": None, "SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli",
           "ZSTD": "zstd", "LZ4_RAW": "lz4_raw"}


def chunk_of(column: Any, schema_column: Any, text: bool = False,
             plain: bool = False) -> Chunk:
    """The :class:`Chunk` of a ``pyarrow.parquet.ColumnChunkMetaData`` and its
    ``ColumnSchema``; raises :class:`NotNative` for a chunk not decoded here. With ``text``,
    a chunk of dictionary-encoded strings (:func:`decode_text_chunk`); with ``plain``, a
    chunk of strings read as themselves, however stored (:func:`string_lengths`)."""
    if text or plain:
        if column.physical_type != "BYTE_ARRAY":
            raise NotNative(f"physical type {column.physical_type} read as strings")
        if not plain and not column.has_dictionary_page:
            raise NotNative("strings without a dictionary page")
        dtype = np.dtype(np.int32)
    else:
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
                 _CODECS[column.compression], schema_column.max_definition_level,
                 text or plain, plain)


_codecs: dict[str, Any] = {}


def _codec(name: str) -> Any:
    import pyarrow as pa

    codec = _codecs.get(name)
    if codec is None:
        codec = _codecs[name] = pa.Codec(name)
    return codec


def _inflate(codec: str | None, raw: np.ndarray, out: np.ndarray) -> None:
    """Decompress ``raw`` into all of ``out`` (exactly its size). Snappy, the common codec,
    goes through cramjam (1.5-2.2x the speed of Arrow's codec on poorly compressible
    integer pages), straight into ``out``."""
    if codec is None:
        if len(raw) != len(out):
            raise ValueError(f"{len(raw)} stored bytes for {len(out)}")
        out[:] = raw
        return
    try:
        if codec == "snappy" and _cramjam() is not None:
            got = _cramjam().snappy.decompress_raw_into(raw, out)
        else:
            body = np.frombuffer(_codec(codec).decompress(raw, decompressed_size=len(out)),
                                 np.uint8)
            got = len(body)
            out[:got] = body[: len(out)]
    except Exception as exc:  # noqa: BLE001 - the codecs' own error types: a damaged page
        raise ValueError(f"{codec} data that does not decompress ({exc})") from None
    if got != len(out):
        raise ValueError(f"{got} bytes after decompression, the header says {len(out)}")


_cramjam_module: Any = False


def _cramjam() -> Any:
    """cramjam, or None where it is not installed (Arrow's codec then)."""
    global _cramjam_module
    if _cramjam_module is False:
        try:
            import cramjam
        except ImportError:
            cramjam = None
        _cramjam_module = cramjam
    return _cramjam_module


# columns of the page table _page_headers fills, one row per page
(_KIND, _AT, _STORED, _SIZE, _COUNT, _ENCODING, _LEVEL_ENCODING, _LEVEL_BYTES, _REPEAT_BYTES,
 _COMPRESSED, _FIELDS) = range(11)
_TABLE_FULL = -(1 << 62)  # _page_headers: more pages than the table's rows
# _decode_pages' errors (negative), with the page they occurred in
(_TOO_MANY, _SHORT_LEVELS, _SHORT_VALUES, _NO_DICTIONARY, _BAD_INDICES, _WIDE_INDICES,
 _ENCODING_UNREAD, _LEVELS_UNREAD, _NESTED, _ENDED) = range(-1, -11, -1)


def decode_chunk(data: Any, chunk: Chunk, values: np.ndarray, valid: np.ndarray) -> int:
    """Decode ``chunk`` of the file's bytes ``data`` into ``values`` (and, for an optional
    column, ``valid``), both of ``chunk.rows`` elements; returns the number of NULLs.

    The page headers are read by one kernel, each page is decompressed into one buffer (the
    only per-page Python), and one kernel decodes every page. A NULL's value is 0. Raises
    :class:`NotNative` for a page these kernels do not read, and ``ValueError`` for a chunk
    whose pages do not add up (a damaged file).
    """
    if chunk.text:
        raise ValueError("a chunk of strings: decode_text_chunk")
    return decode_pages(read_pages(data, chunk), values, valid)


_NO_ENTRIES = (np.zeros(1, np.int32), np.empty(0, np.uint8))


def decode_text_chunk(data: Any, chunk: Chunk, codes: np.ndarray,
                      valid: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Decode a chunk of dictionary-encoded strings (``chunk.text``) as :func:`decode_chunk`
    does: ``codes`` (int32) get each row's index into the chunk's dictionary (0 for a
    NULL); returns the NULLs and the dictionary as Arrow's string layout, int32 offsets
    (one more than the strings) and their UTF-8 bytes. A data page not dictionary-encoded
    (a writer's fallback to PLAIN) raises :class:`NotNative`. :func:`read_pages` and
    :func:`decode_pages` do the same in two steps, indices mapped to other codes."""
    pages = read_pages(data, chunk)
    offsets, text = pages.entries
    identity = np.arange(len(offsets) - 1, dtype=np.int32)
    return decode_pages(pages, codes, valid, identity), offsets, text


@dataclass(frozen=True)
class Pages:
    """A chunk's pages read and decompressed (:func:`read_pages`), not yet decoded.

    Attributes
    ----------
    chunk : Chunk
    body : numpy.ndarray
        The decompressed pages, each at ``offsets[page]`` (8-byte aligned, padded).
    offsets : numpy.ndarray
    table : numpy.ndarray
        One row per page: its header's fields.
    dictionary : numpy.ndarray
        The dictionary page's values (empty without one); for strings, nothing: see
        ``entries``.
    entries : tuple of numpy.ndarray
        A text chunk's dictionary, int32 offsets and UTF-8 bytes (Arrow's string layout).
    """

    chunk: Chunk
    body: np.ndarray
    offsets: np.ndarray
    table: np.ndarray
    dictionary: np.ndarray
    entries: tuple[np.ndarray, np.ndarray] = _NO_ENTRIES


def _where(chunk: Chunk) -> str:
    return f"Parquet column chunk at byte {chunk.start}"


def read_pages(data: Any, chunk: Chunk) -> Pages:
    """Read the page headers of ``chunk`` (one kernel) and decompress its pages into one
    buffer (the only per-page Python); a dictionary page's values are kept, a text chunk's
    strings laid out as Arrow's. Raises :class:`NotNative` and ``ValueError`` as
    :func:`decode_chunk` does."""
    empty = np.empty(0, np.uint8)
    if chunk.rows == 0:  # (a writer may point an empty chunk at no page at all)
        return Pages(chunk, empty, np.zeros(1, np.int64), np.empty((0, _FIELDS), np.int64),
                     np.empty(0, chunk.dtype))
    where = _where(chunk)
    buf = np.frombuffer(data, np.uint8, count=chunk.size, offset=chunk.start)
    table = np.empty((max(8, chunk.size // 16384), _FIELDS), np.int64)
    pages = _page_headers(buf, table)
    while pages == _TABLE_FULL:  # small pages: a larger table
        table = np.empty((2 * len(table), _FIELDS), np.int64)
        pages = _page_headers(buf, table)
    if pages < 0:
        raise ValueError(f"{where}: a damaged page header (byte {chunk.start - pages - 1})")
    table = table[:pages]
    if chunk.text and not chunk.plain:  # codes of strings stored PLAIN: left to pyarrow
        data_pages = (table[:, _KIND] == _DATA_PAGE) | (table[:, _KIND] == _DATA_PAGE_V2)
        encodings = table[data_pages, _ENCODING]
        if ((encodings != _PLAIN_DICTIONARY) & (encodings != _RLE_DICTIONARY)).any():
            raise NotNative("strings stored plain in a data page")
    headers = table[:, :_ENCODING + 1].tolist()  # Python ints: the loops below are per page
    # each page decompressed at an 8-byte boundary, 16 bytes apart (the index kernels read
    # aligned 64-bit words, one past the last; _decode_pages zeroes those bytes)
    offsets = [0] * (pages + 1)
    for page, (kind, _, stored, size, _, _) in enumerate(headers):
        if kind not in (_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2, _INDEX_PAGE):
            raise NotNative(f"page type {kind}")
        if size < 0 or stored < 0:
            raise ValueError(f"{where}: a page of negative size")
        offsets[page + 1] = offsets[page] + (0 if kind == _INDEX_PAGE else (size + 23) // 8 * 8)
    body = np.empty(offsets[-1] // 8, np.uint64).view(np.uint8)
    dictionary = np.empty(0, chunk.dtype)
    entries = _NO_ENTRIES
    for page, (kind, at, stored, size, count, encoding) in enumerate(headers):
        if kind == _INDEX_PAGE:
            continue
        o = offsets[page]
        raw = buf[at: at + stored]
        try:
            if kind == _DATA_PAGE_V2:  # levels stored uncompressed before the values
                levels = int(table[page, _LEVEL_BYTES] + table[page, _REPEAT_BYTES])
                body[o: o + levels] = raw[:levels]
                _inflate(chunk.codec if table[page, _COMPRESSED] else None, raw[levels:],
                         body[o + levels: o + size])
            else:
                _inflate(chunk.codec, raw, body[o: o + size])
        except ValueError as exc:
            raise ValueError(f"{where}, page at byte {chunk.start + at}: {exc}") from None
        if kind == _DICTIONARY_PAGE:
            if encoding not in (_PLAIN, _PLAIN_DICTIONARY):
                raise NotNative(f"dictionary page encoding {encoding}")
            if chunk.text:  # the strings laid out as Arrow's
                starts, text, ok = _byte_arrays(body, o, o + size, count)
                if not ok:
                    raise ValueError(f"{where}: a dictionary page of {count} strings in "
                                     f"{size} bytes")
                entries = (starts, text)
                continue
            if count * chunk.dtype.itemsize > size:
                raise ValueError(f"{where}: a dictionary page of {count} values in {size} "
                                 "bytes")
            dictionary = body[o: o + count * chunk.dtype.itemsize].view(chunk.dtype)
    return Pages(chunk, body, np.array(offsets, np.int64), table, dictionary, entries)


def decode_pages(pages: Pages, values: np.ndarray, valid: np.ndarray,
                 lookup: np.ndarray | None = None) -> int:
    """Decode :func:`read_pages`' data pages into ``values`` and ``valid`` (as
    :func:`decode_chunk`); a dictionary index ``i`` becomes ``lookup[i]`` (by default the
    dictionary page's values; for a text chunk, the codes its strings get). Returns the
    NULLs."""
    chunk = pages.chunk
    if chunk.rows == 0:
        return 0
    where = _where(chunk)
    if len(values) != chunk.rows or (chunk.max_definition and len(valid) != chunk.rows):
        raise ValueError(f"{where}: {chunk.rows} rows need values (and, for an optional "
                         f"column, a mask) of that length, not {len(values)} and {len(valid)}")
    dictionary = pages.dictionary if lookup is None else lookup
    if dictionary.dtype != values.dtype:
        raise ValueError(f"{where}: {dictionary.dtype} dictionary values for {values.dtype}")
    table = pages.table
    error = np.zeros(2, np.int64)
    nulls = _decode_pages(pages.body, pages.offsets, table, dictionary, values,
                          values.view(np.uint8), valid, chunk.max_definition > 0, error)
    if nulls >= 0:
        return int(nulls)
    _raise(chunk, table, error)
    return 0  # (not reached)


def _raise(chunk: Chunk, table: np.ndarray, error: np.ndarray) -> None:
    """The exception of a page kernel's error ``(code, page)``."""
    where = _where(chunk)
    code, page = int(error[0]), int(error[1])
    if code == _ENDED:
        raise ValueError(f"{where}: {page} values, expected {chunk.rows}")
    at = f"{where}, page at byte {chunk.start + int(table[page, _AT])}"
    if code == _ENCODING_UNREAD:
        raise NotNative(f"value encoding {table[page, _ENCODING]}")
    if code == _LEVELS_UNREAD:
        raise NotNative(f"definition level encoding {table[page, _LEVEL_ENCODING]}")
    if code == _NESTED:
        raise NotNative("repetition levels (a nested column)")
    reason = {_TOO_MANY: f"its pages hold more than its {chunk.rows} values",
              _SHORT_LEVELS: "fewer definition levels than values",
              _SHORT_VALUES: "fewer values than its header counts",
              _NO_DICTIONARY: "dictionary-encoded without a dictionary page",
              _BAD_INDICES: "fewer dictionary indices than values, or one past the dictionary",
              _WIDE_INDICES: "dictionary indices of more than 32 bits"}[code]
    raise ValueError(f"{at}: {reason}")


def string_lengths(pages: Pages, lengths: np.ndarray, sources: np.ndarray,
                   valid: np.ndarray) -> int:
    """First step of reading a chunk of strings as themselves (``chunk.plain``): each row's
    length in bytes into ``lengths`` (int32; 0 for a NULL) and where its bytes are into
    ``sources`` (int64: a position in the pages' buffer, or ``-1 - entry`` for an entry of
    the dictionary page), NULLs into ``valid`` as :func:`decode_chunk`; returns the NULLs.
    PLAIN pages and dictionary-encoded ones may follow each other in one chunk.
    :func:`copy_strings` then writes the bytes wherever the caller's offsets say."""
    chunk = pages.chunk
    if not chunk.plain:
        raise ValueError("string_lengths reads a chunk of strings (chunk_of(..., plain=True))")
    if chunk.rows == 0:
        return 0
    where = _where(chunk)
    if len(lengths) != chunk.rows or len(sources) != chunk.rows or (
            chunk.max_definition and len(valid) != chunk.rows):
        raise ValueError(f"{where}: {chunk.rows} rows need lengths, sources (and, for an "
                         "optional column, a mask) of that length")
    error = np.zeros(2, np.int64)
    nulls = _string_pages(pages.body, pages.offsets, pages.table, pages.entries[0], lengths,
                          sources, valid, chunk.max_definition > 0, error)
    if nulls >= 0:
        return int(nulls)
    _raise(chunk, pages.table, error)
    return 0  # (not reached)


def copy_strings(pages: Pages, lengths: np.ndarray, sources: np.ndarray, starts: np.ndarray,
                 out: np.ndarray) -> None:
    """Second step: each row's bytes (see :func:`string_lengths`) to ``out[starts[i]:]``."""
    offsets, text = pages.entries
    _copy_strings(pages.body, offsets, text, lengths, sources, starts, out)


@nb.njit(cache=True, nogil=True)
def _page_headers(buf: np.ndarray, table: np.ndarray) -> int:
    """Read the Thrift (compact protocol) page headers of a column chunk ``buf`` into
    ``table`` (one row per page, the columns named above); returns the pages,
    ``_TABLE_FULL`` when they are more than its rows, or ``-1 - byte`` for a header that
    is damaged or runs past the chunk. Fields not needed (statistics, CRCs) are skipped
    whatever their type."""
    pos = 0
    pages = 0
    end = len(buf)
    while pos < end:
        if pages == table.shape[0]:
            return _TABLE_FULL
        row = table[pages]
        row[:] = -1
        row[_LEVEL_ENCODING] = _RLE
        row[_LEVEL_BYTES] = 0
        row[_REPEAT_BYTES] = 0
        row[_COMPRESSED] = 1
        last = 0
        start = pos
        while True:
            kind, last, pos = _field(buf, pos, end, last)
            if pos < 0:
                return -1 - start
            if kind == 0:
                break
            if 1 <= last <= 3 and kind == 5:  # type, uncompressed and compressed size
                v, pos = _zigzag(buf, pos, end)
                row[(_KIND, _SIZE, _STORED)[last - 1]] = v
            elif (last == 5 or last == 7 or last == 8) and kind == 12:
                pos = _page_fields(buf, pos, end, last, row)
            else:
                pos = _skip(buf, pos, end, kind)
            if pos < 0:
                return -1 - start
        row[_AT] = pos
        if row[_KIND] < 0 or row[_STORED] < 0 or pos + row[_STORED] > end:
            return -1 - start
        pos += row[_STORED]
        pages += 1
    return pages


@nb.njit(cache=True, nogil=True)
def _page_fields(buf: np.ndarray, pos: int, end: int, which: int, row: np.ndarray) -> int:
    """The fields of a data page header (``which`` 5), dictionary page header (7) or data
    page header v2 (8) that decoding needs; returns the position after it (-1: damaged)."""
    last = 0
    while pos >= 0:
        kind, last, pos = _field(buf, pos, end, last)
        if pos < 0 or kind == 0:
            return pos
        if kind == 5 and (last == 1 or (last == 2 and which != 8) or (last == 3 and which == 5)
                          or (which == 8 and 4 <= last <= 6)):
            v, pos = _zigzag(buf, pos, end)
            if last == 1:
                row[_COUNT] = v
            elif last == 2 or last == 4:
                row[_ENCODING] = v
            elif last == 3:
                row[_LEVEL_ENCODING] = v
            elif last == 5:
                row[_LEVEL_BYTES] = v
            else:
                row[_REPEAT_BYTES] = v
        elif which == 8 and last == 7 and (kind == 1 or kind == 2):
            row[_COMPRESSED] = 1 if kind == 1 else 0
        else:
            pos = _skip(buf, pos, end, kind)
    return -1


@nb.njit(cache=True, nogil=True)
def _zigzag(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, next position); position -1 past ``end``."""
    out = 0
    shift = 0
    while pos < end and shift < 64:
        b = np.int64(buf[pos])
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return (out >> 1) ^ -(out & 1), pos
        shift += 7
    return 0, -1


@nb.njit(cache=True, nogil=True)
def _skip(buf: np.ndarray, pos: int, end: int, kind: int) -> int:
    """The position after a Thrift value of wire type ``kind`` (a struct's field: a bool's
    value is in its type); -1 for a damaged value."""
    if pos < 0:
        return -1
    if kind == 1 or kind == 2:
        return pos
    if kind == 3:
        return pos + 1 if pos < end else -1
    if 4 <= kind <= 6:
        return _zigzag(buf, pos, end)[1]
    if kind == 7:
        return pos + 8 if pos + 8 <= end else -1
    if kind == 8:
        n, pos = _zigzag(buf, pos, end)  # a varint length (not zigzag: undo it)
        if pos < 0:
            return -1
        n = (n << 1) ^ (n >> 63)
        return pos + n if 0 <= n and pos + n <= end else -1
    if kind == 9 or kind == 10:
        if pos >= end:
            return -1
        head = np.int64(buf[pos])
        pos += 1
        n, elem = head >> 4, head & 0x0F
        if n == 15:
            n, pos = _zigzag(buf, pos, end)
            n = (n << 1) ^ (n >> 63)
        for _ in range(n):
            pos = pos + 1 if elem == 1 or elem == 2 else _skip(buf, pos, end, elem)
            if pos < 0 or pos > end:
                return -1
        return pos
    if kind == 11:
        n, pos = _zigzag(buf, pos, end)
        n = (n << 1) ^ (n >> 63)
        if n == 0 or pos < 0:
            return pos
        if pos >= end:
            return -1
        kinds = np.int64(buf[pos])
        pos += 1
        for _ in range(n):
            for elem in (kinds >> 4, kinds & 0x0F):
                pos = pos + 1 if elem == 1 or elem == 2 else _skip(buf, pos, end, elem)
                if pos < 0 or pos > end:
                    return -1
        return pos
    if kind == 12:
        last = 0
        while pos >= 0:
            elem, last, pos = _field(buf, pos, end, last)
            if pos < 0 or elem == 0:
                return pos
            pos = _skip(buf, pos, end, elem)
        return -1
    return -1


@nb.njit(cache=True, nogil=True)
def _field(buf: np.ndarray, pos: int, end: int, last: int) -> tuple[int, int, int]:
    """A struct's next field header after field id ``last``: (wire type, field id, position
    after the header); type 0 at the struct's end, position -1 past ``end``."""
    if pos < 0 or pos >= end:
        return 0, last, -1
    head = np.int64(buf[pos])
    pos += 1
    if head == 0:
        return 0, last, pos
    if head >> 4:
        return head & 0x0F, last + (head >> 4), pos
    fid, pos = _zigzag(buf, pos, end)
    return head & 0x0F, fid, pos


@nb.njit(cache=True, nogil=True)
def _data_page(body: np.ndarray, offsets: np.ndarray, table: np.ndarray, page: int,
               rows: int, row: int, optional: bool, valid: np.ndarray,
               error: np.ndarray) -> tuple[int, int, int, int]:
    """Data page ``page`` of a chunk of ``rows`` rows, its first row ``row``: (where its
    values start, where it ends, its rows, how many are present), its levels read into
    ``valid``; the first is a negative error code, also set in ``error`` = (code, page),
    when the page does not fit the chunk."""
    error[1] = page
    o = offsets[page]
    count = table[page, _COUNT]
    if count < 0 or row + count > rows:
        error[0] = _TOO_MANY
        return _TOO_MANY, 0, 0, 0
    end = o + table[page, _SIZE]
    start, present = _page_levels(body, o, end, table, page, optional, valid, row, count)
    if start < 0:
        error[0] = start
    return start, end, count, present


@nb.njit(cache=True, nogil=True)
def _page_levels(body: np.ndarray, o: int, end: int, table: np.ndarray, page: int,
                 optional: bool, valid: np.ndarray, row: int, count: int) -> tuple[int, int]:
    """A data page's definition levels (at ``body[o:end]``) into ``valid[row:row+count]``
    for an optional column; returns (where its values start, how many are present), or (a
    negative error code, 0). Zeroes the 16 bytes after ``end`` (the index kernels read
    whole words past the last)."""
    body[end: end + 16] = 0
    if table[page, _KIND] == _DATA_PAGE_V2:
        if table[page, _REPEAT_BYTES] > 0:
            return _NESTED, 0
        levels, start = o, o + table[page, _LEVEL_BYTES]
    elif optional:
        if table[page, _LEVEL_ENCODING] != _RLE:
            return _LEVELS_UNREAD, 0
        if end - o < 4:
            return _SHORT_LEVELS, 0
        levels = o + 4
        start = levels + (np.int64(body[o]) | (np.int64(body[o + 1]) << 8)
                          | (np.int64(body[o + 2]) << 16) | (np.int64(body[o + 3]) << 24))
    else:
        levels = start = o
    if start > end:
        return _SHORT_LEVELS, 0
    if not optional:
        return start, count
    if _expand_levels(body, levels, start, 1, valid, row, count) < count:
        return _SHORT_LEVELS, 0
    present = 0
    for i in range(row, row + count):
        if valid[i]:
            present += 1
    return start, present


@nb.njit(cache=True, nogil=True)
def _decode_pages(body: np.ndarray, offsets: np.ndarray, table: np.ndarray,
                  dictionary: np.ndarray, values: np.ndarray, value_bytes: np.ndarray,
                  valid: np.ndarray, optional: bool, error: np.ndarray) -> int:
    """Every data page of a chunk, decompressed in ``body`` at ``offsets``, into ``values``
    (``value_bytes`` the same memory) and ``valid``; returns the NULLs, or a negative error
    code with ``error`` = (code, page)."""
    rows = len(values)
    width = values.itemsize
    row = 0
    nulls = 0
    for page in range(table.shape[0]):
        kind = table[page, _KIND]
        if kind != _DATA_PAGE and kind != _DATA_PAGE_V2:
            continue
        start, end, count, present = _data_page(body, offsets, table, page, rows, row,
                                                optional, valid, error)
        if start < 0:
            return start
        nulls += count - present
        encoding = table[page, _ENCODING]
        if encoding == _PLAIN:
            if (end - start) // width < present:
                error[0] = _SHORT_VALUES
                return _SHORT_VALUES
            if present == count:
                value_bytes[row * width: (row + count) * width] = \
                    body[start: start + count * width]
            else:
                _scatter_bytes(body, start, width, valid, value_bytes, row, count)
        elif encoding == _PLAIN_DICTIONARY or encoding == _RLE_DICTIONARY:
            if len(dictionary) == 0 and present > 0:
                error[0] = _NO_DICTIONARY
                return _NO_DICTIONARY
            bits = np.int64(body[start]) if end > start else 0
            if bits > 32:
                error[0] = _WIDE_INDICES
                return _WIDE_INDICES
            if _gather_hybrid(body, start + 1, end, bits, dictionary, values, valid, row,
                              count, optional and present < count) < present:
                error[0] = _BAD_INDICES
                return _BAD_INDICES
        else:
            error[0] = _ENCODING_UNREAD
            return _ENCODING_UNREAD
        row += count
    if row != rows:
        error[0], error[1] = _ENDED, row
        return _ENDED
    return nulls


@nb.njit(cache=True, nogil=True)
def _string_pages(body: np.ndarray, offsets: np.ndarray, table: np.ndarray,
                  entries: np.ndarray, lengths: np.ndarray, sources: np.ndarray,
                  valid: np.ndarray, optional: bool, error: np.ndarray) -> int:
    """:func:`string_lengths`' kernel: every data page's rows (PLAIN: a 4-byte length, then
    the bytes; dictionary-encoded: indices into ``entries``, the dictionary's offsets);
    returns the NULLs, or a negative error code with ``error`` = (code, page)."""
    rows = len(lengths)
    size = len(entries) - 1
    row = 0
    nulls = 0
    for page in range(table.shape[0]):
        kind = table[page, _KIND]
        if kind != _DATA_PAGE and kind != _DATA_PAGE_V2:
            continue
        pos, end, count, present = _data_page(body, offsets, table, page, rows, row,
                                              optional, valid, error)
        if pos < 0:
            return pos
        nulls += count - present
        encoding = table[page, _ENCODING]
        if encoding == _PLAIN:
            for i in range(row, row + count):
                lengths[i] = 0
                sources[i] = 0
                if optional and not valid[i]:
                    continue
                if end - pos < 4:
                    error[0] = _SHORT_VALUES
                    return _SHORT_VALUES
                n = (np.int64(body[pos]) | (np.int64(body[pos + 1]) << 8)
                     | (np.int64(body[pos + 2]) << 16) | (np.int64(body[pos + 3]) << 24))
                pos += 4
                if n > end - pos:
                    error[0] = _SHORT_VALUES
                    return _SHORT_VALUES
                lengths[i] = n
                sources[i] = pos
                pos += n
        elif encoding == _PLAIN_DICTIONARY or encoding == _RLE_DICTIONARY:
            if size <= 0 and present > 0:
                error[0] = _NO_DICTIONARY
                return _NO_DICTIONARY
            bits = np.int64(body[pos]) if end > pos else 0
            if bits > 32:
                error[0] = _WIDE_INDICES
                return _WIDE_INDICES
            indices = np.empty(present, np.int64)
            if _expand_hybrid(body, pos + 1, end, bits, indices, present) < present:
                error[0] = _BAD_INDICES
                return _BAD_INDICES
            k = 0
            for i in range(row, row + count):
                lengths[i] = 0
                sources[i] = 0
                if optional and not valid[i]:
                    continue
                e = indices[k]
                k += 1
                if e < 0 or e >= size:
                    error[0] = _BAD_INDICES
                    return _BAD_INDICES
                lengths[i] = entries[e + 1] - entries[e]
                sources[i] = -1 - e
        else:
            error[0] = _ENCODING_UNREAD
            return _ENCODING_UNREAD
        row += count
    if row != rows:
        error[0], error[1] = _ENDED, row
        return _ENDED
    return nulls


@nb.njit(cache=True, nogil=True, boundscheck=False)
def _copy_strings(body: np.ndarray, entries: np.ndarray, text: np.ndarray,
                  lengths: np.ndarray, sources: np.ndarray, starts: np.ndarray,
                  out: np.ndarray) -> None:
    # byte loops at unsigned positions, which LLVM turns into vector copies: with signed
    # ones numba tests every index for a negative value (4x slower on strings of about 50
    # bytes; a slice assignment per string 2x)
    for i in range(len(lengths)):
        n = np.uint64(lengths[i])
        to = np.uint64(starts[i])
        s = sources[i]
        if s >= 0:
            at = np.uint64(s)
            for j in range(n):
                out[to + j] = body[at + j]
        else:
            at = np.uint64(entries[-1 - s])
            for j in range(n):
                out[to + j] = text[at + j]


@nb.njit(cache=True, nogil=True)
def _byte_arrays(body: np.ndarray, start: int, end: int,
                 count: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """``count`` PLAIN byte arrays (a 4-byte little-endian length, then the bytes) from
    ``body[start:end]`` as int32 offsets and the bytes back to back; False where they run
    past ``end`` or past 2 GiB (a damaged page)."""
    offsets = np.zeros(max(count, 0) + 1, np.int32)
    pos = start
    total = 0
    for i in range(count):
        if end - pos < 4:
            return offsets, body[:0], False
        n = (np.int64(body[pos]) | (np.int64(body[pos + 1]) << 8)
             | (np.int64(body[pos + 2]) << 16) | (np.int64(body[pos + 3]) << 24))
        pos += 4
        total += n
        if n > end - pos or total >= 2**31:
            return offsets, body[:0], False
        pos += n
        offsets[i + 1] = total
    out = np.empty(total, np.uint8)
    pos = np.uint64(start + 4)
    for i in range(count):  # unsigned positions: byte loops LLVM makes vector copies
        a, n = np.uint64(offsets[i]), np.uint64(offsets[i + 1] - offsets[i])
        for j in range(n):
            out[a + j] = body[pos + j]
        pos += n + np.uint64(4)
    return offsets, out, True


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


@nb.njit(cache=True, nogil=True)
def _expand_hybrid(buf: np.ndarray, pos: int, end: int, width: int, out: np.ndarray,
                   n: int) -> int:
    """The first ``n`` values of an RLE/bit-packed hybrid run list (``width`` bits each) into
    ``out[:n]``; returns the values read (fewer: the runs ended early)."""
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
                while bits < width:
                    acc |= np.int64(buf[pos]) << bits
                    pos += 1
                    bits += 8
                if k < n:
                    out[k] = acc & mask
                    k += 1
                acc >>= width
                bits -= width
        else:
            value = _fixed(buf, pos, width_bytes)
            pos += width_bytes
            m = min(head >> 1, n - k)
            out[k: k + m] = value
            k += m
    return k


@nb.njit(cache=True, nogil=True)
def _expand_levels(buf: np.ndarray, pos: int, end: int, width: int, out: np.ndarray,
                   at: int, n: int) -> int:
    """``n`` definition levels into ``out[at:at+n]`` as ``level != 0`` (present); returns
    the levels read."""
    levels = np.empty(n, np.int64)
    got = _expand_hybrid(buf, pos, end, width, levels, n)
    for i in range(got):
        out[at + i] = levels[i] != 0
    return got


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
    present = 0
    for row in range(at, at + n):
        if valid[row]:
            present += 1
    indices = np.empty(present, np.int64)
    got = _expand_hybrid(buf, pos, end, width, indices, present)
    used = 0
    for row in range(at, at + n):
        if not valid[row]:
            out[row] = 0
        elif used < got and indices[used] < len(dictionary):
            out[row] = dictionary[indices[used]]
            used += 1
        else:
            return used
    return used


@nb.njit(cache=True, nogil=True, boundscheck=False)
def _gather_required(buf: np.ndarray, pos: int, end: int, width: int,
                     dictionary: np.ndarray, out: np.ndarray, at: int, n: int) -> int:
    """:func:`_gather_hybrid` of a column without NULLs. ``buf`` is 8-byte aligned with 8
    bytes of padding after ``end``: the bit-packed indices are read as aligned 64-bit
    words (:func:`_unpack_gather`)."""
    words = buf[: (len(buf) // 8) * 8].view(np.uint64)
    k = 0
    size = len(dictionary)
    width_bytes = (width + 7) // 8
    while k < n and pos < end:
        head, pos = _varint(buf, pos)
        if head & 1:
            groups = head >> 1
            count = min(groups * 8, n - k)
            if pos + (count * width + 7) // 8 > end:
                return k
            if size == 0:
                return k
            if _unpack_gather(words, pos * 8, width, count, dictionary, out, at + k) >= size:
                return k  # an index past the dictionary (its rows hold clamped lookups)
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


@nb.njit(cache=True, nogil=True, boundscheck=False)
def _unpack_gather(words: np.ndarray, first_bit: int, width: int, count: int,
                   dictionary: np.ndarray, out: np.ndarray, at: int) -> int:
    """``count`` little-endian bit-packed dictionary indices of ``width`` (<= 32) bits from
    bit ``first_bit`` of ``words``, their entries written to ``out[at:]``; returns the
    largest index (an index past the dictionary is looked up clamped: the caller checks).
    One cursor walks the words in order (a load every 64 / width values): twice the speed
    of cutting each index out of the two words it spans, whose loads are scattered; the
    lookup in the same loop saves a pass over the indices."""
    q = first_bit >> 6
    w = np.uint64(width)
    mask = (np.uint64(1) << w) - np.uint64(1)
    cur = words[q] >> np.uint64(first_bit & 63)
    avail = np.uint64(64 - (first_bit & 63))  # bits of ``cur`` not yet used
    top = np.uint64(0)
    last = np.uint64(len(dictionary) - 1)
    for i in range(count):
        if avail >= w:
            v = cur & mask
            cur >>= w
            avail -= w
        else:  # the index's high bits are in the next word
            q += 1
            following = words[q]
            v = (cur | (following << avail)) & mask
            cur = following >> (w - avail)
            avail = np.uint64(64) - (w - avail)
        top = max(top, v)
        out[at + i] = dictionary[min(v, last)]
    return int(top)


@nb.njit(cache=True, nogil=True)
def _scatter_bytes(body: np.ndarray, start: int, width: int, valid: np.ndarray,
                   out: np.ndarray, at: int, n: int) -> None:
    """The present values (``width`` bytes each, from ``body[start:]``) at the rows of
    ``out[at:at+n]`` (bytes) ``valid`` marks; zero bytes at the others."""
    j = start
    for i in range(at, at + n):
        if valid[i]:
            out[i * width: (i + 1) * width] = body[j: j + width]
            j += width
        else:
            out[i * width: (i + 1) * width] = 0
