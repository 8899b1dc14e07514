"""numba's optimisation level under :mod:`hpc` (``hpc.optlevel``): ``max`` unless the
environment sets ``NUMBA_OPT``, whichever of numba and hpc is imported first; processes at
different levels share one kernel cache. Checked on numba's own code generator and cache
statistics in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT

REPORT = """
import json, os
import numba
from numba.core import config
from numba.core.registry import cpu_target
codegen = cpu_target.target_context.codegen()
print(json.dumps({"env": os.environ.get("NUMBA_OPT"), "max": config.OPT.is_opt_max,
                  "cheap_vectorises": codegen._loopvect, "cheap_level": codegen._opt_level}))
"""

BEFORE = {
    "hpc first": "import hpc",
    "numba first": "import numba\nimport hpc",
    "numba compiled first": (
        "import numba\n@numba.njit\ndef f(x):\n    return x + 1\nf(1)\nimport hpc"
    ),
}


def _run(code: str, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_OPT"}
    full.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=120, env=full, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("order", sorted(BEFORE))
def test_importing_hpc_compiles_at_max(order: str) -> None:
    got = _run(BEFORE[order] + "\n" + REPORT)
    assert got == {"env": "max", "max": True, "cheap_vectorises": True, "cheap_level": 3}


@pytest.mark.parametrize("level", ["3", "2"])
def test_the_environments_level_stands(level: str) -> None:
    got = _run("import hpc\n" + REPORT, NUMBA_OPT=level)
    assert got == {"env": level, "max": False, "cheap_vectorises": False, "cheap_level": 0}


# A module-level cached kernel calling a generated helper (as the vector heaps are used): its
# numba cache names the generated module, so that name must not depend on the level.
USER_MODULE = """
import numba
from hpc.jit import specialise

def _twice(x):
    return 2 * x

_helpers = specialise("optlevel_user", [_twice], target="cpu-serial")
_c_twice = _helpers._twice

@numba.njit(cache=True)
def four_times(x):
    return _c_twice(_c_twice(x))
"""

RUN_USER = """
import json
import user_kernels
print(json.dumps({"value": user_kernels.four_times(5),
                  "compiled": user_kernels.four_times.stats.cache_misses.get(
                      next(iter(user_kernels.four_times.signatures)), 0)}))
"""


def test_processes_at_different_levels_share_one_cache(tmp_path: Path) -> None:
    (tmp_path / "user_kernels.py").write_text(USER_MODULE)
    env = {"HPC_CACHE_DIR": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "PYTHONPATH": str(tmp_path)}
    runs = [_run(RUN_USER, NUMBA_OPT=level, **env) for level in ("3", "max", "3")]
    assert [r["value"] for r in runs] == [20, 20, 20]
    assert [r["compiled"] for r in runs] == [1, 0, 0]  # compiled once, then loaded at any level
    assert len(list((tmp_path / "kernels").glob("hpc_kernels_optlevel_user_*.py"))) == 1
