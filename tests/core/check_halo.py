"""Run under mpirun: every ghost cell after an exchange equals its global neighbour.

Owned cells are filled from one random global array (same seed on all ranks), ghosts are set to
a sentinel, and after the exchange each ghost must hold the global value at its wrapped index on
periodic axes and still hold the sentinel beyond non-periodic boundaries. Exits non-zero (via
``python -m mpi4py``) on the first mismatch, naming the case.
"""

from __future__ import annotations

import itertools
import sys

import numpy as np

import hpc
from hpc.comm import world

SENTINEL = -7.0


def expected_local(g: np.ndarray, d: hpc.CartDecomposition) -> np.ndarray:
    """The ghosted local block a correct exchange produces (vectorised reference)."""
    index, valid = [], []
    for axis, n in enumerate(d.global_shape):
        gi = d.offset[axis] - d.halo + np.arange(d.ghost_shape[axis])
        ok = (gi >= 0) & (gi < n)
        if d.periodic[axis]:
            ok[:] = True
        index.append(np.mod(gi, n))
        valid.append(ok)
    out = g[np.ix_(*index)].copy()
    mask = np.ones(out.shape, dtype=bool)
    for axis, ok in enumerate(valid):
        shape = [1] * d.ndim
        shape[axis] = -1
        mask &= ok.reshape(shape)
    out[~mask] = SENTINEL
    return out


def check(shape, periodic, halo, dtype, method, pattern, sync, dims=None) -> None:
    comm = world()
    d = hpc.CartDecomposition(shape, periodic=periodic, halo=halo, dims=dims, backend="cpu")
    rng = np.random.default_rng(abs(hash((shape, periodic))) % 2**32)
    g = rng.standard_normal(shape).astype(dtype)
    a = d.allocate(dtype, fill=SENTINEL)
    d.interior(a)[...] = g[d.local_slices]
    want = expected_local(g, d)
    with hpc.HaloExchange(d, dtype, method=method, pattern=pattern, sync=sync) as ex:
        for _ in range(2):  # the second round re-uses the persistent requests / windows
            ex.exchange(a)
            bad = np.argwhere(a != want)
            if bad.size:
                i = tuple(bad[0])
                raise AssertionError(
                    f"rank {comm.rank}: {len(bad)} wrong cells, first at local {i} "
                    f"(got {a[i]}, want {want[i]}) in case shape={shape} periodic={periodic} "
                    f"halo={halo} {np.dtype(dtype).name} {method}/{pattern}/{sync} dims={d.dims}"
                )
        # Overlapped use: start, touch only owned cells, finish.
        d.interior(a)[...] = g[d.local_slices]
        a[...] = np.where(want == SENTINEL, SENTINEL, a)
        ex.start(a)
        ex.finish()
        assert np.array_equal(a, want), f"rank {comm.rank}: start/finish differs from exchange"


def check_components(shape, periodic, halo, q, method, pattern, sync) -> None:
    comm = world()
    d = hpc.CartDecomposition(shape, periodic=periodic, halo=halo, backend="cpu")
    rng = np.random.default_rng(len(shape) * 100 + q)
    g = rng.standard_normal((q, *shape))
    a = np.full((q, *d.ghost_shape), SENTINEL)
    want = np.stack([expected_local(g[c], d) for c in range(q)])
    for c in range(q):
        d.interior(a[c])[...] = g[c][d.local_slices]
    with hpc.HaloExchange(
        d, np.float64, method=method, pattern=pattern, sync=sync, components=q
    ) as ex:
        ex.exchange(a)
    bad = np.argwhere(a != want)
    assert not bad.size, (
        f"rank {comm.rank}: {len(bad)} wrong cells (first {tuple(bad[0])}) with {q} components, "
        f"shape={shape} periodic={periodic} {method}/{pattern}/{sync} dims={d.dims}"
    )


def check_selected(shape, periodic, method, pattern, sync) -> None:
    """Lattice-Boltzmann-style selection: messages towards d carry the velocities c with
    c[a] == d[a] on d's nonzero axes. Every ghost value that a pull from an owned cell reads
    must be the global neighbour's; any other ghost value is either that or the sentinel."""
    comm = world()
    ndim = len(shape)
    vel = [c for c in itertools.product((-1, 0, 1), repeat=ndim)]
    q = len(vel)

    def select(d):
        return [i for i, c in enumerate(vel) if all(c[a] == d[a] for a in range(ndim) if d[a])]

    d = hpc.CartDecomposition(shape, periodic=periodic, halo=1, backend="cpu")
    rng = np.random.default_rng(99)
    g = rng.standard_normal((q, *shape))
    a = np.full((q, *d.ghost_shape), SENTINEL)
    for c in range(q):
        d.interior(a[c])[...] = g[c][d.local_slices]
    full = np.stack([expected_local(g[c], d) for c in range(q)])
    needed = np.zeros(full.shape, dtype=bool)
    for c, vc in enumerate(vel):
        needed[c][d.interior_slices] = True
        # ghost cells read by the pull x - c of an owned cell x
        src = tuple(slice(1 - v, 1 - v + n) for v, n in zip(vc, d.local_shape, strict=True))
        needed[c][src] = True
    with hpc.HaloExchange(
        d, np.float64, method=method, pattern=pattern, sync=sync, components=q, select=select
    ) as ex:
        ex.exchange(a)
    bad = np.argwhere((a != full) & (needed | (a != SENTINEL)))
    assert not bad.size, (
        f"rank {comm.rank}: {len(bad)} wrong (first {tuple(bad[0])}) with selection, "
        f"shape={shape} periodic={periodic} {method}/{pattern}/{sync} dims={d.dims}"
    )


def check_reverse(shape, periodic, method, sync, dims=None) -> None:
    """``reverse=True``: every owned cell x pushes a value per velocity c to x + c; after the
    exchange each owned cell y holds, for each c whose source y - c is another block's cell,
    the global value pushed from there (edges and corners travel through the sweep), and every
    value whose source is in the own block is untouched."""
    comm = world()
    ndim = len(shape)
    vel = list(itertools.product((-1, 0, 1), repeat=ndim))
    q = len(vel)

    def select(dr):
        return [i for i, c in enumerate(vel) if all(c[a] == dr[a] for a in range(ndim) if dr[a])]

    d = hpc.CartDecomposition(shape, periodic=periodic, halo=1, dims=dims, backend="cpu")
    rng = np.random.default_rng(7)
    g = rng.standard_normal((q, *shape))
    n = d.local_shape
    interior = np.zeros(d.ghost_shape, dtype=bool)
    interior[d.interior_slices] = True
    a = np.full((q, *d.ghost_shape), SENTINEL)
    for ci, c in enumerate(vel):
        pushed = np.full(d.ghost_shape, SENTINEL)
        pushed[tuple(slice(1 + v, 1 + v + m) for v, m in zip(c, n, strict=True))] = g[ci][
            d.local_slices
        ]
        a[ci][~interior] = pushed[~interior]
    with hpc.HaloExchange(
        d, np.float64, method=method, sync=sync, components=q, select=select, reverse=True
    ) as ex:
        ex.exchange(a)
    owned = np.indices(n)  # local owned index, 0-based
    for ci, c in enumerate(vel):
        got = a[ci][d.interior_slices]
        outside = np.zeros(n, dtype=bool)
        valid = np.ones(n, dtype=bool)
        src = []
        for ax in range(ndim):
            local = owned[ax] - c[ax]
            outside |= (local < 0) | (local >= n[ax])
            glob = d.offset[ax] + local
            if not d.periodic[ax]:
                valid &= (glob >= 0) & (glob < shape[ax])
            src.append(np.mod(glob, shape[ax]))
        want = g[ci][tuple(src)]
        bad = np.argwhere((outside & valid & (got != want)) | (~outside & (got != SENTINEL)))
        assert not bad.size, (
            f"rank {comm.rank}: reverse exchange, velocity {c}: {len(bad)} wrong (first "
            f"{tuple(bad[0])}), shape={shape} periodic={periodic} {method}/{sync} dims={d.dims}"
        )


def main() -> int:
    comm = world()
    rng = np.random.default_rng(2024 + comm.size)
    transports = [("p2p", "fence"), ("rma", "fence"), ("rma", "pscw")]
    count = 0
    for ndim, halo in itertools.product((1, 2, 3), (1, 2)):
        for periodic in itertools.product((False, True), repeat=ndim):
            if ndim == 3 and periodic not in ((False,) * 3, (True,) * 3, (True, False, True)):
                continue  # keep the 3-D matrix small; mixed periodicity covered by one case
            base = 4 * halo * 2  # at least 2*halo cells per rank along any axis on <= 4 ranks
            shape = tuple(int(rng.integers(base, base + 6)) for _ in range(ndim))
            shape = tuple(comm.bcast(shape, root=0))
            for dtype, (method, sync), pattern in itertools.product(
                (np.float32, np.float64), transports, ("sweep", "direct")
            ):
                check(shape, periodic, halo, dtype, method, pattern, sync)
                count += 1
    # Explicit process grids: blocks of several ranks along more than one axis.
    grids = {4: [(2, 2), (1, 4), (2, 1, 2)], 3: [(1, 3), (3, 1, 1)], 2: [(1, 2), (1, 1, 2)]}
    for dims in grids.get(comm.size, []):
        shape = (9, 10) if len(dims) == 2 else (9, 8, 11)
        for method, sync in transports:
            for pattern in ("sweep", "direct"):
                check(shape, True, 1, np.float64, method, pattern, sync, dims=dims)
                check(shape, False, 2, np.float32, method, pattern, sync, dims=dims)
                count += 2
    # Several values per cell (a leading component axis, as lattice Boltzmann populations).
    for shape, periodic in [((17,), True), ((11, 9), (True, False)), ((9, 8, 7), True)]:
        for method, sync in transports:
            for pattern in ("sweep", "direct"):
                check_components(
                    shape, periodic, 2 if len(shape) < 3 else 1, 5, method, pattern, sync
                )
                count += 1
    for shape, periodic in [((11, 9), (True, False)), ((9, 8, 7), True), ((8, 9, 7), False)]:
        for method, sync in transports:
            for pattern in ("sweep", "direct"):
                check_selected(shape, periodic, method, pattern, sync)
                count += 1
    for shape, periodic in [((11, 9), (True, False)), ((9, 8, 7), True), ((8, 9, 7), False)]:
        for method, sync in transports:
            check_reverse(shape, periodic, method, sync)
            count += 1
    for dims in grids.get(comm.size, []):
        check_reverse((9, 10) if len(dims) == 2 else (9, 8, 11), True, "p2p", "fence", dims)
        count += 1
    comm.Barrier()
    if comm.rank == 0:
        print(f"halo: {count} cases passed on {comm.size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
