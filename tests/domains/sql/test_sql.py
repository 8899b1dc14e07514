"""SQL foundations: Arrow/pandas round trips, the per-rank Parquet reader, and the hash join
against DuckDB on random tables (duplicate, missing, skewed and null keys, empty inputs)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from hpc.domains.sql import Catalog, Table, hash_join, read_parquet  # noqa: E402

from tests.conftest import mpi_script, run_mpi  # noqa: E402


def _keys(draw, n, universe, skew):
    keys = draw(st.lists(st.integers(-universe, universe), min_size=n, max_size=n))
    keys = np.array(keys, dtype=np.int64)
    if skew and n:
        keys[: (3 * n) // 4] = keys[0]  # one heavy hitter
    nulls = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    return keys, nulls


@st.composite
def two_tables(draw):
    n, m = draw(st.integers(0, 60)), draw(st.integers(0, 60))
    universe = draw(st.sampled_from([3, 20, 2**62]))
    skew = draw(st.booleans())
    with_nulls = draw(st.booleans())
    a, an = _keys(draw, n, universe, skew)
    b, bn = _keys(draw, m, universe, skew)
    if not with_nulls:
        an[:], bn[:] = False, False
    return a, an, b, bn


def _duck(a, an, b, bn, how):
    con = duckdb.connect()
    left = pa.table({"k": pa.array(a, mask=an), "i": np.arange(len(a))})
    right = pa.table({"k": pa.array(b, mask=bn), "j": np.arange(len(b))})
    con.register("l", left)
    con.register("r", right)
    sql = {
        "inner": "select i, j from l join r on l.k = r.k",
        "left": "select i, coalesce(j, -1) from l left join r on l.k = r.k",
        "semi": "select i, -1 from l where exists (select 1 from r where r.k = l.k)",
        "anti": "select i, -1 from l where not exists (select 1 from r where r.k = l.k)",
    }[how]
    rows = con.execute(sql).fetchall()
    return sorted((int(x), int(y)) for x, y in rows)


@pytest.mark.parametrize("how", ["inner", "left", "semi", "anti"])
@settings(max_examples=60, deadline=None)
@given(data=two_tables())
def test_hash_join_equals_duckdb(how, data):
    a, an, b, bn = data
    left, right = hash_join(a, b, how, probe_valid=~an, build_valid=~bn)
    got = list(zip(left.tolist(), right.tolist(), strict=True))
    assert got == sorted(got), "pairs ordered by probe row, then build row"
    assert sorted(got) == _duck(a, an, b, bn, how)


def test_large_join_with_many_duplicates_equals_a_sort_merge_reference():
    rng = np.random.default_rng()
    a = rng.integers(0, 5000, 300_000)
    b = rng.integers(0, 20_000, 50_000)
    left, right = hash_join(a, b)
    assert np.array_equal(a[left], b[right])
    # the match count per probe key equals the build multiplicity of that key
    mult = np.bincount(b, minlength=20_000)
    assert len(left) == int(mult[a].sum())


@pytest.mark.parametrize("spread", [1, 10**7])
@pytest.mark.parametrize("radix", [False, True])
@pytest.mark.parametrize("matching", [0.001, 0.3, 0.9])
def test_large_joins_with_few_or_many_matches_equal_duckdb(matching, radix, spread,
                                                           monkeypatch):
    """Probes large enough to be screened by a match mask first (selective inner joins pair
    only the matching rows, by one table or radix partitions) and semi/anti joins by that
    mask, with null keys on both sides and duplicate build keys. The mask comes from a
    bitmap of the build keys' range when it is narrow (``spread`` 1) and from a hash table
    when the keys are spread wide."""
    from hpc.domains.sql import join as join_module
    from hpc.domains.sql.join import _SCREEN_ROWS

    if radix:
        monkeypatch.setattr(join_module, "RADIX_MIN", (0, 0))
    rng = np.random.default_rng()
    n = 2 * _SCREEN_ROWS
    a = rng.integers(0, int(1000 / matching), n) * spread - 5 * 10**12
    b = rng.integers(0, 1000, 3000) * spread - 5 * 10**12
    an, bn = rng.random(n) < 0.05, rng.random(len(b)) < 0.05
    for how in ("inner", "semi", "anti"):
        left, right = hash_join(a, b, how, probe_valid=~an, build_valid=~bn)
        got = list(zip(left.tolist(), right.tolist(), strict=True))
        if not radix or how != "inner":  # radix pairs come by partition first
            assert got == sorted(got), "pairs ordered by probe row, then build row"
        assert sorted(got) == _duck(a, an, b, bn, how), how


@pytest.mark.parametrize("spread", [1, 3, 10**6])
def test_membership_equals_isin_by_bitmap_and_by_hash_table(spread):
    """``matched`` (IN a subquery's set) against ``np.isin``: probe keys below, inside and
    above the build keys' range and at the int64 extremes; a narrow range is answered by a
    bitmap, a wide one by a hash table."""
    from hpc.domains.sql.join import _bitmap_fits, _key_range, matched

    rng = np.random.default_rng(spread)
    build = rng.integers(-500, 500, 2000) * spread
    probe = np.concatenate([rng.integers(-2000, 2000, 50_000) * spread,
                            [np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 0]])
    assert _bitmap_fits(_key_range(build), len(build)) == (spread != 10**6)
    assert np.array_equal(matched(probe, build), np.isin(probe, build))
    small = build[:10]  # more build keys than probe keys: the probe's table screens them
    assert np.array_equal(matched(small, build), np.isin(small, build))


def test_bad_join_input_is_refused():
    with pytest.raises(ValueError, match="how"):
        hash_join(np.arange(3), np.arange(3), "outer")
    with pytest.raises(TypeError, match="probe keys"):
        hash_join(np.linspace(0, 1, 3), np.arange(3))


def test_arrow_and_pandas_round_trips_keep_values_types_and_nulls():
    import datetime as dt

    src = pa.table(
        {
            "i": pa.array([5, None, -3], type=pa.int64()),
            "x": pa.array([1.5, 2.5, None]),
            "s": pa.array(["pear", None, "apple"]),
            "d": pa.array([dt.date(1995, 3, 15), dt.date(1970, 1, 1), None]),
            "m": pa.array([1, 2, 3], type=pa.decimal128(15, 2)),
        }
    )
    t = Table.from_arrow(src)
    assert t["s"].dictionary.tolist() == ["", "apple", "pear"]  # sorted: codes order strings
    assert (
        t["d"].kind == "date"
        and t["d"].values[0] == (dt.date(1995, 3, 15) - dt.date(1970, 1, 1)).days
    )
    back = t.to_arrow()
    for name in ("i", "x", "s", "d"):
        assert back.column(name).to_pylist() == src.column(name).to_pylist(), name
    assert back.column("m").to_pylist() == [1.0, 2.0, 3.0]  # decimals become float64
    frame = t.to_pandas()
    again = Table.from_pandas(frame)
    assert again["x"].valid.tolist() == [True, True, False]


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_parquet_parts_cover_the_file_once_with_shared_dictionaries(tmp_path, nranks):
    rng = np.random.default_rng()
    n = 10_000
    words = np.array(["ab", "c", "déjà", "zz", "m"], dtype=object)
    src = pa.table({"k": np.arange(n), "s": words[rng.integers(0, 5, n)].tolist()})
    for groups in (1, 7):
        pq.write_table(src, tmp_path / f"t{groups}.parquet", row_group_size=-(-n // groups))
    proc = run_mpi(nranks, [str(mpi_script("check_sql_parquet.py")), str(tmp_path)], timeout=240)
    assert f"on {nranks} ranks" in proc.stdout
    # one process reads it whole
    t = read_parquet(str(tmp_path / "t7.parquet"))
    assert np.array_equal(t["k"].values, np.arange(n))
    with pytest.raises(KeyError, match="no column"):
        read_parquet(str(tmp_path / "t1.parquet"), columns=["nope"])
    with pytest.raises(OSError, match="not a readable Parquet"):
        (tmp_path / "bad.parquet").write_bytes(b"not parquet")
        read_parquet(str(tmp_path / "bad.parquet"))


def test_a_rewritten_parquet_file_is_read_anew(tmp_path):
    """The kept memory map and footer of a file are dropped once it changes: rewritten in
    place with other rows and row groups, replaced by another file, or made unreadable."""
    rng = np.random.default_rng()
    path = tmp_path / "t.parquet"
    for n, groups in ((5000, 3), (5000, 4), (120, 1)):
        values = rng.integers(-10**9, 10**9, n)
        pq.write_table(pa.table({"k": values}), path, row_group_size=-(-n // groups))
        assert np.array_equal(read_parquet(str(path))["k"].values, values)
        assert np.array_equal(read_parquet(str(path))["k"].values, values)  # from the map
    other = tmp_path / "u.parquet"
    pq.write_table(pa.table({"k": np.arange(7)}), other)
    other.replace(path)
    assert read_parquet(str(path))["k"].values.tolist() == list(range(7))
    path.write_bytes(b"not parquet any more")
    with pytest.raises(OSError, match="not a readable Parquet"):
        read_parquet(str(path))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_row_groups_read_in_pieces_equal_pyarrow(tmp_path, threads):
    """Decimal and string columns cut into runs of row groups over threads, the others
    whole: the same values, nulls and types as pyarrow's own read, for any run of groups."""
    from decimal import Decimal

    from hpc.domains.sql.parquet_read import _pieces, read_row_groups

    rng = np.random.default_rng()
    n = 20_000
    cents = rng.integers(-10**9, 10**9, n)
    nulls = rng.random(n) < 0.1
    words = np.array(["ab", "c", "déjà", "zz", "m"], dtype=object)[rng.integers(0, 5, n)]
    src = pa.table({
        "k": pa.array(rng.integers(-2**62, 2**62, n)),
        "maybe": pa.array(rng.integers(0, 9, n), mask=nulls),
        "price": pa.array([Decimal(int(c)).scaleb(-2) for c in cents], pa.decimal128(15, 2)),
        "day": pa.array(rng.integers(0, 10_000, n).astype(np.int32)).cast(pa.date32()),
        "note": pa.array([f"n{v}" for v in rng.integers(0, n, n)], mask=~nulls),
        "flag": pa.array(words.tolist()),
    })
    path = tmp_path / "t.parquet"
    pq.write_table(src, path, row_group_size=1500)  # 14 row groups of unequal sizes
    meta = pq.read_metadata(path)

    def open_file():
        return pq.ParquetFile(path, read_dictionary=["flag"])

    everything = open_file().read()
    # all columns; a large integer column beside a small one (cut, copied into one array);
    # one with nulls (cut, left as its pieces' chunks)
    for columns in (["note", "k", "price", "flag", "day", "maybe"], ["k", "day"], ["maybe"]):
        for groups in ([0], [3, 4, 5], list(range(meta.num_row_groups)), []):
            got = read_row_groups(open_file, meta, groups, columns, threads)
            want = open_file().read_row_groups(groups, columns=columns)
            assert got.schema == want.schema
            assert got.num_rows == want.num_rows
            for name in columns:
                assert got[name].combine_chunks().equals(want[name].combine_chunks()), name
            if groups and "k" in columns:
                first = meta.row_group(0).num_rows * groups[0]
                assert got["k"].to_numpy()[0] == everything["k"].to_numpy()[first]
                assert got["k"].num_chunks == 1
    # every group of every column exactly once, in order, and cut only where it pays
    schema = open_file().schema_arrow
    groups = list(range(meta.num_row_groups))
    parts = min(threads, len(groups))
    for columns, cut, whole in ((["note", "k", "price", "flag", "day", "maybe"],
                                 {"note", "price", "flag"}, {"k", "day", "maybe"}),
                                (["k", "day"], {"k"}, set()), (["maybe"], {"maybe"}, set())):
        pieces = _pieces(meta, schema, groups, columns, threads, set())
        for name in columns:
            runs = [p.groups for p in pieces if p.name == name]
            assert sum(runs, []) == groups
            assert len(runs) in ({parts} if name in cut else {1} if name in whole
                                 else {1, parts}), (columns, name)
            # only fixed-width columns are copied into one array
            assert all(not p.fill or name in ("k", "day", "maybe") for p in pieces
                       if p.name == name)


@st.composite
def grouped(draw):
    n = draw(st.integers(0, 80))
    ngroups = draw(st.sampled_from([1, 3, 50, 10**6]))
    g1 = np.array(draw(st.lists(st.integers(0, ngroups), min_size=n, max_size=n)), dtype=np.int64)
    g2 = np.array(draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n)), dtype=np.int64)
    x = np.array(draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)), dtype=np.float64)
    null_g2 = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    null_x = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    return g1, g2, null_g2, x, null_x


@settings(max_examples=80, deadline=None)
@given(data=grouped())
def test_group_by_aggregates_equal_duckdb(data):
    from hpc.domains.sql.aggregate import combine_ids, group_ids, reduce_groups

    g1, g2, null_g2, x, null_x = data
    keys = combine_ids([g1, g2], [None, ~null_g2])
    ids, n, first = group_ids(keys)
    got = {}
    for op in ("sum", "count", "min", "max", "avg", "count_distinct"):
        got[op] = reduce_groups(op, ids, n, x, ~null_x)
    rows = []
    for g in range(n):
        r = first[g]
        key = (int(g1[r]), None if null_g2[r] else int(g2[r]))
        vals = []
        for op in ("sum", "count", "min", "max", "avg", "count_distinct"):
            v, ok = got[op]
            vals.append(float(v[g]) if ok is None or ok[g] else None)
        rows.append((key, tuple(vals)))
    con = duckdb.connect()
    con.register(
        "t", pa.table({"g1": g1, "g2": pa.array(g2, mask=null_g2), "x": pa.array(x, mask=null_x)})
    )
    ref = con.execute(
        "select g1, g2, sum(x), count(x), min(x), max(x), avg(x), count(distinct x) "
        "from t group by g1, g2"
    ).fetchall()
    want = {(a, b): tuple(None if v is None else float(v) for v in rest) for a, b, *rest in ref}
    assert len(rows) == len(want)
    for key, vals in rows:
        for v, w in zip(vals, want[key], strict=True):
            assert (v is None and w is None) or v == pytest.approx(w, rel=1e-12), (key, vals)


@pytest.mark.parametrize("how", ["inner", "left"])
def test_radix_join_gives_the_same_pairs(how, monkeypatch):
    """The radix-partitioned path (large inputs) against the single-table path."""
    from hpc.domains.sql import join as join_module

    rng = np.random.default_rng()
    probe = rng.integers(0, 5000, 40_000)
    build = rng.integers(0, 8000, 6000)
    pvalid = rng.random(len(probe)) > 0.1 if how == "inner" else None
    bvalid = rng.random(len(build)) > 0.1
    monkeypatch.setattr(join_module, "RADIX_MIN", (1 << 62, 1 << 62))
    plain = hash_join(probe, build, how, pvalid, bvalid)
    monkeypatch.setattr(join_module, "RADIX_MIN", (0, 0))
    radix = hash_join(probe, build, how, pvalid, bvalid)
    a, b = np.lexsort(plain[::-1]), np.lexsort(radix[::-1])
    assert len(plain[0]) > len(probe) // 2
    assert np.array_equal(plain[0][a], radix[0][b]) and np.array_equal(plain[1][a], radix[1][b])


@pytest.mark.cudasim
@pytest.mark.timeout(300)
def test_gpu_sql_kernels_under_the_cuda_simulator():
    from tests.conftest import run_cudasim

    proc = run_cudasim("check_sql_cudasim.py")
    assert "GPU SQL kernels equal the CPU kernels" in proc.stdout


def _gpu_sorted_pairs(left, right):
    order = np.lexsort((right, left))
    return left[order], right[order]


@pytest.mark.gpu
@pytest.mark.timeout(600)
def test_gpu_sql_kernels_equal_the_cpu_on_a_million_rows():
    cp = pytest.importorskip("cupy")
    from hpc.domains.sql import aggregate, gpu_ops
    from hpc.domains.sql.join import HOW

    rng = np.random.default_rng()
    n, m = 1_000_000, 200_000
    probe = rng.integers(0, 400_000, n)  # duplicates on the build side, misses on both
    build = rng.integers(0, 400_000, m)
    pv, bv = rng.random(n) > 0.05, rng.random(m) > 0.05
    dev = [cp.asarray(a) for a in (probe, build, pv, bv)]
    for how in HOW:
        want = _gpu_sorted_pairs(*hash_join(probe, build, how, pv, bv))
        pairs = gpu_ops.hash_join(cp, *dev[:2], how, *dev[2:])
        got = _gpu_sorted_pairs(*(cp.asnumpy(a) for a in pairs))
        assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1]), how

    cols = [rng.integers(0, 2000, n), rng.integers(-20, 20, n).astype(np.int32)]
    valids = [None, rng.random(n) > 0.1]
    keys = aggregate.combine_ids(cols, valids)
    gkeys = gpu_ops.combine_ids(cp, [cp.asarray(c) for c in cols], [None, cp.asarray(valids[1])])
    assert np.array_equal(cp.asnumpy(gkeys), keys)
    ids, ngroups, first = aggregate.group_ids(keys)
    gids, gngroups, gfirst = gpu_ops.group_ids(cp, gkeys)
    assert gngroups == ngroups
    assert np.array_equal(cp.asnumpy(gids), ids) and np.array_equal(cp.asnumpy(gfirst), first)

    valid = rng.random(n) > 0.2
    for values in (
        rng.integers(-(1 << 40), 1 << 40, n),
        rng.integers(0, 3000, n).astype(np.int32),
        rng.standard_normal(n),
    ):
        dvalues = cp.asarray(values)
        for ok in (None, valid):
            dok = None if ok is None else cp.asarray(ok)
            for op in aggregate.AGGREGATES:
                want = aggregate.reduce_groups(op, ids, ngroups + 3, values, ok)
                got = gpu_ops.reduce_groups(cp, op, gids, ngroups + 3, dvalues, dok)
                what = (op, values.dtype, ok is None)
                assert got[0].dtype == want[0].dtype, what
                if want[1] is None:
                    assert got[1] is None, what
                else:
                    assert np.array_equal(cp.asnumpy(got[1]), want[1]), what
                if want[0].dtype == np.float64 and op in ("sum", "avg"):  # atomic add order
                    np.testing.assert_allclose(cp.asnumpy(got[0]), want[0], rtol=1e-9, atol=1e-9)
                else:
                    assert np.array_equal(cp.asnumpy(got[0]), want[0]), what


def _random_words(rng, n):
    """Strings that share long prefixes, repeat, end in NULs, or leave ASCII."""
    alphabet = ["a", "b", "\0", "é", "z" * 9, "Customer#0000"]
    return ["".join(rng.choice(alphabet, rng.integers(0, 12))) for _ in range(n)]


def test_scan_kernels_equal_numpy_on_random_inputs():
    from hpc.domains.sql import scan_kernels

    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    for dtype in (np.int64, np.int32, np.int8, np.float64, np.float32, bool):
        values = rng.integers(-100, 100, 70_000).astype(dtype)
        index = rng.integers(0, len(values), 100_000)
        for order in (index, np.sort(index)):  # a join's rows, a filter's survivors
            out = np.empty(len(order), dtype=values.dtype)
            scan_kernels.gather_parallel(values, order, out)
            assert np.array_equal(out, values.take(order)), seed

    unscaled = rng.integers(-(10**15), 10**15, 1000)
    words = np.stack([unscaled, unscaled >> 63], axis=1).ravel()
    out = np.empty(len(unscaled))
    assert scan_kernels.decimal_to_float(words, 2, 100.0, out) == 0
    assert np.array_equal(out, unscaled / 100.0), seed
    for plain in (unscaled, (unscaled // 10**7).astype(np.int32)):  # INT64 / INT32 decimals
        assert scan_kernels.decimal_to_float(plain, 1, 100.0, out) == 0
        assert np.array_equal(out, plain / 100.0), seed
    words[7] += 1  # a value past 64 bits is reported
    assert scan_kernels.decimal_to_float(words, 2, 100.0, out) == 1

    for n in (0, 1, 2, 40, 3000):
        words = _random_words(rng, n)
        arr = pa.array(words, pa.string())
        from hpc.domains.sql import strings

        want = sorted(words, key=lambda w: w.encode())
        assert [words[i] for i in strings.sort_order(arr)] == want, seed
        unique, code = strings.sort_unique(arr.slice(1) if n else arr)
        rest = words[1:] if n else words
        assert unique.to_pylist() == sorted(set(rest), key=lambda w: w.encode()), seed
        assert [unique[int(c)].as_py() for c in code] == rest, seed


def test_dictionary_chunks_decimals_and_filters_read_as_the_values():
    """Row groups with their own (overlapping, null-holding) dictionaries, decimals with and
    without nulls or values past 64 bits, and a parallel gather: all equal Arrow's values."""
    from decimal import Decimal

    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    chunks, text = [], []
    for _ in range(4):
        words = _random_words(rng, int(rng.integers(0, 200)))
        words = [None if rng.random() < 0.1 else w for w in words]
        text += words
        chunks.append(pa.array(words, pa.string()).dictionary_encode())
    shared = chunks[-1]
    chunks.append(shared)  # a dictionary shared by two chunks
    text += shared.to_pylist()
    column = Table.from_arrow(pa.table({"s": pa.chunked_array(chunks)}))["s"]
    assert list(column.dictionary) == sorted(set(column.dictionary), key=lambda w: w.encode())
    got = [None if column.valid is not None and not column.valid[i] else column.dictionary[c]
           for i, c in enumerate(column.values)]
    assert got == text, seed
    plain = Table.from_arrow(pa.table({"s": pa.array(text, pa.string())}))["s"]
    assert np.array_equal(plain.dictionary, column.dictionary)
    ok = np.array([w is not None for w in text], bool)
    assert np.array_equal(plain.values[ok], column.values[ok])  # null rows: any code

    for big in (False, True):
        unscaled = rng.integers(-(10**12), 10**12, 90_000)
        decimals = [Decimal(int(u)).scaleb(-2) for u in unscaled]
        decimals[3] = None
        if big:
            decimals[5] = Decimal(10**30)
        arr = pa.chunked_array([pa.array(decimals[:50_000], pa.decimal128(38, 2)),
                                pa.array(decimals[50_000:], pa.decimal128(38, 2))])
        col = Table.from_arrow(pa.table({"d": arr}))["d"]
        want = unscaled / 100.0
        if big:  # that value takes Arrow's cast, the rest of its chunk does not
            want[5] = arr.chunk(0)[5].cast(pa.float64()).as_py()
        want[3] = 0.0
        assert col.valid is not None and not col.valid[3]
        assert np.array_equal(col.values, want), seed
        index = np.flatnonzero(rng.random(len(col)) < 0.9)
        kept = col.gather(index)
        assert np.array_equal(kept.values, col.values[index])
        assert np.array_equal(kept.valid, col.valid[index])


@pytest.mark.parametrize("big", [False, True])
def test_decimals_convert_only_the_rows_a_selective_filter_keeps(big):
    """A decimal column without nulls converts a selective filter's survivors straight from
    its chunks (offset slices too); other gathers, and values past 64 bits, convert it whole;
    every way gives Arrow's float64 values."""
    from decimal import Decimal

    from hpc.domains.sql.table import Decimals

    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    unscaled = rng.integers(-(10**15), 10**15, 120_000)
    decimals = [Decimal(int(u)).scaleb(-3) for u in unscaled]
    if big:
        decimals[70_000] = Decimal(10**30)
    whole = pa.array(decimals, pa.decimal128(38, 3))
    arr = pa.chunked_array([whole.slice(0, 40_000), whole.slice(40_000, 1), whole.slice(40_001)])
    want = unscaled / 1000.0
    if big:  # that value takes Arrow's cast
        want[70_000] = whole[70_000].cast(pa.float64()).as_py()

    def fresh():
        col = Table.from_arrow(pa.table({"d": arr}))["d"]
        assert isinstance(col, Decimals) and col.valid is None and len(col) == len(want)
        return col

    for share in (0.01, 0.2, 0.9):
        index = np.flatnonzero(rng.random(len(want)) < share)
        col = fresh()
        assert np.array_equal(col.gather(index).values, want[index]), (seed, share)
        assert col._values is None or big or share > 0.25  # converted whole only then
        assert np.array_equal(col.values, want), seed
    held = Catalog()  # a table held in memory keeps floats, not Arrow's decimals
    held.register("t", Table({"d": fresh()}))
    kept = held.load("t", ["d"])["d"]
    assert not isinstance(kept, Decimals) and np.array_equal(kept.values, want)
    jumbled = rng.permutation(len(want))[:1000]  # a join's rows: not ascending
    assert np.array_equal(fresh().gather(jumbled).values, want[jumbled]), seed
    assert np.array_equal(fresh().take(np.array([-1, 5, 40_000])).values[1:], want[[5, 40_000]])


def test_like_equals_arrow_on_random_patterns():
    """The numba path (literal parts between %) and Arrow's (``_``, escapes) agree with
    Arrow's LIKE, whatever the parts overlap or leave empty."""
    from hpc.domains.sql import strings

    pc = pytest.importorskip("pyarrow.compute")
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    for _ in range(300):
        words = sorted({"".join(rng.choice(["a", "b", "é", "ab"], rng.integers(0, 7)))
                        for _ in range(25)})
        pattern = "".join(rng.choice(["a", "b", "é", "%", "ab", "_"], rng.integers(0, 6)))
        got = strings.like(np.asarray(words, dtype=object), pattern)
        want = pc.match_like(pa.array(words, pa.string()), pattern).to_numpy(zero_copy_only=False)
        assert np.array_equal(got, want), (seed, pattern, words)


def test_radix_partition_is_stable_on_any_number_of_threads():
    """The parallel radix partition (a histogram and a scatter per chunk of rows) against a
    stable sort by partition: the same row order on one thread and on all of them; and a
    radix LEFT join large enough for several chunks equals the single-table join."""
    import numba
    from hpc.domains.sql import join as join_module
    from hpc.domains.sql.join import radix_partition

    rng = np.random.default_rng()
    keys = rng.integers(-(2**40), 2**40, 700_001)
    bits = 9
    part = (keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits)
    want = np.argsort(part, kind="stable")
    threads = numba.get_num_threads()
    for n in sorted({1, threads}):
        numba.set_num_threads(n)
        try:
            order, grouped = np.empty_like(keys), np.empty_like(keys)
            start = radix_partition(keys, bits, order, grouped)
        finally:
            numba.set_num_threads(threads)
        assert np.array_equal(order, want) and np.array_equal(grouped, keys[want])
        assert np.array_equal(np.diff(start), np.bincount(part.astype(np.int64),
                                                          minlength=1 << bits))
    probe = rng.integers(0, 400_000, 300_000)
    build = rng.integers(0, 300_000, 600_000)
    radix = sorted(zip(*(a.tolist() for a in hash_join(probe, build, "left")), strict=True))
    old = join_module.RADIX_MIN
    join_module.RADIX_MIN = (1 << 62, 1 << 62)
    try:
        plain = list(zip(*(a.tolist() for a in hash_join(probe, build, "left")), strict=True))
    finally:
        join_module.RADIX_MIN = old
    assert radix == sorted(plain)


@pytest.mark.parametrize("layout", ["few", "sorted runs", "distinct", "grows", "narrow",
                                    "narrow, late keys"])
def test_group_ids_equal_numpy_unique(layout):
    """Group ids against ``np.unique``: one id per distinct key, numbered in order of first
    appearance, and the first rows. Hashed: "few" to "grows" ("grows" starts with a sample
    that sees one key, so the table doubles many times); a narrow key range over the
    threads' row chunks: "narrow" (keys first met in several chunks), "narrow, late keys"
    (one key met only in the last rows)."""
    from hpc.domains.sql.aggregate import group_ids

    rng = np.random.default_rng()
    n = 400_000
    keys = {"few": lambda: rng.integers(-(2**50), 2**50, 40)[rng.integers(0, 40, n)],
            "sorted runs": lambda: np.repeat(np.sort(rng.integers(0, 2**45, n // 5)), 5),
            "distinct": lambda: rng.permutation(n) * 1_000_003 - 2**40,
            "grows": lambda: np.concatenate([np.full(n, 7), rng.integers(0, 2**60, n)]),
            "narrow": lambda: np.sort(rng.integers(-5, 3000, n)),
            "narrow, late keys": lambda: np.concatenate([rng.integers(10, 13, n - 3),
                                                         [9, 13, 10]])}[layout]()
    ids, ngroups, first = group_ids(keys)
    unique, where = np.unique(keys, return_index=True)
    assert ngroups == len(unique)
    assert np.array_equal(first, np.sort(where))
    assert np.array_equal(keys[first][ids], keys)
    assert np.all(np.diff(first) > 0)  # numbered in order of first appearance


@pytest.mark.parametrize("how", ["inner", "left"])
@pytest.mark.parametrize("density", [1, 3, 6])
def test_joins_on_unique_dense_keys_equal_duckdb(how, density):
    """Unique build keys spread over at most 4 values each are joined by an array indexed by
    key (density 1 and 3), wider ones by hashing (6): the same pairs as DuckDB, ordered by
    probe row, with null keys on both sides and probe keys outside the build range."""
    from hpc.domains.sql import join as join_module

    rng = np.random.default_rng()
    m = 150_000
    b = rng.choice(np.arange(density * m), m, replace=False) - 12_345
    a = rng.integers(-20_000, density * m, 230_000)
    an, bn = rng.random(len(a)) < 0.05, rng.random(m) < 0.05
    spy = []
    original = join_module._direct_join
    join_module._direct_join = lambda *args: spy.append(out := original(*args)) or out
    try:
        left, right = hash_join(a, b, how, probe_valid=~an, build_valid=~bn)
    finally:
        join_module._direct_join = original
    assert (spy[0] is not None) == (density <= join_module._DIRECT_SPAN)
    got = list(zip(left.tolist(), right.tolist(), strict=True))
    assert got == sorted(got)
    assert got == _duck(a, an, b, bn, how)


def _random_tree(rng, names, depth):
    """SQL text of + - * and unary minus over columns and constants, every operation with a
    column below it (constant-only parts would be folded exactly, not in float64)."""
    if depth == 0 or rng.random() < 0.25:
        return str(rng.choice(names))
    if rng.random() < 0.15:
        return f"-({_random_tree(rng, names, depth - 1)})"
    left = _random_tree(rng, names, depth - 1)
    right = (_random_tree(rng, names, depth - 1) if rng.random() < 0.6
             else str(rng.choice(["1", "2", "0.5", "3.25", "1e3"])))
    if rng.random() < 0.5:
        left, right = right, left
    return f"({left} {rng.choice(['+', '-', '*'])} {right})"
