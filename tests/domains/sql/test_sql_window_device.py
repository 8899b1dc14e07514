"""The window operator on the GPU backend: every window query of the differential suite
(:mod:`tests.domains.sql.differential.queries`, feature ``"windows"``) on the simulated
device backend (the CUDA simulator, columns as strict stand-ins for CuPy arrays:
:mod:`hpc.testing.device`) equals DuckDB, and EXPLAIN ANALYZE marks a Window node "on host"
exactly where it holds a function the device has no operator for (GROUPS frames, EXCLUDE,
aggregates that do not combine over frames: DISTINCT, MEDIAN, STRING_AGG, ...); checked on
every query but those over ``lineitem`` (whose aggregate alone takes the simulator ~15 s).
Integer window sums stay exact on the device, and one past 64 bits raises. The device's
frame kernels (:mod:`hpc.domains.sql.physical.window_device`) equal brute force.

Also a job script: ``python test_sql_window_device.py DIRECTORY`` (under
``NUMBA_ENABLE_CUDASIM=1``) runs the queries over the differential tables in DIRECTORY and
prints ``ok: N window queries on the device`` or the mismatches.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

# the window functions the device computes, and the aggregates it computes over any frame
_DEVICE_FUNCTIONS = frozenset({
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value", "count_star", "count", "sum", "avg", "min",
    "max", "bool_and", "bool_or", "stddev_samp", "stddev_pop", "var_samp", "var_pop"})


def _host_expected(node) -> bool:  # noqa: ANN001 - a plan node
    """Whether a Window node needs the host (the test's own reading of the plan)."""
    for _, w in node.functions:
        if w.frame.kind == "groups" or w.frame.exclude != "no_others":
            return True
        if w.distinct or w.name not in _DEVICE_FUNCTIONS:
            return True
    return False


def _windows(node) -> list:  # noqa: ANN001 - a plan node
    """The Window nodes of a plan, in EXPLAIN's order (a node before its inputs)."""
    from hpc.domains.sql.logical import plan as P

    found = [node] if isinstance(node, P.Window) else []
    for child in node.inputs:
        found += _windows(child)
    return found


def main(directory: str) -> int:
    """Run every "ok" window query on the simulated device; print the outcome."""
    from hpc.domains.sql import Catalog, QueryOptions, query
    from hpc.domains.sql.pipeline import explain, physical_plan

    from hpc.testing.device import simulated_backend
    from tests.domains.sql.differential import data, harness
    from tests.domains.sql.differential.queries import QUERIES

    backend = simulated_backend()
    catalog = Catalog.from_directory(directory)
    con = data.duckdb_over(directory)
    options = QueryOptions(backend=backend)
    windows = [q for q in QUERIES if q.feature == "windows" and q.status == "ok"]
    failures = []
    on_device = 0
    for q in windows:
        try:
            result = query(q.sql, catalog, options=options)
        except Exception as exc:  # noqa: BLE001 - reported with the query
            failures.append(f"{q.id}: {type(exc).__name__}: {exc}")
            continue
        problem = harness.difference(result, harness.duckdb_frame(con, q.sql), q.sql,
                                     q.feature)
        if problem is not None:
            failures.append(f"{q.id}: {q.sql}\n{problem}")
            continue
        if "lineitem" in q.sql:  # (see the module's notes)
            continue
        expected = [_host_expected(n) for n in _windows(physical_plan(q.sql, catalog, 1))]
        on_device += expected.count(False)
        text = explain(q.sql, catalog, analyze=True, backend=backend).split("Physical plan")[1]
        marked = [" on host)" in line for line in text.splitlines()
                  if line.lstrip().startswith("Window ")]
        if marked != expected:
            failures.append(f"{q.id}: EXPLAIN ANALYZE marks its Window nodes on host "
                            f"{marked}, expected {expected}\n{text}")
    failures += _overflow(catalog, options)
    for f in failures:
        print(f)
    if failures:
        print(f"{len(failures)} of {len(windows)} window queries failed on the device")
        return 1
    print(f"ok: {len(windows)} window queries on the device ({on_device} window nodes "
          "there, by EXPLAIN ANALYZE)")
    return 0


# -- the device kernels (array programs, no simulator needed) against brute force -----------
def _frames(rng, n: int, m: int):  # noqa: ANN001, ANN202
    """``m`` random frames ``[starts, ends)`` within ``n`` positions (some empty)."""
    a, b = rng.integers(0, n + 1, m), rng.integers(0, n + 1, m)
    starts, ends = np.minimum(a, b), np.maximum(a, b)
    empty = rng.random(m) < 0.1
    ends[empty] = starts[empty]
    return starts.astype(np.int64), ends.astype(np.int64)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 64, 300])
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_frame_reduce_on_the_device_equals_brute_force(n, dtype):
    from hpc.domains.sql.physical import window_device as D
    from hpc.domains.sql.physical import window_kernels as K

    from hpc.testing.device import xp

    rng = np.random.default_rng()
    values = (rng.integers(-10**12, 10**12, n) if dtype is np.int64
              else rng.standard_normal(n) * 10.0 ** rng.integers(-3, 12, n)).astype(dtype)
    present = rng.random(n) < 0.8
    starts, ends = _frames(rng, n, 2 * n + 3)
    on = [xp.asarray(a) for a in (values, present, starts, ends)]
    big = np.iinfo(np.int64)
    for op, identity, fn in ((K.SUM, dtype(0), np.sum), (K.MIN, dtype(big.max), np.min),
                             (K.MAX, dtype(big.min), np.max)):
        got = D.frame_reduce(xp, *on, op, identity).get()
        for r in range(len(starts)):
            sel = values[starts[r]:ends[r]][present[starts[r]:ends[r]]]
            want = fn(sel) if len(sel) else identity
            if op == K.SUM and dtype is np.float64:
                assert np.isclose(got[r], want, rtol=1e-12, atol=1e-3), (op, r)
            else:
                assert got[r] == want, (op, r)
        # the CPU kernel's tree, nodes combined in its order: floats equal bit for bit
        cpu = K.frame_reduce(values, present, starts, ends, op, identity)
        assert np.array_equal(got, cpu), op


@pytest.mark.parametrize("n", [0, 1, 5, 200])
def test_frame_moments_on_the_device_equal_brute_force(n):
    from hpc.domains.sql.physical import window_device as D

    from hpc.testing.device import xp

    rng = np.random.default_rng()
    values = rng.standard_normal(n) * 100 + 1e4
    present = rng.random(n) < 0.7
    starts, ends = _frames(rng, n, 2 * n + 3)
    count, mean, m2 = (a.get() for a in D.frame_moments(
        xp, xp.asarray(np.where(present, values, 0.0)), xp.asarray(present),
        xp.asarray(starts), xp.asarray(ends)))
    for r in range(len(starts)):
        sel = values[starts[r]:ends[r]][present[starts[r]:ends[r]]]
        assert count[r] == len(sel)
        if len(sel):
            assert np.isclose(mean[r], sel.mean(), rtol=1e-12)
            assert np.isclose(m2[r], ((sel - sel.mean()) ** 2).sum(), rtol=1e-8, atol=1e-6)


@pytest.mark.parametrize("kind", ["int", "float"])
@pytest.mark.parametrize("ascending", [True, False])
@pytest.mark.parametrize("strict", [True, False])
def test_range_bounds_on_the_device_equal_brute_force(kind, ascending, strict):
    """Partitions of sorted values (ties, -0.0 beside 0.0) with leading or trailing rows
    outside the searched run (a RANGE key's NULLs): each row's first position in its run at
    or past its target."""
    from hpc.domains.sql.physical import window_device as D

    from hpc.testing.device import xp

    rng = np.random.default_rng()
    lo, hi, values = [], [], []
    at = 0
    for _ in range(rng.integers(1, 12)):
        size = int(rng.integers(0, 40))
        outside = int(rng.integers(0, size + 1)) if rng.random() < 0.5 else 0
        v = rng.integers(-20, 20, size - outside)
        v = v.astype(np.float64) * 0.5 if kind == "float" else v
        if kind == "float" and len(v):
            v[v == 0] = rng.choice([0.0, -0.0], int((v == 0).sum()))
        v = np.sort(v) if ascending else -np.sort(-v)
        first = bool(rng.random() < 0.5)  # the outside rows before the run, or after it
        run_lo = at + (outside if first else 0)
        run_hi = run_lo + len(v)
        filler = np.zeros(outside, v.dtype)
        values.append(np.concatenate([filler, v] if first else [v, filler]))
        lo += [run_lo] * size
        hi += [run_hi] * size
        at += size
    values = np.concatenate(values) if values else np.zeros(0)
    n = len(values)
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    targets = rng.integers(-25, 25, n).astype(values.dtype) * (0.5 if kind == "float" else 1)
    got = D.range_bounds(xp, xp.asarray(values), xp.asarray(lo), xp.asarray(hi),
                         xp.asarray(targets), ascending, strict).get()
    for r in range(n):
        want = hi[r]
        for j in range(lo[r], hi[r]):
            v, t = values[j], targets[r]
            past = (v > t if strict else v >= t) if ascending else (v < t if strict else v <= t)
            if past:
                want = j
                break
        assert got[r] == want, (r, lo[r], hi[r], targets[r])


def _overflow(catalog, options) -> list[str]:  # noqa: ANN001
    """An integer SUM over a ROWS frame whose true value passes 2**63 - 1 raises on the
    device too (exact int64 sums, the overflow detected, not wrapped); the sums that fit
    are exact."""
    from hpc.domains.sql import SQLError, query
    from hpc.domains.sql.table import Column, Table

    v = np.array([2**62, 2**62 - 1, 1, -(2**62), 2**62, 2**62, 5], np.int64)
    catalog.register("big", Table({"id": Column(np.arange(len(v)), "int"),
                                   "v": Column(v, "int")}))
    fits = "select sum(v) over (order by id rows between 1 preceding and current row) as s " \
        "from big where id < 4 order by id"
    got = query(fits, catalog, options=options).to_pandas()["s"].tolist()
    want = [int(v[0]), int(v[0]) + int(v[1]), int(v[1]) + 1, 1 - 2**62]
    problems = [] if got == want else [f"exact window sums: {got}, expected {want}"]
    try:
        query("select sum(v) over (order by id rows between 1 preceding and current row) as s "
              "from big", catalog, options=options)
        problems.append("a window SUM past 2**63 - 1 did not raise")
    except SQLError as exc:
        if "overflow" not in str(exc):
            problems.append(f"a window SUM past 2**63 - 1 raised {exc}")
    return problems


@pytest.mark.cudasim
@pytest.mark.timeout(120)
def test_window_queries_on_the_device_equal_duckdb(tmp_path):
    """Every "ok" window query of the differential suite, on the simulated GPU backend,
    equals DuckDB; supported windows run on the device (EXPLAIN ANALYZE)."""
    pytest.importorskip("duckdb")
    pytest.importorskip("sqlglot")
    from tests.conftest import mpi_script, run_mpi
    from tests.domains.sql.differential import data
    from tests.domains.sql.differential.queries import QUERIES

    directory = data.write(tmp_path / "differential")
    proc = run_mpi(1, [str(mpi_script("test_sql_window_device.py")), str(directory)],
                   timeout=110, env={"NUMBA_ENABLE_CUDASIM": "1"})
    count = sum(q.feature == "windows" and q.status == "ok" for q in QUERIES)
    assert f"ok: {count} window queries on the device" in proc.stdout, proc.stdout


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
