"""Lattice Boltzmann velocity sets: D2Q9, D3Q19 and D3Q27 (rest population first)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Lattice",
    "D2Q9",
    "D3Q19",
    "D3Q27",
    "LATTICES",
    "lattice_named",
    "CS2",
    "MomentBasis",
    "moment_basis",
]

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


def _d3q27() -> Lattice:
    # D3Q19's velocities (same order) plus the eight corners: D3Q19 is D3Q27 less its corners
    c = [tuple(int(v) for v in ci) for ci in _d3q19().c.tolist()]
    c += [(x, y, z) for x in (1, -1) for y in (1, -1) for z in (1, -1)]
    w = [8 / 27] + [2 / 27] * 6 + [1 / 54] * 12 + [1 / 216] * 8
    return Lattice("D3Q27", np.array(c, dtype=np.int64), np.array(w))


D2Q9 = _d2q9()
D3Q19 = _d3q19()
D3Q27 = _d3q27()
LATTICES = {"D2Q9": D2Q9, "D3Q19": D3Q19, "D3Q27": D3Q27}


def lattice_named(name: str) -> Lattice:
    """``"D2Q9"``, ``"D3Q19"`` or ``"D3Q27"`` (case-insensitive)."""
    table = LATTICES
    try:
        return table[name.upper()]
    except KeyError:
        raise ValueError(f"lattice {name!r}: expected one of {', '.join(table)}") from None


# -- multiple-relaxation-time moments ------------------------------------------------------
# Polynomials of the velocity (c2 = |c|^2), orthogonalised in this order by Gram-Schmidt (plain
# inner product over the velocities), each with the group whose rate relaxes it. The order
# and the results are those of Lallemand & Luo (2000) for D2Q9 and d'Humieres et al. (2002)
# for D3Q19.
def _poly_d2q9(c: tuple[int, ...]) -> list[tuple[str, str, int]]:
    x, y = c
    c2 = x * x + y * y
    return [
        ("rho", "rho", 1),
        ("e", "bulk", c2),
        ("eps", "eps", c2 * c2),
        ("jx", "j", x),
        ("qx", "q", x * c2),
        ("jy", "j", y),
        ("qy", "q", y * c2),
        ("pxx", "nu", x * x - y * y),
        ("pxy", "nu", x * y),
    ]


def _poly_d3q19(c: tuple[int, ...]) -> list[tuple[str, str, int]]:
    x, y, z = c
    c2 = x * x + y * y + z * z
    return [
        ("rho", "rho", 1),
        ("e", "bulk", c2),
        ("eps", "eps", c2 * c2),
        ("jx", "j", x),
        ("qx", "q", x * c2),
        ("jy", "j", y),
        ("qy", "q", y * c2),
        ("jz", "j", z),
        ("qz", "q", z * c2),
        ("3pxx", "nu", 3 * x * x - c2),
        ("3pixx", "pi", (3 * x * x - c2) * c2),
        ("pww", "nu", y * y - z * z),
        ("piww", "pi", (y * y - z * z) * c2),
        ("pxy", "nu", x * y),
        ("pyz", "nu", y * z),
        ("pxz", "nu", x * z),
        ("mx", "m", x * (y * y - z * z)),
        ("my", "m", y * (z * z - x * x)),
        ("mz", "m", z * (x * x - y * y)),
    ]


@dataclass(frozen=True)
class MomentBasis:
    """Orthogonal raw moments ``m = M f`` of a lattice (MRT).

    Attributes
    ----------
    matrix : ndarray of int, shape (q, q)
        Rows orthogonal (``M M^T`` diagonal), each the smallest integer multiple of its
        Gram-Schmidt vector, so ``M^-1 = M^T diag(1 / |M_k|^2)``.
    labels : list of str
        Moment names (``rho``, ``e``, ``eps``, ``jx``, ``qx``, ..., ``pxx``, ``pxy``, ...).
    groups : list of str
        The relaxation group of each moment: ``rho`` and ``j`` (conserved), ``nu`` (shear),
        ``bulk`` (energy ``e``), ``eps`` (energy square), ``q`` (energy flux), and in D3Q19
        ``pi`` (fourth-order stress) and ``m`` (third-order ghost moments).
    """

    matrix: np.ndarray = field(repr=False)
    labels: tuple[str, ...]
    groups: tuple[str, ...]

    @property
    def norms(self) -> np.ndarray:
        """``|M_k|^2`` (integers)."""
        return (self.matrix * self.matrix).sum(axis=1)


def moment_basis(lattice: Lattice) -> MomentBasis:
    """Gram-Schmidt orthogonal moment basis of ``lattice`` (D2Q9 or D3Q19), exact in rationals.

    Raises
    ------
    ValueError
        For a lattice without a basis here (D3Q27: its 27 moments and their default rates
        are not tabulated, so MRT is refused there; BGK and TRT run on it).
    """
    from fractions import Fraction
    from math import lcm

    polys = {"D2Q9": _poly_d2q9, "D3Q19": _poly_d3q19}.get(lattice.name)
    if polys is None:
        raise ValueError(
            f"MRT is not available on {lattice.name}: no moment basis is defined for it "
            "(use collision='bgk' or 'trt', or MRT on D2Q9/D3Q19)"
        )
    table = [polys(tuple(int(v) for v in ci)) for ci in lattice.c.tolist()]
    labels = tuple(t[0] for t in table[0])
    groups = tuple(t[1] for t in table[0])
    rows: list[list[Fraction]] = []
    for k in range(len(labels)):
        v = [Fraction(t[k][2]) for t in table]
        for r in rows:  # subtract the projections on the rows so far
            scale = sum(a * b for a, b in zip(v, r, strict=True)) / sum(b * b for b in r)
            v = [a - scale * b for a, b in zip(v, r, strict=True)]
        if not any(v):
            raise ValueError(f"{lattice.name}: moment {labels[k]} is dependent")
        den = lcm(*(a.denominator for a in v))
        ints = [int(a * den) for a in v]
        g = np.gcd.reduce(np.abs(ints))
        rows.append([Fraction(a // int(g)) for a in ints])
    matrix = np.array([[int(a) for a in r] for r in rows], dtype=np.int64)
    return MomentBasis(matrix, labels, groups)
