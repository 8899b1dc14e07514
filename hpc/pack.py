"""Moves of boxes of a local array: pack into a buffer, unpack from it, or copy within the array.

Halo exchange moves boxes (faces, edges, corners) of the ghosted local array. Every array is
viewed as 3-D (leading axes of length 1 added) and flattened, so one kernel serves 1-D, 2-D and
3-D and all three kinds of move: it copies rows ``(i, j, 0..n2)`` from a source with strides
``(ss0, ss1)`` to a destination with strides ``(ds0, ds1)`` (a contiguous buffer has strides
``(n1*n2, n2)``). A :class:`BoxMove` is planned once (start offsets, strides, which kernel) so a
phase of an exchange costs one kernel call per group of equally sized boxes.

CPU kernels are numba ``njit`` (rows over threads for large moves); they walk the rows of a group
in memory order and, within a row, visit every box of the group, so the low and high faces of a
strided axis share each row's cache lines and pages. Boxes spanning whole rows are moved as one
run per plane (:func:`merge_runs`); short runs (the last axis's faces) are moved two boxes at a
time by loops specialised on the run length, a few instructions a row. GPU kernels
(:mod:`hpc.pack_cuda`) use one thread per element and a grid row per box, and also run under the
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) on host arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
from numba import prange

__all__ = [
    "Box",
    "BoxMove",
    "as3d",
    "box3d",
    "chain",
    "count",
    "is_contiguous",
    "flat_range",
    "merge_runs",
]

# A box is (lo0, lo1, lo2, n0, n1, n2) in the 3-D view of a local array.
Box = tuple[int, int, int, int, int, int]

_PARALLEL_MIN = 1 << 16  # below this many elements a move runs on one thread


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


_SLICE_MIN = 32  # runs of at least this many elements are copied as slices


def merge_runs(n: Sequence[int], shape3: Sequence[int]) -> tuple[int, int, int]:
    """Extents ``(n0, n1, n2)`` of a box as rows of the longest contiguous runs.

    A box spanning whole rows (``n2 == shape3[2]``) is one run per plane, ``(n0, 1, n1*n2)``; one
    that also spans whole planes is a single run. The box's start and the array's strides are
    unchanged (only rows of stride ``shape3[2]`` are merged), and a packed buffer holds the box
    in the same order, so the moves copy the same elements with fewer, longer runs.
    """
    n0, n1, n2 = int(n[0]), int(n[1]), int(n[2])
    if n2 == int(shape3[2]) or n1 == 1:
        n1, n2 = 1, n1 * n2
        if n2 == int(shape3[1]) * int(shape3[2]) or n0 == 1:
            n0, n2 = 1, n0 * n2
    return n0, n1, n2


# The kernels walk the rows ``(i, j)`` of a group of equally sized boxes in memory order, the
# boxes of a row together: the low and high faces of the last axis (a periodic wrap, or the two
# faces packed for one neighbour each side) then touch the two ends of each row of the array
# once, in one forward pass, instead of two passes of strided accesses. Short runs (below
# _SLICE_MIN: the last axis's faces) go two boxes at a time through loops specialised on the
# run length (_pair_rows); longer runs are slice copies, every box of the group per row.


@numba.njit(cache=True, nogil=True)
def _move_serial(src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n0, n1, n2):  # pragma: no cover
    # runs of at least _SLICE_MIN: a slice copy is vectorised (it costs more to set up than a
    # short loop, see _pair_rows)
    nb = s_start.shape[0]
    for i in range(n0):
        for j in range(n1):
            so = i * ss0 + j * ss1
            do = i * ds0 + j * ds1
            for b in range(nb):
                s, d = s_start[b] + so, d_start[b] + do
                dst[d : d + n2] = src[s : s + n2]


@numba.njit(cache=True, nogil=True)
def _pair_rows(src, s, t, ss1, dst, d, e, ds1, m, n2):  # pragma: no cover
    """``m`` rows of two boxes: runs of ``n2`` at ``s`` and ``t`` -> ``d`` and ``e``, rows
    ``ss1``/``ds1`` apart, both runs of a row together. One loop per run length 1-3 with the
    copies written out (the length is tested once, not per row): a row then costs a few
    instructions and the loop runs as fast as the memory answers, its constant strides
    followed by the hardware prefetcher (a loop over boxes and run lengths per row took 2-3x
    as long on a warm face; software prefetch of later rows made cold faces slower)."""
    if n2 == 1:
        for _ in range(m):
            dst[d] = src[s]
            dst[e] = src[t]
            s += ss1
            t += ss1
            d += ds1
            e += ds1
    elif n2 == 2:
        for _ in range(m):
            dst[d] = src[s]
            dst[d + 1] = src[s + 1]
            dst[e] = src[t]
            dst[e + 1] = src[t + 1]
            s += ss1
            t += ss1
            d += ds1
            e += ds1
    elif n2 == 3:
        for _ in range(m):
            dst[d] = src[s]
            dst[d + 1] = src[s + 1]
            dst[d + 2] = src[s + 2]
            dst[e] = src[t]
            dst[e + 1] = src[t + 1]
            dst[e + 2] = src[t + 2]
            s += ss1
            t += ss1
            d += ds1
            e += ds1
    else:
        for _ in range(m):
            for k in range(n2):
                dst[d + k] = src[s + k]
                dst[e + k] = src[t + k]
            s += ss1
            t += ss1
            d += ds1
            e += ds1


@numba.njit(cache=True, nogil=True)
def _short_span(src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n1, r0, r1, n2):  # pragma: no cover
    """Rows ``r0..r1`` (``n1`` a plane) of a group of boxes of short runs (< _SLICE_MIN), the
    boxes two at a time: box ``b`` with box ``b + half`` (the low and high faces of an axis,
    as a phase lists them, share each row), an odd last box with itself (a second, identical
    copy of a run: harmless, sources and destinations being disjoint)."""
    nb = s_start.shape[0]
    half = (nb + 1) // 2
    for b in range(half):
        c = b + half if b + half < nb else b
        r = r0
        while r < r1:
            i = r // n1
            j = r - i * n1
            m = min(n1 - j, r1 - r)
            so = i * ss0 + j * ss1
            do = i * ds0 + j * ds1
            _pair_rows(
                src, s_start[b] + so, s_start[c] + so, ss1, dst, d_start[b] + do, d_start[c] + do,
                ds1, m, n2,
            )  # fmt: skip
            r += m


_HEAD = 8  # integers before the starts of a group in a move table


@numba.njit(cache=True, nogil=True)
def _move_table(src, dst, table):  # pragma: no cover
    """Every group of a move in one call: ``table`` holds per group ``nb, ss0, ss1, ds0, ds1,
    n0, n1, n2`` then the ``nb`` source and ``nb`` destination starts (a call from Python
    costs about as much as a small move, so a phase of small boxes is one call of three
    arguments)."""
    pos = 0
    while pos < table.shape[0]:
        nb = table[pos]
        s_start = table[pos + _HEAD : pos + _HEAD + nb]
        d_start = table[pos + _HEAD + nb : pos + _HEAD + 2 * nb]
        n1, n2 = table[pos + 6], table[pos + 7]
        if n2 < _SLICE_MIN:
            _short_span(
                src, s_start, table[pos + 1], table[pos + 2], dst, d_start, table[pos + 3],
                table[pos + 4], n1, 0, table[pos + 5] * n1, n2,
            )  # fmt: skip
        else:
            _move_serial(
                src, s_start, table[pos + 1], table[pos + 2], dst, d_start, table[pos + 3],
                table[pos + 4], table[pos + 5], table[pos + 6], table[pos + 7],
            )  # fmt: skip
        pos += _HEAD + 2 * nb


@numba.njit(cache=True, nogil=True, parallel=True)
def _move_parallel(
    src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n0, n1, n2, parts
):  # pragma: no cover
    # rows in memory order, split into one contiguous run of rows per thread (``parts``)
    rows = n0 * n1
    if n2 < _SLICE_MIN:
        for p in prange(parts):
            _short_span(
                src, s_start, ss0, ss1, dst, d_start, ds0, ds1, n1, rows * p // parts,
                rows * (p + 1) // parts, n2,
            )  # fmt: skip
        return
    nb = s_start.shape[0]
    for r in prange(rows):
        i = r // n1
        j = r - i * n1
        so = i * ss0 + j * ss1
        do = i * ds0 + j * ds1
        for b in range(nb):
            s, d = s_start[b] + so, d_start[b] + do
            dst[d : d + n2] = src[s : s + n2]


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
        # Extents are taken as runs as long as contiguity allows (whole rows: a run per plane).
        groups: dict[tuple[int, int, int], list[int]] = {}
        for idx, b in enumerate(boxes):
            groups.setdefault(merge_runs(b[3:], shape3), []).append(idx)
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
        threads = numba.get_num_threads() > 1 and not self.device
        # Large groups: a threaded call each; the others: one call over a table of them all.
        self._parallel_calls = []
        table: list[int] = []
        for src, dst, n, m, elements in [] if self.device else self.calls:
            if threads and elements >= _PARALLEL_MIN:
                row = int(shape3[2])
                if n[0] * n[1] < 4 * numba.get_num_threads() and n[2] > row and n[2] % row == 0:
                    # merged whole rows: split back into rows, which the threads share
                    n = (n[0], n[2] // row, row)
                    src, dst = (src[0], src[1], row), (dst[0], dst[1], row)
                self._parallel_calls.append((src, dst, n))
            else:
                table += [m, src[1], src[2], dst[1], dst[2], *n]
                table += [int(x) for x in src[0]] + [int(x) for x in dst[0]]
        self._table = np.array(table, dtype=np.int64) if table else None

    def __bool__(self) -> bool:
        """False when the move has no boxes (calling it does nothing)."""
        return bool(self.calls)

    def _ends(self, flat: Any, buf: Any) -> tuple[Any, Any]:
        """The source and destination of this move's kind: array to buffer (pack), buffer to
        array (unpack), or the array to itself (copy)."""
        if self.kind == "pack":
            return flat, buf
        if self.kind == "unpack":
            return buf, flat
        return flat, flat

    def run_flat(self, flat: Any, buf: Any = None) -> None:
        """Local. Run a CPU move on the flattened (1-D, C-ordered) array ``flat``."""
        src_arr, dst_arr = self._ends(flat, buf)
        if self._table is not None:
            _move_table(src_arr, dst_arr, self._table)
        for src, dst, n in self._parallel_calls:
            _move_parallel(src_arr, *src, dst_arr, *dst, *n, numba.get_num_threads())

    def __call__(self, a3: Any, buf: Any = None) -> None:
        """Local. Run the move on the 3-D array ``a3`` (and 1-D ``buf`` for pack/unpack)."""
        if not self.calls:
            return
        flat = a3.reshape(-1)
        if not self.device:
            self.run_flat(flat, buf)
            return
        src_arr, dst_arr = self._ends(flat, buf)
        from .pack_cuda import launch_rows

        for src, dst, n, m, elements in self.calls:
            launch_rows(src_arr, src, dst_arr, dst, n, m, elements // m)


def chain(moves: Sequence[BoxMove]) -> BoxMove | None:
    """One CPU ``copy`` move that runs ``moves`` in turn, in one kernel call (the groups of the
    later moves after those of the earlier ones), or None when some move cannot join (a device
    move, a pack or unpack, or a move with threaded groups)."""
    tables = []
    for m in moves:
        if m.device or m.kind != "copy" or m._parallel_calls:
            return None
        if m._table is not None:
            tables.append(m._table)
    out = BoxMove((1, 1, 1), "copy", [], targets=[])
    out.calls = [c for m in moves for c in m.calls]
    out.elements = sum(m.elements for m in moves)
    out._table = np.concatenate(tables) if tables else None
    return out
