"""Counter-based random streams: Philox4x32-10 keyed by (seed, stream), counted by global index.

A variate is a pure function of ``(seed, stream, index, dimension)``: no generator state, so
the numbers of path ``p`` are the same whichever rank, batch or device computes them, and any
slice of paths can be generated on its own. This is what makes Monte Carlo results bitwise
reproducible on any number of ranks.

Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
SC'11) maps a 128-bit counter and a 64-bit key to 128 random bits in 10 rounds of two 32x32-bit
multiplications. Here the key is the 64-bit ``seed`` and the counter is ``(index low word,
index high word, dimension // 2, stream)``: one call gives two 53-bit uniforms and, by the
Box-Muller transform, two normals (dimensions ``2k`` and ``2k + 1``). On the CPU the logarithm
and the sine and cosine are :mod:`hpc.vmath`'s (about an ulp from libm, and vectorisable);
the GPU uses its own libdevice functions, so CPU and GPU normals agree to rounding, not bit for
bit.

The bijection itself is one Python function compiled twice, by ``numba.njit`` for the CPU and
``numba.cuda.jit(device=True)`` for the GPU, through :func:`hpc.jit.specialise` (generated
modules cached on disk: a later process loads the kernels instead of compiling them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["RandomStreams", "philox4x32", "device_functions", "MAX_STREAMS"]

MAX_STREAMS = 2**32
_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # key schedule (Weyl) increments
_MASK = 0xFFFFFFFF


def _philox_rounds(c0: Any, c1: Any, c2: Any, c3: Any, k0: Any, k1: Any) -> tuple:
    """Philox4x32-10 on 32-bit values held in unsigned 64-bit integers."""
    mask = np.uint64(_MASK)
    m0, m1 = np.uint64(_M0), np.uint64(_M1)
    w0, w1 = np.uint64(_W0), np.uint64(_W1)
    shift = np.uint64(32)
    for r in range(10):
        if r > 0:
            k0 = (k0 + w0) & mask
            k1 = (k1 + w1) & mask
        p0 = m0 * c0
        p1 = m1 * c2
        c0, c1, c2, c3 = (
            (p1 >> shift) ^ c1 ^ k0,
            p1 & mask,
            (p0 >> shift) ^ c3 ^ k1,
            p0 & mask,
        )
    return c0, c1, c2, c3


def _uniform_pair(c0: Any, c1: Any, c2: Any, c3: Any) -> tuple:
    """Two uniforms in (0, 1) with 53 random bits each, from four 32-bit words."""
    scale = 1.0 / 9007199254740992.0  # 2**-53
    a = float((c0 >> np.uint64(5)) * np.uint64(67108864) + (c1 >> np.uint64(6)))
    b = float((c2 >> np.uint64(5)) * np.uint64(67108864) + (c3 >> np.uint64(6)))
    return (a + 0.5) * scale, (b + 0.5) * scale


def _pair(index: Any, pair: Any, k0: Any, k1: Any, stream: Any, normal: bool) -> tuple:
    """Variates ``2 pair`` and ``2 pair + 1`` of global index ``index`` (uniform or normal)."""
    mask = np.uint64(_MASK)
    c = _philox_rounds(index & mask, index >> np.uint64(32), pair, stream, k0, k1)
    u1, u2 = _uniform_pair(c[0], c[1], c[2], c[3])
    if not normal:
        return u1, u2
    radius = math.sqrt(-2.0 * _log(u1))
    sine, cosine = _sincos_turns(u2)
    return radius * cosine, radius * sine


_log = math.log  # on the CPU: hpc.vmath's, which vectorise across paths


def _sincos_turns(u: float) -> tuple[float, float]:
    """``sin`` and ``cos`` of ``2 pi u`` (the GPU's; the CPU uses :mod:`hpc.vmath`)."""
    angle = 2.0 * math.pi * u
    return math.sin(angle), math.cos(angle)


def _variates(
    out: Any, first: Any, k0: Any, k1: Any, stream: Any, normal: bool, p: int, j0: int
) -> None:
    """Fill ``out[p, j0]`` and ``out[p, j0 + 1]`` (when in range) for global path ``first + p``."""
    index = np.uint64(first) + np.uint64(p)
    v1, v2 = _pair(index, np.uint64(j0 // 2), k0, k1, np.uint64(stream), normal)
    out[p, j0] = v1
    if j0 + 1 < out.shape[1]:
        out[p, j0 + 1] = v2


def _fill_lanes(out: Any, first: Any, k0: Any, k1: Any, stream: Any, normal: bool) -> None:
    """CPU kernel: rows of paths over threads, the variates in pairs.

    The vector loops have no branch (the kind of variate is chosen outside them) and index
    with unsigned integers (numba adds a negative-index select to signed ones), so LLVM
    vectorises them: across a row's pairs when rows are wide, else across ``_CHUNK`` rows at
    a time, each pair of dimensions into a contiguous scratch row that is then transposed."""
    rows, dim = out.shape
    s = np.uint64(stream)
    if dim >= _WIDE:
        pairs = dim // 2
        for p in prange(rows):
            index = np.uint64(first) + np.uint64(p)
            row = out[p]
            if normal:
                for h in range(pairs):
                    v1, v2 = _pair(index, np.uint64(h), k0, k1, s, True)
                    row[np.uint64(2 * h)] = v1
                    row[np.uint64(2 * h + 1)] = v2
            else:
                for h in range(pairs):
                    v1, v2 = _pair(index, np.uint64(h), k0, k1, s, False)
                    row[np.uint64(2 * h)] = v1
                    row[np.uint64(2 * h + 1)] = v2
            if dim % 2 == 1:
                v1, v2 = _pair(index, np.uint64(pairs), k0, k1, s, normal)
                row[np.uint64(dim - 1)] = v1
        return
    for c in prange((rows + _CHUNK - 1) // _CHUNK):
        r0 = c * _CHUNK
        n = min(_CHUNK, rows - r0)
        base = np.uint64(first) + np.uint64(r0)
        buf = np.empty((dim + 1, _CHUNK))
        for h in range((dim + 1) // 2):
            lo, hi = buf[2 * h], buf[2 * h + 1]
            if normal:
                for i in range(n):
                    v1, v2 = _pair(base + np.uint64(i), np.uint64(h), k0, k1, s, True)
                    lo[np.uint64(i)] = v1
                    hi[np.uint64(i)] = v2
            else:
                for i in range(n):
                    v1, v2 = _pair(base + np.uint64(i), np.uint64(h), k0, k1, s, False)
                    lo[np.uint64(i)] = v1
                    hi[np.uint64(i)] = v2
        for i in range(n):
            for j in range(dim):
                out[r0 + i, j] = buf[j, i]


_WIDE = 32  # dimensions from which a row is one vector loop (else rows are the lanes)
_CHUNK = 256  # rows advanced together when rows are narrow


def _fill_threads(out: Any, first: Any, k0: Any, k1: Any, stream: Any, normal: bool) -> None:
    """GPU kernel: one thread per path."""
    p = cuda.grid(1)
    if p < out.shape[0]:
        for j0 in range(0, out.shape[1], 2):
            _variates(out, first, k0, k1, stream, normal, p, j0)


def _philox(c0: Any, c1: Any, c2: Any, c3: Any, k0: Any, k1: Any) -> tuple:
    return _philox_rounds(c0, c1, c2, c3, k0, k1)


prange = range  # placeholders: the generated kernel modules import numba's prange and cuda
cuda: Any = None
_HELPERS = (_philox_rounds, _uniform_pair, _sincos_turns, _pair, _variates)


def device_functions(target: str = "cpu") -> dict[str, Any]:
    """Compiled building blocks for kernels that draw their own variates (no arrays of
    random numbers in memory): ``pair(index, pair, k0, k1, stream, normal)`` gives variates
    ``2 pair`` and ``2 pair + 1`` of global index ``index``, exactly as
    :meth:`RandomStreams.normals` (all arguments ``uint64``; ``k0, k1`` from
    :attr:`RandomStreams.key`). ``target``: ``"cpu"`` (numba) or ``"gpu"`` (numba.cuda).
    ``pair`` is a module attribute, so kernels of :func:`hpc.jit.specialise` may bind it."""
    return _cpu_kernels() if target == "cpu" else _gpu_kernels()


_cpu: dict[str, Any] = {}
_gpu: dict[str, Any] = {}


def _cpu_kernels() -> dict[str, Any]:
    if not _cpu:
        from . import vmath
        from .jit import specialise

        bind = {
            "_log": vmath.log,
            "_sincos_turns": vmath.sincos_turns,
            "_WIDE": _WIDE,
            "_CHUNK": _CHUNK,
        }
        helpers = [h for h in _HELPERS if h is not _sincos_turns]
        lanes = specialise(
            "rng_fill", [_fill_lanes], helpers, bind, "cpu", {"error_model": "numpy"}
        )
        serial = specialise("rng_philox", [_philox], [_philox_rounds], target="cpu-serial")
        _cpu.update(fill=lanes._fill_lanes, philox=serial._philox, pair=lanes._pair)
    return _cpu


def _gpu_kernels() -> dict[str, Any]:
    if not _gpu:
        from .jit import specialise

        threads = specialise("rng_fill", [_fill_threads], _HELPERS, target="cuda")
        _gpu.update(fill=threads._fill_threads, pair=threads._pair)
    return _gpu


def philox4x32(counter: Any, key: Any) -> np.ndarray:
    """Philox4x32-10 of a 4-word counter and a 2-word key (``uint32`` values): four words.

    The reference bijection, for checks against published vectors and other
    implementations; the streams below call the compiled kernel directly.
    """
    c = [int(v) & _MASK for v in counter]
    k = [int(v) & _MASK for v in key]
    if len(c) != 4 or len(k) != 2:
        raise ValueError(f"counter needs 4 words and key 2, got {len(c)} and {len(k)}")
    out = _cpu_kernels()["philox"](*(np.uint64(v) for v in c + k))
    return np.array([int(v) for v in out], dtype=np.uint32)


class RandomStreams:
    """Reproducible random variates addressed by global index.

    Parameters
    ----------
    seed : int
        64-bit key; different seeds give independent streams.
    stream : int
        Sub-stream number in ``[0, 2**32)`` (e.g. one per model component or risk factor).

    Examples
    --------
    >>> rs = RandomStreams(seed=42)
    >>> z = rs.normals(0, 1000, 12)  # paths 0..999, 12 variates each
    >>> bool((rs.normals(500, 500, 12) == z[500:]).all())  # any slice on its own
    True
    """

    def __init__(self, seed: int, stream: int = 0) -> None:
        seed, stream = int(seed), int(stream)
        if not 0 <= seed < 2**64:
            raise ValueError(f"seed={seed}: must be in [0, 2**64)")
        if not 0 <= stream < MAX_STREAMS:
            raise ValueError(f"stream={stream}: must be in [0, 2**32)")
        self.seed, self.stream = seed, stream
        self._k0, self._k1 = np.uint64(seed & _MASK), np.uint64(seed >> 32)

    @property
    def key(self) -> tuple[np.uint64, np.uint64]:
        """The Philox key words ``(k0, k1)`` (for kernels using :func:`device_functions`)."""
        return self._k0, self._k1

    def __repr__(self) -> str:
        return f"RandomStreams(seed={self.seed}, stream={self.stream})"

    def normals(self, first: int, count: int, dim: int, backend: Any = None) -> Any:
        """Standard normal variates of paths ``first .. first + count - 1``: ``(count, dim)``
        float64 (a CuPy array on the GPU backend)."""
        return self._fill(first, count, dim, True, backend)

    def uniforms(self, first: int, count: int, dim: int, backend: Any = None) -> Any:
        """Uniform variates in the open interval (0, 1), 53 random bits: ``(count, dim)``."""
        return self._fill(first, count, dim, False, backend)

    def _fill(self, first: int, count: int, dim: int, normal: bool, backend: Any) -> Any:
        from .backend import get_backend

        first, count, dim = int(first), int(count), int(dim)
        if first < 0 or count < 0 or dim < 0 or first + count > 2**64:
            raise ValueError(
                f"paths [{first}, {first + count}) x {dim} variates: indices must lie in "
                "[0, 2**64) and counts be non-negative"
            )
        be = get_backend(backend)
        out = be.xp.empty((count, dim), dtype=np.float64)
        if count == 0 or dim == 0:
            return out
        args = (np.uint64(first), self._k0, self._k1, np.uint64(self.stream), normal)
        if be.is_gpu:
            threads = 256
            _gpu_kernels()["fill"][(count + threads - 1) // threads, threads](out, *args)
        else:
            _cpu_kernels()["fill"](out, *args)
        return out
