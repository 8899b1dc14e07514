"""Intra-pair kernel (numba): one pair's dynamic programming in SIMD lanes, Farrar's striped layout.

The batched kernels of :mod:`hpc.domains.align.kernels` put *pairs* in the SIMD lanes, so a
few long pairs leave most lanes empty. This kernel puts one pair's *query positions* in the
lanes instead (Farrar 2007, "Striped Smith-Waterman speeds database searches six times over
other SIMD implementations"): with ``V`` lanes per 256-bit vector (32 of 8-bit, 16 of 16-bit,
8 of 32-bit scores), the query of length ``m`` is cut into ``V`` runs of ``seg = ceil(m /
V)`` positions, lane ``l`` holding positions ``l * seg .. l * seg + seg - 1``, and a vector
(one *segment* ``s``) holds positions ``s, seg + s, 2 seg + s, ...``. Within a target column
the vectors of consecutive segments are consecutive query positions of every lane, so the
diagonal, E (the gap along the target, carried from the previous column) and F (the gap along
the query) within a lane need no shuffles, and a query profile ``P[t, s, lane] = s(q[lane *
seg + s], t)`` makes every substitution score one contiguous load. Vectors are SSA values
(:mod:`hpc.domains.align._vectors`), so F, the diagonal and the running maximum stay in
registers.

F crossing from one lane's last position into the next lane's first is settled per column
in one of two forms, chosen column by column:

- **lazy F** (Farrar): after the column, the carried F, shifted by one lane, is pushed down
  the segments until it no longer beats the F already there in any lane; cheap when F dies
  out quickly (unrelated sequences, local mode);
- **prefix scan** (Farrar's lanes, Daily's "Parasail" scan, 2016): F is a max-plus scan of
  ``max(M, E)`` alone, so a first pass computes ``max(M, E)``, the lane carries cross the
  lanes in ``log2(V)`` shift-and-max steps with decays ``k * seg * extend``, and a second pass
  settles F, H and the next column's E; its cost does not depend on the scores.

A lazy-F column that walks more than about half the segments (a high-scoring alignment above
lower scores: related sequences, global and semi-global modes) switches the next
:data:`SCAN_COLUMNS` columns to the scan form, after which lazy F is tried again.

The recurrences, modes, boundaries and the three-state / two-state forms are exactly those of
:mod:`hpc.domains.align.kernels` (so the scores are equal): ``M = max(H_diag, floor) + s``,
``E`` opens from ``max(M, F)``, ``F`` from ``max(M, E)`` (three-state form, ``extend >
first``) or both from ``H`` (two-state form). In both forms F never feeds ``max(M, E)``, and
raising F at a position raises H and the next column's E by the same amount, which is what
both column forms rely on.

Lane widths, cheapest first (SSW, parasail): local pairs run in unsigned 8-bit lanes, every
value clamped at 0 (which changes no positive score) and the profile biased by ``-min
score`` so that saturating arithmetic stays exact; global and semi-global pairs whose borders
fit (:func:`fits_16`) run in 16-bit lanes, as do local pairs whose 8-bit run may have
saturated; what may have wrapped there runs in 32 bits. Overflow is detected exactly: every
H (padding positions past the query's end and values raised by either column form included)
goes into a running maximum, and only an H within ``max score`` of the lane type's top can
make a later value saturate or wrap; a run stops early once its maximum gets there. Pairs are
spread over the cores with ``prange``, dealt by modelled cost.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ._vectors import (
    BITS,
    vadd,
    vany_gt,
    vhmax,
    vlanes,
    vload,
    vmax,
    vshift,
    vshift2,
    vshift4,
    vshift8,
    vshift16,
    vsigned,
    vsplat,
    vstore,
    vsub,
    vsubs,
)
from .kernels import GLOBAL, LOCAL, SEMIGLOBAL, _add, _sub

__all__ = [
    "STRIPE",
    "striped_pairs",
    "striped_pairs_serial",
    "striped_cascade",
    "score_striped",
    "fits_16",
    "NEG16",
    "NEG32",
    "HIGH16",
    "striped_cost",
    "lanes_cost",
    "warm",
]

STRIPE = BITS // 16  # query positions per vector of 16-bit scores (8-bit: twice, 32: half)
NEG16 = -(1 << 15) + 2048  # "minus infinity" of the 16-bit lanes (room below for one gap)
NEG32 = -(1 << 29)
HIGH16 = (1 << 15) - 1
SCAN_COLUMNS = 32  # columns in the scan form after a column whose lazy F ran far


@numba.njit(cache=True)
def _gap(length, first, extend):
    return first + (length - 1) * extend if length > 0 else 0


@numba.njit(cache=True)
def fits_16(first: int, extend: int, min_score: int, max_score: int, pad: int, m: int,
            n: int, mode: int) -> bool:  # fmt: skip
    """Whether a pair's *lowest* values stay above :data:`NEG16` with room for one more gap
    (known before running; the high side is checked after the run). Local values never fall
    below ``-(first + extend + |min score|)``; semi-global ones reach ``-gap(m + STRIPE)``
    down the first column, global ones ``-(gap(m + STRIPE) + gap(n))`` (padding rows
    included)."""
    small = first + extend + abs(min(min_score, pad, 0)) + 2
    if small + abs(max(max_score, 0)) >= 1024:
        return False
    low = small
    if mode != LOCAL:
        low += _gap(m + STRIPE, first, extend) + (_gap(n, first, extend) if mode == GLOBAL else 0)
    return low < -NEG16 - 256


@numba.njit(cache=True)
def _empty_score(m, n, first, extend, mode):
    """The score when the query or the target is empty (the recurrences' borders)."""
    if mode == LOCAL:
        return 0
    if mode == GLOBAL:
        return -_gap(m, first, extend) - _gap(n, first, extend)
    return -_gap(m, first, extend)  # semi-global: the query end to end, the target free


@numba.njit(cache=True)
def _striped_one(
    query, target, matrix, first, extend, mode, three, neg, bias, proto, scan, stop, hs, es,
    j0, best0, semi0,
):  # fmt: skip
    """One pair (both non-empty): ``(score, largest H, 0)``, or ``(semi-global maximum so
    far, largest H so far, j)`` when the largest H reached ``stop`` after column ``j < n``
    (the next column could saturate or wrap): H and E of every query position after column
    ``j`` are then in ``hs`` and ``es``, exact, and a wider run resumes there (``j0 = j``,
    ``best0``, ``semi0`` the returned maxima; the state is read from ``hs``, ``es``).

    ``proto``'s dtype is the lanes' (uint8: local mode only, scores clamped at 0 and biased
    by ``bias`` in the profile, SSW-style; int16, int32: wrapping). ``scan``: every column in
    the prefix-scan form (else lazy F, switching to the scan form where F runs far).
    """
    V = vlanes(proto)
    signed = vsigned(proto)
    m = query.shape[0]
    n = target.shape[0]
    alpha = matrix.shape[0] - 1  # the last row and column score the padding letter
    seg = (m + V - 1) // V
    dt = proto.dtype
    zero = _sub(proto[0], proto[0])
    local = mode == LOCAL
    vfloor = vsplat(_add(zero, 0 if local else neg))
    vfst = vsplat(_add(zero, first))
    vext = vsplat(_add(zero, extend))
    vneg = vsplat(_add(zero, neg))
    vdif = vsplat(_add(zero, first - extend))
    vbias = vsplat(_add(zero, bias))
    # the decay of F over 1, 2, 4, 8, 16 lanes of seg positions (subtracted saturating,
    # capped at the lane type's top: a carry that falls below neg is minus infinity anyway)
    cap = 255 if neg == 0 else (32767 if neg > -(1 << 16) else (1 << 31) - 1)
    dec1 = vsplat(_add(zero, min(seg * extend, cap)))
    dec2 = vsplat(_add(zero, min(2 * seg * extend, cap)))
    dec4 = vsplat(_add(zero, min(4 * seg * extend, cap)))
    dec8 = vsplat(_add(zero, min(8 * seg * extend, cap)))
    dec16 = vsplat(_add(zero, min(16 * seg * extend, cap)))
    # the query profile, padding positions scoring as the padding letter (below every score)
    prof = np.empty(alpha * seg * V, dt)
    for c in range(alpha):
        for s in range(seg):
            for lane in range(V):
                p = lane * seg + s
                a = query[p] if p < m else alpha
                prof[(c * seg + s) * V + lane] = matrix[a, c] + bias
    # per segment s, w from 2 s V: H of the last column, E of the next column; x from 2 s V:
    # this column's F (lazy-F columns) or max(M, E), and M (scan columns)
    w = np.empty(seg * 2 * V, dt)
    x = np.empty(seg * 2 * V, dt)
    for s in range(seg):
        for lane in range(V):
            i = lane * seg + s + 1
            if j0 == 0:  # the first column's borders
                h0 = 0 if local else -_gap(i, first, extend)
                e0 = max(h0 - first, neg)
            elif i <= m:  # a narrower run's state
                h0, e0 = hs[i - 1], es[i - 1]
            else:  # padding rows feed only padding rows
                h0, e0 = 0 if local else neg, neg
            w[2 * s * V + lane] = h0
            w[(2 * s + 1) * V + lane] = e0
            x[2 * s * V + lane] = neg
    best = vsplat(_add(zero, (0 if local else neg) if j0 == 0 else best0))
    # largest H that cannot make the next column saturate or wrap (capped at the type's top)
    vstop = vsplat(_add(zero, min(stop - 1, cap)))
    last_s = (m - 1) % seg
    last_l = (m - 1) // seg
    semi = -_gap(m, first, extend) if j0 == 0 else semi0  # H[m, 0]
    scan_left = n + 1 if scan else 0  # columns still to run in the scan form
    for j in range(j0 + 1, n + 1):
        pbase = target[j - 1] * seg * V
        row_prev = 0 if mode != GLOBAL else -_gap(j - 1, first, extend)
        row_here = 0 if mode != GLOBAL else -_gap(j, first, extend)
        d = vshift(vload(w, 2 * (seg - 1) * V), row_prev)
        if scan_left > 0:
            # the prefix-scan form: F is a scan of max(M, E) (H's other terms), so a first
            # pass computes max(M, E), the carries cross the lanes in log2(STRIPE) steps,
            # and a second pass settles F, H and the next column's E
            scan_left -= 1
            f = vneg
            for s in range(seg):
                o = 2 * s * V
                mm = vadd(vmax(d, vfloor), vload(prof, pbase + s * V))
                if not signed:
                    mm = vsub(mm, vbias)
                me = vmax(mm, vload(w, o + V))
                d = vload(w, o)
                vstore(x, o, me)
                if three:  # E opens from max(M, F): keep M for the second pass
                    vstore(x, o + V, mm)
                f = vmax(vsub(f, vext), vsub(me, vfst))
            c = vshift(f, max(row_here - first, neg))
            c = vmax(c, vmax(vsubs(vshift(c, neg), dec1), vneg))
            c = vmax(c, vmax(vsubs(vshift2(c, neg), dec2), vneg))
            c = vmax(c, vmax(vsubs(vshift4(c, neg), dec4), vneg))
            if V > 8:
                c = vmax(c, vmax(vsubs(vshift8(c, neg), dec8), vneg))
            if V > 16:
                c = vmax(c, vmax(vsubs(vshift16(c, neg), dec16), vneg))
            f = c
            for s in range(seg):
                o = 2 * s * V
                me = vload(x, o)
                h = vmax(me, f)
                vstore(w, o, h)
                best = vmax(best, h)
                e = vsub(vload(w, o + V), vext)
                if three:
                    vstore(w, o + V, vmax(e, vsub(vmax(vload(x, o + V), f), vfst)))
                else:
                    vstore(w, o + V, vmax(e, vsub(h, vfst)))
                f = vmax(vsub(f, vext), vsub(me, vfst))
        else:
            f = vshift(vneg, max(row_here - first, neg))
            if three:
                for s in range(seg):
                    o = 2 * s * V
                    mm = vadd(vmax(d, vfloor), vload(prof, pbase + s * V))
                    if not signed:
                        mm = vsub(mm, vbias)
                    e = vload(w, o + V)
                    h = vmax(vmax(mm, e), f)  # F last: the carried chain is max, sub, max
                    best = vmax(best, h)
                    d = vload(w, o)
                    vstore(w, o, h)
                    vstore(x, o, f)
                    vstore(w, o + V, vmax(vsub(e, vext), vsub(vmax(mm, f), vfst)))
                    f = vmax(vsub(f, vext), vsub(vmax(mm, e), vfst))
            else:
                for s in range(seg):
                    o = 2 * s * V
                    mm = vadd(vmax(d, vfloor), vload(prof, pbase + s * V))
                    if not signed:
                        mm = vsub(mm, vbias)
                    e = vload(w, o + V)
                    h = vmax(vmax(mm, e), f)  # F last: the carried chain is max, sub, max
                    best = vmax(best, h)
                    d = vload(w, o)
                    vstore(w, o, h)
                    t = vsub(h, vfst)
                    vstore(w, o + V, vmax(vsub(e, vext), t))
                    f = vmax(vsub(f, vext), t)
            # lazy F: the F leaving each lane's last position enters the next lane's first
            c = vshift(f, neg)
            done = False
            lazy = 0
            for _ in range(V):
                for s in range(seg):
                    o = 2 * s * V
                    if three:  # F is stored: done when no lane's F rises
                        fo = vload(x, o)
                        if not vany_gt(c, fo):
                            done = True
                            break
                        vstore(x, o, vmax(fo, c))
                    elif not vany_gt(c, vsub(vload(w, o), vdif)):
                        # two-state: F at s + 1 is at least H' - first, so a candidate
                        # within first - extend of H' neither raises H here nor F below
                        done = True
                        break
                    lazy += 1
                    h = vmax(vload(w, o), c)
                    vstore(w, o, h)
                    best = vmax(best, h)
                    vstore(w, o + V, vmax(vload(w, o + V), vsub(c, vfst)))
                    c = vmax(vsub(c, vext), vneg)
                if done:
                    break
                c = vshift(c, neg)
            if 2 * lazy > seg + 2:
                # F runs far down this column (a high-scoring region above lower ones):
                # the scan form costs less for a while
                scan_left = SCAN_COLUMNS
        if mode == SEMIGLOBAL:
            semi = max(semi, np.int64(w[2 * last_s * V + last_l]))
        if j < n and vany_gt(best, vstop):
            # this column was exact (its inputs were below stop): hand over to wider lanes
            for s in range(seg):
                for lane in range(V):
                    i = lane * seg + s
                    if i < m:
                        hs[i] = w[2 * s * V + lane]
                        es[i] = w[(2 * s + 1) * V + lane]
            return semi, vhmax(best), j
    high = vhmax(best)
    if mode == LOCAL:
        return max(high, 0), high, 0
    if mode == GLOBAL:
        return np.int64(w[2 * last_s * V + last_l]), high, 0
    return semi, high, 0


@numba.njit(cache=True)
def _pair(
    k, qcodes, qoff, tcodes, toff, qi, ti, matrix, first, extend, mode, three, neg, bias, proto,
    scan, stop, hs, es, soff, j0, out, high,
):  # fmt: skip
    q = qcodes[qoff[qi[k]] : qoff[qi[k] + 1]]
    t = tcodes[toff[ti[k]] : toff[ti[k] + 1]]
    if q.shape[0] == 0 or t.shape[0] == 0:
        out[k] = _empty_score(q.shape[0], t.shape[0], first, extend, mode)
        high[k] = 0
        j0[k] = 0
        return
    h = hs[soff[k] : soff[k] + q.shape[0]]
    e = es[soff[k] : soff[k] + q.shape[0]]
    out[k], high[k], j0[k] = _striped_one(
        q, t, matrix, first, extend, mode, three, neg, bias, proto, scan, stop, h, e, j0[k],
        high[k], out[k],
    )  # fmt: skip


@numba.njit(parallel=True, cache=True)
def striped_pairs(
    qcodes, qoff, tcodes, toff, qi, ti, bins, matrix, first, extend, mode, three, neg, bias,
    proto, scan, stop, hs, es, soff, j0, out, high,
):  # fmt: skip
    """Pairs ``bins[b]:bins[b+1]`` on one thread each (``prange`` over the bins): pair ``k``
    is query ``qi[k]`` against target ``ti[k]``, its state ``hs``, ``es`` from ``soff[k]``;
    ``j0[k]``, ``high[k]``, ``out[k]`` are :func:`_striped_one`'s ``j0``, ``best0``,
    ``semi0`` in and its three results out (``j0[k] > 0``: resume in wider lanes)."""
    for b in prange(bins.shape[0] - 1):
        for k in range(bins[b], bins[b + 1]):
            _pair(
                k, qcodes, qoff, tcodes, toff, qi, ti, matrix, first, extend, mode, three, neg,
                bias, proto, scan, stop, hs, es, soff, j0, out, high,
            )  # fmt: skip


@numba.njit(cache=True)
def striped_pairs_serial(
    qcodes, qoff, tcodes, toff, qi, ti, matrix, first, extend, mode, three, neg, bias, proto,
    scan, stop, hs, es, soff, j0, out, high,
):  # fmt: skip
    """:func:`striped_pairs` in the calling thread (no parallel region to start: one pair)."""
    for k in range(qi.shape[0]):
        _pair(
            k, qcodes, qoff, tcodes, toff, qi, ti, matrix, first, extend, mode, three, neg,
            bias, proto, scan, stop, hs, es, soff, j0, out, high,
        )  # fmt: skip


@numba.njit(cache=True)
def striped_cascade(
    qcodes, qoff, tcodes, toff, qi, ti, matrix, first, extend, mode, three, scan, low, top, pad,
    eight, sixteen, out,
):  # fmt: skip
    """Pairs ``(qi[k], ti[k])`` one after another in the calling thread, each through its
    whole cascade of lane widths at once: 8 bits first where ``eight`` (local pairs whose
    costs fit), 16 bits where the 8-bit run stopped or, for a fresh pair, where ``sixteen``
    and :func:`fits_16` admit it, 32 bits where a narrower run stopped. The scores go into
    ``out``. These are the runs :func:`score_striped` makes over its groups of pairs, made
    pair by pair: for one pair or one thread, one dispatch and no per-run arrays (a call of
    one short pair spent most of its time in them)."""
    longest = 0
    for k in range(qi.shape[0]):
        longest = max(longest, qoff[qi[k] + 1] - qoff[qi[k]])
    hs = np.empty(longest, np.int32)
    es = np.empty(longest, np.int32)
    bias8 = np.int64(-min(low, pad, 0))
    p8 = np.zeros(1, np.uint8)
    p16 = np.zeros(1, np.int16)
    p32 = np.zeros(1, np.int32)
    zero = np.int64(0)
    for k in range(qi.shape[0]):
        q = qcodes[qoff[qi[k]] : qoff[qi[k] + 1]]
        t = tcodes[toff[ti[k]] : toff[ti[k] + 1]]
        m, n = q.shape[0], t.shape[0]
        if m == 0 or n == 0:
            out[k] = _empty_score(m, n, first, extend, mode)
            continue
        h, e = hs[:m], es[:m]
        score, best, j = zero, zero, zero
        narrow = False  # whether this pair runs in 16-bit lanes (fresh or resumed)
        if eight:
            s8, b8, j8 = _striped_one(q, t, matrix, first, extend, mode, three, zero, bias8,
                                      p8, scan, 254 - top - bias8, h, e, zero, zero, zero)
            score, best, j = np.int64(s8), np.int64(b8), np.int64(j8)
            if j == 0:
                out[k] = score
                continue
            narrow = True
        elif sixteen:
            narrow = fits_16(first, extend, low, top, pad, m, n, mode)
        if narrow:
            s16, b16, j16 = _striped_one(q, t, matrix, first, extend, mode, three,
                                         np.int64(NEG16), zero, p16, scan,
                                         np.int64(HIGH16 - 1) - top, h, e, j, best, score)
            score, best, j = np.int64(s16), np.int64(b16), np.int64(j16)
            if j == 0:
                out[k] = score
                continue
        s32, _, _ = _striped_one(q, t, matrix, first, extend, mode, three, np.int64(NEG32),
                                 zero, p32, scan, np.int64(1 << 62) - top, h, e, j, best, score)
        out[k] = s32


def _deal(cost: np.ndarray, bins: int) -> list[np.ndarray]:
    """Indices of ``cost`` dealt into ``bins`` of nearly equal total: the costliest first, in
    snake order (0, 1, ..., bins - 1, bins - 1, ..., 0, 0, 1, ...)."""
    bins = max(1, min(bins, cost.size))
    order = np.argsort(-cost, kind="stable")
    turn = np.arange(cost.size) % (2 * bins)
    lane = np.where(turn < bins, turn, 2 * bins - 1 - turn)
    return [order[lane == b] for b in range(bins)]


def score_striped(
    qcodes, qoff, tcodes, toff, qi, ti, scoring, mode: int, scan: bool = False, bits: int = 8
) -> np.ndarray:
    """Scores of pairs ``(qi[k], ti[k])`` of encoded sequences with the striped kernel.

    Local pairs run in 8-bit lanes first (when the costs fit them); pairs whose largest H
    shows that a lane may have saturated, and every global and semi-global pair whose
    borders fit (:func:`fits_16`), run in 16-bit lanes; pairs whose largest H shows a wrap
    may have happened run again in 32 bits.

    Parameters
    ----------
    qcodes, qoff, tcodes, toff : ndarray
        Codes (uint8) and offsets (int64) of the queries and targets.
    qi, ti : ndarray
        int64 indices of each pair's query and target.
    scoring : Scoring
    mode : int
        ``LOCAL``, ``GLOBAL`` or ``SEMIGLOBAL``.
    scan : bool
        Every column in the prefix-scan form (tests); default: lazy F, switching per column.
    bits : {8, 16, 32}
        The narrowest lanes to start in (tests; 8: local pairs start in 8 bits).

    Returns
    -------
    ndarray
        int64 scores.
    """
    qi = np.ascontiguousarray(qi, dtype=np.int64)
    ti = np.ascontiguousarray(ti, dtype=np.int64)
    n = qi.size
    out = np.zeros(n, np.int64)
    if n == 0:
        return out
    mat, g = scoring.matrix, scoring.gaps
    scores = mat.scores
    pad = int(scores[mat.size, 0])
    low, top = mat.min_score, max(mat.max_score, 0)
    three = g.extend > g.first
    eight = bits == 8 and mode == LOCAL and -min(low, pad, 0) + top + g.first + g.extend < 128
    threads = numba.get_num_threads()
    if n == 1 or threads == 1:  # no parallel region to start: each pair's cascade at once
        striped_cascade(qcodes, qoff, tcodes, toff, qi, ti, scores, g.first, g.extend, mode,
                        three, scan, low, top, pad, eight, bits <= 16, out)  # fmt: skip
        return out
    qlen = qoff[qi + 1] - qoff[qi]
    tlen = toff[ti + 1] - toff[ti]
    # where a run stops, the next resumes: H and E of each query position (pages of the
    # state are touched only by the pairs that stop), the column, the maxima so far
    soff = np.zeros(n + 1, np.int64)
    np.cumsum(qlen, out=soff[1:])
    hs = np.empty(int(soff[-1]), np.int32)
    es = np.empty(int(soff[-1]), np.int32)
    j0 = np.zeros(n, np.int64)
    high = np.zeros(n, np.int64)

    def run(idx: np.ndarray, dtype) -> np.ndarray:
        """Run (or resume) pairs ``idx`` in ``dtype`` lanes; those that stopped, to resume
        in wider lanes."""
        neg, bias, limit = {
            np.uint8: (0, -min(low, pad, 0), 254),
            np.int16: (NEG16, 0, HIGH16 - 1),
            np.int32: (NEG32, 0, 1 << 62),
        }[dtype]
        # a lane can saturate (8-bit) or wrap (16-bit) only after an H within the largest
        # score of the top: the run stops there
        args = (
            scores, g.first, g.extend, mode, three, neg, bias, np.zeros(1, dtype), scan,
            limit - top - bias, hs, es,
        )  # fmt: skip
        if idx.size == 1:  # no parallel region to start
            sub = idx
        else:  # the pairs dealt to the threads by modelled cost, the costliest first
            bins = _deal(striped_cost(qlen[idx], tlen[idx]), threads)
            sub = idx[np.concatenate(bins)]
            bounds = np.zeros(len(bins) + 1, np.int64)
            np.cumsum([b.size for b in bins], out=bounds[1:])
        j, o, h = j0[sub], out[sub], high[sub]
        if sub is idx:
            striped_pairs_serial(qcodes, qoff, tcodes, toff, qi[sub], ti[sub], *args,
                                 soff[sub], j, o, h)  # fmt: skip
        else:
            striped_pairs(qcodes, qoff, tcodes, toff, qi[sub], ti[sub], bounds, *args,
                          soff[sub], j, o, h)  # fmt: skip
        j0[sub], out[sub], high[sub] = j, o, h
        return sub[j > 0]

    todo = np.arange(n)
    if eight:
        todo = run(todo, np.uint8)  # the rest resumes in 16 bits
        fresh = np.empty(0, np.int64)
    else:
        fresh, todo = todo, np.empty(0, np.int64)
    narrow = np.array(
        [bits <= 16 and fits_16(g.first, g.extend, low, top, pad, int(a), int(b), mode)
         for a, b in zip(qlen[fresh].tolist(), tlen[fresh].tolist(), strict=True)],
        dtype=bool,
    )  # fmt: skip
    todo = np.concatenate([todo, fresh[narrow]])
    if todo.size:
        todo = run(todo, np.int16)
    todo = np.concatenate([todo, fresh[~narrow]])
    if todo.size:
        run(todo, np.int32)
    return out


def warm() -> None:
    """Compile (or load from numba's cache) the striped kernels of every lane type, serial
    and parallel (for ``hpc warmup``)."""
    from .scoring import Scoring

    codes = np.zeros(40, np.uint8)
    off = np.array([0, 20, 40], np.int64)
    k = np.arange(2)
    with_threads = numba.get_num_threads()
    try:
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            for mode in (LOCAL, GLOBAL):  # local: 8 bits first; global: 16 bits
                score_striped(codes, off, codes, off, k[:threads], k[:threads],
                              Scoring("BLOSUM62"), mode)  # fmt: skip
            # 32 bits: a gap cost too large for 16-bit lanes
            score_striped(codes, off, codes, off, k[:threads], k[:threads],
                          Scoring("BLOSUM62", 3000, 1), GLOBAL)  # fmt: skip
    finally:
        numba.set_num_threads(with_threads)


# --------------------------------------------------------------------------- kernel choice
# A cost model in nanoseconds of one core (16-bit scores; fitted on an AVX-512 Xeon, 2026):
# the striped kernel pays per pair (call, profile), per target column (lane shifts, the
# lazy-F check, the semi-global read-out) and per segment of 16 cells; a lane kernel pays
# per step of its bucket (``LANES`` cells, whether the lanes hold pairs or padding), with a
# matrix lookup per lane (pairs), a comparison (DNA pairs) or a shared profile (one query
# against a bucket of targets). The batch entry points give each bucket to the cheaper one.
STRIPED_PAIR_NS = 2000.0
STRIPED_COLUMN_NS = 50.0
STRIPED_SEGMENT_NS = 1.8
LANES_STEP_NS = {"lookup": 22.0, "compare": 6.0, "shared": 5.5}


def striped_cost(m, n):
    """Modelled nanoseconds of the striped kernel for queries of length ``m`` against
    targets of length ``n`` (integers or integer arrays, element-wise; plain arithmetic, so
    that a call's choice for a few pairs costs no array work)."""
    segments = -(-m // STRIPE)
    return STRIPED_PAIR_NS + n * (STRIPED_COLUMN_NS + segments * STRIPED_SEGMENT_NS)


def lanes_cost(m, n, kind: str, wide=False):
    """Modelled nanoseconds of a lane kernel's bucket of ``m`` by ``n`` steps (its longest
    query and target, numbers or arrays; ``kind`` in :data:`LANES_STEP_NS`; 32-bit buckets,
    ``wide``, a bool or bool array, cost twice)."""
    return m * n * LANES_STEP_NS[kind] * (1.0 + wide)
