"""Raw string columns through hash and gather exchanges as their rows' bytes: answers equal
DuckDB's on 2 and 3 ranks (the job: check_sql_raw_exchange.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")
pytest.importorskip("sqlglot")

from tests.conftest import mpi_script, run_mpi  # noqa: E402


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_raw_strings_cross_hash_and_gather_exchanges_as_bytes(tmp_path, nranks):
    """Carried strings, GROUP BY keys, MIN/MAX/COUNT(DISTINCT) arguments and equi-join keys
    stay raw through the exchanges (checked on what each exchange returns), the plans hash
    raw columns, and every answer equals DuckDB's."""
    proc = run_mpi(nranks, [str(mpi_script("check_sql_raw_exchange.py")), str(tmp_path)],
                   timeout=240)
    assert f"agree on {nranks} ranks" in proc.stdout


def test_string_keys_hash_alike_raw_or_sorted():
    """A row's hash (which names its rank) depends on its string's bytes alone: raw entries
    with repeats, hashed entry by entry or row by row, and a sorted dictionary agree; NULLs
    agree whatever their codes."""
    import numpy as np
    import pyarrow as pa
    from hpc.domains.sql import strings
    from hpc.domains.sql.physical.exchange import key_hash
    from hpc.domains.sql.table import Column, settle

    rng = np.random.default_rng(5)
    pool = ["", "a", "é", "日本", "ab" * 30, "a\x00b", "z"]
    entries = pa.array([pool[i] for i in rng.integers(0, len(pool), 400)])
    for n in (50, 4000):  # fewer rows than entries (rows hashed), more (entries hashed)
        codes = rng.integers(0, len(entries), n).astype(np.int32)
        valid = rng.random(n) < 0.8
        raw = Column(codes, "string", strings.Entries(entries), valid)
        sorted_ = settle(raw)
        assert not sorted_.raw
        scrambled = Column(np.where(valid, codes, 10**6).astype(np.int32), "string",
                           strings.Entries(entries), valid)
        want = key_hash([sorted_])
        assert np.array_equal(key_hash([raw]), want)
        assert np.array_equal(key_hash([scrambled]), want)
        # and equal hashes exactly where the strings (or NULLs) are equal: one to one
        text = ["\0null" if not v else w for v, w in
                zip(valid, entries.take(pa.array(codes)).to_pylist(), strict=True)]
        pairs = set(zip(text, want.tolist(), strict=True))
        assert len(pairs) == len(set(text)) == len(set(want.tolist()))
