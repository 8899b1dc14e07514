"""DECIMAL columns converted late: a scanned DECIMAL(p, s) column stays in Parquet's chunks
until it is read, and a filter or join that keeps few of its rows converts only those to
scaled int64, straight from the chunks: a filter that keeps 2% of 6 million rows converts
120,000 values of each decimal column it carries, not 6 million. A filter's rows (ascending)
of any number are converted straight from the chunks too, in one pass."""

from __future__ import annotations

from typing import Any

import numpy as np
from hpc.domains.sql.errors import SQLError
from hpc.domains.sql.table import Column, Decimals, chunk_positions
from numba import njit, prange

__all__ = ["LazyDecimals", "SELECTIVE", "lazy_decimal"]

SELECTIVE = 4  # gathers of at most 1/SELECTIVE of the rows convert only those rows
_INT64_MAX = np.int64(0x7FFFFFFFFFFFFFFF)


@njit(parallel=True, nogil=True, cache=True)
def _unscaled_gather(chunks, starts, stride, factors, index, order, bounds,  # type: ignore[no-untyped-def]
                     out):
    """``out[i]`` = row ``index[i]`` of the chunked decimals times its chunk's factor (the
    chunk's scale raised to the column's). Chunk ``c`` holds rows ``starts[c]`` on as
    ``words`` (value ``r`` is ``words[stride r]``: an integer chunk's own values, or the
    low word of Arrow's little-endian decimal128 pair); the positions ``i`` of its rows
    are ``order[bounds[c]:bounds[c + 1]]`` (with an empty ``order``, ``bounds[c]`` to
    ``bounds[c + 1]`` themselves). Returns how many values need more than 64 bits."""
    wide = 0
    for c in prange(bounds.shape[0] - 1):
        words = chunks[np.int64(c)]  # the parfor index is unsigned; the list takes int64
        base = starts[c]
        factor = factors[c]
        limit = _INT64_MAX // factor
        for k in range(bounds[c], bounds[c + 1]):
            i = order[k] if order.shape[0] else k
            j = stride * (index[i] - base)
            lo = words[j]
            if (stride == 2 and words[j + 1] != (lo >> 63)) or lo > limit or lo < -limit:
                wide += 1
            out[i] = lo * factor
    return wide


class LazyDecimals(Column):
    """A DECIMAL column of ``scale`` over a scanned :class:`~hpc.domains.sql.table.Decimals`
    (no nulls): its scaled int64 ``values`` made when first read, and a gather of few rows
    converted from the chunks alone.

    Parameters
    ----------
    source : Decimals
        The column as the scan gave it.
    scale : int
        The logical type's scale.
    """

    def __init__(self, source: Decimals, scale: int) -> None:
        self._source = source
        self._scale = scale
        self._values: np.ndarray | None = None
        self.kind, self.dictionary, self.valid = "decimal", None, source.valid

    @property
    def xp(self) -> Any:
        return np  # Arrow's host chunks: asking must not convert every row

    @property
    def values(self) -> np.ndarray:  # type: ignore[override]
        if self._values is None:
            exact = self._source.unscaled(self._scale)
            if exact is None:  # through float64: exact up to 15 digits
                scaled = np.asarray(self._source.values, dtype=np.float64) * 10.0 ** self._scale
                fits = np.abs(scaled) < 2.0**63  # False for NaN (a NULL's value) too
                wide = ~fits if self.valid is None else ~fits & self.valid
                if bool(wide.any()):
                    value = self._source.values[int(np.argmax(wide))]
                    raise SQLError(f"a DECIMAL value ({value:.6g}) needs more than the 64 bits "
                                   "this engine holds DECIMALs in")
                exact = np.rint(np.where(fits, scaled, 0.0)).astype(np.int64)
            self._values = exact
        return self._values

    @values.setter
    def values(self, values: np.ndarray) -> None:
        self._values = values

    def __len__(self) -> int:
        return len(self._source)

    def gather(self, index: np.ndarray) -> Column:
        out = None
        if self._values is None and isinstance(index, np.ndarray):
            # few rows, or rows in ascending order (a filter's: one pass over the chunks,
            # where converting them all and then gathering would be two)
            out = self._converted(index, ascending_only=SELECTIVE * len(index) > len(self))
        if out is None:
            return super().gather(index)
        return Column(out, "decimal", None, None)

    def scaled_chunks(self) -> list[tuple[int, np.ndarray, int, int]] | None:
        """The column as Parquet's chunks, ``(first row, words, stride, factor)`` each: row
        ``first + i`` is ``words[stride i] * factor`` at the column's scale (see
        :meth:`~hpc.domains.sql.table.Decimals.chunk_words`), for a kernel that reads the
        values where they are; None once converted, or where a chunk is not int64 words
        or has a scale above the column's."""
        if self._values is not None:
            return None
        parts = self._source.chunk_words()
        if not parts or any(p[1].dtype != np.int64 or not 0 <= self._scale - p[3] <= 18
                            for p in parts):
            return None
        return [(start, words, stride, 10 ** (self._scale - scale))
                for start, words, stride, scale in parts]

    def _converted(self, index: np.ndarray, ascending_only: bool = False
                   ) -> np.ndarray | None:
        """Rows ``index`` as scaled int64 from the chunks, or None where the chunks do not
        allow it (converted to float already, mixed layouts, a scale above the column's,
        more than 64 bits) or, with ``ascending_only``, where ``index`` is not ascending."""
        from hpc.domains.sql.scan_kernels import read_only_list

        if ascending_only and len(index) > 1 and not bool((index[1:] >= index[:-1]).all()):
            return None
        parts = self._source.chunk_words()
        if not parts or len({p[2] for p in parts}) != 1 or any(p[3] > self._scale
                                                               for p in parts):
            return None
        starts = np.array([p[0] for p in parts], dtype=np.int64)
        factors = np.array([10 ** (self._scale - p[3]) for p in parts], dtype=np.int64)
        order, bounds = chunk_positions(starts, index, len(self))
        out = np.empty(len(index), dtype=np.int64)
        if _unscaled_gather(read_only_list([p[1] for p in parts]), starts, parts[0][2],
                            factors, np.ascontiguousarray(index, dtype=np.int64), order,
                            bounds, out):
            return None
        return out

    def __repr__(self) -> str:
        state = "converted" if self._values is not None else "in chunks"
        return f"LazyDecimals({len(self)} rows, scale {self._scale}, {state})"


def lazy_decimal(column: Any, scale: int) -> Column | None:
    """A scanned column as a :class:`LazyDecimals` of ``scale`` where it is Parquet's chunks
    (no nulls), else None."""
    if isinstance(column, Decimals) and column._values is None and column._chunks:
        return LazyDecimals(column, scale)
    return None
