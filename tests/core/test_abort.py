"""One rank raising ends the whole job quickly, with that rank's traceback: no hang."""

from __future__ import annotations

import time

import pytest

from tests.conftest import run_mpi

FAILING = """
import hpc
from hpc.comm import world
comm = world()
if comm.rank == 1:
    raise ZeroDivisionError("rank one fails on purpose")
comm.Barrier()  # the other ranks wait here forever unless the job is aborted
"""


@pytest.mark.mpi
@pytest.mark.timeout(60)
@pytest.mark.parametrize("launch", ["python -m mpi4py", "hpc excepthook"])
def test_exception_on_one_rank_aborts_the_job(tmp_path, launch):
    script = tmp_path / "fail.py"
    script.write_text(FAILING)
    if launch == "python -m mpi4py":
        argv = [str(script)]
    else:  # plain `python script.py` under mpirun: only hpc's excepthook prevents the hang
        argv = [
            "-c",
            f"import runpy, sys; sys.argv = [{str(script)!r}]; "
            "import hpc; runpy.run_path(sys.argv[0], run_name='__main__')",
        ]
    t0 = time.monotonic()
    proc = run_mpi(3, argv, timeout=30, check=False)
    elapsed = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert elapsed < 30
    assert "ZeroDivisionError: rank one fails on purpose" in out
    assert out.count("rank one fails on purpose") <= 2  # the message once, plus the source line
