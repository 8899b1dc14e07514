"""Differential fuzzing of alignment scores and tracebacks against Biopython.

Every example is a fresh random scoring (each named matrix, random DNA scores with N scoring
anything from -4 to +4, random custom matrices whose X and ``*`` score positive against
themselves; both gap conventions; extend above open) and a batch of pairs mixing empty, short
and long sequences (up to 10,000 letters), in every mode. Scores must equal Biopython's
``PairwiseAligner`` (or the closed form where a sequence is empty: Biopython refuses those),
the all-vs-all kernel must agree with the pair kernel, and every traceback must re-score to
its score over ranges its CIGAR spans exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.align import (
    Scoring,
    align,
    custom_matrix,
    get_matrix,
    parse_cigar,
    rescore_cigar,
    score_many,
    score_pairs,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import fuzz

Align = pytest.importorskip("Bio.Align")

PROTEIN = "ARNDCQEGHILKMFPSTWYVBZX*"
NAMED = ("BLOSUM45", "BLOSUM50", "BLOSUM62", "BLOSUM80", "BLOSUM90", "PAM30", "PAM70", "PAM250")
DNA_LETTERS = "ACGTNRYKMU"  # U reads as T, the IUPAC codes as N
MODES = ("local", "global", "semi-global")
LONG = 10_000
CELL_BUDGET = 3e7  # Biopython's cells per example (about half a second)


@st.composite
def scorings(draw) -> tuple[Scoring, str]:
    """A scoring and the letters its sequences are drawn from."""
    kind = draw(st.sampled_from(("named", "dna", "custom")))
    gap_open = draw(st.integers(0, 15))
    gap_extend = draw(st.integers(0, 8))  # above open too
    convention = draw(st.sampled_from(("blast", "first")))
    if kind == "named":
        matrix = get_matrix(draw(st.sampled_from(NAMED)))
        letters = PROTEIN
    elif kind == "dna":
        match = draw(st.integers(1, 6))
        matrix = get_matrix(f"DNA:{match}:{draw(st.integers(-6, 3))}:{draw(st.integers(-4, 4))}")
        letters = DNA_LETTERS
    else:  # the padding-adjacent letters X and * score positive against themselves
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        table = rng.integers(-6, 5, (len(PROTEIN), len(PROTEIN)))
        if draw(st.booleans()):
            table = np.triu(table) + np.triu(table, 1).T  # symmetric, or not
        np.fill_diagonal(table, rng.integers(1, 9, len(PROTEIN)))
        matrix = custom_matrix(PROTEIN, table, f"random-{seed}")
        letters = PROTEIN
    return Scoring(matrix, gap_open, gap_extend, convention), letters


@st.composite
def batches(draw, letters: str) -> tuple[list[str], list[str]]:
    """Pairs of mixed lengths: empty, short, medium and rarely one long (mutated) pair."""
    count = draw(st.integers(1, 24))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    pool = np.array(list(letters))
    # weights: the rare letters (N, X, *, ambiguity codes) as often as the common ones
    p = rng.dirichlet(np.ones(pool.size))
    kinds = draw(
        st.lists(st.sampled_from(("empty", "short", "medium")), min_size=count, max_size=count)
    )
    lengths = [
        0 if k == "empty" else int(rng.integers(1, 40 if k == "short" else 600)) for k in kinds
    ]
    qs = ["".join(rng.choice(pool, size=n, p=p)) for n in lengths]
    ts = []
    for q in qs:  # half related (mutated copies), half unrelated
        if q and rng.random() < 0.5:
            ts.append(_mutate(rng, q, pool, p))
        else:
            ts.append("".join(rng.choice(pool, size=int(rng.integers(0, 2 * len(q) + 2)), p=p)))
    if draw(st.integers(0, 4)) == 0:  # a long pair beside the short ones (up to 10k letters)
        n = int(rng.integers(1000, LONG + 1))
        q = "".join(rng.choice(pool, size=n, p=p))
        qs.append(q)
        ts.append(_mutate(rng, q, pool, p))
    return qs, ts


def _mutate(rng, seq: str, pool, p) -> str:
    """``seq`` with substitutions, insertions and deletions (about one edit in ten letters)."""
    out = []
    for c in seq:
        r = rng.random()
        if r < 0.05:
            out.append(str(rng.choice(pool, p=p)))
        elif r < 0.07:
            out.append(c + str(rng.choice(pool, p=p)))
        elif r >= 0.09:
            out.append(c)
    return "".join(out)


def _reference(scoring: Scoring, mode: str):
    """Biopython with our matrix: it scores ``score(target, query)``, so its matrix is ours
    transposed; the semi-global target's ends are free."""
    mat = scoring.matrix
    arr = Align.substitution_matrices.Array(alphabet=mat.alphabet, dims=2)
    k = mat.size
    arr[:, :] = mat.scores[:k, :k].T
    aligner = Align.PairwiseAligner(mode="local" if mode == "local" else "global")
    aligner.substitution_matrix = arr
    aligner.open_gap_score = -scoring.gaps.first
    aligner.extend_gap_score = -scoring.gaps.extend
    if mode == "semi-global":
        aligner.end_deletion_score = 0
    return aligner


def _canonical(scoring: Scoring, seq: str) -> str:
    """The letters as the matrix reads them (U as T, IUPAC codes as N) for Biopython."""
    return scoring.matrix.decode(scoring.matrix.encode(seq)) if seq else ""


def _expected(scoring: Scoring, mode: str, q: str, t: str, aligner) -> int:
    if q and t:
        return int(aligner.score(_canonical(scoring, t), _canonical(scoring, q)))
    gap = scoring.gaps.cost
    if mode == "local":
        return 0
    if mode == "global":
        return -gap(len(q)) - gap(len(t))
    return -gap(len(q))  # semi-global: the query end to end, the target free


@fuzz(30)
@given(data=st.data())
def test_fuzz_scores_equal_biopython_in_every_mode(data):
    scoring, letters = data.draw(scorings(), "scoring")
    qs, ts = data.draw(batches(letters), "pairs")
    cells = sum(len(q) * len(t) for q, t in zip(qs, ts, strict=True))
    modes = MODES if cells * len(MODES) < CELL_BUDGET else (data.draw(st.sampled_from(MODES)),)
    for mode in modes:
        aligner = _reference(scoring, mode)
        pairs = list(zip(qs, ts, strict=True))
        want = np.array([_expected(scoring, mode, q, t, aligner) for q, t in pairs])
        ours = score_pairs(qs, ts, scoring, mode, backend="cpu")
        bad = np.flatnonzero(ours != want)
        assert bad.size == 0, (
            f"{scoring} {mode}: pairs {bad.tolist()} scored {ours[bad].tolist()}, Biopython "
            f"{want[bad].tolist()} (lengths {[(len(qs[k]), len(ts[k])) for k in bad]})"
        )
        # the shared-query kernel (every query against every target) on the short pairs
        short = [k for k in range(len(qs)) if len(qs[k]) < 700][:4]
        many = score_many([qs[k] for k in short], ts, scoring, mode, backend="cpu")
        for row, k in enumerate(short):
            assert many[row, k] == want[k], (scoring, mode, k)
            pairs = score_pairs([qs[k]] * len(ts), ts, scoring, mode, backend="cpu")
            assert np.array_equal(many[row], pairs), (scoring, mode, k)


@fuzz(40)
@given(data=st.data())
def test_fuzz_tracebacks_rescore_to_their_score(data):
    scoring, letters = data.draw(scorings(), "scoring")
    qs, ts = data.draw(batches(letters), "pairs")
    mode = data.draw(st.sampled_from(MODES), "mode")
    aligner = _reference(scoring, mode)
    for q, t in list(zip(qs, ts, strict=True))[:8]:
        if len(q) * len(t) > 4e6:
            continue
        al = align(q, t, scoring, mode)
        assert al.score == _expected(scoring, mode, q, t, aligner), (scoring, mode, q, t)
        ops = parse_cigar(al.cigar)
        assert al.query_end - al.query_start == int(np.count_nonzero(ops != 2))
        assert al.target_end - al.target_start == int(np.count_nonzero(ops != 1))
        if mode == "global":
            assert (al.query_start, al.query_end, al.target_start, al.target_end) == (
                0,
                len(q),
                0,
                len(t),
            )
        if mode == "semi-global":
            assert (al.query_start, al.query_end) == (0, len(q))
        assert rescore_cigar(q, t, al, scoring) == al.score, (scoring, mode, al)


@pytest.mark.parametrize("matrix", [*NAMED, "DNA:2:-3:1", "DNA:1:1:4"])
@pytest.mark.parametrize("mode", MODES)
def test_padding_never_scores_whatever_the_padding_adjacent_letters_score(matrix, mode):
    """Short pairs of N, X or * only (each scoring positive against itself, also via a custom
    matrix) batched with a long pair: the short pairs' scores are their closed forms."""
    if matrix.startswith("DNA"):
        scoring = Scoring(matrix, 5, 2, "first")
        letter = "N"
    else:
        base = get_matrix(matrix)
        table = base.scores[: base.size, : base.size].copy()
        for c in "X*":
            k = base.alphabet.index(c)
            table[k, k] = 7  # the padding letter's neighbours in code order score positive
        scoring = Scoring(custom_matrix(base.alphabet, table, f"{matrix}+X*"), 5, 2, "first")
        letter = "X"
    per = scoring.matrix.score(letter, letter)
    assert per > 0
    qs = [letter * 3, letter * 7, "A" * 900]
    ts = [letter * 5, letter * 2, "A" * 1000]
    got = score_pairs(qs, ts, scoring, mode, backend="cpu")
    gap = scoring.gaps.cost
    want = {
        "local": [3 * per, 2 * per],
        "global": [3 * per - gap(2), 2 * per - gap(5)],
        "semi-global": [3 * per, 2 * per - gap(5)],
    }[mode]
    assert got[:2].tolist() == want, (matrix, mode, got)
