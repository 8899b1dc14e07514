"""k-NN search (exact, IVF-Flat, IVF-PQ) against FAISS on the same data, same run, same threads.

Data (``--data``): a synthetic Gaussian mixture (``mixture``, the default:
``hpc.domains.vector.datasets.mixture_rows``, 100 clusters, intrinsic dimension 32 in 128,
L2) or a skewed set shaped like word embeddings (``skewed``: ``skewed_rows``, Zipf cluster
sizes, dense big clusters, intrinsic dimension ``dim // 3``, unit rows, cosine: very uneven
inverted lists), ``--n`` float32 base vectors and ``--queries`` queries. Cases:

1. exact: ``FlatIndex`` against ``faiss.IndexFlatL2`` (QPS; ours is the ground truth, and
   FAISS's result is checked against it: ``faiss_recall``);
2. IVF-Flat and IVF-PQ (``nlist`` lists; IVF-PQ with exact re-ranking of ``--rerank``
   candidates, against ``faiss.IndexRefineFlat(IndexIVFPQ)`` with the same ``k_factor``):
   for each side the smallest nprobe of the sweep that reaches the target recall@10 (0.95
   IVF-Flat, 0.8 IVF-PQ) and the QPS there; ``ratio`` is our QPS over FAISS's;
3. build time (train + add) against FAISS's.

Both sides use the same thread count (``faiss.omp_set_num_threads`` = numba's threads; FAISS's
OpenMP threads are started off any single-core MPI binding, ``timing.all_cores``). The
metric is the same on both sides (cosine: normalised rows and inner products in FAISS).

``--sweep`` runs a grid instead of one point (ann-benchmarks' lesson: one point hides the
shapes where we lose): datasets of several dimensions and sizes (``--sweep-points``, default
d = 25, 50, 128, 384, 960 with n from 1e6 down to 1e5), query counts 1 to 1e4, k = 1, 10,
100, every case; IVF-PQ with sub-quantizers of 2 to 8 dimensions dividing d (``_pq_m``),
the same on both sides. For each point both libraries walk a fine nprobe grid
(``--sweep-nprobe``) to the smallest nprobe reaching the target recall (measured on up to
1000 queries); QPS is timed on a stream of distinct batches of ``nq`` queries there and
at the grid point before it (the best of three short windows, both libraries' windows in
turns, ``_qps``), and the time per query is interpolated to the
target recall itself, so ``ratio`` compares the two at equal recall (``ratio_grid``: at
each side's grid point, whose recalls differ). A table line (ours, FAISS, ratio, load) is
printed; the JSON gets every point (``sweep``, each with the 1-minute load average when it
was timed, ``load``) and the ``worst`` (lowest ratio) with its parameters. The d = 50 point
alone (n = 4e5, every case, k and nq) took about 3 minutes on 2 shared cores; d = 50 and
384 at n = 1e5 (``--sweep-points 50:1e5,384:1e5``) 11 minutes at load 1 to 10; the full
default grid has not been timed (it builds five sets and their indexes, both sides).

On the GPU backend the exact case also reports its rate as a fraction of the measured
matrix-multiply rate (FLOP count ``2 nq n dim`` over seconds, over a large cuBLAS sgemm's
rate measured in the same run, :mod:`.device_peak`). Defaults: 1e6 x 128 base, 1e4 queries
(1e3 for the exact case), about 3 minutes on 2 idle cores.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

__all__ = ["add_arguments", "run"]

SWEEP_POINTS = "25:1e6,50:4e5,128:1e6,384:3e5,960:1e5"
TARGETS = {"ivfflat": 0.95, "ivfpq": 0.8}  # recall@k each side must reach
# the sweep's nprobe grid: steps of at most 1.5x, so the two grid points around the target
# recall are close and the time interpolated between them is near the true time there
SWEEP_NPROBE = "1,2,3,4,6,8,12,16,20,24,32,40,48,64,96,128"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench knn``."""
    p.add_argument("--n", type=float, default=1e6, help="base vectors (1e6)")
    p.add_argument("--queries", type=float, default=1e4, help="queries (1e4)")
    p.add_argument("--dim", type=int, default=128, help="dimension (128)")
    p.add_argument("--k", type=int, default=10, help="neighbours (10)")
    p.add_argument("--nlist", type=int, default=1024, help="IVF lists (1024)")
    p.add_argument("--m", type=int, default=16, help="IVF-PQ sub-quantizers (16)")
    p.add_argument("--nbits", type=int, default=8, help="IVF-PQ bits per code (8)")
    p.add_argument("--rerank", type=int, default=100, help="IVF-PQ re-ranked candidates (100)")
    p.add_argument("--nprobe", default="1,2,4,8,16,32,64,128", help="nprobe sweep")
    p.add_argument(
        "--exact-queries",
        type=float,
        default=1e3,
        help="queries of the exact case (1e3; 1e4 takes ~15 s a side on 2 idle cores)",
    )
    p.add_argument("--cases", default="flat,ivfflat,ivfpq", help="which cases to run")
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--data",
        choices=("mixture", "skewed"),
        default="mixture",
        help="mixture (uniform Gaussian mixture, l2) or skewed (embedding-like, cosine)",
    )
    p.add_argument("--metric", default=None, help="l2, ip or cosine (default: by --data)")
    p.add_argument("--clusters", type=int, default=None, help="clusters (100 / 2000 skewed)")
    p.add_argument("--sweep", action="store_true", help="run the grid below, report the worst")
    p.add_argument(
        "--sweep-points",
        default=SWEEP_POINTS,
        help=f"dim:n pairs of the grid ({SWEEP_POINTS})",
    )
    p.add_argument("--sweep-queries", default="1,100,10000", help="query counts (1,100,10000)")
    p.add_argument("--sweep-k", default="1,10,100", help="k values (1,10,100)")
    p.add_argument("--sweep-data", default="skewed", help="datasets of the grid (skewed)")
    p.add_argument(
        "--sweep-nprobe",
        default=SWEEP_NPROBE,
        help=f"nprobe grid of --sweep, finer than --nprobe ({SWEEP_NPROBE})",
    )


def _timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _first_reaching(rows: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    return next((r for r in rows if r["recall"] >= target), None)


def _sweep(
    search: Any, xq: np.ndarray, truth: np.ndarray, k: int, sweep: list[int], target: float
) -> list[dict[str, Any]]:
    from hpc.domains.vector.datasets import recall_at_k

    rows = []
    for nprobe in sweep:
        search(xq[:50], nprobe)  # compile and warm
        seconds, ids = _timed(lambda nprobe=nprobe: search(xq, nprobe))
        rows.append(
            {
                "nprobe": nprobe,
                "recall": recall_at_k(ids, truth, k),
                "qps": xq.shape[0] / seconds,
                "seconds": seconds,
            }
        )
        if rows[-1]["recall"] >= target:  # the first nprobe that reaches it is what counts
            break
    return rows


def _metric(args: argparse.Namespace, data: str) -> str:
    return args.metric or ("cosine" if data == "skewed" else "l2")


def _make_data(
    data: str, n: int, nq: int, dim: int, clusters: int | None, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Base and query rows of one of the benchmark's datasets."""
    from hpc.domains.vector.datasets import (
        mixture_rows,
        query_rows,
        skewed_query_rows,
        skewed_rows,
    )

    if data == "skewed":
        kw: dict[str, Any] = dict(dim=dim, clusters=clusters or 2000, seed=seed)
        return skewed_rows(0, n, **kw), skewed_query_rows(0, nq, **kw)
    kw = dict(dim=dim, clusters=clusters or 100, intrinsic_dim=min(32, dim), seed=seed)
    return mixture_rows(0, n, **kw), query_rows(0, nq, **kw)


def _start_faiss(threads: int) -> Any:
    """FAISS with ``threads`` OpenMP threads, started on every core (not on rank 0's MPI
    core binding), or None when it is not installed."""
    from .timing import all_cores

    try:
        import faiss
    except ImportError:
        return None
    with all_cores():  # OpenMP starts its pool at the first parallel region: do it here
        faiss.omp_set_num_threads(threads)
        warm = faiss.IndexFlatL2(8)
        warm.add(np.zeros((4096, 8), dtype=np.float32))
        warm.search(np.zeros((256, 8), dtype=np.float32), 4)
    return faiss


def _faiss_ready(faiss: Any, x: np.ndarray, metric: str) -> np.ndarray:
    """Rows as FAISS takes them for ``metric`` (cosine: normalised, then inner products)."""
    if metric != "cosine":
        return x
    out = np.ascontiguousarray(x, dtype=np.float32).copy()
    faiss.normalize_L2(out)
    return out


def _faiss_index(
    faiss: Any, case: str, dim: int, metric: str, nlist: int, m: int, nbits: int, kf: float
) -> tuple[Any, Any]:
    """``(index, ivf part)`` of FAISS for a case: IndexFlat, IndexIVFFlat or
    IndexRefineFlat(IndexIVFPQ) with re-ranking factor ``kf``."""
    fm = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
    flat = faiss.IndexFlatL2(dim) if fm == faiss.METRIC_L2 else faiss.IndexFlatIP(dim)
    if case == "flat":
        return flat, None
    if case == "ivfflat":
        ivf = faiss.IndexIVFFlat(flat, dim, nlist, fm)
        return ivf, ivf
    ivf = faiss.IndexIVFPQ(flat, dim, nlist, m, nbits, fm)
    index = faiss.IndexRefineFlat(ivf)
    index.k_factor = kf
    return index, ivf


def _pq_m(dim: int) -> int:
    """Sub-quantizers for ``dim``: sub-vectors of the divisor of ``dim`` nearest
    ``clip(dim / 16, 2, 8)`` (8 dimensions from d = 128 up, 2 to 4 below: coarser codes of
    small vectors lose too much, d = 50 with m = 5 re-ranked only 0.3 recall@10)."""
    want = min(8.0, max(2.0, dim / 16))
    divisors = [v for v in range(1, dim + 1) if dim % v == 0]
    return dim // min(divisors, key=lambda v: (abs(v - want), v))


def _qps(
    runs: list[tuple[Any, np.ndarray]], nq: int, seconds: float = 0.3, windows: int = 3
) -> list[float]:
    """Queries per second of each ``(search, pool)`` of ``runs``, ``search(batch)`` called
    on batches of ``nq`` queries of its pool (one call per batch; a batch of one query is
    one call per query): for each, the best of ``windows`` windows of ``seconds / windows``
    (at least one call per window; after ``2 seconds`` per run no new round of windows).

    The runs take their windows in turns (one window of each, then the next round), so
    every run, ours and the peer's alike, is timed across the same moments of the machine:
    timed one after the other, a shift of the load between them (other jobs, other virtual
    machines sharing the memory bus) showed as a gap between the libraries (one-query
    points moved by up to 30% between sequential runs at load 1.4 to 1.8).

    Successive calls take successive batches of the pool (wrapping round), not one batch
    again and again: a user's stream of queries finds the lists it probes wherever the
    previous queries left them, and one query repeated keeps its own lists in cache (a
    one-query IVF-Flat search at d = 128 and nprobe 16 reads 9 MB of rows: repeated, both
    libraries ran about 22 ns a row; over a stream of distinct queries at nprobe 20, FAISS
    25-27 and ours 18-20, since its scan loop holds the dot products alone).

    The best window, not the mean: on cores other processes share, a window in which this
    process was descheduled says how busy the machine was, not how fast the search is
    (repeated runs at load 6 to 16 moved single points by 2 to 3x)."""
    turns = [0] * len(runs)
    sizes = [max(1, min(nq, pool.shape[0])) for _, pool in runs]  # a batch of each run

    def call(r: int) -> None:
        search, pool = runs[r]
        first = (turns[r] % max(1, pool.shape[0] // sizes[r])) * sizes[r]
        search(pool[first : first + sizes[r]])
        turns[r] += 1

    for r in range(len(runs)):
        call(r)
    best = [0.0] * len(runs)
    begin = time.perf_counter()
    for _ in range(windows):
        for r in range(len(runs)):
            calls, t0 = 0, time.perf_counter()
            while True:
                call(r)
                calls += 1
                elapsed = time.perf_counter() - t0
                if elapsed >= seconds / windows:
                    break
            best[r] = max(best[r], calls * sizes[r] / elapsed)
        if time.perf_counter() - begin >= 2 * seconds * len(runs):
            break
    return best


def _reach(
    search: Any, xq: np.ndarray, truth: np.ndarray, k: int, sweep: list[int], target: float
) -> list[tuple[int, float]]:
    """``(nprobe, recall@k on xq)`` along ``sweep`` up to the first nprobe whose recall
    reaches ``target`` (else the whole sweep)."""
    from hpc.domains.vector.datasets import recall_at_k

    tried = []
    for nprobe in sweep:
        tried.append((nprobe, recall_at_k(search(xq, nprobe), truth, k)))
        if tried[-1][1] >= target:
            break
    return tried


def _qps_at_recall(
    sides: list[tuple[Any, np.ndarray, list[tuple[int, float]]]], nq: int, target: float
) -> list[tuple[float, float]]:
    """For each ``(search, pool, tried)`` of ``sides``, ``(QPS at the first nprobe reaching
    target, QPS at recall = target)``, every side's nprobe points timed in turns
    (:func:`_qps`). The second interpolates the time per query linearly in recall between
    the last nprobe below the target and the first reaching it (equal recall for both
    libraries, not equal nprobe: their lists differ, and so does what one probe buys).
    Where the first nprobe of the sweep already reaches the target, or none does, both are
    the QPS there."""
    runs, points = [], []
    for search, pool, tried in sides:
        hi_p, hi_r = tried[-1]
        mine = [hi_p] if len(tried) < 2 or hi_r < target else [hi_p, tried[-2][0]]
        points.append(len(mine))
        runs += [((lambda q, p=p, search=search: search(q, p)), pool) for p in mine]
    qps = _qps(runs, nq)
    out, at = [], 0
    for (_, _, tried), count in zip(sides, points, strict=True):
        qps_hi = qps[at]
        if count == 1:
            out.append((qps_hi, qps_hi))
        else:
            qps_lo, (_, lo_r), (_, hi_r) = qps[at + 1], tried[-2], tried[-1]
            w = (target - lo_r) / max(hi_r - lo_r, 1e-12)
            out.append((qps_hi, 1.0 / ((1 - w) / qps_lo + w / qps_hi)))
        at += count
    return out


def _load() -> float:
    """The 1-minute load average (other processes on the cores skew both sides' QPS, the
    peer's OpenMP threads more than ours), or -1 where the system does not say."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return -1.0


def _print_row(row: dict[str, Any]) -> None:
    tail = ""
    if "ours_nprobe" in row:
        tail = (
            f"  nprobe {row['ours_nprobe']}/{row['faiss_nprobe']}"
            f"  recall {row['ours_recall']:.3f}/{row['faiss_recall']:.3f}"
            f"  (grid ratio {row['ratio_grid']:.2f})"
        )
    if "load" in row:
        tail += f"  load {row['load']:.1f}"
    print(
        f"{row['data']:8s} d={row['dim']:<4d} n={row['n']:<8d} {row['case']:8s} "
        f"k={row['k']:<4d} nq={row['nq']:<6d} ours {row['ours_qps']:10.0f} QPS  "
        f"faiss {row['faiss_qps']:10.0f} QPS  ratio {row['ratio']:6.2f}{tail}",
        flush=True,
    )


def _sweep_exact(
    flat: Any, fi: Any, xq: np.ndarray, fxq: np.ndarray, ks: list[int],
    nqs: list[int], base: dict[str, Any],
) -> list[dict[str, Any]]:  # fmt: skip
    """Exact search at every (k, nq) of the grid."""
    rows = []
    for k in ks:
        for nq in nqs:
            ours, peer = _qps(
                [(lambda q, k=k: flat.search(q, k), xq), (lambda q, k=k: fi.search(q, k), fxq)],
                nq,
            )
            row = {**base, "case": "flat", "k": k, "nq": nq, "load": _load()}
            row.update(ours_qps=ours, faiss_qps=peer, ratio=ours / peer)
            _print_row(row)
            rows.append(row)
    return rows


def _sweep_ivf(
    args: argparse.Namespace, faiss: Any, be: Any, case: str, xb: np.ndarray, xq: np.ndarray,
    fxb: np.ndarray, fxq: np.ndarray, truth: np.ndarray, ks: list[int], nqs: list[int],
    base: dict[str, Any],
) -> list[dict[str, Any]]:  # fmt: skip
    """One IVF case on one dataset: both built once, then every (k, nq) at the smallest
    nprobe reaching the target recall on each side."""
    from hpc.domains.vector import IVFFlatIndex, IVFPQIndex

    dim, metric = xb.shape[1], base["metric"]
    m = _pq_m(dim)
    sweep = [int(v) for v in args.sweep_nprobe.split(",")]
    if case == "ivfflat":
        ours: Any = IVFFlatIndex(dim, args.nlist, metric, backend=be)
    else:
        ours = IVFPQIndex(dim, args.nlist, m=m, nbits=args.nbits, metric=metric, backend=be)
    ours.train(xb)
    ours.add(xb)
    fi, fivf = _faiss_index(faiss, case, dim, metric, args.nlist, m, args.nbits, 1.0)
    fi.train(fxb)
    fi.add(fxb)
    neval = truth.shape[0]
    rows = []
    for k in ks:
        rerank = max(args.rerank, k)
        params = {"rerank": rerank} if case == "ivfpq" else {}
        if case == "ivfpq":
            fi.k_factor = max(1.0, rerank / k)

        def ours_search(q: np.ndarray, p: int, k: int = k, params: Any = params) -> Any:
            return ours.search(q, k, nprobe=p, **params)[1]

        def faiss_search(q: np.ndarray, p: int, k: int = k) -> Any:
            fivf.nprobe = p
            return fi.search(q, k)[1]

        target = TARGETS[case]
        ours_tried = _reach(ours_search, xq[:neval], truth[:, :k], k, sweep, target)
        peer_tried = _reach(faiss_search, fxq[:neval], truth[:, :k], k, sweep, target)
        (op, orec), (fp, frec) = ours_tried[-1], peer_tried[-1]
        for nq in nqs:
            (ours_qps, ours_eq), (peer_qps, peer_eq) = _qps_at_recall(
                [(ours_search, xq, ours_tried), (faiss_search, fxq, peer_tried)], nq, target
            )
            row = {**base, "case": case, "k": k, "nq": nq, "target": target, "load": _load()}
            # ratio: at equal recall (the target, interpolated); ratio_grid: each side at
            # the first nprobe of the grid reaching the target (recalls above it differ)
            row.update(ours_qps=ours_eq, faiss_qps=peer_eq, ratio=ours_eq / peer_eq)
            row.update(ours_qps_grid=ours_qps, faiss_qps_grid=peer_qps)
            row.update(ratio_grid=ours_qps / peer_qps)
            row.update(ours_nprobe=op, ours_recall=orec, faiss_nprobe=fp, faiss_recall=frec)
            if case == "ivfpq":
                row.update(m=m, rerank=rerank)
            _print_row(row)
            rows.append(row)
    return rows


def _run_sweep(args: argparse.Namespace, record: dict[str, Any], faiss: Any, be: Any) -> None:
    """The grid of ``--sweep``: a table line per point, every point (``sweep``) and the
    lowest ratio with its parameters (``worst``) in ``record``."""
    from hpc.domains.vector import FlatIndex

    points = []
    for item in args.sweep_points.split(","):
        d, n = item.split(":")
        points.append((int(float(d)), int(float(n))))
    nqs = [int(float(v)) for v in args.sweep_queries.split(",")]
    ks = [int(v) for v in args.sweep_k.split(",")]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    rows: list[dict[str, Any]] = []
    record["sweep"] = rows
    for data in [d.strip() for d in args.sweep_data.split(",") if d.strip()]:
        metric = _metric(args, data)
        for dim, n in points:
            xb, xq = _make_data(data, n, max(max(nqs), 1000), dim, args.clusters, args.seed)
            fxb, fxq = _faiss_ready(faiss, xb, metric), _faiss_ready(faiss, xq, metric)
            base = {"data": data, "dim": dim, "n": n, "metric": metric}
            flat = FlatIndex(dim, metric, backend=be)
            flat.add(xb)
            _, truth = flat.search(xq[: min(1000, xq.shape[0])], max(ks))
            if "flat" in cases:
                fi, _ = _faiss_index(faiss, "flat", dim, metric, 0, 0, 0, 1.0)
                fi.add(fxb)
                exact_nqs = [v for v in nqs if v <= int(args.exact_queries)]
                rows += _sweep_exact(flat, fi, xq, fxq, ks, exact_nqs, base)
                del fi
            del flat
            for case in [c for c in ("ivfflat", "ivfpq") if c in cases]:
                rows += _sweep_ivf(args, faiss, be, case, xb, xq, fxb, fxq, truth, ks, nqs, base)
    if rows:
        worst = min(rows, key=lambda r: r["ratio"])
        record["worst"] = dict(worst)
        record["ratio"] = {"faiss_worst": worst["ratio"]}
        print(f"worst: {worst}", flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Local (rank 0's process). Every case against FAISS; the exact case is the headline."""
    import numba
    from hpc.domains.vector import FlatIndex, IVFFlatIndex, IVFPQIndex
    from hpc.domains.vector.datasets import recall_at_k

    from hpc.backend import get_backend
    from hpc.comm import world

    be = get_backend(args.backend)
    comm = world()
    n, nq, dim, k = int(args.n), int(args.queries), args.dim, args.k
    nq_exact = min(int(args.exact_queries or nq), nq)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    sweep = [int(v) for v in args.nprobe.split(",")]
    threads = numba.get_num_threads()
    record: dict[str, Any] = {
        "bench": "knn",
        "backend": be.name,
        "ranks": comm.Get_size(),
        "size": {
            "n": n,
            "queries": nq,
            "exact_queries": nq_exact,
            "dim": dim,
            "k": k,
            "nlist": args.nlist,
            "m": args.m,
            "nbits": args.nbits,
        },
        "data": "sweep" if args.sweep else args.data,
        "metric": _metric(args, args.data),
        "threads": threads,
        "ours": {},
        "peers": {},
        "ratio": {},
        "limits": {},
        "cases": [],
    }
    faiss = _start_faiss(threads)
    if faiss is not None:
        record["peers_version"] = {"faiss": faiss.__version__}
    else:  # the peer is optional: report that it is missing
        record["peers"]["faiss"] = {"error": "ImportError: faiss is not installed"}
    if args.sweep:
        if faiss is None:
            raise ValueError("--sweep compares with FAISS, which is not installed")
        _run_sweep(args, record, faiss, be)
        return record
    metric = record["metric"]
    gen_s, (xb, xq) = _timed(lambda: _make_data(args.data, n, nq, dim, args.clusters, args.seed))
    record["limits"]["data_seconds"] = gen_s
    fxb = _faiss_ready(faiss, xb, metric) if faiss is not None else xb
    fxq = _faiss_ready(faiss, xq, metric) if faiss is not None else xq

    # (1) exact: ours is the ground truth for the IVF cases too
    flat = FlatIndex(dim, metric, backend=be)
    build_s, _ = _timed(lambda: flat.add(xb))
    flat.search(xq[:64], k)
    xq_exact = xq[:nq_exact]
    ours_s, (_, truth_exact) = _timed(lambda: flat.search(xq_exact, k))
    exact = {
        "case": "exact",
        "ours": {"seconds": ours_s, "qps": nq_exact / ours_s, "add_seconds": build_s},
        "peers": {},
        "ratio": {},
    }
    flops = 2.0 * nq_exact * n * dim
    exact["ours"]["GFLOPs"] = flops / ours_s / 1e9
    if be.is_gpu:
        from .device_peak import matmul_rate

        rate = matmul_rate(be.xp, np.float32)
        exact["limits"] = {"gemm_GFLOPs": rate / 1e9, "fraction_of_gemm": flops / ours_s / rate}
        record["limits"].update(exact["limits"])
    if faiss is not None:
        fi, _ = _faiss_index(faiss, "flat", dim, metric, 0, 0, 0, 1.0)
        fbuild, _ = _timed(lambda: fi.add(fxb))
        fi.search(fxq[:64], k)
        fs, (_, fids) = _timed(lambda: fi.search(fxq[:nq_exact], k))
        exact["peers"]["faiss"] = {
            "seconds": fs,
            "qps": nq_exact / fs,
            "add_seconds": fbuild,
            "recall_vs_ours": recall_at_k(fids, truth_exact, k),
        }
        exact["ratio"]["faiss"] = exact["ours"]["qps"] / exact["peers"]["faiss"]["qps"]
    record["cases"].append(exact)
    if nq_exact == nq:
        truth = truth_exact
    else:
        _, truth = flat.search(xq, k)
    flat = None  # free the base copy before the IVF cases
    record["ours"], record["peers"], record["ratio"] = exact["ours"], exact["peers"], exact["ratio"]

    # (2, 3) IVF-Flat and IVF-PQ: QPS at the target recall, and build time
    for name, target in (("ivfflat", 0.95), ("ivfpq", 0.8)):
        if name not in cases:
            continue
        if name == "ivfflat":
            ours = IVFFlatIndex(dim, args.nlist, metric, backend=be)
            params: dict[str, Any] = {}
        else:
            ours = IVFPQIndex(
                dim, args.nlist, m=args.m, nbits=args.nbits, metric=metric, backend=be
            )
            params = {"rerank": args.rerank}
        t_train, _ = _timed(lambda ours=ours: ours.train(xb))
        t_add, _ = _timed(lambda ours=ours: ours.add(xb))
        rows = _sweep(
            lambda q, p, ours=ours, params=params: ours.search(q, k, nprobe=p, **params)[1],
            xq,
            truth,
            k,
            sweep,
            target,
        )
        case: dict[str, Any] = {
            "case": name,
            "target_recall": target,
            "ours": {
                "train_seconds": t_train,
                "add_seconds": t_add,
                "build_seconds": t_train + t_add,
                "sweep": rows,
            },
            "peers": {},
            "ratio": {},
        }
        hit = _first_reaching(rows, target)
        if hit:
            case["ours"].update(nprobe=hit["nprobe"], recall=hit["recall"], qps=hit["qps"])
        del ours
        if faiss is not None:
            fidx, ivf = _faiss_index(
                faiss, name, dim, metric, args.nlist, args.m, args.nbits, max(1.0, args.rerank / k)
            )
            ft, _ = _timed(lambda fidx=fidx: fidx.train(fxb))
            fa, _ = _timed(lambda fidx=fidx: fidx.add(fxb))

            def fsearch(q: np.ndarray, p: int, fidx: Any = fidx, ivf: Any = ivf) -> np.ndarray:
                ivf.nprobe = p
                return fidx.search(q, k)[1]

            frows = _sweep(fsearch, fxq, truth, k, sweep, target)
            peer: dict[str, Any] = {
                "train_seconds": ft,
                "add_seconds": fa,
                "build_seconds": ft + fa,
                "sweep": frows,
            }
            fhit = _first_reaching(frows, target)
            if fhit:
                peer.update(nprobe=fhit["nprobe"], recall=fhit["recall"], qps=fhit["qps"])
            case["peers"]["faiss"] = peer
            if hit and fhit:
                case["ratio"]["faiss_qps_at_target"] = hit["qps"] / fhit["qps"]
            both = {r["nprobe"]: r for r in rows if any(f["nprobe"] == r["nprobe"] for f in frows)}
            if both:  # the largest nprobe both sides ran: QPS at equal nprobe
                p_eq = max(both)
                f_eq = next(f for f in frows if f["nprobe"] == p_eq)
                case["ratio"]["faiss_qps_at_equal_nprobe"] = both[p_eq]["qps"] / f_eq["qps"]
                case["ratio"]["equal_nprobe"] = p_eq
            case["ratio"]["faiss_build"] = peer["build_seconds"] / case["ours"]["build_seconds"]
            del fidx, ivf
        record["cases"].append(case)
    return record
