"""The differential queries (:mod:`.queries`) against DuckDB over the same Parquet files: in
this process (one test per query) and on 2 ranks (broadcast joins) and 3 ranks (shuffle
joins everywhere), one ``mpirun`` job each for all the ``"ok"`` queries.

Each query has one of these statuses:

- ``"ok"``: equals DuckDB (numbers to a relative 1e-9; DECIMAL results exactly);
- ``"pending"``: raises ``UnsupportedSQL`` naming the construct (``Query.note``); once it
  answers like DuckDB the test fails, asking for ``"ok"``;
- ``"wrong"``: a known bug, a strict xfail: when it answers like DuckDB
  (or refuses with ``UnsupportedSQL``) the test fails, asking for the new status.
"""

from __future__ import annotations

from collections import Counter

import pytest

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")
pytest.importorskip("sqlglot")

from hpc.domains.sql import Catalog, UnsupportedSQL, query  # noqa: E402

from tests.conftest import mpi_script, run_mpi  # noqa: E402
from tests.domains.sql.differential import data, harness  # noqa: E402
from tests.domains.sql.differential.queries import QUERIES, Query  # noqa: E402

MIN_PER_FEATURE = 12


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The Parquet directory, our catalog over it and DuckDB's views of the same files."""
    directory = data.write(tmp_path_factory.mktemp("differential"))
    return directory, Catalog.from_directory(directory), data.duckdb_over(directory)


def _param(q: Query):
    marks = []
    if q.status == "wrong":
        marks.append(pytest.mark.xfail(
            strict=True, reason=f"known bug: {q.note} (when this passes, mark {q.id} 'ok', "
                                "or 'pending' if it now raises UnsupportedSQL)"))
    return pytest.param(q, id=q.id, marks=marks)


@pytest.mark.parametrize("q", [_param(q) for q in QUERIES])
def test_query_against_duckdb(tables, q):
    _, catalog, con = tables
    ref = harness.duckdb_frame(con, q.sql)
    if q.status == "pending":
        try:
            result = query(q.sql, catalog)
        except UnsupportedSQL as exc:
            assert q.note.lower() in str(exc).lower(), (
                f"{q.id}: UnsupportedSQL should name {q.note!r}: {exc}")
            return
        problem = harness.difference(result, ref, q.sql, q.feature)
        assert problem is not None, f"{q.id} now answers like DuckDB: mark it 'ok'"
        pytest.fail(f"{q.id} no longer raises UnsupportedSQL but differs from DuckDB "
                    f"(mark it 'wrong'):\n{q.sql}\n{problem}")
    try:
        result = query(q.sql, catalog)
    except UnsupportedSQL:
        if q.status == "wrong":
            return  # refused now, not wrong: the strict xfail reports it
        raise
    problem = harness.difference(result, ref, q.sql, q.feature)
    assert problem is None, f"{q.id}: {q.sql}\n{problem}"


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks,broadcast_rows", [(2, 1_000_000), (3, 0)])
def test_queries_on_ranks_against_duckdb(tables, nranks, broadcast_rows):
    """Every "ok" query in one job: broadcast joins on 2 ranks, shuffle joins on 3."""
    directory, _, _ = tables
    ok = sum(q.status == "ok" for q in QUERIES)
    proc = run_mpi(nranks, [str(mpi_script("check_sql_differential.py")), str(directory),
                            str(broadcast_rows), "cpu"], timeout=180)
    assert f"ok: {ok} queries on {nranks} ranks" in proc.stdout, proc.stdout


def test_every_feature_has_enough_queries_and_notes():
    per_feature = Counter(q.feature for q in QUERIES)
    assert min(per_feature.values()) >= MIN_PER_FEATURE, per_feature
    assert len(QUERIES) >= 130
    missing = [q.id for q in QUERIES if q.status != "ok" and not q.note]
    assert not missing, f"pending and wrong queries need a note: {missing}"


@pytest.mark.cudasim
@pytest.mark.timeout(560)
@pytest.mark.parametrize("nranks,broadcast_rows", [(2, 0)])
def test_queries_on_the_device_against_duckdb(tables, nranks, broadcast_rows):
    """The engine on the GPU backend (the CUDA simulator, columns as strict stand-ins for
    CuPy arrays: a host array mixed into device work fails as on a GPU) answers every third
    "ok" query (each feature's) like DuckDB, on 2 ranks with shuffle joins: the exchanges
    move device columns, and a rank left without rows must still build them on the
    device."""
    directory, _, _ = tables
    ok = len([q for q in QUERIES if q.status == "ok"][::3])
    proc = run_mpi(nranks, [str(mpi_script("check_sql_differential.py")), str(directory),
                            str(broadcast_rows), "device"], timeout=540,
                   env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert f"ok: {ok} queries on {nranks} ranks" in proc.stdout, proc.stdout
