"""Quasi-random paths: scrambled Sobol points (scipy.stats.qmc) through a Brownian bridge.

The bridge spends the first (best distributed) Sobol coordinates on the coarse shape of the
path: the terminal value first, then midpoints by bisection. Errors come from ``replicates``
independent scramblings (randomised QMC): the estimate is their mean and the standard error the
spread of their means over sqrt(replicates). A block's points are found by index
(``fast_forward``), so results are the same for any batching, as with the pseudo-random engine.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special
from scipy.stats import qmc

__all__ = ["bridge_matrix", "brownian_bridge", "sobol_block_sums"]


def _plan(n: int) -> list[tuple[int, int, int]]:
    """(target, left, right) in filling order over dates 1..n; 0 is time zero (W = 0)."""
    plan = [(n, 0, -1)]  # the terminal date, from time 0
    queue = [(0, n)]
    while queue:
        nxt = []
        for left, right in queue:
            if right - left > 1:
                mid = (left + right) // 2
                plan.append((mid, left, right))
                nxt += [(left, mid), (mid, right)]
        queue = nxt
    return plan


def brownian_bridge(z: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Brownian motion at ``times`` (increasing, > 0) from standard normals ``z[..., k]``
    assigned in bridge order (coordinate 0 builds the last date)."""
    n = len(times)
    t = np.concatenate([[0.0], np.asarray(times, dtype=np.float64)])
    w = np.zeros(z.shape[:-1] + (n + 1,))
    for k, (target, left, right) in enumerate(_plan(n)):
        if right < 0:
            w[..., target] = math.sqrt(t[target]) * z[..., k]
            continue
        span = t[right] - t[left]
        a = (t[right] - t[target]) / span
        b = (t[target] - t[left]) / span
        sd = math.sqrt((t[target] - t[left]) * (t[right] - t[target]) / span)
        w[..., target] = a * w[..., left] + b * w[..., right] + sd * z[..., k]
    return w[..., 1:]


def bridge_matrix(times: np.ndarray) -> np.ndarray:
    """The linear map ``W = A z`` of :func:`brownian_bridge` (for checks: ``A A^T`` must be
    ``min(t_i, t_j)``)."""
    n = len(times)
    return brownian_bridge(np.eye(n), times).T


def sobol_block_sums(
    first: int, count: int, block: int, replicates: int, seed: int, payoff: Any, steps: int
) -> np.ndarray:
    """``(count, replicates)``: per block and scrambling, the sum of ``payoff(w)`` over the
    block's points, ``w`` the bridged Brownian paths ``(block, steps)`` at unit spacing."""
    out = np.empty((count, replicates))
    times = np.arange(1, steps + 1, dtype=np.float64)
    for r in range(replicates):
        sampler = qmc.Sobol(steps, scramble=True, seed=np.random.default_rng([seed, r]))
        if first:  # (scipy cannot fast-forward by zero points)
            sampler.fast_forward(first * block)
        for b in range(count):
            u = sampler.random(block)
            w = brownian_bridge(special.ndtri(u), times)
            out[b, r] = math.fsum(payoff(w))
    return out
