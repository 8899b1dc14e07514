"""``hpc vector`` with bad input: empty, missing, unreadable (a directory), malformed and
wrong-type arguments give one line ``hpc vector <sub>: error: <message>`` and exit status 2,
and leave no file half-written (run in process through ``hpc.cli.main``; one case also as a
real command line)."""

from __future__ import annotations

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from hpc.cli import main
from tests.conftest import ROOT, cli_error


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "empty.h5").write_bytes(b"")
    (d / "text.h5").write_text("not HDF5\n")
    (d / "folder.h5").mkdir()
    with h5py.File(d / "plain.h5", "w") as f:
        f["x"] = np.zeros(3)
    with h5py.File(d / "strings.h5", "w") as f:
        f["train"] = np.array([b"a", b"b"])
    assert main(["vector", "build", "--synthetic", "200", "--dim", "8", "--index", "flat",
                 "--out", str(d / "ix.h5")]) == 0  # fmt: skip
    return d


def _run(capsys, argv: list[str]) -> str:
    return cli_error(capsys, argv)


SEARCH = ["vector", "search", "--synthetic", "10", "--dim", "8"]
BUILD = ["vector", "build", "--index", "flat"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([*SEARCH, "--index", "{d}/missing.h5"],
         "No such file or directory (file '{d}/missing.h5')"),
        ([*SEARCH, "--index", "{d}/empty.h5"], "file signature not found) (file '{d}/empty.h5')"),
        ([*SEARCH, "--index", "{d}/text.h5"], "file signature not found) (file '{d}/text.h5')"),
        ([*SEARCH, "--index", "{d}/folder.h5"], "Is a directory (file '{d}/folder.h5')"),
        ([*SEARCH, "--index", "{d}/plain.h5"], "not a vector index file"),
        ([*SEARCH, "--index", "{d}/ix.h5", "-k", "0"], "k=0: must be a positive integer"),
        ([*SEARCH, "--index", "{d}/ix.h5", "-k", "abc"], "argument -k: invalid int value: 'abc'"),
        (["vector", "search", "--index", "{d}/ix.h5", "--synthetic", "5", "--dim", "9"],
         "dimension 9 does not match the index dimension 8"),
        ([*SEARCH, "--index", "{d}/ix.h5", "--out", "{d}/folder.h5"],
         "--out {d}/folder.h5: is a directory, expected a file name"),
        ([*BUILD, "--data", "{d}/missing.h5", "--out", "{d}/o.h5"], "No such file or directory"),
        ([*BUILD, "--data", "{d}/empty.h5", "--out", "{d}/o.h5"], "file signature not found"),
        ([*BUILD, "--data", "{d}/plain.h5", "--out", "{d}/o.h5"],
         "not an ann-benchmarks file: no 2-D dataset 'train' (file '{d}/plain.h5')"),
        ([*BUILD, "--data", "{d}/strings.h5", "--out", "{d}/o.h5"], "not an ann-benchmarks"),
        ([*BUILD, "--synthetic", "50", "--dim", "8", "--out", "{d}/folder.h5"],
         "--out {d}/folder.h5: is a directory, expected a file name"),
        ([*BUILD, "--synthetic", "50", "--dim", "8", "--out", "{d}/nowhere/o.h5"],
         "--out {d}/nowhere/o.h5: the directory '{d}/nowhere' does not exist"),
        ([*BUILD, "--out", "{d}/o.h5"], "give exactly one of --data FILE.h5 or --synthetic N"),
        (["vector", "build", "--synthetic", "50", "--dim", "8", "--nlist", "0", "--out",
          "{d}/o.h5"], "nlist=0: must be a positive integer"),
        (["vector", "eval", "--synthetic", "100", "--dim", "8", "--nprobe", "a,b"],
         "--nprobe 'a,b' is not a list of ints"),
        (["vector", "build", "--synthetic", "many", "--out", "{d}/o.h5"],
         "argument --synthetic: invalid float value: 'many'"),
    ],
)  # fmt: skip
def test_vector_cli_bad_input_is_one_clear_line(capsys, files, argv, words):
    before = sorted(os.listdir(files))
    argv = [a.format(d=files) for a in argv]
    err = _run(capsys, argv)
    sub = argv[1]
    assert f"hpc vector {sub}: error: " in err and words.format(d=files) in err, err
    if "argument" not in words:  # argparse prints its usage first; ours is one line
        assert err.startswith(f"hpc vector {sub}: error: ") and err.count("\n") == 1, err
    assert sorted(os.listdir(files)) == before, "nothing half-written"


def test_vector_cli_bad_input_from_the_command_line(files):
    proc = subprocess.run(
        [sys.executable, "-m", "hpc", "vector", "search", "--index", str(files / "text.h5"),
         "--synthetic", "10"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("hpc vector search: error: opening with mode 'r' failed")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
