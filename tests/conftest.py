"""Shared test helpers: launching child MPI jobs with a timeout, and device selection."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpc.launcher import mpirun_command

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def mpi_script(name: str) -> Path:
    """The job script ``name`` (it lives beside the tests that launch it)."""
    found = sorted(TESTS.rglob(name))
    if len(found) != 1:
        raise FileNotFoundError(f"{name}: {len(found)} scripts of that name under {TESTS}")
    return found[0]


def run_mpi(
    nranks: int,
    argv: list[str],
    timeout: float = 240,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``mpirun -n N python -m mpi4py ARGV`` and return the finished process.

    A hang becomes a test failure after ``timeout`` seconds (MPI failures look like hangs).
    With ``check``, a non-zero exit fails the test and shows the job's output.
    """
    cmd = mpirun_command(nranks, argv)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    # job scripts import their helpers from tests/ (tests.jobs)
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path, **(env or {})}
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=ROOT
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s:\n{exc.stdout}\n{exc.stderr}")
    if check and proc.returncode != 0:
        pytest.fail(
            f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n"
            f"--- stderr\n{proc.stderr}"
        )
    return proc


def run_cudasim(script: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run a check script (found by name under tests/) under the CUDA simulator; fail the test
    if it fails.

    The simulator must be switched on before numba.cuda is first imported, hence a process.
    """
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run(
        [sys.executable, str(mpi_script(script)), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        pytest.fail(f"{script} under the CUDA simulator failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def cli_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``hpc ARGV`` in this process; assert it refused with exit 2 and no traceback, and
    return what it wrote to standard error."""
    from hpc.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err, err
    return err


def gpu_requested() -> bool:
    return os.environ.get("HPC_TEST_DEVICE", "cpu").lower() == "gpu"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if gpu_requested():
        return
    skip = pytest.mark.skip(reason="GPU tests run with HPC_TEST_DEVICE=gpu")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def python() -> str:
    return sys.executable
