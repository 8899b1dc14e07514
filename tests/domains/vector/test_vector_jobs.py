"""``hpc vector build`` as a job: k-means iterations and list filling journaled, resumed
bitwise after crashes and SIGKILLs; the run record and the metrics."""

from __future__ import annotations

import importlib
import random

import h5py
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hpc.cli import main
from hpc.journal import Journal, Snapshot
from hpc.runrecord import read_run_record
from tests.core.sigkill import Launch, describe, kill_chain, run_to_completion, temporaries

BUILD = ["--synthetic", "5e3", "--dim", "8", "--index", "ivfpq", "--nlist", "16", "--m", "2"]
# long enough (about 1.5 s of work on an idle 2-core machine) for kills to land inside it
LONG_BUILD = ["--synthetic", "1e5", "--dim", "32", "--index", "ivfpq", "--nlist", "64",
              "--m", "4"]


def _datasets(path) -> dict[str, bytes]:
    with h5py.File(path, "r") as f:
        return {name: f[name][()].tobytes() for name in f}


def test_build_records_the_run_and_equals_a_build_without_journal(tmp_path, capsys):
    plain, journaled, prom = tmp_path / "a.h5", tmp_path / "b.h5", tmp_path / "m.prom"
    assert main(["vector", "build", *BUILD, "--out", str(plain)]) == 0
    argv = ["vector", "build", *BUILD, "--out", str(journaled), "--metrics", str(prom)]
    assert main([*argv, "--journal", str(tmp_path / "j")]) == 0
    capsys.readouterr()
    assert _datasets(plain) == _datasets(journaled)
    assert not (tmp_path / "j").exists()
    record = read_run_record(journaled)
    assert record["command"] == "hpc " + " ".join([*argv, "--journal", str(tmp_path / "j")])
    assert (record["work"], record["work_unit"], record["rate_unit"]) == (
        5e3,
        "vectors",
        "vectors/s",
    )
    assert record["limit_unit"] == "GFLOP/s" and record["limit"] > 0
    assert record["fraction_of_limit"] == record["achieved"] / record["limit"]
    assert record["index"] == "ivfpq"
    from hpc.domains.vector import load_index

    assert load_index(journaled).ntotal == 5_000  # the record does not disturb the index
    families = {f.name: f.samples for f in text_string_to_metric_families(prom.read_text())}
    assert families["hpc_run_fraction_of_limit"][0].value == record["fraction_of_limit"]
    assert families["hpc_run_limit"][0].labels["unit"] == "GFLOP/s"


def test_kmeans_resumes_from_its_last_saved_iteration_bitwise(tmp_path, monkeypatch):
    km = importlib.import_module("hpc.domains.vector.kmeans")
    x = np.random.default_rng(1).standard_normal((3000, 8)).astype(np.float32)
    reference, ref_assign = km.kmeans(x, 16, niter=12)
    save = Snapshot.save

    def crash_after_five(self, step, arrays):
        if step > 5:
            raise KeyboardInterrupt("killed")
        save(self, step, arrays)

    monkeypatch.setattr(Snapshot, "save", crash_after_five)
    with pytest.raises(KeyboardInterrupt), Journal(tmp_path / "j", {"k": 16}):
        km.kmeans(x, 16, niter=12)
    monkeypatch.setattr(Snapshot, "save", save)
    passes = []
    real_search = km.flat_search
    monkeypatch.setattr(km, "flat_search", lambda *a, **k: passes.append(1) or real_search(*a, **k))
    with Journal(tmp_path / "j", {"k": 16}) as journal:
        assert journal.resumed
        centroids, assign = km.kmeans(x, 16, niter=12)
    assert len(passes) == 12 + 1 - 5  # iterations 5..12 only
    assert centroids.tobytes() == reference.tobytes()
    assert assign.tobytes() == ref_assign.tobytes()


def test_a_state_saved_for_other_parameters_is_refused(tmp_path):
    from hpc.journal import JournalMismatchError

    km = importlib.import_module("hpc.domains.vector.kmeans")
    x = np.random.default_rng(1).standard_normal((500, 4)).astype(np.float32)
    with pytest.raises(KeyboardInterrupt), Journal(tmp_path / "j", {}):
        km.kmeans(x, 8, niter=3)
        raise KeyboardInterrupt
    with pytest.raises(JournalMismatchError, match=r"state0000-kmeans\.state.*niter: 4 here, 3"):
        with Journal(tmp_path / "j", {}):
            km.kmeans(x, 8, niter=4)


@pytest.mark.mpi
def test_build_survives_ten_sigkills(tmp_path, capsys):
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    reference = tmp_path / "reference.h5"
    assert main(["vector", "build", *LONG_BUILD, "--out", str(reference)]) == 0
    capsys.readouterr()
    expected = _datasets(reference)
    reference.unlink()
    journal, out = tmp_path / "j", tmp_path / "index.h5"

    def job(nranks: int | None) -> Launch:
        argv = ["-m", "hpc.cli", "vector", "build", *LONG_BUILD, "--out", str(out)]
        return Launch([*argv, "--journal", str(journal), "--quiet"], nranks)

    plan = [job(None), job(2), job(None), job(None), job(2)] * 2
    trials = kill_chain(plan, journal, tmp_path, rng, max_delay=1.0)
    history = f"seed {seed}\n{describe(trials)}"
    assert any(t.segments_before > 0 and not t.finished for t in trials), history
    run_to_completion(job(None), tmp_path)
    got = _datasets(out)
    assert got == expected, history
    assert not journal.exists(), history
    assert temporaries(tmp_path) == [], history
