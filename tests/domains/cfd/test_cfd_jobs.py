"""``hpc cfd`` as a job: ``--journal DIR`` (the solver's checkpoints, resumed and removed)
survives SIGKILLs bitwise on changing rank counts; the run record (MLUPS against the measured
memory bandwidth) and ``--metrics``."""

from __future__ import annotations

import random
import subprocess
import time

import h5py
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hpc.cli import main
from hpc.runrecord import read_run_record
from tests.conftest import cli_error
from tests.core.sigkill import Launch, _env, kill_session, run_to_completion, temporaries

FIELDS = ("rho", "ux", "uy")


def _fields(path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in FIELDS}


def test_a_journaled_run_records_mlups_against_the_memory_bandwidth(tmp_path, capsys):
    journal, out, prom = tmp_path / "j", tmp_path / "cav.h5", tmp_path / "cfd.prom"
    common = ["cfd", "cavity", "--n", "16", "--steps", "120", "--check-every", "40", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "plain.h5")]) == 0
    assert main([*common, "--journal", str(journal), "--out", str(out),
                 "--metrics", str(prom)]) == 0
    capsys.readouterr()
    assert not journal.exists() and temporaries(tmp_path) == []
    plain, journaled = _fields(tmp_path / "plain.h5"), _fields(out)
    assert all(np.array_equal(plain[k], journaled[k]) for k in FIELDS)
    record = read_run_record(out)
    assert record["command"].startswith("hpc cfd cavity")
    assert (record["rate_unit"], record["work_unit"], record["limit_unit"]) == (
        "MLUPS", "cell updates", "GB/s")
    assert record["rate"] > 0 and record["limit"] > 0
    # D2Q9 in float64 moves 2 x 9 x 8 bytes per cell update
    assert record["achieved"] == pytest.approx(record["rate"] * 1e6 * 144 / 1e9)
    assert record["fraction_of_limit"] == pytest.approx(record["achieved"] / record["limit"])
    families = {f.name: f.samples for f in text_string_to_metric_families(prom.read_text())}
    assert families["hpc_run_rate"][0].value == record["rate"]


def test_journal_with_its_own_checkpoint_options_is_refused(tmp_path, capsys):
    err = cli_error(capsys, ["cfd", "cavity", "--n", "16", "--steps", "10", "--journal",
                             str(tmp_path / "j"), "--restart"])
    assert "--journal DIR is a checkpoint folder" in err


@pytest.mark.mpi
@pytest.mark.timeout(600)
def test_cavity_survives_ten_sigkills_on_changing_ranks(tmp_path):
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    common = ["-m", "hpc.cli", "cfd", "cavity", "--n", "128", "--steps", "20000",
              "--check-every", "500", "--checkpoint-every", "1500", "--quiet"]
    reference = tmp_path / "reference.h5"
    start = time.perf_counter()
    run_to_completion(Launch([*common, "--out", str(reference)]), tmp_path, timeout=240)
    # kills at random moments of a run's length as measured here, start-up included: on a
    # busy machine a fixed 0.5-4 s may end every run before its first checkpoint
    length = time.perf_counter() - start
    journal, out = tmp_path / "j", tmp_path / "cavity.h5"

    def job(nranks: int | None) -> Launch:
        return Launch([*common, "--journal", str(journal), "--out", str(out)], nranks)

    history, resumed = [], 0
    for launch in [job(2), job(None), job(1), job(3), job(2), job(None), job(2), job(1),
                   job(3), job(None)]:
        had = sorted(p.name for p in journal.glob("*.h5")) if journal.is_dir() else []
        resumed += bool(had)
        proc = subprocess.Popen(launch.command(), cwd=tmp_path, env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            proc.wait(timeout=rng.uniform(0.1, 0.7) * length)
        except subprocess.TimeoutExpired:
            pass
        finished = proc.poll() is not None
        assert not finished or proc.returncode == 0, f"{launch} exited {proc.returncode}"
        kill_session(proc)
        left = temporaries(tmp_path)
        history.append(f"{launch}: checkpoints before {had}, "
                       f"{'finished' if finished else 'killed'}, temporaries {left}")
        assert len(left) <= (launch.nranks or 1) + 1, f"seed {seed}\n" + "\n".join(history)
        if finished:  # completed by itself: the next run starts afresh
            out.unlink(missing_ok=True)
    text = f"seed {seed}\n" + "\n".join(history)
    assert resumed, text  # some run resumed from a checkpoint a killed one wrote
    run_to_completion(job(2), tmp_path, timeout=240)
    want, got = _fields(reference), _fields(out)
    assert all(np.array_equal(want[k], got[k]) for k in FIELDS), text
    assert not journal.exists() and temporaries(tmp_path) == [], text
