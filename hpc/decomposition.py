"""Cartesian block decomposition of a global index space over MPI ranks.

Like PETSc's DMDA, but small: balanced blocks (remainders spread over the low ranks), neighbours
including edges and corners, global/local index maps, ghost-cell allocation on the backend's
device, and gather/scatter of small arrays. A decomposition can be planned for any number of
virtual ranks without MPI (:meth:`CartDecomposition.plan`), which is how property tests check it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .backend import Backend, get_backend, to_host

__all__ = ["chunk", "plan_dims", "CartDecomposition"]

Direction = tuple[int, ...]


def chunk(n: int, parts: int, index: int) -> tuple[int, int]:
    """Return ``(start, stop)`` of block ``index`` when ``n`` cells are split into ``parts``.

    Blocks differ by at most one cell; the first ``n % parts`` blocks get the extra cell.

    Examples
    --------
    >>> [chunk(10, 4, i) for i in range(4)]
    [(0, 3), (3, 6), (6, 8), (8, 10)]
    """
    if parts < 1 or not 0 <= index < parts:
        raise ValueError(f"chunk: index {index} out of range for {parts} parts")
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def _factorizations(n: int, k: int) -> Iterator[tuple[int, ...]]:
    """All ordered k-tuples of positive integers whose product is n."""
    if k == 1:
        yield (n,)
        return
    for d in range(1, n + 1):
        if n % d == 0:
            for rest in _factorizations(n // d, k - 1):
                yield (d, *rest)


def plan_dims(
    nranks: int, global_shape: Sequence[int], dims: Sequence[int] | None = None
) -> tuple[int, ...]:
    """Choose the process grid for ``nranks`` ranks over ``global_shape``.

    Parameters
    ----------
    nranks : int
        Number of ranks.
    global_shape : sequence of int
        Cells per dimension.
    dims : sequence of int, optional
        A grid to honour; entries of 0 are free (as in ``MPI_Dims_create``).

    Returns
    -------
    tuple of int
        The grid: its product is ``nranks``. Grids that give every rank at least one cell per
        dimension are preferred; among those, the one with the smallest largest-block surface
        (the halo traffic), then the one with more ranks along the leading dimensions.
    """
    ndim = len(global_shape)
    fixed = tuple(dims) if dims is not None else (0,) * ndim
    if len(fixed) != ndim:
        raise ValueError(f"dims {tuple(fixed)} has {len(fixed)} entries for a {ndim}-D domain")
    if any(d < 0 for d in fixed):
        raise ValueError(f"dims {tuple(fixed)}: entries must be >= 0")
    best: tuple[Any, ...] | None = None
    for cand in _factorizations(nranks, ndim):
        if any(f and f != c for f, c in zip(fixed, cand, strict=True)):
            continue
        blocks = [math.ceil(n / d) for n, d in zip(global_shape, cand, strict=True)]
        starved = sum(d > n for n, d in zip(global_shape, cand, strict=True))
        surface = sum(math.prod(blocks[:i] + blocks[i + 1 :]) for i in range(ndim) if cand[i] > 1)
        key = (starved, surface, tuple(-c for c in cand))
        if best is None or key < best[0]:
            best = (key, cand)
    if best is None:
        raise ValueError(f"dims {tuple(fixed)} cannot be completed to a grid of {nranks} ranks")
    return best[1]


class CartDecomposition:
    """Collective. A global array split into one block per rank on a Cartesian process grid.

    Parameters
    ----------
    global_shape : sequence of int
        Cells per dimension of the global domain (1-D, 2-D or 3-D).
    periodic : bool or sequence of bool
        Periodicity per dimension (one bool applies to all).
    halo : int
        Ghost-cell width on every side (>= 0).
    comm : MPI.Comm, optional
        The communicator; default :func:`hpc.comm.world`.
    dims : sequence of int, optional
        Process grid (0 = free); default chosen by :func:`plan_dims`.
    backend : str or Backend, optional
        Device of the arrays from :meth:`allocate` (default: :func:`hpc.backend.get_backend`).

    Attributes
    ----------
    global_shape, dims, periodic, halo, rank, size, coords
        The layout and this rank's place in it.
    local_slices : tuple of slice
        The owned block as slices of the global index space.
    local_shape : tuple of int
        Owned cells per dimension (ghosts excluded).
    offset : tuple of int
        Global index of the first owned cell.

    Examples
    --------
    >>> d = CartDecomposition((8, 6), periodic=True, halo=1)
    >>> a = d.allocate("float64")
    >>> a.shape == tuple(n + 2 for n in d.local_shape)
    True
    """

    def __init__(
        self,
        global_shape: Sequence[int],
        periodic: bool | Sequence[bool] = False,
        halo: int = 1,
        comm: Any = None,
        dims: Sequence[int] | None = None,
        backend: str | Backend | None = None,
        *,
        _virtual: tuple[int, int] | None = None,
    ) -> None:
        shape = tuple(int(n) for n in global_shape)
        if not 1 <= len(shape) <= 3:
            raise ValueError(f"global_shape {shape}: 1-D, 2-D or 3-D domains are supported")
        if any(n < 1 for n in shape):
            raise ValueError(f"global_shape {shape}: every dimension needs at least one cell")
        if isinstance(periodic, bool | np.bool_):
            periods = (bool(periodic),) * len(shape)
        else:
            periods = tuple(bool(p) for p in periodic)
        if len(periods) != len(shape):
            raise ValueError(f"periodic {periods} has {len(periods)} entries for {len(shape)}-D")
        if int(halo) < 0:
            raise ValueError(f"halo={halo}: must be >= 0")
        self.global_shape = shape
        self.ndim = len(shape)
        self.periodic = periods
        self.halo = int(halo)
        self._backend_arg = backend
        if _virtual is not None:
            self.rank, self.size = _virtual
            self.comm = None
            self.cart_comm = None
        else:
            from .comm import resolve_comm

            self.comm = resolve_comm(comm)
            self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.dims = plan_dims(self.size, shape, dims)
        if self.comm is not None:
            # reorder=False keeps cart rank == comm rank, so the row-major maps below hold.
            self.cart_comm = self.comm.Create_cart(self.dims, self.periodic, reorder=False)
        self.coords = self.coords_of(self.rank)
        bounds = [chunk(n, p, c) for n, p, c in zip(shape, self.dims, self.coords, strict=True)]
        self.local_slices = tuple(slice(a, b) for a, b in bounds)
        self.offset = tuple(a for a, _ in bounds)
        self.local_shape = tuple(b - a for a, b in bounds)

    # -- planning without MPI -------------------------------------------------------------
    @classmethod
    def plan(
        cls,
        global_shape: Sequence[int],
        nranks: int,
        periodic: bool | Sequence[bool] = False,
        halo: int = 1,
        dims: Sequence[int] | None = None,
    ) -> list[CartDecomposition]:
        """Local. The decomposition as seen by each of ``nranks`` virtual ranks (no MPI)."""
        if nranks < 1:
            raise ValueError(f"nranks={nranks}: must be >= 1")
        return [
            cls(global_shape, periodic, halo, dims=dims, _virtual=(r, nranks))
            for r in range(nranks)
        ]

    # -- rank <-> grid coordinates (row-major, as MPI_Cart_create) ----------------------
    def coords_of(self, rank: int) -> tuple[int, ...]:
        """Grid coordinates of ``rank``."""
        coords = []
        for d in reversed(self.dims):
            rank, c = divmod(rank, d)
            coords.append(c)
        return tuple(reversed(coords))

    def rank_of(self, coords: Sequence[int]) -> int | None:
        """Rank at grid ``coords`` (wrapped on periodic axes), or None outside the grid."""
        rank = 0
        for c, d, p in zip(coords, self.dims, self.periodic, strict=True):
            if p:
                c %= d
            elif not 0 <= c < d:
                return None
            rank = rank * d + c
        return rank

    def block_of(self, rank: int) -> tuple[slice, ...]:
        """Local. The global slices owned by ``rank``."""
        return tuple(
            slice(*chunk(n, p, c))
            for n, p, c in zip(self.global_shape, self.dims, self.coords_of(rank), strict=True)
        )

    def neighbour(self, direction: Direction) -> int | None:
        """Rank of the neighbour at ``direction`` (each entry -1, 0 or +1), or None."""
        return self.rank_of([c + s for c, s in zip(self.coords, direction, strict=True)])

    @property
    def directions(self) -> list[Direction]:
        """All 3**ndim - 1 neighbour directions: faces, edges and corners."""
        return [d for d in itertools.product((-1, 0, 1), repeat=self.ndim) if any(d)]

    @property
    def neighbours(self) -> dict[Direction, int | None]:
        """Neighbour rank by direction (faces, edges, corners); None where there is none."""
        return {d: self.neighbour(d) for d in self.directions}

    # -- index maps ---------------------------------------------------------------------
    @property
    def ghost_shape(self) -> tuple[int, ...]:
        """Shape of a local array including ghost cells."""
        return tuple(n + 2 * self.halo for n in self.local_shape)

    def global_to_local(self, index: Sequence[int]) -> tuple[int, ...]:
        """Local array index (ghosts counted) of global cell ``index`` (ownership not checked)."""
        return tuple(i - o + self.halo for i, o in zip(index, self.offset, strict=True))

    def local_to_global(self, index: Sequence[int]) -> tuple[int, ...]:
        """Global cell index of local array ``index`` (ghosts counted; not wrapped)."""
        return tuple(i + o - self.halo for i, o in zip(index, self.offset, strict=True))

    def owns(self, index: Sequence[int]) -> bool:
        """True when this rank owns global cell ``index``."""
        return all(s.start <= i < s.stop for i, s in zip(index, self.local_slices, strict=True))

    # -- arrays -------------------------------------------------------------------------
    @property
    def backend(self) -> Backend:
        """The backend of the arrays this decomposition allocates."""
        return get_backend(self._backend_arg)

    def allocate(self, dtype: Any = np.float64, fill: float | None = 0) -> Any:
        """Local. A C-contiguous local array with ghost cells, on the backend's device.

        ``fill=None`` leaves it uninitialised.
        """
        be = self.backend
        if fill is None:
            return be.empty(self.ghost_shape, dtype)
        a = be.empty(self.ghost_shape, dtype)
        a.fill(fill)
        return a

    @property
    def interior_slices(self) -> tuple[slice, ...]:
        """Slices of the owned cells inside a local array with ghosts."""
        h = self.halo
        return tuple(slice(h, h + n) for n in self.local_shape)

    def interior(self, a: Any) -> Any:
        """Local. View of the owned cells of local array ``a``."""
        self._check_local(a)
        return a[self.interior_slices]

    def _check_local(self, a: Any) -> None:
        if tuple(a.shape) != self.ghost_shape:
            raise ValueError(
                f"local array of shape {tuple(a.shape)} does not match this rank's block "
                f"{self.ghost_shape} (owned {self.local_shape} + halo {self.halo})"
            )

    def _require_comm(self) -> Any:
        if self.comm is None:
            raise RuntimeError("a virtual decomposition (from plan()) has no communicator")
        return self.comm

    def gather(self, a: Any, root: int = 0) -> np.ndarray | None:
        """Collective. The global array assembled on ``root`` (None elsewhere), for small arrays.

        Only owned cells travel (buffer-based ``Gatherv``, no pickling); the result is a host
        NumPy array.
        """
        comm = self._require_comm()
        mine = np.ascontiguousarray(to_host(self.interior(a)))
        counts = [math.prod(s.stop - s.start for s in self.block_of(r)) for r in range(self.size)]
        if self.rank != root:
            comm.Gatherv(mine.ravel(), None, root=root)
            return None
        flat = np.empty(sum(counts), dtype=mine.dtype)
        comm.Gatherv(mine.ravel(), (flat, counts), root=root)
        out = np.empty(self.global_shape, dtype=mine.dtype)
        start = 0
        for r, n in enumerate(counts):
            block = self.block_of(r)
            out[block] = flat[start : start + n].reshape([s.stop - s.start for s in block])
            start += n
        return out

    def scatter(self, global_array: np.ndarray | None, root: int = 0, dtype: Any = None) -> Any:
        """Collective. A local array (ghosts allocated, zero) whose owned cells come from
        ``global_array`` on ``root`` (ignored elsewhere), for small arrays."""
        comm = self._require_comm()
        if self.rank == root:
            g = np.asarray(global_array)
            if g.shape != self.global_shape:
                raise ValueError(f"scatter: global array {g.shape} != {self.global_shape}")
            dt = np.dtype(dtype or g.dtype)
            send = np.concatenate(
                [g[self.block_of(r)].astype(dt, copy=False).ravel() for r in range(self.size)]
            )
            counts = [
                math.prod(s.stop - s.start for s in self.block_of(r)) for r in range(self.size)
            ]
            dt_str = dt.str
        else:
            send, counts, dt_str = None, None, None
        dt = np.dtype(comm.bcast(dt_str, root=root))
        mine = np.empty(self.local_shape, dtype=dt)
        comm.Scatterv(None if send is None else (send, counts), mine.ravel(), root=root)
        local = self.allocate(dt)
        local[self.interior_slices] = self.backend.asarray(mine)
        return local

    def __repr__(self) -> str:
        return (
            f"CartDecomposition(global_shape={self.global_shape}, dims={self.dims}, "
            f"periodic={self.periodic}, halo={self.halo}, rank={self.rank}/{self.size}, "
            f"local_slices={self.local_slices})"
        )
