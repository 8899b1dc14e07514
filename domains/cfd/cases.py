"""Flow cases with a Python API: lid-driven cavity, Taylor-Green vortex, Poiseuille channel.

Each case maps its physical parameters (Re, characteristic speed, size) to lattice units through
:class:`~hpc.domains.cfd.units.LatticeUnits` (refusing unstable settings before anything runs),
builds the decomposition, flags and solver, and knows its reference solution.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hpc.collectives import allreduce
from hpc.decomposition import CartDecomposition

from .codegen import MOVING_WALL
from .lattice import D2Q9, D3Q19, Lattice, lattice_named
from .solver import LBMSolver, OpenBoundary
from .units import LatticeUnits

__all__ = ["Case", "LidDrivenCavity", "TaylorGreen", "Channel", "lattice_for", "outlet_boundary"]

OUTLETS = ("pressure", "convective")


def outlet_boundary(
    outlet: str, scheme: str = "equilibrium", speed: float | None = None
) -> OpenBoundary:
    """The outflow face at the high end of x: ``"pressure"`` (density 1, ``scheme``) or
    ``"convective"`` (speed ``speed``, default the mean outflow velocity; see
    :class:`OpenBoundary`)."""
    if outlet == "pressure":
        if speed is not None:
            raise ValueError("outlet_speed applies to outlet='convective'")
        return OpenBoundary(0, 1, "pressure", density=1.0, scheme=scheme)
    if outlet == "convective":
        return OpenBoundary(0, 1, "convective", speed=speed)
    raise ValueError(f"outlet={outlet!r}: expected one of {', '.join(OUTLETS)}")


def lattice_for(dim: int, lattice: str | Lattice | None = None) -> Lattice:
    """The velocity set of a ``dim``-D case: ``lattice`` (a name or a :class:`Lattice`),
    checked against ``dim``, or by default D2Q9 (2-D) and D3Q19 (3-D)."""
    if lattice is None:
        return D2Q9 if dim == 2 else D3Q19
    lat = lattice_named(lattice) if isinstance(lattice, str) else lattice
    if lat.d != dim:
        raise ValueError(f"lattice {lat.name} is {lat.d}-D but the case is {dim}-D")
    return lat


def _magic_applies(collision: str, mrt_rates: dict[str, float] | None) -> bool:
    """Whether ``magic`` sets a rate of ``collision``: TRT's odd one, MRT's energy flux unless
    ``mrt_rates`` gives it."""
    return collision == "trt" or (collision == "mrt" and "q" not in (mrt_rates or {}))


class Case:
    """Common driver: stepping with a convergence monitor and progress on rank 0.

    Every case takes ``streaming`` ("auto", "aa" or "pull"), passed to :class:`LBMSolver`; the
    cavity, Taylor-Green and channel cases also ``smagorinsky`` (the LES constant ``C_s``, 0:
    none), ``mrt_rates`` (with ``collision="mrt"``) and ``magic`` (TRT's magic parameter
    ``Lambda``: a number, ``"auto"`` (chosen from ``u_max / nu``, the case's velocity scale
    over the viscosity: :func:`~hpc.domains.cfd.units.auto_magic`), or None, the case's
    default: ``"auto"`` with an open inflow face (``Channel(inflow=True)``,
    :class:`~hpc.domains.cfd.obstacles.BodyInChannel`, ``SchaeferTurek``), else 3/16; see
    :class:`LBMSolver`). The 3-D cases take ``lattice``
    ("D3Q19", the default, or "D3Q27"; :func:`lattice_for`).
    A case that records a time series sets ``sample_every`` and overrides :meth:`_sample`
    (called after every multiple of it, in absolute steps) and :meth:`_progress_text`.
    """

    solver: LBMSolver
    units: LatticeUnits
    decomp: CartDecomposition
    sample_every: int = 0

    def _sample(self, step: int) -> None:
        """Collective. Record the case's time series after ``step`` (none by default)."""

    def _progress_text(self) -> str:
        """Extra text for the progress line (rank 0)."""
        return ""

    def _make(
        self,
        shape,
        periodic,
        lattice,
        units,
        collision,
        dtype,
        comm,
        backend,
        dims,
        force=None,
        wall_velocity=None,
        flags=None,
        open_boundaries=(),
        streaming="auto",
        bodies=(),
        curved=True,
        smagorinsky=0.0,
        mrt_rates=None,
        magic=None,
        open_inflow=False,
        u_max=None,
    ):
        """Build the decomposition and the solver. ``magic=None`` is the case's default:
        ``"auto"`` when ``open_inflow`` and the collision has an odd rate that ``magic`` sets
        (TRT; MRT unless ``mrt_rates`` gives ``q``), else the solver's 3/16. ``u_max``: the
        velocity scale of ``"auto"`` (default ``units.u``)."""
        if magic is None and open_inflow and _magic_applies(collision, mrt_rates):
            magic = "auto"
        auto = isinstance(magic, str) and magic == "auto"
        self.units = units
        self.decomp = CartDecomposition(
            shape, periodic=periodic, halo=1, comm=comm, dims=dims, backend=backend
        )
        lat = lattice_named(lattice) if isinstance(lattice, str) else lattice
        self.solver = LBMSolver(
            self.decomp,
            lat,
            units.tau,
            collision=collision,
            dtype=dtype,
            force=force,
            wall_velocity=wall_velocity,
            flags=flags(self.decomp) if callable(flags) else None,
            open_boundaries=open_boundaries,
            streaming=streaming,
            bodies=bodies,
            curved=curved,
            smagorinsky=smagorinsky,
            mrt_rates=mrt_rates,
            magic=magic,
            u_max=(units.u if u_max is None else u_max) if auto else None,
        )

    @property
    def comm(self) -> Any:
        return self.decomp.comm

    def velocity_residual(self, previous: list[Any] | None) -> tuple[float, list[Any]]:
        """Collective. max |u - u_previous| / U over the grid, and the current velocity."""
        _, u = self.solver.macroscopic()
        if previous is None:
            return math.inf, u
        xp = self.solver.xp
        local = max(
            float(xp.abs(a - b).max()) if a.size else 0.0 for a, b in zip(u, previous, strict=True)
        )
        return allreduce(local, "max", self.comm) / self.units.u, u

    def run(
        self,
        steps: int,
        check_every: int = 1000,
        tol: float | None = None,
        progress: bool = False,
        checkpoint_every: int = 0,
        on_checkpoint: Callable[[int], None] | None = None,
        report: Callable[[str, int, float], None] | None = None,
    ) -> dict[str, Any]:
        """Collective. Advance ``steps`` more steps; stop early once the velocity residual
        (max |u - u_previous| / U between checks) falls below ``tol`` (steady cases).

        Checks fall on multiples of ``check_every`` and ``on_checkpoint(step)`` is called on
        multiples of ``checkpoint_every``, counted in absolute steps, so a restarted run checks
        and checkpoints at the same steps as an uninterrupted one. ``progress`` prints steps/s,
        MLUPS and the residual on rank 0 at every check, through ``report(line, steps since the
        last report, MLUPS)`` when given (a progress bar), else to stdout. Returns steps run,
        seconds, MLUPS, the last residual and whether it converged.
        """
        solver = self.solver
        start = solver.steps_done
        target = start + steps
        every = max(1, check_every)
        previous, residual, converged = None, math.inf, False
        cells = math.prod(self.decomp.global_shape)
        t0 = time.perf_counter()
        reported = start
        while solver.steps_done < target:
            done = solver.steps_done
            chunk = min(every - done % every, target - done)
            if checkpoint_every:
                chunk = min(chunk, checkpoint_every - done % checkpoint_every)
            if self.sample_every:
                chunk = min(chunk, self.sample_every - done % self.sample_every)
            solver.step(chunk)
            done = solver.steps_done
            if self.sample_every and done % self.sample_every == 0:
                self._sample(done)
            if checkpoint_every and on_checkpoint and done % checkpoint_every == 0:
                on_checkpoint(done)
            if (tol is not None or progress) and (done % every == 0 or done == target):
                residual, previous = self.velocity_residual(previous)
                if progress and self.comm.Get_rank() == 0:
                    rate = (done - start) / max(time.perf_counter() - t0, 1e-12)
                    line = (f"step {done:8d}  {rate:9.1f} steps/s  {cells * rate / 1e6:8.2f} "
                            f"MLUPS  residual {residual:.3e}{self._progress_text()}")
                    if report is None:
                        print(line, flush=True)
                    else:
                        report(line, done - reported, cells * rate / 1e6)
                        reported = done
                if tol is not None and residual < tol:
                    converged = True
                    break
        elapsed = allreduce(time.perf_counter() - t0, "max", self.comm)
        ran = solver.steps_done - start
        return {
            "steps": ran,
            "seconds": elapsed,
            "residual": residual,
            "converged": converged,
            "mlups": cells * ran / max(elapsed, 1e-12) / 1e6,
        }

    def fields(self) -> dict[str, Any]:
        """Local. Density and velocity components of the owned cells, with ghosts allocated
        (the layout :func:`hpc.io.write_array` takes)."""
        rho, u = self.solver.macroscopic()
        out = {}
        for name, values in [("rho", rho)] + [(f"u{'xyz'[a]}", ua) for a, ua in enumerate(u)]:
            local = self.decomp.allocate(np.float64)
            local[self.decomp.interior_slices] = values
            out[name] = local
        return out


class LidDrivenCavity(Case):
    """Square (cube) cavity of ``n`` cells per side, lid at the top (y = n) moving along +x.

    ``Re = u_lid * n / nu``; half-way bounce-back walls, so the cavity spans [0, n] in cell
    units with cell centres at i + 1/2. Velocities are reported scaled by ``u_lid``.
    """

    def __init__(
        self,
        n: int,
        re: float,
        u_lid: float = 0.1,
        dim: int = 2,
        collision: str = "trt",
        dtype: Any = np.float64,
        comm: Any = None,
        backend: Any = None,
        dims: Any = None,
        streaming: str = "auto",
        smagorinsky: float = 0.0,
        mrt_rates: dict[str, float] | None = None,
        lattice: str | Lattice | None = None,
        magic: float | str | None = None,
    ) -> None:
        self.n, self.re, self.dim = int(n), float(re), int(dim)
        lat = lattice_for(self.dim, lattice)
        units = LatticeUnits.from_reynolds(re, n, u_lid)

        def flags(decomp: CartDecomposition) -> np.ndarray:
            f = LBMSolver.default_flags_for(decomp)
            if decomp.offset[1] + decomp.local_shape[1] == n:  # the top ghost layer is the lid
                index = [slice(None)] * decomp.ndim
                index[1] = -1
                f[tuple(index)] = MOVING_WALL
            return f

        wall = (u_lid,) + (0.0,) * (dim - 1)
        self._make(
            (n,) * dim,
            False,
            lat,
            units,
            collision,
            dtype,
            comm,
            backend,
            dims,
            wall_velocity=wall,
            flags=flags,
            streaming=streaming,
            smagorinsky=smagorinsky,
            mrt_rates=mrt_rates,
            magic=magic,
        )

    def centerlines(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Collective. On rank 0: (y, u/U) along the vertical centre line and (x, v/U) along
        the horizontal one, interpolated to the centre (None on other ranks)."""
        fields = self.fields()
        ux = self.decomp.gather(fields["ux"])
        uy = self.decomp.gather(fields["uy"])
        if ux is None:
            return None
        if self.dim == 3:
            mid = self.n // 2
            ux, uy = ux[:, :, mid], uy[:, :, mid]
        n, u_lid = self.n, self.units.u
        m = n // 2
        if n % 2:  # a cell centre on the centre line
            u_line, v_line = ux[m, :], uy[:, m]
        else:
            u_line = 0.5 * (ux[m - 1, :] + ux[m, :])
            v_line = 0.5 * (uy[:, m - 1] + uy[:, m])
        pos = (np.arange(n) + 0.5) / n
        # Walls: u = 0 at the bottom, u_lid at the lid; v = 0 at both side walls.
        y = np.concatenate([[0.0], pos, [1.0]])
        u = np.concatenate([[0.0], u_line / u_lid, [1.0]])
        x = np.concatenate([[0.0], pos, [1.0]])
        v = np.concatenate([[0.0], v_line / u_lid, [0.0]])
        return y, u, x, v


class TaylorGreen(Case):
    """Decaying Taylor-Green vortex on a periodic box of ``n`` cells per side.

    2-D: ``u = U sin(kx) cos(ky)``, ``v = -U cos(kx) sin(ky)``, k = 2 pi / n, whose kinetic
    energy decays as ``exp(-4 nu k^2 t)``. 3-D: the classic ``u = U sin x cos y cos z``,
    ``v = -U cos x sin y cos z``, ``w = 0``. ``Re = U n / nu``.
    """

    def __init__(
        self,
        n: int,
        re: float = 100.0,
        u0: float = 0.05,
        dim: int = 2,
        collision: str = "bgk",
        dtype: Any = np.float64,
        comm: Any = None,
        backend: Any = None,
        dims: Any = None,
        nu: float | None = None,
        streaming: str = "auto",
        smagorinsky: float = 0.0,
        mrt_rates: dict[str, float] | None = None,
        lattice: str | Lattice | None = None,
        magic: float | str | None = None,
    ) -> None:
        self.n, self.dim = int(n), int(dim)
        lat = lattice_for(self.dim, lattice)
        units = (
            LatticeUnits.from_viscosity(nu, n, u0)
            if nu is not None
            else LatticeUnits.from_reynolds(re, n, u0)
        )
        self._make(
            (n,) * dim,
            True,
            lat,
            units,
            collision,
            dtype,
            comm,
            backend,
            dims,
            streaming=streaming,
            smagorinsky=smagorinsky,
            mrt_rates=mrt_rates,
            magic=magic,
        )
        self.k = 2 * np.pi / n
        rho, u = self.initial_fields()
        self.solver.initialize(rho, u)

    def initial_fields(self) -> tuple[np.ndarray, list[np.ndarray]]:
        coords = [(c + 0.5) * self.k for c in self.solver.coordinates()]
        u0, xp = self.units.u, self.solver.xp
        if self.dim == 2:
            x, y = coords
            u = [u0 * np.sin(x) * np.cos(y), -u0 * np.cos(x) * np.sin(y)]
            p = -0.25 * u0**2 * (np.cos(2 * x) + np.cos(2 * y))
        else:
            x, y, z = coords
            u = [
                u0 * np.sin(x) * np.cos(y) * np.cos(z),
                -u0 * np.cos(x) * np.sin(y) * np.cos(z),
                np.zeros(np.broadcast_shapes(x.shape, y.shape, z.shape)),
            ]
            p = u0**2 / 16 * (np.cos(2 * x) + np.cos(2 * y)) * (np.cos(2 * z) + 2)
        shape = self.decomp.local_shape
        rho = 1.0 + 3.0 * np.broadcast_to(p, shape)
        return xp.asarray(rho), [xp.asarray(np.broadcast_to(ua, shape)) for ua in u]

    def kinetic_energy(self) -> float:
        """Collective. Mean of |u|^2 / 2 over the grid."""
        _, u = self.solver.macroscopic()
        local = float(sum((ua * ua).sum() for ua in u)) * 0.5
        return allreduce(local, "sum", self.comm) / math.prod(self.decomp.global_shape)

    def analytic_energy(self, steps: int) -> float:
        """2-D: ``E0 exp(-4 nu k^2 t)`` with ``E0 = U^2 / 4`` (exact). 3-D: the viscous
        (Stokes) decay ``E0 exp(-6 nu k^2 t)`` with ``E0 = U^2 / 8``, exact as Re -> 0 (the
        nonlinear term then transfers a fraction O(Re^2) of the energy to other modes)."""
        nu, k2 = self.units.nu, self.k**2
        if self.dim == 2:
            return self.units.u**2 / 4 * math.exp(-4 * nu * k2 * steps)
        return self.units.u**2 / 8 * math.exp(-6 * nu * k2 * steps)

    def analytic_velocity(self, steps: int) -> list[np.ndarray]:
        """2-D: the exact velocity field of the owned cells after ``steps`` steps."""
        decay = math.exp(-2 * self.units.nu * self.k**2 * steps)
        x, y = [(c + 0.5) * self.k for c in self.solver.coordinates()]
        u0 = self.units.u * decay
        return [u0 * np.sin(x) * np.cos(y), -u0 * np.cos(x) * np.sin(y)]


class Channel(Case):
    """Poiseuille flow between walls at y = 0 and y = ny; ``Re = u_max ny / nu``.

    Default: periodic along x, driven by the body force that gives peak speed ``u_max``,
    ``F = 8 nu u_max / ny^2``. ``inflow=True``: a velocity inlet at x = 0 with the parabolic
    profile of peak ``u_max`` and an outlet at x = nx, no body force: ``outlet="pressure"``
    (density 1) or ``"convective"`` (:func:`outlet_boundary`, ``outlet_speed`` its ``U_c``).
    ``magic`` defaults to ``"auto"`` with ``inflow=True`` (velocity scale ``u_max``), else to
    3/16 (see :class:`Case`).
    """

    def __init__(
        self,
        nx: int,
        ny: int,
        re: float = 10.0,
        u_max: float = 0.05,
        collision: str = "trt",
        dtype: Any = np.float64,
        comm: Any = None,
        backend: Any = None,
        dims: Any = None,
        inflow: bool = False,
        streaming: str = "auto",
        smagorinsky: float = 0.0,
        mrt_rates: dict[str, float] | None = None,
        outlet: str = "pressure",
        outlet_speed: float | None = None,
        magic: float | str | None = None,
    ) -> None:
        self.nx, self.ny, self.inflow = int(nx), int(ny), bool(inflow)
        out = outlet_boundary(outlet, speed=outlet_speed)
        if not inflow and (outlet != "pressure" or outlet_speed is not None):
            raise ValueError("outlet and outlet_speed apply with inflow=True")
        units = LatticeUnits.from_reynolds(re, ny, u_max)
        common = (D2Q9, units, collision, dtype, comm, backend, dims)
        les = {"smagorinsky": smagorinsky, "mrt_rates": mrt_rates, "magic": magic}
        if not inflow:
            self.force = 8 * units.nu * u_max / ny**2
            self._make(
                (nx, ny),
                (True, False),
                *common,
                force=(self.force, 0.0),
                streaming=streaming,
                **les,
            )
            return
        self.force = 0.0

        def profile(y: np.ndarray) -> list[np.ndarray]:
            return [4 * u_max * (y + 0.5) * (ny - y - 0.5) / ny**2, 0.0 * y]

        bounds = [OpenBoundary(0, -1, "velocity", velocity=profile), out]
        self._make(
            (nx, ny), False, *common, open_boundaries=bounds, streaming=streaming,
            open_inflow=True, **les
        )

    def analytic_profile(self) -> np.ndarray:
        """u(y) at the owned cell centres (y + 1/2 from the lower wall): the parabola of peak
        ``u_max``."""
        y = np.arange(self.decomp.local_slices[1].start, self.decomp.local_slices[1].stop) + 0.5
        return 4 * self.units.u * y * (self.ny - y) / self.ny**2
