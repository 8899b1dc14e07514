"""Run with NUMBA_ENABLE_CUDASIM=1: the numba.cuda box-move kernel against NumPy slicing.

The simulator runs the kernel's Python body thread by thread on host arrays, so the indexing
(grid rows per box, one thread per element, strides, offsets) is checked without a GPU.
"""

from __future__ import annotations

import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc import pack  # noqa: E402


class _SimulatedXp:
    """Stands in for CuPy: the simulator takes host arrays as device arrays."""

    @staticmethod
    def asarray(a):
        return np.asarray(a)


def region(box):
    return tuple(slice(box[i], box[i] + box[3 + i]) for i in range(3))


def main() -> int:
    rng = np.random.default_rng(11)
    cases = 0
    for shape in [(1, 1, 9), (1, 6, 7), (5, 4, 6)]:
        a = rng.standard_normal(shape)
        for _ in range(3):
            boxes = []
            for _ in range(3):
                lo = [int(rng.integers(0, n)) for n in shape]
                n = [int(rng.integers(1, s - x + 1)) for s, x in zip(shape, lo, strict=True)]
                boxes.append((*lo, *n))
            sizes = [pack.count(b) for b in boxes]
            offsets = [int(x) for x in np.cumsum([0] + sizes[:-1])]
            buf = np.full(sum(sizes) + 3, np.nan)
            pack.BoxMove(shape, "pack", boxes, offsets, xp=_SimulatedXp)(a, buf)
            want = np.concatenate([a[region(b)].ravel() for b in boxes])
            assert np.array_equal(buf[:-3], want), f"pack {boxes}"
            assert np.isnan(buf[-3:]).all(), f"pack wrote past its boxes {boxes}"
            b = np.zeros_like(a)
            pack.BoxMove(shape, "unpack", boxes[:1], offsets[:1], xp=_SimulatedXp)(b, buf)
            expect = np.zeros_like(a)
            expect[region(boxes[0])] = a[region(boxes[0])]
            assert np.array_equal(b, expect), f"unpack {boxes[0]}"
            cases += 1
    c = np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6)
    want = c.copy()
    want[:, :, 0] = c[:, :, 4]
    want[:, :, 5] = c[:, :, 1]
    src, dst = [(0, 0, 4, 4, 5, 1), (0, 0, 1, 4, 5, 1)], [(0, 0, 0, 4, 5, 1), (0, 0, 5, 4, 5, 1)]
    pack.BoxMove(c.shape, "copy", src, targets=dst, xp=_SimulatedXp)(c)
    assert np.array_equal(c, want), "copy"
    print(f"cudasim box moves: {cases + 1} boxes ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
