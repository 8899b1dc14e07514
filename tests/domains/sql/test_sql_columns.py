"""How the engine holds a scan's columns: Parquet footers rewritten so that integer-stored
decimals read as integers (the Thrift round trip exact on footers of pyarrow and DuckDB,
every decimal read as its value, the Python ``Decimal`` rounded to float64, whichever way it
is stored), and a filter's columns deferred until read (equal to eager gathers)."""

from __future__ import annotations

import struct
from decimal import Decimal

import numpy as np
import pytest

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from hpc.domains.sql import Catalog, SQLError, query, read_parquet  # noqa: E402
from hpc.domains.sql.compare import same_rows  # noqa: E402
from hpc.domains.sql.parquet_footer import integer_decimals, read_struct, write_struct  # noqa: E402
from hpc.domains.sql.table import _mapped  # noqa: E402


def _footer(path) -> bytes:
    data = path.read_bytes()
    (length,) = struct.unpack("<I", data[-8:-4])
    return data[-8 - length : -8]


def _decimals(rng, n, digits, scale, nulls=0.0):
    high = max(0, digits - 15)  # digits past int64 from a second draw
    unscaled = [int(u) * 10**high + int(v) for u, v in zip(
        rng.integers(-(10 ** (digits - high)) + 1, 10 ** (digits - high), n),
        rng.integers(0, 10**high, n), strict=True)]
    values = [Decimal(u).scaleb(-scale) for u in unscaled]
    return [None if rng.random() < nulls else v for v in values]


def _table(rng, n):
    return pa.table({
        "d9": pa.array(_decimals(rng, n, 9, 3), pa.decimal128(9, 3)),  # INT32
        "d18": pa.array(_decimals(rng, n, 18, 2), pa.decimal128(18, 2)),  # INT64, past 2**53
        "dn": pa.array(_decimals(rng, n, 12, 4, nulls=0.1), pa.decimal128(12, 4)),
        "d38": pa.array(_decimals(rng, n, 30, 5), pa.decimal128(38, 5)),  # fixed-size bytes
        "k": pa.array(rng.integers(0, 50, n)),
        "s": pa.array([f"w{i % 97}" for i in range(n)], pa.string_view()),
        "dt": pa.array(rng.integers(0, 20_000, n).astype(np.int32)).cast(pa.date32()),
    })


def _expected(column) -> tuple[np.ndarray, np.ndarray]:
    values = column.to_pylist()
    return (np.array([0.0 if v is None else float(v) for v in values]),
            np.array([v is not None for v in values]))


def test_footers_round_trip_byte_for_byte(tmp_path):
    """Footers with statistics, page indexes, nested columns, key-value metadata and Arrow's
    schema, from pyarrow and from DuckDB, re-encode to the same bytes."""
    rng = np.random.default_rng()
    table = _table(rng, 3000).append_column(
        "nested", pa.array([{"a": int(i), "b": [1.5, None]} for i in range(3000)]))
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=700, write_page_index=True,
                   store_decimal_as_integer=True)
    pq.write_table(table.drop_columns(["nested"]), tmp_path / "b.parquet",
                   compression="zstd", write_statistics=False)
    con = duckdb.connect()
    con.register("t", table.drop_columns(["nested", "s"]))
    con.execute(f"COPY t TO '{tmp_path / 'c.parquet'}' (FORMAT parquet, ROW_GROUP_SIZE 1000)")
    for name in ("a", "b", "c"):
        footer = _footer(tmp_path / f"{name}.parquet")
        assert write_struct(read_struct(footer)) == footer, name
    # a nested column leaves the footer as it is; a file without integer decimals too
    assert integer_decimals(_footer(tmp_path / "a.parquet")).scales == {}
    assert integer_decimals(_footer(tmp_path / "b.parquet")).scales == {}
    assert integer_decimals(_footer(tmp_path / "c.parquet")).scales == {
        "d9": 3, "d18": 2, "dn": 4}
    # the rewrite keeps every other field as it was: the whole footer parsed, the decimal
    # elements' type fields and Arrow's schema dropped, gives the same struct
    pq.write_table(table.drop_columns(["nested"]), tmp_path / "d.parquet",
                   row_group_size=300, store_decimal_as_integer=True)
    for name in ("c", "d"):
        footer = _footer(tmp_path / f"{name}.parquet")
        want = read_struct(footer)
        for f in want:
            if f.id == 2:  # the schema: decimal types dropped from INT32/INT64 elements
                for element in f.value[1][1:]:
                    ids = {g.id: g for g in element}
                    decimal = (6 in ids and ids[6].value == 5) or (
                        10 in ids and ids[10].value and ids[10].value[0].id == 5)
                    if ids.get(1) is not None and ids[1].value in (1, 2) and decimal:
                        element[:] = [g for g in element if g.id not in (6, 7, 8, 10)]
            if f.id == 5:
                f.value = (f.value[0], [kv for kv in f.value[1] if not any(
                    k.id == 1 and k.value == b"ARROW:schema" for k in kv)])
        assert read_struct(integer_decimals(footer).footer) == want, name


@pytest.mark.parametrize("writer", ["pyarrow", "duckdb"])
def test_integer_decimals_read_as_their_values(tmp_path, writer):
    """INT32 and INT64 decimals (with and without nulls) read as integers equal the decimals'
    values rounded to float64 (correctly below 2**53 unscaled, within an ulp past it), as
    fixed-size ones do; strings, dates and other columns are read
    as before; SQL over the file equals DuckDB's answer."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    table = _table(rng, 20_000)
    path = tmp_path / "t.parquet"
    if writer == "pyarrow":
        pq.write_table(table, path, row_group_size=3000, store_decimal_as_integer=True)
    else:
        con = duckdb.connect()
        con.register("src", table)
        con.execute(f"COPY src TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 3000)")
    assert _mapped(str(path)).scales == {"d9": 3, "d18": 2, "dn": 4}, writer
    ours = read_parquet(str(path))
    for name in ("d9", "d18", "dn", "d38"):
        want, valid = _expected(table.column(name))
        col = ours[name]
        assert col.kind == "float", name
        got = np.where(valid, col.values, 0.0)
        exact = np.abs(want) * 10.0 ** table.column(name).type.scale < 2**53
        assert np.array_equal(got[exact], want[exact]), (seed, name)  # correctly rounded
        assert np.all(np.abs(got - want) <= 2**-52 * np.abs(want)), (seed, name)  # 1 ulp
        assert np.array_equal(np.ones(len(want), bool) if col.valid is None else col.valid,
                              valid), (seed, name)
    index = np.flatnonzero(rng.random(len(table)) < 0.02)  # a selective filter's survivors
    for name in ("d9", "d18"):  # converted from the chunks: the same values as whole
        kept = read_parquet(str(path))[name].gather(index)
        assert np.array_equal(kept.values, ours[name].values[index]), (seed, name)
    assert list(ours["s"].dictionary[ours["s"].values[:5]]) == table.column("s").to_pylist()[:5]
    assert np.array_equal(ours["dt"].values, table.column("dt").cast(pa.int32()).to_numpy())

    catalog = Catalog.from_directory(tmp_path)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}')")
    sql = ("SELECT k, sum(d18) AS a, avg(dn) AS b, min(d9) AS c, max(d38) AS d, "
           "sum(d9 * (1 - d9)) AS e, count(*) AS n FROM t WHERE d9 > 0.5 AND dn < 1000 "
           "GROUP BY k ORDER BY k")
    # exact DECIMALs in 64 bits: d38's 30 digits, and sums past 2**63 (of 18-digit d18, of
    # d9 * (1 - d9)), are refused, never wrapped; what fits is exact
    with pytest.raises(SQLError, match="64 bits this engine holds"):
        query(sql, catalog)
    exact = ("SELECT k, min(d18) AS a, avg(dn) AS b, min(d9) AS c, sum(d9) AS d, "
             "sum(dn - d9) AS e, count(*) AS n FROM t WHERE d9 > 0.5 AND dn < 1000 "
             "GROUP BY k ORDER BY k")
    assert same_rows(query(exact, catalog).to_pandas(), con.execute(exact).df(),
                     True) is None, seed


def test_deferred_columns_equal_eager_gathers():
    """A filter's deferred columns (ints with nulls, strings, decimals from chunks), gathered
    again by a join's rows in any order, some with -1 (an outer join's missing rows), read
    as the eager gathers do; the frame's columns share one composition of the rows."""
    from hpc.domains.sql.table import Column, Decimals, Deferred, Rows, deferred_gather

    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    n = 200_000
    unscaled = rng.integers(-(10**12), 10**12, n)
    chunks = [pa.array(part) for part in np.array_split(unscaled, 7)]
    ints = Column(rng.integers(-50, 50, n), "int", None, rng.random(n) < 0.8)
    text = Column(rng.integers(0, 3, n).astype(np.int32), "string", np.array(["a", "b", "c"]))
    for share in (0.02, 0.6):
        kept = np.flatnonzero(rng.random(n) < share)
        rows = Rows(kept)
        frame = {name: deferred_gather(c, rows) for name, c in (
            ("i", ints), ("s", text), ("d", Decimals(list(chunks), n, 2)))}
        assert all(isinstance(c, Deferred) and len(c) == len(kept) for c in frame.values())
        join = rng.permutation(len(kept))[: len(kept) // 3]  # a join's rows: any order
        second = {name: c.gather(join) for name, c in frame.items()}
        assert second["i"]._rows is second["s"]._rows  # composed once for the frame
        both = kept[join]
        assert np.array_equal(second["i"].values, ints.values[both]), seed
        assert np.array_equal(second["i"].valid, ints.valid[both]), seed
        assert np.array_equal(second["s"].values, text.values[both]), seed
        assert np.array_equal(second["d"].values, unscaled[both] / 100.0), seed
        outer = np.where(rng.random(len(join)) < 0.1, -1, join)
        taken = frame["i"].take(outer)
        want = ints.values[kept[np.maximum(outer, 0)]]
        ok = (outer >= 0) & ints.valid[kept[np.maximum(outer, 0)]]
        assert np.array_equal(taken.valid, ok), seed
        assert np.array_equal(taken.values[ok], want[ok]), seed
        assert np.array_equal(frame["d"].values, unscaled[kept] / 100.0), seed  # read as is
