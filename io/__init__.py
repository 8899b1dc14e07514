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

from hpc.lazy import lazy_exports

# name -> submodule defining it; imported when the name is first read
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "atomic_open": ".atomic",
        "atomic_output": ".atomic",
        "fsync_path": ".atomic",
        "open_file": ".files",
        "read_attrs": ".attributes",
        "describe": ".describe",
        "write_attrs": ".attributes",
        "parallel_available": ".files",
        "write_array": ".arrays",
        "read_array": ".arrays",
        "write_table": ".tables",
        "read_table": ".tables",
        "Checkpoint": ".checkpoint",
        "LoadedCheckpoint": ".checkpoint",
        "write_xdmf": ".xdmf",
        "StorageError": ".errors",
        "CorruptDataError": ".errors",
        "LayoutMismatchError": ".errors",
        "MissingDataError": ".errors",
        "StorageFullError": ".errors",
        "StoragePermissionError": ".errors",
    },
)
