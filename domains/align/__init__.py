"""Sequence alignment: batched Smith-Waterman, Needleman-Wunsch and semi-global alignment with affine gaps."""  # noqa: E501

from .batch import (
    MODES,
    Alignment,
    align,
    align_pairs,
    cigar_string,
    parse_cigar,
    rescore_cigar,
    score_many,
    score_pairs,
)
from .scoring import (
    MATRICES,
    AlphabetError,
    Gaps,
    Scoring,
    SubstitutionMatrix,
    dna_matrix,
    get_matrix,
)
from .search import search, write_hits
from .seqio import (
    Record,
    SequenceFormatError,
    read_fasta,
    read_fastq,
    read_sequences,
    write_fasta,
    write_sam,
)

__all__ = [
    "MODES",
    "MATRICES",
    "Alignment",
    "AlphabetError",
    "Gaps",
    "Record",
    "Scoring",
    "SequenceFormatError",
    "SubstitutionMatrix",
    "align",
    "align_pairs",
    "cigar_string",
    "dna_matrix",
    "get_matrix",
    "parse_cigar",
    "read_fasta",
    "read_fastq",
    "read_sequences",
    "rescore_cigar",
    "score_many",
    "score_pairs",
    "search",
    "write_fasta",
    "write_hits",
    "write_sam",
]
