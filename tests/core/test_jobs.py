"""Progress bars, run records, Prometheus metrics and the Job helper of the command lines."""

from __future__ import annotations

import argparse
import io
import json

import h5py
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import hpc
from hpc.jobs import Job, add_job_options, journal_key
from hpc.metrics import subcommand, write_metrics
from hpc.progress import Progress
from hpc.run import map_blocks
from hpc.runrecord import GPUSampler, RunRecord, read_run_record, write_run_record


def rows(first: int, count: int) -> np.ndarray:
    return np.arange(first, first + count, dtype=float)[:, None] * np.ones((1, 2))


# -- progress ----------------------------------------------------------------------------


def test_the_bar_counts_map_blocks_phases_in_the_domain_unit():
    sink = io.StringIO()
    with Progress(total=3000, unit="paths", file=sink) as bar:
        with bar.phase(1000) as phase:
            map_blocks(rows, 10, 2, executor="local")
            assert bar.n == 1000
        assert len(phase.counters) == 1 and phase.counters[0].mine == 10
        with bar.phase(2000):
            map_blocks(rows, 4, 2, executor="local", batch=1)
        assert bar.n == 3000
        bar.update(0)  # a no-op update keeps the count
    text = sink.getvalue()
    assert "3.00k/3.00k" in text and "paths/s" in text and "100%" in text


def test_local_blocks_are_counted_as_they_finish_with_a_bar():
    seen = []
    sink = io.StringIO()
    with Progress(total=8, unit="vectors", file=sink) as bar:
        with bar.phase(8):

            def fn(first, count):
                seen.append(bar.n)  # the bar before this batch ran
                return rows(first, count)

            map_blocks(fn, 8, 2, executor="local")
    assert seen == [0, 1, 2, 3, 4, 5, 6, 7]  # one block per batch: 8 batches when a bar shows


def test_no_bar_off_a_terminal_or_with_quiet(capsys):
    bar = Progress(total=10, unit="steps")  # pytest's stdout is not a terminal
    assert not bar.enabled
    bar.update(5)
    bar.write("a line")
    bar.close()
    assert capsys.readouterr().out == "a line\n"
    assert not Progress(total=10, unit="steps", enabled=False, file=io.StringIO()).enabled


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_stdout_the_bar_shows_there_when_stderr_is_a_pipe(monkeypatch):
    out, err = _Tty(), io.StringIO()  # as under mpirun: stdout a pty, stderr a pipe
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    with Progress(total=5, unit="scenarios") as bar:
        assert bar.enabled
        bar.update(5)
        bar.write("result line")
    assert "5.00/5.00" in out.getvalue() and "result line" in out.getvalue()
    assert err.getvalue() == ""


def test_without_a_bar_map_blocks_keeps_one_batch():
    calls = []
    with Progress(total=1, unit="paths", enabled=False) as bar, bar.phase(1):
        map_blocks(lambda f, c: calls.append((f, c)) or rows(f, c), 10, 2, executor="local")
    assert calls == [(0, 10)]


# -- run records -------------------------------------------------------------------------


def test_a_run_record_is_stored_in_the_file_and_read_back_exactly(tmp_path):
    record = RunRecord(backend="cpu", argv=["hpc", "risk", "price", "book.json", "--out", "x"])
    got = record.finish(
        work=2.0e6, work_unit="paths", limit=4.0e6, limit_unit="paths/s", achieved=1.0e6
    )
    assert got["command"] == "hpc risk price book.json --out x"
    assert got["hpc_version"] == hpc.__version__
    assert got["ranks"] == 1 and got["backend"] == "cpu"
    assert sum(got["devices"].values()) == 1
    assert got["rate"] == 2.0e6 / got["wall_seconds"] and got["rate_unit"] == "paths/s"
    assert got["fraction_of_limit"] == 0.25 and got["achieved"] == 1.0e6
    assert "gpu" not in got
    path = tmp_path / "out.h5"
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(3)
    write_run_record(path, got)
    write_run_record(path, got)  # replaced, not duplicated
    assert read_run_record(path) == got
    with h5py.File(path, "r") as f:
        attrs = f["run"].attrs
        assert attrs["ranks"] == 1 and attrs["command"] == got["command"]
        assert json.loads(attrs["devices"]) == got["devices"]
        assert list(f["data"][()]) == [0, 1, 2]  # the file's other content is kept


def test_no_limit_no_fraction_and_a_missing_record_is_named(tmp_path):
    got = RunRecord(argv=["hpc", "x"]).finish(rate=5.0, rate_unit="MLUPS")
    assert got["rate"] == 5.0 and "limit" not in got and "fraction_of_limit" not in got
    path = tmp_path / "plain.h5"
    h5py.File(path, "w").close()
    with pytest.raises(KeyError, match="no run record"):
        read_run_record(path)


def test_the_gpu_sampler_is_inert_without_nvml_or_a_device():
    sampler = GPUSampler(device_id=99).start()
    assert not sampler.available
    assert sampler.stop() is None
    assert RunRecord(backend="gpu", argv=["hpc"]).finish().get("gpu") is None


# -- metrics -----------------------------------------------------------------------------


def _parse(path) -> dict[str, list]:
    families = text_string_to_metric_families(path.read_text())
    return {f.name: f.samples for f in families}


def test_metrics_parse_back_with_the_record_values(tmp_path):
    record = RunRecord(backend="cpu", argv=["hpc", "cfd", "cavity", "--n", "65"]).finish(
        rate=812.5, rate_unit="MLUPS", limit=1000.0, limit_unit="MLUPS"
    )
    record["gpu"] = [
        {"rank": 1, "utilisation_mean_percent": 55.0, "utilisation_max_percent": 90.0,
         "memory_used_max_bytes": 2**30, "name": "GPU", "samples": 3}
    ]  # fmt: skip
    path = tmp_path / "hpc.prom"
    write_metrics(path, record)
    m = _parse(path)
    labels = {"command": "cfd cavity", "backend": "cpu"}
    assert m["hpc_run_wall_seconds"][0].value == record["wall_seconds"]
    assert m["hpc_run_wall_seconds"][0].labels == labels
    assert m["hpc_run_rate"][0].value == 812.5
    assert m["hpc_run_rate"][0].labels == {**labels, "unit": "MLUPS"}
    assert m["hpc_run_fraction_of_limit"][0].value == 0.8125
    assert m["hpc_run_ranks"][0].value == 1
    info = m["hpc_run_info"][0]
    assert info.labels["version"] == hpc.__version__
    assert json.loads(info.labels["devices"]) == record["devices"]
    gpu = m["hpc_run_gpu_memory_used_max_bytes"][0]
    assert gpu.value == 2**30 and gpu.labels["rank"] == "1"
    assert "hpc_run_work" not in m  # no work given, none written
    assert not list(tmp_path.glob("*.tmp*"))


def test_subcommand_names():
    assert subcommand("hpc risk price book.json --paths 1e6") == "risk price"
    assert subcommand("hpc cfd cavity --re 100") == "cfd cavity"
    assert subcommand("hpc vector build --synthetic 1e4") == "vector build"


# -- the Job helper ----------------------------------------------------------------------


def _args(tmp_path, **extra):
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    add_job_options(parser)
    ns = parser.parse_args([])
    for k, v in extra.items():
        setattr(ns, k, v)
    return ns


def test_journal_key_leaves_out_what_does_not_change_results(tmp_path):
    ns = _args(tmp_path, seed=4, out="x.h5", metrics="m.prom", journal="j", quiet=True)
    ns.risk_command = "price"
    assert journal_key(ns, backend="cpu") == {"seed": 4, "command": "price", "backend": "cpu"}


def test_a_job_journals_records_and_writes_metrics(tmp_path):
    ns = _args(tmp_path, journal=str(tmp_path / "j"), metrics=str(tmp_path / "m.prom"))
    out = tmp_path / "out.h5"
    with Job(ns, unit="blocks", total=20, backend="cpu") as job:
        assert job.journal is not None and not job.journal.resumed
        with job.progress.phase(20):
            got = map_blocks(rows, 20, 2, executor="local")
        record = job.finish(work=20, work_unit="blocks")
        job.write_record(str(out))
        assert (tmp_path / "j").is_dir()
    assert got.tobytes() == rows(0, 20).tobytes()
    assert not (tmp_path / "j").exists()
    assert read_run_record(out) == record
    m = _parse(tmp_path / "m.prom")
    assert m["hpc_run_work"][0].value == 20 and m["hpc_run_work"][0].labels["unit"] == "blocks"


def test_a_failed_job_keeps_its_journal_and_writes_no_metrics(tmp_path):
    ns = _args(tmp_path, journal=str(tmp_path / "j"), metrics=str(tmp_path / "m.prom"))
    with pytest.raises(ZeroDivisionError), Job(ns, unit="blocks", total=20):
        map_blocks(rows, 20, 2, executor="local")
        1 / 0  # noqa: B018
    assert (tmp_path / "j" / "key.json").exists()
    assert not (tmp_path / "m.prom").exists()


def test_a_metrics_file_in_a_missing_directory_is_refused_before_work(tmp_path):
    ns = _args(tmp_path, metrics=str(tmp_path / "no" / "m.prom"))
    with pytest.raises(hpc.HPCError, match="--metrics"):
        Job(ns, unit="x")


class _FakeNVML:
    """A stand-in for pynvml: utilisation 10, 20, 30, ... and used memory 1, 2, 3, ... GiB."""

    def __init__(self):
        self.calls = 0

    def nvmlInit(self):  # noqa: N802 - pynvml's names
        pass

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        assert index == 0
        return "handle"

    def nvmlDeviceGetName(self, handle):  # noqa: N802
        return b"Fake GPU 80GB"

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        self.calls += 1
        return argparse.Namespace(gpu=10 * self.calls)

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        return argparse.Namespace(used=self.calls * 2**30)


def test_nvml_samples_in_a_thread_go_into_the_record(monkeypatch):
    import sys
    import threading

    fake = _FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    backend = argparse.Namespace(name="gpu", device_id=0)
    record = RunRecord(backend=backend, argv=["hpc", "risk", "price"])
    sampler = record.sampler
    assert sampler is not None and sampler.available and sampler.name == "Fake GPU 80GB"
    assert any(t.name == "hpc-nvml" for t in threading.enumerate())
    while fake.calls < 4:  # the thread samples every 0.5 s; wait for a few, however long
        threading.Event().wait(0.05)
    got = record.finish(work=1.0, work_unit="paths")
    n = fake.calls
    (gpu,) = got["gpu"]
    assert gpu == {
        "rank": 0,
        "name": "Fake GPU 80GB",
        "samples": n,
        "utilisation_mean_percent": sum(10.0 * i for i in range(1, n + 1)) / n,
        "utilisation_max_percent": 10.0 * n,
        "memory_used_max_bytes": n * 2**30,
    }
    assert got["devices"] == {"Fake GPU 80GB": 1} and got["backend"] == "gpu"
    assert not any(t.name == "hpc-nvml" for t in threading.enumerate())
