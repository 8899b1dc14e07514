"""``hpc bench lbm --sweep --sweep-kernels``: a point also times our kernels alone (no halo
exchange), as lbmpy is timed, and records the share of our step they take."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from hpc.comm import world


def _args(**kw):
    from benchmarks.lbm import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--sweep", "--no-lbmpy", "--sweep-point-seconds", "0.02",
                              "--sweep-reps", "2"])  # fmt: skip
    for key, value in kw.items():
        setattr(args, key, value)
    return args


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kernels", [True, False])
def test_sweep_point_records_our_kernels_alone(kernels):
    from benchmarks.lbm import _sweep_point

    shape = (12, 21)
    point = _sweep_point(
        _args(sweep_kernels=kernels), world(), "D2Q9", np.float64, shape, "bgk", 1e12, {}
    )
    assert ("ours_kernels" in point) == kernels
    if not kernels:
        return
    alone = point["ours_kernels"]
    assert alone["MLUPS"] == pytest.approx(math.prod(shape) / alone["seconds"] / 1e6)
    assert alone["step_share"] == pytest.approx(alone["seconds"] / point["ours"]["seconds"])

