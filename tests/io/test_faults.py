"""Faults never hang a job: a full disk, a read-only or forbidden file system, a rank failing
inside a collective transfer, a rank killed while the others wait.

Foreseeable faults (no room, no permission) are agreed before any collective write, so every
rank raises the same ``StorageError`` subclass and the previous checkpoint stays the latest. A
failure inside a collective ends the whole job (``MPI_Abort``) with the failing rank's message
printed once. Each job must be over within a liveness deadline counted from its start (a hang
fails the test; no speed is asserted); the seconds taken are printed with ``-s``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from hpc.io import Checkpoint

from hpc.launcher import mpirun_command
from tests.conftest import ROOT, mpi_script

SCRIPT = str(mpi_script("check_faults.py"))
DEADLINE = 90.0  # seconds for a whole job: start-up, the fault, the outcome


def _job(nranks: int, directory: Path, case: str, faults: str, *extra: str, wrap=None):
    """Run the fault script; (process, seconds). A job alive at the deadline fails the test."""
    cmd = mpirun_command(nranks, [SCRIPT, str(directory), case, *extra])
    if wrap:
        cmd = wrap(cmd)
    env = {**os.environ, "HPC_TEST_FAULTS": faults, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=DEADLINE, env=env, cwd=ROOT
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{case} with {faults!r} on {nranks} ranks still running after {DEADLINE} s"
            f" (a hang)\n{exc.stdout}\n{exc.stderr}"
        )
    seconds = time.perf_counter() - start
    print(
        f"{case} {faults or 'none'} on {nranks} ranks: ended in {seconds:.1f} s, "
        f"exit {proc.returncode}"
    )
    return proc, seconds


def _lines(proc) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("rank "):
            rank, _, text = line[5:].partition(": ")
            out.setdefault(int(rank), []).append(text)
    return out


def _temporaries(directory: Path) -> list[str]:
    return [e for e in os.listdir(directory) if ".tmp-" in e]


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("nranks", "faults", "expected"),
    [
        (2, "space=ENOSPC", "StorageFullError"),
        (3, "space=ENOSPC", "StorageFullError"),
        (2, "open=EROFS", "StoragePermissionError"),
        (3, "open=EPERM@0", "StoragePermissionError"),
        (3, "remove=EPERM", "StoragePermissionError"),
        (2, "commit=ENOSPC", "StorageFullError"),
    ],
)
def test_foreseeable_faults_raise_one_storage_error_on_every_rank(
    tmp_path: Path, nranks: int, faults: str, expected: str
):
    proc, _ = _job(nranks, tmp_path, "save", faults)
    assert proc.returncode == 0, proc.stderr
    lines = _lines(proc)
    assert sorted(lines) == list(range(nranks))
    outcomes = {lines[r][0] for r in range(nranks)}
    assert len(outcomes) == 1, proc.stdout  # the same error, word for word, on every rank
    (outcome,) = outcomes
    assert outcome.startswith(expected + ":") and str(tmp_path) in outcome, outcome
    assert all(lines[r][1] == "latest 1 intact True" for r in range(nranks)), lines
    assert len(_temporaries(tmp_path)) <= 1  # at most the failed save's own temporary


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("nranks", "case", "faults"),
    [
        (2, "save", "write=EIO@1"),
        (3, "save", "write=ENOSPC@1"),
        (3, "load", "read=EIO@2"),
        (2, "table", "write=EIO@1"),
    ],
)
def test_a_rank_failing_inside_a_collective_ends_the_job(
    tmp_path: Path, nranks: int, case: str, faults: str
):
    proc, _ = _job(nranks, tmp_path, case, faults)
    assert proc.returncode != 0
    failing = int(faults.rpartition("@")[2])
    banner = f"[hpc] rank {failing}/{nranks} failed during collective I/O"
    assert proc.stderr.count(banner) == 1, proc.stderr  # the message, printed once
    assert "(injected)" in proc.stderr
    # the previous checkpoint is still the latest and whole; the next save clears the debris
    ckpt = Checkpoint(tmp_path, keep=3)
    assert ckpt.latest() == 1 and len(_temporaries(tmp_path)) <= 1
    import hpc

    d = hpc.CartDecomposition((8, 8), periodic=True, halo=1)
    ckpt.save(3, {"u": d.allocate(np.float64)}, d)
    assert ckpt.steps() == [1, 3] and _temporaries(tmp_path) == []


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_a_rank_killed_while_the_others_wait_ends_the_job(tmp_path: Path, nranks: int):
    proc, _ = _job(nranks, tmp_path, "kill", "")
    assert proc.returncode != 0
    assert Checkpoint(tmp_path).latest() == 1


def _private_tmpfs(directory: Path, size: str):
    """Wrap a command to run in a private mount namespace with a ``size`` tmpfs on
    ``directory`` (None where the machine does not allow it)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run(
        [
            unshare,
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs -o size=64k tmpfs {directory}",
        ],
        capture_output=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return None

    def wrap(cmd: list[str]) -> list[str]:
        line = " ".join(f"'{c}'" for c in cmd)
        return [
            unshare,
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs -o size={size} tmpfs {directory} && exec {line}",
        ]

    return wrap


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_a_really_full_disk_raises_storage_full_on_every_rank(tmp_path: Path, nranks: int):
    wrap = _private_tmpfs(tmp_path, "2m")
    if wrap is None:
        pytest.skip("no private mount namespace here (unshare/mount refused)")
    proc, _ = _job(nranks, tmp_path, "save", "", "1024", wrap=wrap)  # 8 MiB into 2 MiB
    assert proc.returncode == 0, proc.stderr
    lines = _lines(proc)
    assert all(lines[r][0].startswith("StorageFullError: ") for r in range(nranks)), lines
    assert all(lines[r][1] == "latest 1 intact True" for r in range(nranks)), lines
