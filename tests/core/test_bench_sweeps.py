"""``hpc bench halo|io|join|lbm --sweep`` on tiny grids under ``mpirun -n 2``: the JSON record's
structure (every point, ``worst``, ``affinity`` of both sides) and that every point's peer ran
on the same data as ours. Timings are not asserted: performance is measured by benchmarks."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_mpi


def _record(argv: list[str]) -> dict:
    proc = run_mpi(2, ["-m", "hpc", "bench", *argv, "--json"], timeout=200)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check_common(record: dict, points: int) -> None:
    assert record["ranks"] == 2
    assert len(record["sweep"]) == points
    assert record["sweep_seconds"] > 0
    aff = record["affinity"]
    assert len(aff["ours"]["per_rank"]) == 2 and aff["ours"]["cpus"]
    assert aff["peer"]["cpus"] and aff["same_cores"] is True, aff
    assert record["machine"]["cpus"] >= 1


@pytest.mark.mpi
@pytest.mark.timeout(240)
def test_halo_sweep_reports_both_floors_and_the_worst_point():
    record = _record(
        ["halo", "--size2d", "32", "--size3d", "12", "--reps", "5", "--sweep",
         "--sweep-bytes", "1e4", "--sweep-dims", "1,3", "--sweep-halos", "1,3",
         "--sweep-point-seconds", "0.01"]
    )  # fmt: skip
    _check_common(record, points=2 * 2 * 2)  # dims x halos x methods (p2p, rma)
    seen = set()
    for p in record["sweep"]:
        assert "skipped" not in p, p
        seen.add((p["ndim"], p["halo"], p["method"]))
        assert p["same_data"] is True  # the NumPy exchange's result equals ours
        floor = p["peers"]["floor"]
        parts = floor["sendrecv_remote_seconds"] + floor["self_copy_seconds"]
        assert floor["seconds"] == pytest.approx(parts)
        assert p["ratio"]["floor"] == pytest.approx(floor["seconds"] / p["ours"]["seconds"])
        assert p["ratio"]["sendrecv"] > 0 and p["ratio"]["numpy_sendrecv"] > 0
    assert seen == {(d, h, m) for d in (1, 3) for h in (1, 3) for m in ("p2p", "rma")}
    worst = record["worst"]
    assert worst["ratio"]["floor"] == min(p["ratio"]["floor"] for p in record["sweep"])
    assert {"ndim", "size", "halo", "method", "ours", "peers"} <= worst.keys()


@pytest.mark.mpi
@pytest.mark.timeout(240)
def test_io_sweep_runs_one_and_two_ranks_on_the_same_bytes(tmp_path):
    scratch = tmp_path / "scratch"
    record = _record(
        ["io", "--size", "20", "--reps", "1", "--dir", str(scratch), "--sweep",
         "--sweep-bytes", "1e4,1e5", "--sweep-ranks", "1,2,3"]
    )  # fmt: skip
    _check_common(record, points=2 * 3)
    assert record["same_data"] is True
    done = [p for p in record["sweep"] if "skipped" not in p]
    assert sorted(p["ranks"] for p in done) == [1, 1, 2, 2]
    assert all("3 ranks asked" in p["skipped"] for p in record["sweep"] if p["ranks"] == 3)
    for p in done:
        assert p["same_data"] is True  # tofile wrote the array ours wrote
        assert p["mode"] == ("single" if p["ranks"] == 1 else "mpio")
        assert p["ratio"]["tofile"] == pytest.approx(
            p["peers"]["tofile"]["seconds"] / p["ours"]["seconds"]
        )
        assert p["read"]["peers"]["fromfile"]["seconds"] > 0
    assert record["worst"]["ratio"]["tofile"] == min(p["ratio"]["tofile"] for p in done)
    assert not scratch.exists(), "the scratch folder is removed"


@pytest.mark.mpi
@pytest.mark.timeout(240)
def test_join_sweep_checks_every_answer_against_duckdb():
    pytest.importorskip("duckdb")
    record = _record(
        ["join", "--probe", "2e3", "--build", "1e3", "--reps", "1", "--no-polars",
         "--broadcast-rows", "1e3", "--sweep", "--sweep-build", "1e3,1e4",
         "--sweep-probe", "1e3,1e4", "--sweep-keys", "uniform,skewed"]
    )  # fmt: skip
    _check_common(record, points=2 * 2 * 2)
    assert record["limits"]["answers_agree"] is True
    assert record["exchange"] == "broadcast_build"
    plans = {(1000, 1000): "broadcast_build", (1000, 10000): "broadcast_build",
             (10000, 1000): "broadcast_probe", (10000, 10000): "shuffle"}  # fmt: skip
    for p in record["sweep"]:
        # the engine's plan: the smaller side broadcast up to --broadcast-rows, else shuffled
        assert p["exchange"] == plans[p["build"], p["probe"]]
        assert p["answers_agree"] is True  # DuckDB computed the same count and sums
        assert p["size"]["matches"] > 0
        if p["keys"] == "skewed":  # every skewed probe key is a build key
            assert p["size"]["matches"] == p["probe"]
        assert p["ratio"] == pytest.approx(
            p["ours"]["tuples_per_s"] / p["peers"]["duckdb"]["tuples_per_s"]
        )
    worst = record["worst"]
    assert worst["ratio"]["duckdb"] == min(p["ratio"] for p in record["sweep"])
    assert {"keys", "build", "probe", "size"} <= worst.keys()


@pytest.mark.mpi
@pytest.mark.timeout(240)
def test_lbm_sweep_rates_both_targets_and_picks_the_worst_point():
    from math import prod

    pytest.importorskip("lbmpy")
    record = _record(
        ["lbm", "--size2d", "75", "--size3d", "17", "--steps", "2", "--reps", "1", "--sweep",
         "--sweep-bytes", "2e5", "--sweep-ranks", "1,2,3", "--sweep-point-seconds", "0.05",
         "--sweep-reps", "2", "--sweep-memory-sized", "3e5"]
    )  # fmt: skip
    _check_common(record, points=2 * 3)  # cases x rank counts
    done = [p for p in record["sweep"] if "skipped" not in p]
    assert all("3 ranks asked" in p["skipped"] for p in record["sweep"] if p["ranks"] == 3)
    assert sorted((p["case"], p["ranks"]) for p in done) == [
        ("D2Q9 float64", 1), ("D2Q9 float64", 2), ("D3Q19 float32", 1), ("D3Q19 float32", 2)
    ]  # fmt: skip
    margins = []
    for p in done:
        q, item = (9, 8) if p["case"].startswith("D2Q9") else (19, 4)
        cells = prod(p["size"])
        assert cells <= prod(p["block"]) * p["ranks"] < 1.2 * cells  # rank 0's block, largest
        assert len(p["threads"]) == len(p["cpus"]) == p["ranks"]
        assert p["block_bytes"] == cells * q * item // p["ranks"]
        assert p["block_bytes"] == pytest.approx(2e5, rel=0.15)  # the block asked, per rank
        assert p["memory_sized"] == (p["ranks"] == 2)  # all ranks' populations >= 3e5 bytes
        assert p["same_state"] is True and p["steps"] % 2 == 0
        assert p["ours"]["MLUPS"] == pytest.approx(cells / p["ours"]["seconds"] / 1e6)
        roof = p["peers"]["roofline"]
        assert roof["bytes_per_cell"] == 2 * q * item  # q populations read and written
        assert roof["MLUPS"] == pytest.approx(roof["bandwidth_GBps"] * 1e3 / roof["bytes_per_cell"])
        assert p["ratio"]["roofline"] == pytest.approx(p["ours"]["MLUPS"] / roof["MLUPS"])
        peer = p["peers"]["lbmpy"]
        assert p["ratio"]["lbmpy"] == pytest.approx(peer["seconds"] / p["ours"]["seconds"])
        m = {"lbmpy": p["ratio"]["lbmpy"] / 1.2}
        if p["memory_sized"]:
            m["roofline"] = p["ratio"]["roofline"] / 0.85
        assert p["margin"] == pytest.approx(min(m.values()))
        assert p["limited_by"] == min(m, key=m.get)
        margins.append(p["margin"])
    worst = record["worst"]
    assert worst["margin"] == min(margins)
    assert worst["targets"] == {"lbmpy": 1.2, "roofline": 0.85}
    assert {"case", "ranks", "size", "block", "ratio", "limited_by"} <= worst.keys()
