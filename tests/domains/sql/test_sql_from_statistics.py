"""Ungrouped MIN, MAX and COUNT of whole Parquet tables answered from the footers'
statistics: answers equal DuckDB's exactly on 1, 2 and 3 ranks, on fresh random tables
each run (the job: check_sql_from_statistics.py; its seed is in the failure's output)."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")
pytest.importorskip("sqlglot")

from tests.conftest import mpi_script, run_mpi  # noqa: E402


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_statistics_answer_whole_table_extremes_and_counts(tmp_path, nranks):
    seed = random.randrange(2**31)
    proc = run_mpi(nranks, [str(mpi_script("check_sql_from_statistics.py")), str(tmp_path),
                            str(seed)], timeout=240)
    assert f"agree on {nranks} ranks" in proc.stdout, proc.stdout + proc.stderr
