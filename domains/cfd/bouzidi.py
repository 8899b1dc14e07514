"""Curved walls by interpolated bounce-back (Bouzidi, Firdaouss & Lallemand 2001) and the force
on the bodies by momentum exchange.

For a boundary link from fluid cell ``x`` along ``c_k`` into a body, with the wall at the
fraction ``q`` of the link, the population that comes back, ``f_kb(x, t+1)`` (``kb`` the
opposite of ``k``), is interpolated from post-collision populations at ``t`` (linear scheme,
second order):

- ``q < 1/2``: ``2q f*_k(x) + (1 - 2q) f*_k(x - c_k)``
- ``q >= 1/2``: ``f*_k(x) / (2q) + (2q - 1) / (2q) f*_kb(x)``

The fused pull kernel already bounces ``f*_k(x)`` back for every link to a solid cell
(half-way bounce-back, its ``q = 1/2`` case), and ``f*_k(x)`` is read by nothing else (the cell
it streams to is solid). So before each step the kernel here overwrites ``f*_k(x)`` with the
interpolated value, and the unmodified stream-and-collide kernel does the rest: the boxes
without bodies keep their speed. When ``x - c_k`` is not fluid (a gap one cell wide), the link
falls back to half-way bounce-back.

Momentum exchange (Ladd): the force on the bodies during the step is
``sum over links of c_k (f*_k(x) + f_kb(x, t+1))``. The kernel writes each link's term to an
array; the global sum (:meth:`InterpolatedBounceBack.force`) adds them on the host in the order
of a global link key, so it is bitwise the same on any decomposition and on either device.

Both passes are one device function per link (:func:`_link`, :func:`_put`), run by a serial
loop on the CPU and by one thread per link on the GPU (``numba.cuda``, launched through
:meth:`hpc.backend.Backend.launch`, the link lists held on the device).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpc import collectives
from hpc.backend import Backend, to_host

from .geometry import BoundaryLinks
from .lattice import Lattice

__all__ = ["InterpolatedBounceBack"]

prange = range  # placeholders: the generated kernel modules import numba's
cuda: Any = None


def _link(ff, flat_flags, cells, cell, direction, opp, shift, q, c, value, terms, m):
    """Link ``m``: its interpolated population into ``value[m]`` and its momentum-exchange
    term ``c_k (f*_k(x) + value)`` into ``terms[m]``, read before any is overwritten."""
    k = direction[m]
    x = cell[m]
    a = ff[k * cells + x]
    qm = q[m]
    if qm < 0.5:
        up = x - shift[k]
        if flat_flags[up] == 0:
            v = 2.0 * qm * a + (1.0 - 2.0 * qm) * ff[k * cells + up]
        else:  # no fluid upstream: half-way bounce-back
            v = a
    else:
        v = a / (2.0 * qm) + (2.0 * qm - 1.0) / (2.0 * qm) * ff[opp[k] * cells + x]
    value[m] = v
    s = a + v
    for j in range(terms.shape[1]):
        terms[m, j] = c[k, j] * s


def _put(ff, cells, cell, direction, value, m):
    """Link ``m``: its interpolated value where the pull kernel's bounce-back reads it (in the
    populations' precision)."""
    ff[direction[m] * cells + cell[m]] = value[m]


def _interpolate(ff, flat_flags, cells, cell, direction, opp, shift, q, c, value, terms):
    """Pass 1 (CPU): every link."""
    for m in prange(cell.shape[0]):
        _link(ff, flat_flags, cells, cell, direction, opp, shift, q, c, value, terms, m)


def _store(ff, cells, cell, direction, value):
    """Pass 2 (CPU): every link, after pass 1 read them all."""
    for m in prange(cell.shape[0]):
        _put(ff, cells, cell, direction, value, m)


def _interpolate_threads(ff, flat_flags, cells, cell, direction, opp, shift, q, c, value, terms):
    """Pass 1 (GPU): one thread per link."""
    m = cuda.grid(1)
    if m < cell.shape[0]:
        _link(ff, flat_flags, cells, cell, direction, opp, shift, q, c, value, terms, m)


def _store_threads(ff, cells, cell, direction, value):
    """Pass 2 (GPU): one thread per link; a second launch, so pass 1 has read every link."""
    m = cuda.grid(1)
    if m < cell.shape[0]:
        _put(ff, cells, cell, direction, value, m)


_compiled: dict[str, Any] = {}


def _kernels(target: str) -> Any:
    """The two passes for ``"cpu"`` (one thread: a few hundred links per body take
    microseconds, less than waking a pool) or ``"gpu"``."""
    if target not in _compiled:
        from hpc.jit import specialise

        if target == "gpu":
            module = specialise(
                "cfd_bouzidi_cuda", [_interpolate_threads, _store_threads], [_link, _put], {},
                "cuda",
            )  # fmt: skip
            _compiled[target] = (module._interpolate_threads, module._store_threads)
        else:
            module = specialise(
                "cfd_bouzidi", [_interpolate, _store], [_link, _put], {}, "cpu-serial",
                {"error_model": "numpy"},
            )  # fmt: skip
            _compiled[target] = (module._interpolate, module._store)
    return _compiled[target]


class InterpolatedBounceBack:
    """Local set-up, collective :meth:`force`. Bouzidi's linear interpolated bounce-back on
    the boundary links of one rank's block.

    Parameters
    ----------
    lattice : Lattice
    links : BoundaryLinks
        This rank's links (:func:`hpc.domains.cfd.geometry.boundary_links`, host arrays).
    ghost_shape : tuple of int
        The ghosted block's shape (flat indices of ``links.cell`` refer to it).
    comm : MPI.Comm
        For the force's global sum.
    backend : Backend, optional
        The device of the populations (default: the CPU); the link lists and the link terms
        are held there.
    """

    def __init__(
        self,
        lattice: Lattice,
        links: BoundaryLinks,
        ghost_shape: tuple[int, ...],
        comm: Any,
        backend: Backend | None = None,
    ) -> None:
        self.lattice, self.links, self.comm = lattice, links, comm
        self.backend = backend if backend is not None else Backend("cpu", np)
        self.cells = int(np.prod(ghost_shape))
        strides = [int(np.prod(ghost_shape[a + 1 :])) for a in range(len(ghost_shape))]
        shift = np.array(
            [sum(int(ci) * s for ci, s in zip(row, strides, strict=True)) for row in lattice.c],
            dtype=np.int64,
        )
        be = self.backend
        n, d = len(links), lattice.d
        # the link lists and the constants the kernels read, once on the device
        self._args = tuple(
            be.asarray(np.ascontiguousarray(a))
            for a in (
                links.cell.astype(np.int64),
                links.direction.astype(np.int64),
                lattice.opposite.astype(np.int64),
                shift,
                links.q.astype(np.float64),
                lattice.c.astype(np.float64),
            )
        )
        self.value = be.zeros(n, np.float64)
        self.terms = be.zeros((n, d), np.float64)  # each link's momentum-exchange term
        self.steps = 0  # steps whose link terms are held (0: none yet)

    def apply(self, f: Any, flags: Any) -> None:
        """Local. Overwrite the bounced populations of ``f`` (post-collision, halo exchanged)
        with the interpolated ones; keep the momentum-exchange terms of this step."""
        self.steps += 1
        n = len(self.links)
        if not n:
            return
        interpolate, store = _kernels(self.backend.name)
        cell, direction, opp, shift, q, c = self._args
        ff, fl, be = f.reshape(-1), flags.reshape(-1), self.backend
        args = (ff, fl, self.cells, cell, direction, opp, shift, q, c, self.value, self.terms)
        be.launch(interpolate, [n], *args)
        be.launch(store, [n], ff, self.cells, cell, direction, self.value)

    def force(self) -> np.ndarray:
        """Collective. Force on all bodies during the last step (lattice units, one entry per
        axis), summed over the ranks' links in the order of their global keys: bitwise the same
        on any decomposition, and the same on the GPU as on the CPU up to the rounding of the
        link terms."""
        d = self.lattice.d
        terms = np.ascontiguousarray(to_host(self.terms)).reshape(-1, d)
        keys = collectives.allgather_rows(np.ascontiguousarray(self.links.key), self.comm)
        rows = collectives.allgather_rows(terms, self.comm)
        order = np.argsort(np.asarray(keys), kind="stable")
        ordered = np.asarray(rows)[order]
        # cumsum runs strictly left to right: the rounding depends on the order alone
        if not ordered.shape[0]:
            return np.zeros(d)
        return np.cumsum(ordered, axis=0)[-1].copy()
