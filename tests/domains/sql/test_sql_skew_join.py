"""Joins whose keys are skewed, both sides hashed over 2 and 3 ranks: heavy key values' rows
stay where they are, the other side's rows of them go to every rank, NULL keys stay or drop;
every answer equals DuckDB's on fresh random tables and the staying side's rows end up
spread evenly (the job: check_sql_skew_join.py; its seed is in a failure's output), on the
host and on strict stand-ins for device arrays."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")
pytest.importorskip("sqlglot")

from tests.conftest import mpi_script, run_mpi  # noqa: E402


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_skewed_joins_keep_heavy_keys_in_place_and_equal_duckdb(tmp_path, nranks):
    seed = int(np.random.default_rng().integers(0, 2**31))
    proc = run_mpi(nranks, [str(mpi_script("check_sql_skew_join.py")), str(tmp_path),
                            str(seed)], timeout=240)
    assert f"agree on {nranks} ranks (seed {seed})" in proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(400)
def test_skewed_joins_on_strict_device_arrays_under_the_cuda_simulator(tmp_path):
    """The same exchanges with the GPU backend's code on strict stand-ins for CuPy arrays
    (hashes, masks and row picks stay on the device), three joins on 2 ranks."""
    seed = int(np.random.default_rng().integers(0, 2**31))
    proc = run_mpi(2, [str(mpi_script("check_sql_skew_join.py")), str(tmp_path), str(seed),
                       "strict"], timeout=380, env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert f"agree on 2 ranks (seed {seed})" in proc.stdout


def test_heavy_values_are_chosen_from_the_sample():
    """One rank: a value with at least half a rank's fair share is heavy, the heaviest
    first while the other side's rows of them fit the limit; NULL keys are not values;
    an inner join keeps the side whose heavy rows are more."""
    from hpc.domains.sql.physical.skew_join import heavy_hashes

    class One:  # a communicator of one rank, as the core's collectives accept it
        def Get_size(self) -> int:  # noqa: N802
            return 1

        def Get_rank(self) -> int:  # noqa: N802
            return 0

    rng = np.random.default_rng(0)
    n = 4000
    left = rng.integers(10, 10**6, n).astype(np.uint64)
    left[: n // 2] = 7  # half the rows: heavy at one rank (share 0.5 >= 0.5)
    left[n // 2: n // 2 + n // 5] = 8  # a fifth: not heavy
    right = rng.integers(10, 10**6, n).astype(np.uint64)
    right[:30] = 7
    nulls = np.zeros(n, bool)
    nulls[-n // 4:] = True  # NULL keys: never heavy themselves
    left[-n // 4:] = 9
    side, heavy, null_seen = heavy_hashes([left, right], [nulls, None], [n, n], None, One(),
                                          limit=100)
    assert side == 0 and heavy.tolist() == [7] and null_seen
    # the other side's rows of 7 (30, sampled) over the limit: nothing kept
    side, heavy, null_seen = heavy_hashes([left, right], [None, None], [n, n], 0, One(),
                                          limit=10)
    assert side == 0 and heavy.size == 0 and not null_seen  # (9 now a value: a quarter)
    # the right side staying: no value of it is heavy
    side, heavy, _ = heavy_hashes([left, right], [None, None], [n, n], 1, One(), limit=100)
    assert side == 1 and heavy.size == 0
