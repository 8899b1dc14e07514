"""Sequence alignment: batched Smith-Waterman, Needleman-Wunsch and semi-global alignment with affine gaps."""  # noqa: E501

from __future__ import annotations

from hpc.lazy import lazy_exports

# name -> submodule defining it; imported when the name is first read
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "MODES": ".batch",
        "MATRICES": ".scoring",
        "Alignment": ".batch",
        "Database": ".database",
        "KarlinAltschul": ".stats",
        "StatisticsError": ".stats",
        "AlphabetError": ".scoring",
        "Gaps": ".scoring",
        "Record": ".seqio",
        "Scoring": ".scoring",
        "SequenceFormatError": ".seqio",
        "SubstitutionMatrix": ".scoring",
        "align": ".batch",
        "align_pairs": ".batch",
        "cigar_string": ".batch",
        "custom_matrix": ".scoring",
        "dna_matrix": ".scoring",
        "get_matrix": ".scoring",
        "karlin_altschul": ".stats",
        "open_database": ".database",
        "parse_cigar": ".batch",
        "read_fasta": ".seqio",
        "read_fastq": ".seqio",
        "read_sequences": ".seqio",
        "rescore_cigar": ".batch",
        "score_many": ".batch",
        "score_pairs": ".batch",
        "search": ".search",
        "write_fasta": ".seqio",
        "write_hits": ".search",
        "write_sam": ".seqio",
        "write_store": ".database",
        "write_tabular": ".seqio",
    },
)
