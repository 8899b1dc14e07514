"""Moves of boxes of a local array: pack into a buffer, unpack from it, or copy within the array.

Halo exchange moves boxes (faces, edges, corners) of the ghosted local array. Every array is
viewed as 3-D (leading axes of length 1 added) and flattened, so one kernel serves 1-D, 2-D and
3-D and all three kinds of move: it copies rows ``(i, j, 0..n2)`` from a source with strides
``(ss0, ss1)`` to a destination with strides ``(ds0, ds1)`` (a contiguous buffer has strides
``(n1*n2, n2)``). A :class:`BoxMove` is planned once (start offsets, strides, which kernel) so a
phase of an exchange costs one kernel call per group of equally sized boxes.

CPU kernels are numba ``njit`` (rows over threads for large moves); within a row every box of the
group is visited, so the low and high faces of a strided axis share each row's cache lines and
pages. GPU kernels (:mod:`hpc.pack_cuda`) use one thread per element and a grid row per box, and
also run under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) on host arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
from numba import prange

__all__ = ["Box", "BoxMove", "as3d", "box3d", "count", "is_contiguous", "flat_range"]

# A box is (lo0, lo1, lo2, n0, n1, n2) in the 3-D view of a local array.
Box = tuple[int, int, int, int, int, int]

_PARALLEL_MIN = 1 << 15  # below this many elements a move runs on one thread


def as3d(a: Any) -> Any:
    """View ``a`` (1-D, 2-D or 3-D, C-contiguous) as 3-D without copying."""
    if a.ndim == 3:
        return a
    return a.reshape((1,) * (3 - a.ndim) + tuple(a.shape))


def box3d(lo: Sequence[int], n: Sequence[int]) -> Box:
    """A 1/2/3-D box (corner ``lo``, extent ``n``) in the 3-D view's coordinates."""
    pad = 3 - len(lo)
    lo3 = (0,) * pad + tuple(lo)
    n3 = (1,) * pad + tuple(n)
    return (lo3[0], lo3[1], lo3[2], n3[0], n3[1], n3[2])


def count(box: Box) -> int:
    """Elements in ``box``."""
    return box[3] * box[4] * box[5]


def is_contiguous(box: Box, shape3: Sequence[int]) -> bool:
    """True when ``box`` is one contiguous run of a C-ordered array of 3-D shape ``shape3``.

    Such a box needs no packing: MPI can read or write it in place.
    """
    n = box[3:]
    for axis in range(3):
        if n[axis] > 1:
            return all(n[j] == shape3[j] for j in range(axis + 1, 3))
    return True


def flat_range(box: Box, shape3: Sequence[int]) -> tuple[int, int]:
    """``(start, stop)`` in the flattened array of a contiguous ``box``."""
    start = (box[0] * shape3[1] + box[1]) * shape3[2] + box[2]
    return start, start + count(box)


# Four small kernels rather than one general one: boxes are visited one after the other (two
# interleaved strided streams defeat the prefetcher), and a box one element wide (the face of
# the last axis) gets a loop without the inner run, which is several times faster there.


@numba.njit(cache=True, nogil=True)
def _rows_serial(src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n0, n1, n2):  # pragma: no cover
    for b in range(s_start.shape[0]):
        for i in range(n0):
            for j in range(n1):
                s = s_start[b] + i * ss0 + j * ss1
                d = d_start[b] + i * ds0 + j * ds1
                for k in range(n2):
                    dst[d + k] = src[s + k]


@numba.njit(cache=True, nogil=True)
def _cols_serial(src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n0, n1, n2):  # pragma: no cover
    for b in range(s_start.shape[0]):
        s, d = s_start[b], d_start[b]
        for i in range(n0):
            for j in range(n1):
                dst[d + i * ds0 + j * ds1] = src[s + i * ss0 + j * ss1]


@numba.njit(cache=True, nogil=True, parallel=True)
def _rows_parallel(src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n0, n1, n2):  # pragma: no cover
    for b in range(s_start.shape[0]):
        s, d = s_start[b], d_start[b]
        if n0 >= n1:
            for i in prange(n0):
                for j in range(n1):
                    for k in range(n2):
                        dst[d + i * ds0 + j * ds1 + k] = src[s + i * ss0 + j * ss1 + k]
        else:
            for j in prange(n1):
                for i in range(n0):
                    for k in range(n2):
                        dst[d + i * ds0 + j * ds1 + k] = src[s + i * ss0 + j * ss1 + k]


@numba.njit(cache=True, nogil=True, parallel=True)
def _cols_parallel(src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n0, n1, n2):  # pragma: no cover
    for b in range(s_start.shape[0]):
        s, d = s_start[b], d_start[b]
        if n0 >= n1:
            for i in prange(n0):
                for j in range(n1):
                    dst[d + i * ds0 + j * ds1] = src[s + i * ss0 + j * ss1]
        else:
            for j in prange(n1):
                for i in range(n0):
                    dst[d + i * ds0 + j * ds1] = src[s + i * ss0 + j * ss1]


class BoxMove:
    """A planned move of several boxes of arrays of one shape (Local when called).

    Parameters
    ----------
    shape3 : tuple of int
        3-D shape of the arrays (see :func:`as3d`).
    kind : {"pack", "unpack", "copy"}
        ``pack``: boxes of the array -> ``buf`` at ``offsets``; ``unpack``: the reverse;
        ``copy``: box ``boxes[b]`` -> box ``targets[b]`` of the same array.
    boxes : sequence of Box
        The boxes in the array (for ``copy``, the sources).
    offsets : sequence of int, optional
        Start of each box's data in the buffer (``pack``/``unpack``).
    targets : sequence of Box, optional
        Destination boxes (``copy``); extents equal to the sources'. Sources and destinations
        must not overlap.
    xp : module, optional
        ``cupy`` to plan a GPU move (tables on the device, numba.cuda kernels); default NumPy.
    """

    def __init__(
        self,
        shape3: Sequence[int],
        kind: str,
        boxes: Sequence[Box],
        offsets: Sequence[int] | None = None,
        targets: Sequence[Box] | None = None,
        xp: Any = np,
    ) -> None:
        if kind not in ("pack", "unpack", "copy"):
            raise ValueError(f"kind={kind!r}: expected 'pack', 'unpack' or 'copy'")
        self.kind = kind
        self.device = xp is not np
        s0, s1 = int(shape3[1]) * int(shape3[2]), int(shape3[2])
        starts = [(b[0] * shape3[1] + b[1]) * shape3[2] + b[2] for b in boxes]
        if kind == "copy":
            other = [(b[0] * shape3[1] + b[1]) * shape3[2] + b[2] for b in targets or []]
        else:
            other = list(offsets or [])
        if len(other) != len(boxes):
            raise ValueError("one offset (pack/unpack) or target (copy) per box is needed")
        # Group equally sized boxes: one kernel call (and one pass over the rows) per group.
        groups: dict[tuple[int, int, int], list[int]] = {}
        for idx, b in enumerate(boxes):
            groups.setdefault((b[3], b[4], b[5]), []).append(idx)
        self.calls = []
        for (n0, n1, n2), members in groups.items():
            array_side = (np.array([starts[m] for m in members], dtype=np.int64), s0, s1)
            if kind == "copy":
                other_side = (np.array([other[m] for m in members], dtype=np.int64), s0, s1)
            else:
                other_side = (np.array([other[m] for m in members], dtype=np.int64), n1 * n2, n2)
            src, dst = (other_side, array_side) if kind == "unpack" else (array_side, other_side)
            if self.device:
                src = (xp.asarray(src[0]), src[1], src[2])
                dst = (xp.asarray(dst[0]), dst[1], dst[2])
            elements = n0 * n1 * n2 * len(members)
            self.calls.append((src, dst, (n0, n1, n2), len(members), elements))
        self.elements = sum(c[4] for c in self.calls)
        threads = numba.get_num_threads() > 1
        self._cpu_calls = []
        for src, dst, n, _, elements in self.calls:
            parallel = threads and elements >= _PARALLEL_MIN
            if n[2] == 1:
                kernel = _cols_parallel if parallel else _cols_serial
            else:
                kernel = _rows_parallel if parallel else _rows_serial
            self._cpu_calls.append((kernel, src, dst, n))

    def __call__(self, a3: Any, buf: Any = None) -> None:
        """Local. Run the move on the 3-D array ``a3`` (and 1-D ``buf`` for pack/unpack)."""
        if not self.calls:
            return
        flat = a3.reshape(-1)
        if self.kind == "pack":
            src_arr, dst_arr = flat, buf
        elif self.kind == "unpack":
            src_arr, dst_arr = buf, flat
        else:
            src_arr = dst_arr = flat
        if self.device:
            from .pack_cuda import launch_rows

            for src, dst, n, m, elements in self.calls:
                launch_rows(src_arr, src, dst_arr, dst, n, m, elements // m)
            return
        for kernel, src, dst, n in self._cpu_calls:
            kernel(src_arr, *src, dst_arr, *dst, *n)
