"""Significance of local alignment scores: bit scores and E-values as BLAST+ computes them.

Parameters
----------
The gapped Karlin-Altschul parameters (lambda, K, H) and the length-correction parameters
(alpha, beta) of a substitution matrix and gap setting cannot be computed in closed form; NCBI
estimated them by simulation and publishes them in BLAST's source (``blast_stat.c``: the
``blosum62_values`` ... ``pam250_values`` arrays for proteins, ``blastn_values_R_P`` for DNA).
The tables below hold those published numbers, gap costs in BLAST's spelling (a gap of length
``L`` costs ``open + L * extend``). A setting that is not in the tables is refused
(:class:`StatisticsError` lists the supported ones): we do not extrapolate.

Two E-values
------------
- ``method="karlin"``: Karlin-Altschul, ``E = K m' n' exp(-lambda S)``, with BLAST's
  effective lengths: the length adjustment ``ell`` is the fixed point of
  ``ell = alpha / lambda * ln(K (m - ell)(n - N ell)) + beta`` (``m`` query length, ``n``
  database residues, ``N`` database sequences), found by BLAST's bracketing iteration
  (``BLAST_ComputeLengthAdjustment``), ``m' = m - ell``, ``n' = max(n - N ell, 1)``. This is
  what BLAST+ prints with the environment variable ``OLD_FSC`` set, and what ``blastn``
  always uses.
- ``method="spouge"``: Spouge's finite-size correction (Park, Sheetlin, Ma, Mott and Spouge,
  2012), per pair of query length ``m`` and target length ``n``, scaled by the database
  length over ``n``: the default E-value of ``blastp`` since BLAST+ 2.2.28. Proteins only
  (NCBI publishes the Gumbel parameters it needs for protein matrices only).

Bit scores are ``(lambda S - ln K) / ln 2`` in both. For the DNA settings that NCBI marks as
valid for even scores only (match 2 with mismatch -7, -5 or -3; 3 with -4), an odd score is
rounded down before its E-value is computed, as BLAST does. A DNA matrix whose match and
mismatch share a divisor uses the table of the reduced scores with lambda and alpha divided by
it and the gap costs multiplied by it (BLAST's rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from hpc.domains.align.scoring import Scoring

from hpc.errors import HPCError

__all__ = ["StatisticsError", "KarlinAltschul", "karlin_altschul", "EVALUE_METHODS"]

EVALUE_METHODS = ("karlin", "spouge")


class StatisticsError(HPCError, ValueError):
    """A scoring without published statistical parameters (the message lists the supported
    ones)."""


# NCBI blast_stat.c (BLAST+), public domain. Per row: BLAST gap open, gap extend, lambda, K,
# H, alpha, beta, then Spouge's C, alpha_v and sigma. The first row (open and extend "-") is
# the ungapped setting, whose alpha and alpha_v Spouge's method also needs.
_PROTEIN_TEXT = {
    "BLOSUM45": """
    - - 0.2291 0.0924 0.2514 0.9113 -5.7 0.641318 9.611060 9.611060
    13 3 0.207 0.049 0.14 1.5 -22 0.671128 35.855900 35.963900
    12 3 0.199 0.039 0.11 1.8 -34 0.691530 45.693600 45.851700
    11 3 0.190 0.031 0.095 2.0 -38 0.691181 62.874100 63.103700
    10 3 0.179 0.023 0.075 2.4 -51 0.710529 88.286800 88.639100
    16 2 0.210 0.051 0.14 1.5 -24 0.666680 36.279800 36.452400
    15 2 0.203 0.041 0.12 1.7 -31 0.673871 44.825700 45.060400
    14 2 0.195 0.032 0.10 1.9 -36 0.685753 60.736200 61.102300
    13 2 0.185 0.024 0.084 2.2 -45 0.698480 85.148100 85.689400
    12 2 0.171 0.016 0.061 2.8 -65 0.713429 127.758000 128.582000
    19 1 0.205 0.040 0.11 1.9 -43 0.672302 53.071400 53.828200
    18 1 0.198 0.032 0.10 2.0 -43 0.682580 72.342400 73.403900
    17 1 0.189 0.024 0.079 2.4 -57 0.695035 103.055000 104.721000
    16 1 0.176 0.016 0.063 2.8 -67 0.712966 170.100000 173.003000
    """,
    "BLOSUM50": """
    - - 0.2318 0.112 0.3362 0.6895 -4.0 0.609639 5.388310 5.388310
    13 3 0.212 0.063 0.19 1.1 -16 0.639287 18.113800 18.202800
    12 3 0.206 0.055 0.17 1.2 -18 0.644715 22.654600 22.777700
    11 3 0.197 0.042 0.14 1.4 -25 0.656327 29.861100 30.045700
    10 3 0.186 0.031 0.11 1.7 -34 0.671150 42.393800 42.674000
    9 3 0.172 0.022 0.082 2.1 -48 0.694326 66.069600 66.516400
    16 2 0.215 0.066 0.20 1.05 -15 0.633899 17.951800 18.092100
    15 2 0.210 0.058 0.17 1.2 -20 0.641985 21.940100 22.141800
    14 2 0.202 0.045 0.14 1.4 -27 0.650682 28.681200 28.961900
    13 2 0.193 0.035 0.12 1.6 -32 0.660984 42.059500 42.471600
    12 2 0.181 0.025 0.095 1.9 -41 0.678090 63.747600 64.397300
    19 1 0.212 0.057 0.18 1.2 -21 0.635714 26.311200 26.923300
    18 1 0.207 0.050 0.15 1.4 -28 0.643523 34.903700 35.734800
    17 1 0.198 0.037 0.12 1.6 -33 0.654504 48.895800 50.148600
    16 1 0.186 0.025 0.10 1.9 -42 0.667750 76.469100 78.443000
    15 1 0.171 0.015 0.063 2.7 -76 0.694575 140.053000 144.160000
    """,
    "BLOSUM62": """
    - - 0.3176 0.134 0.4012 0.7916 -3.2 0.623757 4.964660 4.964660
    11 2 0.297 0.082 0.27 1.1 -10 0.641766 12.673800 12.757600
    10 2 0.291 0.075 0.23 1.3 -15 0.649362 16.474000 16.602600
    9 2 0.279 0.058 0.19 1.5 -19 0.659245 22.751900 22.950000
    8 2 0.264 0.045 0.15 1.8 -26 0.672692 35.483800 35.821300
    7 2 0.239 0.027 0.10 2.5 -46 0.702056 61.238300 61.886000
    6 2 0.201 0.012 0.061 3.3 -58 0.740802 140.417000 141.882000
    13 1 0.292 0.071 0.23 1.2 -11 0.647715 19.506300 19.893100
    12 1 0.283 0.059 0.19 1.5 -19 0.656391 27.856200 28.469900
    11 1 0.267 0.041 0.14 1.9 -30 0.669720 42.602800 43.636200
    10 1 0.243 0.024 0.10 2.5 -44 0.693267 83.178700 85.065600
    9 1 0.206 0.010 0.052 4.0 -87 0.731887 210.333000 214.842000
    """,
    "BLOSUM80": """
    - - 0.3430 0.177 0.6568 0.5222 -1.6 0.564057 1.918130 1.918130
    25 2 0.342 0.17 0.66 0.52 -1.6 0.563956 1.731000 1.731300
    13 2 0.336 0.15 0.57 0.59 -3 0.570979 2.673470 2.692300
    9 2 0.319 0.11 0.42 0.76 -6 0.587837 5.576090 5.667860
    8 2 0.308 0.090 0.35 0.89 -9 0.597556 7.536950 7.686230
    7 2 0.293 0.070 0.27 1.1 -14 0.615254 11.586600 11.840400
    6 2 0.268 0.045 0.19 1.4 -19 0.644054 19.958100 20.441200
    11 1 0.314 0.095 0.35 0.90 -9 0.590702 8.808610 9.223320
    10 1 0.299 0.071 0.27 1.1 -14 0.609620 13.833800 14.533400
    9 1 0.279 0.048 0.20 1.4 -19 0.623800 24.252000 25.490400
    """,
    "BLOSUM90": """
    - - 0.3346 0.190 0.7547 0.4434 -1.4 0.544178 1.377760 1.377760
    9 2 0.310 0.12 0.46 0.67 -6 0.570267 4.232290 4.334170
    8 2 0.300 0.099 0.39 0.76 -7 0.581580 5.797020 5.961420
    7 2 0.283 0.072 0.30 0.93 -11 0.600024 9.040880 9.321600
    6 2 0.259 0.048 0.22 1.2 -16 0.629344 16.024400 16.531600
    11 1 0.302 0.093 0.39 0.78 -8 0.576919 7.143250 7.619190
    10 1 0.290 0.075 0.28 1.04 -15 0.591366 11.483900 12.269800
    9 1 0.265 0.044 0.20 1.3 -19 0.613013 21.408300 22.840900
    """,
    "PAM30": """
    - - 0.3400 0.283 1.754 0.1938 -0.3 0.436164 0.161818 0.161818
    7 2 0.305 0.15 0.87 0.35 -3 0.479087 1.014010 1.162730
    6 2 0.287 0.11 0.68 0.42 -4 0.499980 1.688060 1.951430
    5 2 0.264 0.079 0.45 0.59 -7 0.533009 3.377010 3.871950
    10 1 0.309 0.15 0.88 0.35 -3 0.474741 1.372050 1.788770
    9 1 0.294 0.11 0.61 0.48 -6 0.492716 2.463920 3.186150
    8 1 0.270 0.072 0.40 0.68 -10 0.521286 5.368130 6.763480
    """,
    "PAM70": """
    - - 0.3345 0.229 1.029 0.3250 -0.7 0.511296 0.633439 0.633439
    8 2 0.301 0.12 0.54 0.56 -5 0.549019 2.881650 3.025710
    7 2 0.286 0.093 0.43 0.67 -7 0.565659 4.534540 4.785780
    6 2 0.264 0.064 0.29 0.90 -12 0.596330 7.942630 8.402720
    11 1 0.305 0.12 0.52 0.59 -6 0.543514 3.681400 4.108020
    10 1 0.291 0.091 0.41 0.71 -9 0.560723 6.002970 6.716570
    9 1 0.270 0.060 0.28 0.97 -14 0.585186 11.360800 12.636700
    """,
    "PAM250": """
    - - 0.2252 0.0868 0.2223 0.98 -5.0 0.660059 11.754300 11.754300
    15 3 0.205 0.049 0.13 1.6 -23 0.687656 34.578400 34.928000
    14 3 0.200 0.043 0.12 1.7 -26 0.689768 43.353000 43.443800
    13 3 0.194 0.036 0.10 1.9 -31 0.697431 50.948500 51.081700
    12 3 0.186 0.029 0.085 2.2 -41 0.704565 69.606500 69.793600
    11 3 0.174 0.020 0.070 2.5 -48 0.722438 98.653500 98.927100
    17 2 0.204 0.047 0.12 1.7 -28 0.684799 41.583800 41.735800
    16 2 0.198 0.038 0.11 1.8 -29 0.691098 51.635200 51.843900
    15 2 0.191 0.031 0.087 2.2 -44 0.699051 67.256700 67.558500
    14 2 0.182 0.024 0.073 2.5 -53 0.714103 96.315100 96.756800
    13 2 0.171 0.017 0.059 2.9 -64 0.728738 135.653000 136.339000
    21 1 0.205 0.045 0.11 1.8 -34 0.683265 48.728200 49.218800
    20 1 0.199 0.037 0.10 1.9 -35 0.689380 60.832000 61.514100
    19 1 0.192 0.029 0.083 2.3 -52 0.696344 84.019700 84.985600
    18 1 0.183 0.021 0.070 2.6 -60 0.710525 113.829000 115.184000
    17 1 0.171 0.014 0.052 3.3 -86 0.727000 175.071000 177.196000
    """,
}

# NCBI blast_stat.c, blastn_values_R_P (match R, mismatch -P): BLAST gap open, gap extend,
# lambda, K, H, alpha, beta. The tables' (0, 0) rows (megablast's non-affine greedy gaps) are
# left out: the kernels here score affine gaps. Per pair also whether only even scores are
# valid (odd ones are rounded down before the E-value, as BLAST does).
_DNA_TEXT = {
    (1, 5): (False, "3 3 1.39 0.747 1.38 1.00 0"),
    (1, 4): (
        False,
        """
        1 2 1.36 0.67 1.2 1.1 0
        0 2 1.26 0.43 0.90 1.4 -1
        2 1 1.35 0.61 1.1 1.2 -1
        1 1 1.22 0.35 0.72 1.7 -3""",
    ),
    (2, 7): (
        True,
        """
        2 4 0.68 0.67 1.2 0.55 0
        0 4 0.63 0.43 0.90 0.7 -1
        4 2 0.675 0.62 1.1 0.6 -1
        2 2 0.61 0.35 0.72 1.7 -3""",
    ),
    (1, 3): (
        False,
        """
        2 2 1.37 0.70 1.2 1.1 0
        1 2 1.35 0.64 1.1 1.2 -1
        0 2 1.25 0.42 0.83 1.5 -2
        2 1 1.34 0.60 1.1 1.2 -1
        1 1 1.21 0.34 0.71 1.7 -2""",
    ),
    (2, 5): (
        True,
        """
        2 4 0.67 0.59 1.1 0.6 -1
        0 4 0.62 0.39 0.78 0.8 -2
        4 2 0.67 0.61 1.0 0.65 -2
        2 2 0.56 0.32 0.59 0.95 -4""",
    ),
    (1, 2): (
        False,
        """
        2 2 1.33 0.62 1.1 1.2 0
        1 2 1.30 0.52 0.93 1.4 -2
        0 2 1.19 0.34 0.66 1.8 -3
        3 1 1.32 0.57 1.0 1.3 -1
        2 1 1.29 0.49 0.92 1.4 -1
        1 1 1.14 0.26 0.52 2.2 -5""",
    ),
    (2, 3): (
        True,
        """
        4 4 0.63 0.42 0.84 0.75 -2
        2 4 0.615 0.37 0.72 0.85 -3
        0 4 0.55 0.21 0.46 1.2 -5
        3 3 0.615 0.37 0.68 0.9 -3
        6 2 0.63 0.42 0.84 0.75 -2
        5 2 0.625 0.41 0.78 0.8 -2
        4 2 0.61 0.35 0.68 0.9 -3
        2 2 0.515 0.14 0.33 1.55 -9""",
    ),
    (3, 4): (
        True,
        """
        6 3 0.389 0.25 0.56 0.7 -5
        5 3 0.375 0.21 0.47 0.8 -6
        4 3 0.351 0.14 0.35 1.0 -9
        6 2 0.362 0.16 0.45 0.8 -4
        5 2 0.330 0.092 0.28 1.2 -13
        4 2 0.281 0.046 0.16 1.8 -23""",
    ),
    (4, 5): (
        False,
        """
        6 5 0.28 0.21 0.47 0.6 -7
        5 5 0.27 0.17 0.39 0.7 -9
        4 5 0.25 0.10 0.31 0.8 -10
        3 5 0.23 0.065 0.25 0.9 -11""",
    ),
    (1, 1): (
        False,
        """
        3 2 1.09 0.31 0.55 2.0 -2
        2 2 1.07 0.27 0.49 2.2 -3
        1 2 1.02 0.21 0.36 2.8 -6
        0 2 0.80 0.064 0.17 4.8 -16
        4 1 1.08 0.28 0.54 2.0 -2
        3 1 1.06 0.25 0.46 2.3 -4
        2 1 0.99 0.17 0.30 3.3 -10""",
    ),
    (3, 2): (False, "5 5 0.208 0.030 0.072 2.9 -47"),
    (5, 4): (
        False,
        """
        10 6 0.163 0.068 0.16 1.0 -19
        8 6 0.146 0.039 0.11 1.3 -29""",
    ),
}


# The 20 x 20 amino-acid block of each NCBI matrix the parameters were estimated for (sha256 of
# int8 scores in the order below, first 16 hex digits): a matrix of the same name but other
# scores (the 1/3-bit BLOSUM80 of Henikoff's and Biopython's files, not NCBI's 1/2-bit one)
# gets no parameters. B, Z and X are left out: NCBI changed them, the statistics do not use them.
_AMINO = "ARNDCQEGHILKMFPSTWYV"
_FINGERPRINT = {
    "BLOSUM45": "afe1980c0323001d",
    "BLOSUM50": "9912e2267a314d57",
    "BLOSUM62": "9b2ded231b0a76ed",
    "BLOSUM80": "dd731afc43071672",
    "BLOSUM90": "585cb3a639334bab",
    "PAM30": "b15e7fd103f618d5",
    "PAM70": "bd2702cbf0c0258e",
    "PAM250": "350661c8ad10196b",
}


def _fingerprint(mat: Any) -> str | None:
    import hashlib

    if not set(_AMINO) <= set(mat.alphabet):
        return None
    idx = [mat.alphabet.index(c) for c in _AMINO]
    block = np.asarray(mat.scores)[np.ix_(idx, idx)].astype(np.int8)
    return hashlib.sha256(block.tobytes()).hexdigest()[:16]


def _rows(text: str) -> list[list[float]]:
    return [
        [math.nan if w == "-" else float(w) for w in line.split()]
        for line in text.strip().splitlines()
    ]


@dataclass(frozen=True)
class KarlinAltschul:
    """Statistical parameters of one scoring (matrix and gaps), from NCBI's tables.

    Attributes
    ----------
    name : str
        The matrix and BLAST gap costs, e.g. ``"BLOSUM62 11/1"``.
    lam, k, h : float
        Gapped lambda, K and relative entropy H (nats per aligned pair).
    alpha, beta : float
        Length-correction parameters: an alignment of score ``S`` is expected to be about
        ``alpha * S + beta`` letters long; BLAST's length adjustment uses them.
    gumbel : tuple of float or None
        Spouge's parameters ``(a, b, alpha_v, beta_v, sigma, tau)`` (proteins), else None.
    even_scores : bool
        Odd scores are rounded down before an E-value (some DNA settings).
    """

    name: str
    lam: float
    k: float
    h: float
    alpha: float
    beta: float
    gumbel: tuple[float, float, float, float, float, float] | None = None
    even_scores: bool = False

    def bit_scores(self, scores: Any) -> np.ndarray:
        """Local. Bit scores ``(lambda S - ln K) / ln 2`` of raw scores."""
        s = np.asarray(scores, dtype=np.float64)
        return (self.lam * s - math.log(self.k)) / math.log(2.0)

    def length_adjustment(self, query_length: int, db_length: int, db_count: int) -> int:
        """Local. BLAST's length adjustment ``ell`` for one query against a database of
        ``db_length`` residues in ``db_count`` sequences (``BLAST_ComputeLengthAdjustment``:
        a bracketing fixed-point iteration of at most 20 steps, ``ell`` rounded down unless
        its ceiling is still below the fixed point)."""
        m, n, big_n = float(query_length), float(db_length), float(db_count)
        logk, a_d_l = math.log(self.k), self.alpha / self.lam
        # the largest ell with K (m - ell)(n - N ell) > max(m, n), by the quadratic formula
        c = n * m - max(m, n) / self.k
        if c < 0:
            return 0
        mb = m * big_n + n
        ell_max = 2 * c / (mb + math.sqrt(mb * mb - 4 * big_n * c))
        ell_min, ell_next, converged = 0.0, 0.0, False
        for i in range(1, 21):
            ell = ell_next
            ell_bar = a_d_l * (logk + math.log((m - ell) * (n - big_n * ell))) + self.beta
            if ell_bar >= ell:
                ell_min = ell
                if ell_bar - ell_min <= 1.0:
                    converged = True
                    break
                if ell_min == ell_max:
                    break
            else:
                ell_max = ell
            if ell_min <= ell_bar <= ell_max:
                ell_next = ell_bar
            else:
                ell_next = ell_max if i == 1 else (ell_min + ell_max) / 2
        adjustment = int(ell_min)
        if converged:
            up = math.ceil(ell_min)
            if up <= ell_max:
                ss = (m - up) * (n - big_n * up)
                if a_d_l * (logk + math.log(ss)) + self.beta >= up:
                    adjustment = int(up)
        return adjustment

    def search_space(self, query_length: int, db_length: int, db_count: int) -> float:
        """Local. BLAST's effective search space ``(m - ell) * max(n - N ell, 1)``."""
        ell = self.length_adjustment(query_length, db_length, db_count)
        return float(max(db_length - db_count * ell, 1)) * float(query_length - ell)

    def evalues(
        self,
        scores: Any,
        query_lengths: Any,
        target_lengths: Any,
        db_length: int,
        db_count: int,
        method: str = "karlin",
    ) -> np.ndarray:
        """Local. E-values of local alignment scores in a search of a database.

        Parameters
        ----------
        scores, query_lengths, target_lengths : array_like
            Broadcast together: raw scores, the lengths of their queries and targets
            (``target_lengths`` is read by ``method="spouge"`` only).
        db_length, db_count : int
            The database's residues and sequences (BLAST's database length and size).
        method : {"karlin", "spouge"}
            See the module docstring.

        Raises
        ------
        StatisticsError
            For ``"spouge"`` on a scoring without Spouge's parameters (DNA).
        ValueError
            For an unknown method or an empty database.
        """
        if method not in EVALUE_METHODS:
            raise ValueError(f"E-value method {method!r}: expected one of {EVALUE_METHODS}")
        if db_length < 1 or db_count < 1:
            raise ValueError(
                f"a database of {db_length} residues in {db_count} sequences has no E-values"
            )
        s = np.asarray(scores, dtype=np.int64)
        if self.even_scores:
            s = s & ~np.int64(1)
        y = s.astype(np.float64)
        m = np.asarray(query_lengths, dtype=np.int64)
        if method == "karlin":
            # the search space depends on the query length only: once per distinct length
            lengths, inverse = np.unique(m, return_inverse=True)
            space = np.array([self.search_space(int(q), db_length, db_count) for q in lengths])
            return space[inverse.reshape(m.shape)] * self.k * np.exp(-self.lam * y)
        if self.gumbel is None:
            raise StatisticsError(
                f"{self.name}: Spouge's E-values need NCBI's Gumbel parameters, published for "
                "protein matrices only; use method='karlin'"
            )
        return self._spouge(y, m.astype(np.float64), np.asarray(target_lengths, np.float64),
                            float(db_length))  # fmt: skip

    def _spouge(self, y: np.ndarray, m: np.ndarray, n: np.ndarray, db: float) -> np.ndarray:
        from scipy.special import erfc

        a, b, alpha_v, beta_v, sigma, tau = self.gumbel  # type: ignore[misc]
        lam = self.lam
        inv_sqrt_2pi = 1.0 / math.sqrt(2.0 * math.pi)

        def side(length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # the expected overhang beyond the alignment's length (a normal approximation)
            mean = length - (a * y + b)
            var = np.maximum(2.0 * alpha_v / lam, alpha_v * y + beta_v)
            sd = np.sqrt(var)
            z = mean / sd
            p = erfc(-z / math.sqrt(2.0)) / 2.0
            return mean * p + sd * inv_sqrt_2pi * np.exp(-0.5 * z * z), p

        p1, pm = side(m)
        p2, pn = side(n)
        cov = np.maximum(2.0 * sigma / lam, sigma * y + tau)
        area = p1 * p2 + cov * pm * pn
        return area * self.k * np.exp(-lam * y) * (db / n)


def _supported_protein(name: str) -> str:
    pairs = [f"{int(r[0])}/{int(r[1])}" for r in _rows(_PROTEIN_TEXT[name])[1:]]
    return ", ".join(pairs)


def karlin_altschul(scoring: Scoring | str | None) -> KarlinAltschul:
    """Local. The published statistical parameters of ``scoring`` (local alignment).

    Parameters
    ----------
    scoring : Scoring or matrix name
        Protein: BLOSUM45/50/62/80/90 or PAM30/70/250 with a gap setting of NCBI's tables.
        DNA: ``DNA:MATCH:MISMATCH`` with a pair and gaps of ``blastn``'s tables.

    Raises
    ------
    StatisticsError
        For a matrix or gap setting without published parameters, naming the supported gap
        costs (in BLAST's spelling) where the matrix is known.

    Examples
    --------
    >>> ka = karlin_altschul(Scoring("BLOSUM62", 11, 1))
    >>> ka.lam, ka.k
    (0.267, 0.041)
    """
    scoring = Scoring.of(scoring)
    mat = scoring.matrix
    gap_open, gap_extend = scoring.gaps.blast
    if mat.dna is not None:
        return _dna(mat.name, mat.dna[0], mat.dna[1], gap_open, gap_extend)
    name = mat.name.upper()
    if name not in _PROTEIN_TEXT:
        raise StatisticsError(
            f"matrix {mat.name!r} has no published statistical parameters; E-values are "
            f"available for {', '.join(_PROTEIN_TEXT)} and blastn's DNA scores"
        )
    if _fingerprint(mat) != _FINGERPRINT[name]:
        raise StatisticsError(
            f"matrix {mat.name!r}: its scores are not those of NCBI's {name}, for which the "
            "statistical parameters were published (this library's BLOSUM80 is the 1/3-bit "
            "matrix of Henikoff's and Biopython's files; NCBI's is on a 1/2-bit scale)"
        )
    rows = _rows(_PROTEIN_TEXT[name])
    ungapped = rows[0]
    for row in rows[1:]:
        if (int(row[0]), int(row[1])) == (gap_open, gap_extend):
            lam, k, h, alpha, beta, _c, alpha_v, sigma = row[2:]
            g = gap_open + gap_extend
            # Spouge's b, beta and tau from the gapped and ungapped rows (NCBI's rule)
            b = 2.0 * g * (ungapped[5] - alpha)
            beta_v = 2.0 * g * (ungapped[8] - alpha_v)
            tau = 2.0 * g * (ungapped[8] - sigma)
            return KarlinAltschul(
                f"{name} {gap_open}/{gap_extend}", lam, k, h, alpha, beta,
                (alpha, b, alpha_v, beta_v, sigma, tau),
            )  # fmt: skip
    raise StatisticsError(
        f"{name} with BLAST gap costs {gap_open}/{gap_extend} (open + length * extend) has no "
        f"published statistical parameters; supported: {_supported_protein(name)}"
    )


def _dna(label: str, match: int, mismatch: int, gap_open: int, gap_extend: int) -> KarlinAltschul:
    if mismatch >= 0:
        raise StatisticsError(f"{label}: E-values need a negative mismatch score, got {mismatch}")
    divisor = math.gcd(match, -mismatch)
    key = (match // divisor, -mismatch // divisor)
    if key not in _DNA_TEXT:
        known = ", ".join(f"{r}/-{p}" for r, p in _DNA_TEXT)
        raise StatisticsError(
            f"{label}: match/mismatch {match}/{mismatch} has no published statistical "
            f"parameters; supported (up to a common factor): {known}"
        )
    even, text = _DNA_TEXT[key]
    rows = _rows(text)
    for row in rows:
        # a common factor scales the gap costs up and lambda and alpha down (BLAST's rule)
        if (int(row[0]) * divisor, int(row[1]) * divisor) == (gap_open, gap_extend):
            lam, k, h, alpha, beta = row[2:]
            return KarlinAltschul(
                f"DNA {match}/{mismatch} {gap_open}/{gap_extend}",
                lam / divisor, k, h, alpha / divisor, beta, None, even,
            )  # fmt: skip
    pairs = ", ".join(f"{int(r[0]) * divisor}/{int(r[1]) * divisor}" for r in rows)
    raise StatisticsError(
        f"{label} with BLAST gap costs {gap_open}/{gap_extend} (open + length * extend) has no "
        f"published statistical parameters; supported: {pairs}"
    )
