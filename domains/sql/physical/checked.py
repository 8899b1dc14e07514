"""Integer arithmetic that refuses to wrap: one parallel pass computes ``a op b`` on int64,
and says whether any valid row overflowed int64 or left the result type's range (a
DECIMAL(p, s)'s ``10**p - 1``, an INTEGER's 32 bits). NumPy would need a division per
element to detect a product's overflow."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

__all__ = ["checked"]

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
    (a scalar operand is broadcast); rows where ``valid`` is False never count."""
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
    bad = _run(_OPS[op], a, b, v, use, np.int64(lo), np.int64(hi), out)
    return out, bool(bad)


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


_CHUNKS = 16  # fixed: the sums are exact, so the chunking cannot change them anyway


def group_sums(ids: np.ndarray, values: np.ndarray, mask: np.ndarray,
               ngroups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact int64 sums of ``values`` per group over the ``mask`` rows: ``(sums, counts,
    overflowed)``, ``overflowed`` True where a group's sum does not fit int64."""
    chunks = _CHUNKS if len(ids) >= 1 << 16 else 1
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
