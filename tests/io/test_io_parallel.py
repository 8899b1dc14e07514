"""hpc.io across rank counts: written on N ranks and read on M, both I/O paths, and crashes."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time

import numpy as np
import pytest
from hpc.io import Checkpoint
from mpi4py import MPI

import hpc
from hpc.launcher import mpirun_command
from tests.conftest import ROOT, mpi_script, run_mpi
from tests.io.checkpoint_loop import field

CHECK = str(mpi_script("check_io.py"))


@pytest.mark.mpi
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("writers", "readers", "write_mode", "read_mode"),
    [
        (4, [1, 2, 3], "auto", "auto"),
        (1, [4], "auto", "auto"),
        (3, [2], "serial", "auto"),  # written through rank 0, read with MPI-IO
        (2, [3], "auto", "serial"),  # written with MPI-IO, read through rank 0
    ],
)
def test_written_on_n_ranks_reads_back_on_m(tmp_path, writers, readers, write_mode, read_mode):
    proc = run_mpi(writers, [CHECK, "write", str(tmp_path)], env={"HPC_IO_MODE": write_mode})
    assert f"wrote on {writers} ranks" in proc.stdout
    for m in readers:
        proc = run_mpi(
            m, [CHECK, "read", str(tmp_path), str(writers)], env={"HPC_IO_MODE": read_mode}
        )
        assert f"on {m} ranks (written on {writers})" in proc.stdout


def _kill_ranks_of(tag: str, timeout: float = 30.0) -> None:
    """SIGKILL every process whose command line names ``tag`` and wait until all are gone.

    Open MPI may start ranks in their own process group; left alive after mpirun's death, one
    could still save (and prune) checkpoints while the test inspects the directory.
    """
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmdline = fh.read().decode(errors="replace")
            except OSError:
                continue
            if tag in cmdline and "checkpoint_loop.py" in cmdline and int(pid) != os.getpid():
                alive.append(int(pid))
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        if not alive:
            return
        assert time.monotonic() < deadline, f"ranks {alive} survived SIGKILL"
        time.sleep(0.05)


def _verify(directory) -> int | None:
    """Every checkpoint taken for complete loads and holds exactly its step's data."""
    ckpt = Checkpoint(directory, comm=MPI.COMM_SELF)
    steps = ckpt.steps()
    for step in steps:
        state = ckpt.load(step)
        u, s = state.arrays["u"], state.arrays["s"]
        d = state.decomp
        assert np.array_equal(d.interior(u), field(step)), f"step {step}: wrong field"
        assert (d.interior(s) == step).all() and state.attrs == {"step": step}
    return steps[-1] if steps else None


@pytest.mark.mpi
@pytest.mark.timeout(600)
def test_sigkill_at_random_moments_never_leaves_a_bad_checkpoint(tmp_path):
    rng = random.Random(20261202)
    with_data = 0
    last = None
    for trial in range(12):
        cmd = mpirun_command(2, [str(mpi_script("checkpoint_loop.py")), str(tmp_path)])
        child = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        # Start-up takes about a second; kill anywhere from before the first save to many in.
        time.sleep(rng.uniform(0.5, 4.0))
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        child.stdout.close()
        _kill_ranks_of(str(tmp_path))  # ranks outside mpirun's process group die too
        latest = _verify(tmp_path)
        if latest is not None:
            with_data += 1
            assert last is None or latest >= last, "a complete checkpoint went missing"
            last = latest
        leftovers = [p for p in os.listdir(tmp_path) if ".tmp-" in p]
        # one save in flight may leave its temporary, and MPI-IO's lock-test file beside it
        # (<tmp>.locktest.N): count saves by their token, not files
        saves = {p.split(".tmp-", 1)[1][:12] for p in leftovers}
        assert len(saves) <= 1, f"trial {trial}: stale temporary files {leftovers}"
    assert with_data >= 6, f"only {with_data} of 12 trials got as far as a checkpoint"


def test_restart_on_another_rank_count_is_bitwise(tmp_path):
    d = hpc.CartDecomposition((20, 17), periodic=True, halo=3)
    u = d.allocate(np.float64)
    g = np.random.default_rng(1).standard_normal((20, 17))
    d.interior(u)[...] = g
    Checkpoint(tmp_path).save(5, {"u": u}, d)
    other = hpc.CartDecomposition((20, 17), periodic=True, halo=1)
    state = Checkpoint(tmp_path).load(decomp=other)
    assert other.gather(state.arrays["u"]).tobytes() == g.tobytes()
