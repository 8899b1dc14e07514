"""Bodies in the flow: solid cells and the wall distance of every boundary link.

A body is an analytic shape (:class:`Cylinder`, :class:`Sphere`, :class:`Box`) or a closed
triangle surface read from an STL file (:class:`Surface`, through trimesh). Positions are in
lattice units with the domain's walls at 0 and ``n`` along each axis: the cell of global index
``i`` has its centre at ``i + 1/2``.

Each rank voxelises only its own ghosted block (:func:`solid_mask`): a cell is solid when its
centre lies inside a body. The *boundary links* of the block (:func:`boundary_links`) join an
owned fluid cell ``x`` to a solid neighbour ``x + c_k``; their wall distance ``q`` in ``(0, 1]``
is where the segment from ``x`` to ``x + c_k`` enters the body, in units of the link: found by
compiled kernels (ray-shape and ray-triangle intersection), never per link in Python. The
interpolated bounce-back (:mod:`hpc.domains.cfd.bouzidi`) uses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hpc.decomposition import CartDecomposition
from hpc.errors import HPCError

from .lattice import Lattice

__all__ = [
    "Body",
    "Cylinder",
    "Sphere",
    "Box",
    "Surface",
    "BoundaryLinks",
    "GeometryError",
    "solid_mask",
    "boundary_links",
]

prange = range  # placeholder: the generated kernel modules import numba's

# shape codes of the analytic-shape table: one row (kind, 6 parameters) per body
_CYLINDER, _SPHERE, _BOX = 0, 1, 2
_NO_HIT = 2.0  # a ray parameter beyond the link: no intersection


class GeometryError(HPCError, ValueError):
    """A body that cannot be placed: an unreadable or open STL surface, a body cutting an open
    boundary, a shape with bad parameters."""


class Body:
    """A solid region. Subclasses give its bounding box and how kernels test it."""

    def bounds(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of a box holding the body (``d`` entries each)."""
        raise NotImplementedError

    def row(self) -> list[float] | None:
        """The analytic-shape table row, or None for a triangle surface."""
        return None


def _vector(v: Any, d: int | None, what: str) -> tuple[float, ...]:
    out = tuple(float(x) for x in v)
    if d is not None and len(out) != d:
        raise GeometryError(f"{what} has {len(out)} entries, expected {d}")
    if not all(math.isfinite(x) for x in out):
        raise GeometryError(f"{what} = {out}: must be finite")
    return out


@dataclass(frozen=True)
class Cylinder(Body):
    """A disc in 2-D; in 3-D a circular cylinder along ``axis`` (infinite along it: put it
    between walls). ``center`` has one entry per grid axis (the one along ``axis`` unused)."""

    center: tuple[float, ...]
    radius: float
    axis: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", _vector(self.center, None, "Cylinder center"))
        if not self.radius > 0:
            raise GeometryError(f"Cylinder radius {self.radius}: must be positive")
        if len(self.center) not in (2, 3) or self.axis not in (0, 1, 2):
            raise GeometryError(f"Cylinder center {self.center}, axis {self.axis}: 2 or 3 entries")

    def bounds(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        c = np.array(self.center[:d], dtype=np.float64)
        r = np.full(d, self.radius)
        if d == 3:
            r[self.axis] = np.inf
        return c - r, c + r

    def row(self) -> list[float]:
        c = list(self.center) + [0.0] * (3 - len(self.center))
        axis = self.axis if len(self.center) == 3 else 2
        return [_CYLINDER, *c, self.radius, float(axis), 0.0]


@dataclass(frozen=True)
class Sphere(Body):
    """A ball (a disc in 2-D)."""

    center: tuple[float, ...]
    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", _vector(self.center, None, "Sphere center"))
        if not self.radius > 0:
            raise GeometryError(f"Sphere radius {self.radius}: must be positive")

    def bounds(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        c = np.array(self.center[:d], dtype=np.float64)
        return c - self.radius, c + self.radius

    def row(self) -> list[float]:
        c = list(self.center) + [0.0] * (3 - len(self.center))
        return [_SPHERE, *c, self.radius, 0.0, 0.0]


@dataclass(frozen=True)
class Box(Body):
    """An axis-aligned box ``lo <= x <= hi``."""

    lo: tuple[float, ...]
    hi: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "lo", _vector(self.lo, None, "Box lo"))
        object.__setattr__(self, "hi", _vector(self.hi, len(self.lo), "Box hi"))
        if any(h <= lo for lo, h in zip(self.lo, self.hi, strict=True)):
            raise GeometryError(f"Box lo {self.lo} must be below hi {self.hi} on every axis")

    def bounds(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        return np.array(self.lo[:d]), np.array(self.hi[:d])

    def row(self) -> list[float]:
        # a 2-D box spans all of z (the 2-D kernels run at z = 0)
        lo = list(self.lo) + [-1e300] * (3 - len(self.lo))
        hi = list(self.hi) + [1e300] * (3 - len(self.hi))
        return [_BOX, *lo, *hi]


class Surface(Body):
    """A closed triangle surface (STL, read with trimesh), placed in lattice units.

    Parameters
    ----------
    path : str or Path
        An STL file (or any format trimesh reads).
    scale : float
        Lattice units per file unit.
    offset : sequence of float
        Added after scaling (lattice units).

    Raises
    ------
    GeometryError
        When the file cannot be read, holds no triangles or is not watertight (inside and
        outside would be undefined).
    """

    def __init__(self, path: str | Path, scale: float = 1.0, offset: Any = (0.0, 0.0, 0.0)):
        import trimesh

        self.path = Path(path)
        try:
            mesh = trimesh.load(self.path, force="mesh")
        except Exception as exc:  # trimesh raises many kinds for a bad file
            raise GeometryError(f"{self.path}: cannot read a surface ({exc})") from None
        if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
            raise GeometryError(f"{self.path}: no triangles found")
        if not mesh.is_watertight:
            raise GeometryError(
                f"{self.path}: the surface is not closed (watertight); inside and outside are "
                "undefined. Repair it (e.g. trimesh.repair.fill_holes) first"
            )
        self.scale = float(scale)
        self.offset = np.array(_vector(offset, 3, "Surface offset"))
        self.mesh = mesh
        self.triangles = np.ascontiguousarray(
            mesh.triangles * self.scale + self.offset, dtype=np.float64
        )  # (n, 3 vertices, 3)

    def bounds(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        pts = self.triangles.reshape(-1, 3)
        return pts.min(axis=0)[:d], pts.max(axis=0)[:d]

    def __repr__(self) -> str:
        return f"Surface({str(self.path)!r}, {len(self.triangles)} triangles)"


@dataclass
class BoundaryLinks:
    """The boundary links of one rank's block (local; ordered by cell, then direction).

    Attributes
    ----------
    cell : ndarray of int64
        Flat index of the fluid cell in the ghosted local grid.
    direction : ndarray of int64
        Lattice direction ``k`` pointing from the fluid cell into the body.
    q : ndarray of float64
        Wall distance along the link, in ``(0, 1]``.
    key : ndarray of int64
        ``global flat cell index * Q + k``: a decomposition-free order for reductions.
    """

    cell: np.ndarray
    direction: np.ndarray
    q: np.ndarray
    key: np.ndarray

    def __len__(self) -> int:
        return int(self.cell.size)


# -- kernel templates (compiled through hpc.jit.specialise) ---------------------------------


def _shape_inside(shapes, s, px, py, pz):
    kind = int(shapes[s, 0])
    if kind == 2:  # box
        return (
            shapes[s, 1] <= px <= shapes[s, 4]
            and shapes[s, 2] <= py <= shapes[s, 5]
            and shapes[s, 3] <= pz <= shapes[s, 6]
        )
    dx, dy, dz = px - shapes[s, 1], py - shapes[s, 2], pz - shapes[s, 3]
    if kind == 0:  # cylinder: drop the component along its axis
        axis = int(shapes[s, 5])
        if axis == 0:
            dx = 0.0
        elif axis == 1:
            dy = 0.0
        else:
            dz = 0.0
    return dx * dx + dy * dy + dz * dz <= shapes[s, 4] * shapes[s, 4]


def _shape_entry(shapes, s, px, py, pz, cx, cy, cz):
    """Smallest ray parameter t >= 0 where p + t c enters shape s (2.0: none in reach)."""
    kind = int(shapes[s, 0])
    if kind == 2:  # slab method
        t0, t1 = -1e300, 1e300
        for a in range(3):
            p = px if a == 0 else (py if a == 1 else pz)
            c = cx if a == 0 else (cy if a == 1 else cz)
            lo, hi = shapes[s, 1 + a], shapes[s, 4 + a]
            if c == 0.0:
                if p < lo or p > hi:
                    return 2.0
            else:
                ta, tb = (lo - p) / c, (hi - p) / c
                if ta > tb:
                    ta, tb = tb, ta
                t0 = max(t0, ta)
                t1 = min(t1, tb)
        if t0 > t1 or t1 < 0.0:
            return 2.0
        return max(t0, 0.0)
    dx, dy, dz = px - shapes[s, 1], py - shapes[s, 2], pz - shapes[s, 3]
    if kind == 0:
        axis = int(shapes[s, 5])
        if axis == 0:
            dx, cx = 0.0, 0.0
        elif axis == 1:
            dy, cy = 0.0, 0.0
        else:
            dz, cz = 0.0, 0.0
    a = cx * cx + cy * cy + cz * cz
    b = cx * dx + cy * dy + cz * dz
    r = shapes[s, 4]
    cc = dx * dx + dy * dy + dz * dz - r * r
    disc = b * b - a * cc
    if a == 0.0 or disc < 0.0:
        return 2.0
    t = (-b - math.sqrt(disc)) / a
    return max(t, 0.0)


def _mark_shapes(solid, shapes, o0, o1, o2):
    """solid[x, y, z] = 1 where the cell centre (global index + 1/2) lies in a shape."""
    n0, n1, n2 = solid.shape
    for x in prange(n0):
        px = x + o0 + 0.5
        for y in range(n1):
            py = y + o1 + 0.5
            for z in range(n2):
                pz = z + o2 + 0.5
                for s in range(shapes.shape[0]):
                    if _shape_inside(shapes, s, px, py, pz):
                        solid[x, y, z] = 1
                        break


def _count_links(solid, fluid, c, counts):
    """counts[x] = boundary links of the owned cells of plane x (fluid cell, solid neighbour)."""
    n0, n1, n2 = solid.shape
    h2 = 1 if n2 > 1 else 0
    for x in prange(1, n0 - 1):
        m = 0
        for y in range(1, n1 - 1):
            for z in range(h2, n2 - h2):
                if fluid[x, y, z] == 0:
                    continue
                for k in range(1, c.shape[0]):
                    if solid[x + c[k, 0], y + c[k, 1], z + c[k, 2]] != 0:
                        m += 1
        counts[x] = m


def _fill_links(solid, fluid, c, starts, cell, direction, pos):
    """The links of :func:`_count_links`, plane x from ``starts[x]``; ``pos`` gets the ghosted
    (x, y, z) of each fluid cell."""
    n0, n1, n2 = solid.shape
    h2 = 1 if n2 > 1 else 0
    for x in prange(1, n0 - 1):
        m = starts[x]
        for y in range(1, n1 - 1):
            for z in range(h2, n2 - h2):
                if fluid[x, y, z] == 0:
                    continue
                for k in range(1, c.shape[0]):
                    if solid[x + c[k, 0], y + c[k, 1], z + c[k, 2]] != 0:
                        cell[m] = (x * n1 + y) * n2 + z
                        direction[m] = k
                        pos[m, 0] = x
                        pos[m, 1] = y
                        pos[m, 2] = z
                        m += 1


def _links_q_shapes(pos, direction, c, shapes, o0, o1, o2, q):
    """q of every link against the analytic shapes: the nearest entry along the link."""
    for m in prange(pos.shape[0]):
        k = direction[m]
        px, py, pz = pos[m, 0] + o0 + 0.5, pos[m, 1] + o1 + 0.5, pos[m, 2] + o2 + 0.5
        best = 2.0
        for s in range(shapes.shape[0]):
            t = _shape_entry(shapes, s, px, py, pz, float(c[k, 0]), float(c[k, 1]), float(c[k, 2]))
            if t < best:
                best = t
        q[m] = best


def _bin_range(lo, hi, o, n):
    """Bins (cells of the ghosted block) a coordinate interval overlaps, clipped: (a, b)."""
    a = int(math.floor(lo - o))
    b = int(math.floor(hi - o))
    return max(a, 0), min(b, n - 1)


def _bin_triangles(lo, hi, o0, o1, o2, n0, n1, n2, starts, items, fill):
    """Triangles by the block cells their bounding boxes overlap (CSR: ``starts``, ``items``);
    first call with ``fill=False`` counts into ``starts[1:]``, second fills ``items``."""
    for t in range(lo.shape[0]):
        a0, b0 = _bin_range(lo[t, 0], hi[t, 0], o0, n0)
        a1, b1 = _bin_range(lo[t, 1], hi[t, 1], o1, n1)
        a2, b2 = _bin_range(lo[t, 2], hi[t, 2], o2, n2)
        for x in range(a0, b0 + 1):
            for y in range(a1, b1 + 1):
                for z in range(a2, b2 + 1):
                    b = (x * n1 + y) * n2 + z
                    if fill:
                        items[starts[b]] = t
                        starts[b] += 1
                    else:
                        starts[b + 1] += 1


def _ray_triangle(tri, t, px, py, pz, dx, dy, dz, tiny):
    """Where the ray ``p + s d`` meets triangle ``t`` (Moeller-Trumbore): ``s``, or -1.0
    where it misses (``tiny``: the smallest determinant taken for a hit, not parallel)."""
    e1x = tri[t, 1, 0] - tri[t, 0, 0]
    e1y = tri[t, 1, 1] - tri[t, 0, 1]
    e1z = tri[t, 1, 2] - tri[t, 0, 2]
    e2x = tri[t, 2, 0] - tri[t, 0, 0]
    e2y = tri[t, 2, 1] - tri[t, 0, 1]
    e2z = tri[t, 2, 2] - tri[t, 0, 2]
    hx, hy, hz = dy * e2z - dz * e2y, dz * e2x - dx * e2z, dx * e2y - dy * e2x
    det = e1x * hx + e1y * hy + e1z * hz
    if abs(det) < tiny:
        return -1.0
    inv = 1.0 / det
    sx, sy, sz = px - tri[t, 0, 0], py - tri[t, 0, 1], pz - tri[t, 0, 2]
    u = (sx * hx + sy * hy + sz * hz) * inv
    if u < 0.0 or u > 1.0:
        return -1.0
    qx, qy, qz = sy * e1z - sz * e1y, sz * e1x - sx * e1z, sx * e1y - sy * e1x
    v = (dx * qx + dy * qy + dz * qz) * inv
    if v < 0.0 or u + v > 1.0:
        return -1.0
    return (e2x * qx + e2y * qy + e2z * qz) * inv


def _links_q_triangles(pos, direction, c, tri, starts, items, o0, o1, o2, n1, n2, q):
    """q of every link against a triangle surface (Moeller-Trumbore), testing only the
    triangles binned in the block cells the link spans: the nearest hit along the link."""
    for m in prange(pos.shape[0]):
        k = direction[m]
        px, py, pz = pos[m, 0] + o0 + 0.5, pos[m, 1] + o1 + 0.5, pos[m, 2] + o2 + 0.5
        cx, cy, cz = float(c[k, 0]), float(c[k, 1]), float(c[k, 2])
        best = 2.0
        for bx in range(
            min(pos[m, 0], pos[m, 0] + c[k, 0]), max(pos[m, 0], pos[m, 0] + c[k, 0]) + 1
        ):
            for by in range(
                min(pos[m, 1], pos[m, 1] + c[k, 1]), max(pos[m, 1], pos[m, 1] + c[k, 1]) + 1
            ):
                for bz in range(
                    min(pos[m, 2], pos[m, 2] + c[k, 2]), max(pos[m, 2], pos[m, 2] + c[k, 2]) + 1
                ):
                    b = (bx * n1 + by) * n2 + bz
                    for j in range(starts[b], starts[b + 1]):
                        tt = _ray_triangle(tri, items[j], px, py, pz, cx, cy, cz, 1e-14)
                        if 0.0 <= tt < best:
                            best = tt
        q[m] = best


def _mark_surface(solid, tri, lo, hi, x0, o0, o1, o2):
    """solid = 1 where the cell centre is inside the closed surface: the parity of the
    crossings of one ray per row of cells, cast along +x from ``x0`` (left of every triangle)
    and tilted by tiny irrational slopes so that it misses the mesh's edges and vertices. Each
    row intersects only the triangles whose bounding box holds it, once, then sweeps its cells
    past the sorted crossings."""
    n0, n1, n2 = solid.shape
    ey, ez = 1.2345678e-7, 2.3456789e-7
    for yz in prange(n1 * n2):
        y, z = yz // n2, yz % n2
        py, pz = y + o1 + 0.5, z + o2 + 0.5
        count = 0
        for t in range(tri.shape[0]):
            if lo[t, 1] <= py + 1e-3 and hi[t, 1] >= py - 1e-3:
                if lo[t, 2] <= pz + 1e-3 and hi[t, 2] >= pz - 1e-3:
                    count += 1
        if count == 0:
            continue
        cross = np.empty(count)
        m = 0
        for t in range(tri.shape[0]):
            if lo[t, 1] > py + 1e-3 or hi[t, 1] < py - 1e-3:
                continue
            if lo[t, 2] > pz + 1e-3 or hi[t, 2] < pz - 1e-3:
                continue
            tt = _ray_triangle(tri, t, x0, py, pz, 1.0, ey, ez, 1e-300)
            if tt > 0.0:
                cross[m] = x0 + tt
                m += 1
        hits = np.sort(cross[:m])
        k = 0
        for x in range(n0):
            px = x + o0 + 0.5
            while k < m and hits[k] < px:
                k += 1
            if k % 2 == 1:
                solid[x, y, z] = 1


_TEMPLATES = {
    "marks": ([_mark_shapes], [_shape_inside]),
    "links": ([_count_links, _fill_links], []),
    "q_shapes": ([_links_q_shapes], [_shape_entry]),
    "q_triangles": ([_links_q_triangles], [_ray_triangle]),
    "bins": ([_bin_triangles], [_bin_range]),
    "surface": ([_mark_surface], [_ray_triangle]),
}
_compiled: dict[str, Any] = {}


def _kernels(name: str) -> Any:
    """The compiled kernels of one group (the CPU target: geometry is set up on the host)."""
    if name not in _compiled:
        from hpc.jit import specialise

        kernels, helpers = _TEMPLATES[name]
        target = "cpu-serial" if name == "bins" else "cpu"  # binning appends: one thread
        _compiled[name] = specialise(
            f"cfd_geometry_{name}", kernels, helpers, {}, target, {"error_model": "numpy"}
        )
    return _compiled[name]


def _as3(a: np.ndarray) -> np.ndarray:
    return a if a.ndim == 3 else a.reshape(*a.shape, 1)


def _origin(decomp: CartDecomposition) -> tuple[float, float, float]:
    """Global index of the ghosted block's first cell, padded to 3-D."""
    o = [float(off - decomp.halo) for off in decomp.offset] + [0.0] * (3 - decomp.ndim)
    return o[0], o[1], o[2]


def _shape_table(bodies: list[Body]) -> np.ndarray:
    rows = [b.row() for b in bodies if b.row() is not None]
    return np.array(rows, dtype=np.float64).reshape(-1, 7)


def _triangle_boxes(tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.ascontiguousarray(tri.min(axis=1)), np.ascontiguousarray(tri.max(axis=1))


def _triangle_bins(
    tri: np.ndarray, o: tuple[float, float, float], shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """The triangles overlapping each cell of the ghosted block (CSR arrays)."""
    lo, hi = _triangle_boxes(tri)
    n0, n1, n2 = (int(v) for v in shape)
    k = _kernels("bins")._bin_triangles
    starts = np.zeros(n0 * n1 * n2 + 1, np.int64)
    k(lo, hi, *o, n0, n1, n2, starts, np.zeros(0, np.int64), False)
    np.cumsum(starts, out=starts)
    items = np.empty(int(starts[-1]), np.int64)
    cursor = starts[:-1].copy()
    k(lo, hi, *o, n0, n1, n2, cursor, items, True)
    return starts, items


def solid_mask(decomp: CartDecomposition, bodies: list[Body]) -> np.ndarray:
    """Local. ``uint8`` mask on this rank's ghosted block: 1 where a cell centre lies inside a
    body (ghost cells included, so no exchange is needed), 0 elsewhere.

    Raises
    ------
    GeometryError
        A 3-D surface on a 2-D grid.
    """
    solid = np.zeros(decomp.ghost_shape, dtype=np.uint8)
    s3 = _as3(solid)
    o = _origin(decomp)
    shapes = _shape_table(bodies)
    if shapes.shape[0]:
        _kernels("marks")._mark_shapes(s3, shapes, *o)
    for body in bodies:
        if isinstance(body, Surface):
            if decomp.ndim != 3:
                raise GeometryError(f"{body}: a triangle surface needs a 3-D grid")
            lo, hi = _triangle_boxes(body.triangles)
            x0 = float(lo[:, 0].min()) - 1.0
            _kernels("surface")._mark_surface(s3, body.triangles, lo, hi, x0, *o)
    return solid


def boundary_links(
    decomp: CartDecomposition,
    lattice: Lattice,
    bodies: list[Body],
    solid: np.ndarray,
    fluid: np.ndarray,
) -> BoundaryLinks:
    """Local. The links from this rank's owned fluid cells into the bodies, with their wall
    distance ``q``.

    Parameters
    ----------
    decomp, lattice
        The grid and the velocity set.
    bodies : list of Body
        What ``solid`` was made from (the ``q`` come from their exact surfaces).
    solid : ndarray of uint8
        :func:`solid_mask` of the bodies (ghosted block).
    fluid : ndarray of uint8
        1 for the fluid cells (ghosted block).
    """
    s3, f3 = _as3(solid), _as3(np.ascontiguousarray(fluid, dtype=np.uint8))
    c = np.zeros((lattice.q, 3), dtype=np.int64)
    c[:, : lattice.d] = lattice.c
    k = _kernels("links")
    counts = np.zeros(s3.shape[0], dtype=np.int64)
    k._count_links(s3, f3, c, counts)
    starts = np.zeros_like(counts)
    np.cumsum(counts[:-1], out=starts[1:])
    total = int(counts.sum())
    cell = np.empty(total, np.int64)
    direction = np.empty(total, np.int64)
    pos = np.empty((total, 3), np.int64)
    k._fill_links(s3, f3, c, starts, cell, direction, pos)
    o = _origin(decomp)
    q = np.full(total, _NO_HIT)
    shapes = _shape_table(bodies)
    if shapes.shape[0] and total:
        _kernels("q_shapes")._links_q_shapes(pos, direction, c, shapes, *o, q)
    for body in bodies:
        if isinstance(body, Surface) and total:
            starts, items = _triangle_bins(body.triangles, o, s3.shape)
            qs = np.full(total, _NO_HIT)
            _kernels("q_triangles")._links_q_triangles(
                pos, direction, c, body.triangles, starts, items, *o, *s3.shape[1:], qs
            )
            np.minimum(q, qs, out=q)
    # A neighbour centre on the surface, or rounding, can leave no hit inside the link: the
    # wall is then at the solid cell's centre (q = 1). q = 0 would divide by zero.
    q = np.clip(np.where(q > 1.0, 1.0, q), 1e-9, 1.0)
    # global key: global flat cell index * Q + k (independent of the decomposition)
    gshape = list(decomp.global_shape) + [1] * (3 - decomp.ndim)
    g = [pos[:, a] + int(o[a]) for a in range(3)]
    key = ((g[0] * gshape[1] + g[1]) * gshape[2] + g[2]) * lattice.q + direction
    return BoundaryLinks(cell=cell, direction=direction, q=q, key=key)
