"""A tour of the library, one section per layer. Run: ``make run`` or
``mpirun -n 2 python -m mpi4py examples/tour.py``.

Section 1, the core: 2-D heat diffusion on a periodic square, decomposed over the ranks, with the
halo exchange overlapped with the interior update. The decay of the sin(2 pi x) sin(2 pi y) mode
is checked against its analytic rate exp(-8 pi^2 alpha t) and against the exact decay of the
discrete scheme.

Section 2, storage: the same run checkpointed half-way, restarted from the checkpoint, and the
final field compared bitwise with the uninterrupted run; the field written to HDF5 with an XDMF
sidecar for ParaView.

Section 3, CFD: a lid-driven cavity at Re = 100 by lattice Boltzmann (D2Q9, TRT), run to its
steady state and compared with the centre-line velocities of Ghia, Ghia & Shin (1982).

Section 4, risk: a European call by Monte Carlo over the ranks against Black-Scholes, and an
arithmetic Asian with its geometric control variate; prices are bitwise the same on any rank
count for a given seed.

Section 5, SQL: TPC-H generated at a small scale factor; Q6 over the ranks against pandas on the
same Parquet file, and Q5's six-table join.

Section 6, vector search: exact and IVF-Flat k-NN over a Gaussian mixture sharded over the
ranks; IVF recall@10 rises with nprobe and is exact at nprobe = nlist.

Section 7, align: simulated 150 bp reads (3% substitutions) mapped semi-globally to 1 kb
reference windows over the ranks; the hits written collectively to one HDF5 table, and every
read found at its window and offset.
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import hpc
from hpc.comm import MPI, world


def _shifted(region: tuple[slice, ...], axis: int, by: int) -> tuple[slice, ...]:
    out = list(region)
    out[axis] = slice(region[axis].start + by, region[axis].stop + by)
    return tuple(out)


def _ftcs(u, out, region: tuple[slice, ...], r: float) -> None:
    """Explicit heat step on ``region`` (a box of the ghosted array): vectorised, no cell loop."""
    acc = -4.0 * u[region]
    for axis in range(2):
        acc = acc + u[_shifted(region, axis, -1)] + u[_shifted(region, axis, 1)]
    out[region] = u[region] + r * acc


R = 0.2  # alpha dt / dx^2; the explicit scheme is stable for r <= 1/4


def _mode(decomp: hpc.CartDecomposition, n: int) -> np.ndarray:
    """The owned part of sin(2 pi x) sin(2 pi y) on the n x n grid."""
    x = (np.arange(n) / n)[decomp.local_slices[0]]
    y = (np.arange(n) / n)[decomp.local_slices[1]]
    return np.outer(np.sin(2 * np.pi * x), np.sin(2 * np.pi * y))


class Stepper:
    """Advances a field by one explicit step, the halo exchange overlapped with the interior."""

    def __init__(self, decomp: hpc.CartDecomposition) -> None:
        lx, ly = decomp.local_shape
        self.inner = (slice(2, lx), slice(2, ly))  # cells whose stencil reads no ghost
        self.ring = [
            (slice(1, 2), slice(1, ly + 1)),
            (slice(lx, lx + 1), slice(1, ly + 1)),
            (slice(2, lx), slice(1, 2)),
            (slice(2, lx), slice(ly, ly + 1)),
        ]
        self.halo = hpc.HaloExchange(decomp, np.float64)
        self.spare = decomp.allocate()

    def __call__(self, u):
        new = self.spare
        self.halo.start(u)
        _ftcs(u, new, self.inner, R)  # overlaps with the messages in flight
        self.halo.finish()
        for box in self.ring:
            _ftcs(u, new, box, R)
        self.spare = u
        return new

    def close(self) -> None:
        self.halo.close()


def heat_section(n: int = 128, steps: int = 400, report_every: int = 100) -> bool:
    comm = world()
    decomp = hpc.CartDecomposition((n, n), periodic=True, halo=1)
    xp = decomp.backend.xp
    dx, alpha = 1.0 / n, 1.0
    dt = R * dx * dx / alpha
    mode = _mode(decomp, n)
    u = decomp.allocate()
    decomp.interior(u)[...] = xp.asarray(mode)
    mode_dev = xp.asarray(mode)
    norm = comm.allreduce(float((mode * mode).sum()), op=MPI.SUM)
    advance = Stepper(decomp)
    per_step = 1.0 - 8.0 * R * math.sin(math.pi * dx) ** 2  # exact factor of the scheme

    rows, ok = [], True
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        u = advance(u)
        if step % report_every == 0:
            amp = comm.allreduce(float((decomp.interior(u) * mode_dev).sum()), op=MPI.SUM) / norm
            t = step * dt
            exact = math.exp(-8 * math.pi**2 * alpha * t)
            discrete = per_step**step
            rows.append((step, t, amp, exact, abs(amp / exact - 1), abs(amp / discrete - 1)))
            ok &= abs(amp / exact - 1) < 2e-3 and abs(amp / discrete - 1) < 1e-10
    elapsed = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    advance.close()

    if comm.rank == 0:
        print(
            f"== 1. core: 2-D heat diffusion, {n}x{n} periodic, {comm.size} ranks "
            f"(grid {decomp.dims}), backend {decomp.backend.name}, halo exchange overlapped"
        )
        print(
            f"{'step':>6} {'time':>10} {'amplitude':>12} {'exp(-8pi^2t)':>13} "
            f"{'rel.err':>9} {'vs scheme':>9}"
        )
        for step, t, amp, exact, err, derr in rows:
            print(f"{step:6d} {t:10.3e} {amp:12.6e} {exact:13.6e} {err:9.2e} {derr:9.2e}")
        mlups = n * n * steps / elapsed / 1e6
        print(
            f"decay matches the analytic rate (O(dx^2)) and the scheme's exact factor: "
            f"{'PASS' if ok else 'FAIL'}  ({mlups:.1f} MLUP/s)"
        )
    return ok


def storage_section(out_dir: Path, n: int = 96, steps: int = 200) -> bool:
    from hpc.io import Checkpoint, read_array, write_array, write_xdmf

    comm = world()
    decomp = hpc.CartDecomposition((n, n), periodic=True, halo=1)
    u = decomp.allocate()
    decomp.interior(u)[...] = decomp.backend.xp.asarray(_mode(decomp, n))
    advance = Stepper(decomp)
    ckpt = Checkpoint(out_dir / "checkpoints", keep=2)
    for step in range(1, steps + 1):
        u = advance(u)
        if step == steps // 2:
            ckpt.save(step, {"u": u}, decomp, attrs={"r": R})
    straight = decomp.gather(u)

    state = ckpt.load()  # as a restarted job would: latest complete step, any rank count
    v = state.arrays["u"]
    for _ in range(state.step + 1, steps + 1):
        v = advance(v)
    restarted = decomp.gather(v)
    advance.close()

    fields = out_dir / "heat.h5"
    write_array(fields, "u", v, decomp, attrs={"step": steps})
    back = decomp.gather(read_array(fields, "u", decomp))
    ok = True
    if comm.rank == 0:
        xmf = write_xdmf(fields, ["u"], spacing=(1 / n, 1 / n))
        same = straight.tobytes() == restarted.tobytes()
        stored = back.tobytes() == restarted.tobytes()
        ok = same and stored
        print(
            f"\n== 2. storage: checkpoint at step {state.step} of {steps} "
            f"(written on {state.meta['nranks']} ranks), restart, continue"
        )
        print(f"restarted run equals the uninterrupted run bitwise: {same}")
        print(
            f"field written to {fields.name} and read back bitwise: {stored}; ParaView: {xmf.name}"
        )
        print(f"storage: {'PASS' if ok else 'FAIL'}")
    return bool(comm.bcast(ok, root=0))


def cfd_section(n: int = 48) -> bool:
    from hpc.domains.cfd import LidDrivenCavity
    from hpc.domains.cfd.ghia import ghia_deviation

    comm = world()
    cavity = LidDrivenCavity(n, re=100, u_lid=0.1)
    info = cavity.run(200_000, check_every=1000, tol=1e-7)
    lines = cavity.centerlines()
    ok = True
    if comm.rank == 0:
        du, dv = ghia_deviation(100, *lines)
        ok = du <= 0.02 and dv <= 0.02
        print(
            f"\n== 3. cfd: lid-driven cavity Re=100, {n}x{n}, D2Q9 TRT, grid {cavity.decomp.dims}"
        )
        print(
            f"steady after {info['steps']} steps (residual {info['residual']:.1e}), "
            f"{info['mlups']:.1f} MLUPS"
        )
        print(f"max |u - u_Ghia| = {du:.4f}, max |v - v_Ghia| = {dv:.4f} (lid units; target 0.02)")
        print(f"cfd: {'PASS' if ok else 'FAIL'}")
    cavity.solver.close()
    return bool(comm.bcast(ok, root=0))


def risk_section(paths: int = 400_000) -> bool:
    from hpc.domains.risk import GBM, AsianArithmetic, European, black_scholes, price

    comm = world()
    model = GBM(spot=100.0, vol=0.2, rate=0.03, dividend=0.01)
    call = European(100.0, 1.0, "call")
    r = price(model, call, paths=paths, seed=1, control_variate=False, executor="mpi")
    exact = black_scholes(model, call)
    asian = price(
        model, AsianArithmetic(100.0, 1.0, "call", 52), paths=paths, seed=1, executor="mpi"
    )
    ok = abs(r.price - exact) <= 4 * r.stderr
    if comm.rank == 0:
        print(f"\n== 4. risk: Monte Carlo on {comm.size} rank(s), {r.paths:,} paths")
        print(f"European call {r.price:.4f} +- {r.stderr:.4f}, Black-Scholes {exact:.4f}")
        print(
            f"arithmetic Asian (52 fixings, geometric control) {asian.price:.5f} "
            f"+- {asian.stderr:.5f}; the same digits on any rank count for seed 1"
        )
        print(f"risk: {'PASS' if ok else 'FAIL'}")
    return bool(comm.bcast(ok, root=0))


def sql_section(out_dir: Path, sf: float = 0.01) -> bool:
    import pyarrow.parquet as pq
    from hpc.domains.sql import Catalog, query
    from hpc.domains.sql.tpch import QUERIES, generate

    comm = world()
    if comm.rank == 0:
        generate(sf, out_dir / "tpch")
    comm.Barrier()
    catalog = Catalog.from_directory(out_dir / "tpch")
    q6 = query(QUERIES[6], catalog)  # scan, filter, sum: split over the ranks
    q5 = query(QUERIES[5], catalog)  # six tables joined (shuffled or broadcast), grouped
    ok = True
    if comm.rank == 0:
        li = pq.read_table(out_dir / "tpch" / "lineitem.parquet").to_pandas()
        d = li["l_shipdate"].astype("datetime64[s]")
        disc = li["l_discount"].astype(float)
        keep = (d >= "1994-01-01") & (d < "1995-01-01") & (disc >= 0.05) & (disc <= 0.07) & (
            li["l_quantity"].astype(float) < 24
        )
        expected = float((li["l_extendedprice"].astype(float) * disc)[keep].sum())
        got = float(q6.to_pandas()["revenue"][0])
        ok = abs(got - expected) <= 1e-9 * abs(expected)
        print(f"\n== 5. sql: TPC-H SF {sf:g} on {comm.size} rank(s)")
        print(f"Q6 revenue {got:,.2f} (pandas over the same file: {expected:,.2f})")
        print("Q5 revenue by nation:", ", ".join(
            f"{n} {v:,.0f}" for n, v in q5.to_pandas().itertuples(index=False)))
        print(f"sql: {'PASS' if ok else 'FAIL'}")
    return bool(comm.bcast(ok, root=0))


def vector_section(n: int = 20_000, nq: int = 200) -> bool:
    from hpc.domains.vector import FlatIndex, IVFFlatIndex, ShardedIndex
    from hpc.domains.vector.datasets import mixture_rows, query_rows, recall_at_k

    from hpc.decomposition import chunk

    comm = world()
    kw = dict(dim=64, clusters=50, intrinsic_dim=16, seed=3)
    lo, hi = chunk(n, comm.size, comm.rank)
    xb = mixture_rows(lo, hi - lo, **kw)  # each rank makes only its own rows
    xq = query_rows(0, nq, **kw)
    exact = ShardedIndex(FlatIndex(64), comm)
    exact.add(xb)
    _, truth = exact.search(xq, 10)
    ivf = ShardedIndex(IVFFlatIndex(64, nlist=64), comm)
    ivf.train(xb)
    ivf.add(xb)
    recalls = {p: recall_at_k(ivf.search(xq, 10, nprobe=p)[1], truth) for p in (1, 4, 16, 64)}
    values = list(recalls.values())
    ok = values == sorted(values) and values[-1] == 1.0
    if comm.rank == 0:
        print(f"\n== 6. vector: k-NN over {n:,} vectors sharded on {comm.size} rank(s)")
        print("IVF-Flat recall@10 by nprobe: "
              + ", ".join(f"{p}: {r:.3f}" for p, r in recalls.items())
              + " (exact at nprobe = nlist)")
        print(f"vector: {'PASS' if ok else 'FAIL'}")
    return bool(comm.bcast(ok, root=0))


def align_section(out_dir: Path, reads: int = 64) -> bool:
    from hpc.domains.align import Scoring, search, write_hits
    from hpc.io import read_table

    comm = world()
    rng = np.random.default_rng(8)  # the same windows and reads on every rank
    bases = np.array(list("ACGT"))
    windows = ["".join(bases[rng.integers(0, 4, 1000)]) for _ in range(5)]
    origin = rng.integers(0, len(windows), reads)
    start = rng.integers(0, 850, reads)
    seqs = []
    for w, s in zip(origin, start, strict=True):
        read = np.array(list(windows[w][s : s + 150]))
        flip = rng.random(150) < 0.03  # 3% substitutions
        read[flip] = bases[rng.integers(0, 4, int(flip.sum()))]
        seqs.append("".join(read))
    scoring = Scoring("DNA:2:-4", gap_open=4, gap_extend=2, convention="blast")
    rows = search(seqs, windows, scoring, "semi-global", top=1, executor="mpi")
    path = out_dir / "reads.h5"
    write_hits(path, rows, comm=comm)  # collective: one table from all ranks
    hits = read_table(path, "hits", comm=comm)  # this rank's block of rows
    q = hits["query_index"]
    mine = np.array_equal(hits["target_index"], origin[q]) and bool(
        np.all(np.abs(hits["target_start"] - start[q]) <= 2)
    )
    ok = comm.allreduce(bool(mine), op=MPI.LAND)
    if comm.rank == 0:
        print(f"\n== 7. align: {reads} reads x {len(windows)} windows of 1 kb, semi-global, "
              f"on {comm.size} rank(s)")
        print(f"hits written collectively to {path.name}:hits; every read found its window")
        print(f"align: {'PASS' if ok else 'FAIL'}")
    return bool(ok)

def main() -> int:
    comm = world()
    ok = heat_section()
    out = Path(comm.bcast(tempfile.mkdtemp(prefix="hpc-tour-") if comm.rank == 0 else None))
    try:
        ok &= storage_section(out)
        ok &= cfd_section()
        ok &= risk_section()
        ok &= sql_section(out)
        ok &= vector_section()
        ok &= align_section(out)
    finally:
        comm.Barrier()
        if comm.rank == 0:
            shutil.rmtree(out, ignore_errors=True)
    return 0 if comm.allreduce(ok, op=MPI.LAND) else 1


if __name__ == "__main__":
    sys.exit(main())
