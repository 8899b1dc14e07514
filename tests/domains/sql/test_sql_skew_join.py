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
    """From a sample of both sides: a value heavy where hashing would load its rank with
    half a fair share more (``share * (ranks - 1) >= 0.5``), the heaviest first while the
    other side's rows of them fit the limit; NULL keys are not values but heavy alike; an
    inner join keeps the side whose heavy rows are more."""
    from hpc.domains.sql.physical.skew_join import choose_heavy

    def sample(values: list[int], null: list[bool], side: int, weight: float) -> np.ndarray:
        w = np.full(len(values), weight).view(np.int64)
        return np.stack([np.asarray(values, np.int64), w, np.asarray(null, np.int64),
                         np.full(len(values), side)], axis=1)

    # left: 100 rows standing for 10 each: value 7 in 55, 8 in 30, NULL in 10, others 5
    left = sample([7] * 55 + [8] * 30 + [0] * 10 + list(range(100, 105)),
                  [False] * 85 + [True] * 10 + [False] * 5, 0, 10.0)
    # right: value 7 in 3 rows (30 rows in all), 8 in 40 (400), others
    right = sample([7] * 3 + [8] * 40 + list(range(200, 257)), [False] * 100, 1, 10.0)
    every = np.concatenate([left, right])
    side, heavy, null_heavy = choose_heavy(every, 2, None, limit=100)
    assert (side, heavy.tolist(), null_heavy) == (0, [7], False)  # 8: 0.3 < 0.5 on 2 ranks
    side, heavy, null_heavy = choose_heavy(every, 3, None, limit=100)
    assert (side, heavy.tolist(), null_heavy) == (0, [7], False)  # 8's 400 copies: too many
    side, heavy, _ = choose_heavy(every, 3, None, limit=1000)
    assert (side, heavy.tolist()) == (0, [7, 8])  # 0.55 and 0.3: both heavy on 3 ranks
    side, heavy, null_heavy = choose_heavy(every, 6, None, limit=10)
    assert (side, heavy.tolist(), null_heavy) == (0, [], True)  # 7's 30 copies > 10; NULLs
    # the right side made to stay: 8 is 0.4 of it, heavy from 3 ranks, its 300 copies fit
    side, heavy, _ = choose_heavy(every, 3, 1, limit=300)
    assert (side, heavy.tolist()) == (1, [8])
    assert choose_heavy(every, 1, None, limit=10**9)[1].size == 0  # one rank: never
