"""Halo exchange under mpirun on 1-4 ranks (oversubscribed), and its checks on one rank."""

from __future__ import annotations

import numpy as np
import pytest

import hpc
from tests.conftest import mpi_script, run_mpi


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_every_ghost_cell_equals_its_global_neighbour(nranks):
    proc = run_mpi(nranks, [str(mpi_script("check_halo.py"))], timeout=240)
    assert f"cases passed on {nranks} ranks" in proc.stdout


def test_exchange_rejects_arrays_that_do_not_fit():
    d = hpc.CartDecomposition((8, 8), periodic=True, halo=1)
    ex = hpc.HaloExchange(d, np.float64)
    with pytest.raises(ValueError, match="does not match the local block"):
        ex.exchange(np.zeros((8, 8)))
    with pytest.raises(ValueError, match="dtype float32"):
        ex.exchange(np.zeros((10, 10), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        ex.exchange(np.zeros((10, 10)).T)
    a = d.allocate()
    ex.start(a)
    with pytest.raises(RuntimeError, match="before finish"):
        ex.start(a)
    ex.finish()
    with pytest.raises(RuntimeError, match="without start"):
        ex.finish()
    ex.close()


def test_halo_wider_than_a_block_is_refused():
    d = hpc.CartDecomposition((3, 8), periodic=True, halo=4)
    with pytest.raises(ValueError, match="halo width 4 exceeds"):
        hpc.HaloExchange(d, np.float64)


def test_bad_method_names():
    d = hpc.CartDecomposition((8,), periodic=True)
    for kwargs, name in [
        ({"method": "shm"}, "method"),
        ({"pattern": "x"}, "pattern"),
        ({"sync": "lock"}, "sync"),
    ]:
        with pytest.raises(ValueError, match=name):
            hpc.HaloExchange(d, np.float64, **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["p2p", "rma"])
def test_device_arrays_exchange_with_periodic_wrap(method):
    from tests.core.check_halo import SENTINEL, expected_local

    d = hpc.CartDecomposition((12, 9, 7), periodic=True, halo=1, backend="gpu")
    g = np.random.default_rng(5).standard_normal(d.global_shape)
    a = d.allocate(np.float64, fill=SENTINEL)
    d.interior(a)[...] = d.backend.asarray(g[d.local_slices])
    with hpc.HaloExchange(d, np.float64, method=method) as ex:
        ex.exchange(a)
    assert np.array_equal(hpc.backend.to_host(a), expected_local(g, d))
