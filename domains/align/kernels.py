"""CPU kernels (numba): batched score-only dynamic programming and one-pair traceback.

Batched kernels vectorise *across* pairs: a bucket holds ``LANES`` pairs of similar lengths,
laid out ``[position, lane]``; the innermost loop runs over the lanes, so LLVM turns every
recurrence step into SIMD instructions on 16-bit (or, after an overflow, 32-bit) scores.
``prange`` spreads the buckets over the cores.

Recurrences (the three-state form of Gotoh's algorithm; a gap of length ``L`` costs
``first + (L - 1) * extend``, see :mod:`hpc.domains.align.scoring`)::

    M[i, j] = max(M, E, F)[i-1, j-1] + s(q_i, t_j)        (local: max(0, ...) + s)
    E[i, j] = max(E[i, j-1] - extend, max(M, F)[i, j-1] - first)   # gap in the query (D)
    F[i, j] = max(F[i-1, j] - extend, max(M, E)[i-1, j] - first)   # gap in the target (I)

A gap therefore opens only from another state: a run of gaps of one kind is one gap, whatever
``extend`` is. When ``extend <= first`` re-opening never pays and the kernels use the cheaper
two-state form (opening from ``H = max(M, E, F)``), which gives the same scores.

Modes: 0 local (Smith-Waterman), 1 global (Needleman-Wunsch), 2 semi-global (the query is
aligned end to end, the target's leading and trailing letters are free).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange, types
from numba.extending import intrinsic

__all__ = [
    "LANES",
    "LOCAL",
    "GLOBAL",
    "SEMIGLOBAL",
    "pack_lanes",
    "bucket_shared",
    "bucket_pairs",
    "traceback_pair",
    "rescore",
]

LANES = 32
LOCAL, GLOBAL, SEMIGLOBAL = 0, 1, 2
# pointer codes of the traceback
_FROM_M, _FROM_E, _FROM_F, _START = 0, 1, 2, 3


def _binary(name: str):
    """An integer operation in the type of its first operand (numba would widen to 64 bits,
    which quarters the SIMD width of 16-bit scores)."""

    @intrinsic
    def op(typingctx, a, b):
        if not isinstance(a, types.Integer) or not isinstance(b, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            x = args[0]
            y = context.cast(builder, args[1], signature.args[1], signature.args[0])
            if name == "add":
                return builder.add(x, y)
            if name == "sub":
                return builder.sub(x, y)
            return builder.select(builder.icmp_signed(">", x, y), x, y)

        return a(a, b), codegen

    return op


_add = _binary("add")
_sub = _binary("sub")
_max = _binary("max")


@numba.njit(parallel=True, cache=True)
def pack_lanes(codes, offsets, order, nb, maxlen, row_off, pad, out, lens):
    """Fill ``out[row_off[b] + p, lane]`` with letter ``p`` of sequence ``order[b*LANES+lane]``.

    Empty lanes (``order < 0``) and positions past a sequence's end hold ``pad``.
    """
    lanes = out.shape[1]
    for b in prange(nb):
        base = row_off[b]
        for p in range(maxlen[b]):
            for lane in range(lanes):
                out[base + p, lane] = pad
        for lane in range(lanes):
            k = order[b * lanes + lane]
            if k < 0:
                lens[b, lane] = 0
                continue
            start = offsets[k]
            n = offsets[k + 1] - start
            lens[b, lane] = n
            for p in range(n):
                out[base + p, lane] = codes[start + p]


# The recurrence, written once. Plain functions: compiled here for the CPU kernels (inlined
# into them at numba IR level, so LLVM sees one flat loop body per lane loop), and by
# :func:`hpc.jit.specialise` as device functions of the GPU kernel
# (:mod:`hpc.domains.align.cuda_kernels`, which gives ``_add``, ``_sub``, ``_max`` 32-bit versions).
# The substitution score ``s`` is the caller's: a profile or matrix lookup, a DNA comparison.


def _gap(length, first, extend):
    """The cost of a gap of ``length`` letters."""
    return first + (length - 1) * extend


def _cell(diag, e_left, open_left, f_up, open_up, s, floor, fst, ext):
    """One Gotoh cell: ``(M, E, F)`` from the cell's neighbours.

    ``diag``: ``max(M, E, F)`` of the diagonal neighbour (``floor``: 0 in local mode, else a
    large negative); ``e_left``/``f_up``: E of the left and F of the upper neighbour, extended
    by ``ext``; ``open_left``/``open_up``: the scores a gap opens from (``fst``) there, i.e.
    ``max(M, F)`` on the left and ``max(M, E)`` above (three-state form), or ``H`` for both
    (two-state form). Operations keep the type of ``diag`` (16-bit lanes stay 16-bit).
    """
    mm = _add(_max(diag, floor), s)
    ee = _max(_sub(e_left, ext), _sub(open_left, fst))
    ff = _max(_sub(f_up, ext), _sub(open_up, fst))
    return mm, ee, ff


def _cell3(diag, e_left, mf_left, f_up, me_up, s, floor, fst, ext):
    """Three-state cell: ``(H, E, F, max(M, E), max(M, F))``; the last two are what gaps
    open from below (the next row's ``me_up``) and to the right (the next ``mf_left``)."""
    mm, ee, ff = _cell(diag, e_left, mf_left, f_up, me_up, s, floor, fst, ext)
    return _max(mm, _max(ee, ff)), ee, ff, _max(mm, ee), _max(mm, ff)


def _cell2(diag, e_left, h_left, f_up, h_up, s, floor, fst, ext):
    """Two-state cell (gaps open from ``H``, valid when ``extend <= first``): ``(H, E, F)``."""
    mm, ee, ff = _cell(diag, e_left, h_left, f_up, h_up, s, floor, fst, ext)
    return _max(mm, _max(ee, ff)), ee, ff


def _cell_ptr(m_d, e_d, f_d, m_l, e_l, f_l, m_u, e_u, f_u, s, floor, fst, ext, local):
    """Three-state cell of the traceback, from the ``M, E, F`` of the diagonal, left and upper
    neighbours: ``(M, E, F, pointers)``, the pointer bits naming each state's source (M: bits
    0-1, E: bits 2-3, F: bits 4-5), ties going to M, then E, then F. Not local, ``floor`` is
    the traceback's "unreachable" value, which an M from an unreachable diagonal keeps."""
    # the sources from the operands, as a chain of compares (cheaper than testing the results)
    src = _FROM_M
    hd = m_d
    if e_d > hd:
        hd, src = e_d, _FROM_E
    if f_d > hd:
        hd, src = f_d, _FROM_F
    if local and hd <= 0:
        src = _START
    o_l, esrc = (f_l, _FROM_F) if f_l > m_l else (m_l, _FROM_M)
    o_u, fsrc = (e_u, _FROM_E) if e_u > m_u else (m_u, _FROM_M)
    mm, ee, ff = _cell(hd, e_l, o_l, f_u, o_u, s, floor, fst, ext)
    if e_l - ext >= o_l - fst:
        esrc = _FROM_E
    if f_u - ext >= o_u - fst:
        fsrc = _FROM_F
    if not local and hd <= floor:  # M of an unreachable diagonal
        mm = floor
    return mm, ee, ff, src | (esrc << 2) | (fsrc << 4)


CELL_TEMPLATES = (_gap, _cell, _cell3, _cell2)  # what the GPU kernel compiles (hpc.jit)
_gap, _cell, _cell3, _cell2, _cell_ptr = (
    numba.njit(inline="always")(fn) for fn in (*CELL_TEMPLATES, _cell_ptr)
)


@numba.njit(inline="always")
def _dna_score(a, t, hit, miss, amb, ncode, pad):
    """The DNA score of codes ``a`` and ``t``: the padding letter (above N) scores ``pad``
    whatever the other scores are (a positive N must not make padding score), N ``amb``."""
    s = amb if (a == ncode) | (t == ncode) else (hit if a == t else miss)
    return pad if (a > ncode) | (t > ncode) else s


@numba.njit(parallel=True, cache=True)
def bucket_shared(
    qcodes, qoff, task_b, task_q, task_ptr, tcodes, row_off, tlens, tmax, matrix, first, extend,
    mode, three, neg, proto, out,
):  # fmt: skip
    """Queries against the targets of buckets, by task: task ``k`` runs queries
    ``task_q[task_ptr[k]:task_ptr[k+1]]`` against bucket ``task_b[k]``; ``out[query, b, lane]``
    gets the score.

    ``proto`` is a 1-element array whose dtype (int16 or int32) is the score type. The query is
    shared by all lanes, so a bucket's target profile ``P[c, j, lane] = matrix[c, t[j, lane]]``
    (built once per task) turns every substitution score into a contiguous load.
    """
    lanes = LANES
    alpha = matrix.shape[0] - 1  # the last row and column score the padding letter
    dt = proto.dtype
    zero = _sub(proto[0], proto[0])
    floor = _add(zero, 0 if mode == LOCAL else neg)
    fst = _add(zero, first)
    ext = _add(zero, extend)
    for k in prange(task_b.shape[0]):
        b = task_b[k]
        n = tmax[b]
        base = row_off[b]
        prof = np.empty((alpha, n + 1, lanes), dt)
        for c in range(alpha):
            for j in range(n):
                for lane in range(lanes):
                    prof[c, j + 1, lane] = matrix[c, tcodes[base + j, lane]]
        # one array for the rows (H, F, G) and one for the lane state (diag, E, max(M, F),
        # best, score, query letter): LLVM then proves the accesses independent and keeps
        # the lane state in vector registers
        w = np.empty((n + 1, 3, lanes), dt)
        st = np.empty((6, lanes), dt)
        for qq in range(task_ptr[k], task_ptr[k + 1]):
            qi = task_q[qq]
            query = qcodes[qoff[qi] : qoff[qi + 1]]
            m = query.shape[0]
            for lane in range(lanes):
                st[3, lane] = 0 if mode == LOCAL else neg
                w[0, 0, lane] = 0
                w[0, 1, lane] = neg
                w[0, 2, lane] = 0
            for j in range(1, n + 1):
                v = -_gap(j, first, extend) if mode == GLOBAL else 0
                for lane in range(lanes):
                    w[j, 0, lane] = v
                    w[j, 1, lane] = neg
                    w[j, 2, lane] = v
            for i in range(1, m + 1):
                c = query[i - 1]
                pc = prof[c]
                left = -_gap(i, first, extend) if mode != LOCAL else 0
                for lane in range(lanes):
                    st[0, lane] = w[0, 0, lane]
                    w[0, 0, lane] = left
                    st[1, lane] = neg
                    st[2, lane] = left
                if three:
                    for j in range(1, n + 1):
                        for lane in range(lanes):
                            hh, ee, ff, me, mf = _cell3(
                                st[0, lane], st[1, lane], st[2, lane], w[j, 1, lane], w[j, 2, lane],
                                pc[j, lane], floor, fst, ext,
                            )  # fmt: skip
                            st[0, lane] = w[j, 0, lane]
                            w[j, 0, lane] = hh
                            w[j, 1, lane] = ff
                            w[j, 2, lane] = me
                            st[1, lane] = ee
                            st[2, lane] = mf
                            st[3, lane] = _max(st[3, lane], hh)
                else:
                    for j in range(1, n + 1):
                        for lane in range(lanes):
                            up = w[j, 0, lane]
                            hh, ee, ff = _cell2(
                                st[0, lane], st[1, lane], w[j - 1, 0, lane], w[j, 1, lane], up,
                                pc[j, lane], floor, fst, ext,
                            )  # fmt: skip
                            st[0, lane] = up
                            w[j, 0, lane] = hh
                            w[j, 1, lane] = ff
                            st[1, lane] = ee
                            st[3, lane] = _max(st[3, lane], hh)
            for lane in range(lanes):
                n_l = tlens[b, lane]
                if mode == LOCAL:
                    out[qi, b, lane] = st[3, lane]
                elif mode == GLOBAL:
                    out[qi, b, lane] = w[n_l, 0, lane]
                else:
                    s = w[0, 0, lane]
                    for j in range(1, n_l + 1):
                        s = max(s, w[j, 0, lane])
                    out[qi, b, lane] = s


@numba.njit(parallel=True, cache=True)
def bucket_pairs(
    qcodes, qrow_off, qlens, qmax, tcodes, trow_off, tlens, tmax, matrix, dna, first, extend,
    mode, three, neg, proto, out,
):  # fmt: skip
    """Pair ``(query lane, target lane)`` of every bucket; ``out[b, lane]`` gets the score.

    With ``dna = (match, mismatch, ambiguous, n_code, padding)`` and ``dna[3] >= 0`` the
    substitution score is computed by comparison (no table lookup); otherwise it is looked up
    in ``matrix``. Either way the padding letter (any code above ``n_code``, the matrix's last
    row) scores ``padding``, below every real score.
    """
    nb = tlens.shape[0]
    lanes = LANES
    dt = proto.dtype
    zero = _sub(proto[0], proto[0])
    floor = _add(zero, 0 if mode == LOCAL else neg)
    fst = _add(zero, first)
    ext = _add(zero, extend)
    simple = dna[3] >= 0
    hit = _add(zero, dna[0])
    miss = _add(zero, dna[1])
    amb = _add(zero, dna[2])
    ncode = _add(zero, dna[3])
    pad = _add(zero, dna[4])
    for b in prange(nb):
        n = tmax[b]
        m = qmax[b]
        tb = trow_off[b]
        qb = qrow_off[b]
        # one array for the rows (H, F, G) and one for the lane state (diag, E, max(M, F),
        # best, score, query letter): LLVM then proves the accesses independent and keeps
        # the lane state in vector registers
        w = np.empty((n + 1, 3, lanes), dt)
        st = np.empty((6, lanes), dt)
        for lane in range(lanes):
            st[3, lane] = 0 if mode == LOCAL else neg
            w[0, 0, lane] = 0
            w[0, 1, lane] = neg
            w[0, 2, lane] = 0
            if qlens[b, lane] == 0:  # an empty query (or a padding lane): no row reaches it
                n_l = tlens[b, lane]
                out[b, lane] = -_gap(n_l, first, extend) if mode == GLOBAL and n_l > 0 else 0
        for j in range(1, n + 1):
            v = -_gap(j, first, extend) if mode == GLOBAL else 0
            for lane in range(lanes):
                w[j, 0, lane] = v
                w[j, 1, lane] = neg
                w[j, 2, lane] = v
        for i in range(1, m + 1):
            left = -_gap(i, first, extend) if mode != LOCAL else 0
            for lane in range(lanes):
                st[0, lane] = w[0, 0, lane]
                w[0, 0, lane] = left
                st[1, lane] = neg
                st[2, lane] = left
                st[5, lane] = qcodes[qb + i - 1, lane]
            if simple and three:
                for j in range(1, n + 1):
                    tj = tb + j - 1
                    for lane in range(lanes):
                        a = st[5, lane]
                        t = _add(zero, tcodes[tj, lane])
                        sv = _dna_score(a, t, hit, miss, amb, ncode, pad)
                        hh, ee, ff, me, mf = _cell3(
                            st[0, lane], st[1, lane], st[2, lane], w[j, 1, lane], w[j, 2, lane],
                            sv, floor, fst, ext,
                        )  # fmt: skip
                        st[0, lane] = w[j, 0, lane]
                        w[j, 0, lane] = hh
                        w[j, 1, lane] = ff
                        w[j, 2, lane] = me
                        st[1, lane] = ee
                        st[2, lane] = mf
                        st[3, lane] = _max(st[3, lane], hh)
            elif simple:
                for j in range(1, n + 1):
                    tj = tb + j - 1
                    for lane in range(lanes):
                        a = st[5, lane]
                        t = _add(zero, tcodes[tj, lane])
                        sv = _dna_score(a, t, hit, miss, amb, ncode, pad)
                        up = w[j, 0, lane]
                        hh, ee, ff = _cell2(
                            st[0, lane], st[1, lane], w[j - 1, 0, lane], w[j, 1, lane], up,
                            sv, floor, fst, ext,
                        )  # fmt: skip
                        st[0, lane] = up
                        w[j, 0, lane] = hh
                        w[j, 1, lane] = ff
                        st[1, lane] = ee
                        st[3, lane] = _max(st[3, lane], hh)
            else:
                for j in range(1, n + 1):
                    tj = tb + j - 1
                    for lane in range(lanes):
                        st[4, lane] = matrix[st[5, lane], tcodes[tj, lane]]
                    if three:
                        for lane in range(lanes):
                            hh, ee, ff, me, mf = _cell3(
                                st[0, lane], st[1, lane], st[2, lane], w[j, 1, lane], w[j, 2, lane],
                                st[4, lane], floor, fst, ext,
                            )  # fmt: skip
                            st[0, lane] = w[j, 0, lane]
                            w[j, 0, lane] = hh
                            w[j, 1, lane] = ff
                            w[j, 2, lane] = me
                            st[1, lane] = ee
                            st[2, lane] = mf
                            st[3, lane] = _max(st[3, lane], hh)
                    else:
                        for lane in range(lanes):
                            up = w[j, 0, lane]
                            hh, ee, ff = _cell2(
                                st[0, lane], st[1, lane], w[j - 1, 0, lane], w[j, 1, lane], up,
                                st[4, lane], floor, fst, ext,
                            )  # fmt: skip
                            st[0, lane] = up
                            w[j, 0, lane] = hh
                            w[j, 1, lane] = ff
                            st[1, lane] = ee
                            st[3, lane] = _max(st[3, lane], hh)
            if mode != LOCAL:
                for lane in range(lanes):
                    if qlens[b, lane] == i:
                        n_l = tlens[b, lane]
                        if mode == GLOBAL:
                            out[b, lane] = w[n_l, 0, lane]
                        else:
                            s = w[0, 0, lane]
                            for j in range(1, n_l + 1):
                                s = max(s, w[j, 0, lane])
                            out[b, lane] = s
        if mode == LOCAL:
            for lane in range(lanes):
                out[b, lane] = st[3, lane]


@numba.njit(cache=True)
def traceback_pair(query, target, matrix, first, extend, mode, lo, hi):
    """Full dynamic programming of one pair with state pointers, within the band
    ``lo <= j - i <= hi`` (pass ``lo = -len(query)``, ``hi = len(target)`` for no band).

    Returns ``(score, q_start, q_end, t_start, t_end, ops)``: half-open ranges of the aligned
    parts and the operations from the start, 0 = aligned pair, 1 = insertion (a query letter
    against a gap), 2 = deletion (a target letter against a gap).
    """
    m = query.shape[0]
    n = target.shape[0]
    neg = -(1 << 60)
    local = mode == LOCAL
    floor = 0 if local else neg
    width = hi - lo + 1
    # ptr bits: M source (bits 0-1), E source (bits 2-3), F source (bits 4-5)
    ptr = np.zeros((m + 1, width), np.uint8)
    vm = np.full((2, n + 1), neg, np.int64)  # M, E, F of two rows (by parity of i)
    ve = np.full((2, n + 1), neg, np.int64)
    vf = np.full((2, n + 1), neg, np.int64)
    vm[0, 0] = 0
    for j in range(1, min(n, hi) + 1):
        if mode == GLOBAL:
            ve[0, j] = -_gap(j, first, extend)
            ptr[0, j - lo] = (_FROM_E if j > 1 else _FROM_M) << 2
        else:
            vm[0, j] = 0
            ptr[0, j - lo] = _START
    ptr[0, -lo] = _START
    best = neg
    bi, bj, bs = 0, 0, 0
    if mode == SEMIGLOBAL and m == 0:
        best = 0
        bi, bj, bs = 0, 0, _FROM_M
    for i in range(1, m + 1):
        c = i & 1
        p = c ^ 1
        jlo = max(0, i + lo)
        jhi = min(n, i + hi)
        if jlo > jhi:
            break
        for j in (jlo - 1, jhi + 1, jlo):
            if 0 <= j <= n:
                vm[c, j] = neg
                ve[c, j] = neg
                vf[c, j] = neg
        if jlo == 0:
            if mode == LOCAL:
                vm[c, 0] = 0
                ptr[i, -i - lo] = _START
            else:
                vf[c, 0] = -_gap(i, first, extend)
                ptr[i, -i - lo] = (_FROM_F if i > 1 else _FROM_M) << 4
        a = query[i - 1]
        for j in range(max(1, jlo), jhi + 1):
            # M from the diagonal, E from the left (deletion: a target letter against a gap),
            # F from above (insertion: a query letter against a gap)
            mm, ee, ff, pt = _cell_ptr(
                vm[p, j - 1], ve[p, j - 1], vf[p, j - 1], vm[c, j - 1], ve[c, j - 1],
                vf[c, j - 1], vm[p, j], ve[p, j], vf[p, j], matrix[a, target[j - 1]], floor,
                first, extend, local,
            )  # fmt: skip
            vm[c, j], ve[c, j], vf[c, j] = mm, max(ee, neg), max(ff, neg)
            ptr[i, j - i - lo] = pt
            if mode == LOCAL and mm > best:
                best, bi, bj, bs = mm, i, j, _FROM_M
        if mode == SEMIGLOBAL and i == m:
            for j in range(jlo, jhi + 1):
                if vm[c, j] > best:
                    best, bi, bj, bs = vm[c, j], i, j, _FROM_M
                if ve[c, j] > best:
                    best, bi, bj, bs = ve[c, j], i, j, _FROM_E
                if vf[c, j] > best:
                    best, bi, bj, bs = vf[c, j], i, j, _FROM_F
    hm, he, hf = vm[m & 1], ve[m & 1], vf[m & 1]
    if mode == GLOBAL:
        if m == 0:
            bi, bj = 0, n
            best = 0 if n == 0 else he[n]
            bs = _FROM_M if n == 0 else _FROM_E
        else:
            bi, bj = m, n
            best, bs = hm[n], _FROM_M
            if he[n] > best:
                best, bs = he[n], _FROM_E
            if hf[n] > best:
                best, bs = hf[n], _FROM_F
    if mode == LOCAL and best <= 0:
        return 0, 0, 0, 0, 0, np.empty(0, np.uint8)
    # walk back
    ops = np.empty(m + n, np.uint8)
    k = 0
    i, j, s = bi, bj, bs
    while True:
        if mode == GLOBAL and i == 0 and j == 0:
            break
        if mode == SEMIGLOBAL and i == 0:
            break
        pt = ptr[i, j - i - lo]
        if s == _FROM_M:
            src = pt & 3
            ops[k] = 0
            k += 1
            i -= 1
            j -= 1
            if src == _START:
                break
            s = src
        elif s == _FROM_E:
            s = (pt >> 2) & 3
            ops[k] = 2
            k += 1
            j -= 1
        else:
            s = (pt >> 4) & 3
            ops[k] = 1
            k += 1
            i -= 1
    return best, i, bi, j, bj, ops[:k][::-1].copy()


@numba.njit(cache=True)
def rescore(query, target, q_start, t_start, ops, matrix, first, extend):
    """The score of an alignment given by its operations (0 pair, 1 insertion, 2 deletion)."""
    i, j = q_start, t_start
    score = 0
    prev = -1
    for k in range(ops.shape[0]):
        op = ops[k]
        if op == 0:
            score += matrix[query[i], target[j]]
            i += 1
            j += 1
        elif op == 1:
            score -= extend if prev == 1 else first
            i += 1
        else:
            score -= extend if prev == 2 else first
            j += 1
        prev = op
    return score
