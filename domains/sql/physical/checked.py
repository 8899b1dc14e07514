"""Integer arithmetic that refuses to wrap: one parallel pass computes ``a op b`` on int64,
and says whether any valid row overflowed int64 or left the result type's range (a
DECIMAL(p, s)'s ``10**p - 1``, an INTEGER's 32 bits). NumPy would need a division per
element to detect a product's overflow."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from hpc.jit import serial_below

from .device import kernels, xp

__all__ = ["checked", "group_sums", "group_sums_many"]

_SIGN = np.uint64(1 << 63)
_HALF = np.uint64(1 << 31)


@njit(inline="always")
def _magnitude(x):  # type: ignore[no-untyped-def]
    """|x| as uint64 (exact for the smallest int64 too)."""
    u = np.uint64(x)
    return u if x >= 0 else np.uint64(0) - u


@njit(parallel=True, nogil=True, cache=True)
def _run(op, a, b, valid, use_valid, lo, hi, out):  # type: ignore[no-untyped-def]
    # in unsigned arithmetic, which wraps by definition: signed overflow is undefined to
    # the compiler, which may fold the usual after-the-fact tests away. An operand of one
    # element is a constant: read, never broadcast into a column of copies
    n = out.shape[0]
    bad = 0
    a_step = 1 if a.shape[0] == n else 0
    b_step = 1 if b.shape[0] == n else 0
    for i in prange(n):
        x = a[i * a_step]
        y = b[i * b_step]
        ux = np.uint64(x)
        uy = np.uint64(y)
        if op == 0:
            ur = ux + uy
            over = ((ux ^ ur) & (uy ^ ur) & _SIGN) != 0
        elif op == 1:
            ur = ux - uy
            over = ((ux ^ uy) & (ux ^ ur) & _SIGN) != 0
        else:
            mx = _magnitude(x)
            my = _magnitude(y)
            # both below 2**31: the product fits, and the division (tens of cycles) is skipped
            over = False
            if (mx | my) >= _HALF and my != 0:
                limit = np.uint64(0x7FFFFFFFFFFFFFFF) if (x < 0) == (y < 0) else _SIGN
                over = mx > limit // my
            ur = ux * uy
        r = np.int64(ur)
        out[i] = r
        if (over or r < lo or r > hi) and (not use_valid or valid[i]):
            bad += 1
    return bad


_OPS = {"add": 0, "sub": 1, "mul": 2}


def _operand(x: Any) -> np.ndarray:
    """An operand as contiguous int64; a constant (a scalar, or a column broadcast from one
    value) as one element, which the kernel reads for every row."""
    x = np.atleast_1d(np.asarray(x, dtype=np.int64))
    if x.ndim == 1 and x.shape[0] > 1 and x.strides[0] == 0:
        x = x[:1]
    return np.ascontiguousarray(x)


def checked(op: str, a: np.ndarray, b: np.ndarray, valid: np.ndarray | None,
            lo: int, hi: int) -> tuple[np.ndarray, bool]:
    """``(a op b, overflowed)`` for ``op`` in add, sub, mul over equal-length int64 arrays
    (a scalar operand is broadcast); rows where ``valid`` is False never count. On the run's
    device (:func:`.device.kernels`): a parallel CPU kernel, or array operations."""
    return kernels().checked(xp(), op, a, b, valid, lo, hi)


def checked_kernel(op: str, a: np.ndarray, b: np.ndarray, valid: np.ndarray | None,
                   lo: int, hi: int) -> tuple[np.ndarray, bool]:
    """:func:`checked` by one parallel CPU pass."""
    a, b = _operand(a), _operand(b)
    if a.shape[0] == b.shape[0] or b.shape[0] == 1:
        n = a.shape[0]
    elif a.shape[0] == 1:
        n = b.shape[0]
    else:
        raise ValueError(f"checked {op}: operands of {a.shape[0]} and {b.shape[0]} rows")
    out = np.empty(n, dtype=np.int64)
    use = valid is not None
    v = valid if use else np.ones(1, dtype=np.bool_)
    with serial_below(n):  # constants folded by the optimizer: no parallel region to start
        bad = _run(_OPS[op], a, b, v, use, np.int64(lo), np.int64(hi), out)
    return out, bool(bad)


_INT64_MIN = np.iinfo(np.int64).min


def checked_arrays(xp: Any, op: str, a: Any, b: Any, valid: Any, lo: int, hi: int
                   ) -> tuple[Any, bool]:
    """:func:`checked` as array operations (the device has no numba CPU kernel): int64
    arithmetic wraps, and the wrap is detected afterwards; a product by dividing it back
    (a wrapped product differs from the true one by a multiple of 2**64, more than the
    divisor, so the quotient cannot come back right)."""
    a, b = xp.asarray(a, dtype=np.int64), xp.asarray(b, dtype=np.int64)
    with np.errstate(all="ignore"):  # (NumPy standing in for the device: wraps are meant)
        return _wrapped(xp, op, a, b, valid, lo, hi)


def _wrapped(xp: Any, op: str, a: Any, b: Any, valid: Any, lo: int, hi: int
             ) -> tuple[Any, bool]:
    if op == "add":
        r = a + b
        over = ((a ^ r) & (b ^ r)) < 0
    elif op == "sub":
        r = a - b
        over = ((a ^ b) & (a ^ r)) < 0
    else:
        r = a * b
        divisor = xp.where(a == 0, 1, a)
        over = (a != 0) & (r // divisor != b) | (a == -1) & (b == _INT64_MIN)
    bad = over | (r < lo) | (r > hi)
    if valid is not None:
        bad = bad & valid
    return xp.atleast_1d(r), bool(bad.any())


@njit(parallel=True, nogil=True, cache=True)
def _halves(ids, values, mask, ngroups, chunks, hi, lo, counts):  # type: ignore[no-untyped-def]
    # per chunk of rows and group: sums of the high and low 32-bit halves (neither can
    # overflow below 2**31 rows) and the row count, kept in the chunk's own arrays while it
    # runs (the rows of hi / lo / counts of neighbouring chunks share cache lines: written
    # row by row from two threads they would bounce between the cores)
    n = ids.shape[0]
    for c in prange(chunks):
        h = np.zeros(ngroups, np.int64)
        low = np.zeros(ngroups, np.int64)
        k = np.zeros(ngroups, np.int64)
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            if mask[i]:
                g = ids[i]
                v = values[i]
                h[g] += v >> 32
                low[g] += v & 0xFFFFFFFF
                k[g] += 1
        hi[c, :] = h
        lo[c, :] = low
        counts[c, :] = k


_CHUNKS = 64  # at most: the sums are exact, so the chunking cannot change them anyway
_PARTIALS_BYTES = 1 << 28  # at most this much memory for the per-chunk partial sums


def _chunks(rows: int, ngroups: int, columns: int = 1) -> int:
    """Chunks of rows summed apart: many (each chunk's ids stay in cache) when the groups
    are few, as many as threads when they are many, never more partial sums than
    :data:`_PARTIALS_BYTES` hold."""
    import numba

    if rows < 1 << 16:
        return 1
    many = max(numba.get_num_threads(), rows // (8 * max(ngroups, 1)))
    return max(1, min(_CHUNKS, many, _PARTIALS_BYTES // (24 * columns * max(ngroups, 1))))


def group_sums(ids: np.ndarray, values: np.ndarray, mask: np.ndarray,
               ngroups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact int64 sums of ``values`` per group over the ``mask`` rows: ``(sums, counts,
    overflowed)``, ``overflowed`` True where a group's sum does not fit int64."""
    chunks = _chunks(len(ids), ngroups)
    hi = np.zeros((chunks, ngroups), np.int64)
    lo = np.zeros((chunks, ngroups), np.int64)
    counts = np.zeros((chunks, ngroups), np.int64)
    _halves(ids.astype(np.int64, copy=False), values.astype(np.int64, copy=False),
            np.ascontiguousarray(mask, dtype=np.bool_), ngroups, chunks, hi, lo, counts)
    high, low = hi.sum(axis=0), lo.sum(axis=0)  # below 2**62 each, for < 2**31 rows
    top = high + (low >> 32)
    over = (top < -(2**31)) | (top >= 2**31)
    sums = (np.where(over, 0, top) << 32) | (low & np.int64(0xFFFFFFFF))
    return sums, counts.sum(axis=0), over


@njit(parallel=True, nogil=True, cache=True)
def _halves_many(ids, values, masks, ngroups, chunks, hi, lo, counts):  # type: ignore[no-untyped-def]
    # _halves for several columns in one pass over the group ids: values[j] and masks[j]
    # (an empty mask: every row; a one-row column's mask has one element) accumulate
    # into hi[j] / lo[j] / counts[j]
    n = ids.shape[0]
    k = len(values)
    for c in prange(chunks):
        start, stop = c * n // chunks, (c + 1) * n // chunks
        for j in range(k):  # the chunk's ids stay in cache from one column to the next
            vals = values[j]
            mask = masks[j]
            every = mask.shape[0] == 0
            h = np.zeros(ngroups, np.int64)
            low = np.zeros(ngroups, np.int64)
            m = np.zeros(ngroups, np.int64)
            for i in range(start, stop):
                if every or mask[i]:
                    g = ids[i]
                    v = vals[i]
                    h[g] += v >> 32
                    low[g] += v & 0xFFFFFFFF
                    m[g] += 1
            hi[j, c, :] = h
            lo[j, c, :] = low
            counts[j, c, :] = m


def group_sums_many(ids: np.ndarray, values: list[np.ndarray], masks: list[np.ndarray | None],
                    ngroups: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`group_sums` of several columns (``masks[j]`` None: every row) in one pass over
    the group ids: per column ``(sums, counts, overflowed)``."""
    k = len(values)
    chunks = _chunks(len(ids), ngroups, k)
    hi = np.zeros((k, chunks, ngroups), np.int64)
    lo = np.zeros((k, chunks, ngroups), np.int64)
    counts = np.zeros((k, chunks, ngroups), np.int64)
    every = np.ones(0, np.bool_)
    # read-only views, all of one type (a constant's column, or Arrow's buffers, are
    # read-only: a tuple of both kinds cannot be indexed in the kernel)
    _halves_many(np.ascontiguousarray(ids, dtype=np.int64),
                 tuple(_read_only(np.ascontiguousarray(v, dtype=np.int64)) for v in values),
                 tuple(_read_only(every if m is None else np.ascontiguousarray(m, np.bool_))
                       for m in masks), ngroups, chunks, hi, lo, counts)
    out = []
    for j in range(k):
        high, low = hi[j].sum(axis=0), lo[j].sum(axis=0)
        top = high + (low >> 32)
        over = (top < -(2**31)) | (top >= 2**31)
        out.append(((np.where(over, 0, top) << 32) | (low & np.int64(0xFFFFFFFF)),
                    counts[j].sum(axis=0), over))
    return out


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view
