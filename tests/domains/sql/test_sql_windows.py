"""Window functions without PARTITION BY (ordered: a range exchange, then each rank's slice of
one sequence; unordered: the ranks' rows as they are) and ORDER BY over several ranks, against
DuckDB (and aggregates in two phases over ranks): sort keys all equal (every row on
one rank), one heavy value, all distinct, fewer rows than ranks, none."""

from __future__ import annotations

import numpy as np
import pytest

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from tests.conftest import mpi_script, run_mpi  # noqa: E402


def _tables(rng: np.random.Generator) -> dict[str, object]:
    n = 600
    keys = {
        "same": np.zeros(n, np.int64),
        "heavy": np.where(rng.random(n) < 0.7, 5, rng.integers(0, 50, n)),
        "spread": rng.permutation(n),
        "few": np.array([3, 1, 3]),
        "empty": np.zeros(0, np.int64),
    }
    out = {}
    for name, k in keys.items():
        m = len(k)
        nulls = rng.random(m) < 0.1
        out[name] = pa.table({
            "id": pa.array(np.arange(m), pa.int64()),
            "k": pa.array(k, pa.int64(), mask=nulls if name != "same" else None),
            "v": pa.array(rng.integers(-1000, 1000, m), pa.int64(), mask=rng.random(m) < 0.1),
            "s": pa.array([f"w{x}" for x in rng.integers(0, 30, m)], pa.string()),
        })
    return out


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [1, 4])
def test_windows_and_sorts_over_ranks_equal_duckdb(tmp_path, nranks):
    for name, table in _tables(np.random.default_rng(20261205)).items():
        pq.write_table(table, tmp_path / f"{name}.parquet", row_group_size=50)
    proc = run_mpi(nranks, [str(mpi_script("check_sql_windows.py")), str(tmp_path)],
                   timeout=180)
    assert f"ok: 110 queries on {nranks} ranks" in proc.stdout, proc.stdout
