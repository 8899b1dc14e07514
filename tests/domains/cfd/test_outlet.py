"""The convective (Orlanski) outlet: a vortex leaves through it with far less reflection than
through the pressure outlet, and it holds the mass and the flow of a channel."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpc.domains.cfd import Channel
from hpc.domains.cfd.lattice import D2Q9
from hpc.domains.cfd.solver import LBMSolver, OpenBoundary

from hpc.decomposition import CartDecomposition

U0, NY, L, R0, X0, TAU = 0.05, 24, 32, 2.5, 10.0, 0.55


def _vortex_run(nx: int, outlet: str, steps: int) -> np.ndarray:
    """A vortex (Gaussian profile, its exact pressure field) carried by a uniform stream U0
    from x = X0 through a channel of ``nx`` cells: the velocity field after ``steps``."""
    d = CartDecomposition((nx, NY), periodic=False, halo=1)
    out = (
        OpenBoundary(0, 1, "pressure", density=1.0, scheme="nee")
        if outlet == "pressure"
        else OpenBoundary(0, 1, "convective")  # U_c: the mean outflow velocity
    )
    inlet = OpenBoundary(0, -1, "velocity", velocity=(U0, 0.0), scheme="nee")
    solver = LBMSolver(d, D2Q9, TAU, collision="trt", open_boundaries=[inlet, out])
    x, y = [c + 0.5 for c in solver.coordinates()]
    dx, dy = x - X0, y - NY / 2
    r2 = (dx * dx + dy * dy) / R0**2
    amp = U0 / R0 * np.exp(0.5 * (1 - r2))  # peak swirl U0 at r = R0
    p = -0.5 * math.e * U0**2 * np.exp(-r2)  # from dp/dr = rho u_theta^2 / r
    solver.initialize(1 + 3 * p, [U0 - amp * dy, amp * dx])
    solver.step(steps)
    _, u = solver.macroscopic()
    return np.stack(u)


def test_a_vortex_leaves_through_the_convective_outlet_with_little_reflection():
    """Reflected energy: the energy of the difference, over the short domain [0, L), between
    the run on it and the same run on a domain 2 L long (whose pressure outlet the vortex has
    not reached), once the vortex centre is 4 R0 past x = L. Measured 6.1e-5, 0.2% of the
    vortex's energy (convective), against 1.8e-3, 5% (pressure outlet, which pins the
    vortex's low-pressure core to density 1)."""
    steps = int((L + 4 * R0 - X0) / U0)
    reference = _vortex_run(2 * L, "pressure", steps)[:, :L]
    reflected = {}
    for outlet in ("pressure", "convective"):
        short = _vortex_run(L, outlet, steps)
        reflected[outlet] = 0.5 * float(((short - reference) ** 2).sum())
    vortex = math.pi * math.e / 4 * U0**2 * R0**2  # its kinetic energy, (e/4) pi U0^2 R0^2
    assert reflected["pressure"] > 0.02 * vortex, (reflected, vortex)
    assert reflected["convective"] < reflected["pressure"] / 8, reflected


def test_convective_outlet_holds_the_mass_and_the_flow_of_a_channel():
    """Parabolic inflow, convective outlet at the mean outflow velocity: the outlet's density
    stays at its level (the relaxation keeps an inlet's mass imbalance from accumulating), the
    flux leaves as it came in, the profile is Poiseuille's and so is the pressure drop,
    ``8 rho nu u_max / ny^2`` per cell (measured 2% above at ny = 8)."""
    nx, ny = 16, 8
    ch = Channel(nx, ny, re=4.0, u_max=0.05, inflow=True, outlet="convective")  # tau = 0.8
    kinds = [b.kind for b in ch.solver.open_boundaries]
    assert kinds == ["velocity", "convective"]
    ch.solver.step(1000)  # the slowest transient decays as exp(-nu pi^2 t / ny^2): e^-15
    rho, u = ch.solver.macroscopic()
    assert abs(rho[-1].mean() - 1.0) < 2e-3, rho[-1].mean()
    drop = (rho[0].mean() - rho[-1].mean()) / 3
    assert drop == pytest.approx(8 * ch.units.nu * 0.05 / ny**2 * (nx - 1), rel=0.05)
    mass = (rho * u[0]).sum(axis=1)
    assert np.ptp(mass) / mass.mean() < 2e-3, "the same flux through every section"
    profile = ch.analytic_profile()
    mid = u[0][nx // 2]
    scale = (mid * profile).sum() / (profile * profile).sum()
    assert scale == pytest.approx(1.0, abs=0.02)
    assert np.abs(mid - scale * profile).max() < 1e-3 * 0.05


def test_bad_convective_outlets_are_refused():
    d = CartDecomposition((8, 6), periodic=False, halo=1)
    with pytest.raises(ValueError, match="convective speed must be >= 0"):
        LBMSolver(d, D2Q9, 0.8, open_boundaries=[OpenBoundary(0, 1, "convective", speed=-0.1)])
    with pytest.raises(ValueError, match=r"relax must lie in \[0, 1\]"):
        LBMSolver(d, D2Q9, 0.8, open_boundaries=[OpenBoundary(0, 1, "convective", relax=2.0)])
    with pytest.raises(ValueError, match="does not support open boundaries"):
        LBMSolver(
            d, D2Q9, 0.8, open_boundaries=[OpenBoundary(0, 1, "convective")], streaming="aa"
        )
    with pytest.raises(ValueError, match="outlet='sponge'"):
        Channel(8, 6, inflow=True, outlet="sponge")


def test_cylinder_takes_the_convective_outlet_from_the_command_line():
    from hpc.domains.cfd.cli import _check_options, _make_case

    from hpc.cli import build_parser

    args = build_parser().parse_args(
        ["cfd", "cylinder", "--diameter", "4", "--outlet", "convective", "--outlet-speed",
         "0.04", "--lattice", "D3Q27", "--collision", "trt"]
    )
    _check_options(args)
    case = _make_case(args)
    outlet = case.solver.open_boundaries[-1]
    assert (outlet.kind, outlet.speed) == ("convective", 0.04)
    assert case.solver.lattice.name == "D3Q27" and case.dim == 3
    case.solver.close()
