"""GPU kernels (numba.cuda): one thread scores one pair, pairs sorted by length.

The substitution matrix sits in shared memory; the dynamic programming rows live in global
memory laid out ``[position, pair]``, so the threads of a warp touch consecutive words.
Scores are 32-bit (no overflow retry is needed below about 2 * 10^9). Runs under the CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``) on small inputs, which is how it is tested without a GPU.
The kernel is a template compiled by :func:`hpc.jit.specialise`, with the cell update of
:mod:`hpc.domains.align.kernels` (the CPU kernels' source) as its device functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, int32

from .kernels import CELL_TEMPLATES

__all__ = ["score_pairs_gpu", "MAX_ALPHABET"]

MAX_ALPHABET = 32  # matrix side in shared memory (letters + the padding letter)
THREADS = 128
_NEG = -(1 << 29)
# the cell update, one source for the CPU and GPU kernels (plain Python functions here)
_gap, _cell, _cell3, _cell2 = CELL_TEMPLATES


# Templates of hpc.jit.specialise: the kernel, and the score arithmetic of the cell update of
# :mod:`hpc.domains.align.kernels` (``_cell3``, ``_cell2``, written there once for the CPU and
# the GPU), 32-bit here where the CPU kernels keep the type of the first operand.


def _add(a, b):
    return int32(a + b)


def _sub(a, b):
    return int32(a - b)


def _max(a, b):
    return int32(a if a > b else b)


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
    neg = int32(_NEG)
    zero = int32(0)
    floor = zero if mode == 0 else neg
    best = zero if mode == 0 else neg
    fst = int32(first)
    ext = int32(extend)
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
        left = int32(-_gap(i, first, extend) if mode != 0 else 0)
        diag = h[0, p]
        h[0, p] = left
        e = neg
        mf = left  # max(M, F) on the left (three-state), H on the left (two-state)
        for j in range(1, n + 1):
            s = sm[a, tcodes[t0 + j - 1]]
            up = h[j, p]
            if three:
                hh, ee, ff, me, mf = _cell3(diag, e, mf, f[j, p], g[j, p], s, floor, fst, ext)
                g[j, p] = me
            else:
                hh, ee, ff = _cell2(diag, e, mf, f[j, p], up, s, floor, fst, ext)
                mf = hh
            diag = up
            h[j, p] = hh
            f[j, p] = ff
            e = ee
            best = _max(best, hh)
    if mode == 0:
        out[p] = best
    elif mode == 1:
        out[p] = h[n, p]
    else:
        s = h[0, p]
        for j in range(1, n + 1):
            s = max(s, h[j, p])
        out[p] = s


_kernel: list[Any] = []


def _compiled() -> Any:
    """The kernel, compiled once per machine through :func:`hpc.jit.specialise`."""
    if not _kernel:
        from hpc.jit import specialise

        helpers = [_add, _sub, _max, *CELL_TEMPLATES]
        _kernel.append(specialise("align_pairs", [_pairs_kernel], helpers, target="cuda"))
    return _kernel[0]._pairs_kernel


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
    _compiled()[blocks, THREADS](
        cuda.to_device(qe.codes), cuda.to_device(qe.offsets), cuda.to_device(te.codes),
        cuda.to_device(te.offsets), cuda.to_device(sq), cuda.to_device(st), cuda.to_device(mat),
        g.first, g.extend, mode, three, d_h, d_f, d_g, d_out,
    )  # fmt: skip
    out[order] = d_out.copy_to_host()
    return out
