"""GPU kernels (numba.cuda): one thread scores one pair, pairs sorted by length.

The substitution matrix sits in shared memory; the dynamic programming rows live in global
memory laid out ``[position, pair]``, so the threads of a warp touch consecutive words.
Scores are 32-bit (no overflow retry is needed below about 2 * 10^9). Runs under the CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``) on small inputs, which is how it is tested without a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, int32

__all__ = ["score_pairs_gpu", "MAX_ALPHABET"]

MAX_ALPHABET = 32  # matrix side in shared memory (letters + the padding letter)
THREADS = 128
_NEG = -(1 << 29)


@cuda.jit(device=True, inline=True)
def _gap(length, first, extend):
    return first + (length - 1) * extend


@cuda.jit
def _pairs_kernel(
    qcodes, qoff, tcodes, toff, qi, ti, matrix, first, extend, mode, three, h, f, g, out
):
    sm = cuda.shared.array((MAX_ALPHABET, MAX_ALPHABET), int32)
    side = matrix.shape[0]
    k = cuda.threadIdx.x
    while k < side * side:
        sm[k // side, k % side] = matrix[k // side, k % side]
        k += cuda.blockDim.x
    cuda.syncthreads()
    p = cuda.grid(1)
    if p >= qi.shape[0]:
        return
    q0 = qoff[qi[p]]
    m = qoff[qi[p] + 1] - q0
    t0 = toff[ti[p]]
    n = toff[ti[p] + 1] - t0
    neg = _NEG
    floor = 0 if mode == 0 else neg
    best = 0 if mode == 0 else neg
    h[0, p] = 0
    f[0, p] = neg
    g[0, p] = 0
    for j in range(1, n + 1):
        v = -_gap(j, first, extend) if mode == 1 else 0
        h[j, p] = v
        f[j, p] = neg
        if three:
            g[j, p] = v
    for i in range(1, m + 1):
        a = qcodes[q0 + i - 1]
        left = -_gap(i, first, extend) if mode != 0 else 0
        diag = h[0, p]
        h[0, p] = left
        e = neg
        mf = left
        hl = left
        for j in range(1, n + 1):
            mm = max(diag, floor) + sm[a, tcodes[t0 + j - 1]]
            up = h[j, p]
            if three:
                ee = max(e - extend, mf - first)
                ff = max(f[j, p] - extend, g[j, p] - first)
            else:
                ee = max(e - extend, hl - first)
                ff = max(f[j, p] - extend, up - first)
            hh = max(mm, max(ee, ff))
            diag = up
            h[j, p] = hh
            f[j, p] = ff
            if three:
                g[j, p] = max(mm, ee)
                mf = max(mm, ff)
            e = ee
            hl = hh
            if hh > best:
                best = hh
    if mode == 0:
        out[p] = best
    elif mode == 1:
        out[p] = h[n, p]
    else:
        s = h[0, p]
        for j in range(1, n + 1):
            s = max(s, h[j, p])
        out[p] = s


def score_pairs_gpu(qe: Any, te: Any, qi: np.ndarray, ti: np.ndarray, scoring: Any, mode: int):
    """Local. Scores of pairs ``(qe[qi[k]], te[ti[k]])`` on the GPU (int64 on the host).

    ``qe`` and ``te`` are :class:`hpc.domains.align.batch.Encoded`. Pairs are sorted by target
    then query length, so a warp's threads run loops of similar lengths.
    """
    n = qi.size
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    mat = np.ascontiguousarray(scoring.matrix.scores, dtype=np.int32)
    if mat.shape[0] > MAX_ALPHABET:
        raise ValueError(f"GPU kernels take matrices up to {MAX_ALPHABET - 1} letters")
    order = np.lexsort((qe.lengths[qi], te.lengths[ti]))
    sq, st = qi[order], ti[order]
    width = int(te.lengths[st].max()) + 1
    d_h = cuda.device_array((width, n), dtype=np.int32)
    d_f = cuda.device_array((width, n), dtype=np.int32)
    g = scoring.gaps
    three = g.extend > g.first
    d_g = cuda.device_array((width if three else 1, n), dtype=np.int32)
    d_out = cuda.device_array(n, dtype=np.int32)
    blocks = -(-n // THREADS)
    _pairs_kernel[blocks, THREADS](
        cuda.to_device(qe.codes), cuda.to_device(qe.offsets), cuda.to_device(te.codes),
        cuda.to_device(te.offsets), cuda.to_device(sq), cuda.to_device(st), cuda.to_device(mat),
        g.first, g.extend, mode, three, d_h, d_f, d_g, d_out,
    )  # fmt: skip
    out[order] = d_out.copy_to_host()
    return out
