"""``hpc bench mc --sweep``: every product's contract is the same on both sides (ours and
QuantLib's estimates agree), the grid, its skips and its worst point."""

from __future__ import annotations

import argparse

import pytest
from hpc.benchmarks import mc

pytest.importorskip("QuantLib")


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    mc.add_arguments(p)
    return p.parse_args(list(argv))


def test_sweep_prices_the_same_contracts_as_quantlib_and_reports_the_worst_point():
    args = _args(
        "--sweep-paths", "4e4", "--sweep-steps", "12", "--repeat", "1",
        "--peer-path-steps", "5e5", "--max-path-steps", "1e9",
    )  # fmt: skip
    sweep = mc._sweep(args)
    points = sweep["points"]
    # one-step products at one step only; the others on the steps asked for
    assert [(p["product"], p["steps"]) for p in points] == [
        ("european", 1), ("asian", 12), ("barrier", 12), ("basket", 1), ("heston", 12),
        ("american", 12),
    ]  # fmt: skip
    for p in points:
        ours, peer = p["ours"], p["peers"]["quantlib"]
        assert "error" not in peer, (p["product"], peer)
        # Euler (Heston) and Longstaff-Schwartz (American) differ in their biases: 1%
        slack = 0.01 * abs(peer["price"]) if p["product"] in ("heston", "american") else 0.0
        gap = abs(ours["price"] - peer["price"])
        assert gap < 4 * (ours["stderr"] ** 2 + peer["stderr"] ** 2) ** 0.5 + slack, p
        assert p["ratio"]["quantlib"] == pytest.approx(ours["paths_per_s"] / peer["paths_per_s"])
        per_cpu = ours["paths_per_cpu_s"] / peer["paths_per_cpu_s"]
        assert p["ratio"]["quantlib_per_cpu_second"] == pytest.approx(per_cpu)
    # only points over 1e6 path-steps count: 4e4 x 12 = 4.8e5 is under
    assert sweep["worst"] is None and sweep["worst_per_cpu_second"] is None


def test_sweep_skips_points_over_the_limits_and_ranks_the_rest():
    args = _args(
        "--sweep-products", "asian,american", "--sweep-paths", "1e5", "--sweep-steps", "12,365",
        "--repeat", "1", "--peer-path-steps", "2e5", "--max-path-steps", "2e6",
    )  # fmt: skip
    sweep = mc._sweep(args)
    by = {(p["product"], p["steps"]): p for p in sweep["points"]}
    assert "over the limit" in by["asian", 365]["skipped"]  # 3.65e7 path-steps > 2e6
    assert "over the limit" in by["american", 365]["skipped"]
    ranked = [by["asian", 12], by["american", 12]]  # 1.2e6 path-steps each: both count
    keep = ("product", "paths", "steps", "ratio", "loadavg")
    for name, figure in (("worst", "quantlib_per_core"),
                         ("worst_per_cpu_second", "quantlib_per_cpu_second")):  # fmt: skip
        worst = min(ranked, key=lambda p: p["ratio"][figure])  # noqa: B023
        assert sweep[name] == {k: worst[k] for k in keep if k in worst}, name


def test_sweep_rejects_an_unknown_product():
    with pytest.raises(ValueError, match="lookback"):
        mc._sweep(_args("--sweep-products", "asian,lookback"))
