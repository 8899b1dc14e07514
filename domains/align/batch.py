"""Batched alignment: scores of many pairs at once, tracebacks with CIGARs, top hits.

Pairs are sorted by length and dealt into buckets of :data:`kernels.LANES` pairs, which the
numba kernels score side by side (16-bit scores first; a bucket whose scores could overflow
is scored again with 32 bits). A bucket whose lanes the pairs would leave mostly empty (few
pairs, or lengths far apart) goes instead to the striped kernel of
:mod:`hpc.domains.align.striped`, which puts one pair's query positions in the SIMD lanes:
each bucket goes to whichever kernel the cost model (:func:`striped.striped_cost`,
:func:`striped.lanes_cost`) says is cheaper. On the GPU backend one CUDA thread scores one
pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpc.dispatch import DeviceTable

from . import kernels as K
from . import striped as S
from .scoring import AlphabetError, Scoring

__all__ = [
    "MODES",
    "Alignment",
    "encode_all",
    "score_pairs",
    "score_many",
    "align",
    "align_pairs",
    "cigar_string",
    "parse_cigar",
    "rescore_cigar",
]

MODES = {"local": K.LOCAL, "global": K.GLOBAL, "semi-global": K.SEMIGLOBAL}
_I16_LIMIT = (1 << 14) - 1  # |values| the 16-bit kernels may hold, with room below for NEG
_NEG = {np.int16: -(1 << 14), np.int32: -(1 << 29)}

SeqLike = str | bytes | np.ndarray

# the score kernels of each device (hpc.dispatch): lane kernels on the CPU, a thread per pair
# on the GPU
SCORES = DeviceTable("align.scores")


def _mode(mode: str) -> int:
    key = mode.lower().replace("_", "-")
    if key in ("semiglobal", "sg"):
        key = "semi-global"
    if key not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    return MODES[key]


@dataclass
class Encoded:
    """Sequences as one flat code array with offsets (``codes[offsets[k]:offsets[k+1]]``)."""

    codes: np.ndarray
    offsets: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def get(self, k: int) -> np.ndarray:
        return self.codes[self.offsets[k] : self.offsets[k + 1]]


def encode_all(
    seqs: Sequence[SeqLike] | Encoded,
    scoring: Scoring,
    what: str = "sequence",
    names: Sequence[str] | None = None,
) -> Encoded:
    """Local. Encode sequences (str, bytes or code arrays) with ``scoring``'s matrix.

    Empty sequences are allowed: they score as the recurrences define (local 0; global minus
    the gap over the other sequence; semi-global 0 for an empty query, minus the gap over the
    query for an empty target), as a trimmed-away read in a FASTQ file needs.

    Raises
    ------
    AlphabetError
        Naming the sequence (``what`` and its index or name), the letter and position.
    """
    if isinstance(seqs, Encoded):
        return seqs
    mat = scoring.matrix
    if len(seqs) and all(type(s) is str for s in seqs):
        # one lookup for all the letters (per-sequence calls dominate short pairs); a bad
        # letter is reported by the per-sequence path below
        raw = "".join(seqs).encode("ascii", "replace")
        offsets = np.fromiter(
            itertools.accumulate(map(len, seqs), initial=0), np.int64, len(seqs) + 1
        )
        if len(raw) == offsets[-1]:  # all ASCII; a bad letter's code is 255, above all others
            codes = mat.lookup.take(np.frombuffer(raw, dtype=np.uint8))
            if codes.max(initial=0) != 255:
                return Encoded(codes, offsets)
    parts = []
    for k, s in enumerate(seqs):
        label = f"{what} {names[k]!r}" if names is not None else f"{what} {k}"
        if isinstance(s, np.ndarray):
            c = np.ascontiguousarray(s, dtype=np.uint8)
            if c.size and int(c.max()) >= mat.size:
                raise AlphabetError(f"{label}: code {int(c.max())} is not below {mat.size}")
        else:
            c = mat.encode(s, label)
        parts.append(c)
    lengths = np.array([p.size for p in parts], dtype=np.int64)
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    codes = np.concatenate(parts) if parts else np.empty(0, np.uint8)
    return Encoded(codes.astype(np.uint8), offsets)


def _buckets(order: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order padded to whole buckets, each bucket's longest length, row offsets."""
    lanes = K.LANES
    nb = -(-order.size // lanes)
    padded = np.full(nb * lanes, -1, dtype=np.int64)
    padded[: order.size] = order
    lens = np.zeros(nb * lanes, dtype=np.int64)
    lens[: order.size] = lengths[order]
    maxlen = lens.reshape(nb, lanes).max(axis=1) if nb else np.zeros(0, np.int64)
    row_off = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(maxlen, out=row_off[1:])
    return padded, maxlen, row_off


def _pack(enc: Encoded, order: np.ndarray, pad: int) -> tuple[np.ndarray, ...]:
    padded, maxlen, row_off = _buckets(order, enc.lengths)
    nb = maxlen.size
    out = np.empty((max(int(row_off[-1]), 1), K.LANES), dtype=np.uint8)
    lens = np.zeros((nb, K.LANES), dtype=np.int64)
    K.pack_lanes(enc.codes, enc.offsets, padded, nb, maxlen, row_off, np.uint8(pad), out, lens)
    return padded, out, row_off, lens, maxlen


def _needs_32(scoring: Scoring, mode: int, qmax: int, tmax: int) -> bool:
    """Whether 16-bit scores could overflow, known before running (always for global and
    semi-global; local runs are checked afterwards)."""
    mat, g = scoring.matrix, scoring.gaps
    if g.first + g.extend + abs(mat.min_score) + abs(mat.max_score) + 2 >= _I16_LIMIT // 2:
        return True  # the costs themselves do not fit 16 bits comfortably
    if mode == K.LOCAL:
        return False  # detected after the run: best score near the limit
    low = g.cost(qmax) + g.cost(tmax) + g.first + abs(min(mat.min_score, 0)) + g.extend
    high = max(mat.max_score, 0) * min(qmax, tmax)
    return max(low, high) >= _I16_LIMIT


def _overflowed(scores: np.ndarray, scoring: Scoring) -> np.ndarray:
    return scores >= _I16_LIMIT - max(scoring.matrix.max_score, 0)


def _kernel_args(scoring: Scoring, mode: int, three: bool) -> tuple[Any, ...]:
    g = scoring.gaps
    return (g.first, g.extend, mode, three)


def score_many(
    queries: Sequence[SeqLike] | Encoded,
    targets: Sequence[SeqLike] | Encoded,
    scoring: Scoring | str | None = None,
    mode: str = "local",
    backend: Any = None,
) -> np.ndarray:
    """Local. Scores of every query against every target (one-to-many, all-vs-all).

    Parameters
    ----------
    queries, targets : sequences of str, bytes or uint8 code arrays
    scoring : Scoring or matrix name, optional
        Default ``Scoring()``: BLOSUM62, BLAST gaps 11/1.
    mode : {"local", "global", "semi-global"}
        Semi-global aligns each query end to end; the target's ends are free.
    backend : {"cpu", "gpu"} or None
        Default from ``HPC_BACKEND``.

    Returns
    -------
    ndarray
        ``(len(queries), len(targets))`` int64 scores.
    """
    scoring = Scoring.of(scoring)
    m = _mode(mode)
    qe = encode_all(queries, scoring, "query")
    te = encode_all(targets, scoring, "target")
    return _ops(backend).all_vs_all(qe, te, scoring, m)


@SCORES.gpu("all_vs_all")
def _all_vs_all_gpu(qe: Encoded, te: Encoded, scoring: Scoring, m: int) -> np.ndarray:
    """Every pair on the GPU (one thread per pair)."""
    qi = np.repeat(np.arange(len(qe)), len(te))
    ti = np.tile(np.arange(len(te)), len(qe))
    return _gpu_scores(qe, te, qi, ti, scoring, m).reshape(len(qe), len(te))


@SCORES.cpu("all_vs_all")
def _all_vs_all_cpu(qe: Encoded, te: Encoded, scoring: Scoring, m: int) -> np.ndarray:
    """Every query against buckets of targets (the shared-query lane kernel)."""
    out = np.empty((len(qe), len(te)), dtype=np.int64)
    if len(te) == 0 or len(qe) == 0:
        return out
    order = np.argsort(te.lengths, kind="stable")
    padded, tcodes, row_off, lens, maxlen = _pack(te, order, scoring.matrix.size)
    nb = maxlen.size
    res = np.zeros((len(qe), nb, K.LANES), dtype=np.int32)
    qlen = qe.lengths
    wide = _needs_32(scoring, m, int(qlen.max()), int(maxlen.max()))
    # tasks: (bucket, run of queries), enough of them to keep every thread busy
    import numba

    per = max(1, -(-len(qe) * nb // max(1, 4 * numba.get_num_threads())))
    per = min(per, len(qe))
    qorder = np.argsort(qlen, kind="stable")
    # (query, bucket) cells the striped kernel does cheaper: buckets with few targets
    striped = _striped_cells(qlen, lens, maxlen, wide)
    runs = [qorder[a : a + per] for a in range(0, len(qe), per)]
    tasks = [(b, r[~striped[r, b]]) for b in range(nb) for r in runs]
    tasks = [(b, r) for b, r in tasks if r.size]
    if tasks:
        _run_shared(qe, tasks, tcodes, row_off, lens, maxlen, scoring, m, wide, res)
    if not wide and m == K.LOCAL:
        over = _overflowed(res, scoring).any(axis=2)  # (query, bucket)
        qs_, bs_ = np.nonzero(over)
        if qs_.size:
            redo = np.zeros_like(res)
            tasks = [(int(b), np.array([q])) for q, b in zip(qs_, bs_, strict=True)]
            _run_shared(qe, tasks, tcodes, row_off, lens, maxlen, scoring, m, True, redo)
            res[qs_, bs_] = redo[qs_, bs_]
    sel = padded >= 0
    flat = res.reshape(len(qe), -1)
    out[:, padded[sel]] = flat[:, sel]
    qs_, bs_ = np.nonzero(striped)
    if qs_.size:
        lane_t = padded.reshape(nb, K.LANES)[bs_]  # (cell, lane) target or -1
        keep = lane_t >= 0
        pq = np.repeat(qs_, keep.sum(axis=1))
        pt = lane_t[keep]
        out[pq, pt] = S.score_striped(qe.codes, qe.offsets, te.codes, te.offsets, pq, pt,
                                      scoring, m)  # fmt: skip
    return out


def _striped_cells(qlen: np.ndarray, lens: np.ndarray, maxlen: np.ndarray, wide: bool):
    """``(query, bucket)`` booleans: where the striped kernel (every target of the bucket on
    its own) is cheaper than the shared-query lane kernel over the whole bucket."""
    count = (lens > 0).sum(axis=1)  # the bucket's targets (empty ones cost a call too)
    total = lens.sum(axis=1)
    q = qlen[:, None].astype(np.float64)
    segments = np.ceil(q / S.STRIPE)
    striped = (
        count * S.STRIPED_PAIR_NS
        + total * (S.STRIPED_COLUMN_NS + segments * S.STRIPED_SEGMENT_NS)
    )  # fmt: skip
    lanes = S.lanes_cost(q, maxlen[None, :], "shared", wide)
    return striped < lanes


def _run_shared(qe, tasks, tcodes, row_off, lens, maxlen, scoring, mode, wide, res) -> None:
    task_b = np.array([b for b, _ in tasks], dtype=np.int64)
    task_ptr = np.zeros(len(tasks) + 1, dtype=np.int64)
    np.cumsum([r.size for _, r in tasks], out=task_ptr[1:])
    task_q = np.concatenate([r for _, r in tasks]).astype(np.int64)
    dtype = np.int32 if wide else np.int16
    three = scoring.gaps.extend > scoring.gaps.first
    K.bucket_shared(
        qe.codes, qe.offsets, task_b, task_q, task_ptr, tcodes, row_off, lens, maxlen,
        scoring.matrix.scores, *_kernel_args(scoring, mode, three), _NEG[dtype],
        np.zeros(1, dtype), res,
    )  # fmt: skip


def score_pairs(
    queries: Sequence[SeqLike] | Encoded,
    targets: Sequence[SeqLike] | Encoded,
    scoring: Scoring | str | None = None,
    mode: str = "local",
    backend: Any = None,
    query_index: np.ndarray | None = None,
    target_index: np.ndarray | None = None,
) -> np.ndarray:
    """Local. Scores of pairs ``(queries[k], targets[k])`` (or of ``query_index[k]``,
    ``target_index[k]`` when given: many-to-many).

    Returns
    -------
    ndarray
        int64 scores, one per pair.

    Raises
    ------
    ValueError
        For lists of different lengths, an unknown mode or an empty sequence.
    """
    scoring, m, qe, te, qi, ti = _pair_inputs(
        queries, targets, scoring, mode, query_index, target_index
    )
    return _ops(backend).pairs(qe, te, qi, ti, scoring, m)


def _pair_inputs(queries, targets, scoring, mode, query_index, target_index):
    """Scoring, mode code, encoded sequences and the (query, target) index of every pair
    (the i-th query with the i-th target when no indices are given)."""
    scoring = Scoring.of(scoring)
    m = _mode(mode)
    qe = encode_all(queries, scoring, "query")
    te = encode_all(targets, scoring, "target")
    if query_index is None:
        if len(qe) != len(te):
            raise ValueError(f"{len(qe)} queries but {len(te)} targets; pairs need equal counts")
        qi = ti = np.arange(len(qe))
    else:
        qi = np.asarray(query_index, dtype=np.int64)
        ti = np.asarray(target_index, dtype=np.int64)
    return scoring, m, qe, te, qi, ti


def _dna_args(scoring: Scoring) -> np.ndarray:
    """``(match, mismatch, ambiguous, n_code, padding)`` for the DNA kernels' comparisons
    (``n_code = -1``: look scores up in the matrix), the padding score taken from the matrix."""
    mat = scoring.matrix
    pad = int(mat.scores[mat.size, 0])
    return np.array((*(mat.dna or (0, 0, 0, -1)), pad), dtype=np.int64)


@SCORES.cpu("pairs")
def _pairs_cpu(qe, te, qi, ti, scoring: Scoring, mode: int) -> np.ndarray:
    n = qi.size
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    # pairs as sequences of their own: sort by target length, then query length
    qlen = qe.offsets[qi + 1] - qe.offsets[qi]
    tlen = te.offsets[ti + 1] - te.offsets[ti]
    dna = scoring.matrix.dna
    kind = "compare" if dna is not None and dna[3] >= 0 else "lookup"
    if n <= K.LANES:  # one bucket: decide without building it (short calls' overhead)
        ql, tl = qlen.tolist(), tlen.tolist()
        qm, tm = max(ql), max(tl)
        lanes = S.lanes_cost(qm, tm, kind, _needs_32(scoring, mode, qm, tm))
        if sum(map(S.striped_cost, ql, tl)) < lanes:
            return S.score_striped(qe.codes, qe.offsets, te.codes, te.offsets, qi, ti,
                                   scoring, mode)  # fmt: skip
    dna = _dna_args(scoring)
    order = np.lexsort((qlen, tlen))
    padded = _buckets(order, tlen)[0]
    nb = padded.size // K.LANES
    bucket_pairs = padded.reshape(nb, K.LANES)
    real = bucket_pairs >= 0
    qlens = np.where(real, qlen[bucket_pairs], 0)
    tlens = np.where(real, tlen[bucket_pairs], 0)
    qmax, tmax = qlens.max(axis=1), tlens.max(axis=1)
    wide = np.array(
        [_needs_32(scoring, mode, int(qmax[b]), int(tmax[b])) for b in range(nb)], dtype=bool
    )
    # buckets the striped kernel scores cheaper (few pairs, lengths far apart, long pairs)
    cost = np.where(real, S.striped_cost(qlens, tlens), 0.0).sum(axis=1)
    striped = cost < S.lanes_cost(qmax, tmax, kind, wide)
    if not striped.all():
        _lanes_pairs(qe, te, qi, ti, order, wide, striped, dna, scoring, mode, out)
    if striped.any():
        pairs = bucket_pairs[striped][real[striped]]
        out[pairs] = S.score_striped(qe.codes, qe.offsets, te.codes, te.offsets, qi[pairs],
                                     ti[pairs], scoring, mode)  # fmt: skip
    return out


def _lanes_pairs(qe, te, qi, ti, order, wide, striped, dna, scoring, mode, out) -> None:
    """Score the buckets not ``striped`` with the lane kernel, into ``out``."""
    pad = scoring.matrix.size
    pq = Encoded(qe.codes, qe.offsets)
    qpadded, qcodes, qrow, qlens, qmax = _pack(_gathered(pq, qi), order, pad)
    tpadded, tcodes, trow, tlens, tmax = _pack(_gathered(te, ti), order, pad)
    mat = scoring.matrix.scores
    three = scoring.gaps.extend > scoring.gaps.first
    args = _kernel_args(scoring, mode, three)
    nb = tmax.size
    res = np.zeros((nb, K.LANES), dtype=np.int32)
    for is_wide in (False, True):
        idx = np.flatnonzero((wide == is_wide) & ~striped)
        if idx.size == 0:
            continue
        dtype = np.int32 if is_wide else np.int16
        sub = _run_pairs(
            idx, qcodes, qrow, qlens, qmax, tcodes, trow, tlens, tmax, mat, dna, args, dtype
        )
        res[idx] = sub
        if not is_wide and mode == K.LOCAL:
            redo = idx[_overflowed(sub, scoring).any(axis=1)]
            if redo.size:
                res[redo] = _run_pairs(
                    redo, qcodes, qrow, qlens, qmax, tcodes, trow, tlens, tmax, mat, dna, args,
                    np.int32,
                )  # fmt: skip
    sel = qpadded >= 0
    out[order] = res.reshape(-1)[sel]


def _gathered(enc: Encoded, idx: np.ndarray) -> Encoded:
    """The sequences ``enc[idx]`` as an Encoded without copying letters (shared codes)."""
    starts = enc.offsets[idx]
    lengths = enc.offsets[idx + 1] - starts
    # pack_lanes reads codes[offsets[k]: offsets[k+1]]: build per-pair views via a gather
    total = int(lengths.sum())
    offsets = np.zeros(idx.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if total == 0:
        return Encoded(np.empty(0, np.uint8), offsets)
    pos = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1] - starts, lengths)
    return Encoded(enc.codes[pos], offsets)


def _run_pairs(idx, qcodes, qrow, qlens, qmax, tcodes, trow, tlens, tmax, mat, dna, args, dtype):
    def rows(codes, row_off, b_idx):
        parts = [codes[row_off[b] : row_off[b + 1]] for b in b_idx]
        off = np.zeros(b_idx.size + 1, dtype=np.int64)
        np.cumsum(row_off[b_idx + 1] - row_off[b_idx], out=off[1:])
        return np.ascontiguousarray(np.concatenate(parts)), off

    if idx.size == qmax.size:
        qc, qo, tc, to = qcodes, qrow, tcodes, trow
    else:
        qc, qo = rows(qcodes, qrow, idx)
        tc, to = rows(tcodes, trow, idx)
    sub = np.zeros((idx.size, K.LANES), dtype=np.int32)
    K.bucket_pairs(
        qc, qo, qlens[idx], qmax[idx], tc, to, tlens[idx], tmax[idx], mat, dna, *args,
        _NEG[dtype], np.zeros(1, dtype), sub,
    )  # fmt: skip
    return sub


def _ops(backend: Any) -> Any:
    """The score kernels of ``backend`` (a name, a Backend or None for ``HPC_BACKEND``).

    Resolving it also shares the node's cores among the ranks for numba's threads.
    """
    from hpc.backend import get_backend

    return SCORES.on(get_backend(backend))


@SCORES.gpu("pairs")
def _gpu_scores(qe, te, qi, ti, scoring, mode) -> np.ndarray:
    from . import cuda_kernels

    return cuda_kernels.score_pairs_gpu(qe, te, qi, ti, scoring, mode)


# --------------------------------------------------------------------------- tracebacks


@dataclass(frozen=True)
class Alignment:
    """One pairwise alignment.

    Attributes
    ----------
    score : int
    query_start, query_end, target_start, target_end : int
        Half-open, 0-based ranges of the aligned parts.
    cigar : str
        ``M`` aligned pair (match or mismatch), ``I`` query letter against a gap, ``D`` target
        letter against a gap (SAM's meaning, the target being the reference).
    identity : float
        Identical pairs over alignment columns (0 for an empty alignment).
    matches, columns : int
    """

    score: int
    query_start: int
    query_end: int
    target_start: int
    target_end: int
    cigar: str
    identity: float
    matches: int
    columns: int


def cigar_string(ops: np.ndarray) -> str:
    """Run-length CIGAR of operations (0 M, 1 I, 2 D)."""
    if ops.size == 0:
        return ""
    cut = np.flatnonzero(np.diff(ops.astype(np.int8))) + 1
    starts = np.concatenate(([0], cut))
    lengths = np.diff(np.concatenate((starts, [ops.size])))
    letters = np.array(list("MID"))[ops[starts]]
    return "".join(f"{n}{c}" for n, c in zip(lengths.tolist(), letters.tolist(), strict=True))


def parse_cigar(cigar: str) -> np.ndarray:
    """Operations (0 M, 1 I, 2 D) of a CIGAR of M, I, D (``=``/``X`` read as M)."""
    import re

    items = re.findall(r"(\d+)([MIDX=])", cigar)
    if "".join(n + c for n, c in items) != cigar:
        raise ValueError(f"malformed CIGAR {cigar!r}")
    code = {"M": 0, "=": 0, "X": 0, "I": 1, "D": 2}
    return np.concatenate(
        [np.full(int(n), code[c], np.uint8) for n, c in items] or [np.empty(0, np.uint8)]
    )


def rescore_cigar(
    query: SeqLike, target: SeqLike, alignment: Alignment, scoring: Scoring | str | None = None
) -> int:
    """Local. The score of ``alignment``'s CIGAR over its ranges, recomputed from the letters."""
    scoring = Scoring.of(scoring)
    q = encode_all([query], scoring).get(0)
    t = encode_all([target], scoring).get(0)
    ops = parse_cigar(alignment.cigar)
    g = scoring.gaps
    return int(
        K.rescore(
            q, t, alignment.query_start, alignment.target_start, ops,
            scoring.matrix.scores, g.first, g.extend,
        )
    )  # fmt: skip


def _band_limits(m: int, n: int, band: int | None, mode: int) -> tuple[int, int]:
    if band is None:
        return -m, n
    band = int(band)
    if band < 0:
        raise ValueError(f"band must be >= 0, got {band}")
    if mode == K.SEMIGLOBAL:
        raise ValueError("a band needs mode 'global' or 'local' (semi-global reads float)")
    return min(0, n - m) - band, max(0, n - m) + band


def _align_codes(q: np.ndarray, t: np.ndarray, scoring: Scoring, mode: int, band) -> Alignment:
    lo, hi = _band_limits(q.size, t.size, band, mode)
    g = scoring.gaps
    score, qs, qe_, ts, te_, ops = K.traceback_pair(
        q, t, scoring.matrix.scores, g.first, g.extend, mode, lo, hi
    )
    pairs = ops == 0
    # aligned pairs are consecutive runs; matches by comparing the letters they pair
    qi = qs + np.cumsum(ops != 2) - (ops != 2)
    ti = ts + np.cumsum(ops != 1) - (ops != 1)
    matches = int((q[qi[pairs]] == t[ti[pairs]]).sum()) if ops.size else 0
    cols = int(ops.size)
    return Alignment(
        int(score), int(qs), int(qe_), int(ts), int(te_), cigar_string(ops),
        matches / cols if cols else 0.0, matches, cols,
    )  # fmt: skip


def align(
    query: SeqLike,
    target: SeqLike,
    scoring: Scoring | str | None = None,
    mode: str = "local",
    band: int | None = None,
) -> Alignment:
    """Local. Align one pair with traceback.

    Parameters
    ----------
    query, target : str, bytes or uint8 codes
    scoring : Scoring or matrix name, optional
    mode : {"local", "global", "semi-global"}
    band : int, optional
        Only cells with ``min(0, n - m) - band <= j - i <= max(0, n - m) + band`` are computed
        (global and local): linear time and memory in the length for similar sequences. The
        score is the best within the band.

    Returns
    -------
    Alignment
        For local mode with no positive score: score 0, empty ranges and CIGAR.
    """
    scoring = Scoring.of(scoring)
    m = _mode(mode)
    qe = encode_all([query], scoring, "query").get(0)
    te = encode_all([target], scoring, "target").get(0)
    return _align_codes(qe, te, scoring, m, band)


def align_pairs(
    queries: Sequence[SeqLike] | Encoded,
    targets: Sequence[SeqLike] | Encoded,
    scoring: Scoring | str | None = None,
    mode: str = "local",
    band: int | None = None,
    query_index: np.ndarray | None = None,
    target_index: np.ndarray | None = None,
) -> list[Alignment]:
    """Local. Tracebacks of pairs (like :func:`score_pairs`), one :class:`Alignment` each."""
    scoring, m, qe, te, qi, ti = _pair_inputs(
        queries, targets, scoring, mode, query_index, target_index
    )
    return [
        _align_codes(qe.get(int(a)), te.get(int(b)), scoring, m, band)
        for a, b in zip(qi, ti, strict=True)
    ]
