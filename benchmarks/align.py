"""Alignment throughput (GCUPS) against parasail's striped SIMD kernels, same pairs, same run.

Two cases. Protein: score-only local alignment (BLOSUM62, BLAST gaps 11/1, i.e. parasail open
12 extend 1) of every query against every target (default 100 x 100 = 10^4 pairs, lengths
uniform in 100-500); parasail's ``sw_striped_profile_16`` with one profile per query. DNA:
semi-global alignment of 150 bp reads (substitutions and indels) against the 1 kb windows they
were drawn from (match 2, mismatch -4, BLAST gaps 4/2); parasail's ``sg_dx_striped_16``, which
frees the target's (parasail's s2, "database") leading and trailing gaps as ours does. Scores
are checked equal. Each is timed on one core (numba with one thread, parasail in a loop) and on
all cores (numba's threads; parasail on a thread pool: its ctypes calls release the GIL).
Queries or pairs are split over MPI ranks; the slowest rank's time counts.

On the GPU backend each case also has ``limits``: its int32 operations per second (cells x
:data:`INT32_OPS_PER_CELL`, the add, subtract and max operations of one cell update) as a
fraction of the device's int32 add/max rate measured in the same run (:mod:`.device_peak`).

``--sweep`` adds the workload space (STYLE 28: one point hides the shapes where we lose):
``score_pairs`` on {1, 8, 64, 10^3, 10^4} pairs x lengths {50, 300, 1500, 6000}, protein
local (BLOSUM62, BLAST 11/1, unrelated pairs) and DNA semi-global (2/-4, BLAST 4/2, each
query a mutated copy of its target), on one core against the faster of parasail's 16-bit
striped and scan kernels for the mode. Points under ``--sweep-min-cells`` (10^7) report the
time per call in microseconds instead of GCUPS (the per-call overhead); the record gets
``sweep`` (every point) and ``worst`` (the point of lowest ratio, with its parameters).
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from hpc.comm import world
from hpc.decomposition import chunk

from .timing import time_interleaved

__all__ = ["add_arguments", "run"]

AMINO = np.frombuffer(b"ARNDCQEGHILKMFPSTWYV", dtype=np.uint8)
BASES = np.frombuffer(b"ACGT", dtype=np.uint8)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench align``."""
    p.add_argument("--queries", type=int, default=100, help="protein queries (100)")
    p.add_argument("--targets", type=int, default=100, help="protein targets (100)")
    p.add_argument("--min-length", type=int, default=100, help="protein lengths from (100)")
    p.add_argument("--max-length", type=int, default=500, help="protein lengths to (500)")
    p.add_argument("--reads", type=int, default=2000, help="DNA reads, one window each (2000)")
    p.add_argument("--read-length", type=int, default=150)
    p.add_argument("--window", type=int, default=1000)
    p.add_argument("--reps", type=int, default=3, help="timed repetitions (median)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")
    p.add_argument(
        "--sweep",
        action="store_true",
        help="also sweep pair counts x lengths on one core against parasail (up to 30 min)",
    )
    p.add_argument("--sweep-pairs", default="1,8,64,1000,10000", help="pair counts of --sweep")
    p.add_argument("--sweep-lengths", default="50,300,1500,6000", help="lengths of --sweep")
    p.add_argument("--sweep-cases", default="protein,dna", help="cases of --sweep (protein, dna)")
    p.add_argument(
        "--sweep-min-cells",
        type=float,
        default=1e7,
        help="points with fewer cells report microseconds per call, not GCUPS (1e7)",
    )


def _random(rng: np.random.Generator, letters: np.ndarray, n: int) -> str:
    return letters[rng.integers(0, letters.size, n)].tobytes().decode()


def _mutate(rng: np.random.Generator, seq: str, rate: float) -> str:
    out = []
    for c in seq:  # benchmark input generation only
        r = rng.random()
        if r < rate * 0.6:
            out.append("ACGT"[rng.integers(4)])
        elif r < rate * 0.8:
            continue
        elif r < rate:
            out.append(c + "ACGT"[rng.integers(4)])
        else:
            out.append(c)
    return "".join(out)


def _threads(n: int) -> None:
    import numba

    numba.set_num_threads(n)


def _parasail() -> Any:
    try:
        import parasail
    except ImportError:
        return None
    return parasail


def _case_protein(args: argparse.Namespace, gpu: bool) -> dict[str, Any]:
    from hpc.domains.align import Scoring, score_many, score_pairs

    parasail = _parasail()

    comm = world()
    rng = np.random.default_rng(args.seed)
    qs = [_random(rng, AMINO, int(rng.integers(args.min_length, args.max_length + 1)))
          for _ in range(args.queries)]  # fmt: skip
    ts = [_random(rng, AMINO, int(rng.integers(args.min_length, args.max_length + 1)))
          for _ in range(args.targets)]  # fmt: skip
    lo, hi = chunk(len(qs), comm.Get_size(), comm.Get_rank())
    mine = qs[lo:hi]
    scoring = Scoring("BLOSUM62", 11, 1, convention="blast")
    first, extend = scoring.gaps.parasail
    cells = float(sum(map(len, qs))) * float(sum(map(len, ts)))
    out: dict[str, Any] = {}
    qi = np.repeat(np.arange(len(mine)), len(ts))
    ti = np.tile(np.arange(len(ts)), len(mine))

    def ours_gpu() -> None:
        out["ours"] = score_pairs(mine, ts, scoring, "local", "gpu", qi, ti).reshape(-1, len(ts))

    def ours() -> None:
        out["ours"] = score_many(mine, ts, scoring, "local", backend="cpu")

    def peer_one(q: str) -> list[int]:  # parasail needs one profile per query
        prof = parasail.profile_create_16(q, parasail.blosum62)
        return [parasail.sw_striped_profile_16(prof, t, first, extend).score for t in ts]

    label = "protein local BLOSUM62 11/1"
    fn = ours_gpu if gpu else ours
    return _timed(
        args, comm, cells, fn, lambda: out["ours"], mine, peer_one if parasail else None,
        "sw_striped_profile_16", gpu, label,
    )  # fmt: skip


def _case_dna(args: argparse.Namespace, gpu: bool) -> dict[str, Any]:
    from hpc.domains.align import Scoring, score_pairs

    parasail = _parasail()

    comm = world()
    rng = np.random.default_rng(args.seed + 1)
    windows, reads = [], []
    for _ in range(args.reads):
        w = _random(rng, BASES, args.window)
        start = int(rng.integers(0, args.window - args.read_length))
        reads.append(_mutate(rng, w[start : start + args.read_length], 0.05))
        windows.append(w)
    lo, hi = chunk(len(reads), comm.Get_size(), comm.Get_rank())
    my_reads, my_windows = reads[lo:hi], windows[lo:hi]
    scoring = Scoring("DNA:2:-4", 4, 2, convention="blast")
    first, extend = scoring.gaps.parasail
    matrix = parasail.matrix_create("ACGT", 2, -4) if parasail else None
    cells = float(sum(len(r) * len(w) for r, w in zip(reads, windows, strict=True)))
    out: dict[str, Any] = {}
    backend = "gpu" if gpu else "cpu"

    def ours() -> None:
        out["ours"] = score_pairs(my_reads, my_windows, scoring, "semi-global", backend)

    pairs = list(zip(my_reads, my_windows, strict=True))

    def peer_one(pair: tuple[str, str]) -> int:
        return parasail.sg_dx_striped_16(pair[0], pair[1], first, extend, matrix).score

    return _timed(
        args, comm, cells, ours, lambda: out["ours"], pairs, peer_one if parasail else None,
        "sg_dx_striped_16", gpu, "DNA semi-global 150 bp x 1 kb",
    )  # fmt: skip


def _timed(args, comm, cells, ours, result, items, peer_one, peer_name, gpu, label):
    import numba

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = numba.get_num_threads()
    peer_out: dict[str, Any] = {}

    def peer_single() -> None:
        peer_out["scores"] = [peer_one(x) for x in items]

    pool = ThreadPoolExecutor(max_workers=threads)

    def peer_all() -> None:
        peer_out["scores"] = list(pool.map(peer_one, items))

    def ours_single() -> None:
        _threads(1)
        try:
            ours()
        finally:
            _threads(threads)

    if peer_one is None:  # parasail is not installed: ours only
        secs = time_interleaved(comm, [ours] if gpu else [ours_single, ours], args.reps, 1)
        pool.shutdown()
        rec: dict[str, Any] = {"case": label, "cells": cells, "ratio": {}}
        rec["peers"] = {f"parasail_{peer_name}": {"error": "parasail is not installed"}}
        if gpu:
            rec["ours"] = {"seconds": secs[0], "GCUPS": cells / secs[0] / 1e9, "device": "gpu"}
        else:
            rec["ours"] = {
                "1core": _fig(cells, secs[0], 1),
                "allcores": _fig(cells, secs[1], threads),
            }
        return rec
    if gpu:
        fns = [ours, peer_single, peer_all]
    else:
        fns = [ours_single, peer_single, ours, peer_all]
    secs = time_interleaved(comm, fns, args.reps, warmup=1)
    pool.shutdown()
    # the answers must agree (every rank checks its share)
    mine = np.asarray(result(), dtype=np.int64).reshape(-1)
    theirs = np.asarray(peer_out["scores"], dtype=np.int64).reshape(-1)
    equal = bool(comm.allreduce(int(np.array_equal(mine, theirs)), op=_min()))
    rec = {"case": label, "cells": cells, "scores_equal": equal}
    if gpu:
        rec["ours"] = {"seconds": secs[0], "GCUPS": cells / secs[0] / 1e9, "device": "gpu"}
        rec["peers"] = {
            f"parasail_{peer_name}_1core": _fig(cells, secs[1], 1),
            f"parasail_{peer_name}_allcores": _fig(cells, secs[2], threads),
        }
    else:
        rec["ours"] = {
            "1core": _fig(cells, secs[0], 1),
            "allcores": _fig(cells, secs[2], threads),
        }
        rec["peers"] = {
            f"parasail_{peer_name}_1core": _fig(cells, secs[1], 1),
            f"parasail_{peer_name}_allcores": _fig(cells, secs[3], threads),
        }
    p1 = rec["peers"][f"parasail_{peer_name}_1core"]["GCUPS"]
    pa = rec["peers"][f"parasail_{peer_name}_allcores"]["GCUPS"]
    if gpu:
        rec["ratio"] = {"parasail_allcores": rec["ours"]["GCUPS"] / pa}
    else:
        rec["ratio"] = {
            "parasail_1core": rec["ours"]["1core"]["GCUPS"] / p1,
            "parasail_allcores": rec["ours"]["allcores"]["GCUPS"] / pa,
        }
    rec["cores"] = {"per_rank_threads": threads, "affinity": cores, "ranks": comm.Get_size()}
    return rec


def _min() -> Any:
    from mpi4py import MPI

    return MPI.MIN


def _fig(cells: float, seconds: float, cores: int) -> dict[str, Any]:
    return {"seconds": seconds, "GCUPS": cells / seconds / 1e9, "threads_per_rank": cores}


def _mutate_codes(rng: np.random.Generator, seq: np.ndarray, rate: float) -> np.ndarray:
    """``seq`` (letters as bytes) with substitutions, deletions and insertions (vectorised
    :func:`_mutate`, for the sweep's millions of letters)."""
    r = rng.random(seq.size)
    out = seq.copy()
    sub = r < rate * 0.6
    out[sub] = BASES[rng.integers(0, 4, int(sub.sum()))]
    keep = ~((r >= rate * 0.6) & (r < rate * 0.8))
    ins = np.flatnonzero((r >= rate * 0.8) & (r < rate))
    out = np.insert(out, ins + 1, BASES[rng.integers(0, 4, ins.size)])
    keep = np.insert(keep, ins + 1, True)
    return out[keep]


def _sweep_point(args, comm, case: str, pairs: int, length: int) -> dict[str, Any]:
    """Collective. One point of the sweep: ``pairs`` pairs of ``length`` letters."""
    from hpc.domains.align import Scoring, score_pairs

    parasail = _parasail()
    rng = np.random.default_rng([args.seed, pairs, length, case == "dna"])
    lo, hi = chunk(pairs, comm.Get_size(), comm.Get_rank())
    if case == "protein":
        scoring = Scoring("BLOSUM62", 11, 1, convention="blast")
        mode, kernels = "local", ("sw_striped_16", "sw_scan_16")
        ts = [AMINO[rng.integers(0, AMINO.size, length)] for _ in range(pairs)]
        qs = [AMINO[rng.integers(0, AMINO.size, length)] for _ in range(pairs)]
        matrix = parasail.blosum62 if parasail else None
    else:
        scoring = Scoring("DNA:2:-4", 4, 2, convention="blast")
        mode, kernels = "semi-global", ("sg_dx_striped_16", "sg_dx_scan_16")
        ts = [BASES[rng.integers(0, 4, length)] for _ in range(pairs)]
        qs = [_mutate_codes(rng, t, 0.05) for t in ts]
        matrix = parasail.matrix_create("ACGT", 2, -4) if parasail else None
    cells = float(sum(q.size * t.size for q, t in zip(qs, ts, strict=True)))
    my_q = [q.tobytes().decode() for q in qs[lo:hi]]
    my_t = [t.tobytes().decode() for t in ts[lo:hi]]
    del qs, ts
    first, extend = scoring.gaps.parasail
    out: dict[str, Any] = {}
    point = {"case": case, "mode": mode, "pairs": pairs, "length": length, "cells": cells}

    def ours() -> None:
        _threads(1)
        try:
            out["ours"] = score_pairs(my_q, my_t, scoring, mode, backend="cpu")
        finally:
            _threads(threads)

    def peer(name: str):
        fn = getattr(parasail, name)

        def one() -> None:
            pairs_ = zip(my_q, my_t, strict=True)
            out[name] = [fn(q, t, first, extend, matrix).score for q, t in pairs_]

        return one

    import numba

    threads = numba.get_num_threads()
    score_pairs(my_q[:1], my_t[:1], scoring, mode, backend="cpu")  # compiled, cached
    big = cells >= 1e9  # a single timed run: the sweep's largest points take minutes
    reps, warmup = (1, 0) if big else (max(1, args.reps), 1)
    fns = [ours] + ([peer(k) for k in kernels] if parasail else [])
    secs = time_interleaved(comm, fns, reps, warmup)
    names = ["ours", *kernels] if parasail else ["ours"]
    if parasail is None:
        point["peers"] = {"error": "parasail is not installed"}
        point["ours_GCUPS"] = cells / secs[0] / 1e9
        return point
    best = int(np.argmin(secs[1:])) + 1
    mine = np.asarray(out["ours"], dtype=np.int64)
    equal = all(np.array_equal(mine, np.asarray(out[k], dtype=np.int64)) for k in kernels)
    point["scores_equal"] = bool(comm.allreduce(int(equal), op=_min()))
    point["peer"] = f"parasail_{names[best]}"
    if cells < args.sweep_min_cells:
        point["us_per_call"] = {n: t * 1e6 for n, t in zip(names, secs, strict=True)}
        point["ratio_time"] = secs[best] / secs[0]
        return point
    point["GCUPS"] = {n: cells / t / 1e9 for n, t in zip(names, secs, strict=True)}
    point["ratio"] = secs[best] / secs[0]
    return point


def _sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Every point of the sweep and the worst one (lowest ratio of those with at
    least ``--sweep-min-cells`` cells)."""
    comm = world()
    counts = [int(float(x)) for x in args.sweep_pairs.split(",") if x.strip()]
    lengths = [int(float(x)) for x in args.sweep_lengths.split(",") if x.strip()]
    cases = [c.strip() for c in args.sweep_cases.split(",") if c.strip()]
    for c in cases:
        if c not in ("protein", "dna"):
            raise ValueError(f"--sweep-cases: {c!r} is not 'protein' or 'dna'")
    points = []
    for case in cases:
        for length in lengths:
            for pairs in counts:
                point = _sweep_point(args, comm, case, pairs, length)
                points.append(point)
                if comm.Get_rank() == 0:
                    shown = (
                        f"ratio {point['ratio']:.2f}"
                        if "ratio" in point
                        else f"{point.get('us_per_call', {}).get('ours', 0):.0f} us/call"
                    )
                    print(f"sweep {case} {pairs} pairs x {length}: {shown}", file=sys.stderr,
                          flush=True)  # fmt: skip
    rated = [p for p in points if "ratio" in p]
    worst = min(rated, key=lambda p: p["ratio"]) if rated else None
    if worst is not None:
        worst = {k: worst[k] for k in ("case", "mode", "pairs", "length", "cells", "ratio",
                                        "peer", "GCUPS")}  # fmt: skip
    return {"sweep": points, "worst": worst}


# int32 operations of one cell of the GPU kernel's two-state update (``_cell2`` of
# hpc.domains.align.kernels, both cases' gaps take it): M = max(diag, floor) + s (2), E and F
# = max(x - extend, open - first) (3 each), H = max(M, max(E, F)) (2), best = max(best, H)
# (1). The substitution lookup and the row loads and stores are not counted.
INT32_OPS_PER_CELL = 11


def _int32_fractions(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Local. Each GPU case's int32 rate (cells x :data:`INT32_OPS_PER_CELL` over its
    seconds) as a fraction of the device's measured int32 add/max rate (into the cases'
    ``limits``); the headline's figures for the record's."""
    from .device_peak import fraction, int32_rate

    peak = int32_rate()
    for rec in cases:
        ops = rec["cells"] * INT32_OPS_PER_CELL
        rec["limits"] = {
            "int32_ops_per_cell": INT32_OPS_PER_CELL,
            "int32_ops_per_s": ops / rec["ours"]["seconds"],
            "device_int32_ops_per_s": peak,
            "fraction_of_int32": fraction(ops, rec["ours"]["seconds"], peak),
        }
    return dict(cases[0]["limits"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. The protein case (headline) and the DNA semi-global case; with
    ``--sweep``, also the sweep over pair counts and lengths and its worst point."""
    from hpc.backend import get_backend

    comm = world()
    backend = get_backend(args.backend)
    gpu = backend.is_gpu
    cases = [_case_protein(args, gpu), _case_dna(args, gpu)]
    head = cases[0]
    extra = _sweep(args) if getattr(args, "sweep", False) else {}
    limits: dict[str, Any] = {"target_cpu_ratio": 1.0, "target_gpu_GCUPS": 100.0}
    if gpu:
        limits.update(_int32_fractions(cases))
    return {
        "bench": "align",
        "backend": backend.name,
        "ranks": comm.Get_size(),
        "size": {
            "protein_pairs": args.queries * args.targets,
            "protein_lengths": [args.min_length, args.max_length],
            "dna_pairs": args.reads,
            "read_length": args.read_length,
            "window": args.window,
        },
        "ours": head["ours"],
        "peers": head["peers"],
        "ratio": head["ratio"],
        "limits": limits,
        "cases": cases,
        **extra,
    }
