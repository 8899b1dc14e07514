"""Lattice Boltzmann CFD on the core's decomposition, halo exchange and storage.

Examples
--------
>>> from hpc.domains.cfd import LidDrivenCavity
>>> cavity = LidDrivenCavity(n=64, re=100)
>>> cavity.run(steps=20000, tol=1e-6)
"""

from __future__ import annotations

from hpc.lazy import lazy_exports

# name -> submodule defining it; imported when the name is first read
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "LBMSolver": ".solver",
        "Lattice": ".lattice",
        "D2Q9": ".lattice",
        "D3Q19": ".lattice",
        "D3Q27": ".lattice",
        "LatticeUnits": ".units",
        "LidDrivenCavity": ".cases",
        "TaylorGreen": ".cases",
        "Channel": ".cases",
        "BodyInChannel": ".obstacles",
        "SchaeferTurek": ".obstacles",
        "Cylinder": ".geometry",
        "Sphere": ".geometry",
        "Box": ".geometry",
        "Surface": ".geometry",
        "GeometryError": ".geometry",
        "open_dataset": ".dataset",
    },
)
