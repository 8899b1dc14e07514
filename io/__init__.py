"""Parallel HDF5 storage: decomposed arrays, tables and checkpoints.

Everything a domain writes or reads goes through these functions. Files are opened with MPI-IO
(``driver="mpio"``) when h5py has MPI and there is more than one rank, serially on one rank, and
through rank 0 (gather/scatter) when h5py has no MPI or ``HPC_IO_MODE=serial``.

Examples
--------
>>> from hpc.io import write_array, read_array, Checkpoint
>>> write_array("fields.h5", "u", u, decomp)          # each rank its owned block
>>> u2 = read_array("fields.h5", "u", other_decomp)   # any rank count
"""

from __future__ import annotations

from .arrays import read_array, write_array
from .checkpoint import Checkpoint, LoadedCheckpoint
from .errors import CorruptDataError, LayoutMismatchError, StorageError
from .files import open_file, parallel_available
from .tables import read_table, write_table
from .xdmf import write_xdmf

__all__ = [
    "open_file",
    "parallel_available",
    "write_array",
    "read_array",
    "write_table",
    "read_table",
    "Checkpoint",
    "LoadedCheckpoint",
    "write_xdmf",
    "StorageError",
    "CorruptDataError",
    "LayoutMismatchError",
]
