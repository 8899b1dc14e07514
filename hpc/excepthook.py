"""Abort the whole MPI job when one rank raises: installed at ``import hpc``, without MPI.

Without it, one rank's uncaught exception leaves the others waiting in a collective forever.
The hook is installed eagerly but looks at MPI only when an exception reaches it: if mpi4py has
initialised MPI and the world has more than one rank, it prints the rank's traceback and calls
``MPI_Abort``; otherwise it hands the exception to the previous hook. So importing the package
neither imports mpi4py nor initialises MPI.
"""

from __future__ import annotations

import sys
import traceback
from types import TracebackType
from typing import Any

from .config import settings

__all__ = ["install_excepthook", "abort_job", "started_world"]

_previous: Any = None
_forced = False


def started_world() -> Any:
    """``MPI.COMM_WORLD`` when mpi4py has initialised MPI in this process (and not finalised)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    return mpi.COMM_WORLD


def _abort_hook(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    """Print this rank's traceback once, then abort every rank of the job."""
    comm = started_world()
    if comm is None or (comm.Get_size() == 1 and not _forced):
        (_previous or sys.__excepthook__)(exc_type, exc, tb)
        return
    abort_job(comm, "an uncaught exception", exc)


def abort_job(comm: Any, what: str, exc: BaseException) -> None:
    """Print this rank's failure once (its traceback, each line tagged with the rank),
    then end every rank of the job with ``MPI_Abort``: the others may be waiting in a collective
    that this rank will never enter."""
    rank, size = comm.Get_rank(), comm.Get_size()
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    # the message itself is the traceback's last line: printed once
    sys.stderr.write(f"[hpc] rank {rank}/{size} failed during {what}; aborting the job\n")
    sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.rstrip().splitlines()))
    sys.stderr.flush()
    sys.stdout.flush()
    sys.modules["mpi4py.MPI"].COMM_WORLD.Abort(1)


def install_excepthook(force: bool = False) -> bool:
    """Make an uncaught exception on any rank abort the whole job (``MPI_Abort``).

    Acts only on a world of more than one rank (or with ``force``), decided when an exception
    arrives; not installed when ``HPC_ABORT_ON_EXCEPTION=0`` or under ``python -m mpi4py``
    (whose runner gives the same guarantee).

    Returns
    -------
    bool
        True when the hook is (now) installed.
    """
    global _previous, _forced
    _forced = _forced or force
    if sys.excepthook is _abort_hook:
        return True
    if not settings().abort_on_exception:
        return False
    previous: Any = sys.excepthook
    if getattr(previous, "__module__", "") == "mpi4py.run":  # mpi4py's runner already aborts
        return False
    _previous = previous
    sys.excepthook = _abort_hook
    return True
