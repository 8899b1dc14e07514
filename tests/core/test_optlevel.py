"""numba's optimisation level under :mod:`hpc` (``hpc.optlevel``): ``max`` unless the
environment sets ``NUMBA_OPT``, whichever of numba and hpc is imported first, and part of the
name of generated kernels. Checked on numba's own code generator in fresh interpreters."""

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


def test_generated_kernel_name_follows_the_level(tmp_path: Path) -> None:
    code = """
    import json
    from hpc.jit import load_source
    print(json.dumps({"name": load_source("optlevel_demo", "VALUE = 7\\n").__name__}))
    """
    names = {
        level: _run(code, NUMBA_OPT=level, HPC_CACHE_DIR=str(tmp_path))["name"]
        for level in ("3", "max")
    }
    assert names["3"] != names["max"]
    again = _run(code, NUMBA_OPT="max", HPC_CACHE_DIR=str(tmp_path))["name"]
    assert again == names["max"]
    for level, name in names.items():
        text = (tmp_path / "kernels" / f"{name}.py").read_text()
        assert text.endswith(f"# numba optimisation level: {level}\n")
