"""hpc.shuffle: the all-to-all of column arrays, on 1 to 4 ranks."""

from __future__ import annotations

import numpy as np
import pytest

from hpc.shuffle import hash_partition
from tests.conftest import mpi_script, run_mpi


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_shuffle_delivers_every_row_once_in_order(nranks):
    proc = run_mpi(nranks, [str(mpi_script("check_shuffle.py"))], timeout=240)
    assert f"on {nranks} ranks" in proc.stdout


def test_hash_partition_is_balanced_and_deterministic():
    keys = np.arange(1_000_000)
    parts = hash_partition(keys, 7)
    counts = np.bincount(parts, minlength=7)
    assert counts.min() > 0.97 * len(keys) / 7 and counts.max() < 1.03 * len(keys) / 7
    assert np.array_equal(parts, hash_partition(keys.copy(), 7))
    assert parts.min() >= 0 and parts.max() < 7
