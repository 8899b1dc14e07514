"""RMA halo exchange over many consecutive exchanges with fresh data each time.

With ``sync="fence"`` the receive window holds two buffers used in turn (one fence an
exchange): a neighbour's puts of exchange k+1 must never land in the buffer a rank is still
unpacking from exchange k. Every round here writes new random owned cells (on two arrays in
turn, so bindings alternate too), ranks are delayed at random between and inside exchanges,
and every ghost is compared with the global array it was cut from (``expected_local``, a
vectorised independent reference). This file is also the job script ``mpirun`` runs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

import hpc
from hpc.comm import world
from tests.conftest import run_mpi
from tests.core.check_halo import SENTINEL, expected_local


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [2, 3])
def test_consecutive_rma_exchanges_never_mix_rounds(nranks):
    proc = run_mpi(nranks, [str(Path(__file__))], timeout=180)
    assert f"rma rounds passed on {nranks} ranks" in proc.stdout


def _rounds(shape, periodic, halo, method, sync, pattern, rounds=9) -> None:
    comm = world()
    d = hpc.CartDecomposition(shape, periodic=periodic, halo=halo, backend="cpu")
    seed = comm.bcast(int(np.random.SeedSequence().entropy % 2**32), root=0)
    rng = np.random.default_rng(seed)  # the same global arrays on every rank
    nap = np.random.default_rng(seed + 1 + comm.rank)  # delays differ between ranks
    arrays = [d.allocate(np.float64, fill=SENTINEL) for _ in range(2)]
    with hpc.HaloExchange(d, np.float64, method=method, pattern=pattern, sync=sync) as ex:
        for k in range(rounds):
            g = rng.standard_normal(shape)
            a = arrays[k % 2]
            d.interior(a)[...] = g[d.local_slices]
            if nap.random() < 0.5:
                time.sleep(nap.random() * 0.004)  # one rank late into the exchange
            ex.start(a)
            if nap.random() < 0.5:
                time.sleep(nap.random() * 0.004)  # or late out of it
            ex.finish()
            bad = np.argwhere(a != expected_local(g, d))
            if bad.size:
                raise AssertionError(
                    f"rank {comm.rank}: round {k}: {len(bad)} wrong cells, first at local "
                    f"{tuple(bad[0])}: shape={shape} periodic={periodic} halo={halo} "
                    f"{method}/{sync}/{pattern} dims={d.dims}"
                )


def main() -> int:
    comm = world()
    count = 0
    cases = [((23, 17), True, 1), ((19, 14), (True, False), 2), ((11, 10, 9), True, 1)]
    for shape, periodic, halo in cases:
        for method, sync in [("rma", "fence"), ("rma", "pscw"), ("p2p", "fence")]:
            for pattern in ("sweep", "direct"):
                _rounds(shape, periodic, halo, method, sync, pattern)
                count += 1
    comm.Barrier()
    if comm.rank == 0:
        print(f"rma rounds passed on {comm.size} ranks ({count} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
