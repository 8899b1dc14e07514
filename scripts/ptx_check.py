"""Compile every numba.cuda kernel of the project for a real GPU, without a GPU.

The CUDA-simulator checks of the test suite launch every kernel; run under
``tests/ptx/sitecustomize.py`` they record each kernel with its argument types. This script
compiles each recorded kernel to PTX for the given compute capability
(``numba.cuda.compile_ptx``), assembles the PTX with ``ptxas -v`` and prints the registers,
spills, stack and shared memory of each: the occupancy a first GPU run starts from.

Usage::

    python scripts/ptx_check.py --record            # run the simulator checks, then compile
    python scripts/ptx_check.py --records DIR       # compile what a test run recorded
    python scripts/ptx_check.py --records DIR --json report.json

Exit status 1 when a kernel fails to compile or assemble (the message says which and why).
"""

from __future__ import annotations

import argparse
import glob
import importlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the simulator checks that launch every kernel of the project (tests/ finds them by name)
CHECKS = [
    ("check_pack_cudasim.py", []),
    ("check_rng_cudasim.py", []),
    ("check_lbm_cudasim.py", []),
    ("check_risk_cudasim.py", []),
    ("check_sql_cudasim.py", []),
    ("check_vector_cudasim.py", []),
    ("check_align_cudasim.py", []),
]


def ptxas() -> str:
    """The ptxas of the CUDA toolkit wheels (``nvidia-cuda-nvcc``), else of CUDA_HOME or PATH."""
    site = sysconfig.get_paths()["purelib"]
    for pattern in ("nvidia/cu*/bin/ptxas", "nvidia/cuda_nvcc/bin/ptxas"):
        found = sorted(glob.glob(os.path.join(site, pattern)))
        if found:
            return found[-1]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.path.exists(os.path.join(home, "bin", "ptxas")):
        return os.path.join(home, "bin", "ptxas")
    path = shutil.which("ptxas")
    if path:
        return path
    raise SystemExit("ptxas not found: install the nvidia-cuda-nvcc wheel (make env does)")


def record(directory: Path) -> None:
    """Run the simulator checks with kernel recording on (each in its own process)."""
    env = {
        **os.environ,
        "NUMBA_ENABLE_CUDASIM": "1",
        "HPC_RECORD_KERNELS": str(directory),
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "tests" / "ptx"), str(ROOT), os.environ.get("PYTHONPATH", "")]
        ),
    }
    for name, args in CHECKS:
        (script,) = sorted((ROOT / "tests").rglob(name))
        proc = subprocess.run(
            [sys.executable, str(script), *args], env=env, cwd=ROOT, capture_output=True, text=True
        )
        if proc.returncode:
            raise SystemExit(f"{name} failed under the simulator:\n{proc.stdout}\n{proc.stderr}")


def recorded(directory: Path) -> list[tuple]:
    """The distinct recorded launches: (file, module, qualname, argument types, fastmath)."""
    kernels: set[tuple] = set()
    for path in sorted(directory.glob("kernels-*.pkl")):
        with open(path, "rb") as fh:
            kernels.update(pickle.load(fh))
    return sorted(kernels, key=repr)


def _function(file: str, module: str, qualname: str):
    """The Python function of a kernel, imported as the library imports it (generated
    modules from the kernel cache directory, which goes on ``sys.path``)."""
    folder = os.path.dirname(file)
    if module.startswith("hpc_kernels_") and folder not in sys.path:
        sys.path.insert(0, folder)
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return getattr(obj, "py_func", obj)


_USAGE = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "smem": re.compile(r"(\d+) bytes smem"),
}


def _no_device(cc: tuple[int, int]) -> None:
    """Device functions called by a kernel compile for the current device's compute
    capability: with no GPU, answer ``cc`` instead of initialising a driver."""
    import types

    from numba.cuda import dispatcher

    device = types.SimpleNamespace(compute_capability=cc)
    dispatcher.get_current_device = lambda: device


def compile_one(kernel: tuple, cc: tuple[int, int], assembler: str) -> dict:
    """PTX of one kernel for ``cc`` and the resources ``ptxas -v`` reports for it."""
    from numba import cuda

    file, module, qualname, argtypes, fastmath = kernel
    row = {"kernel": f"{module}.{qualname}", "signature": ", ".join(map(str, argtypes))}
    try:
        ptx, _ = cuda.compile_ptx(
            _function(file, module, qualname), tuple(argtypes), cc=cc, fastmath=fastmath
        )
    except Exception as exc:  # noqa: BLE001 (reported per kernel)
        return {**row, "error": f"compile_ptx: {type(exc).__name__}: {exc}".splitlines()[0]}
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as fh:
        fh.write(ptx)
    try:
        proc = subprocess.run(
            [assembler, "-v", f"-arch=sm_{cc[0]}{cc[1]}", fh.name, "-o", os.devnull],
            capture_output=True,
            text=True,
        )
    finally:
        os.unlink(fh.name)
    text = proc.stdout + proc.stderr
    if proc.returncode:
        return {**row, "error": f"ptxas: {text.strip().splitlines()[-1]}"}
    for key, pattern in _USAGE.items():
        found = pattern.search(text)
        row[key] = int(found.group(1)) if found else 0
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=Path, help="folder of recorded kernels")
    p.add_argument("--record", action="store_true", help="run the simulator checks first")
    p.add_argument("--cc", default="9.0", help="compute capability (9.0: H100/H200)")
    p.add_argument("--json", type=Path, help="write the report as JSON")
    args = p.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        raise SystemExit("unset NUMBA_ENABLE_CUDASIM: PTX needs the real CUDA target")
    directory = args.records or Path(tempfile.mkdtemp(prefix="hpc-kernels-"))
    if args.record or args.records is None:
        record(directory)
    kernels = recorded(directory)
    if not kernels:
        raise SystemExit(f"no kernels recorded in {directory}")
    cc = tuple(int(x) for x in args.cc.split("."))
    assembler = ptxas()
    _no_device(cc)
    rows = [compile_one(k, cc, assembler) for k in kernels]
    print(f"{'kernel':<64s} {'regs':>5s} {'spill':>6s} {'stack':>6s} {'smem':>6s}")
    for r in rows:
        name = r["kernel"][-64:]
        if "error" in r:
            print(f"{name:<64s} FAILED {r['error']}  ({r['signature']})")
        else:
            spill = r["spill_stores"] + r["spill_loads"]
            print(f"{name:<64s} {r['registers']:5d} {spill:6d} {r['stack']:6d} {r['smem']:6d}")
    failed = [r for r in rows if "error" in r]
    arch = f"sm_{cc[0]}{cc[1]}"
    print(f"{len(rows) - len(failed)} of {len(rows)} kernel signatures compiled for {arch}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
