"""Short rows of the CPU kernel (issue 28): a row runs whole vectors, then its remainder as one
masked vector; every remainder length must give the bitwise same cells, and the step the same
update as an independent NumPy lattice Boltzmann step."""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.cfd.lattice import D2Q9, D3Q19
from hpc.domains.cfd.solver import LBMSolver

from hpc.decomposition import CartDecomposition

TAU = 0.6

# Block shapes whose rows (the last axis) are one vector and a remainder (float32: 16 lanes,
# float64: 8), and one shorter than a vector.
CASES = [
    (D3Q19, np.float32, (4, 3, 21)),
    (D2Q9, np.float64, (6, 13)),
    (D2Q9, np.float64, (5, 6)),
]
IDS = ["D3Q19-f32-rows21", "D2Q9-f64-rows13", "D2Q9-f64-rows6"]


def _random_state(lattice, shape, rng):
    """Populations near rest equilibrium, perturbed, in float64 (owned cells)."""
    w = lattice.w.reshape((-1,) + (1,) * lattice.d)
    return w * (1.0 + 0.05 * rng.standard_normal((lattice.q, *shape)))


def _reference_step(lattice, f, omega):
    """One periodic BGK step of post-collision populations ``f[q, ...]`` in float64: pull
    each population from the cell it streams from, then relax to the second-order
    equilibrium (written out here, independent of the library's helpers)."""
    c = lattice.c.astype(int)
    axes = tuple(range(lattice.d))
    p = np.stack([np.roll(f[i], tuple(c[i]), axis=axes) for i in range(lattice.q)])
    rho = p.sum(axis=0)
    u = [np.tensordot(c[:, a].astype(float), p, axes=1) / rho for a in range(lattice.d)]
    usq = sum(ua * ua for ua in u)
    out = np.empty_like(p)
    for i in range(lattice.q):
        cu = sum(c[i, a] * u[a] for a in range(lattice.d))
        feq = lattice.w[i] * rho * (1 + 3 * cu + 4.5 * cu * cu - 1.5 * usq)
        out[i] = p[i] - omega * (p[i] - feq)
    return out


@pytest.mark.parametrize(("lattice", "dtype", "shape"), CASES, ids=IDS)
@pytest.mark.parametrize("steps", [1, 2, 3])
def test_short_rows_step_like_numpy(lattice, dtype, shape, steps):
    """AA pairs and the single pull step on rows with a remainder against NumPy in float64,
    to the kernel's rounding."""
    rng = np.random.default_rng(28 + steps)
    d = CartDecomposition(shape, periodic=True, halo=1)
    solver = LBMSolver(d, lattice, TAU, dtype=dtype)
    f0 = _random_state(lattice, shape, rng).astype(dtype)
    solver.f[(slice(None), *d.interior_slices)] = f0
    solver.step(steps)
    ref = f0.astype(np.float64)
    for _ in range(steps):
        ref = _reference_step(lattice, ref, 1.0 / TAU)
    got = solver.f[(slice(None), *d.interior_slices)].astype(np.float64)
    # the kernel's rounding: 8 units in the last place of the largest population per step
    # (measured: 3.5 in float32, 2 in float64)
    tol = 8 * np.finfo(dtype).eps * np.abs(ref).max() * steps
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol)
    solver.close()


@pytest.mark.parametrize(("lattice", "dtype", "shape"), CASES[:2], ids=IDS[:2])
@pytest.mark.parametrize("pattern", ["aa-stream", "aa-local", "pull"])
def test_every_remainder_gives_the_same_cells(lattice, dtype, shape, pattern):
    """The all-fluid kernel over whole rows and over the rows cut in two at every point (so
    every remainder length, whole vectors or none, runs each cell): bitwise the same. Each
    location is read and written by one cell, so the order of the boxes does not matter."""
    rng = np.random.default_rng(7)
    d = CartDecomposition(shape, periodic=True, halo=1)
    solver = LBMSolver(d, lattice, TAU, dtype=dtype, streaming="pull")
    kernel = solver._kernels.get((pattern, False))
    if kernel is None:  # the AA kernels of the same shape
        from hpc.domains.cfd.codegen import load_kernel

        kernel = load_kernel(lattice, "bgk", False, dtype, "cpu", False, d.ghost_shape, pattern)
    f0 = _random_state(lattice, d.ghost_shape, rng).astype(dtype)
    flags = np.zeros(d.ghost_shape, dtype=np.uint8)
    scalars = (1.0 / TAU, 1.0 / TAU) + (0.0,) * (2 * lattice.d)
    box = [v for n in shape for v in (1, n + 1)]

    def run(boxes):
        f, g = f0.copy(), np.zeros_like(f0)
        for b in boxes:
            kernel(f, g, flags, *b, *scalars)
        return f, g

    whole = run([box])
    n = shape[-1]
    for cut in range(2, n + 1):
        low, high = list(box), list(box)
        low[-1], high[-2] = cut, cut
        split = run([high, low])
        assert np.array_equal(split[0], whole[0]) and np.array_equal(split[1], whole[1]), cut
    solver.close()


def _reference_forced_step(lattice, f, omega, force):
    """One periodic BGK step with Guo's forcing in float64, written out independently:
    ``u = (sum_i c_i p_i + F / 2) / rho``, ``p_i - omega (p_i - f_eq_i) + (1 - omega / 2)
    w_i (3 (c_i - u) . F + 9 (c_i . u)(c_i . F))``."""
    c = lattice.c.astype(int)
    axes = tuple(range(lattice.d))
    p = np.stack([np.roll(f[i], tuple(c[i]), axis=axes) for i in range(lattice.q)])
    rho = p.sum(axis=0)
    u = [
        (np.tensordot(c[:, a].astype(float), p, axes=1) + 0.5 * force[a]) / rho
        for a in range(lattice.d)
    ]
    usq = sum(ua * ua for ua in u)
    uf = sum(u[a] * force[a] for a in range(lattice.d))
    out = np.empty_like(p)
    for i in range(lattice.q):
        cu = sum(c[i, a] * u[a] for a in range(lattice.d))
        cf = sum(c[i, a] * force[a] for a in range(lattice.d))
        feq = lattice.w[i] * rho * (1 + 3 * cu + 4.5 * cu * cu - 1.5 * usq)
        source = (1 - 0.5 * omega) * lattice.w[i] * (3 * (cf - uf) + 9 * cu * cf)
        out[i] = p[i] - omega * (p[i] - feq) + source
    return out


@pytest.mark.parametrize(("lattice", "dtype", "shape"), CASES[:2], ids=IDS[:2])
@pytest.mark.parametrize("forcing", [False, True])
def test_wall_aware_and_branch_free_kernels_agree_bitwise(lattice, dtype, shape, forcing):
    """BGK's shared per-weight factors (``_bgk_lines``): the wall-aware kernel (scalar,
    branches) and the branch-free one (vectorised rows, masked remainder) must round every
    cell identically, since which one updates a cell depends on the block a rank owns. Both
    against NumPy with Guo's forcing, to the kernel's rounding."""
    from hpc.domains.cfd.codegen import load_kernel

    rng = np.random.default_rng()
    ghost = tuple(n + 2 for n in shape)
    f0 = _random_state(lattice, shape, rng)
    f = np.zeros((lattice.q, *ghost))
    f[(slice(None), *[slice(1, n + 1) for n in shape])] = f0
    for a in range(lattice.d):  # periodic ghosts, axis by axis (edges and corners too)
        f = np.concatenate(
            [np.take(f, [-2], axis=a + 1), np.take(f, range(1, f.shape[a + 1] - 1), axis=a + 1),
             np.take(f, [1], axis=a + 1)], axis=a + 1,
        )  # fmt: skip
    f = f.astype(dtype)
    force = tuple(rng.uniform(-1e-3, 1e-3, lattice.d)) if forcing else (0.0,) * lattice.d
    omega = 1.0 / rng.uniform(0.52, 1.5)
    flags = np.zeros(ghost, dtype=np.uint8)
    box = [v for n in shape for v in (1, n + 1)]
    outs = []
    for walls in (True, False):
        kernel = load_kernel(lattice, "bgk", forcing, dtype, "cpu", walls, ghost)
        g = np.zeros_like(f)
        kernel(f, g, flags, *box, omega, omega, *force, *(0.0,) * lattice.d)
        outs.append(g)
    assert np.array_equal(outs[0], outs[1])
    ref = _reference_forced_step(lattice, f0.astype(dtype).astype(np.float64), omega, force)
    got = outs[0][(slice(None), *[slice(1, n + 1) for n in shape])].astype(np.float64)
    tol = 8 * np.finfo(dtype).eps * np.abs(ref).max()
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol)
