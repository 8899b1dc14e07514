"""Scoring: substitution matrices, the affine gap convention, and encoding letters to codes.

The gap convention, in one place
--------------------------------
Two spellings of the same affine gap cost are in use:

- ``convention="first"`` (parasail, SSW, Biopython): ``open`` is the cost of the *first* gap
  position, ``extend`` of each further one: a gap of length ``L`` costs
  ``open + (L - 1) * extend``.
- ``convention="blast"`` (BLAST, BWA-MEM, minimap2/KSW2, WFA): a gap of length ``L`` costs
  ``open + L * extend``.

BLAST's ``11/1`` is therefore ``first``'s ``12/1``. :class:`Gaps` stores the cost of a gap of
length one (``first``) and ``extend``; every kernel uses ``first + (L - 1) * extend``. Any
``extend`` is allowed, also ``extend > first``: a run of gaps in one sequence is always
scored as one gap (see :mod:`hpc.domains.align.kernels`), never as several re-opened ones.

Letters
-------
Sequences are upper-cased. Protein matrices have the NCBI alphabet ``ARNDCQEGHILKMFPSTWYVBZX*``.
The DNA matrix has ``ACGTN``; ``U`` reads as ``T`` and every other IUPAC ambiguity code
(``RYSWKMBDHV``) reads as ``N``, which scores ``ambiguous`` against any letter (N included).
Any other letter raises :class:`AlphabetError` naming it and its position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from hpc.errors import HPCError

from ._matrices import TABLES

__all__ = [
    "AlphabetError",
    "Gaps",
    "SubstitutionMatrix",
    "Scoring",
    "custom_matrix",
    "dna_matrix",
    "get_matrix",
    "MATRICES",
]

MATRICES = (*TABLES, "DNA")


class AlphabetError(HPCError, ValueError):
    """A letter that the substitution matrix does not score (the message names it)."""


@dataclass(frozen=True)
class Gaps:
    """Affine gap costs, stored as the cost of a length-1 gap and of each further position.

    Parameters
    ----------
    open, extend : int
        Non-negative costs, in the spelling of ``convention``.
    convention : {"blast", "first"}
        ``"blast"``: a gap of length L costs ``open + L * extend`` (BLAST, BWA-MEM, minimap2,
        WFA). ``"first"`` (alias ``"parasail"``): ``open + (L - 1) * extend`` (parasail, SSW,
        Biopython).

    Examples
    --------
    >>> Gaps(11, 1, "blast") == Gaps(12, 1, "first")
    True
    """

    open: int
    extend: int
    convention: str = "blast"
    first: int = field(init=False)

    def __post_init__(self) -> None:
        conv = self.convention.lower()
        if conv == "parasail":
            conv = "first"
        if conv not in ("blast", "first"):
            raise ValueError(f"gap convention {self.convention!r}: expected 'blast' or 'first'")
        o, e = int(self.open), int(self.extend)
        if o != self.open or e != self.extend:
            raise ValueError(
                f"gap costs must be integers, got open={self.open}, extend={self.extend}"
            )
        if o < 0 or e < 0:
            raise ValueError(f"gap costs are non-negative costs, got open={o}, extend={e}")
        object.__setattr__(self, "first", o + e if conv == "blast" else o)
        object.__setattr__(self, "convention", conv)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Gaps) and (self.first, self.extend) == (other.first, other.extend)

    def __hash__(self) -> int:
        return hash((self.first, self.extend))

    def cost(self, length: int) -> int:
        """The cost of a gap of ``length`` positions (0 for none)."""
        return 0 if length <= 0 else self.first + (length - 1) * self.extend

    @property
    def parasail(self) -> tuple[int, int]:
        """``(open, extend)`` as parasail and Biopython (negated) spell them."""
        return self.first, self.extend

    @property
    def blast(self) -> tuple[int, int]:
        """``(open, extend)`` as BLAST spells them (open may come out negative)."""
        return self.first - self.extend, self.extend


@dataclass(frozen=True, eq=False)
class SubstitutionMatrix:
    """Integer scores of letter pairs.

    Attributes
    ----------
    name : str
    alphabet : str
        The letters, in code order (code ``k`` is ``alphabet[k]``).
    scores : ndarray
        ``(A + 1, A + 1)`` int32; the extra last row and column score the padding letter used
        inside batched kernels (never a real letter).
    lookup : ndarray
        256 entries: byte -> code, 255 for letters outside the alphabet.
    dna : tuple of int or None
        ``(match, mismatch, ambiguous, n_code)`` for the DNA matrix (kernels compare letters
        instead of looking scores up).
    """

    name: str
    alphabet: str
    scores: np.ndarray
    lookup: np.ndarray
    dna: tuple[int, int, int, int] | None = None

    @property
    def size(self) -> int:
        """Number of letters (without the padding letter)."""
        return len(self.alphabet)

    @cached_property
    def max_score(self) -> int:
        """The largest score of two real letters (computed once: the batch entry points read
        it on every call)."""
        return int(self.scores[: self.size, : self.size].max())

    @cached_property
    def min_score(self) -> int:
        """The smallest score of two real letters (computed once)."""
        return int(self.scores[: self.size, : self.size].min())

    def score(self, a: str, b: str) -> int:
        """The score of letters ``a`` and ``b``."""
        return int(self.scores[self.encode(a)[0], self.encode(b)[0]])

    def encode(self, seq: str | bytes, name: str = "sequence") -> np.ndarray:
        """Local. Codes (uint8) of a sequence's letters.

        Raises
        ------
        AlphabetError
            For a letter outside the alphabet, naming it, its position (from 1) and ``name``.
        """
        raw = seq.encode("ascii", "replace") if isinstance(seq, str) else bytes(seq)
        codes = self.lookup[np.frombuffer(raw, dtype=np.uint8)]
        bad = np.flatnonzero(codes == 255)
        if bad.size:
            k = int(bad[0])
            letter = seq[k] if isinstance(seq, str) else chr(raw[k])
            raise AlphabetError(
                f"{name}: letter {letter!r} at position {k + 1} is not in the {self.name} "
                f"alphabet {self.alphabet!r}"
            )
        return codes.astype(np.uint8)

    def decode(self, codes: np.ndarray) -> str:
        """The letters of ``codes``."""
        return "".join(self.alphabet[int(c)] for c in codes)


def _lookup(alphabet: str, aliases: dict[str, str]) -> np.ndarray:
    table = np.full(256, 255, dtype=np.uint8)
    for k, letter in enumerate(alphabet):
        table[ord(letter)] = k
        table[ord(letter.lower())] = k
    for src, dst in aliases.items():
        table[ord(src)] = table[ord(src.lower())] = alphabet.index(dst)
    return table


def _with_padding(core: np.ndarray) -> np.ndarray:
    a = core.shape[0]
    out = np.empty((a + 1, a + 1), dtype=np.int32)
    out[:a, :a] = core
    # padding scores below every real one, so padded cells never win (kernels.py)
    out[a, :] = out[:, a] = min(int(core.min()), 0) - 1
    return out


def dna_matrix(match: int = 2, mismatch: int = -3, ambiguous: int = -1) -> SubstitutionMatrix:
    """The DNA matrix: ``match`` on equal bases, ``mismatch`` otherwise, ``ambiguous`` when
    either letter is N (or another IUPAC ambiguity code, read as N).

    Raises
    ------
    ValueError
        If ``match`` is not positive.
    """
    if match <= 0:
        raise ValueError(f"the DNA match score must be positive, got {match}")
    alphabet = "ACGTN"
    core = np.full((5, 5), mismatch, dtype=np.int32)
    np.fill_diagonal(core, match)
    core[4, :] = core[:, 4] = ambiguous
    aliases = {"U": "T", **{c: "N" for c in "RYSWKMBDHV"}}
    return SubstitutionMatrix(
        f"DNA({match},{mismatch},{ambiguous})",
        alphabet,
        _with_padding(core),
        _lookup(alphabet, aliases),
        (int(match), int(mismatch), int(ambiguous), 4),
    )


def custom_matrix(
    alphabet: str, scores: np.ndarray | list[list[int]], name: str = "custom"
) -> SubstitutionMatrix:
    """A substitution matrix of one's own: ``scores[a, b]`` scores ``alphabet[a]`` (query)
    against ``alphabet[b]`` (target); letters are case-insensitive.

    Any integer scores are allowed, positive ones on ``X``, ``N`` or ``*`` included: the
    batched kernels' padding letter is not a letter of the alphabet and scores below all of
    them.

    Raises
    ------
    ValueError
        For a repeated or non-ASCII letter, a table that is not ``len(alphabet)`` square, or
        scores that are not integers below 1024 in size (32-bit sums stay exact for
        sequences of hundreds of thousands of letters).

    Examples
    --------
    >>> m = custom_matrix("ACGT", [[1, -1, -1, -1], [-1, 1, -1, -1],
    ...                            [-1, -1, 1, -1], [-1, -1, -1, 1]], "unit")
    >>> m.score("a", "A")
    1
    """
    letters = alphabet.upper()
    if not letters or not letters.isascii() or len(set(letters)) != len(letters):
        raise ValueError(f"matrix {name!r}: alphabet {alphabet!r} must be distinct ASCII letters")
    if len(letters) > 254:
        raise ValueError(f"matrix {name!r}: at most 254 letters, got {len(letters)}")
    table = np.asarray(scores)
    if table.shape != (len(letters), len(letters)):
        raise ValueError(
            f"matrix {name!r}: scores of shape {table.shape} for {len(letters)} letters; "
            f"expected ({len(letters)}, {len(letters)})"
        )
    as_int = table.astype(np.int64)
    if not np.array_equal(as_int, table) or np.abs(as_int).max() >= 1 << 10:
        raise ValueError(f"matrix {name!r}: scores must be integers below 1024 in size")
    return SubstitutionMatrix(name, letters, _with_padding(as_int), _lookup(letters, {}))


def get_matrix(name: str | SubstitutionMatrix) -> SubstitutionMatrix:
    """A substitution matrix by name: BLOSUM45/50/62/80/90, PAM30, PAM70, PAM250, DNA.

    ``"DNA"`` is :func:`dna_matrix` with its defaults; ``"DNA:2:-3:-1"`` sets match, mismatch
    and the N score.
    """
    if isinstance(name, SubstitutionMatrix):
        return name
    key = name.strip().upper()
    if key.startswith("DNA"):
        parts = key.split(":")[1:]
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"matrix {name!r}: expected DNA:MATCH:MISMATCH[:N]") from None
        return dna_matrix(*values)
    if key not in TABLES:
        raise ValueError(f"unknown matrix {name!r}; known: {', '.join(MATRICES)}")
    return _protein(key)


_CACHE: dict[str, SubstitutionMatrix] = {}


def _protein(key: str) -> SubstitutionMatrix:
    if key not in _CACHE:
        alphabet, rows = TABLES[key]
        core = np.array(rows, dtype=np.int32)
        _CACHE[key] = SubstitutionMatrix(key, alphabet, _with_padding(core), _lookup(alphabet, {}))
    return _CACHE[key]


@dataclass(frozen=True, eq=False)
class Scoring:
    """A substitution matrix and affine gaps.

    Parameters
    ----------
    matrix : str or SubstitutionMatrix
        Default ``"BLOSUM62"``.
    gap_open, gap_extend : int
        Gap costs in the spelling of ``convention`` (see the module docstring). Default
        BLAST's 11/1 (``first`` 12/1).
    convention : {"blast", "first"}

    Examples
    --------
    >>> s = Scoring("BLOSUM62", 11, 1, convention="blast")
    >>> s.gaps.first, s.gaps.extend
    (12, 1)
    """

    matrix: SubstitutionMatrix | str = "BLOSUM62"
    gap_open: int = 11
    gap_extend: int = 1
    convention: str = "blast"
    gaps: Gaps = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix", get_matrix(self.matrix))
        object.__setattr__(self, "gaps", Gaps(self.gap_open, self.gap_extend, self.convention))

    @classmethod
    def of(cls, scoring: Scoring | str | None) -> Scoring:
        """``scoring`` itself, ``Scoring()`` for None, or the defaults with a matrix name."""
        if scoring is None:
            return cls()
        if isinstance(scoring, Scoring):
            return scoring
        return cls(scoring)

    def __repr__(self) -> str:
        g = self.gaps
        return f"Scoring({self.matrix.name}, gap first={g.first}, extend={g.extend})"
