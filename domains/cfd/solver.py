"""The lattice Boltzmann solver on a decomposition: fused kernel, overlapped halo exchange.

Populations are stored structure-of-arrays, ``f[q, *ghost_shape]`` with one ghost layer, in two
buffers (pull scheme). A step starts the halo exchange of ``f`` (which leaves only the first
split axis's messages in flight), updates the cells that need none of those ghosts while the
messages travel, completes the exchange, then updates the two boundary faces of that axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpc.decomposition import CartDecomposition
from hpc.halo import HaloExchange

from .codegen import COLLISIONS, FLUID, MOVING_WALL, WALL, load_kernel
from .lattice import CS2, Lattice, moment_basis
from .units import TRT_MAGIC, auto_magic, check_magic

__all__ = [
    "LBMSolver",
    "OpenBoundary",
    "equilibrium",
    "moments",
    "mrt_rates",
    "FLUID",
    "WALL",
    "MOVING_WALL",
]

# Default MRT rates of the non-shear moments: Lallemand & Luo (2000) for D2Q9, d'Humieres et al.
# (2002) for D3Q19. ``q`` (energy flux) follows the shear rate (see :func:`mrt_rates`).
MRT_DEFAULTS = {
    "D2Q9": {"bulk": 1.64, "eps": 1.54},
    "D3Q19": {"bulk": 1.19, "eps": 1.4, "pi": 1.4, "m": 1.98},
}


def mrt_rates(
    lattice: Lattice, tau: float, rates: dict[str, float] | None = None, magic: float = TRT_MAGIC
) -> dict[str, float]:
    """The MRT relaxation rate of each moment group of ``lattice`` (see
    :class:`~hpc.domains.cfd.lattice.MomentBasis`).

    ``nu`` (shear) is ``1 / tau``, set by the viscosity ``nu = (tau - 1/2) / 3``. The others
    default to :data:`MRT_DEFAULTS`, except ``q`` (energy flux, odd), which defaults to the
    rate that makes ``(1/s_q - 1/2)(tau - 1/2) = magic`` (3/16: half-way bounce-back walls sit
    exactly mid-link at any viscosity, as TRT). ``rates`` overrides any of them but ``nu``;
    each must lie in (0, 2).
    """
    groups = [g for g in moment_basis(lattice).groups if g not in ("rho", "j")]
    out = {"nu": 1.0 / tau, **MRT_DEFAULTS[lattice.name]}
    out["q"] = 1.0 / (magic / (tau - 0.5) + 0.5)
    for key, value in (rates or {}).items():
        if key == "nu":
            raise ValueError("the shear rate 'nu' is set by tau (the viscosity), not mrt_rates")
        if key not in out:
            raise ValueError(
                f"mrt_rates: {key!r} is not a moment group of {lattice.name}; expected one of "
                f"{', '.join(sorted(set(groups) - {'nu'}))}"
            )
        if not 0.0 < float(value) < 2.0:
            raise ValueError(f"mrt_rates[{key!r}]={value}: must lie in (0, 2)")
        out[key] = float(value)
    return out



@dataclass(frozen=True)
class OpenBoundary:
    """An inflow or outflow face of the domain, imposed through its ghost layer.

    Before every step the ghost cells of the face are set to the equilibrium of
    ``kind="velocity"``: the given velocity (``velocity`` is a tuple, or a function of the face's
    global cell indices along the other axes returning one array per component) and the density
    of the adjacent cells; ``kind="pressure"``: the given ``density`` and the velocity of the
    adjacent cells (zero gradient). The cells pulling from the face then stream them in.

    ``kind="convective"`` is an outflow face for unsteady wakes (Orlanski 1976; Yang 2013 for
    lattice Boltzmann): the ghost populations obey ``df/dt + U_c df/dn = 0``, discretised
    implicitly upwind, ``f_g(t+1) = (f_g(t) + U_c f_near(t+1)) / (1 + U_c)`` (stable for any
    ``U_c >= 0``), so vortices leave with the flow instead of being pinned to a fixed pressure.
    ``speed`` is ``U_c`` (lattice units); None takes the mean outward normal velocity over the
    face at every step (summed in fixed point, so any decomposition gives bitwise the same
    value; a negative mean is clamped to 0). Nothing in that equation holds the pressure level,
    and any mass imbalance of the inlet would accumulate, so the ghosts are then scaled by
    ``1 + relax (density - rho_mean) / rho_mean``, ``rho_mean`` the mean density of the face's
    adjacent cells (summed exactly too): a uniform factor, which keeps the shape of a passing
    vortex's pressure field and relaxes only the face's mean density towards ``density``
    (``relax=0``: none). It needs pull streaming (the ghost's previous value is the other
    buffer's) and ignores ``scheme``. The first step, and the first after a restart, start from
    zero gradient (``f_g = f_near``), so a restarted run is not bitwise the uninterrupted one.

    ``scheme="equilibrium"`` sets the ghosts to that equilibrium alone (first order);
    ``scheme="nee"`` adds the non-equilibrium part of the adjacent cells (Guo, Zheng & Shi
    2002, second order): ``f_ghost = f_eq(rho_b, u_b) + (f_near - f_eq(rho_near, u_near))``.
    The stored populations are post-collision, whose non-equilibrium part is the
    pre-collision one times ``1 - omega`` on both sides, so the extrapolation holds for them.

    Attributes
    ----------
    axis : int
    side : {-1, +1}
        The low or the high end of ``axis``.
    kind : {"velocity", "pressure", "convective"}
    velocity : tuple or callable, optional
    density : float
    scheme : {"equilibrium", "nee"}
    speed : float, optional
        The convective speed ``U_c`` (convective faces; None: the mean outflow velocity).
    relax : float
        Convective faces: the rate in [0, 1] at which the face's mean density is relaxed
        towards ``density`` per step.
    """

    axis: int
    side: int
    kind: str
    velocity: Any = None
    density: float = 1.0
    scheme: str = "equilibrium"
    speed: float | None = None
    relax: float = 0.1


# Blocks of fewer cells update in one kernel call after the exchange ("auto" overlap, CPU).
_OVERLAP_MIN_CELLS = 1 << 18

# Fixed-point scale of the convective outlet's face sums (velocity, density deviation): integer
# sums are exact, hence the same on every decomposition (2^32: 2e-10 resolution; values below 1
# on up to 2^31 face cells fit int64).
_FIXED = 2.0**32


def moments(lattice: Lattice, f: Any) -> tuple[Any, list[Any]]:
    """Density and momentum of populations ``f[q, ...]``, summed in a fixed order.

    Element-wise sums (not a BLAS product, whose rounding depends on the array's length and
    alignment) keep results bitwise independent of how the grid is decomposed.
    """
    rho = f[0].copy()
    for i in range(1, lattice.q):
        rho += f[i]
    mom = []
    for a in range(lattice.d):
        acc = f[0] * 0.0
        for i in range(lattice.q):
            c = int(lattice.c[i, a])
            if c == 1:
                acc += f[i]
            elif c == -1:
                acc -= f[i]
        mom.append(acc)
    return rho, mom


def equilibrium(lattice: Lattice, rho: Any, u: Sequence[Any], xp: Any = np) -> Any:
    """Second-order equilibrium ``f_eq[q, ...]`` for density ``rho`` and velocity ``u``."""
    usq = sum(ui * ui for ui in u)
    out = []
    for i in range(lattice.q):
        cu = sum(int(lattice.c[i, a]) * u[a] for a in range(lattice.d))
        out.append(lattice.w[i] * rho * (1 + cu / CS2 + cu * cu / (2 * CS2**2) - usq / (2 * CS2)))
    return xp.stack(out)


class LBMSolver:
    """Collective. Lattice Boltzmann on ``decomp`` (its halo must be 1).

    Parameters
    ----------
    decomp : CartDecomposition
        Grid and process layout; periodic axes wrap through the halo exchange.
    lattice : Lattice
        D2Q9 for 2-D grids, D3Q19 or D3Q27 for 3-D (MRT: D2Q9 and D3Q19 only).
    tau : float
        Relaxation time (TRT: of the symmetric moments).
    collision : {"bgk", "trt", "mrt"}
        BGK, two-relaxation-time with magic parameter ``magic``, or multiple-relaxation-time
        in orthogonal raw moments (Lallemand & Luo 2000, d'Humieres et al. 2002; rates:
        :func:`mrt_rates`).
    smagorinsky : float
        Smagorinsky constant ``C_s`` of the LES closure (0: none, the plain kernel): each cell
        relaxes its shear moments at ``1 / tau_eff`` from its own non-equilibrium stress
        (Hou et al. 1996); TRT's odd rate and MRT's other rates stay as set from ``tau``.
    mrt_rates : dict, optional
        Rates of MRT's non-shear moment groups (``bulk``, ``eps``, ``q``, D3Q19 also ``pi``
        and ``m``), overriding the defaults of :func:`mrt_rates`.
    dtype : {float32, float64}
    force : sequence of float, optional
        A uniform body force (Guo's scheme), lattice units.
    wall_velocity : sequence of float, optional
        Velocity of the cells flagged ``MOVING_WALL``.
    magic : float or "auto", optional
        TRT's magic parameter ``Lambda = (tau - 1/2)(tau_- - 1/2)``, which sets the odd
        moments' relaxation time ``tau_-``; with ``collision="mrt"`` it sets the default rate
        of the energy flux ``q`` the same way. None: 3/16 (:data:`~hpc.domains.cfd.units.
        TRT_MAGIC`), which puts a half-way bounce-back wall exactly mid-link in Poiseuille
        flow at any viscosity (in general the slip is ``F (16 Lambda - 3) / (24 nu)``). At a
        fixed ``Lambda``, TRT's steady solutions, walls included, depend on ``tau`` only
        through the viscosity (Ginzburg, Verhaeghe & d'Humieres 2008). ``(tau - 1/2)^2`` is
        BGK (both rates equal); a smaller value relaxes the odd moments harder
        (``omega_- -> 2``), which kept the inflow face of Schaefer-Turek 2D-2 stable at grid
        Reynolds numbers where 3/16 diverges (docs/cfd.md). ``"auto"``: chosen from the grid
        Reynolds number ``u_max / nu`` (:func:`~hpc.domains.cfd.units.auto_magic`: 3/16 up to
        7.5, above it ``6 (nu / u_max)^2``); needs ``u_max``. A number must be finite and
        positive; refused with BGK, which has one rate, as is ``"auto"``.
    flags : array of uint8, optional
        Cell types on the ghosted local grid (FLUID, WALL, MOVING_WALL); default: fluid, and
        walls in the ghost layer beyond non-periodic domain edges.
    halo_pattern : {"sweep", "direct"}
    streaming : {"auto", "aa", "pull"}
        ``"aa"``: in place, steps in pairs (a streaming half-step that pushes populations to
        where their next cell reads them, then a local one), so each cell update reads and
        writes one array: no write-allocate traffic for a second buffer, the memory-bound
        kernel's largest saving. A single leftover step runs the pull kernel. ``"pull"``: two
        buffers. ``"auto"``: AA, or pull when there are open boundaries (their ghost
        equilibria need the moments at every step) or bodies. Results are bitwise the same.
    bodies : sequence of Body, optional
        Solids in the flow (:mod:`hpc.domains.cfd.geometry`): their cells become walls and
        their boundary links take Bouzidi's interpolated bounce-back (``curved=True``) or
        half-way bounce-back; :meth:`body_force` gives the force on them. Pull streaming;
        on the GPU the links are held and updated on the device.
    curved : bool
        Interpolated (second-order) bounce-back on the bodies' links, else half-way.
    u_max : float, optional
        The flow's velocity scale for ``magic="auto"`` (the peak inflow or lid speed, lattice
        units); given only with it.
    overlap : {"auto", True, False}
        Update the cells that need no pending ghosts while the halo messages travel, then the
        block's boundary faces (three kernel calls), or exchange first and update the whole
        block in one call. ``"auto"``: overlap on the GPU, and on the CPU for blocks of at
        least ``_OVERLAP_MIN_CELLS`` cells. Results are bitwise the same.
    """

    def __init__(
        self,
        decomp: CartDecomposition,
        lattice: Lattice,
        tau: float,
        collision: str = "bgk",
        dtype: Any = np.float64,
        force: Sequence[float] | None = None,
        wall_velocity: Sequence[float] | None = None,
        flags: Any = None,
        magic: float | str | None = None,
        halo_pattern: str = "sweep",
        open_boundaries: Sequence[OpenBoundary] = (),
        streaming: str = "auto",
        bodies: Sequence[Any] = (),
        curved: bool = True,
        smagorinsky: float = 0.0,
        mrt_rates: dict[str, float] | None = None,
        overlap: str | bool = "auto",
        u_max: float | None = None,
    ) -> None:
        if decomp.halo != 1:
            raise ValueError(f"the lattice Boltzmann solver needs halo=1, not {decomp.halo}")
        if lattice.d != decomp.ndim:
            raise ValueError(f"{lattice.name} is {lattice.d}-D but the grid is {decomp.ndim}-D")
        if min(decomp.local_shape) < 2:
            raise ValueError(
                f"rank {decomp.rank} owns {decomp.local_shape} cells; at least 2 per axis are "
                "needed (use fewer ranks or more cells)"
            )
        if np.dtype(dtype) not in (np.float32, np.float64):
            raise ValueError(f"dtype {dtype}: float32 or float64")
        if tau <= 0.5:
            raise ValueError(f"tau={tau}: must exceed 1/2")
        self.decomp, self.lattice, self.collision = decomp, lattice, collision
        self.dtype = np.dtype(dtype)
        self.backend = decomp.backend
        xp = self.backend.xp
        self.xp = xp
        self.tau = float(tau)
        self.omega_plus = 1.0 / self.tau
        if collision not in COLLISIONS:
            raise ValueError(f"collision={collision!r}: expected one of {COLLISIONS}")
        if magic is not None and collision == "bgk":
            raise ValueError(
                f"magic={magic} applies to collision='trt' (or 'mrt'), not 'bgk', which has one "
                f"rate; TRT with magic=(tau - 1/2)^2 = {(self.tau - 0.5) ** 2:.6g} is BGK"
            )
        if magic is not None and collision == "mrt" and "q" in (mrt_rates or {}):
            raise ValueError("give the energy-flux rate as magic or as mrt_rates['q'], not both")
        # Lambda = (1/omega+ - 1/2)(1/omega- - 1/2)
        self.magic_auto = isinstance(magic, str) and magic == "auto"
        if self.magic_auto and u_max is None:
            raise ValueError(
                "magic='auto' chooses Lambda from the grid Reynolds number u_max / nu: give "
                "u_max (the peak inflow or lid speed, lattice units)"
            )
        if u_max is not None and not self.magic_auto:
            raise ValueError(f"u_max={u_max} applies with magic='auto', not magic={magic!r}")
        self.u_max = None if u_max is None else float(u_max)
        if self.magic_auto:
            self.magic = auto_magic((self.tau - 0.5) / 3.0, self.u_max)
        else:
            self.magic = TRT_MAGIC if magic is None else check_magic(magic)
        if collision == "trt":
            self.omega_minus = 1.0 / (self.magic / (self.tau - 0.5) + 0.5)
        else:
            self.omega_minus = self.omega_plus
        if mrt_rates and collision != "mrt":
            raise ValueError(f"mrt_rates apply to collision='mrt', not {collision!r}")
        self.rates = (
            _mrt_rates(lattice, self.tau, mrt_rates, self.magic) if collision == "mrt" else {}
        )
        self.smagorinsky = float(smagorinsky)
        if not self.smagorinsky >= 0.0:
            raise ValueError(f"smagorinsky={smagorinsky}: the constant C_s must be >= 0")
        les = self.smagorinsky > 0.0
        extra: list[float] = []
        if self.rates:
            groups = moment_basis(lattice).groups
            extra += [self.rates[g] for g in groups if g not in ("rho", "j")]
        if les:
            extra += [self.tau, 18.0 * 2.0**0.5 * self.smagorinsky**2]
        self._extra = tuple(extra)
        d = lattice.d
        self.force = tuple(float(v) for v in (force or (0.0,) * d))
        self.wall_velocity = tuple(float(v) for v in (wall_velocity or (0.0,) * d))
        if len(self.force) != d or len(self.wall_velocity) != d:
            raise ValueError(f"force and wall_velocity need {d} components")
        forcing = any(self.force)
        if streaming == "auto":
            streaming = "pull" if open_boundaries or bodies else "aa"
        if streaming not in ("aa", "pull"):
            raise ValueError(f"streaming={streaming!r}: expected 'auto', 'aa' or 'pull'")
        if streaming == "aa" and (open_boundaries or bodies):
            raise ValueError(
                "streaming='aa' does not support open boundaries or bodies; use 'pull'"
            )
        self.streaming = streaming
        if overlap not in ("auto", True, False):
            raise ValueError(f"overlap={overlap!r}: expected 'auto', True or False")
        # A small block's boundary boxes are thin, single-threaded kernel calls that cost more
        # than the overlap saves (CPU messages barely progress during a kernel anyway).
        cells = math.prod(decomp.local_shape)
        self.overlap = bool(overlap) if overlap != "auto" else (
            self.backend.is_gpu or cells >= _OVERLAP_MIN_CELLS)
        target = self.backend.name  # the generator writes the kernel for this device
        ghost = tuple(decomp.ghost_shape)

        def kernel(pattern: str, walls: bool) -> Any:
            return load_kernel(
                lattice, collision, forcing, self.dtype, target, walls, ghost, pattern, les
            )

        # kernels by (pattern, box has walls); AA's leftover single step is a pull with walls
        self._kernels = {("pull", True): kernel("pull", True)}
        for pattern in ("pull",) if streaming == "pull" else ("aa-stream", "aa-local"):
            for walls in (True, False):
                self._kernels[pattern, walls] = self._kernels.get((pattern, walls)) or kernel(
                    pattern, walls
                )
        shape = (lattice.q, *decomp.ghost_shape)
        self.f = xp.zeros(shape, dtype=self.dtype)
        self.g = xp.zeros(shape, dtype=self.dtype) if streaming == "pull" else None
        self.open_boundaries = [b for b in open_boundaries if self._owns_face(decomp, b)]
        self._has_open_faces = bool(open_boundaries)  # the same on every rank
        self._convective = [b for b in open_boundaries if b.kind == "convective"]  # all ranks
        self._history = False  # whether the other buffer holds the open faces' last ghosts
        for b in open_boundaries:
            if b.kind not in ("velocity", "pressure", "convective") or b.side not in (-1, 1):
                raise ValueError(
                    f"open boundary {b}: kind velocity|pressure|convective, side -1|+1"
                )
            if b.kind == "convective" and b.speed is not None and not float(b.speed) >= 0:
                raise ValueError(f"open boundary {b}: the convective speed must be >= 0")
            if b.kind == "convective" and not 0.0 <= float(b.relax) <= 1.0:
                raise ValueError(f"open boundary {b}: relax must lie in [0, 1]")
            if b.scheme not in ("equilibrium", "nee"):
                raise ValueError(f"open boundary {b}: scheme equilibrium|nee")
            if any(decomp.periodic):
                raise ValueError(
                    f"open boundary {b}: the domain must have walls, not periodicity, on the "
                    f"other axes (periodic={decomp.periodic})"
                )
        base = flags if flags is not None else self.default_flags()
        base = np.array(base, dtype=np.uint8)
        for b in self.open_boundaries:  # the face's ghosts stream in like fluid cells
            base[self._face(b, ghost=True, wide=True)] = FLUID  # domain edges stay walls
        self.bodies = list(bodies)
        self.bounce = None
        self.solid: np.ndarray | None = None  # the bodies' cells (ghosted block)
        if self.bodies:
            base = self._place_bodies(base, open_boundaries, curved)
        self.flags = xp.asarray(base, np.uint8)
        if tuple(self.flags.shape) != decomp.ghost_shape:
            raise ValueError(f"flags {tuple(self.flags.shape)} != {decomp.ghost_shape}")
        # Only the populations streaming across a face travel: 3 of 9 (D2Q9), 5 of 19 (D3Q19),
        # 9 of 27 (D3Q27).
        # Open faces need all of them: their edge cells are rebuilt from the moments of the
        # neighbouring rank's exchanged cells.
        c = lattice.c.tolist()

        def crossing(d: tuple[int, ...]) -> list[int]:
            return [
                i for i, ci in enumerate(c) if all(ci[a] == d[a] for a in range(len(d)) if d[a])
            ]

        self.halo = HaloExchange(
            decomp,
            self.dtype,
            components=lattice.q,
            pattern=halo_pattern,
            select=None if open_boundaries else crossing,
        )
        # AA's streaming half-step leaves the populations that cross a face in the ghosts;
        # this exchange takes them to the owned cells they stream into.
        self.push = (
            HaloExchange(
                decomp,
                self.dtype,
                components=lattice.q,
                select=lambda d: crossing(tuple(-v for v in d)),
                reverse=True,
            )
            if streaming == "aa"
            else None
        )
        self._inner, self._ring = self._boxes()
        self.refresh_flags()
        self.steps_done = 0
        self.initialize()

    # -- set-up -------------------------------------------------------------------------
    def default_flags(self) -> np.ndarray:
        """Fluid everywhere; walls in the ghost layer beyond each non-periodic domain edge."""
        return self.default_flags_for(self.decomp)

    @staticmethod
    def default_flags_for(d: CartDecomposition) -> np.ndarray:
        """:meth:`default_flags` for decomposition ``d``."""
        flags = np.zeros(d.ghost_shape, dtype=np.uint8)
        for axis in range(d.ndim):
            if d.periodic[axis]:
                continue
            index = [slice(None)] * d.ndim
            if d.offset[axis] == 0:
                index[axis] = 0
                flags[tuple(index)] = WALL
            if d.offset[axis] + d.local_shape[axis] == d.global_shape[axis]:
                index[axis] = -1
                flags[tuple(index)] = WALL
        return flags

    def _place_bodies(
        self, base: np.ndarray, open_boundaries: Sequence[OpenBoundary], curved: bool
    ) -> np.ndarray:
        """Collective. Flag the bodies' cells as walls and set up their boundary links."""
        from hpc.collectives import allreduce

        from .bouzidi import InterpolatedBounceBack
        from .geometry import GeometryError, boundary_links, solid_mask

        d = self.decomp
        solid = solid_mask(d, self.bodies)
        cut = []  # open faces a body reaches (their layer of owned cells or their ghosts)
        for b in open_boundaries:
            if self._owns_face(d, b):
                for ghost in (True, False):
                    if solid[self._face(b, ghost=ghost, wide=True)].any():
                        cut.append(f"axis {b.axis} side {b.side:+d} ({b.kind})")
                        break
        if allreduce(len(cut), "max", d.comm):  # agreed: every rank raises, none hangs
            where = ", ".join(cut) or "an open face on another rank"
            raise GeometryError(
                f"a body cuts the open boundary at {where}: move it at least one cell away from "
                "the inlet and outlet"
            )
        base = base.copy()
        base[solid != 0] = WALL
        fluid = (base == FLUID).astype(np.uint8)
        links = boundary_links(d, self.lattice, self.bodies, solid, fluid)
        if not curved:
            links.q[:] = 0.5  # half-way bounce-back: the interpolation gives f*_k(x) back
        self.solid = solid
        self.bounce = InterpolatedBounceBack(
            self.lattice, links, tuple(d.ghost_shape), d.comm, self.backend
        )
        return base

    def body_force(self) -> np.ndarray:
        """Collective. Force on the bodies during the last step (momentum exchange, lattice
        units): bitwise the same on any decomposition. Zeros before the first step."""
        if self.bounce is None:
            raise ValueError("the solver has no bodies")
        return self.bounce.force()

    @staticmethod
    def _owns_face(d: CartDecomposition, b: OpenBoundary) -> bool:
        if b.side < 0:
            return d.offset[b.axis] == 0
        return d.offset[b.axis] + d.local_shape[b.axis] == d.global_shape[b.axis]

    def _span(self, axis: int, with_neighbours: bool) -> slice:
        """Owned cells along ``axis``, plus the ghost cells that a neighbour rank owns."""
        d = self.decomp
        lo, hi = 1, 1 + d.local_shape[axis]
        if with_neighbours:
            unit = [0] * d.ndim
            unit[axis] = -1
            lo = 0 if d.neighbour(tuple(unit)) is not None else 1
            unit[axis] = 1
            hi = hi + 1 if d.neighbour(tuple(unit)) is not None else hi
        return slice(lo, hi)

    def _face(self, b: OpenBoundary, ghost: bool, wide: bool = False) -> tuple[slice | int, ...]:
        """Index of the face's ghost layer (or the adjacent owned layer). ``wide`` adds the
        cells of neighbouring ranks along the other axes (valid after a halo exchange)."""
        d = self.decomp
        index: list[slice | int] = [self._span(a, wide) for a in range(d.ndim)]
        n = d.local_shape[b.axis]
        index[b.axis] = (0 if ghost else 1) if b.side < 0 else (n + 1 if ghost else n)
        return tuple(index)

    def _apply_open_boundaries(self) -> None:
        """Local. Set the ghost populations of the inflow/outflow faces (vectorised per face).

        Called after the halo exchange: the face also covers the edge cells shared with
        neighbouring ranks, computed from their exchanged values, so the result does not depend
        on the decomposition.
        """
        xp, lat = self.xp, self.lattice
        speeds = self._convective_speeds() if self._convective else {}
        for b in self.open_boundaries:
            if b.kind == "convective":
                self._apply_convective(b, speeds[id(b)])
                continue
            if b.scheme == "nee":
                self._apply_nee(b)
                continue
            near = self.f[(slice(None), *self._face(b, ghost=False, wide=True))].astype(np.float64)
            rho, mom = moments(lat, near)
            if b.kind == "velocity":
                if callable(b.velocity):
                    u = [xp.asarray(np.broadcast_to(v, rho.shape)) for v in self._inflow(b)]
                else:
                    u = [xp.full(rho.shape, float(v)) for v in b.velocity]
            else:
                u = [m / rho for m in mom]
                rho = xp.full(rho.shape, float(b.density))
            feq = equilibrium(lat, rho, u, xp)
            self.f[(slice(None), *self._face(b, ghost=True, wide=True))] = feq.astype(self.dtype)
        self._history = True

    def _convective_speeds(self) -> dict[int, tuple[float, float]]:
        """Collective. ``(U_c, scale)`` of every convective face (keyed by ``id``): its given
        speed, or the mean outward normal velocity of the face's adjacent cells, and the factor
        relaxing their mean density, from sums in fixed point (exact: any decomposition gives
        bitwise the same)."""
        sums = np.zeros((len(self._convective), 2), dtype=np.int64)
        xp = self.xp
        for k, b in enumerate(self._convective):
            if self._owns_face(self.decomp, b):
                near = self.f[(slice(None), *self._face(b, ghost=False))].astype(np.float64)
                rho, mom = moments(self.lattice, near)
                un = b.side * (mom[b.axis] - 0.5 * self.force[b.axis]) / rho
                sums[k, 0] = int(xp.rint(un * _FIXED).astype(np.int64).sum())
                sums[k, 1] = int(xp.rint((rho - b.density) * _FIXED).astype(np.int64).sum())
        from hpc.collectives import allreduce

        sums = allreduce(sums, "sum", self.decomp.comm)
        out = {}
        for k, b in enumerate(self._convective):
            cells = math.prod(n for a, n in enumerate(self.decomp.global_shape) if a != b.axis)
            u_mean = max(0.0, float(sums[k, 0]) / (_FIXED * cells))
            rho_mean = b.density + float(sums[k, 1]) / (_FIXED * cells)
            speed = u_mean if b.speed is None else float(b.speed)
            out[id(b)] = (speed, 1.0 + b.relax * (b.density - rho_mean) / rho_mean)
        return out

    def _apply_convective(self, b: OpenBoundary, coefficients: tuple[float, float]) -> None:
        """Local. ``f_g <- scale (f_g(previous step) + U_c f_near) / (1 + U_c)`` on face
        ``b``, ``coefficients = (U_c, scale)``."""
        u_c, scale = coefficients
        ghost = (slice(None), *self._face(b, ghost=True, wide=True))
        near = self.f[(slice(None), *self._face(b, ghost=False, wide=True))].astype(np.float64)
        # the other buffer's ghosts are this face's values of the previous step (pull
        # streaming writes owned cells only); the first step starts from zero gradient
        prev = self.g[ghost].astype(np.float64) if self._history else near
        self.f[ghost] = (scale * ((prev + u_c * near) / (1.0 + u_c))).astype(self.dtype)

    def _inflow(self, b: OpenBoundary) -> list[Any]:
        """The callable inlet velocity of face ``b`` over its cells (wide span)."""
        others = [
            self.decomp.offset[a] - 1 + np.arange(sp.start, sp.stop)
            for a in range(self.decomp.ndim)
            if a != b.axis
            for sp in [self._span(a, True)]
        ]
        grids = np.meshgrid(*others, indexing="ij") if others else []
        return list(b.velocity(*grids))

    def _apply_nee(self, b: OpenBoundary) -> None:
        """Local. Non-equilibrium extrapolation on face ``b`` (a compiled kernel)."""
        from .boundaries import apply_nee_face

        face = self._face(b, ghost=False, wide=True)
        ghost = self._face(b, ghost=True, wide=True)
        spans = [s for a, s in enumerate(face) if a != b.axis]
        shape = tuple(s.stop - s.start for s in spans)
        velocity = None
        if b.kind == "velocity":
            given = self._inflow(b) if callable(b.velocity) else list(b.velocity)
            velocity = [np.broadcast_to(np.asarray(v, dtype=np.float64), shape) for v in given]
        apply_nee_face(
            self.f,
            self.lattice,
            b.axis,
            face[b.axis],
            ghost[b.axis],
            spans,
            b.kind,
            b.density,
            velocity,
            self.backend,
        )

    def coordinates(self) -> list[np.ndarray]:
        """Global cell indices of the owned cells, one open-mesh array per axis (host)."""
        return list(np.ix_(*[np.arange(s.start, s.stop) for s in self.decomp.local_slices]))

    def initialize(self, rho: Any = 1.0, u: Sequence[Any] | None = None) -> None:
        """Local. Set the owned populations to the equilibrium of ``rho`` and ``u`` (owned-cell
        arrays or scalars)."""
        xp = self.xp
        shape = self.decomp.local_shape
        rho = xp.broadcast_to(xp.asarray(rho, dtype=np.float64), shape)
        u = [
            xp.broadcast_to(xp.asarray(0.0 if u is None else u[a], dtype=np.float64), shape)
            for a in range(self.lattice.d)
        ]
        # Stored populations are post-collision, whose momentum is rho u + F/2 (Guo).
        u = [u[a] + 0.5 * self.force[a] / rho for a in range(self.lattice.d)]
        feq = equilibrium(self.lattice, rho, u, xp)
        self.f[...] = 0
        self.f[(slice(None), *self.decomp.interior_slices)] = feq.astype(self.dtype)
        if self.g is not None:
            self.g[...] = self.f
        self._history = False

    def _boxes(self) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
        """The inner box, updated while the halo messages are in flight, and the boundary
        boxes of the block, as lo/hi lists.

        Only the faces along the exchange's pending axes wait for messages; along the other
        axes the ghosts are filled when ``start`` returns, so the inner box spans them whole
        (long contiguous rows, and no thin boxes across the innermost axis).
        """
        n = self.decomp.local_shape
        if not self.overlap:  # one box, updated after the exchange
            return tuple(v for a in range(len(n)) for v in (1, n[a] + 1)), []
        pending = set(self.halo.pending_axes)
        if self.push is not None:
            pending |= set(self.push.pending_axes)
        inner = tuple(
            v for a in range(len(n)) for v in ((2, n[a]) if a in pending else (1, n[a] + 1))
        )
        ring = []
        for axis in pending:
            for side in (1, n[axis]):
                box = []
                for a in range(len(n)):
                    if a == axis:
                        box += [side, side + 1]
                    elif a in pending and a < axis:
                        box += [2, n[a]]
                    else:
                        box += [1, n[a] + 1]
                ring.append(tuple(box))
        return inner, ring

    def _has_walls(self, box: tuple[int, ...]) -> bool:
        """Whether the box or its neighbour cells hold a non-fluid cell (branch-free kernels
        apply otherwise)."""
        region = tuple(slice(box[2 * a] - 1, box[2 * a + 1] + 1) for a in range(len(box) // 2))
        flags = self.flags[region]
        return not bool((flags == FLUID).all()) if flags.size else False

    def refresh_flags(self) -> None:
        """Local. Re-plan the kernels after ``flags`` was changed."""
        boxes = [self._inner, *self._ring]
        walls = [self._has_walls(box) for box in boxes]
        patterns = ("pull",) if self.streaming == "pull" else ("aa-stream", "aa-local")
        self._plans = {
            p: [(box, self._kernels[p, w]) for box, w in zip(boxes, walls, strict=True)]
            for p in patterns
        }
        self._plans["single"] = [(box, self._kernels["pull", True]) for box in boxes]
        self._calls_key: tuple[float, ...] | None = None  # the calls are made again

    # -- stepping -----------------------------------------------------------------------
    def _kernel_calls(self) -> dict[str, tuple[list, list]]:
        """Per plan, the kernel calls of its inner box and of its boundary boxes, each
        ``(kernel bound to its box's extents, box and scalar arguments)``, empty boxes left
        out.

        Made once, and again when the flags, a rate, the force or the wall velocity changed:
        on a small block the Python around a kernel call counts (building its arguments per
        call took as long as calling the kernel on an empty box, 1.7 us).
        """
        scalars = (self.omega_plus, self.omega_minus, *self.force, *self.wall_velocity,
                   *self._extra)  # fmt: skip
        if scalars != self._calls_key:

            def calls(plan: list) -> list:
                out = []
                for box, kernel in plan:
                    extents = [box[2 * a + 1] - box[2 * a] for a in range(len(box) // 2)]
                    if min(extents) > 0:
                        out.append((self.backend.bound(kernel, extents), (*box, *scalars)))
                return out

            self._calls = {p: (calls(plan[:1]), calls(plan[1:])) for p, plan in self._plans.items()}
            self._calls_key = scalars
        return self._calls

    def _launch(self, calls: list, out: Any) -> None:
        f, flags = self.f, self.flags
        for run, args in calls:
            run(f, out, flags, *args)

    def _sweep(self, exchange: HaloExchange, calls: tuple[list, list], out: Any) -> None:
        """One kernel pass over the block, overlapped with ``exchange`` of ``f``."""
        inner, ring = calls
        exchange.start(self.f)
        if self._has_open_faces or self.bounce is not None or not self.overlap:
            # The inner box reaches the open faces, whose ghosts are set from exchanged
            # cells, and the links' interpolation reads ghosts: exchange, set them, then
            # update (no overlap; nor when the block is one box).
            exchange.finish()
            if self._has_open_faces:
                self._apply_open_boundaries()
            if self.bounce is not None:
                self.bounce.apply(self.f, self.flags)
            self._launch(inner, out)
        else:
            self._launch(inner, out)  # overlaps with the exchange
            exchange.finish()
        self._launch(ring, out)

    def _pull_step(self, calls: tuple[list, list]) -> None:
        if self.g is None:  # AA's leftover single step: the second buffer, made on demand
            self.g = self.xp.zeros_like(self.f)
        self._sweep(self.halo, calls, self.g)
        self.f, self.g = self.g, self.f

    def step(self, n: int = 1) -> None:
        """Collective. Advance ``n`` time steps."""
        calls = self._kernel_calls()
        if self.streaming == "aa":
            stream, local = calls["aa-stream"], calls["aa-local"]
            for _ in range(n // 2):
                self._sweep(self.halo, stream, self.f)
                self._sweep(self.push, local, self.f)
            if n % 2:
                self._pull_step(calls["single"])
            self.steps_done += n
        else:
            pull = calls["pull"]
            for _ in range(n):
                self._pull_step(pull)
                self.steps_done += 1  # per step: time-dependent boundaries read it
        self.backend.synchronize()  # queued device work done (nothing to wait for on a CPU)

    # -- results ------------------------------------------------------------------------
    def macroscopic(self) -> tuple[Any, list[Any]]:
        """Local. Density and velocity of the owned cells at the current time.

        The stored populations are post-collision; Guo's collision adds the force to the
        momentum, so the physical velocity is ``(sum_i c_i f*_i - F/2) / rho``.
        """
        xp = self.xp
        fi = self.f[(slice(None), *self.decomp.interior_slices)].astype(np.float64)
        rho, mom = moments(self.lattice, fi)
        u = [(mom[a] - 0.5 * self.force[a]) / rho for a in range(self.lattice.d)]
        fluid = self.flags[self.decomp.interior_slices] == FLUID
        u = [xp.where(fluid, ua, 0.0) for ua in u]
        return xp.where(fluid, rho, 1.0), u

    def state(self) -> dict[str, Any]:
        """The populations as named local arrays (one per direction) for checkpoints."""
        return {f"f{i:02d}": self.f[i] for i in range(self.lattice.q)}

    def restore(self, arrays: dict[str, Any], steps_done: int) -> None:
        """Local. Set the populations from :meth:`state`-named arrays (e.g. a loaded checkpoint)."""
        for i in range(self.lattice.q):
            self.f[i][...] = arrays[f"f{i:02d}"]
        if self.g is not None:
            self.g[...] = self.f
        self._history = False  # convective faces restart from zero gradient
        self.steps_done = int(steps_done)

    def close(self) -> None:
        """Collective. Free the halo exchanges."""
        self.halo.close()
        if self.push is not None:
            self.push.close()


_mrt_rates = mrt_rates  # the solver's parameter of the same name hides it
