"""Physical parameters to lattice units, in one place, with the stability checks.

Lattice units: cell size 1, time step 1, reference density 1, ``c_s^2 = 1/3``. A case fixes a
characteristic length ``L`` in cells and a characteristic speed ``U`` in lattice units (the lid
speed, the peak channel velocity, the vortex amplitude), and the Reynolds number ``Re = U L / nu``
gives the lattice viscosity ``nu = U L / Re`` and the relaxation time ``tau = 3 nu + 1/2``.

Refused before a run starts: ``tau - 1/2 < 0.005`` (the BGK scheme becomes unstable as tau
approaches 1/2: refine the grid or lower Re), and a Mach number ``U / c_s`` above 0.3 (the
scheme's compressibility error grows as Ma^2; lattice speeds of 0.05-0.1 are the usual choice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["LatticeUnits", "TAU_MIN_MARGIN", "MACH_MAX", "TRT_MAGIC", "check_magic"]

TAU_MIN_MARGIN = 0.005
MACH_MAX = 0.3
TRT_MAGIC = 3.0 / 16.0  # Lambda: puts a half-way bounce-back wall exactly mid-link (Poiseuille)


def check_magic(magic: float) -> float:
    """The TRT magic parameter ``Lambda = (tau+ - 1/2)(tau- - 1/2)`` as a float, refused with
    ``ValueError`` unless it is finite and positive.

    Any ``Lambda > 0`` gives an odd rate ``omega- = 1 / (Lambda / (tau+ - 1/2) + 1/2)`` in
    (0, 2); ``Lambda = 0`` would put it at 2, the edge of stability.
    """
    try:
        value = float(magic)
    except (TypeError, ValueError):
        raise ValueError(f"magic={magic!r}: the TRT magic parameter must be a number") from None
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(
            f"magic={magic}: the TRT magic parameter Lambda must be finite and > 0 (3/16: "
            "bounce-back walls mid-link; (tau - 1/2)^2: BGK)"
        )
    return value


@dataclass(frozen=True)
class LatticeUnits:
    """Relaxation parameters of a case, derived from Re, L and U (lattice units).

    Attributes
    ----------
    nu : float
        Kinematic viscosity.
    tau : float
        BGK relaxation time (TRT: the symmetric one).
    u : float
        Characteristic speed.
    length : float
        Characteristic length in cells.
    """

    nu: float
    tau: float
    u: float
    length: float

    @classmethod
    def from_reynolds(cls, re: float, length: float, u: float) -> LatticeUnits:
        """``nu = u * length / re``; the result is checked (see :meth:`check`)."""
        if not (re > 0 and math.isfinite(re)):
            raise ValueError(f"Re={re}: must be a positive number")
        if not (length > 0 and u > 0):
            raise ValueError(f"length={length} and u={u} must be positive")
        nu = u * length / re
        return cls(nu=nu, tau=3.0 * nu + 0.5, u=u, length=length).check()

    @classmethod
    def from_viscosity(cls, nu: float, length: float, u: float) -> LatticeUnits:
        """Given the lattice viscosity directly."""
        if not nu > 0:
            raise ValueError(f"nu={nu}: must be positive")
        return cls(nu=nu, tau=3.0 * nu + 0.5, u=u, length=length).check()

    @property
    def reynolds(self) -> float:
        return self.u * self.length / self.nu

    @property
    def mach(self) -> float:
        return self.u / math.sqrt(1.0 / 3.0)

    @property
    def omega(self) -> float:
        """``1 / tau``."""
        return 1.0 / self.tau

    def omega_minus(self, magic: float = TRT_MAGIC) -> float:
        """TRT antisymmetric rate for the magic parameter ``(tau+ - 1/2)(tau- - 1/2)``."""
        return 1.0 / (check_magic(magic) / (self.tau - 0.5) + 0.5)

    @property
    def bgk_magic(self) -> float:
        """``(tau - 1/2)^2``: the magic parameter at which TRT's two rates are equal (BGK)."""
        return (self.tau - 0.5) ** 2

    def check(self) -> LatticeUnits:
        """Raise ``ValueError`` naming the cause when the settings would be unstable."""
        if self.tau - 0.5 < TAU_MIN_MARGIN:
            raise ValueError(
                f"tau={self.tau:.5f} is too close to 1/2 (nu={self.nu:.3g}; "
                f"Re={self.reynolds:.4g}, "
                f"L={self.length:g} cells, U={self.u:g}): the scheme would be unstable. Use more "
                f"cells (tau grows with L at fixed Re and U), a larger U, or a lower Re"
            )
        if self.mach > MACH_MAX:
            raise ValueError(
                f"Mach number {self.mach:.3f} (U={self.u:g} lattice units) exceeds {MACH_MAX}: "
                "compressibility errors would dominate; use U <= 0.1"
            )
        return self
