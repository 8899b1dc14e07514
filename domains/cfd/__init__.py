"""Lattice Boltzmann CFD on the core's decomposition, halo exchange and storage.

Examples
--------
>>> from hpc.domains.cfd import LidDrivenCavity
>>> cavity = LidDrivenCavity(n=64, re=100)
>>> cavity.run(steps=20000, tol=1e-6)
"""

from .cases import Channel, LidDrivenCavity, TaylorGreen
from .lattice import D2Q9, D3Q19, Lattice
from .solver import LBMSolver
from .units import LatticeUnits

__all__ = [
    "LBMSolver",
    "Lattice",
    "D2Q9",
    "D3Q19",
    "LatticeUnits",
    "LidDrivenCavity",
    "TaylorGreen",
    "Channel",
]
