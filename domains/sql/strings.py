"""Operations on string dictionaries (sorted object arrays of Python ``str``) done by Arrow's
C++ kernels: sorting, merging, LIKE, IN, SUBSTRING. A dictionary can hold millions of
distinct strings (TPC-H comments), where NumPy's fixed-width conversions are far too slow.
The Arrow copy of each dictionary is cached."""

from __future__ import annotations

import bisect
import weakref
from typing import Any

import numpy as np

from hpc.jit import serial_below

__all__ = [
    "Entries", "compare", "allgather", "arrow", "to_numpy", "sort_order", "sort_unique",
    "bound", "like", "isin", "merge", "remap", "substring", "is_text", "equal_codes",
    "entry_ids",
]

_by_id: dict[int, tuple[Any, Any]] = {}


class Entries:
    """The dictionary of a string column read only by per-entry predicates (LIKE, IN, a
    comparison with a constant): Parquet's dictionaries as they are, an Arrow string array in
    no order and with repeats. Sorting a big dictionary and making Python strings of it costs
    more than the predicates (TPC-H's comments), and a column only a scan filter reads never
    needs either. Entries cannot be indexed, so an operator that needs a sorted dictionary
    fails loudly instead of misreading codes."""

    __slots__ = ("words",)

    def __init__(self, words: Any) -> None:
        self.words = words

    def __len__(self) -> int:
        return len(self.words)


def compare(dictionary: np.ndarray | Entries, text: str, op: str) -> np.ndarray:
    """Per entry: ``entry <op> text`` (``op``: an Arrow compare function such as ``"less"``),
    in byte order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(dictionary) == 0:
        return np.zeros(0, bool)
    words = arrow(dictionary)
    literal = pa.scalar(text, type=words.type)
    return pc.call_function(op, [words, literal]).to_numpy(zero_copy_only=False)


def arrow(dictionary: np.ndarray | Entries) -> Any:
    """The dictionary as a ``pyarrow.StringArray`` (cached per array object)."""
    import pyarrow as pa

    if isinstance(dictionary, Entries):
        return dictionary.words
    hit = _by_id.get(id(dictionary))
    if hit is not None and hit[0]() is dictionary:
        return hit[1]
    out = pa.array(dictionary, type=pa.string(), from_pandas=True)
    _by_id[id(dictionary)] = (weakref.ref(dictionary), out)
    if len(_by_id) > 256:  # forget arrays that are gone
        for key in [k for k, (ref, _) in _by_id.items() if ref() is None]:
            del _by_id[key]
    return out


def to_numpy(words: Any) -> np.ndarray:
    """An Arrow string array as a NumPy object array, remembering the Arrow copy."""
    out = np.asarray(words.to_numpy(zero_copy_only=False), dtype=object)
    _by_id[id(out)] = (weakref.ref(out), words)
    return out


def sort_order(words: Any) -> np.ndarray:
    """Indices that sort an Arrow string array (byte order: UTF-8 order is code point order;
    nulls as empty strings)."""
    from .scan_kernels import sort_strings

    return sort_strings(*_buffers(_plain(words)))


_HASH_FIRST = 1024  # strings above which distinct ones are found by hashing before sorting


def sort_unique(words: Any) -> tuple[Any, np.ndarray]:
    """The distinct strings of an Arrow string array, sorted, and the int32 position among
    them of every input string (nulls as empty strings).

    Above ``_HASH_FIRST`` strings the distinct ones are found by hashing
    (:func:`.string_hash.first_rows`) and only those are sorted.

    Examples
    --------
    >>> import pyarrow as pa
    >>> unique, code = sort_unique(pa.array(["b", "a", "b"]))
    >>> unique.to_pylist(), code.tolist()
    (['a', 'b'], [1, 0, 1])
    """
    from .scan_kernels import distinct_sorted, sort_strings
    from .string_hash import first_rows

    words = _plain(words)
    offsets, data = _buffers(words)
    if len(words) > _HASH_FIRST:
        first = first_rows(offsets, data)
        distinct = np.flatnonzero(first == np.arange(len(first)))
        order = sort_strings(offsets, data, distinct)
        rank = np.empty(len(words), dtype=np.int32)  # set at the distinct rows only
        rank[order] = np.arange(len(order), dtype=np.int32)
        return words.take(order), rank[first]
    order = sort_strings(offsets, data)
    first = np.empty(len(order), dtype=bool)
    with serial_below(len(order)):
        distinct_sorted(offsets, data, order, first)
    code = np.empty(len(order), dtype=np.int32)
    code[order] = np.cumsum(first, dtype=np.int32) - 1
    return words.take(order[first]), code


def is_text(t: Any) -> bool:
    """Whether Arrow type ``t`` holds text: string, large string or string view."""
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _plain(words: Any) -> Any:
    """``words`` as a plain (or large) Arrow string array without nulls."""
    import pyarrow as pa

    if not (pa.types.is_string(words.type) or pa.types.is_large_string(words.type)):
        words = words.cast(pa.string())
    return words.fill_null("") if words.null_count else words


def _buffers(words: Any) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (this slice's ``n + 1``) and the bytes of a string array, no copies."""
    import pyarrow as pa

    bufs = words.buffers()
    width = np.int64 if pa.types.is_large_string(words.type) else np.int32
    if len(words) == 0:
        return np.zeros(1, dtype=width), np.zeros(0, dtype=np.uint8)
    offsets = np.frombuffer(bufs[1], dtype=width)[words.offset : words.offset + len(words) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(
        0, dtype=np.uint8)
    return offsets, data


def bound(dictionary: np.ndarray, text: str, side: str) -> int:
    """``searchsorted`` on a sorted dictionary by binary search over the Python strings."""
    return (bisect.bisect_left if side == "left" else bisect.bisect_right)(dictionary, text)


def like(dictionary: np.ndarray | Entries, pattern: str) -> np.ndarray:
    """Which dictionary entries match a SQL LIKE pattern (``%``, ``_``; case-sensitive).

    Patterns of literal parts between ``%`` are matched over the bytes by
    :func:`.string_hash.like_rows` (UTF-8 substrings are code point substrings), several
    times faster than Arrow's regular expressions; ``_`` and escapes go to Arrow."""
    import pyarrow.compute as pc

    if len(dictionary) == 0:
        return np.zeros(0, bool)
    if "_" in pattern or "\\" in pattern:
        return pc.match_like(arrow(dictionary), pattern).to_numpy(zero_copy_only=False)
    from .string_hash import like_rows

    return like_rows(*_buffers(_plain(arrow(dictionary))), [p.encode() for p in
                                                              pattern.split("%")])


def isin(dictionary: np.ndarray, values: Any) -> np.ndarray:
    """Which dictionary entries are among ``values`` (strings)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(dictionary) == 0:
        return np.zeros(0, bool)
    value_set = pa.array([str(v) for v in values], type=pa.string())
    return pc.is_in(arrow(dictionary), value_set=value_set).to_numpy(zero_copy_only=False)


def merge(dictionaries: list[np.ndarray]) -> np.ndarray:
    """One sorted dictionary holding every string of the given ones."""
    import pyarrow as pa

    words = pa.concat_arrays([arrow(d) for d in dictionaries]) if dictionaries else pa.array(
        [], pa.string())
    return to_numpy(sort_unique(words)[0])


def allgather(comm: Any, dictionary: np.ndarray) -> tuple[Any, int]:
    """Collective. Every rank's dictionary, concatenated in rank order, as one Arrow
    string array (large past 2 GiB) on every rank, and where this rank's entries start in it. The
    strings travel as their UTF-8 buffers (lengths and bytes, see
    :func:`hpc.collectives.allgather_bytes`), never as Python objects."""
    import pyarrow as pa

    from hpc.collectives import allgather_bytes

    offsets, data = _buffers(_plain(arrow(dictionary)))
    lengths = np.diff(offsets).astype(np.int64)
    blob = data[int(offsets[0]) : int(offsets[-1])]
    all_lengths, all_blob, counts = allgather_bytes(lengths, blob, comm)
    small = all_blob.size < 2**31  # plain strings (int32 offsets), as every other dictionary
    all_offsets = np.zeros(len(all_lengths) + 1, dtype=np.int32 if small else np.int64)
    np.cumsum(all_lengths, out=all_offsets[1:])
    words = pa.Array.from_buffers(pa.string() if small else pa.large_string(), len(all_lengths),
                                  [None, pa.py_buffer(all_offsets), pa.py_buffer(all_blob)])
    return words, int(counts[: comm.Get_rank()].sum())


def entry_ids(entries: Entries, codes: np.ndarray | None = None) -> np.ndarray:
    """For every raw entry, the first entry holding the same string (int64): equal exactly
    when the strings are, found by hashing (:func:`.string_hash.first_rows`), unsorted.
    With ``codes``, those ids at the codes (rows that point into ``entries``); where there
    are no entries every row is a NULL, and its id 0."""
    from .string_hash import first_rows

    ids = first_rows(*_buffers(_plain(entries.words)))
    if codes is None:
        return ids
    codes = np.asarray(codes)
    return ids[codes] if len(ids) else np.zeros(len(codes), np.int64)


def equal_codes(a: np.ndarray | Entries, b: np.ndarray | Entries
                ) -> tuple[np.ndarray, np.ndarray]:
    """int64 numbers for the entries of two dictionaries (sorted or raw), equal across the
    two exactly when their strings are. For joins, which only ask equality: nothing is
    sorted and no Python string is made.

    The dictionary with fewer entries goes into a hash table, each entry numbered by its
    first equal entry there (``0 .. len - 1``); the other's entries probe it
    (:func:`.string_hash.match_rows`), one equal to a table entry taking that entry's
    number and any other a number of its own, the table's size plus its position. So two
    equal entries of the probing dictionary share a number only where the table holds their
    string, which a join never tells apart: neither matches a row of the other side."""
    from .string_hash import match_rows

    words = [_plain(arrow(d)) for d in (a, b)]
    small = 0 if len(words[0]) < len(words[1]) else 1
    table, probe = words[small], words[1 - small]
    first, match = match_rows(*_buffers(table), *_buffers(probe), unmatched=len(table))
    return (first, match) if small == 0 else (match, first)


def remap(dictionary: np.ndarray, merged: np.ndarray) -> np.ndarray:
    """int32 position in ``merged`` of every entry of ``dictionary`` (all present)."""
    import pyarrow.compute as pc

    if len(dictionary) == 0:
        return np.zeros(0, np.int32)
    return pc.index_in(arrow(dictionary), value_set=arrow(merged)).to_numpy(
        zero_copy_only=False).astype(np.int32)


def substring(dictionary: np.ndarray | Entries, start: int,
              length: int | None) -> tuple[np.ndarray | Entries, np.ndarray | None]:
    """SQL SUBSTRING (1-based ``start``) of every entry: ``(new sorted dictionary, remap from
    old codes to new codes)``; of raw :class:`Entries`, ``(their substrings, None)``: the
    codes stay."""
    import pyarrow.compute as pc

    lo = max(start - 1, 0)
    stop = None if length is None else lo + length
    if isinstance(dictionary, Entries):  # raw entries stay raw: the codes are unchanged
        return Entries(pc.utf8_slice_codeunits(dictionary.words, lo, stop)), None
    if len(dictionary) == 0:
        return np.zeros(0, dtype=object), np.zeros(0, dtype=np.int32)
    unique, code = sort_unique(pc.utf8_slice_codeunits(arrow(dictionary), lo, stop))
    return to_numpy(unique), code  # all in Arrow: Python strings only for the distinct cuts
