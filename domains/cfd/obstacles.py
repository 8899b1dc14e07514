"""Flows around bodies: a channel with a velocity inlet, a pressure outlet and solids inside.

:class:`BodyInChannel` is the general case (any :mod:`~hpc.domains.cfd.geometry` bodies, 2-D or
3-D); :class:`SchaeferTurek` is the benchmark of Schaefer & Turek (1996), a cylinder in a
channel, with its drag and lift coefficients and pressure drop, compared with the published
intervals.

Layout (lattice units): the inlet is imposed at the centres of the ghost cells before ``x = 0``
(so at ``x = -1/2``), the outlet at those after the last cell (``x = nx + 1/2``); the walls of
the other axes are half-way bounce-back at ``0`` and ``n``. Both open faces use the
non-equilibrium extrapolation (second order). The force on the bodies is recorded every
``sample_every`` steps (momentum exchange: :meth:`LBMSolver.body_force`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hpc.collectives import bcast_object

from .cases import Case, lattice_for, outlet_boundary
from .geometry import Body, Cylinder
from .lattice import Lattice
from .solver import OpenBoundary
from .units import LatticeUnits

__all__ = ["BodyInChannel", "SchaeferTurek", "SCHAEFER_TUREK"]

# Schaefer & Turek (1996), Table 4 (2D-1, 2D-2) and 3D-1Z: the published intervals.
SCHAEFER_TUREK: dict[str, dict[str, tuple[float, float]]] = {
    "2D-1": {"cd": (5.57, 5.59), "cl": (0.0104, 0.0110), "dp": (0.1172, 0.1176)},
    "2D-2": {"cd_max": (3.22, 3.24), "cl_max": (0.99, 1.01), "st": (0.295, 0.305)},
    "3D-1Z": {"cd": (6.05, 6.25), "cl": (0.008, 0.01), "dp": (0.165, 0.175)},
}


def _peak_inflow(inflow: Callable[..., Any] | tuple[float, ...], units: LatticeUnits) -> float:
    """The inflow's largest speed component when it is a tuple; a profile's is unknown before
    the run (it may depend on the step), so ``units.u`` stands for it."""
    if callable(inflow):
        return units.u
    return max(abs(float(v)) for v in inflow)


class BodyInChannel(Case):
    """Collective. Flow through a channel along x around ``bodies``.

    Parameters
    ----------
    shape : sequence of int
        Cells per axis (2-D: D2Q9, 3-D: D3Q19 or ``lattice``).
    bodies : sequence of Body
        Solids (lattice units; cell ``i`` has its centre at ``i + 1/2``).
    units : LatticeUnits
        Viscosity and reference speed (the mean inflow speed) and length.
    inflow : callable or tuple
        Inlet velocity: a tuple, or a function of the face's global cell indices along the
        other axes returning one array per component.
    collision, dtype, comm, backend, dims, streaming
        As for the other cases.
    curved : bool
        Bouzidi's interpolated bounce-back on the bodies (else half-way).
    sample_every : int
        Steps between force samples (the history).
    scheme : {"nee", "equilibrium"}
        Open-boundary scheme (:class:`OpenBoundary`).
    smagorinsky, mrt_rates
        The Smagorinsky constant ``C_s`` (0: no closure) and MRT's rates, as for the other
        cases.
    magic : float or "auto", optional
        TRT's magic parameter ``Lambda`` (:class:`LBMSolver`); default ``"auto"`` (TRT, and
        MRT without ``mrt_rates["q"]``): 3/16 up to the grid Reynolds number ``u_max / nu =
        7.5``, above it ``6 (nu / u_max)^2`` (:func:`~hpc.domains.cfd.units.auto_magic`). At
        high ``u_max / nu`` the inflow face goes unstable (with 3/16: stable at 7.5, diverged
        at 9.4); ``Lambda <= 6 (nu / u_max)^2`` or BGK kept every Schaefer-Turek 2D-2 run
        stable (docs/cfd.md).
    u_max : float, optional
        Peak inflow speed, the velocity scale of ``magic="auto"``; default: the largest
        inflow component when ``inflow`` is a tuple, else ``units.u`` (give it when a
        profile's peak exceeds that).
    lattice : str or Lattice, optional
        The velocity set (3-D: "D3Q19", the default, or "D3Q27").
    outlet : {"pressure", "convective"}
        The outflow face: density 1 (``scheme``), or convective (Orlanski), which lets
        vortices of a wake leave without reflection (:class:`OpenBoundary`).
    outlet_speed : float, optional
        The convective outlet's speed ``U_c`` (default: the mean outflow velocity).
    """

    def __init__(
        self,
        shape: Sequence[int],
        bodies: Sequence[Body],
        units: LatticeUnits,
        inflow: Callable[..., Any] | tuple[float, ...],
        collision: str = "trt",
        dtype: Any = np.float64,
        comm: Any = None,
        backend: Any = None,
        dims: Any = None,
        streaming: str = "auto",
        curved: bool = True,
        sample_every: int = 10,
        scheme: str = "nee",
        smagorinsky: float = 0.0,
        mrt_rates: dict[str, float] | None = None,
        lattice: str | Lattice | None = None,
        outlet: str = "pressure",
        outlet_speed: float | None = None,
        magic: float | str | None = None,
        u_max: float | None = None,
    ) -> None:
        self.global_shape = tuple(int(n) for n in shape)
        dim = len(self.global_shape)
        if dim not in (2, 3):
            raise ValueError(f"shape {shape}: 2-D or 3-D")
        lat = lattice_for(dim, lattice)
        self.bodies = list(bodies)
        self.sample_every = int(sample_every)
        if self.sample_every < 0:
            raise ValueError(f"sample_every={sample_every}: must be >= 0")
        self.history: dict[str, list[float]] = {"step": [], "fx": [], "fy": []}
        if dim == 3:
            self.history["fz"] = []
        bounds = [
            OpenBoundary(0, -1, "velocity", velocity=inflow, scheme=scheme),
            outlet_boundary(outlet, scheme, outlet_speed),
        ]
        self._make(
            self.global_shape,
            False,
            lat,
            units,
            collision,
            dtype,
            comm,
            backend,
            dims,
            open_boundaries=bounds,
            streaming=streaming,
            bodies=self.bodies,
            curved=curved,
            smagorinsky=smagorinsky,
            mrt_rates=mrt_rates,
            magic=magic,
            open_inflow=True,
            u_max=_peak_inflow(inflow, units) if u_max is None else u_max,
        )

    def fields(self) -> dict[str, Any]:
        """Local. The case's fields plus ``solid``: 1 in the bodies' cells, else 0."""
        out = super().fields()
        if self.solver.solid is None:
            return out
        local = self.decomp.allocate(np.float64)
        solid = self.solver.solid[self.decomp.interior_slices]
        local[self.decomp.interior_slices] = self.decomp.backend.asarray(solid, np.float64)
        out["solid"] = local
        return out

    def force(self) -> np.ndarray:
        """Collective. Force on the bodies during the last step (lattice units)."""
        return self.solver.body_force()

    def force_scale(self) -> float:
        """``rho U^2 L / 2`` in 2-D (``rho U^2 A / 2`` with ``A = L^2`` in 3-D): the force
        that makes a coefficient 1."""
        u, length = self.units.u, self.units.length
        return 0.5 * u * u * length ** (self.decomp.ndim - 1)

    def coefficients(self, force: np.ndarray | None = None) -> np.ndarray:
        """Collective (when ``force`` is not given). Force coefficients ``F / force_scale``."""
        f = self.force() if force is None else force
        return np.asarray(f) / self.force_scale()

    def _sample(self, step: int) -> None:
        f = self.force()
        self.history["step"].append(float(step))
        for a, name in enumerate(("fx", "fy", "fz")[: self.decomp.ndim]):
            self.history[name].append(float(f[a]))

    def _progress_text(self) -> str:
        if not self.history["step"]:
            return ""
        c = self.coefficients(np.array([self.history["fx"][-1], self.history["fy"][-1]]))
        return f"  c_D {c[0]:.5f}  c_L {c[1]:+.5f}"

    def history_table(self) -> dict[str, np.ndarray]:
        """Local. The force history as columns (step, forces, and their coefficients)."""
        out = {k: np.asarray(v, dtype=np.float64) for k, v in self.history.items()}
        scale = self.force_scale()
        out["cd"] = out["fx"] / scale
        out["cl"] = out["fy"] / scale
        return out


class SchaeferTurek(BodyInChannel):
    """Collective. Schaefer & Turek's (1996) cylinder in a channel, 2-D (2D-1: Re = 20,
    steady; 2D-2: Re = 100, periodic vortex shedding) or 3-D (3D-1Z: Re = 20, square channel).

    The physical set-up: channel height ``H = 0.41``, length ``2.2``, cylinder of diameter
    ``D = 0.1`` centred at ``(0.2, 0.2)`` (3-D: a cylinder spanning the 0.41 x 0.41 channel),
    parabolic inflow of peak ``U_m``, mean ``U = 2 U_m / 3`` (2-D) or ``4 U_m / 9`` (3-D),
    ``Re = U D / nu``, ``rho = 1``. Coefficients ``c_D = 2 F_x / (rho U^2 D)`` (3-D:
    ``D H``), ``c_L`` likewise with ``F_y``; pressure drop ``p(0.15, 0.2) - p(0.25, 0.2)``.

    Parameters
    ----------
    diameter : float
        Cells per cylinder diameter; the channel height is ``round(4.1 diameter)`` cells and
        the diameter used is that height / 4.1 (use multiples of 10 for exact sizes).
    re : float
        20 (2D-1, 3D-1Z) or 100 (2D-2).
    u_max : float
        Peak inflow speed, lattice units.
    dim : {2, 3}
    ramp : int, optional
        Steps over which the inflow rises smoothly from rest (``sin^2``); default ten sound
        crossings of the channel's length, ``10 nx``. An impulsive start sends pressure waves
        that the open faces reflect and the low viscosity hardly damps: with it, the drag
        rings for hundreds of thousands of steps.
    **options
        :class:`BodyInChannel`'s other keywords (``collision``, ``dtype``, ``comm``,
        ``backend``, ``dims``, ``streaming``, ``curved``, ``sample_every``, ``scheme``,
        ``smagorinsky``, ``mrt_rates``, ``magic``, ``lattice``, ``outlet``, ``outlet_speed``);
        ``magic="auto"`` (the default) takes ``u_max`` as its velocity scale.
    """

    def __init__(
        self,
        diameter: float = 20,
        re: float = 20.0,
        u_max: float = 0.1,
        dim: int = 2,
        ramp: int | None = None,
        **options: Any,
    ) -> None:
        if dim not in (2, 3):
            raise ValueError(f"dim={dim}: 2 or 3")
        self.dim = dim
        self.ny = int(round(4.1 * diameter))
        if self.ny < 8:
            raise ValueError(f"diameter={diameter}: at least 2 cells")
        self.diameter = self.ny / 4.1  # the diameter the grid holds exactly
        self.scale = self.diameter / 0.1  # cells per metre
        # 2-D: 2.2 long, cylinder at x = 0.2; 3-D (3D-1Z): 2.5 long, cylinder at x = 0.5
        length, x0 = (2.2, 0.2) if dim == 2 else (2.5, 0.5)
        nx = int(round(length * self.scale)) - 1  # inlet at x = -1/2, outlet at nx + 1/2
        self.re = float(re)
        u_mean = u_max * (2.0 / 3.0 if dim == 2 else 4.0 / 9.0)
        units = LatticeUnits.from_reynolds(re, self.diameter, u_mean)
        self.u_max = float(u_max)
        ny = self.ny
        # physical (x, y) -> lattice: the inlet plane x = 0 lies at the ghost centres, -1/2
        self.center = (x0 * self.scale - 0.5, 0.2 * self.scale)
        self.radius = 0.05 * self.scale
        center = self.center if dim == 2 else (*self.center, 0.0)
        body = Cylinder(center, self.radius, axis=2)

        self.ramp = int(10 * nx if ramp is None else ramp)
        if self.ramp < 0:
            raise ValueError(f"ramp={ramp}: must be >= 0")

        def profile(*idx: np.ndarray) -> list[np.ndarray]:
            s = [4.0 * (i + 0.5) * (ny - i - 0.5) / ny**2 for i in idx]
            shape = math.prod(s) if len(s) > 1 else s[0]
            t = self.solver.steps_done  # completed steps: this one is t + 1
            rise = math.sin(0.5 * math.pi * min(1.0, t / self.ramp)) ** 2 if self.ramp else 1.0
            peak = (u_max * rise) * shape
            return [peak] + [0.0 * peak] * len(idx)

        shape = (nx, ny) if dim == 2 else (nx, ny, ny)
        super().__init__(shape, [body], units, profile, u_max=self.u_max, **options)

    def force_scale(self) -> float:
        u, d = self.units.u, self.diameter
        return 0.5 * u * u * d * (self.ny if self.dim == 3 else 1.0)

    def pressure_drop(self) -> float:
        """Collective. ``p(front) - p(back)`` of the cylinder on its centre line, in the
        benchmark's physical units (``rho = 1``, ``U = Re nu / D`` with ``nu = 1e-3``,
        ``D = 0.1``).

        Each of the two cell rows around the centre line (3-D: the four around the centre
        line in the mid plane) extrapolates its pressure linearly from its two fluid cells
        nearest the surface to the surface point of that row; the rows are then interpolated
        to the centre line.
        """
        rho, _ = self.solver.macroscopic()
        local = self.decomp.allocate(np.float64)
        local[self.decomp.interior_slices] = rho
        full = self.decomp.gather(local)
        value = None
        if full is not None:
            if self.dim == 3:  # mid plane in z: the two planes around it, averaged
                m = self.ny // 2
                full = (
                    0.5 * (full[:, :, m - 1] + full[:, :, m])
                    if self.ny % 2 == 0
                    else (full[:, :, m])
                )
            p = (full - 1.0) / 3.0
            xc, yc, r = self.center[0], self.center[1], self.radius
            j0 = int(math.floor(yc - 0.5))
            wy = yc - (j0 + 0.5)
            ends = []
            for side in (-1, 1):
                rows = []
                for j in (j0, j0 + 1):
                    dy = j + 0.5 - yc
                    xs = xc + side * math.sqrt(max(r * r - dy * dy, 0.0))
                    # nearest fluid cell centres outside the surface on this row
                    i1 = int(math.floor(xs - 0.5)) if side < 0 else int(math.ceil(xs - 0.5))
                    i2 = i1 + side
                    x1, x2 = i1 + 0.5, i2 + 0.5
                    rows.append(p[i1, j] + (p[i1, j] - p[i2, j]) * (xs - x1) / (x1 - x2))
                ends.append((1 - wy) * rows[0] + wy * rows[1])
            u_phys = self.re * 1e-3 / 0.1
            value = float((ends[0] - ends[1]) * (u_phys / self.units.u) ** 2)
        return bcast_object(value, 0, self.comm)

    def strouhal(self, skip: float = 0.5) -> float:
        """Local. ``St = f D / U`` from the lift history's upward zero crossings after the
        first ``skip`` fraction of the samples (nan when fewer than two periods)."""
        h = self.history_table()
        n = h["cl"].size
        cl, t = h["cl"][int(skip * n) :], h["step"][int(skip * n) :]
        cl = cl - 0.5 * (cl.max() + cl.min()) if cl.size else cl
        up = np.nonzero((cl[:-1] < 0) & (cl[1:] >= 0))[0]
        if up.size < 3:
            return math.nan
        # crossing times by linear interpolation between samples
        tc = t[up] + (t[up + 1] - t[up]) * (-cl[up]) / (cl[up + 1] - cl[up])
        period = (tc[-1] - tc[0]) / (tc.size - 1)
        return self.diameter / (period * self.units.u)
