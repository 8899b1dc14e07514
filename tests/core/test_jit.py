"""Kernels compiled once per machine (hpc.jit.specialise), lazy imports and ``hpc warmup``.

Cache behaviour is checked on numba's own statistics (a miss is a compilation, a hit a load from
the disk cache), in fresh processes against an empty ``HPC_CACHE_DIR``; never on timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hpc.jit import module_source, specialise
from tests.conftest import ROOT


def _python(code: str, cache: Path, timeout: float = 240, **env: str) -> str:
    """Run ``code`` in a fresh interpreter with ``HPC_CACHE_DIR=cache``; its stdout."""
    full = {**os.environ, "HPC_CACHE_DIR": str(cache), "PYTHONPATH": str(cache), **env}
    full.pop("NUMBA_CACHE_DIR", None)  # numba's cache beside the generated sources
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, env=full, cwd=ROOT,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


# A template module of a user's own, written to the test's folder (importable via PYTHONPATH).
TEMPLATES = '''
import numpy as np

prange = range
_SCALE = 1.0


def _term(x):
    return _SCALE * x * x + {offset}


def _sum_of_terms(x, out):
    for i in prange(x.shape[0]):
        out[i] = _term(x[i])
'''

RUN_TEMPLATES = '''
import json
import numpy as np
import user_templates as t
from hpc.jit import specialise, cache_stats
m = specialise("user", [t._sum_of_terms], [t._term], {"_SCALE": 3.0}, "cpu")
x = np.arange(5.0)
out = np.empty(5)
m._sum_of_terms(x, out)
print(json.dumps({"out": out.tolist(), "stats": cache_stats(), "file": m.__file__}))
'''


def _stats(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_second_process_loads_the_kernel_and_a_changed_template_recompiles(tmp_path: Path):
    (tmp_path / "user_templates.py").write_text(TEMPLATES.format(offset="1.0"))
    first = _stats(_python(RUN_TEMPLATES, tmp_path))
    second = _stats(_python(RUN_TEMPLATES, tmp_path))
    x = np.arange(5.0)
    assert first["out"] == (3.0 * x * x + 1.0).tolist() == second["out"]
    assert first["stats"]["user._sum_of_terms"] == [0, 1]  # compiled
    assert second["stats"]["user._sum_of_terms"] == [1, 0]  # loaded, nothing compiled
    assert first["file"] == second["file"]

    (tmp_path / "user_templates.py").write_text(TEMPLATES.format(offset="2.0"))
    third = _stats(_python(RUN_TEMPLATES, tmp_path))
    assert third["out"] == (3.0 * x * x + 2.0).tolist()
    assert third["stats"]["user._sum_of_terms"] == [0, 1]  # the new source is compiled
    assert third["file"] != first["file"]


def test_ranks_generating_one_kernel_at_once_agree_on_one_file(tmp_path: Path):
    (tmp_path / "user_templates.py").write_text(TEMPLATES.format(offset="1.0"))
    env = {**os.environ, "HPC_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    procs = [
        subprocess.Popen([sys.executable, "-c", RUN_TEMPLATES], env=env, cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    files = {_stats(o)["file"] for o, _ in outs}
    assert len(files) == 1
    kernels = tmp_path / "kernels"
    assert [f.name for f in kernels.iterdir() if f.suffix == ".py"] == [Path(*files).name]
    assert not [f for f in kernels.iterdir() if f.name.endswith(".tmp")]
    later = _stats(_python(RUN_TEMPLATES, tmp_path))
    assert later["stats"]["user._sum_of_terms"] == [1, 0]


DOMAIN_KERNELS = '''
import json
import numpy as np
from hpc.jit import cache_stats
from hpc.rng import RandomStreams
from hpc.domains.risk import kernels as K
from hpc.domains.vector import _kernels as V

RandomStreams(3).normals(0, 8, 3)
params = dict(kind=K.EUROPEAN, k0=1, k1=2, stream=0, log_s0=np.log(100.0), s0=100.0,
              drift=0.0, vol=0.2, dt=1.0, steps=1, strike=100.0, call=True, discount=1.0,
              antithetic=True)
rows = K.block_sums(0, 2, 64, params)
hd, hp = V.init_heaps(4)
hd[:] = [3.0, 1.0, 2.0, 0.5]
hp[:] = [0, 1, 2, 3]
V._c_heapify(hd, hp, 4, np.arange(4))
V._c_sort_heap(hd, hp, 4, np.arange(4))
print(json.dumps({"stats": cache_stats(), "rows": rows.tolist(), "heap": hd.tolist()}))
'''


@pytest.mark.timeout(600)
def test_domain_kernels_load_from_the_cache_in_a_second_process(tmp_path: Path):
    first = _stats(_python(DOMAIN_KERNELS, tmp_path, timeout=500))
    second = _stats(_python(DOMAIN_KERNELS, tmp_path, timeout=500))
    used = {k for k, (hits, misses) in first["stats"].items() if hits + misses}
    assert {"rng_fill._fill_lanes", "risk_lanes._lanes_sums", "vector_heap._heapify"} <= used
    for key in used:
        assert first["stats"][key][1] >= 1, key  # compiled in the first process
        hits, misses = second["stats"][key]
        assert misses == 0 and hits >= 1, (key, second["stats"][key])
    assert second["rows"] == first["rows"]
    assert second["heap"] == [0.5, 1.0, 2.0, 3.0]


# --- the generated source ------------------------------------------------------------------

_OFFSET = 5


def _add_offset(x):
    return x + _OFFSET


def _bad_global(x):
    return x + _NOT_A_CONSTANT[0]


_NOT_A_CONSTANT = [1]


def test_the_generated_source_folds_bound_constants_and_is_deterministic():
    a = module_source([_add_offset], [], {"_OFFSET": 7}, "cpu-serial", {})
    b = module_source([_add_offset], [], {"_OFFSET": 7}, "cpu-serial", {})
    assert a == b
    assert "_OFFSET = 7\n" in a and "def _add_offset(x):" in a
    assert a != module_source([_add_offset], [], {"_OFFSET": 8}, "cpu-serial", {})
    assert "_OFFSET = 5\n" in module_source([_add_offset], [], {}, "cpu-serial", {})
    floats = module_source([_add_offset], [], {"_OFFSET": np.float32(0.1)}, "cpu", {})
    assert "_OFFSET = _hpc_np.float32(0.10000000149011612)" in floats


def test_a_specialised_kernel_computes_with_its_bound_constant():
    module = specialise("test_offset", [_add_offset], bind={"_OFFSET": 7}, target="cpu-serial")
    assert module._add_offset(1) == 8
    assert specialise("test_offset", [_add_offset], bind={"_OFFSET": 7}, target="cpu-serial") \
        is module


def test_templates_that_cannot_be_written_out_are_refused_with_their_names():
    with pytest.raises(TypeError, match="_NOT_A_CONSTANT.*_bad_global"):
        module_source([_bad_global], [], {}, "cpu", {})

    def closure(x):
        return x

    with pytest.raises(TypeError, match="module-level"):
        module_source([closure], [], {}, "cpu", {})
    with pytest.raises(ValueError, match="target"):
        specialise("x", [_add_offset], target="tpu")


# --- lazy imports and the command line -------------------------------------------------------

HEAVY = ("mpi4py.MPI", "numba", "pyarrow", "sqlglot", "h5py", "cupy")

IMPORTS_AFTER = '''
import json, sys
{code}
print(json.dumps([m for m in {heavy!r} if m in sys.modules]))
'''


@pytest.mark.parametrize(
    "code",
    [
        "import hpc",
        "import hpc.domains.sql, hpc.domains.risk, hpc.domains.vector, hpc.io",
        "from hpc.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
        "from hpc.cli import main\ntry:\n    main(['risk', 'price', '--help'])\n"
        "except SystemExit:\n    pass",
    ],
)
def test_imports_and_help_initialise_nothing(code: str, tmp_path: Path):
    out = _python(IMPORTS_AFTER.format(code=code, heavy=HEAVY), tmp_path)
    assert json.loads(out.strip().splitlines()[-1]) == []


def test_lazy_names_resolve_to_the_objects_of_their_modules():
    import hpc.domains.align as align
    import hpc.domains.vector as vector

    import hpc
    from hpc.decomposition import CartDecomposition

    assert hpc.CartDecomposition is CartDecomposition
    assert callable(align.search) and callable(vector.kmeans)  # not their submodules
    assert "HaloExchange" in dir(hpc)
    with pytest.raises(AttributeError, match="no_such_name"):
        hpc.no_such_name  # noqa: B018


def test_warmup_reports_each_task_and_refuses_unknown_domains(tmp_path: Path):
    out = _python("from hpc.cli import main\nraise SystemExit(main(['warmup', 'core']))",
                  tmp_path)
    from hpc.warmup import CORE_TASKS

    lines = [ln for ln in out.splitlines() if ln.startswith("[warmup] core")]
    assert len(lines) == len(CORE_TASKS) >= 3  # random streams, halo packing, shuffle
    assert all(ln.rstrip().endswith(")") or " s" in ln for ln in lines)
    assert [name for name, _ in CORE_TASKS] == [ln.split("core", 1)[1].strip().split(":", 1)[0]
                                                for ln in lines]
    proc = subprocess.run([sys.executable, "-m", "hpc", "warmup", "nosuch"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode != 0 and "nosuch" in proc.stderr


def test_serial_below_runs_small_work_on_one_thread_and_restores_the_count():
    import numba

    from hpc.jit import serial_below

    threads = numba.get_num_threads()
    with serial_below(10, threshold=100):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == threads
    with serial_below(100, threshold=100):
        assert numba.get_num_threads() == threads
    try:
        with serial_below(0):
            raise ValueError("inside")
    except ValueError:
        pass
    assert numba.get_num_threads() == threads


def test_parallel_kernels_run_on_tbb_where_the_wheel_is_installed():
    """The ``tbb`` wheel's library sits outside the loader's path; importing hpc loads it, so
    numba starts its work-stealing TBB layer instead of falling back to OpenMP (unless
    ``NUMBA_THREADING_LAYER`` says otherwise)."""
    if not os.path.exists(os.path.join(sys.prefix, "lib", "libtbb.so.12")):
        pytest.skip("the tbb wheel is not installed in this environment")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    code = "import hpc.threads as t; print(t.threading_layer())"
    layers = {}
    for forced in (None, "omp"):
        run_env = env if forced is None else {**env, "NUMBA_THREADING_LAYER": forced}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=run_env, timeout=120, check=True)
        layers[forced] = out.stdout.strip().splitlines()[-1]
    assert layers == {None: "tbb", "omp": "omp"}
