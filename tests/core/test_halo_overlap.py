"""Self-copies overlapped with a remote phase (p2p, :meth:`hpc.HaloExchange._early_posts`): on
two ranks, ghosts equal ``np.pad`` of the global array (wrap on periodic axes, the sentinel beyond
the others) bit for bit, and with ``select`` the whole array equals the exchange run in the
plain phase order. Owned blocks as thin as the halo (the sent layers overlap) and as wide as
several halos, 2-D and 3-D, one and two components, p2p, rma with fence and with pscw.

Run by pytest (which launches this file under ``mpirun -n 2``, about 10 s).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

SENTINEL = -9.0


def _padded(g: np.ndarray, halo: int, periodic: tuple[bool, ...]) -> np.ndarray:
    """``g`` (components first) padded along each spatial axis: wrapped or the sentinel."""
    out = g
    for axis, wrap in enumerate(periodic, start=1):
        width = [(0, 0)] * g.ndim
        width[axis] = (halo, halo)
        if wrap:
            out = np.pad(out, width, mode="wrap")
        else:
            out = np.pad(out, width, mode="constant", constant_values=SENTINEL)
    return out


# (global shape, periodic, halo, dims or None, components, select)
CASES = [
    ((10, 7, 9), (True, True, True), 1, None, 1, False),
    ((8, 6, 7), (True, True, True), 2, None, 1, False),  # owned 4 = 2 x halo along axis 0
    ((6, 7, 8), (True, True, True), 3, None, 1, False),  # owned 3 = halo: sent layers coincide
    ((14, 9, 8), (True, True, True), 3, None, 2, False),
    ((12, 7, 6), (False, True, True), 2, None, 1, False),  # one side of each rank has no peer
    ((9, 12, 7), (True, True, True), 2, (1, 2, 1), 1, False),  # remote axis 1, axis 0 after
    ((7, 8, 12), (True, True, True), 1, (1, 1, 2), 1, False),  # remote first: nothing early
    ((12, 9), (True, True), 2, None, 2, False),
    ((10, 8, 7), (True, True, True), 2, None, 3, True),
    ((16, 11), (True, False), 1, None, 3, True),
]


def _select(direction: tuple[int, ...]) -> list[int]:
    # a component set that depends on the direction, as lattice populations crossing a face
    return [c for c in range(3) if (c + sum((i + 1) * s for i, s in enumerate(direction))) % 2]


def _wrap_before_split(d) -> bool:  # type: ignore[no-untyped-def]
    """Whether a sweep (last axis first) has a phase with messages right after a phase of
    copies only (an exchanged axis wrapped onto the rank)."""
    on = [i for i in range(d.ndim) if d.dims[i] > 1 or d.periodic[i]]
    return any(d.dims[i] > 1 and d.dims[j] == 1 for i, j in zip(on[:-1], on[1:], strict=True))


def _check(comm) -> int:  # type: ignore[no-untyped-def]
    import hpc

    done = 0
    for shape, periodic, halo, dims, q, selective in CASES:
        for method, sync in (("p2p", "fence"), ("rma", "fence"), ("rma", "pscw")):
            d = hpc.CartDecomposition(
                shape, periodic=periodic, halo=halo, comm=comm, dims=dims, backend="cpu"
            )
            g = np.random.default_rng().standard_normal((q, *shape))
            g = comm.bcast(g, root=0)
            inner = tuple(slice(halo, halo + n) for n in d.local_shape)
            a = np.full((q, *d.ghost_shape), SENTINEL)
            a[(slice(None), *inner)] = g[(slice(None), *d.local_slices)]
            plain = a.copy()
            kw = {"select": _select} if selective else {}
            label = f"{shape} {periodic} h{halo} dims={d.dims} q={q} {method}/{sync}"
            with (
                hpc.HaloExchange(d, np.float64, method=method, sync=sync, components=q, **kw) as ex,
                hpc.HaloExchange(
                    d, np.float64, method=method, sync=sync, components=q, **kw
                ) as ref,
            ):
                ref._early = {}  # the plain phase order
                early = bool(ex._early)
                arr = a if q > 1 else a[0]
                arr_ref = plain if q > 1 else plain[0]
                for _ in range(2):  # the second round re-uses bound requests and windows
                    ex.exchange(arr)
                    ref.exchange(arr_ref)
                    assert np.array_equal(a, plain), f"rank {comm.rank}: {label} != plain order"
            # p2p takes the early path where a split axis's phase follows a self-wrapped one
            assert early == (method == "p2p" and _wrap_before_split(d)), label
            if not selective:
                want = _padded(g, halo, tuple(d.periodic))
                box = tuple(slice(o, o + n) for o, n in zip(d.offset, d.ghost_shape, strict=True))
                bad = np.argwhere(a != want[(slice(None), *box)])
                assert not bad.size, f"rank {comm.rank}: {label}: {len(bad)} wrong cells"
            done += 1
    return done


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_two_ranks_overlapped_self_copies_match_np_pad_and_the_plain_order():
    from tests.conftest import run_mpi

    proc = run_mpi(2, [__file__], timeout=120)
    assert "overlap cases passed on 2 ranks" in proc.stdout, proc.stdout + proc.stderr


if __name__ == "__main__":
    from hpc.comm import world

    comm = world()
    n = _check(comm)
    if comm.rank == 0:
        print(f"{n} overlap cases passed on {comm.size} ranks")
    sys.exit(0)
