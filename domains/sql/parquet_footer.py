"""Parquet footers with integer-stored decimals read as plain integers.

Parquet stores a decimal of at most 18 digits as its unscaled INT64 (or INT32) value. pyarrow
turns every such value into a 16-byte ``decimal128``, which the engine then converts to
float64: 6M rows of TPC-H's ``l_extendedprice`` write 96 MB and read them back. Given a
footer whose schema no longer says "decimal" for those columns, pyarrow reads them as the
plain integers they are (8 bytes a row, the page's own values); the engine divides by
``10**scale`` itself, which gives the same correctly rounded float64 as before.

The footer is Thrift's compact protocol. :func:`read_struct` / :func:`write_struct` parse
and re-encode it generically (every field kept as it is, byte for byte), so only the
schema elements of those columns change: their converted type, scale, precision and
logical type are dropped. The ``ARROW:schema`` entry is dropped too, since Arrow would
otherwise restore the decimal type from it; strings are then read as Parquet says (UTF-8).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["IntegerDecimals", "integer_decimals", "read_struct", "write_struct"]

# compact-protocol type ids
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = (
    range(13))
# Parquet's Thrift field ids (parquet.thrift)
_FILE_SCHEMA, _FILE_KEY_VALUE = 2, 5
_KV_KEY = 1
_EL_TYPE, _EL_NAME, _EL_CHILDREN, _EL_CONVERTED, _EL_SCALE, _EL_PRECISION, _EL_LOGICAL = (
    1, 4, 5, 6, 7, 8, 10)
_INT32, _INT64 = 1, 2  # physical types
_CONVERTED_DECIMAL = 5
_LOGICAL_DECIMAL = 5  # the DecimalType member of the LogicalType union
_DECIMAL_SCALE = 1


@dataclass
class Field:
    """One field of a Thrift struct as the compact protocol wrote it: its id, its wire type
    and its value (``int``, ``float``, ``bytes``, ``bool``, ``list`` of ``(type, values)``,
    a nested struct as a list of :class:`Field`)."""

    id: int
    type: int
    value: Any


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = memoryview(data), 0

    def byte(self) -> int:
        b = self.data[self.at]
        self.at += 1
        return b

    def varint(self) -> int:
        shift = out = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if b < 0x80:
                return out
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, t: int) -> Any:
        if t in (_TRUE, _FALSE):  # inside a list or map a bool is a whole byte, kept raw
            return self.byte()
        if t == _BYTE:
            return struct.unpack("b", bytes([self.byte()]))[0]
        if t in (_I16, _I32, _I64):
            return self.zigzag()
        if t == _DOUBLE:
            self.at += 8
            return struct.unpack("<d", self.data[self.at - 8 : self.at])[0]
        if t == _BINARY:
            n = self.varint()
            self.at += n
            return bytes(self.data[self.at - n : self.at])
        if t in (_LIST, _SET):
            head = self.byte()
            n, elem = head >> 4, head & 0x0F
            if n == 15:
                n = self.varint()
            return (elem, [self.value(elem) for _ in range(n)])
        if t == _MAP:
            n = self.varint()
            kinds = self.byte() if n else 0
            k, v = kinds >> 4, kinds & 0x0F
            return (k, v, [(self.value(k), self.value(v)) for _ in range(n)])
        if t == _STRUCT:
            return self.struct()
        raise ValueError(f"Parquet footer: unknown Thrift type {t} at byte {self.at}")

    def struct(self) -> list[Field]:
        fields, last = [], 0
        while True:
            head = self.byte()
            if head == _STOP:
                return fields
            t, delta = head & 0x0F, head >> 4
            fid = last + delta if delta else self.zigzag()
            if t in (_TRUE, _FALSE):  # a bool field's value is its type
                fields.append(Field(fid, t, t == _TRUE))
            else:
                fields.append(Field(fid, t, self.value(t)))
            last = fid


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while n >= 0x80:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def zigzag(self, n: int) -> None:
        self.varint((n << 1) ^ (n >> 63))

    def value(self, t: int, v: Any) -> None:
        if t in (_TRUE, _FALSE):
            self.out.append(v)
        elif t == _BYTE:
            self.out += struct.pack("b", v)
        elif t in (_I16, _I32, _I64):
            self.zigzag(v)
        elif t == _DOUBLE:
            self.out += struct.pack("<d", v)
        elif t == _BINARY:
            self.varint(len(v))
            self.out += v
        elif t in (_LIST, _SET):
            elem, items = v
            if len(items) < 15:
                self.out.append(len(items) << 4 | elem)
            else:
                self.out.append(0xF0 | elem)
                self.varint(len(items))
            for item in items:
                self.value(elem, item)
        elif t == _MAP:
            k, w, items = v
            self.varint(len(items))
            if items:
                self.out.append(k << 4 | w)
            for key, val in items:
                self.value(k, key)
                self.value(w, val)
        elif t == _STRUCT:
            self.struct(v)
        else:
            raise ValueError(f"Parquet footer: unknown Thrift type {t}")

    def struct(self, fields: list[Field]) -> None:
        last = 0
        for f in fields:
            t = (_TRUE if f.value else _FALSE) if f.type in (_TRUE, _FALSE) else f.type
            if 0 < f.id - last <= 15:
                self.out.append((f.id - last) << 4 | t)
            else:
                self.out.append(t)
                self.zigzag(f.id)
            if t not in (_TRUE, _FALSE):
                self.value(t, f.value)
            last = f.id
        self.out.append(_STOP)


def read_struct(data: bytes) -> list[Field]:
    """A compact-protocol struct (a Parquet footer) as its list of :class:`Field`."""
    return _Reader(data).struct()


def write_struct(fields: list[Field]) -> bytes:
    """The compact-protocol bytes of ``fields`` (the inverse of :func:`read_struct`)."""
    w = _Writer()
    w.struct(fields)
    return bytes(w.out)


@dataclass(frozen=True)
class IntegerDecimals:
    """A footer whose integer-stored decimal columns read as plain integers.

    Attributes
    ----------
    footer : bytes
        The rewritten footer (compact-protocol FileMetaData), or the original when no
        column changed.
    scales : dict
        Top-level column name -> its decimal scale, for each rewritten column.
    """

    footer: bytes
    scales: dict[str, int]


def integer_decimals(footer: bytes) -> IntegerDecimals:
    """Rewrite a Parquet footer so that its INT32/INT64 decimal columns read as integers.

    Parameters
    ----------
    footer : bytes
        The FileMetaData bytes (between the column chunks and the footer's length).

    Returns
    -------
    IntegerDecimals
        The new footer and the rewritten columns' scales. Only flat top-level columns are
        rewritten; a file without such columns comes back unchanged.
    """
    fields = _top_fields(footer)
    schema = next((f for f in fields if f.id == _FILE_SCHEMA), None)
    if schema is None:
        return IntegerDecimals(footer, {})
    elements = schema.value[1]
    scales: dict[str, int] = {}
    for element in elements[1:]:  # [0] is the root
        by_id = {f.id: f for f in element}
        if _EL_CHILDREN in by_id:  # a group: nested columns keep their types
            return IntegerDecimals(footer, {})
        physical = by_id.get(_EL_TYPE)
        scale = _decimal_scale(by_id)
        if physical is None or physical.value not in (_INT32, _INT64) or scale is None:
            continue
        scales[by_id[_EL_NAME].value.decode()] = scale
        element[:] = [f for f in element if f.id not in (
            _EL_CONVERTED, _EL_SCALE, _EL_PRECISION, _EL_LOGICAL)]
    if not scales:
        return IntegerDecimals(footer, {})
    out = bytearray()
    for f in fields:
        if f.id == _FILE_KEY_VALUE:  # Arrow's stored schema would restore the decimals
            elem, pairs = f.value
            f.value = (elem, [kv for kv in pairs if not any(
                k.id == _KV_KEY and k.value == b"ARROW:schema" for k in kv)])
        out += f.head
        if isinstance(f.value, bytes | memoryview) and f.id not in _PARSED:
            out += f.value  # (the row groups: as they were, byte for byte)
        else:
            w = _Writer()
            w.value(f.type, f.value)
            out += w.out
    out.append(_STOP)
    return IntegerDecimals(bytes(out), scales)


_PARSED = (_FILE_SCHEMA, _FILE_KEY_VALUE)  # the fields rewritten; the others kept as bytes


@dataclass
class _TopField:
    id: int
    type: int
    head: bytes  # the field's header bytes (its id and type, as written)
    value: Any  # parsed (schema, key-values) or the value's bytes


def _top_fields(footer: bytes) -> list[_TopField]:
    """The FileMetaData's fields: the schema and the key-value metadata parsed, every other
    field's value kept as its bytes. The row groups' column chunk metadata is most of a
    large footer (53 row groups of 16 columns: 0.3 s parsed field by field in Python); it is
    skipped by the page kernels' compiled Thrift skipper."""
    import numpy as np

    from .parquet_pages import _skip

    buf = np.frombuffer(footer, np.uint8)
    reader = _Reader(footer)
    fields, last = [], 0
    while True:
        start = reader.at
        head = reader.byte()
        if head == _STOP:
            return fields
        t, delta = head & 0x0F, head >> 4
        fid = last + delta if delta else reader.zigzag()
        header = bytes(reader.data[start: reader.at])
        if t in (_TRUE, _FALSE):  # a bool field's value is its type
            fields.append(_TopField(fid, t, header, b""))
        elif fid in _PARSED:
            fields.append(_TopField(fid, t, header, reader.value(t)))
        else:
            end = int(_skip(buf, reader.at, len(buf), t))
            if end < 0:
                raise ValueError(f"Parquet footer: a damaged field {fid} at byte {reader.at}")
            fields.append(_TopField(fid, t, header, bytes(reader.data[reader.at: end])))
            reader.at = end
        last = fid


def _decimal_scale(by_id: dict[int, Field]) -> int | None:
    """The scale of a decimal schema element (logical type first, else converted type), or
    None when it is not a decimal."""
    logical = by_id.get(_EL_LOGICAL)
    if logical is not None:
        member = logical.value[0] if logical.value else None
        if member is None or member.id != _LOGICAL_DECIMAL:
            return None
        return next((f.value for f in member.value if f.id == _DECIMAL_SCALE), 0)
    converted = by_id.get(_EL_CONVERTED)
    if converted is None or converted.value != _CONVERTED_DECIMAL:
        return None
    scale = by_id.get(_EL_SCALE)
    return scale.value if scale is not None else 0
