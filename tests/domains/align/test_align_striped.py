"""The striped (intra-pair) kernel: scores equal to Biopython's, 8/16/32-bit lanes, choice.

Fresh random inputs on every run (hypothesis): every scoring of the fuzz suite (named
matrices, DNA with any N score, custom asymmetric matrices, both gap conventions, extend
above open), lengths on the stripe boundaries of every lane width (``k * V`` and one either
side, ``V`` = 8, 16, 32), empty and one-letter sequences, related and unrelated pairs, every
mode, both column forms (lazy F, prefix scan), starting in 8-, 16- or 32-bit lanes.
"""

from __future__ import annotations

import contextlib
import itertools

import numba
import numpy as np
import pytest
from hpc.domains.align import Scoring, score_many, score_pairs
from hpc.domains.align import striped as S
from hpc.domains.align.batch import MODES, encode_all
from hypothesis import given
from hypothesis import strategies as st

from tests.domains.align.test_align_fuzz import _expected, _mutate, _reference, scorings
from tests.fuzz import fuzz

pytest.importorskip("Bio.Align")

_SCORE_STRIPED = S.score_striped  # the kernel itself (a test below spies on the module's)
BOUNDARY = sorted(
    {0, 1, 2, 3} | {k * v + d for v in (8, 16, 32) for k in (1, 2, 3, 5) for d in (-1, 0, 1)}
)


def _striped(qs, ts, scoring, mode, scan=False, bits=8):
    qe = encode_all(qs, scoring, "query")
    te = encode_all(ts, scoring, "target")
    k = np.arange(len(qs))
    return _SCORE_STRIPED(qe.codes, qe.offsets, te.codes, te.offsets, k, k, scoring,
                          MODES[mode], scan, bits)  # fmt: skip


@contextlib.contextmanager
def _threads(count: int):
    """numba's threads set to ``count`` (at most those it started) for the block."""
    before = numba.get_num_threads()
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)


@st.composite
def boundary_pairs(draw, letters: str) -> tuple[list[str], list[str]]:
    """Pairs whose lengths sit on stripe boundaries (or are random up to 600)."""
    count = draw(st.integers(1, 10))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pool = np.array(list(letters))
    p = rng.dirichlet(np.ones(pool.size))
    length = st.one_of(st.sampled_from(BOUNDARY), st.integers(0, 600))
    qs, ts = [], []
    for _ in range(count):
        q = "".join(rng.choice(pool, size=draw(length), p=p))
        if q and draw(st.booleans()):
            t = _mutate(rng, q, pool, p)
        else:
            t = "".join(rng.choice(pool, size=draw(length), p=p))
        qs.append(q)
        ts.append(t)
    return qs, ts


@fuzz(60)
@given(data=st.data())
def test_striped_scores_equal_biopython_in_every_mode(data):
    scoring, letters = data.draw(scorings(), "scoring")
    qs, ts = data.draw(boundary_pairs(letters), "pairs")
    for mode in ("local", "global", "semi-global"):
        aligner = _reference(scoring, mode)
        want = [_expected(scoring, mode, q, t, aligner) for q, t in zip(qs, ts, strict=True)]
        # lazy F (switching to scan columns) or scan columns only; the narrowest lanes; one
        # thread (each pair's cascade of lane widths in one call) or the pairs' runs per
        # lane width dealt to two threads
        variants = ((False, 8), (True, 8), (False, 16), (True, 32))
        for (scan, bits), threads in itertools.product(variants, (1, 2)):
            with _threads(threads):
                got = _striped(qs, ts, scoring, mode, scan, bits)
            bad = np.flatnonzero(got != np.array(want))
            assert bad.size == 0, (
                f"{scoring} {mode} scan={scan} bits={bits} threads={threads}: pairs "
                f"{bad.tolist()} scored "
                f"{got[bad].tolist()}, Biopython {[want[k] for k in bad]} "
                f"(lengths {[(len(qs[k]), len(ts[k])) for k in bad]})"
            )


@pytest.mark.parametrize("mode", ["local", "global", "semi-global"])
@pytest.mark.parametrize(("matrix", "letter"), [("BLOSUM62", "W"), ("DNA:7:-3", "A")])
def test_scores_near_and_past_8_and_16_bits_are_exact(matrix, letter, mode):
    """Identical runs of one letter score ``n * s``: lengths whose scores end below, at and
    past the 8-bit (local) and 16-bit limits exercise the checks and the 16- and 32-bit
    retries, in both column forms, pair by pair (one thread) and in runs per lane width."""
    scoring = Scoring(matrix, 11, 1)
    per = scoring.matrix.score(letter, letter)
    edge = (S.HIGH16 - per) // per
    lengths = [*range(1, 300 // per), edge - 2, edge - 1, edge, edge + 1, edge + 2, 2 * edge]
    seqs = [letter * n for n in lengths]
    for scan, threads in itertools.product((False, True), (1, 2)):  # one thread: cascades
        with _threads(threads):
            got = _striped(seqs, seqs, scoring, mode, scan)
        assert got.tolist() == [n * per for n in lengths], (scan, threads)
    # the entry point (one pair per length: each goes to the striped kernel)
    assert score_pairs(seqs, seqs, scoring, mode, backend="cpu").tolist() == got.tolist()


@pytest.mark.parametrize("mode", ["global", "semi-global"])
def test_borders_at_the_16_bit_floor_are_exact(mode):
    """Long queries against short unrelated targets score near ``-gap(m)``: the longest query
    whose borders :func:`fits_16` admits runs in 16-bit lanes, one letter more in 32 bits;
    both equal Biopython."""
    scoring = Scoring("DNA:2:-4", 4, 2)
    g, mat = scoring.gaps, scoring.matrix
    pad = int(mat.scores[mat.size, 0])
    n = 40

    def fits(m: int) -> bool:
        return S.fits_16(g.first, g.extend, mat.min_score, mat.max_score, pad, m, n, MODES[mode])

    lo, hi = 1, 1 << 16  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    rng = np.random.default_rng()
    qs = ["".join(rng.choice(list("ACGT"), m)) for m in (lo - 1, lo, hi)]
    ts = ["".join(rng.choice(list("ACGT"), n)) for _ in qs]
    aligner = _reference(scoring, mode)
    want = [_expected(scoring, mode, q, t, aligner) for q, t in zip(qs, ts, strict=True)]
    assert want[0] < -(1 << 14)  # below half the 16-bit range
    assert _striped(qs, ts, scoring, mode).tolist() == want


def test_the_cost_model_sends_few_long_pairs_to_the_striped_kernel(monkeypatch):
    """A bucket of a few long pairs goes to the striped kernel, a full bucket of short pairs
    to the lane kernel; both give the same scores as the other kernel would."""
    calls = []

    def spy(*args):
        calls.append(len(args[4]))
        return _SCORE_STRIPED(*args)

    monkeypatch.setattr(S, "score_striped", spy)
    rng = np.random.default_rng()
    amino = np.array(list("ARNDCQEGHILKMFPSTWYV"))
    long_q = ["".join(rng.choice(amino, n)) for n in (1500, 2500, 3000)]
    long_t = ["".join(rng.choice(amino, n)) for n in (1600, 2000, 2900)]
    short = ["".join(rng.choice(amino, 30)) for _ in range(64)]
    scoring = Scoring("BLOSUM62", 11, 1)
    got = score_pairs(long_q, long_t, scoring, "local", backend="cpu")
    assert calls == [3]
    assert got.tolist() == _striped(long_q, long_t, scoring, "local").tolist()
    calls.clear()
    got = score_pairs(short, short[::-1], scoring, "local", backend="cpu")
    assert calls == []
    assert got.tolist() == _striped(short, short[::-1], scoring, "local").tolist()
    # all-vs-all: two long targets (a nearly empty bucket) go to the striped kernel
    many = score_many(long_q[:2], long_t[:2], scoring, "global", backend="cpu")
    assert calls == [4]
    qi = np.repeat([0, 1], 2)
    ti = np.tile([0, 1], 2)
    want = score_pairs(long_q[:2], long_t[:2], scoring, "global", backend="cpu",
                       query_index=qi, target_index=ti)  # fmt: skip
    assert many.reshape(-1).tolist() == want.tolist()
