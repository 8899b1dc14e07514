"""Run under mpirun: save checkpoints in a loop until killed (the kill test's child job).

The data of step s is ``reference + s`` (float64) and ``s`` (int64), so a reader can tell a
checkpoint's step from its content and verify every value.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hpc.io import Checkpoint

import hpc
from hpc.comm import world

SHAPE = (64, 48, 40)


def field(step: int) -> np.ndarray:
    return np.arange(np.prod(SHAPE), dtype=np.float64).reshape(SHAPE) + step


def main() -> int:
    comm = world()
    d = hpc.CartDecomposition(SHAPE, periodic=True, halo=1)
    ckpt = Checkpoint(Path(sys.argv[1]), keep=3)
    u = d.allocate(np.float64)
    s = d.allocate(np.int64)
    step = (ckpt.latest() or 0) + 1
    while True:
        d.interior(u)[...] = field(step)[d.local_slices]
        s[...] = step
        ckpt.save(step, {"u": u, "s": s}, d, attrs={"step": step})
        if comm.rank == 0:
            print(f"saved {step}", flush=True)
        step += 1


if __name__ == "__main__":
    sys.exit(main())
