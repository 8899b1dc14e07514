"""hpc: parallel workloads on one shared core.

The core gives a device backend (NumPy/numba on the CPU, CuPy/numba.cuda on the GPU), MPI
communicator handling, Cartesian domain decomposition and halo exchange. Domain modules live in
:mod:`hpc.domains`, parallel HDF5 storage in :mod:`hpc.io`.

Importing the package is cheap: each name below imports its submodule when first read (MPI is
initialised by the first use of :func:`world` or of anything communicating, numba when a kernel
is first needed).

Examples
--------
>>> import hpc
>>> decomp = hpc.CartDecomposition((128, 128), periodic=True, halo=1)
>>> u = decomp.allocate("float64")
>>> hpc.HaloExchange(decomp, u.dtype).exchange(u) is u
True
"""

from __future__ import annotations

from typing import Any

from .excepthook import install_excepthook
from .lazy import lazy_exports
from .optlevel import prefer_full_optimisation
from .threads import load_tbb

install_excepthook()
prefer_full_optimisation()  # before numba builds its code generator: see hpc.optlevel
load_tbb()  # numba's parallel kernels on work-stealing threads where TBB is installed

# name -> submodule defining it; imported when the name is first read
_getattr, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Backend": ".backend",
        "BackendUnavailableError": ".backend",
        "get_backend": ".backend",
        "world": ".comm",
        "cuda_aware_mpi": ".comm",
        "install_excepthook": ".excepthook",
        "CartDecomposition": ".decomposition",
        "RandomStreams": ".rng",
        "chunk": ".decomposition",
        "plan_dims": ".decomposition",
        "HaloExchange": ".halo",
        "HPCError": ".errors",
    },
)
__all__ = ["__version__", *__all__]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("hpc")
        except PackageNotFoundError:  # running from a source tree that is not installed
            value = "0.0.0+unknown"
        globals()["__version__"] = value
        return value
    return _getattr(name)
