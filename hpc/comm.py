"""MPI communicator handling: the library's world, CUDA-awareness, and abort-on-exception.

A process started without ``mpirun`` is a valid world of size 1. Library code never uses
``MPI.COMM_WORLD`` directly: it takes an optional ``comm`` and falls back to :func:`world`, one
duplicate of ``COMM_WORLD``, so the library can be embedded in a sub-communicator.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator

from mpi4py import MPI

from .config import settings
from .excepthook import abort_job, install_excepthook

__all__ = [
    "MPI",
    "world",
    "resolve_comm",
    "self_comm",
    "node_local_rank",
    "cuda_aware_mpi",
    "install_excepthook",
    "mpi_library",
    "abort_job",
    "abort_unless_agreed",
    "collective_section",
]

_lock = threading.Lock()
_world: MPI.Comm | None = None
_node: tuple[int, int] | None = None


def world() -> MPI.Comm:
    """Collective on first call. The library's world: one ``Dup()`` of ``MPI.COMM_WORLD``.

    The duplicate keeps the library's messages apart from the application's.
    """
    global _world
    with _lock:
        if _world is None:
            _world = MPI.COMM_WORLD.Dup()
        return _world


def self_comm() -> MPI.Comm:
    """The communicator of this process alone (``MPI.COMM_SELF``): local files and work."""
    return MPI.COMM_SELF


def resolve_comm(comm: MPI.Comm | None) -> MPI.Comm:
    """Return ``comm``, or :func:`world` when it is None."""
    return world() if comm is None else comm


def _node_layout() -> tuple[int, int]:
    """Collective on first call. (rank, size) among the ranks sharing this node."""
    global _node
    if _node is None:
        local = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
        _node = (local.Get_rank(), local.Get_size())
        local.Free()
    return _node


def node_local_size() -> int:
    """Collective on first call. How many ranks of the job share this node."""
    return _node_layout()[1]


def node_local_rank() -> int:
    """Collective on first call. This process's rank among the ranks on its node."""
    return _node_layout()[0]


def mpi_library() -> str:
    """The MPI library's version line (for ``hpc info`` and benchmark records)."""
    return MPI.Get_library_version().strip().splitlines()[0].strip()


def _query_cuda_support() -> bool:
    """Ask the MPI library itself whether it accepts CUDA device pointers."""
    try:
        lib = ctypes.CDLL(None)  # libmpi is already loaded into the process by mpi4py
    except OSError:
        return False
    ompi = getattr(lib, "MPIX_Query_cuda_support", None)  # Open MPI's extension
    if ompi is not None:
        ompi.restype = ctypes.c_int
        try:
            return bool(ompi())
        except Exception:
            return False
    mpich = getattr(lib, "MPIX_GPU_query_support", None)  # MPICH: (gpu_type, *is_supported)
    if mpich is not None:
        flag = ctypes.c_int(0)
        try:
            mpich(ctypes.c_int(0), ctypes.byref(flag))  # MPIX_GPU_SUPPORT_CUDA == 0
        except Exception:
            return False
        return bool(flag.value)
    return False


def cuda_aware_mpi() -> bool:
    """True when device buffers may be handed to MPI directly.

    ``HPC_CUDA_AWARE_MPI=0|1`` overrides the detection (Open MPI's ``MPIX_Query_cuda_support``,
    MPICH's ``MPIX_GPU_query_support``). Without CUDA-awareness, device data is staged through
    pinned host buffers.
    """
    forced = settings().cuda_aware_mpi
    if forced is not None:
        return forced
    return _query_cuda_support()


def abort_unless_agreed(comm: MPI.Comm, what: str, exc: BaseException | None) -> None:
    """End the job (:func:`abort_job`) when ``exc`` was raised on some ranks of a world of more
    than one: an error every rank agreed on (``all_ranks``, see :class:`hpc.HPCError`) and a
    single rank's error are left to propagate."""
    if exc is not None and comm.Get_size() > 1 and not getattr(exc, "all_ranks", False):
        abort_job(comm, what, exc)


@contextlib.contextmanager
def collective_section(comm: MPI.Comm, what: str) -> Iterator[None]:
    """Collective. A block every rank of ``comm`` runs together (collective I/O, a shuffle).

    An exception that all ranks agreed on (``all_ranks``, see :class:`hpc.HPCError`) leaves the
    block as usual; any other exception on a world of more than one rank ends the job through
    :func:`abort_job`, naming ``what`` and the rank. One rank alone raises as usual.
    """
    try:
        yield
    except BaseException as exc:
        abort_unless_agreed(comm, what, exc)
        raise
