"""The command line, the bench JSON contract, the tour, and the package layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hpc
from tests.conftest import ROOT, run_mpi


def test_folders_map_onto_one_namespace():
    import hpc.benchmarks
    import hpc.domains
    import hpc.io

    assert Path(hpc.__file__).parent == ROOT / "hpc"
    assert Path(hpc.domains.__file__).parent == ROOT / "domains"
    assert Path(hpc.io.__file__).parent == ROOT / "io"
    assert Path(hpc.benchmarks.__file__).parent == ROOT / "benchmarks"
    assert hpc.__version__ != "0.0.0+unknown", "the package is installed (editable)"


def test_console_script_help_documents_the_commands():
    exe = Path(sys.executable).parent / "hpc"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "bench" in out.stdout and "info" in out.stdout
    out = subprocess.run(
        [str(exe), "bench", "halo", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "--size2d" in out.stdout and "--json" in out.stdout


def test_info_reports_parallel_hdf5():
    out = subprocess.run(
        [sys.executable, "-m", "hpc", "info"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert any(
        line.split()[-1] == "True" for line in out.stdout.splitlines() if "h5py parallel" in line
    )
    assert "Open MPI" in out.stdout or "MPICH" in out.stdout
    level = [line.split()[-1] for line in out.stdout.splitlines() if "NUMBA_OPT" in line]
    assert level == [os.environ["NUMBA_OPT"]]  # importing hpc set it (hpc.optlevel)


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_bench_halo_prints_the_json_contract_last():
    proc = run_mpi(
        2,
        ["-m", "hpc", "bench", "halo", "--json", "--size2d", "64", "--size3d", "16", "--reps", "5"],
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["bench"] == "halo" and record["ranks"] == 2 and record["backend"] == "cpu"
    assert record["size"] == [64, 64]
    assert record["numba_opt"] == os.environ["NUMBA_OPT"]  # set by importing hpc, inherited
    for case in record["cases"]:
        assert case["ours"]["seconds"] > 0 and case["peers"]["sendrecv"]["seconds"] > 0
        want = case["peers"]["sendrecv"]["seconds"] / case["ours"]["seconds"]
        assert case["ratio"]["sendrecv"] == pytest.approx(want)
        assert case["ours"]["GBps"] == pytest.approx(
            case["bytes_per_rank"] / case["ours"]["seconds"] / 1e9
        )
    assert {c["method"] for c in record["cases"]} == {"p2p", "rma"}
    assert record["limits"]["memcpy_GBps"] > 0


@pytest.mark.mpi
@pytest.mark.timeout(560)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_tour_checks_heat_decay_on_any_rank_count(nranks):
    proc = run_mpi(nranks, [str(ROOT / "examples" / "tour.py")], timeout=540)
    assert "PASS" in proc.stdout and "FAIL" not in proc.stdout


def test_public_api_is_curated():
    for name in hpc.__all__:
        assert hasattr(hpc, name), name


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_the_example_in_docs_core_runs_on_two_ranks(tmp_path):
    text = (ROOT / "docs" / "core.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "heat.py"
    script.write_text(code)
    proc = run_mpi(2, [str(script)])
    assert "[1/2] owns" in proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_bench_io_prints_the_json_contract_last(tmp_path):
    proc = run_mpi(
        2,
        [
            "-m",
            "hpc",
            "bench",
            "io",
            "--json",
            "--size",
            "40",
            "--reps",
            "1",
            "--dir",
            str(tmp_path / "scratch"),
        ],
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["bench"] == "io" and record["ranks"] == 2 and record["mode"] == "mpio"
    assert record["bytes"] == 40**3 * 8 and record["size"] == [40, 40, 40]
    for block in (record, record["read"]):
        for peer, fig in block["peers"].items():
            assert block["ratio"][peer] == pytest.approx(fig["seconds"] / block["ours"]["seconds"])
    assert not (tmp_path / "scratch").exists(), "the scratch folder is removed"


@pytest.mark.mpi
@pytest.mark.timeout(600)
def test_bench_lbm_prints_the_json_contract_last():
    proc = run_mpi(
        2,
        [
            "-m",
            "hpc",
            "bench",
            "lbm",
            "--json",
            "--size2d",
            "64",
            "--size3d",
            "16",
            "--steps",
            "3",
            "--reps",
            "1",
        ],
        timeout=550,
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["bench"] == "lbm" and record["ranks"] == 2 and record["size"] == [64, 64]
    assert [c["case"] for c in record["cases"]] == ["D2Q9 float64", "D3Q19 float32"]
    for case in record["cases"]:
        assert case["ours"]["MLUPS"] > 0 and case["limits"]["roofline_MLUPS"] > 0
        peer = case["peers"]["lbmpy"]
        assert "error" not in peer, peer
        assert case["ratio"]["lbmpy"] == pytest.approx(peer["seconds"] / case["ours"]["seconds"])


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "name",
    ["cfd_cavity.ipynb", "cfd_cylinder.ipynb", "risk_pricing.ipynb", "sql_tpch.ipynb",
     "vector_search.ipynb", "align_reads.ipynb"],
)
def test_example_notebooks_run(name, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "examples" / name, as_version=4)
    NotebookClient(
        nb, timeout=500, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors


def test_bench_mc_prints_the_json_contract_last():
    proc = run_mpi(
        2,
        [
            "-m",
            "hpc",
            "bench",
            "mc",
            "--json",
            "--paths",
            "40000",
            "--fixings",
            "12",
            "--european-paths",
            "40000",
            "--peer-fraction",
            "0.5",
        ],
        timeout=300,
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["bench"] == "mc" and record["ranks"] == 2
    assert [c["case"] for c in record["cases"]] == [
        "asian call, 12 fixings",
        "european call, 1 fixing",
    ]
    for case in record["cases"]:
        ours, peer = case["ours"], case["peers"]["quantlib"]
        assert "error" not in peer, peer
        # the same contract priced two ways: the estimates agree within their errors
        assert (
            abs(ours["price"] - peer["price"])
            < 4 * (ours["stderr"] ** 2 + peer["stderr"] ** 2) ** 0.5
        )
        assert case["ratio"]["quantlib"] == pytest.approx(ours["paths_per_s"] / peer["paths_per_s"])


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_bench_sql_prints_the_json_contract_last(tmp_path):
    proc = run_mpi(
        2,
        ["-m", "hpc", "bench", "sql", "--json", "--sf", "0.01", "--reps", "1"],
        env={"HPC_CACHE": str(tmp_path)},  # the tables are generated here, not in the cache
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["bench"] == "sql" and record["ranks"] == 2 and record["refused"] == []
    assert record["limits"] == {"target_ratio": 0.67}
    for name, entry in record["queries"].items():
        assert entry["equal_to_duckdb"], (name, entry.get("difference"))
        assert entry["speed_vs_duckdb"] == pytest.approx(entry["duckdb_s"] / entry["ours_s"])
    worst = min(record["queries"], key=lambda k: record["queries"][k]["speed_vs_duckdb"])
    assert record["worst"]["query"] == worst
