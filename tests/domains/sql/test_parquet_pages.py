"""Our Parquet page kernels against pyarrow's reader on random files of every page layout:
required and optional columns, PLAIN and dictionary pages (and a dictionary that overflows
to PLAIN within a chunk), data pages v1 and v2, several codecs, many small pages."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
hypothesis = pytest.importorskip("hypothesis")
from hpc.domains.sql.parquet_pages import NotNative, chunk_of, decode_chunk  # noqa: E402
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TYPES = {"int32": pa.int32(), "int64": pa.int64(), "float32": pa.float32(),
         "float64": pa.float64(), "date32": pa.date32()}


def _column(rng: np.random.Generator, kind: str, rows: int, distinct: int,
            null_share: float) -> pa.Array:
    if kind.startswith("float"):
        pool = rng.normal(size=distinct) * 10.0 ** rng.integers(-3, 9)
        pool[rng.random(distinct) < 0.1] = np.nan
    else:
        hi = 2**31 - 1 if kind in ("int32", "date32") else 2**63 - 1
        pool = rng.integers(-hi if kind != "date32" else 0, hi if kind != "date32" else 40000,
                            size=distinct)
    values = pool[rng.integers(0, distinct, rows)].astype(TYPES[kind].to_pandas_dtype()
                                                        if kind != "date32" else np.int32)
    mask = rng.random(rows) < null_share if null_share else None
    if kind == "date32":
        return pa.array(values, type=pa.int32(), mask=mask).cast(pa.date32())
    return pa.array(values, type=TYPES[kind], mask=mask)


def _decoded(path, group: int, name: str) -> tuple[np.ndarray, np.ndarray | None]:
    pf = pq.ParquetFile(path)
    index = pf.schema_arrow.get_field_index(name)
    chunk = chunk_of(pf.metadata.row_group(group).column(index), pf.schema.column(index))
    values = np.empty(chunk.rows, chunk.dtype)
    valid = np.empty(chunk.rows, np.bool_) if chunk.max_definition else None
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # as a scan maps its file
    nulls = decode_chunk(data, chunk, values,
                         valid if valid is not None else np.empty(0, np.bool_))
    assert nulls == (0 if valid is None else int((~valid).sum()))
    return values, valid


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.sampled_from([0, 1, 7, 8, 9, 1000, 20000]),
       distinct=st.sampled_from([1, 2, 3, 255, 256, 5000, 100000]),
       null_share=st.sampled_from([0.0, 0.0, 0.01, 0.5, 1.0]),
       version=st.sampled_from(["1.0", "2.0"]),
       codec=st.sampled_from(["snappy", "zstd", "gzip", "none", "lz4"]),
       dictionary=st.booleans(), page=st.sampled_from([64, 1024, 1 << 20]),
       dictionary_limit=st.sampled_from([256, 1 << 20]))
def test_chunks_decode_as_pyarrow_reads_them(tmp_path_factory, seed, rows, distinct,
                                             null_share, version, codec, dictionary, page,
                                             dictionary_limit):
    rng = np.random.default_rng(seed)
    table = pa.table({kind: _column(rng, kind, rows, distinct, null_share) for kind in TYPES})
    if null_share == 0.0:  # a required column (no definition levels), as TPC-H's are
        table = table.cast(pa.schema([pa.field(k, t, nullable=False) for k, t in
                                      zip(table.column_names, table.schema.types,
                                          strict=True)]))
    path = tmp_path_factory.mktemp("pages") / "t.parquet"
    pq.write_table(table, path, data_page_version=version, compression=codec,
                   use_dictionary=dictionary, data_page_size=page,
                   dictionary_pagesize_limit=dictionary_limit,
                   row_group_size=max(1, rows // 2) if rows else None)
    pf = pq.ParquetFile(path)
    for group in range(pf.metadata.num_row_groups):
        expected = pf.read_row_group(group)
        for name in TYPES:
            try:
                values, valid = _decoded(path, group, name)
            except NotNative as exc:  # only Parquet's Hadoop-framed LZ4 is left to pyarrow
                assert codec == "lz4", exc
                continue
            ref = expected.column(name).combine_chunks()
            present = ~np.asarray(ref.is_null())
            if valid is None:
                assert present.all()
                valid = np.ones(len(values), np.bool_)
            assert np.array_equal(valid, present)
            want = ref.cast(pa.int32()) if name == "date32" else ref
            want = want.fill_null(0).to_numpy(zero_copy_only=False)
            assert np.array_equal(np.where(valid, values, 0), want, equal_nan=True), name
            assert not values[~valid].any()  # a NULL's value is 0


def test_a_truncated_chunk_is_an_error_naming_its_place(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(1000, dtype=np.int64)}), path,
                   compression="none", use_dictionary=False)
    pf = pq.ParquetFile(path)
    chunk = chunk_of(pf.metadata.row_group(0).column(0), pf.schema.column(0))
    data = bytearray(path.read_bytes())
    values, valid = np.empty(chunk.rows, np.int64), np.empty(chunk.rows, np.bool_)
    decode_chunk(bytes(data), chunk, values, valid)
    assert np.array_equal(values, np.arange(1000)) and valid.all()
    from dataclasses import replace

    with pytest.raises(ValueError, match=f"at byte {chunk.start}.*expected 2000"):
        decode_chunk(bytes(data), replace(chunk, rows=2000), np.empty(2000, np.int64),
                     np.empty(2000, np.bool_))
    with pytest.raises(ValueError, match="a mask"):  # an optional column's mask is needed
        decode_chunk(bytes(data), chunk, values, np.empty(0, np.bool_))


KINDS = ["int32", "int64", "uint32", "uint64", "float32", "float64", "date32", "int16",
         "decimal", "string"]


def _engine_column(rng: np.random.Generator, kind: str, rows: int, distinct: int,
                   null_share: float) -> pa.Array:
    from decimal import Decimal

    mask = rng.random(rows) < null_share if null_share else None
    pick = rng.integers(0, distinct, rows)
    if kind == "decimal":
        cents = rng.integers(-10**12, 10**12, distinct)[pick]
        return pa.array([Decimal(int(c)).scaleb(-2) for c in cents], pa.decimal128(15, 2),
                        mask=mask)
    if kind == "string":
        return pa.array([f"s{v}" for v in pick], pa.string(), mask=mask)
    if kind == "uint64":
        return pa.array(rng.integers(0, 2**64 - 1, distinct, dtype=np.uint64)[pick], mask=mask)
    if kind == "uint32":
        return pa.array(rng.integers(0, 2**32, distinct, dtype=np.uint64)[pick]
                        .astype(np.uint32), mask=mask)
    if kind == "int16":
        return pa.array(rng.integers(-2**15, 2**15, distinct)[pick].astype(np.int16), mask=mask)
    return _column(rng, kind, rows, distinct, null_share) if null_share else \
        _column(rng, kind, rows, distinct, 0.0)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.sampled_from([0, 1, 9, 3000, 20000]),
       distinct=st.sampled_from([1, 7, 300, 100000]),
       null_share=st.sampled_from([0.0, 0.0, 0.3]),
       codec=st.sampled_from(["snappy", "zstd", "none", "lz4"]),
       groups=st.sampled_from([1, 3, 7]), ranks=st.sampled_from([1]),
       threads=st.sampled_from([1, 2]))
def test_scans_decode_as_pyarrow_reads_them(tmp_path_factory, seed, rows, distinct, null_share,
                                            codec, groups, ranks, threads):
    """``read_parquet`` with our page kernels (4- and 8-byte integers, integer-stored
    decimals, dates, floats) against the same scan with every column read by pyarrow:
    equal values and NULLs for random schemas, row groups, codecs and NULL shares (the
    other types, int16 among them, stay with pyarrow in both, as do the columns of Parquet's
    Hadoop-framed LZ4, which the kernels leave to pyarrow)."""
    import numba
    from hpc.domains.sql import parquet_read
    from hpc.domains.sql.table import _maps, read_parquet

    rng = np.random.default_rng(seed)
    kinds = list(rng.choice(KINDS, size=int(rng.integers(1, 6)), replace=False))
    table = pa.table({k: _engine_column(rng, k, rows, distinct, null_share) for k in kinds})
    path = tmp_path_factory.mktemp("scan") / "t.parquet"
    pq.write_table(table, path, compression=codec, store_decimal_as_integer=True,
                   row_group_size=max(1, rows // groups) if rows else None)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        got = read_parquet(str(path), kinds)
        _maps.clear()
        native = parquet_read._native_columns
        parquet_read._native_columns = lambda *a: {}
        try:
            want = read_parquet(str(path), kinds)
        finally:
            parquet_read._native_columns = native
    finally:
        numba.set_num_threads(before)
        _maps.clear()
    for k in kinds:
        a, b = got.columns[k], want.columns[k]
        va = np.ones(len(a), np.bool_) if a.valid is None else a.valid
        vb = np.ones(len(b), np.bool_) if b.valid is None else b.valid
        assert np.array_equal(va, vb), k
        if a.kind == "string":
            assert list(a.dictionary[a.values[va]]) == list(b.dictionary[b.values[vb]]), k
        else:
            assert np.array_equal(np.asarray(a.values)[va], np.asarray(b.values)[vb],
                                  equal_nan=True), k


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), codec=st.sampled_from(["snappy", "zstd", "none"]),
       flips=st.integers(1, 8), header=st.booleans())
def test_a_damaged_chunk_is_an_error_not_a_crash(tmp_path_factory, seed, codec, flips, header):
    """Random bytes of a chunk overwritten (in its first page header, or anywhere): decoding
    raises ValueError or NotNative, or returns values, and never writes outside its arrays."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 300, 5000).astype(np.int64)
    mask = rng.random(5000) < 0.2
    path = tmp_path_factory.mktemp("damaged") / "t.parquet"
    pq.write_table(pa.table({"x": pa.array(values, mask=mask)}), path, compression=codec,
                   data_page_size=4096)
    pf = pq.ParquetFile(path)
    chunk = chunk_of(pf.metadata.row_group(0).column(0), pf.schema.column(0))
    data = np.frombuffer(path.read_bytes(), np.uint8).copy()
    span = 24 if header else chunk.size
    at = chunk.start + rng.integers(0, span, flips)
    data[at] = rng.integers(0, 256, flips)
    guard = 64
    out = np.full(chunk.rows + 2 * guard, -7, np.int64)
    valid = np.full(chunk.rows + 2 * guard, True)
    try:
        decode_chunk(data.tobytes(), chunk, out[guard:-guard], valid[guard:-guard])
    except (ValueError, NotNative):
        pass
    assert (out[:guard] == -7).all() and (out[-guard:] == -7).all()
    assert valid[:guard].all() and valid[-guard:].all()


def _strings(rng: np.random.Generator, rows: int, distinct: int, null_share: float) -> pa.Array:
    """Strings of 0 to 40 characters, some of them multi-byte, drawn from ``distinct``."""
    alphabet = np.array(list("ab c-é€😀") + ["", "xyz"])
    lengths = rng.integers(0, 41, distinct)
    pool = ["".join(rng.choice(alphabet, n)) for n in lengths]
    mask = rng.random(rows) < null_share if null_share else None
    return pa.array([pool[i] for i in rng.integers(0, distinct, rows)], pa.string(), mask=mask)


def _plain_strings(data, meta, schema_column) -> list:
    """A chunk's strings read as themselves (:func:`string_lengths`, then
    :func:`copy_strings` into one buffer), as a list with None for NULLs."""
    from hpc.domains.sql.parquet_pages import copy_strings, read_pages, string_lengths

    chunk = chunk_of(meta, schema_column, plain=True)
    pages = read_pages(data, chunk)
    lengths = np.full(chunk.rows, -1, np.int32)
    sources = np.empty(chunk.rows, np.int64)
    valid = np.empty(chunk.rows if chunk.max_definition else 0, np.bool_)
    nulls = string_lengths(pages, lengths, sources, valid)
    if not chunk.max_definition:
        valid = np.ones(chunk.rows, np.bool_)
    assert nulls == int((~valid).sum()) and (lengths[~valid] == 0).all()
    starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    out = np.zeros(int(starts[-1]) + 64, np.uint8)  # a guard past the end stays zero
    copy_strings(pages, lengths, sources, starts[:-1], out)
    assert not out[starts[-1]:].any()
    return [bytes(out[a:b]).decode() if v else None
            for a, b, v in zip(starts[:-1], starts[1:], valid, strict=True)]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.sampled_from([0, 1, 8, 9, 1000, 20000]),
       distinct=st.sampled_from([1, 2, 7, 300, 5000]),
       null_share=st.sampled_from([0.0, 0.0, 0.01, 0.5, 1.0]),
       version=st.sampled_from(["1.0", "2.0"]),
       codec=st.sampled_from(["snappy", "zstd", "gzip", "none"]),
       page=st.sampled_from([64, 1024, 1 << 20]),
       dictionary_limit=st.sampled_from([256, 1 << 20]))
# few distinct strings that still outgrow a small dictionary limit (a fallback to PLAIN)
@example(seed=1, rows=20000, distinct=7, null_share=0.0, version="1.0", codec="snappy",
         page=64, dictionary_limit=256)
def test_string_chunks_decode_as_pyarrow_reads_them(tmp_path_factory, seed, rows, distinct,
                                                    null_share, version, codec, page,
                                                    dictionary_limit):
    """Dictionary-encoded strings: the codes index the chunk's dictionary to give pyarrow's
    strings and NULLs; a chunk whose writer fell back to PLAIN pages is left to pyarrow
    (NotNative), never read wrongly. Read as themselves, every chunk (dictionary pages,
    PLAIN pages, or both) gives pyarrow's strings."""
    from hpc.domains.sql.parquet_pages import decode_text_chunk

    rng = np.random.default_rng(seed)
    column = _strings(rng, rows, distinct, null_share)
    table = pa.table({"s": column})
    if null_share == 0.0:
        table = table.cast(pa.schema([pa.field("s", pa.string(), nullable=False)]))
    path = tmp_path_factory.mktemp("text") / "t.parquet"
    pq.write_table(table, path, data_page_version=version, compression=codec,
                   data_page_size=page, dictionary_pagesize_limit=dictionary_limit,
                   row_group_size=max(1, rows // 2) if rows else None)
    pf = pq.ParquetFile(path)
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    for group in range(pf.metadata.num_row_groups):
        meta = pf.metadata.row_group(group).column(0)
        want = pf.read_row_group(group).column("s").to_pylist()
        assert _plain_strings(data, meta, pf.schema.column(0)) == want  # however stored
        try:
            chunk = chunk_of(meta, pf.schema.column(0), text=True)
        except NotNative:
            assert not meta.has_dictionary_page
            continue
        codes = np.full(chunk.rows, -1, np.int32)
        valid = np.empty(chunk.rows if chunk.max_definition else 0, np.bool_)
        try:
            nulls, offsets, text = decode_text_chunk(data, chunk, codes, valid)
        except NotNative:
            # only where the dictionary outgrew its limit and pages fell back to PLAIN: the
            # writer falls back once its dictionary's bytes (4-byte length + UTF-8 each) reach
            # the limit, so the row group's distinct strings must hold at least that many
            dictionary_bytes = sum(4 + len(s.encode()) for s in set(want) if s is not None)
            assert dictionary_bytes >= dictionary_limit
            continue
        entries = [bytes(text[a:b]).decode() for a, b in zip(offsets[:-1], offsets[1:],
                                                                strict=True)]
        if not chunk.max_definition:
            valid = np.ones(chunk.rows, np.bool_)
        assert nulls == int((~valid).sum())
        assert (codes[~valid] == 0).all()
        assert [entries[c] if v else None for c, v in zip(codes, valid, strict=True)] == want


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.sampled_from([1, 50, 3000, 20000]),
       distinct=st.sampled_from([1, 3, 40, 2000]), null_share=st.sampled_from([0.0, 0.3]),
       groups=st.sampled_from([1, 4, 9]), threads=st.sampled_from([1, 2]),
       raw=st.booleans())
def test_string_scans_merge_the_row_groups_dictionaries(tmp_path_factory, seed, rows,
                                                        distinct, null_share, groups, threads,
                                                        raw):
    """A dictionary-encoded string column of several row groups, each with its own
    dictionary (its own strings, in its own order), read by ``read_parquet``: every row's
    string and NULL as pyarrow reads them, sorted or raw (``unsorted``)."""
    import numba
    from hpc.domains.sql import strings
    from hpc.domains.sql.table import _maps, read_parquet

    rng = np.random.default_rng(seed)
    # each row group draws from its own part of the pool, so the dictionaries differ
    parts = [_strings(rng, rows // groups + 1, int(rng.integers(1, distinct + 1)), null_share)
             for _ in range(groups)]
    column = pa.concat_arrays(parts)[:rows]
    path = tmp_path_factory.mktemp("scan_text") / "t.parquet"
    pq.write_table(pa.table({"s": column, "k": np.arange(rows)}), path,
                   row_group_size=rows // groups + 1)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        got = read_parquet(str(path), ["s", "k"], unsorted=["s"] if raw else ()).columns["s"]
    finally:
        numba.set_num_threads(before)
        _maps.clear()
    entries = strings.arrow(got.dictionary).to_pylist()
    valid = np.ones(rows, np.bool_) if got.valid is None else got.valid
    strings_read = [entries[c] if v else None for c, v in zip(got.values, valid, strict=True)]
    assert strings_read == column.to_pylist()
    if not raw:  # one sorted dictionary of distinct strings
        assert entries == sorted(set(entries), key=lambda e: e.encode())
