"""TRT's magic parameter ``Lambda`` through the solver, the cases and ``hpc cfd``.

Reference: in a force-driven channel with half-way bounce-back walls, the steady TRT solution is
the parabola shifted by a uniform slip that depends on ``Lambda`` alone (Ginzburg, Verhaeghe &
d'Humieres 2008): ``u(y) = F/(2 nu) y (H - y) + F (16 Lambda - 3) / (24 nu)``, ``y`` the cell
centre's distance from the wall. 3/16 puts the wall exactly mid-link; ``(tau - 1/2)^2`` is BGK.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpc.domains.cfd import Channel, LidDrivenCavity, SchaeferTurek
from hpc.domains.cfd.solver import LBMSolver

from hpc.cli import main

RNG = np.random.default_rng()


def _closed_form(ch: Channel, magic: float) -> np.ndarray:
    y = np.arange(ch.ny) + 0.5
    nu, f, h = ch.units.nu, ch.force, ch.ny
    return f / (2 * nu) * y * (h - y) + f * (16 * magic - 3) / (24 * nu)


@pytest.mark.parametrize("magic", [0.25, 3 / 16, 1 / 12, 0.02])
def test_steady_poiseuille_slip_follows_lambda_as_theory_says(magic):
    ny = 8  # kernels are compiled per block shape: a random viscosity instead
    tau = float(RNG.uniform(0.7, 1.1))  # Re from tau: nu = (tau - 1/2) / 3
    u_max = 0.05
    ch = Channel(2, ny, re=u_max * ny / ((tau - 0.5) / 3), u_max=u_max, collision="trt",
                 magic=magic)
    assert ch.solver.omega_minus == pytest.approx(1 / (magic / (ch.units.tau - 0.5) + 0.5))
    ch.solver.step(int(30 * ny * ny / ch.units.nu))  # slowest mode decays as exp(-30 pi^2)
    _, u = ch.solver.macroscopic()
    ref = _closed_form(ch, magic)
    assert np.abs(u[0] - ref[None, :]).max() <= 1e-10 * u_max, (ny, tau)
    # the slip itself: u_max / (3 ny^2) at Lambda = 1/4, wall beyond mid-link
    slip = u[0].mean(axis=0) - ch.analytic_profile()
    expected = ch.force * (16 * magic - 3) / (24 * ch.units.nu)
    assert slip == pytest.approx(np.full(ny, expected), abs=1e-10 * u_max)
    if magic == 0.25:
        assert expected == pytest.approx(u_max / (3 * ny * ny))


def test_trt_at_the_bgk_magic_parameter_is_bgk_to_rounding():
    n = 20
    re = float(RNG.uniform(50, 200))
    bgk = LidDrivenCavity(n, re=re, u_lid=0.1, collision="bgk")
    lam = bgk.units.bgk_magic
    assert lam == pytest.approx((bgk.units.tau - 0.5) ** 2)
    trt = LidDrivenCavity(n, re=re, u_lid=0.1, collision="trt", magic=lam)
    assert trt.solver.omega_minus == pytest.approx(trt.solver.omega_plus, rel=1e-15)
    for case in (bgk, trt):
        case.solver.step(301)  # AA pairs and the odd pull step
    f_bgk, f_trt = bgk.solver.f, trt.solver.f
    assert np.abs(f_trt - f_bgk).max() <= 1e-14
    # bodies, Bouzidi links and NEE faces too
    runs = []
    for collision in ("bgk", "trt"):
        kw = {"magic": runs[0][2]} if runs else {}
        st = SchaeferTurek(diameter=10, re=20, u_max=0.1, ramp=20, collision=collision, **kw)
        st.run(60, check_every=60)
        runs.append((st.solver.f.copy(), st.history_table()["cd"], st.units.bgk_magic))
    assert np.abs(runs[0][0] - runs[1][0]).max() <= 1e-14
    cd_bgk, cd_trt = runs[0][1], runs[1][1]
    assert np.abs(cd_trt - cd_bgk).max() <= 1e-12 * np.abs(cd_bgk).max()


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"collision": "trt", "magic": 0.0}, ["magic=0.0", "finite and > 0"]),
        ({"collision": "trt", "magic": -0.1}, ["magic=-0.1", "finite and > 0"]),
        ({"collision": "trt", "magic": math.nan}, ["magic=nan"]),
        ({"collision": "trt", "magic": math.inf}, ["magic=inf"]),
        ({"collision": "trt", "magic": "big"}, ["magic='big'", "number"]),
        ({"collision": "bgk", "magic": 0.1}, ["not 'bgk'", "(tau - 1/2)^2"]),
        ({"collision": "mrt", "magic": 0.1, "mrt_rates": {"q": 1.1}}, ["not both"]),
    ],
)
def test_bad_magic_parameters_are_refused_with_the_reason(kw, words):
    with pytest.raises(ValueError) as exc:
        Channel(2, 8, re=4, u_max=0.05, **kw)
    for word in words:
        assert word in str(exc.value), (word, str(exc.value))


def test_magic_sets_mrt_energy_flux_rate():
    ch = Channel(2, 8, re=4, u_max=0.05, collision="mrt", magic=0.02)
    assert ch.solver.rates["q"] == pytest.approx(1 / (0.02 / (ch.units.tau - 0.5) + 0.5))
    assert isinstance(ch.solver, LBMSolver) and ch.solver.magic == 0.02


def test_command_line_magic_reaches_the_solver_and_bad_values_are_one_line(capsys):
    ny, lam = 8, 0.25
    rc = main(["cfd", "channel", "--nx", "2", "--ny", str(ny), "--re", "4", "--collision", "trt",
               "--magic", str(lam), "--steps", "20000", "--tol", "1e-13", "--check-every",
               "2000"])
    out = capsys.readouterr().out
    assert rc == 0 and "TRT Lambda=0.25" in out, out
    # the run's L2 error against the mid-link parabola is the closed-form slip's
    y = np.arange(ny) + 0.5
    parabola = 4 * y * (ny - y) / ny**2
    slip = (16 * lam - 3) / 3 / ny**2  # F (16 L - 3) / (24 nu) over u_max = F ny^2 / (8 nu)
    l2 = math.sqrt(ny * slip**2 / (parabola**2).sum())
    printed = float(out.split("relative L2 error")[1].split()[0])
    assert printed == pytest.approx(l2, rel=1e-3), (printed, l2)
    for argv, words in (
        (["--collision", "trt", "--magic", "0"], ["--magic 0.0", "finite and > 0"]),
        (["--collision", "trt", "--magic", "inf"], ["--magic inf"]),
        (["--collision", "bgk", "--magic", "0.1"], ["not 'bgk'"]),
    ):
        rc = main(["cfd", "channel", "--ny", "8", "--steps", "10", "--quiet", *argv])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and err.startswith("hpc cfd channel: error: ") and "\n" not in err, err
        for word in words:
            assert word in err, (word, err)
