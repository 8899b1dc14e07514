"""``hpc risk price|var`` as jobs: --journal survives SIGKILLs bitwise, run records, metrics."""

from __future__ import annotations

import json
import random

import h5py
import numpy as np
import pytest
from hpc.io import read_table
from prometheus_client.parser import text_string_to_metric_families

from hpc.cli import main
from hpc.journal import Journal
from hpc.runrecord import read_run_record
from tests.conftest import ROOT, cli_error
from tests.core.sigkill import Launch, describe, kill_chain, run_to_completion, temporaries

PORTFOLIO = {
    "model": {"spot": 100.0, "vol": 0.2, "rate": 0.03, "dividend": 0.01},
    "instruments": [
        {"name": "call", "type": "european", "strike": 100, "maturity": 1.0, "kind": "call"},
        {"name": "asian", "type": "asian", "strike": 100, "maturity": 1.0, "fixings": 64},
    ],
}
BOOK = str(ROOT / "examples" / "book.json")


@pytest.fixture
def portfolio(tmp_path):
    path = tmp_path / "book.json"
    path.write_text(json.dumps(PORTFOLIO))
    return path


def _prices(path) -> dict[str, np.ndarray]:
    table = read_table(path, "prices")
    return {k: np.asarray(v) for k, v in table.items() if k != "seconds"}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].tobytes() == b[k].tobytes() if a[k].dtype.kind != "U" else list(a[k]) == list(b[k])
        for k in a
    )


def test_price_out_holds_a_run_record_and_metrics_parse(tmp_path, portfolio, capsys):
    out, prom = tmp_path / "out.h5", tmp_path / "hpc.prom"
    with h5py.File(out, "w") as f:
        f["keep"] = np.arange(4)  # an existing file keeps its other content
    argv = ["risk", "price", str(portfolio), "--paths", "2e4", "--executor", "local"]
    argv += ["--out", str(out), "--metrics", str(prom), "--journal", str(tmp_path / "j")]
    assert main(argv) == 0
    capsys.readouterr()
    record = read_run_record(out)
    paths = int(read_table(out, "prices")["paths"].sum())
    assert record["command"].endswith(" ".join(argv))
    assert record["command"].startswith("hpc ")
    assert (record["ranks"], record["backend"], record["executor"]) == (1, "cpu", "local")
    assert (record["work"], record["work_unit"], record["rate_unit"]) == (paths, "paths", "paths/s")
    assert record["rate"] == paths / record["wall_seconds"]
    assert "limit" not in record  # no ceiling defined for Monte Carlo paths
    with h5py.File(out, "r") as f:
        assert list(f["keep"][()]) == [0, 1, 2, 3]
    assert not (tmp_path / "j").exists()
    families = {f.name: f.samples for f in text_string_to_metric_families(prom.read_text())}
    rate = families["hpc_run_rate"][0]
    assert rate.value == record["rate"]
    assert rate.labels == {"command": "risk price", "backend": "cpu", "unit": "paths/s"}
    assert families["hpc_run_wall_seconds"][0].value == record["wall_seconds"]
    assert temporaries(tmp_path) == []


def test_a_journal_for_other_arguments_is_refused_naming_the_difference(
    tmp_path, portfolio, capsys
):
    journal = tmp_path / "j"
    argv = ["risk", "price", str(portfolio), "--paths", "2e4", "--executor", "local"]
    Journal(journal, {"seed": 1})  # left by another run
    err = cli_error(capsys, [*argv, "--journal", str(journal)])
    assert f"journal {str(journal)!r} was written for other arguments" in err
    assert "seed: 0 here, 1 in the journal" in err and "paths: 20000 here, absent" in err
    err = cli_error(capsys, [*argv, "--journal", str(tmp_path / "no" / "j")])
    assert "no such directory" in err


def test_a_damaged_segment_is_reported_naming_the_file_and_nothing_is_written(
    tmp_path, portfolio, capsys, monkeypatch
):
    journal, out = tmp_path / "j", tmp_path / "out.h5"
    argv = ["risk", "price", str(portfolio), "--paths", "2e4", "--executor", "local"]
    argv += ["--journal", str(journal), "--out", str(out)]
    monkeypatch.setattr(Journal, "complete", lambda self: None)  # keep the full journal
    assert main(argv) == 0
    monkeypatch.undo()
    out.unlink()
    seg = sorted(journal.glob("s0001-*.seg"))[0]
    data = bytearray(seg.read_bytes())
    data[-1] ^= 1
    seg.write_bytes(bytes(data))
    capsys.readouterr()
    err = cli_error(capsys, argv)
    assert f"journal segment {str(seg)!r}: checksum mismatch" in err
    assert not out.exists() and temporaries(tmp_path) == []


def test_var_with_a_journal_and_metrics(tmp_path, capsys):
    prom = tmp_path / "var.prom"
    argv = ["risk", "var", BOOK, "--scenarios", "2e4", "--json"]
    assert main(argv) == 0
    plain = capsys.readouterr().out
    assert main([*argv, "--journal", str(tmp_path / "j"), "--metrics", str(prom)]) == 0
    assert capsys.readouterr().out == plain
    families = {f.name: f.samples for f in text_string_to_metric_families(prom.read_text())}
    assert families["hpc_run_work"][0].value == 2e4
    assert families["hpc_run_rate"][0].labels["unit"] == "scenarios/s"
    assert not (tmp_path / "j").exists()


@pytest.mark.mpi
def test_price_survives_ten_sigkills_on_changing_ranks_and_executors(tmp_path, portfolio, capsys):
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    # about 2 s of work on an idle 2-core machine: kills land inside it
    common = [str(portfolio), "--paths", "8e6", "--seed", "5"]
    ref_out = tmp_path / "reference.h5"
    assert main(["risk", "price", *common, "--executor", "local", "--out", str(ref_out)]) == 0
    capsys.readouterr()
    reference = _prices(ref_out)
    ref_out.unlink()
    journal, out = tmp_path / "j", tmp_path / "prices.h5"

    def job(nranks: int | None, executor: str = "mpi") -> Launch:
        argv = ["-m", "hpc.cli", "risk", "price", *common, "--executor", executor]
        return Launch([*argv, "--journal", str(journal), "--out", str(out), "--quiet"], nranks)

    plan = [
        job(2), job(None, "local"), job(1), job(2), job(None, "dask"),
        job(3), job(None, "local"), job(2), job(1), job(None, "local"),
    ]  # fmt: skip
    trials = kill_chain(plan, journal, tmp_path, rng, max_delay=1.0)
    history = f"seed {seed}\n{describe(trials)}"
    assert any(t.segments_before > 0 and not t.finished for t in trials), history
    run_to_completion(job(2), tmp_path)
    assert _same(_prices(out), reference), history
    assert read_run_record(out)["ranks"] == 2
    assert not journal.exists(), history
    assert temporaries(tmp_path) == [], history


@pytest.mark.mpi
def test_var_survives_ten_sigkills_on_changing_ranks(tmp_path, capsys):
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    common = ["risk", "var", BOOK, "--scenarios", "1e7", "--seed", "3", "--json"]
    assert main(common) == 0
    reference = json.loads(capsys.readouterr().out)
    journal = tmp_path / "j"

    def job(nranks: int | None) -> Launch:
        return Launch(["-m", "hpc.cli", *common, "--journal", str(journal)], nranks)

    plan = [job(2), job(None), job(3), job(1), job(2), job(None), job(2), job(None), job(1), job(2)]
    trials = kill_chain(plan, journal, tmp_path, rng, max_delay=1.0)
    history = f"seed {seed}\n{describe(trials)}"
    assert any(t.segments_before > 0 and not t.finished for t in trials), history
    got = json.loads(run_to_completion(job(3), tmp_path).strip().splitlines()[-1])
    assert got == reference, history  # floats through repr: bitwise
    assert not journal.exists(), history
    assert temporaries(tmp_path) == [], history
