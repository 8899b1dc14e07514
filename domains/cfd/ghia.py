"""Reference centre-line velocities of the lid-driven cavity: Ghia, Ghia and Shin (1982),
"High-Re solutions for incompressible flow using the Navier-Stokes equations and a multigrid
method", J. Comput. Phys. 48, 387-411, Tables I and II."""

from __future__ import annotations

import numpy as np

__all__ = ["GHIA", "ghia_deviation"]


def ghia_deviation(re: int, y, u, x, v) -> tuple[float, float]:
    """max |u - u_Ghia| and max |v - v_Ghia| for the centre lines (y, u, x, v)."""
    gy, gu, gx, gv = GHIA[re]
    du = np.abs(np.interp(gy, y, u) - gu)
    dv = np.abs(np.interp(gx, x, v) - gv)
    return float(du.max()), float(np.nanmax(dv))


_Y = [
    1.0000,
    0.9766,
    0.9688,
    0.9609,
    0.9531,
    0.8516,
    0.7344,
    0.6172,
    0.5000,
    0.4531,
    0.2813,
    0.1719,
    0.1016,
    0.0703,
    0.0625,
    0.0547,
    0.0000,
]
_X = [
    1.0000,
    0.9688,
    0.9609,
    0.9531,
    0.9453,
    0.9063,
    0.8594,
    0.8047,
    0.5000,
    0.2344,
    0.2266,
    0.1563,
    0.0938,
    0.0781,
    0.0703,
    0.0625,
    0.0000,
]
# Ghia, Ghia & Shin (1982), Tables I and II; Re=400's v at x=0.9063 is a known misprint (NaN).
GHIA = {
    100: (
        np.array(_Y),
        np.array(
            [
                1.00000,
                0.84123,
                0.78871,
                0.73722,
                0.68717,
                0.23151,
                0.00332,
                -0.13641,
                -0.20581,
                -0.21090,
                -0.15662,
                -0.10150,
                -0.06434,
                -0.04775,
                -0.04192,
                -0.03717,
                0.00000,
            ]
        ),
        np.array(_X),
        np.array(
            [
                0.00000,
                -0.05906,
                -0.07391,
                -0.08864,
                -0.10313,
                -0.16914,
                -0.22445,
                -0.24533,
                0.05454,
                0.17527,
                0.17507,
                0.16077,
                0.12317,
                0.10890,
                0.10091,
                0.09233,
                0.00000,
            ]
        ),
    ),
    400: (
        np.array(_Y),
        np.array(
            [
                1.00000,
                0.75837,
                0.68439,
                0.61756,
                0.55892,
                0.29093,
                0.16256,
                0.02135,
                -0.11477,
                -0.17119,
                -0.32726,
                -0.24299,
                -0.14612,
                -0.10338,
                -0.09266,
                -0.08186,
                0.00000,
            ]
        ),
        np.array(_X),
        np.array(
            [
                0.00000,
                -0.12146,
                -0.15663,
                -0.19254,
                -0.22847,
                np.nan,
                -0.44993,
                -0.38598,
                0.05186,
                0.30174,
                0.30203,
                0.28124,
                0.22965,
                0.20920,
                0.19713,
                0.18360,
                0.00000,
            ]
        ),
    ),
}
