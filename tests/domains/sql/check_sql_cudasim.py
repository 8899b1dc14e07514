"""Run with NUMBA_ENABLE_CUDASIM=1: the numba.cuda hash join, group ids and reductions of
``hpc.domains.sql.gpu_ops`` give the CPU kernels' results (NumPy arrays stand in for CuPy's)."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc.domains.sql import aggregate as cpu_agg  # noqa: E402
from hpc.domains.sql import gpu_ops  # noqa: E402
from hpc.domains.sql.join import hash_join  # noqa: E402

EMPTY = np.iinfo(np.int64).min  # the table's free-slot marker must work as a key too


def _keys(rng: np.random.Generator, n: int, universe: int) -> np.ndarray:
    """Keys with duplicates and misses; a few extreme values (the marker among them)."""
    k = rng.integers(-universe, universe, n, dtype=np.int64)
    extreme = rng.random(n) < 0.05
    k[extreme] = rng.choice(np.array([EMPTY, EMPTY + 1, np.iinfo(np.int64).max]), extreme.sum())
    return k


def _sorted_pairs(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    order = np.lexsort((right, left))
    return np.stack([left[order], right[order]])


def check_joins(rng: np.random.Generator) -> int:
    cases = 0
    sizes = [(0, 0), (0, 30), (40, 0), (1, 1), (300, 120), (200, 400)]
    for n, m in sizes:
        for universe in (5, 200, 1 << 40):
            p, b = _keys(rng, n, universe), _keys(rng, m, universe)
            p_narrow = p.astype(np.int32) if universe < 1 << 31 else p  # any integer dtype
            for nulls in (False, True):
                pv = rng.random(n) > 0.2 if nulls else None
                bv = rng.random(m) > 0.2 if nulls else None
                for how in ("inner", "left", "semi", "anti"):
                    want = hash_join(p_narrow, b, how, pv, bv)
                    got = gpu_ops.hash_join(np, p_narrow, b, how, pv, bv)
                    what = f"join how={how} n={n} m={m} universe={universe} nulls={nulls}"
                    assert got[0].dtype == got[1].dtype == np.int64, what
                    assert np.array_equal(_sorted_pairs(*want), _sorted_pairs(*got)), (
                        f"{what}: {want} != {got}"
                    )
                    if how in ("semi", "anti"):  # probe rows ascending, as on the CPU
                        assert np.array_equal(want[0], got[0]), what
                    cases += 1
    # a heavy hitter: one build key repeated, many probe rows on it
    b = np.full(150, 7, dtype=np.int64)
    b[::3] = 3
    p = rng.choice(np.array([3, 7, 9]), 200)
    want = hash_join(p, b)
    got = gpu_ops.hash_join(np, p, b)
    assert np.array_equal(_sorted_pairs(*want), _sorted_pairs(*got)), "heavy hitter join"
    for bad in (
        lambda: gpu_ops.hash_join(np, np.arange(3), np.arange(3), "outer"),
        lambda: gpu_ops.hash_join(np, np.linspace(0, 1, 3), np.arange(3)),
    ):
        try:
            bad()
        except (ValueError, TypeError):
            pass
        else:
            raise AssertionError("bad join input accepted")
    return cases + 1


def check_group_ids(rng: np.random.Generator) -> int:
    cases = 0
    inputs = [
        np.zeros(0, dtype=np.int64),
        np.array([EMPTY], dtype=np.int64),
        _keys(rng, 600, 4),
        _keys(rng, 600, 300),
        _keys(rng, 400, 1 << 50),
        rng.integers(0, 2, 300).astype(bool),
        rng.integers(-3, 3, 300).astype(np.int32),
        rng.choice(np.array([0.0, -0.0, 1.5, np.inf, -2.25]), 300),
    ]
    for keys in inputs:
        want = cpu_agg.group_ids(keys)
        got = gpu_ops.group_ids(np, keys)
        what = f"group_ids of {len(keys)} {keys.dtype} keys"
        assert got[1] == want[1], what
        assert np.array_equal(got[0], want[0]) and got[0].dtype == np.int64, what
        assert np.array_equal(got[2], want[2]) and got[2].dtype == np.int64, what
        cases += 1
    # several key columns with nulls: a null is its own group
    n = 500
    g1 = rng.integers(0, 6, n)
    g2 = rng.integers(-2, 3, n).astype(np.int32)
    g3 = rng.choice(np.array([0.5, 1.0, np.nan]), n)
    v2, v3 = rng.random(n) > 0.3, rng.random(n) > 0.5
    for cols, valids in (
        ([g1], [None]),
        ([g2], [v2]),
        ([g1, g2], [None, v2]),
        ([g1, g2, g3], [None, v2, v3]),
    ):
        want = cpu_agg.combine_ids(cols, valids)
        got = gpu_ops.combine_ids(np, cols, valids)
        assert np.array_equal(want, got), f"combine_ids of {len(cols)} columns"
        w, g = cpu_agg.group_ids(want), gpu_ops.group_ids(np, got)
        assert w[1] == g[1] and np.array_equal(w[0], g[0]) and np.array_equal(w[2], g[2])
        cases += 1
    return cases


def check_reductions(rng: np.random.Generator) -> int:
    cases = 0
    n = 400
    values = {
        "int64": rng.integers(-(1 << 40), 1 << 40, n),
        "int32": rng.integers(-1000, 1000, n).astype(np.int32),  # string codes, dates
        "float64": rng.choice(rng.standard_normal(n // 4) * 1e3, n),  # repeated values
        "float32": rng.standard_normal(n).astype(np.float32),
        "bool": rng.random(n) > 0.5,
        "int16": rng.integers(-50, 50, n).astype(np.int16),
        "uint64": rng.integers(0, 1 << 50, n).astype(np.uint64),
    }
    # extra: groups without rows at the end; (300, 520) passes SMALL_GROUPS (global atomics)
    for ngroups_drawn, extra in ((1, 0), (60, 4), (300, 520)):
        keys = rng.integers(0, ngroups_drawn, n)
        ids, ngroups, _ = cpu_agg.group_ids(keys)
        for vname, vals in values.items():
            for with_valid in (False, True):
                valid = None
                if with_valid:
                    valid = rng.random(n) > 0.3
                    valid[ids == 0] = False  # a group whose every value is null
                for op in cpu_agg.AGGREGATES:
                    want = cpu_agg.reduce_groups(op, ids, ngroups + extra, vals, valid)
                    got = gpu_ops.reduce_groups(np, op, ids, ngroups + extra, vals, valid)
                    what = (
                        f"{op} of {vname} values, {ngroups} groups + {extra} empty, "
                        f"valid={with_valid}"
                    )
                    assert got[0].dtype == want[0].dtype, f"{what}: {got[0].dtype}"
                    assert (got[1] is None) == (want[1] is None), what
                    if want[1] is not None:
                        assert got[1].dtype == np.bool_, what
                        assert np.array_equal(got[1], want[1]), what
                    if op in ("sum", "avg") and want[0].dtype == np.float64:
                        assert np.allclose(got[0], want[0], rtol=1e-12, atol=1e-9), what
                    else:
                        assert np.array_equal(got[0], want[0]), f"{what}: {want} {got}"
                    cases += 1
    # count without a value column counts rows; empty inputs; refused inputs
    ids = rng.integers(0, 4, 50)
    for op in ("count", "sum", "min", "count_distinct"):
        vals = None if op == "count" else np.zeros(0)
        want = cpu_agg.reduce_groups(op, np.zeros(0, np.int64), 3, vals, None)
        got = gpu_ops.reduce_groups(np, op, np.zeros(0, np.int64), 3, vals, None)
        assert np.array_equal(want[0], got[0]) and want[0].dtype == got[0].dtype, op
    assert np.array_equal(
        gpu_ops.reduce_groups(np, "count", ids, 4, None, None)[0],
        cpu_agg.reduce_groups("count", ids, 4, None, None)[0],
    )
    for op, vals in (("median", np.ones(50)), ("sum", None)):
        try:
            gpu_ops.reduce_groups(np, op, ids, 4, vals, None)
        except ValueError:
            pass
        else:
            raise AssertionError(f"reduce_groups accepted {op} with {vals}")
    return cases + 2


def check_full_launch(rng: np.random.Generator) -> int:
    """The library's own launch shape (256 threads a block) on a few cases."""
    p, b = _keys(rng, 400, 50), _keys(rng, 150, 50)
    pv, bv = rng.random(400) > 0.2, rng.random(150) > 0.2
    for how in ("inner", "left"):
        want = hash_join(p, b, how, pv, bv)
        got = gpu_ops.hash_join(np, p, b, how, pv, bv)
        assert np.array_equal(_sorted_pairs(*want), _sorted_pairs(*got)), f"full launch {how}"
    want, got = cpu_agg.group_ids(p), gpu_ops.group_ids(np, p)
    assert want[1] == got[1] and np.array_equal(want[0], got[0]), "full launch group_ids"
    ids, ngroups = want[0], want[1]
    w = cpu_agg.reduce_groups("max", ids, ngroups, p, pv)
    g = gpu_ops.reduce_groups(np, "max", ids, ngroups, p, pv)
    assert np.array_equal(w[0], g[0]) and np.array_equal(w[1], g[1]), "full launch max"
    return 4


def main() -> int:
    rng = np.random.default_rng()
    # the simulator runs every thread as a Python thread: few, small blocks for the bulk of the
    # cases (grid-stride loops then give each thread many rows), the real shape for a few
    full = (gpu_ops.THREADS, gpu_ops.MAX_BLOCKS)
    for check, (threads, blocks) in (
        (check_joins, (16, 2)),
        (check_group_ids, (16, 2)),
        (check_reductions, (16, 2)),
        (check_full_launch, full),
    ):
        gpu_ops.THREADS, gpu_ops.MAX_BLOCKS = threads, blocks
        t0 = time.perf_counter()
        cases = check(rng)
        print(f"{check.__name__}: {cases} cases in {time.perf_counter() - t0:.1f} s")
    gpu_ops.THREADS, gpu_ops.MAX_BLOCKS = full
    print("cudasim: GPU SQL kernels equal the CPU kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
