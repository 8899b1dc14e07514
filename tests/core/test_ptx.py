"""Every numba.cuda kernel of the project compiles for a real GPU (sm_90), checked without one.

The CUDA-simulator checks launch each kernel (core pack, rng, LBM, risk, SQL, vector, align)
with kernel recording on; each recorded kernel and argument signature is then compiled to PTX
for compute capability 9.0 and assembled by ptxas (``scripts/ptx_check.py``, which also prints
the registers, spills, stack and shared memory of each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("numba_cuda", reason="needs numba-cuda and the CUDA toolkit wheels")


@pytest.mark.cudasim
@pytest.mark.timeout(600)
def test_every_kernel_compiles_for_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    report = tmp_path / "ptx.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ptx_check.py"), "--record", "--json",
         str(report)],
        capture_output=True, text=True, timeout=560, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    rows = json.loads(report.read_text())
    kernels = {r["kernel"].split(".")[-1] for r in rows}
    # the kernels of every domain are among them
    for name in ("move_rows", "_fill_threads", "stream_collide", "_gpu_samples",
                 "join_build", "_gpu_select", "_pairs_kernel"):  # fmt: skip
        assert name in kernels, (name, sorted(kernels))
    assert all(r["registers"] > 0 for r in rows)
