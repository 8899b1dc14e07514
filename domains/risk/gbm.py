"""Path step of geometric Brownian motion (:class:`.instruments.GBM`): templates of the
Monte Carlo kernel (:mod:`.kernels`).

Exact log-normal steps at the dates ``dt, 2 dt, .., steps dt``. A sample is two paths
(:data:`PATHS`, and their antithetic partners): step ``j`` of sample ``p`` draws one Box-Muller
pair, normals ``2 j`` and ``2 j + 1`` of index ``p`` of the stream, the first for path A and
the second for path B. So every normal of every Philox call is used, whatever the step count
(one path per sample, a path of an odd step count left the last sine unused: half the random
numbers of a one-step European). State per path: ``x = ln S`` and the Brownian motion ``w``
(the derivative of ``x`` in the volatility is ``w - sigma t``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["pack", "rows", "STRIDE", "PATHS", "TEMPLATES"]

STRIDE = 2  # steps per call of _m_step (two pairs of normals); _m_tail does a last odd one
PATHS = 2  # paths of a sample (before antithetics): the pair's cosine and sine
_MROWS = _HALF = 0  # bound in the kernel


def rows(constants: dict[str, Any]) -> int:
    """State rows of one path."""
    return 2


def pack(log_s0: float, drift: float, vol: float, dt: float, steps: int) -> np.ndarray:
    """The model's parameter array (``drift``: of ``ln S`` per step)."""
    return np.array([log_s0, drift, vol, dt, steps], dtype=np.float64)


def _m_load(mp: Any) -> tuple:
    return mp[0], mp[1], mp[2], mp[3], int(mp[4])


def _m_steps(m: Any) -> int:
    return m[4]


def _m_start(st: Any, r: int, i: int, m: Any, mp: Any) -> None:
    st[r, i] = m[0]


def _m_advance(
    st: Any, r: int, i: int, z: float, drift: float, vsd: float, sqdt: float, vol: float,
    t: float, q: Any,
) -> None:  # fmt: skip
    """One step of the path at rows ``r..`` to date ``t``, observed by the payoff."""
    x = st[r, i] + (drift + vsd * z)
    w = st[r + 1, i] + sqdt * z
    st[r, i] = x
    st[r + 1, i] = w
    _p_observe(st, r + _MROWS, i, x, w - vol * t, t, q)


def _m_tail(
    st: Any, i: int, p: Any, j: int, k0: Any, k1: Any, stream: Any, m: Any, mp: Any, q: Any,
    antithetic: bool,
) -> None:  # fmt: skip
    """Step ``j`` of sample ``p``'s two paths (rows ``0``, ``_HALF``) and their antithetic
    partners (rows ``2 _HALF``, ``3 _HALF``): one pair of normals, dimensions ``2 j`` and
    ``2 j + 1`` of the sample's stream."""
    drift, vol, dt = m[1], m[2], m[3]
    sqdt = math.sqrt(dt)
    vsd = vol * sqdt
    t = (j + 1) * dt
    z1, z2 = _pair(p, np.uint64(j), k0, k1, stream, True)
    _m_advance(st, 0, i, z1, drift, vsd, sqdt, vol, t, q)
    _m_advance(st, _HALF, i, z2, drift, vsd, sqdt, vol, t, q)
    if antithetic:
        _m_advance(st, 2 * _HALF, i, -z1, drift, vsd, sqdt, vol, t, q)
        _m_advance(st, 3 * _HALF, i, -z2, drift, vsd, sqdt, vol, t, q)


def _m_step(
    st: Any, i: int, p: Any, j: int, k0: Any, k1: Any, stream: Any, m: Any, mp: Any, q: Any,
    antithetic: bool,
) -> None:  # fmt: skip
    """Steps ``j`` and ``j + 1`` as two calls of :func:`_m_tail`: in one lane loop, a path's
    state stays in registers from one step to the next."""
    _m_tail(st, i, p, j, k0, k1, stream, m, mp, q, antithetic)
    _m_tail(st, i, p, j + 1, k0, k1, stream, m, mp, q, antithetic)


def _m_terminal(st: Any, r: int, i: int, m: Any, mp: Any) -> tuple:
    t = m[4] * m[3]
    return st[r, i], st[r + 1, i] - m[2] * t, t


def _pair(index: Any, pair: Any, k0: Any, k1: Any, stream: Any, normal: bool) -> tuple:
    raise NotImplementedError  # bound to hpc.rng's compiled pair in the kernel


def _p_observe(st: Any, r: int, i: int, x: float, g: float, t: float, q: Any) -> None:
    raise NotImplementedError  # the payoff's, bound in the kernel


TEMPLATES = (_m_load, _m_steps, _m_start, _m_advance, _m_tail, _m_step, _m_terminal)
