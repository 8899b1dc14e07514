"""Atomic output (hpc.io.atomic): whole or not at all, one process and collective."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hpc.io import StorageError, atomic_open, read_table
from hpc.io.errors import StorageFullError

from hpc.comm import self_comm
from tests.conftest import mpi_script, run_mpi


def _debris(directory: Path) -> list[str]:
    return [e for e in os.listdir(directory) if ".tmp-" in e]


def test_atomic_open_replaces_the_file_only_when_the_block_succeeds(tmp_path):
    path = tmp_path / "out.txt"
    with atomic_open(path) as fh:
        fh.write("first\n")
    assert path.read_text() == "first\n"
    with pytest.raises(RuntimeError, match="midway"), atomic_open(path) as fh:
        fh.write("half of the second")
        raise RuntimeError("midway")
    assert path.read_text() == "first\n" and _debris(tmp_path) == []
    with atomic_open(path, "wb") as fh:
        fh.write(b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"


@pytest.mark.parametrize("where", ["nodir/out.txt", "."])
def test_a_missing_directory_or_a_directory_is_refused_before_the_block(tmp_path, where):
    ran = []
    with pytest.raises(StorageError, match="opening for writing") as exc:
        with atomic_open(tmp_path / where) as fh:
            ran.append(fh)
    assert ran == [] and str(tmp_path) in str(exc.value)


def test_a_failed_commit_keeps_the_old_content(tmp_path, monkeypatch):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    monkeypatch.setenv("HPC_IO_FAULTS", "commit=ENOSPC")
    with pytest.raises(StorageFullError, match="committing the output"):
        with atomic_open(path) as fh:
            fh.write("new\n")
    assert path.read_text() == "old\n" and _debris(tmp_path) == []


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [2, 3])
def test_collective_output_on_several_ranks(tmp_path, nranks):
    path = tmp_path / "t.h5"
    script = str(mpi_script("check_atomic.py"))
    proc = run_mpi(nranks, [script, str(path), "ok"], timeout=120)
    assert proc.stdout.split("\n")[:nranks] == [f"rank {r}: written" for r in range(nranks)]
    got = read_table(path, "t", comm=self_comm())["x"]
    want = np.concatenate([np.arange(r * 10, r * 10 + 3) for r in range(nranks)])
    assert np.array_equal(got, want)
    before = path.read_bytes()
    # a failed commit: the same error on every rank, the old file intact, no temporary left
    proc = run_mpi(nranks, [script, str(path), "commit"], timeout=120,
                   env={"HPC_IO_FAULTS": "commit=ENOSPC"})  # fmt: skip
    lines = proc.stdout.strip().split("\n")
    assert len(lines) == nranks and len({ln.split(": ", 1)[1] for ln in lines}) == 1, lines
    assert "StorageFullError: committing the output failed" in lines[0]
    assert path.read_bytes() == before and _debris(tmp_path) == []
    # one rank's own error inside the block ends the job instead of hanging the others
    proc = run_mpi(nranks, [script, str(path), "one-rank"], timeout=120, check=False)
    assert proc.returncode != 0 and "a bug on one rank" in proc.stderr
    assert path.read_bytes() == before
