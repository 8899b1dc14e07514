"""hpc.run: every executor returns the same rows in block order; errors are reported."""

from __future__ import annotations

import numpy as np
import pytest

from hpc.run import exact_sum, map_blocks
from tests.conftest import mpi_script, run_mpi


def _rows(first, count):
    b = np.arange(first, first + count, dtype=float)
    return np.stack([b, np.sin(b) * 1e16, 1.0 / (b + 1)], axis=1)


@pytest.mark.parametrize("batch", [None, 1, 4, 100])
def test_local_rows_are_in_block_order_for_any_batch(batch):
    rows = map_blocks(_rows, 37, 3, executor="local", batch=batch)
    assert rows.tobytes() == _rows(0, 37).tobytes()


def test_exact_sum_does_not_depend_on_the_order():
    rows = _rows(0, 1000)
    rng = np.random.default_rng()
    shuffled = rows[rng.permutation(len(rows))]
    assert exact_sum(rows).tobytes() == exact_sum(shuffled).tobytes()
    assert exact_sum(rows)[0] == 999 * 1000 / 2


def test_a_wrong_shape_names_the_blocks():
    with pytest.raises(ValueError, match=r"blocks 0\.\.4; expected \(5, 2\)"):
        map_blocks(lambda f, c: np.zeros((c, 3)), 5, 2, executor="local")
    with pytest.raises(ValueError, match="executor"):
        map_blocks(_rows, 5, 3, executor="threads")


def test_dask_returns_the_same_rows():
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        rows = map_blocks(_rows, 23, 3, executor="dask", scheduler=client, batch=4)
    assert rows.tobytes() == _rows(0, 23).tobytes()


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_mpi_rows_and_a_failing_rank(nranks):
    proc = run_mpi(nranks, [str(mpi_script("check_run.py"))], timeout=120)
    assert "map_blocks" in proc.stdout
