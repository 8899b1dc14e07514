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
