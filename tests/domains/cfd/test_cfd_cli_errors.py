"""``hpc cfd`` on bad input: one clear line naming the option or file, exit 2, before the
solver runs, nothing written."""

from __future__ import annotations

import h5py
import pytest

from hpc.cli import main

CASES = [
    # (arguments, words of the message)
    (["cavity", "--steps", "-3"], ["--steps -3", "0 or more"]),
    (["cavity", "--check-every", "0"], ["--check-every 0", "1 or more"]),
    (["cavity", "--checkpoint-every", "-1"], ["--checkpoint-every -1"]),
    (["cavity", "--n", "0"], ["must be positive"]),
    (["cavity", "--re", "-5"], ["Re=-5.0", "positive"]),
    (["cavity", "--u-lid", "0.9"], ["Mach number"]),
    (["cavity", "--backend", "tpu"], ["backend 'tpu'"]),
    (["cavity", "--out", "{t}/nodir/cavity.h5"], ["--out", "nodir", "does not exist"]),
    (["cavity", "--out", "{t}"], ["is a directory"]),
    (["cavity", "--checkpoint-dir", "{t}/afile", "--restart"], ["is a file"]),
    (["taylor-green", "--n", "2"], ["tau=", "unstable"]),
    (["channel", "--dim", "3"], ["2-D"]),
    (["channel", "--outlet", "convective"], ["--outlet needs --inflow"]),
    (["channel", "--inflow", "--outlet-speed", "0.1"], ["--outlet-speed needs --outlet"]),
    (["taylor-green", "--lattice", "D3Q27", "--dim", "2"], ["D3Q27 is 3-D", "--dim 2"]),
    (["plot", "{t}/missing.h5"], ["missing.h5", "No such file"]),
    (["plot", "{t}/afile"], ["afile", "file signature"]),
    (["plot", "{t}/other.h5"], ["other.h5", "not an hpc cfd result", "'ux'"]),
    (["plot", "{t}/other.h5", "--png", "{t}/nodir/p.png"], ["--png", "does not exist"]),
]


@pytest.mark.parametrize("argv, words", CASES, ids=lambda c: " ".join(c)[:40] if c else "")
def test_bad_input_is_one_line_naming_the_problem(tmp_path, capsys, argv, words):
    (tmp_path / "afile").write_text("not HDF5\n")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = [1.0]
    before = sorted(p.name for p in tmp_path.iterdir())
    small = [] if "--n" in argv or argv[0] == "channel" else ["--n", "16"]
    quiet = [] if argv[0] == "plot" else ["--quiet", *small]
    rc = main(["cfd", *[a.format(t=tmp_path) for a in argv], *quiet])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith(f"hpc cfd {argv[0]}: error: ") and "\n" not in err, err
    for word in words:
        assert word in err, (word, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_wrong_types_are_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["cfd", "cavity", "--re", "fast"])
    assert exc.value.code == 2
    assert "--re: invalid float value: 'fast'" in capsys.readouterr().err


@pytest.mark.parametrize("changed, words", [
    (["--magic", "0.25"], ["--magic None in the checkpoint, 0.25 now"]),
    (["--collision", "bgk"], ["--collision trt in the checkpoint, bgk now"]),
    (["--re", "200"], ["--re 100.0 in the checkpoint, 200.0 now"]),
    (["--dtype", "float32"], ["--dtype float64 in the checkpoint, float32 now"]),
])
def test_a_restart_under_other_flow_options_is_refused(tmp_path, capsys, monkeypatch,
                                                       changed, words):
    flow = ["cavity", "--quiet", "--n", "16", "--re", "100", "--collision", "trt"]
    ckpt = ["--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "10"]
    assert main(["cfd", *flow, *ckpt, "--steps", "20"]) == 0
    # the same flow, run longer with another report interval, from another folder (the
    # checkpoint folder spelled relatively): accepted
    monkeypatch.chdir(tmp_path)
    relative = ["--checkpoint-dir", "ck", "--checkpoint-every", "10"]
    assert main(["cfd", *flow, *relative, "--steps", "30", "--check-every", "5",
                 "--restart"]) == 0
    assert "restarted from step 20" in capsys.readouterr().out
    saved = sorted(p.name for p in (tmp_path / "ck").iterdir())
    rc = main(["cfd", *flow, *relative, "--steps", "40", "--restart", *changed])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("hpc cfd cavity: error: --restart from ") and "\n" not in err, err
    for word in words:
        assert word in err, (word, err)
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == saved  # nothing written
