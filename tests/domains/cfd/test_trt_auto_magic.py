"""``magic="auto"``: TRT's magic parameter chosen from the grid Reynolds number ``u_max / nu``.

Reference (docs/cfd.md, "TRT's magic parameter"): 3/16 up to ``u_max / nu = 7.5``, where it was
measured stable with open faces, above it ``6 (nu / u_max)^2``, which kept every measured
Schaefer-Turek 2D-2 run stable. Cases with an open inflow face default to it; walls-only and
periodic cases keep 3/16.
"""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.cfd import D2Q9, Channel, LidDrivenCavity, SchaeferTurek, TaylorGreen
from hpc.domains.cfd.solver import LBMSolver
from hpc.domains.cfd.units import auto_magic

from hpc.cli import build_parser, main
from hpc.decomposition import CartDecomposition

RNG = np.random.default_rng()


def _rule(tau: float, u_max: float) -> float:
    """The documented rule, written from the docs: nu = (tau - 1/2) / 3."""
    re_grid = u_max / ((tau - 0.5) / 3.0)
    return 3 / 16 if re_grid <= 7.5 else min(3 / 16, 6.0 * (1.0 / re_grid) ** 2)


def test_auto_magic_is_the_documented_rule_for_random_tau_and_u_max():
    taus = RNG.uniform(0.501, 0.8, 400)
    speeds = RNG.uniform(0.005, 0.15, 400)
    got = np.array([auto_magic((t - 0.5) / 3.0, u) for t, u in zip(taus, speeds, strict=True)])
    want = np.array([_rule(t, u) for t, u in zip(taus, speeds, strict=True)])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
    assert (got < 3 / 16).any() and (got == 3 / 16).any(), "both branches drawn"
    # the edge: 3/16 kept at u_max / nu = 7.5, the power law just above it
    assert auto_magic(0.01, 0.075) == 3 / 16
    assert auto_magic(0.01, 0.0751) == pytest.approx(6 * (0.01 / 0.0751) ** 2, rel=1e-14)
    # through the solver: TRT's odd rate and MRT's energy-flux rate follow the chosen Lambda
    d = CartDecomposition((4, 4), periodic=True, halo=1)
    for tau, u in zip(RNG.uniform(0.501, 0.8, 6), RNG.uniform(0.005, 0.15, 6), strict=True):
        lam = _rule(tau, u)
        trt = LBMSolver(d, D2Q9, tau, collision="trt", magic="auto", u_max=u)
        assert trt.magic_auto and trt.magic == pytest.approx(lam, rel=1e-13)
        assert trt.omega_minus == pytest.approx(1 / (lam / (tau - 0.5) + 0.5), rel=1e-13)
        mrt = LBMSolver(d, D2Q9, tau, collision="mrt", magic="auto", u_max=u)
        assert mrt.rates["q"] == pytest.approx(1 / (lam / (tau - 0.5) + 0.5), rel=1e-13)


def _run(case, steps: int) -> tuple[np.ndarray, float]:
    case.solver.step(steps)
    return case.solver.f.copy(), case.solver.magic


def test_open_cases_default_to_auto_bitwise_as_the_explicit_value():
    # Schaefer-Turek 2D-2 at D = 10 (u_max / nu = 15: 3/16 diverges there) and an open
    # channel at u_max / nu = 20, TRT and MRT: the default is the rule's value, bit for bit
    st = SchaeferTurek(diameter=10, re=100, u_max=0.1, ramp=50, sample_every=0)
    lam = 6 * (st.units.nu / 0.1) ** 2
    assert st.solver.magic_auto and st.solver.magic == pytest.approx(lam, rel=1e-13)
    f_auto, lam_auto = _run(st, 150)
    explicit = SchaeferTurek(diameter=10, re=100, u_max=0.1, ramp=50, sample_every=0,
                             magic=lam_auto)
    f_float, _ = _run(explicit, 150)
    assert not explicit.solver.magic_auto
    assert np.isfinite(f_auto).all() and f_auto.tobytes() == f_float.tobytes()
    for collision in ("trt", "mrt"):
        ch = Channel(32, 8, re=160, u_max=0.1, inflow=True, collision=collision)
        assert ch.solver.magic == pytest.approx(6 / 20**2, rel=1e-13)
        f_auto, lam_auto = _run(ch, 200)
        f_float, _ = _run(
            Channel(32, 8, re=160, u_max=0.1, inflow=True, collision=collision, magic=lam_auto),
            200,
        )
        assert f_auto.tobytes() == f_float.tobytes(), collision
    # BGK, and MRT given its energy-flux rate, have no Lambda to choose: as before
    assert not SchaeferTurek(diameter=10, re=100, collision="bgk").solver.magic_auto
    mrt_q = Channel(8, 8, re=160, u_max=0.1, inflow=True, collision="mrt", mrt_rates={"q": 1.9})
    assert mrt_q.solver.rates["q"] == 1.9 and not mrt_q.solver.magic_auto


def test_the_coarse_cylinder_that_diverges_with_3_16_is_stable_by_default():
    # Schaefer-Turek 2D-2 at D = 6 (133 x 25 cells, u_max / nu = 24.6): 3/16 diverged at step
    # 1,500 in the docs' table; the default (Lambda = 0.0099) runs 8,000 steps with bounded
    # forces (the docs' divergence criterion: c_D not finite or above 100)
    diverged = SchaeferTurek(diameter=6, re=100, u_max=0.1, sample_every=50, magic=3 / 16)
    diverged.run(2500, check_every=2500)
    cd = diverged.history_table()["cd"]
    assert not (np.isfinite(cd) & (np.abs(cd) < 100)).all(), "3/16 diverges here"
    st = SchaeferTurek(diameter=6, re=100, u_max=0.1, sample_every=50)
    assert st.solver.magic == pytest.approx(6 * (st.units.nu / 0.1) ** 2, rel=1e-13)
    st.run(8000, check_every=8000)
    h = st.history_table()
    assert np.isfinite(h["cd"]).all() and np.isfinite(h["cl"]).all()
    assert np.abs(h["cd"]).max() < 20 and np.abs(h["cl"]).max() < 20, (h["cd"], h["cl"])
    assert h["cd"][-40:].mean() > 1, "the flow drags the cylinder downstream"


def test_walls_only_and_periodic_cases_keep_3_16_and_take_auto_when_asked():
    # grid Reynolds numbers where the rule would lower Lambda
    cases = [
        LidDrivenCavity(32, re=1000, u_lid=0.1),  # u / nu = 31
        Channel(8, 32, re=300, u_max=0.05),  # periodic, force-driven: 9.4
        TaylorGreen(16, re=300, u0=0.05, collision="trt"),  # 18.8
    ]
    for case in cases:
        assert case.solver.magic == 3 / 16 and not case.solver.magic_auto, type(case).__name__
    cavity = LidDrivenCavity(32, re=1000, u_lid=0.1, magic="auto")
    assert cavity.solver.magic_auto
    assert cavity.solver.magic == pytest.approx(_rule(cavity.units.tau, 0.1), rel=1e-13)


def test_command_line_magic_auto_parses_and_the_header_says_so(capsys):
    parser = build_parser()
    assert parser.parse_args(["cfd", "cavity", "--magic", "auto"]).magic == "auto"
    assert parser.parse_args(["cfd", "cavity", "--magic", "0.02"]).magic == 0.02
    with pytest.raises(SystemExit):
        parser.parse_args(["cfd", "cavity", "--magic", "big"])
    assert "'big': expected a number" in capsys.readouterr().err
    run = ["--nx", "16", "--ny", "8", "--re", "160", "--u-max", "0.1", "--steps", "20",
           "--check-every", "20", "--tol", "0"]
    for extra, words in (
        (["--inflow"], "TRT Lambda=0.015 (auto: u_max/nu=20)"),  # the default with an inlet
        (["--inflow", "--magic", "auto"], "TRT Lambda=0.015 (auto: u_max/nu=20)"),
        (["--inflow", "--magic", "0.1"], "TRT Lambda=0.1 "),
        ([], "TRT Lambda=0.1875 "),  # periodic: 3/16
        (["--magic", "auto"], "TRT Lambda=0.015 (auto: u_max/nu=20)"),
    ):
        assert main(["cfd", "channel", *run, *extra]) == 0, extra
        out = capsys.readouterr().out
        assert words in out, (extra, out)


def test_auto_with_bgk_or_without_a_velocity_scale_is_refused_with_the_reason(capsys):
    with pytest.raises(ValueError, match="not 'bgk'"):
        Channel(8, 8, re=10, inflow=True, collision="bgk", magic="auto")
    with pytest.raises(ValueError, match="not 'bgk'"):
        SchaeferTurek(diameter=4, re=20, collision="bgk", magic="auto")
    d = CartDecomposition((4, 4), periodic=True, halo=1)
    with pytest.raises(ValueError, match="give u_max"):
        LBMSolver(d, D2Q9, 0.6, collision="trt", magic="auto")
    with pytest.raises(ValueError, match="applies with magic='auto'"):
        LBMSolver(d, D2Q9, 0.6, collision="trt", magic=0.1, u_max=0.1)
    with pytest.raises(ValueError, match="magic='Auto'"):
        LBMSolver(d, D2Q9, 0.6, collision="trt", magic="Auto")
    rc = main(["cfd", "channel", "--ny", "8", "--steps", "10", "--quiet", "--inflow",
               "--collision", "bgk", "--magic", "auto"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("hpc cfd channel: error: ") and "\n" not in err, err
    assert "magic=auto" in err and "not 'bgk'" in err, err
