"""Sequence alignment: batched Smith-Waterman, Needleman-Wunsch and semi-global alignment with affine gaps."""
