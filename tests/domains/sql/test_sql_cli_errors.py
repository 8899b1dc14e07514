"""``hpc sql`` with bad input: missing, empty, unreadable (a directory where a file belongs),
malformed and wrong-type arguments, bad SQL: one line ``hpc sql <sub>: error: <message>``,
exit status 2, no traceback, and nothing half-written (run in process through
``hpc.cli.main``)."""

from __future__ import annotations

import datetime as dt

import h5py
import numpy as np
import pytest

from tests.conftest import cli_error

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("sqlglot")



@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("sqlcli")
    for name in ("good", "nulls", "empty_dir", "bad", "zero", "nested", "listcol", "stamp"):
        (d / name).mkdir()
    pq.write_table(pa.table({"a": [1, 2], "s": ["x", "y"]}), d / "good" / "t.parquet")
    pq.write_table(pa.table({"a": [1, None]}), d / "nulls" / "t.parquet")
    (d / "bad" / "t.parquet").write_text("not Parquet\n")
    (d / "zero" / "t.parquet").write_bytes(b"")
    (d / "nested" / "t").mkdir()
    (d / "nested" / "t" / "part0.parquet").write_bytes(b"PAR1")  # truncated
    pq.write_table(pa.table({"a": [[1], [2]], "b": [1, 2]}), d / "listcol" / "t.parquet")
    pq.write_table(pa.table({"a": [dt.datetime(2020, 1, 1)]}), d / "stamp" / "t.parquet")
    (d / "empty.h5").write_bytes(b"")
    (d / "text.h5").write_text("not HDF5\n")
    with h5py.File(d / "plain.h5", "w") as f:
        f["x"] = np.zeros(3)
    return d


def _run(capsys, argv: list[str]) -> str:
    return cli_error(capsys, argv).strip().splitlines()[-1]


@pytest.mark.parametrize(("argv", "words"), [
    (["--data", "{d}/missing", "select 1"], "missing: no such directory of Parquet tables or"),
    (["--data", "{d}/empty_dir", "select 1"], "no Parquet tables"),
    (["--data", "{d}/bad", "select t.a from t"], "bad/t.parquet: not a readable Parquet file"),
    (["--data", "{d}/zero", "select t.a from t"], "zero/t.parquet: not a readable Parquet"),
    (["--data", "{d}/nested", "select t.a from t"], "nested/t: not a readable Parquet file"),
    (["--data", "{d}/empty.h5", "select a from t"], "empty.h5: not a readable HDF5 file"),
    (["--data", "{d}/text.h5", "select a from t"], "text.h5: not a readable HDF5 file"),
    (["--data", "{d}/plain.h5", "select a from t"], "plain.h5: no hpc.io tables"),
    (["--data", "{d}/good/t.parquet", "select a from t"], "not a readable HDF5 file"),
    (["--data", "{d}/listcol", "select t.a from t"], "column 'a': unsupported type list"),
    (["--data", "{d}/stamp", "select t.a from t"], "column 'a': unsupported type timestamp"),
    (["--data", "{d}/good", ""], "malformed query"),
    (["--data", "{d}/good", "selec a frm t"], "malformed query"),
    (["--data", "{d}/good", "insert into t values (1)"], "only SELECT statements"),
    (["--data", "{d}/good", "select t.a from"], "malformed query"),
    (["--data", "{d}/good", "select nope from t"], "Column 'nope' could not be resolved"),
    (["--data", "{d}/good", "select a from nope"], "unknown table 'nope'"),
    (["--data", "{d}/good", "select a from t where s > 1"],
     "incompatible types VARCHAR and INTEGER"),
    (["--data", "{d}/good", "select a from t", "--max-rows", "x"], "--max-rows: invalid int"),
    (["select 1"], "the following arguments are required: --data"),
])
def test_bad_query_input_is_one_line_exit_2(files, capsys, argv, words):
    line = _run(capsys, ["sql", "query", *(a.format(d=files) for a in argv)])
    assert line.startswith("hpc sql query: error: ") and words in line, line


@pytest.mark.parametrize(("argv", "words"), [
    (["--data", "{d}/good", "--query", "30"], "TPC-H has queries 1..22, not 30"),
    (["--data", "{d}/good", "--query", "1"], "unknown table 'lineitem'"),
    (["--data", "{d}/bad", "--query", "6"], "not a readable Parquet file"),
    (["--data", "{d}/good", "--query", "six"], "--query: invalid int value"),
])
def test_bad_tpch_input_is_one_line_exit_2(files, capsys, argv, words):
    line = _run(capsys, ["sql", "tpch", *(a.format(d=files) for a in argv)])
    assert line.startswith("hpc sql tpch: error: ") and words in line, line


@pytest.mark.parametrize(("source", "out", "words"), [
    ("good", "nodir/x.h5", "no such directory"),  # --out into a missing directory
    ("good", "empty_dir", "is a directory"),
    ("nulls", "n.h5", "column 'a': has nulls"),
    ("bad", "b.h5", "not a readable Parquet file"),
    ("missing", "m.h5", "no such directory of Parquet tables"),
    ("empty_dir", "e.h5", "no Parquet tables"),
])
def test_bad_convert_input_leaves_nothing(files, tmp_path, capsys, source, out, words):
    target = files / out if out == "empty_dir" else tmp_path / out
    before = sorted(p.name for p in files.iterdir())
    line = _run(capsys, ["sql", "convert", str(files / source), str(target)])
    assert line.startswith("hpc sql convert: error: ") and words in line, line
    assert sorted(p.name for p in files.iterdir()) == before  # no .partial beside the input
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing half-written
    if out == "empty_dir":
        assert list(target.iterdir()) == []
