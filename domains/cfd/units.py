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

__all__ = [
    "LatticeUnits",
    "TAU_MIN_MARGIN",
    "MACH_MAX",
    "TRT_MAGIC",
    "AUTO_MAGIC_C",
    "AUTO_MAGIC_KEEP",
    "check_magic",
    "auto_magic",
]

TAU_MIN_MARGIN = 0.005
MACH_MAX = 0.3
TRT_MAGIC = 3.0 / 16.0  # Lambda: puts a half-way bounce-back wall exactly mid-link (Poiseuille)
# magic="auto", from the stability runs of Schaefer-Turek 2D-2 (docs/cfd.md): Lambda (u/nu)^2 <= 6
# was stable at every grid Reynolds number u/nu tried (the boundary at u/nu = 25 lies between 6.3
# and 9.4, so no larger constant is safe), and 3/16 itself was stable up to u/nu = 7.5
AUTO_MAGIC_C = 6.0
AUTO_MAGIC_KEEP = 7.5


def check_magic(magic: float) -> float:
    """The TRT magic parameter ``Lambda = (tau+ - 1/2)(tau- - 1/2)`` as a float, refused with
    ``ValueError`` unless it is finite and positive.

    Any ``Lambda > 0`` gives an odd rate ``omega- = 1 / (Lambda / (tau+ - 1/2) + 1/2)`` in
    (0, 2); ``Lambda = 0`` would put it at 2, the edge of stability.
    """
    try:
        value = float(magic)
    except (TypeError, ValueError):
        raise ValueError(
            f"magic={magic!r}: the TRT magic parameter must be a number (or 'auto' where the "
            "velocity scale is known)"
        ) from None
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(
            f"magic={magic}: the TRT magic parameter Lambda must be finite and > 0 (3/16: "
            "bounce-back walls mid-link; (tau - 1/2)^2: BGK)"
        )
    return value


def auto_magic(nu: float, u_max: float) -> float:
    """TRT's magic parameter for ``magic="auto"``: 3/16 up to the grid Reynolds number
    ``u_max / nu = 7.5`` (:data:`AUTO_MAGIC_KEEP`), above it ``6 (nu / u_max)^2``
    (:data:`AUTO_MAGIC_C`).

    Open faces go unstable with 3/16 at high ``u_max / nu`` (diverged at 9.4) and a smaller
    ``Lambda`` damps them; ``Lambda (u_max / nu)^2 <= 6`` kept every measured case stable. The
    rule is ``min(3/16, 6 (nu / u_max)^2)`` except on ``5.66 < u_max / nu <= 7.5``, where it
    keeps 3/16, measured stable there (docs/cfd.md, "TRT's magic parameter").

    Parameters
    ----------
    nu : float
        Lattice viscosity, > 0.
    u_max : float
        The flow's velocity scale (peak inflow or lid speed), lattice units, >= 0.

    Returns
    -------
    float
        ``Lambda``, in (0, 3/16].
    """
    if not (math.isfinite(nu) and nu > 0.0):
        raise ValueError(f"nu={nu}: magic='auto' needs a finite viscosity > 0")
    if not (math.isfinite(u_max) and u_max >= 0.0):
        raise ValueError(f"u_max={u_max}: magic='auto' needs a finite velocity scale >= 0")
    re_grid = u_max / nu
    if re_grid <= AUTO_MAGIC_KEEP:
        return TRT_MAGIC
    return min(TRT_MAGIC, AUTO_MAGIC_C / re_grid**2)


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
