"""Stable sort order of integer keys: a least-significant-digit radix sort on the host, the
array module's stable argsort on a device.

Sorting rows by packed keys (ORDER BY, a window's partitions and order, a sort-based join)
is an argsort of one int64 per row. NumPy's argsort of int64 is a comparison sort, about
90 ns a key on 1.5M keys (a window's sort by customer, date and order number took 90 ms),
while the keys use only as many bits as their ranges need. The radix sort here moves each
key with its row number through one pass per 8-bit digit the keys use (a digit every key
shares is skipped), reading sequentially, each pass's rows cut into a piece per thread: on 2
threads 4.3x faster than NumPy's on 1.5M keys of 51 bits (34 against 143 ms) and 5.6x on 6M
of 45 (134 against 755 ms), and stable by construction.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import njit, prange

from .backend import array_module

__all__ = ["stable_argsort"]

# bits a pass: 256 places written to at once (11 bits' 2048 were 1.7x slower on 1.5M keys:
# more write streams than the caches keep lines for)
_DIGIT = 8
_FROM = 1 << 14  # fewer keys: NumPy's sort (the passes' fixed cost is more)


@njit(parallel=True, nogil=True, cache=True)
def _digit_counts(keys, shift, pieces, counts):  # type: ignore[no-untyped-def]
    # counts[c, d]: keys of piece c (rows c n / pieces on) whose digit at ``shift`` is d
    n = keys.shape[0]
    mask = (1 << _DIGIT) - 1
    for c in prange(pieces):
        for i in range(c * n // pieces, (c + 1) * n // pieces):
            counts[c, (keys[i] >> shift) & mask] += 1


@njit(parallel=True, nogil=True, cache=True)
def _scatter(key_a, row_a, key_b, row_b, shift, pieces, at):  # type: ignore[no-untyped-def]
    # one pass: piece c moves its keys (in order) from at[c, d] on for digit d: stable
    n = key_a.shape[0]
    mask = (1 << _DIGIT) - 1
    for c in prange(pieces):
        where = at[c].copy()
        for i in range(c * n // pieces, (c + 1) * n // pieces):
            k = key_a[i]
            d = (k >> shift) & mask
            j = where[d]
            where[d] = j + 1
            key_b[j] = k
            row_b[j] = row_a[i]


def _radix_order(keys: np.ndarray, bits: int) -> np.ndarray:
    """The stable order of ``keys`` (non-negative, below ``2**bits``): LSD, ``_DIGIT`` bits a
    pass, the rows cut into a piece per thread (each pass's piece ``c`` writes digit ``d``'s
    keys after every piece's smaller digits and the earlier pieces' keys of ``d``)."""
    n = len(keys)
    passes = max((bits + _DIGIT - 1) // _DIGIT, 1)
    pieces = max(1, min(numba.get_num_threads(), n // _FROM))
    key_a, row_a = keys.copy(), np.arange(n, dtype=np.int64)
    key_b, row_b = np.empty_like(key_a), np.empty_like(row_a)
    for p in range(passes):
        # counted on the keys as the last pass left them: a piece's rows change every pass
        c = np.zeros((pieces, 1 << _DIGIT), np.int64)
        _digit_counts(key_a, _DIGIT * p, pieces, c)
        total = c.sum(axis=0)
        if total.max() == n:  # every key has this digit: the order stands
            continue
        digit_start = np.concatenate([[0], np.cumsum(total)[:-1]])
        at = np.ascontiguousarray(digit_start + np.cumsum(c, axis=0) - c)
        _scatter(key_a, row_a, key_b, row_b, _DIGIT * p, pieces, at)
        key_a, key_b = key_b, key_a
        row_a, row_b = row_b, row_a
    return row_a


def stable_argsort(keys: Any) -> Any:
    """The stable sort order of ``keys`` (non-negative int64, one per row), as
    ``argsort(keys, kind="stable")``.

    Parameters
    ----------
    keys : array
        Non-negative int64 keys, on the host or the device.

    Returns
    -------
    array
        int64 row numbers, on the keys' device.

    Examples
    --------
    >>> import numpy as np
    >>> stable_argsort(np.array([3, 1, 3, 0, 1])).tolist()
    [3, 1, 4, 0, 2]
    """
    xp = array_module(keys)
    if xp is not np or len(keys) < _FROM:
        return xp.argsort(keys, kind="stable")
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    top = int(keys.max())
    if int(keys.min()) < 0:
        raise ValueError("stable_argsort: keys must be non-negative")
    return _radix_order(keys, max(top.bit_length(), 1))
