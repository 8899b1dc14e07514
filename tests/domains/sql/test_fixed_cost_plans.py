"""The engine's fixed cost per query: plans cached by the query's text and the catalog's
version (a file rewritten, a part added or removed, a table registered: planned again, and
the answers follow the files), plan nodes that remember their hashes, and optimizer passes
that copy nothing they do not change. Answers are checked against DuckDB over the same files
or against numpy on the same rows."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("sqlglot")

from hpc.domains.sql import Catalog, SQLError, Table, pipeline, query  # noqa: E402
from hpc.domains.sql.compare import same_rows  # noqa: E402
from hpc.domains.sql.logical import plan as P  # noqa: E402
from hpc.domains.sql.logical.expr import walk  # noqa: E402
from hpc.domains.sql.tpch import QUERIES  # noqa: E402

from tests.conftest import run_mpi  # noqa: E402

GROUPED = ("select t.g as g, count(*) as n, sum(t.x) as sx, min(t.y) as lo from t "
           "group by t.g order by g")
JOINED = ("select t.g as g, sum(t.x * u.w) as s from t join u on t.g = u.k "
          "where t.y > 0.25 group by t.g order by g")


def _table(rng: np.random.Generator, rows: int, extra: bool = False) -> pa.Table:
    cols = {"g": rng.integers(0, 7, rows), "x": rng.integers(-1000, 1000, rows),
            "y": rng.random(rows)}
    if extra:
        cols["z"] = rng.integers(0, 3, rows)
    return pa.table(cols)


def _write(rng: np.random.Generator, path, rows: int, extra: bool = False) -> None:
    pq.write_table(_table(rng, rows, extra), path)


def _duckdb(root) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for f in sorted(root.glob("*.parquet")):
        con.execute(f"create view {f.stem} as select * from read_parquet('{f}')")
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        con.execute(f"create view {d.name} as select * from read_parquet('{d}/*.parquet')")
    return con


def _duckdb_views(root, *names: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for n in names:
        con.execute(f"create view {n} as select * from read_parquet('{root / n}.parquet')")
    return con


def _same(ours: Table, con: duckdb.DuckDBPyConnection, sql: str) -> None:
    ref = con.execute(sql).df()
    assert same_rows(ours.to_pandas(), ref, ordered="order by" in sql) is None


@pytest.fixture
def tables(tmp_path):
    rng = np.random.default_rng()
    _write(rng, tmp_path / "t.parquet", int(rng.integers(50, 400)))
    pq.write_table(pa.table({"k": np.arange(7), "w": rng.integers(1, 9, 7)}),
                   tmp_path / "u.parquet")
    return tmp_path, rng


def test_a_query_asked_again_reuses_its_plan_and_answers_like_duckdb(tables):
    root, _ = tables
    cat, con = Catalog.from_directory(root), _duckdb(root)
    for sql in (GROUPED, JOINED):
        first = pipeline.logical_plan(sql, cat)
        assert pipeline.logical_plan(sql, cat) is first  # not planned again
        assert pipeline.physical_plan(sql, cat, 2) is pipeline.physical_plan(sql, cat, 2)
        for _ in range(2):
            _same(query(sql, cat), con, sql)
    other = pipeline.logical_plan(GROUPED + " ", cat)  # another text: its own plan
    assert other is not pipeline.logical_plan(GROUPED, cat)


def test_a_rewritten_file_is_planned_again_with_its_new_rows_and_columns(tables):
    root, rng = tables
    cat = Catalog.from_directory(root)
    _same(query(GROUPED, cat), _duckdb(root), GROUPED)
    version, plan = cat.version(), pipeline.logical_plan(GROUPED, cat)
    rows = int(rng.integers(500, 900))  # another size: the file's stamp changes
    _write(rng, root / "t.parquet", rows, extra=True)
    assert cat.version() != version
    assert cat.num_rows("t") == rows and "z" in cat.columns("t")
    assert pipeline.logical_plan(GROUPED, cat) is not plan
    con = _duckdb(root)
    _same(query(GROUPED, cat), con, GROUPED)
    with_z = "select t.z as z, count(*) as n from t group by t.z order by z"
    _same(query(with_z, cat), con, with_z)
    assert cat.version() == cat.version()  # unchanged files: the same version


def test_a_file_rewritten_with_the_same_columns_is_optimized_not_bound_again(tables,
                                                                            monkeypatch):
    root, rng = tables
    cat = Catalog.from_directory(root)
    monkeypatch.setattr(pipeline, "_BOUND", type(pipeline._BOUND)())  # none from other tests
    bound: list[str] = []
    plain_bind = pipeline.bind
    monkeypatch.setattr(pipeline, "bind", lambda sql, types: bound.append(sql) or plain_bind(
        sql, types))
    query(JOINED, cat)
    plan = pipeline.logical_plan(JOINED, cat)
    _write(rng, root / "t.parquet", int(rng.integers(1000, 3000)))  # more rows, same columns
    _same(query(JOINED, cat), _duckdb(root), JOINED)
    assert pipeline.logical_plan(JOINED, cat) is not plan  # optimized on the new statistics
    assert bound == [JOINED]
    _same(query(JOINED, Catalog.from_directory(root)), _duckdb(root), JOINED)  # same tables
    assert bound == [JOINED]
    _write(rng, root / "t.parquet", int(rng.integers(10, 90)), extra=True)  # a new column
    _same(query(JOINED, cat), _duckdb(root), JOINED)
    assert bound == [JOINED, JOINED]


def test_parts_added_to_or_removed_from_a_folder_are_read(tmp_path):
    rng = np.random.default_rng()
    folder = tmp_path / "t"
    folder.mkdir()
    _write(rng, folder / "part-0.parquet", int(rng.integers(20, 200)))
    cat = Catalog.from_directory(tmp_path)
    _same(query(GROUPED, cat), _duckdb(tmp_path), GROUPED)
    _write(rng, folder / "part-1.parquet", int(rng.integers(20, 200)))
    _same(query(GROUPED, cat), _duckdb(tmp_path), GROUPED)
    expected = sum(pq.read_metadata(f).num_rows for f in folder.glob("*.parquet"))
    assert cat.num_rows("t") == expected
    (folder / "part-0.parquet").unlink()
    _same(query(GROUPED, cat), _duckdb(tmp_path), GROUPED)


def test_a_removed_file_takes_its_table_out_of_the_catalog(tables):
    root, _ = tables
    cat = Catalog.from_directory(root)
    query(JOINED, cat)
    (root / "u.parquet").unlink()
    with pytest.raises(SQLError, match="unknown table 'u'"):
        query(JOINED, cat)
    assert cat.tables == ["t"]


def test_a_file_being_written_leaves_the_other_tables_alone(tables):
    root, rng = tables
    cat = Catalog.from_directory(root)
    only_u = "select u.k as k, u.w as w from u order by k"
    query(GROUPED, cat)
    (root / "t.parquet").write_bytes(b"PAR1 half written")
    _same(query(only_u, cat), _duckdb_views(root, "u"), only_u)
    assert cat.num_rows("t") > 0  # what was read before, until the file reads again
    _write(rng, root / "t.parquet", int(rng.integers(10, 40)))
    _same(query(GROUPED, cat), _duckdb(root), GROUPED)
    assert cat.num_rows("t") == pq.read_metadata(root / "t.parquet").num_rows


def test_registering_a_table_plans_again(tables):
    root, rng = tables
    cat = Catalog.from_directory(root)
    query(GROUPED, cat)
    frame = _table(rng, int(rng.integers(10, 60))).to_pandas()
    cat.register("t", Table.from_pandas(frame))  # hides the file's table of that name
    version = cat.version()
    _write(rng, root / "t.parquet", int(rng.integers(500, 900)))
    assert cat.version() == version  # the hidden file is no longer watched
    ours = query(GROUPED, cat).to_pandas()
    ref = frame.groupby("g").agg(n=("x", "size"), sx=("x", "sum"), lo=("y", "min"))
    assert ours["g"].tolist() == ref.index.tolist()
    assert ours["n"].tolist() == ref["n"].tolist()
    assert ours["sx"].tolist() == ref["sx"].tolist()
    assert ours["lo"].tolist() == ref["lo"].tolist()


def test_the_cache_keeps_the_most_recently_used_plans(tables, monkeypatch):
    root, _ = tables
    cat = Catalog.from_directory(root)
    monkeypatch.setattr(pipeline, "PLANS_KEPT", 2)
    a = pipeline.logical_plan(GROUPED, cat)
    b = pipeline.logical_plan(JOINED, cat)
    assert pipeline.logical_plan(GROUPED, cat) is a  # GROUPED used last, JOINED oldest
    pipeline.logical_plan("select count(*) as n from t", cat)
    assert pipeline.logical_plan(GROUPED, cat) is a
    again = pipeline.logical_plan(JOINED, cat)
    assert again is not b and again == b  # dropped, planned again alike
    monkeypatch.setattr(pipeline, "PLANS_KEPT", 0)
    assert pipeline.logical_plan(GROUPED, cat) is not pipeline.logical_plan(GROUPED, cat)


def test_a_query_that_fails_to_plan_fails_every_time(tables):
    cat = Catalog.from_directory(tables[0])
    for _ in range(2):
        with pytest.raises(SQLError):
            query("select t.nope from t", cat)


@pytest.fixture(scope="module")
def tpch_plans(tmp_path_factory):
    from hpc.domains.sql.tpch import generate

    cat = Catalog.from_directory(generate(0.001, tmp_path_factory.mktemp("tpch")))
    return [pipeline.physical_plan(sql, cat, 3) for sql in QUERIES.values()]


def test_remembered_hashes_are_the_plain_hashes_and_are_not_pickled(tpch_plans):
    for plan in tpch_plans:
        for node in P.nodes(plan):
            assert hash(node) == type(node)._plain_hash(node)
            assert hash(node) == hash(node)  # remembered
            for e in P.expressions(node):
                for sub in walk(e):
                    plain = getattr(type(sub), "_plain_hash", None)
                    assert plain is None or hash(sub) == plain(sub)
        copy = pickle.loads(pickle.dumps(plan))
        assert copy == plan and copy is not plan
        assert all("_hash" not in vars(n) for n in P.nodes(copy))
        assert hash(copy) == hash(plan)


def test_passes_that_change_nothing_keep_the_nodes(tpch_plans):
    for plan in tpch_plans:
        for node in P.nodes(plan):
            assert node.with_inputs(node.inputs) is node
            if node.inputs:  # a changed input: a new node, the others as they were
                changed = node.with_inputs((P.Limit(node.inputs[0], 1),) + node.inputs[1:])
                assert changed is not node and changed.inputs[1:] == node.inputs[1:]


_JOB = '''
import sys
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hpc.comm import world
from hpc.domains.sql import Catalog, query

comm = world()
root = sys.argv[1]
sql = "select t.g as g, count(*) as n, sum(t.x) as sx from t group by t.g order by g"
cat = Catalog.from_directory(root)
for step in range(3):
    if step == 2:  # rewritten on rank 0 while every rank holds the cached plan
        if comm.Get_rank() == 0:
            rng = np.random.default_rng(int(sys.argv[2]))
            pq.write_table(pa.table({"g": rng.integers(0, 5, 777),
                                     "x": rng.integers(-9, 9, 777)}), root + "/t.parquet",
                           row_group_size=100)
        comm.Barrier()
    out = query(sql, cat, comm)
    if comm.Get_rank() == 0:
        t = pq.read_table(root + "/t.parquet").to_pandas()
        ref = t.groupby("g").agg(n=("x", "size"), sx=("x", "sum"))
        got = out.to_pandas()
        assert got["g"].tolist() == ref.index.tolist(), (got, ref)
        assert got["n"].tolist() == ref["n"].tolist(), (got, ref)
        assert got["sx"].tolist() == ref["sx"].tolist(), (got, ref)
comm.Barrier()
if comm.Get_rank() == 0:
    print("ok: cached plans on", comm.Get_size(), "ranks")
'''


@pytest.mark.mpi
def test_cached_plans_on_two_ranks_follow_a_rewritten_file(tmp_path):
    rng = np.random.default_rng()
    pq.write_table(pa.table({"g": rng.integers(0, 5, 300), "x": rng.integers(-9, 9, 300)}),
                   tmp_path / "t.parquet", row_group_size=50)
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    proc = run_mpi(2, [str(script), str(tmp_path), str(int(rng.integers(1 << 30)))],
                   timeout=120)
    assert "ok: cached plans on 2 ranks" in proc.stdout, proc.stdout + proc.stderr


def test_a_rewritten_hdf5_file_is_read_again(tmp_path):
    pytest.importorskip("h5py")
    from hpc.io import write_table

    rng = np.random.default_rng()
    path = tmp_path / "tables.h5"
    write_table(path, "a", {"x": rng.integers(-99, 99, int(rng.integers(5, 50)))})
    write_table(path, "b", {"k": np.arange(3)})
    cat = Catalog.from_hdf5(path)
    sql = "select count(*) as n, sum(a.x) as s from a"
    query(sql, cat)
    path.unlink()
    x, z = rng.integers(-99, 99, int(rng.integers(60, 99))), rng.random(7)
    write_table(path, "a", {"x": x, "z": np.resize(z, len(x))})
    out = query("select count(*) as n, sum(a.x) as s, max(a.z) as z from a", cat).to_pandas()
    assert out.to_dict("records") == [{"n": len(x), "s": int(x.sum()), "z": z.max()}]
    assert cat.tables == ["a"]  # b went with the old file


@pytest.fixture(scope="module")
def tpch_catalog(tmp_path_factory):
    from hpc.domains.sql.tpch import generate

    return Catalog.from_directory(generate(0.001, tmp_path_factory.mktemp("tpch_gc")))


def test_a_query_frees_what_it_read_when_it_returns(tpch_catalog):
    """Nothing a query built is left in reference cycles: its columns are freed when it
    returns, not at the next cycle collection (which left up to ~10 runs' columns of a
    large scan alive, and every run faulting in fresh pages)."""
    import gc

    from hpc.benchmarks.sql import QUERIES as EVERYDAY

    for sql in [*QUERIES.values(), *EVERYDAY.values()]:
        query(sql, tpch_catalog)  # planned and compiled before the count
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            query(sql, tpch_catalog)
            gc.collect()
            left = [type(o).__name__ for o in gc.garbage]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert not left, f"cycles left by {sql[:60]!r}: {sorted(set(left))}"
