"""hpc.vmath: exp, log and sincos against NumPy/long double, and that loops over them vectorise."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from hpc import vmath


@njit(error_model="numpy")
def _apply(x, which, out, out2):  # type: ignore[no-untyped-def]
    for i in range(x.size):
        if which == 0:
            out[i] = vmath.exp(x[i])
        elif which == 1:
            out[i] = vmath.log(x[i])
        else:
            out[i], out2[i] = vmath.sincos_turns(x[i])


def _run(x, which):
    out, out2 = np.empty_like(x), np.empty_like(x)
    _apply(x, which, out, out2)
    return out, out2


def _ulps(got, ref):
    """Largest error in units of 2**-52 |ref| (at most the error in ulps). Relative error
    first: a library loaded earlier may have turned on flush-to-zero, which zeroes anything
    subnormal (np.spacing of tiny values, or |ref| * 2**-52)."""
    normal = np.isfinite(ref) & (np.abs(ref) >= np.finfo(np.float64).tiny)
    np.testing.assert_array_equal(got[~normal], ref[~normal])
    return np.max(np.abs(got[normal] - ref[normal]) / np.abs(ref[normal]) * 2.0**52)


def test_exp_is_within_one_ulp_over_the_whole_range():
    rng = np.random.default_rng()
    x = np.concatenate([rng.uniform(-708, 709.7, 500_000), rng.uniform(-1, 1, 500_000)])
    assert _ulps(_run(x, 0)[0], np.exp(x)) <= 1.0


def test_log_is_within_two_ulps_from_subnormals_to_the_largest_double():
    rng = np.random.default_rng()
    x = np.concatenate([np.exp(rng.uniform(-745, 709, 500_000)), rng.uniform(0.5, 2.0, 500_000)])
    assert _ulps(_run(x, 1)[0], np.log(x)) <= 2.0


def test_sincos_of_turns_against_long_double():
    rng = np.random.default_rng()
    u = np.concatenate([rng.uniform(0, 1, 200_000), rng.uniform(-3, 3, 1000), [0, 0.25, 0.5]])
    s, c = _run(u, 2)
    two_pi = np.longdouble("6.283185307179586476925286766559005768")
    angle = two_pi * u.astype(np.longdouble)
    # absolute: the reference itself loses relative accuracy near the zeros
    assert float(np.max(np.abs(s - np.sin(angle)))) <= 2.5e-16
    assert float(np.max(np.abs(c - np.cos(angle)))) <= 2.5e-16
    assert np.all(s * s + c * c == pytest.approx(1.0, abs=5e-16))
    assert s[-3:].tolist() == [0.0, 1.0, 0.0] and c[-3:].tolist() == [1.0, 0.0, -1.0]


@pytest.mark.parametrize("which", [0, 1])
def test_special_values_are_libms(which):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-310, -1.0, 1e308, 709.78, -708.3])
    with np.errstate(all="ignore"):
        ref = np.exp(x) if which == 0 else np.log(x)
    got = _run(x, which)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=4e-16, atol=0)


def test_exp_below_the_smallest_normal_flushes_to_zero():
    got = _run(np.array([-709.0, -745.2, -1e4]), 0)[0]
    assert got.tolist() == [0.0, 0.0, 0.0]


def test_a_loop_over_them_is_vectorised():
    @njit(error_model="numpy")
    def body(x, out):  # type: ignore[no-untyped-def]
        for i in range(x.size):
            s, c = vmath.sincos_turns(x[i])
            out[i] = vmath.exp(vmath.log(x[i]) + s * c)

    x = np.random.default_rng(0).uniform(0.1, 1, 64)
    out = np.empty_like(x)
    body(x, out)
    ir = next(iter(body.inspect_llvm().values()))
    assert " x double>" in ir, "no vector instructions: a call or a branch blocks vectorisation"
