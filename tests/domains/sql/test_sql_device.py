"""The SQL engine's device path: integer calendar arithmetic (what replaces NumPy's
datetime64 on CuPy arrays) against NumPy's, and the whole engine on the GPU backend under
the CUDA simulator (numba.cuda kernels for joins, group ids and aggregates) against DuckDB."""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.sql.dates import civil_from_days, days_from_civil, shift_months

from tests.conftest import mpi_script, run_cudasim, run_mpi


def _numpy_shift(days: np.ndarray, months: int) -> np.ndarray:
    """The same month shift through datetime64: the day clipped to the target month."""
    d = days.astype("datetime64[D]")
    month = d.astype("datetime64[M]")
    offset = (d - month.astype("datetime64[D]")).astype(np.int64)
    target = month + np.timedelta64(months, "M")
    length = ((target + 1).astype("datetime64[D]") - target.astype("datetime64[D]")).astype(int)
    return (target.astype("datetime64[D]") + np.minimum(offset, length - 1)).astype(np.int64)


def test_calendar_arithmetic_equals_numpy_datetime64():
    rng = np.random.default_rng()
    # from year -600 to 9000, plus the month ends and leap days where clipping happens
    days = rng.integers(-940_000, 2_600_000, 100_000).astype(np.int32)
    ends = (np.arange("1899-01", "2101-01", dtype="datetime64[M]") + 1).astype(
        "datetime64[D]") - 1
    days = np.concatenate([days, ends.astype(np.int64).astype(np.int32)])
    d = days.astype("datetime64[D]")
    year, month, day = civil_from_days(days)
    assert np.array_equal(year, d.astype("datetime64[Y]").astype(np.int64) + 1970)
    assert np.array_equal(month, d.astype("datetime64[M]").astype(np.int64) % 12 + 1)
    first = d.astype("datetime64[M]").astype("datetime64[D]")
    assert np.array_equal(day, (d - first).astype(np.int64) + 1)
    assert np.array_equal(days_from_civil(year, month, day), days)
    for months in (-1200, -25, -1, 1, 2, 11, 12, 13, 1200):
        assert np.array_equal(shift_months(days, months), _numpy_shift(days, months)), months
    assert int(shift_months(np.int32(19753), 1)) == 19782  # 2024-01-31 + 1 month: Feb 29


@pytest.mark.cudasim
@pytest.mark.timeout(600)
def test_gpu_engine_under_the_cuda_simulator(tmp_path):
    """TPC-H queries with joins, group-bys, semi joins and CASE at SF 0.001, and random
    tables with nulls, duplicate and missing keys, on the GPU code path, equal DuckDB. The
    columns are strict stand-ins for CuPy arrays (:mod:`hpc.testing.device`): a host array
    mixed with a device one, or a device array handed to a CPU kernel, fails as on a GPU."""
    pytest.importorskip("duckdb")
    from hpc.domains.sql.tpch import generate

    data = generate(0.001, tmp_path / "tpch")
    proc = run_cudasim("check_sql_gpu_engine.py", "strict", str(data), "3", "4", "6", "12", "14",
                       "19", timeout=580)
    assert "ok: the GPU SQL engine (strict) equals DuckDB" in proc.stdout


@pytest.mark.cudasim
@pytest.mark.mpi
@pytest.mark.timeout(400)
def test_gpu_engine_on_three_ranks_under_the_cuda_simulator(tmp_path):
    """The GPU backend across ranks: shuffle joins, partial and final aggregates, a group
    join (Q13) and a correlated subquery (Q17), on strict stand-ins for CuPy arrays, equal
    DuckDB."""
    pytest.importorskip("duckdb")
    from hpc.domains.sql.tpch import generate

    data = generate(0.001, tmp_path / "tpch")
    proc = run_mpi(3, [str(mpi_script("check_sql_gpu_engine.py")), "strict", str(data), "3",
                       "12", "13", "17"], timeout=380, env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert "equals DuckDB on 3 rank(s)" in proc.stdout


@pytest.mark.gpu
def test_cudf_round_trip_and_query():
    """cuDF frames in and out (numbers, nulls, strings, dates), and a query over one."""
    cudf = pytest.importorskip("cudf")
    import pandas as pd
    from hpc.domains.sql import Catalog, QueryOptions, query
    from hpc.domains.sql.cudf_interop import from_cudf, to_cudf

    rng = np.random.default_rng()
    n = 10_000
    frame = pd.DataFrame({
        "k": rng.integers(0, 50, n),
        "x": np.where(rng.random(n) < 0.1, np.nan, rng.standard_normal(n)),
        "s": rng.choice(["delta", "alpha", "charlie", "bravo"], n),
        "d": pd.to_datetime("1995-01-01") + pd.to_timedelta(rng.integers(0, 900, n), "D"),
    })
    table = from_cudf(cudf.DataFrame.from_pandas(frame))
    back = to_cudf(table).to_pandas()
    assert np.array_equal(back["k"].to_numpy(), frame["k"].to_numpy())
    assert np.allclose(back["x"].to_numpy(float), frame["x"].to_numpy(), equal_nan=True)
    assert back["s"].astype(str).tolist() == frame["s"].tolist()
    assert (back["d"].dt.normalize() == frame["d"]).all()
    catalog = Catalog()
    catalog.register("t", table)
    ours = query("select s, count(*) as n, sum(x) as sx from t where d >= date '1996-01-01' "
                 "group by s order by s", catalog, options=QueryOptions(backend="gpu"))
    ref = (frame[frame["d"] >= "1996-01-01"].groupby("s")
           .agg(n=("k", "size"), sx=("x", "sum")).reset_index())
    got = ours.to_pandas()
    assert got["s"].tolist() == ref["s"].tolist()
    assert got["n"].tolist() == ref["n"].tolist()
    assert np.allclose(got["sx"], ref["sx"], rtol=1e-9)


@pytest.mark.gpu
@pytest.mark.timeout(600)
def test_gpu_engine_equals_duckdb_on_every_supported_query(tmp_path):
    """On a real GPU: every supported TPC-H query at SF 0.01 and the random-table queries."""
    import subprocess
    import sys

    from hpc.domains.sql.tpch import SUPPORTED, generate

    data = generate(0.01, tmp_path / "tpch")
    proc = subprocess.run([sys.executable, str(mpi_script("check_sql_gpu_engine.py")), "gpu",
                           str(data), *map(str, SUPPORTED)], capture_output=True, text=True,
                          timeout=580)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_in_memory_catalog_answers_like_duckdb(tmp_path):
    """Tables read once into memory give the same rows as DuckDB over the files."""
    duckdb = pytest.importorskip("duckdb")
    from hpc.domains.sql import Catalog, query
    from hpc.domains.sql.compare import same_rows
    from hpc.domains.sql.tpch import QUERIES, generate

    data = generate(0.01, tmp_path / "tpch")
    catalog = Catalog.from_directory(data).in_memory("cpu")
    assert catalog.tables == Catalog.from_directory(data).tables
    con = duckdb.connect()
    for t in catalog.tables:
        con.execute(f"create view {t} as select * from read_parquet('{data}/{t}.parquet')")
    for q in (1, 3, 9, 13, 18):
        ours = query(QUERIES[q], catalog).to_pandas()
        assert same_rows(ours, con.execute(QUERIES[q]).df(), "order by" in QUERIES[q]) is None, q
