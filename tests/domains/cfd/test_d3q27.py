"""The D3Q27 velocity set: its weights and equilibrium against closed forms, Taylor-Green decay,
Poiseuille flow and decomposition invariance (its GPU kernels: check_lbm_cudasim.py)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hpc.domains.cfd import TaylorGreen
from hpc.domains.cfd.lattice import CS2, D3Q19, D3Q27, lattice_named
from hpc.domains.cfd.solver import LBMSolver, equilibrium

from hpc.decomposition import CartDecomposition
from tests.conftest import cli_error, mpi_script, run_mpi


def test_d3q27_is_the_cube_of_d1q3_and_its_equilibrium_moments_are_exact():
    # D3Q27 is the tensor product of D1Q3 (weights 2/3 at rest, 1/6 per side)
    d1q3 = {0: Fraction(2, 3), 1: Fraction(1, 6), -1: Fraction(1, 6)}
    assert lattice_named("d3q27") is D3Q27 and D3Q27.q == 27
    assert sorted(map(tuple, D3Q27.c.tolist())) == sorted(itertools.product((-1, 0, 1), repeat=3))
    for ci, wi in zip(D3Q27.c.tolist(), D3Q27.w, strict=True):
        assert wi == float(math.prod(d1q3[v] for v in ci)), ci  # 8/27, 2/27, 1/54, 1/216
    assert (D3Q27.c[D3Q27.opposite] == -D3Q27.c).all()
    assert D3Q27.c[:19].tolist() == D3Q19.c.tolist()  # D3Q19's order, then the corners
    c = D3Q27.c.astype(np.float64)
    fourth = np.einsum("i,ia,ib,ic,id->abcd", D3Q27.w, c, c, c, c)
    delta = np.eye(3)
    iso = (
        np.einsum("ab,cd->abcd", delta, delta)
        + np.einsum("ac,bd->abcd", delta, delta)
        + np.einsum("ad,bc->abcd", delta, delta)
    )
    np.testing.assert_allclose(fourth, iso / 9, atol=1e-15)  # isotropic, c_s^4 = 1/9
    rng = np.random.default_rng()
    rho = 1 + 0.1 * rng.standard_normal((5, 4))
    u = [0.1 * rng.standard_normal((5, 4)) for _ in range(3)]
    feq = equilibrium(D3Q27, rho, u)
    np.testing.assert_allclose(feq.sum(axis=0), rho, rtol=1e-14)
    for a in range(3):
        np.testing.assert_allclose(np.tensordot(c[:, a], feq, 1), rho * u[a], atol=1e-15)
        for b in range(3):
            second = np.tensordot(c[:, a] * c[:, b], feq, 1)
            want = rho * CS2 * (a == b) + rho * u[a] * u[b]
            np.testing.assert_allclose(second, want, rtol=1e-13, atol=1e-16)


def test_mrt_is_refused_on_d3q27_with_the_reason(capsys):
    decomp = CartDecomposition((4, 4, 4), periodic=True, halo=1)
    with pytest.raises(ValueError, match="MRT is not available on D3Q27.*bgk.*trt"):
        LBMSolver(decomp, D3Q27, 0.8, collision="mrt")
    argv = ["cfd", "taylor-green", "--n", "8", "--quiet", "--lattice", "D3Q27"]
    err = cli_error(capsys, [*argv, "--collision", "mrt"])
    assert "--collision mrt is not available on D3Q27" in err, err
    err = cli_error(capsys, [*argv, "--dim", "2"])
    assert "--lattice D3Q27 is 3-D, not --dim 2" in err, err


@pytest.mark.parametrize(("collision", "tol"), [("trt", 0.02), ("bgk", 0.03)])
def test_d3q27_taylor_green_decays_at_the_viscous_rate(collision, tol):
    """The 3-D vortex at Re = 4 (n = 16): mean energy decay rate between steps 20 and 60
    against the Stokes rate ``6 nu k^2``. The lattice's own error is about ``-(k dx)^2 / 12``
    (the discrete Laplacian, -1.3% here); measured -1.5% (TRT) and +2.2% (BGK)."""
    tg = TaylorGreen(16, nu=0.04, u0=0.01, dim=3, lattice="D3Q27", collision=collision,
                     streaming="pull")
    assert tg.solver.lattice is D3Q27
    # the case's closed form starts from the initial field's energy, U^2 / 8
    assert tg.kinetic_energy() == pytest.approx(tg.analytic_energy(0), rel=1e-12)
    tg.solver.step(20)
    e1 = tg.kinetic_energy()
    tg.solver.step(40)
    e2 = tg.kinetic_energy()
    rate = -math.log(e2 / e1) / 40
    exact = 6 * 0.04 * tg.k**2
    assert abs(rate / exact - 1) < tol, rate / exact - 1
    ratio = tg.analytic_energy(60) / tg.analytic_energy(20)
    assert ratio == pytest.approx(math.exp(-40 * exact), rel=1e-12)


def test_d3q27_poiseuille_with_a_body_force_is_exact_with_trt():
    """Periodic along x and z, half-way bounce-back walls at y = 0 and 8, body force along
    x: TRT (magic 3/16) gives the parabola to round-off at any viscosity, as on D2Q9 and
    D3Q19."""
    ny, tau, u_max = 8, 2.0, 0.05
    nu = (tau - 0.5) / 3
    force = 8 * nu * u_max / ny**2
    decomp = CartDecomposition((4, ny, 4), periodic=(True, False, True), halo=1)
    solver = LBMSolver(decomp, D3Q27, tau, collision="trt", force=(force, 0.0, 0.0),
                       streaming="pull")
    solver.step(320)  # the slowest transient decays as exp(-nu pi^2 t / ny^2): e^-24
    _, u = solver.macroscopic()
    y = np.arange(ny) + 0.5
    exact = 4 * u_max * y * (ny - y) / ny**2
    err = np.abs(u[0] - exact[None, :, None]).max() / u_max
    assert err < 1e-9, err
    assert np.abs(u[1]).max() < 1e-12 and np.abs(u[2]).max() < 1e-12


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_d3q27_and_convective_outlets_are_bitwise_identical_on_two_ranks():
    proc = run_mpi(2, [str(mpi_script("check_d3q27_outlet_invariance.py"))], timeout=240)
    assert "bitwise identical" in proc.stdout
