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
``sum over links of c_k (f*_k(x) + f_kb(x, t+1))``. Each rank keeps its links' terms; the global
sum (:meth:`InterpolatedBounceBack.force`) adds them in the order of a global link key, so it is
bitwise the same on any decomposition.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpc import collectives

from .geometry import BoundaryLinks
from .lattice import Lattice

__all__ = ["InterpolatedBounceBack"]

prange = range  # placeholder: the generated kernel module imports numba's


def _interpolate(ff, flat_flags, cells, cell, direction, opp, shift, q, outgoing, value):
    """Pass 1: the interpolated population of every link (into ``value``), and the outgoing
    one ``f*_k(x)`` (into ``outgoing``), before any is overwritten."""
    for m in prange(cell.shape[0]):
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
        outgoing[m] = a
        value[m] = v


def _store(ff, cells, cell, direction, value):
    """Pass 2: put the interpolated values where the pull kernel's bounce-back reads them."""
    for m in prange(cell.shape[0]):
        ff[direction[m] * cells + cell[m]] = value[m]


_compiled: dict[str, Any] = {}


def _kernels() -> Any:
    # one thread: a few hundred links per body take microseconds, less than waking a pool
    if "k" not in _compiled:
        from hpc.jit import specialise

        _compiled["k"] = specialise(
            "cfd_bouzidi", [_interpolate, _store], [], {}, "cpu-serial", {"error_model": "numpy"}
        )
    return _compiled["k"]


class InterpolatedBounceBack:
    """Local set-up, collective :meth:`force`. Bouzidi's linear interpolated bounce-back on
    the boundary links of one rank's block.

    Parameters
    ----------
    lattice : Lattice
    links : BoundaryLinks
        This rank's links (:func:`hpc.domains.cfd.geometry.boundary_links`).
    ghost_shape : tuple of int
        The ghosted block's shape (flat indices of ``links.cell`` refer to it).
    comm : MPI.Comm
        For the force's global sum.
    """

    def __init__(
        self, lattice: Lattice, links: BoundaryLinks, ghost_shape: tuple[int, ...], comm: Any
    ) -> None:
        self.lattice, self.links, self.comm = lattice, links, comm
        self.cells = int(np.prod(ghost_shape))
        strides = [int(np.prod(ghost_shape[a + 1 :])) for a in range(len(ghost_shape))]
        self.shift = np.array(
            [sum(int(ci) * s for ci, s in zip(row, strides, strict=True)) for row in lattice.c],
            dtype=np.int64,
        )
        self.opp = lattice.opposite.astype(np.int64)
        n = len(links)
        self.outgoing = np.zeros(n)
        self.value = np.zeros(n)
        self.steps = 0  # steps whose link terms are held (0: none yet)

    def apply(self, f: Any, flags: Any) -> None:
        """Local. Overwrite the bounced populations of ``f`` (post-collision, halo exchanged)
        with the interpolated ones; keep the momentum-exchange terms of this step."""
        self.steps += 1
        if not len(self.links):
            return
        k = _kernels()
        ff, fl, lk = f.reshape(-1), flags.reshape(-1), self.links
        k._interpolate(
            ff,
            fl,
            self.cells,
            lk.cell,
            lk.direction,
            self.opp,
            self.shift,
            lk.q,
            self.outgoing,
            self.value,
        )
        k._store(ff, self.cells, lk.cell, lk.direction, self.value.astype(f.dtype))

    def force(self) -> np.ndarray:
        """Collective. Force on all bodies during the last step (lattice units, one entry per
        axis), summed over the ranks' links in the order of their global keys: bitwise the same
        on any decomposition."""
        d = self.lattice.d
        c = self.lattice.c[self.links.direction].astype(np.float64)
        terms = c * (self.outgoing + self.value)[:, None]
        keys = collectives.allgather_rows(np.ascontiguousarray(self.links.key), self.comm)
        rows = collectives.allgather_rows(np.ascontiguousarray(terms.reshape(-1, d)), self.comm)
        order = np.argsort(np.asarray(keys), kind="stable")
        ordered = np.asarray(rows)[order]
        # cumsum runs strictly left to right: the rounding depends on the order alone
        if not ordered.shape[0]:
            return np.zeros(d)
        return np.cumsum(ordered, axis=0)[-1].copy()
