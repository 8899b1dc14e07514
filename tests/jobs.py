"""Helpers of the MPI job scripts (run_mpi puts the project root on their path)."""

from __future__ import annotations

from typing import Any


def report(comm: Any, failures: list[str], done: str, shown: int = 6) -> int:
    """Collective. Print every rank's failures on rank 0 (the first ``shown``), else ``done``;
    the job's exit status: 1 when any rank failed."""
    everyone = comm.gather(failures, root=0)
    if comm.rank != 0:
        return 0
    bad = [f"rank {r}: {f}" for r, fs in enumerate(everyone) for f in fs]
    print("\n".join(bad[:shown]) if bad else done, flush=True)
    return 1 if bad else 0
