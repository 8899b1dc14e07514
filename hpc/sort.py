"""Stable sort order of integer keys: a least-significant-digit radix sort on the host, the
array module's stable argsort on a device.

Sorting rows by packed keys (ORDER BY, a window's partitions and order, a sort-based join)
is an argsort of one int64 per row. NumPy's argsort of int64 is a comparison sort, about
90 ns a key on 1.5M keys (a window's sort by customer, date and order number took 90 ms),
while the keys use only as many bits as their ranges need. The radix sort here moves each
key with its row number through one pass per 8-bit digit the keys use (a digit every key
shares is skipped), reading sequentially: 3.4-3.6x faster than NumPy's on 1.5M keys of 51
bits and 6M of 45, and stable by construction.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .backend import array_module

__all__ = ["stable_argsort"]

# bits a pass: 256 places written to at once (11 bits' 2048 were 1.7x slower on 1.5M keys:
# more write streams than the caches keep lines for)
_DIGIT = 8
_FROM = 1 << 14  # fewer keys: NumPy's sort (the passes' fixed cost is more)


@njit(nogil=True, cache=True)
def _radix_order(keys, bits):  # type: ignore[no-untyped-def]
    # the stable order of ``keys`` (non-negative, below 2**bits), LSD, _DIGIT bits a pass
    n = keys.shape[0]
    passes = (bits + _DIGIT - 1) // _DIGIT
    mask = (1 << _DIGIT) - 1
    counts = np.zeros((max(passes, 1), 1 << _DIGIT), np.int64)
    for i in range(n):
        k = keys[i]
        for p in range(passes):
            counts[p, (k >> (_DIGIT * p)) & mask] += 1
    key_a = keys.copy()
    row_a = np.arange(n)
    key_b = np.empty_like(key_a)
    row_b = np.empty_like(row_a)
    for p in range(passes):
        c = counts[p]
        if c.max() == n:  # every key has this digit: the order stands
            continue
        total = 0
        for d in range(1 << _DIGIT):  # where each digit's keys start
            here = c[d]
            c[d] = total
            total += here
        shift = _DIGIT * p
        for i in range(n):
            k = key_a[i]
            d = (k >> shift) & mask
            at = c[d]
            c[d] = at + 1
            key_b[at] = k
            row_b[at] = row_a[i]
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
