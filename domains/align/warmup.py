"""Warm-up tasks of the alignment domain (see :mod:`hpc.warmup`): DNA and protein, every mode."""

from __future__ import annotations

from collections.abc import Callable

_DNA = ["ACGTACGTTGCAACGT", "ACGTTGCATGCAACGTAC", "TTGACGTACGA"]
_PROTEIN = ["MKTAYIAKQRQISFVKSHFSRQ", "MKTAYIAKQRQISFVKSHF", "MSTNPKPQRKTKRNTNRRPQDV"]


def _scores() -> None:
    from .batch import MODES, score_many

    for seqs, matrix in ((_DNA, None), (_PROTEIN, "BLOSUM62")):
        for mode in MODES:
            score_many(seqs, seqs, matrix, mode=mode)


def _tracebacks() -> None:
    from .batch import MODES, align_pairs

    for seqs, matrix in ((_DNA, None), (_PROTEIN, "BLOSUM62")):
        for mode in MODES:
            align_pairs(seqs, seqs[::-1], matrix, mode=mode)


def _striped() -> None:
    from .striped import warm

    warm()


def _search() -> None:
    from .search import search

    search(_DNA, _DNA * 4, top=2)
    search(_PROTEIN, _PROTEIN * 4, "BLOSUM62", top=2)


TASKS: list[tuple[str, Callable[[], object]]] = [
    ("scores (local, global, semi-global; DNA and protein)", _scores),
    ("striped kernels (8-, 16- and 32-bit lanes)", _striped),
    ("alignments with tracebacks", _tracebacks),
    ("top-hit search", _search),
]
