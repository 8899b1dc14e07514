"""hpc: parallel workloads on one shared core.

The core gives a device backend (NumPy/numba on the CPU, CuPy/numba.cuda on the GPU), MPI
communicator handling, Cartesian domain decomposition and halo exchange. Domain modules live in
:mod:`hpc.domains`, parallel HDF5 storage in :mod:`hpc.io`.

Examples
--------
>>> import hpc
>>> decomp = hpc.CartDecomposition((128, 128), periodic=True, halo=1)
>>> u = decomp.allocate("float64")
>>> hpc.HaloExchange(decomp, u.dtype).exchange(u) is u
True
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .backend import Backend, BackendUnavailableError, get_backend
from .comm import cuda_aware_mpi, install_excepthook, world
from .decomposition import CartDecomposition, chunk, plan_dims
from .halo import HaloExchange
from .rng import RandomStreams

try:
    __version__ = version("hpc")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

install_excepthook()

__all__ = [
    "__version__",
    "Backend",
    "BackendUnavailableError",
    "get_backend",
    "world",
    "cuda_aware_mpi",
    "install_excepthook",
    "CartDecomposition",
    "RandomStreams",
    "chunk",
    "plan_dims",
    "HaloExchange",
]
