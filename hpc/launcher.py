"""Build ``mpirun`` command lines that work here and on clusters.

Open MPI refuses to run as root and to start more ranks than cores unless told; both are normal
in containers and CI, so the flags are added when they apply. ``HPC_MPIRUN`` names another
launcher (``srun``, ``mpiexec``), in which case no flags are added.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["mpirun_command", "mpi_flags"]


def _is_open_mpi(launcher: str) -> bool:
    try:
        out = subprocess.run(
            [launcher, "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in out or "OpenRTE" in out


def mpi_flags(launcher: str = "mpirun") -> list[str]:
    """Extra flags for Open MPI: ``--oversubscribe``, and ``--allow-run-as-root`` as root."""
    if not _is_open_mpi(launcher):
        return []
    flags = ["--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags.append("--allow-run-as-root")
    return flags


def mpirun_command(nranks: int, argv: Sequence[str], python: str | None = None) -> list[str]:
    """``mpirun -n N python -m mpi4py ARGV...``: one rank's exception aborts the whole job.

    Parameters
    ----------
    nranks : int
        Number of ranks.
    argv : sequence of str
        A script path and its arguments, or ``["-m", "module", ...]`` / ``["-c", "code"]``.
    python : str, optional
        The interpreter (default: the running one).
    """
    launcher = os.environ.get("HPC_MPIRUN") or shutil.which("mpirun") or "mpirun"
    flags = [] if os.environ.get("HPC_MPIRUN") else mpi_flags(launcher)
    return [launcher, *flags, "-n", str(nranks), python or sys.executable, "-m", "mpi4py", *argv]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hpc.launcher -n N SCRIPT [ARGS...]``: run SCRIPT under MPI with the flags."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] != "-n":
        print("usage: python -m hpc.launcher -n N SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    cmd = mpirun_command(int(args[1]), args[2:])
    # Pass Python's copy of the environment, not the C one: an MPI singleton started in this
    # process (by importing hpc) adds OMPI_*/PMIX_* variables there that confuse a child mpirun.
    return subprocess.call(cmd, env=dict(os.environ))


if __name__ == "__main__":
    sys.exit(main())
