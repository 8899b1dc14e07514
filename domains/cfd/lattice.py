"""Lattice Boltzmann velocity sets: D2Q9 and D3Q19 (rest population first)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Lattice", "D2Q9", "D3Q19", "lattice_named", "CS2"]

CS2 = 1.0 / 3.0  # squared lattice speed of sound


@dataclass(frozen=True)
class Lattice:
    """A velocity set.

    Attributes
    ----------
    name : str
    d : int
        Spatial dimensions.
    c : ndarray of int, shape (q, d)
        Velocities.
    w : ndarray, shape (q,)
        Weights (sum 1).
    opposite : ndarray of int, shape (q,)
        Index of ``-c[i]``.
    """

    name: str
    c: np.ndarray = field(repr=False)
    w: np.ndarray = field(repr=False)

    @property
    def d(self) -> int:
        return int(self.c.shape[1])

    @property
    def q(self) -> int:
        return int(self.c.shape[0])

    @property
    def opposite(self) -> np.ndarray:
        index = {tuple(v): i for i, v in enumerate(self.c.tolist())}
        return np.array([index[tuple(-x for x in v)] for v in self.c.tolist()], dtype=np.int64)


def _d2q9() -> Lattice:
    c = [(0, 0), (1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, 1), (-1, -1), (1, -1)]
    w = [4 / 9] + [1 / 9] * 4 + [1 / 36] * 4
    return Lattice("D2Q9", np.array(c, dtype=np.int64), np.array(w))


def _d3q19() -> Lattice:
    c = [(0, 0, 0)]
    c += [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]
    for a, b in ((0, 1), (0, 2), (1, 2)):
        for sa in (1, -1):
            for sb in (1, -1):
                v = [0, 0, 0]
                v[a], v[b] = sa, sb
                c.append(tuple(v))
    w = [1 / 3] + [1 / 18] * 6 + [1 / 36] * 12
    return Lattice("D3Q19", np.array(c, dtype=np.int64), np.array(w))


D2Q9 = _d2q9()
D3Q19 = _d3q19()


def lattice_named(name: str) -> Lattice:
    """``"D2Q9"`` or ``"D3Q19"`` (case-insensitive)."""
    table = {"D2Q9": D2Q9, "D3Q19": D3Q19}
    try:
        return table[name.upper()]
    except KeyError:
        raise ValueError(f"lattice {name!r}: expected one of {', '.join(table)}") from None
