"""Vectorisable float64 ``exp``, ``log`` and ``sincos`` for numba CPU kernels.

LLVM cannot vectorise a loop that calls libm, and the PyPI builds of llvmlite have no vector
math library, so a Monte Carlo loop over paths that calls ``math.exp`` or ``math.log`` runs one
lane at a time. These versions are straight-line arithmetic (bit casts, multiplies, adds,
selects) that the loop vectoriser turns into AVX2/AVX-512 code, accurate to about one unit in
the last place (tested against NumPy over the whole double range in ``tests/test_vmath.py``).

- ``exp``: ``x = n ln 2 + r`` with ``|r| <= ln(2)/2`` (two-part ``ln 2``), a degree-13 Taylor
  polynomial of ``e^r``, times ``2^n`` built in the exponent bits.
- ``log``: ``x = 2^e m`` with ``m`` in ``[sqrt(1/2), sqrt(2))``; ``log m = 2 atanh(f)``,
  ``f = (m - 1) / (m + 1)``, as an odd series in ``f`` to ``f^21``.
- ``sincos_turns(u)``: ``sin`` and ``cos`` of ``2 pi u``. Reducing in turns is exact (subtract
  the nearest quarter turn), then Taylor polynomials on ``[-pi/4, pi/4]`` and a quadrant swap:
  the Box-Muller angle needs no Cody-Waite reduction at all.

Every function is ``njit(inline="always")`` so it disappears into the caller's loop body.
(This module imports numba; ``import hpc`` does not import it.)
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["exp", "log", "sincos_turns", "as_int64", "as_float64"]

_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238  # ln 2 to 32 bits: n * _LN2_HI is exact for |n| < 2**21
_LN2_LO = 1.9082149292705877e-10  # ln 2 - _LN2_HI
_ROUND = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer in the low bits
_TWO_PI = 6.283185307179586
_SQRT2 = 1.4142135623730951
_EXP_MAX = 709.782712893384  # ln(DBL_MAX)
_EXP_MIN = -708.3964185322641  # ln(DBL_MIN): below, the result flushes to zero
_DBL_MIN = 2.2250738585072014e-308
_TWO54 = 18014398509481984.0


@intrinsic
def as_int64(typingctx, x):  # type: ignore[no-untyped-def]
    """The bits of a float64 as an int64 (a bit cast, no conversion)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def as_float64(typingctx, x):  # type: ignore[no-untyped-def]
    """The float64 whose bits are the int64 ``x``."""
    if x != types.int64:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@njit(inline="always")
def exp(x):  # type: ignore[no-untyped-def]
    xc = min(max(x, _EXP_MIN), _EXP_MAX)
    k = xc * _LOG2E + _ROUND
    n = k - _ROUND  # nearest integer to x / ln 2, as a float
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    # the low bits of k hold n; 2**n as two factors (n reaches 1024 near _EXP_MAX)
    ni = as_int64(k) - as_int64(_ROUND)
    half = ni >> 1
    y = p * as_float64((half + 1023) << 52) * as_float64((ni - half + 1023) << 52)
    y = 0.0 if x < _EXP_MIN else y
    y = float("inf") if x > _EXP_MAX else y
    return x if x != x else y  # NaN in, NaN out


@njit(inline="always")
def log(x):  # type: ignore[no-untyped-def]
    tiny = x < _DBL_MIN  # subnormal (or zero/negative: fixed up below)
    bits = as_int64(x * _TWO54 if tiny else x)
    e = (bits >> 52) - (1023 + 54 if tiny else 1023)
    m = as_float64((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)  # in [1, 2)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    f = (m - 1.0) / (m + 1.0)
    s = f * f
    q = 2.0 / 21.0
    q = q * s + 2.0 / 19.0
    q = q * s + 2.0 / 17.0
    q = q * s + 2.0 / 15.0
    q = q * s + 2.0 / 13.0
    q = q * s + 2.0 / 11.0
    q = q * s + 2.0 / 9.0
    q = q * s + 2.0 / 7.0
    q = q * s + 2.0 / 5.0
    q = q * s + 2.0 / 3.0
    fe = float(e)
    y = fe * _LN2_HI + (2.0 * f + (f * s * q + fe * _LN2_LO))
    # zero, negative, inf and NaN inputs: libm's answers
    y = -float("inf") if x == 0.0 else y
    y = float("nan") if x < 0.0 or x != x else y
    y = x if x == float("inf") else y
    return y


@njit(inline="always")
def sincos_turns(u):  # type: ignore[no-untyped-def]
    v = u - ((u + _ROUND) - _ROUND)  # in [-1/2, 1/2], exact
    k = v * 4.0 + _ROUND
    q = k - _ROUND  # nearest quarter turn, -2 .. 2
    quadrant = (as_int64(k) - as_int64(_ROUND)) & 3
    t = (v - 0.25 * q) * _TWO_PI  # in [-pi/4, pi/4]
    t2 = t * t
    sp = -1.0 / 355687428096000.0
    sp = sp * t2 + 1.0 / 1307674368000.0
    sp = sp * t2 - 1.0 / 6227020800.0
    sp = sp * t2 + 1.0 / 39916800.0
    sp = sp * t2 - 1.0 / 362880.0
    sp = sp * t2 + 1.0 / 5040.0
    sp = sp * t2 - 1.0 / 120.0
    sp = sp * t2 + 1.0 / 6.0
    sn = t - t * t2 * sp
    cp = 1.0 / 20922789888000.0
    cp = cp * t2 - 1.0 / 87178291200.0
    cp = cp * t2 + 1.0 / 479001600.0
    cp = cp * t2 - 1.0 / 3628800.0
    cp = cp * t2 + 1.0 / 40320.0
    cp = cp * t2 - 1.0 / 720.0
    cp = cp * t2 + 1.0 / 24.0
    cp = cp * t2 - 0.5
    cs = 1.0 + t2 * cp
    # rotate by quadrant quarter turns: (sin, cos) -> (cos, -sin) -> (-sin, -cos) -> ...
    # (arithmetic, not branches: LLVM turns ``q == 2 or q == 3`` into an unvectorisable
    # switch)
    swap = (quadrant & 1) == 1
    s_out = cs if swap else sn
    c_out = sn if swap else cs
    s_out = s_out * (1.0 - float(quadrant & 2))
    c_out = c_out * (1.0 - float((quadrant + 1) & 2))
    return s_out, c_out
