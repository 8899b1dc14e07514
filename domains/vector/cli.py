"""``hpc vector``: build, search and evaluate k-NN indexes; sharded over ranks under MPI.

Examples::

    hpc vector build --synthetic 100000 --dim 64 --index ivfflat --nlist 256 --out index.h5
    hpc vector build --synthetic 1e7 --index ivfpq --journal build.j --out big.h5  # resumable
    hpc vector search --index index.h5 --data data.h5 -k 10 --nprobe 8 --out hits.h5
    mpirun -n 2 hpc vector eval --synthetic 200000 --index ivfpq --nprobe 1,2,4,8,16 \\
        --plot recall.png --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import hpc  # lazy: MPI starts at the first hpc.world()
from hpc.errors import UsageError, check_output_path, on_all_ranks
from hpc.jobs import add_job_options

__all__ = ["add_parser"]


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default=None, help="ann-benchmarks HDF5 file (train, test, ...)")
    p.add_argument("--synthetic", type=float, default=None, help="N: a synthetic mixture set")
    p.add_argument("--queries", type=int, default=1000, help="synthetic queries (1000)")
    p.add_argument("--dim", type=int, default=128, help="synthetic dimension (128)")
    p.add_argument("--clusters", type=int, default=100, help="synthetic mixture components")
    p.add_argument("--intrinsic-dim", type=int, default=None, help="synthetic intrinsic dim")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--metric",
        choices=["l2", "ip", "cosine"],
        default=None,
        help="default: the file's (euclidean -> l2, angular -> cosine), else l2",
    )


def _index_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", dest="kind", choices=["flat", "ivfflat", "ivfpq"], default="ivfflat")
    p.add_argument("--nlist", type=int, default=256, help="inverted lists (256)")
    p.add_argument("--m", type=int, default=16, help="IVF-PQ sub-quantizers (16)")
    p.add_argument("--nbits", type=int, default=8, help="IVF-PQ bits per code (8)")
    p.add_argument("--backend", default=None, help="auto, cpu or gpu")


def add_parser(sub: Any) -> None:
    """Register ``hpc vector`` on the ``hpc`` parser's subparsers."""
    vec = sub.add_parser("vector", help="exact and IVF k-NN search (sharded over ranks)")
    cmds = vec.add_subparsers(dest="vector_command", metavar="COMMAND", required=True)
    b = cmds.add_parser("build", help="train and fill an index, save it to HDF5 (one process)")
    _data_options(b)
    _index_options(b)
    b.add_argument("--out", required=True, help="index file (HDF5)")
    add_job_options(
        b,
        journal_help="journal the k-means iterations and the list filling in DIR and resume "
        "from it when it exists (the saved index is bitwise that of an uninterrupted build); "
        "removed when the index is saved",
    )
    b.set_defaults(func=_build)
    s = cmds.add_parser("search", help="search the test vectors of --data in a saved index")
    s.add_argument("--index", dest="index_file", required=True, help="index file from build")
    _data_options(s)
    s.add_argument("-k", type=int, default=10)
    s.add_argument("--nprobe", type=int, default=None)
    s.add_argument("--rerank", type=int, default=None, help="IVF-PQ: candidates re-ranked")
    s.add_argument("--out", default=None, help="HDF5 file for 'distances' and 'ids'")
    s.add_argument("--json", action="store_true", help="print a summary as one JSON line")
    s.set_defaults(func=_search)
    e = cmds.add_parser(
        "eval", help="recall@k and QPS over a sweep of nprobe (sharded under mpirun)"
    )
    _data_options(e)
    _index_options(e)
    e.add_argument("-k", type=int, default=10)
    e.add_argument("--nprobe", default="1,2,4,8,16,32", help="comma-separated sweep")
    e.add_argument("--rerank", type=int, default=None, help="IVF-PQ: candidates re-ranked")
    e.add_argument("--plot", default=None, help="recall-QPS plot (PNG)")
    e.add_argument("--json", action="store_true", help="print the sweep as one JSON line")
    e.set_defaults(func=_eval)


def _load_data(args: argparse.Namespace, comm: Any, shard: bool) -> Any:
    """The dataset (this rank's rows of train when ``shard``), and the train row offset."""
    from hpc.decomposition import chunk

    from .datasets import Dataset, ann_train_size, mixture_rows, read_ann_hdf5

    if (args.data is None) == (args.synthetic is None):
        raise on_all_ranks(UsageError("give exactly one of --data FILE.h5 or --synthetic N"))
    size, rank = (comm.Get_size(), comm.Get_rank()) if shard else (1, 0)
    if args.data:
        n = ann_train_size(args.data)
        lo, hi = chunk(n, size, rank)
        ds = read_ann_hdf5(args.data, slice(lo, hi))
        if args.metric:
            ds.metric = args.metric
        return ds, lo
    n = int(args.synthetic)
    lo, hi = chunk(n, size, rank)
    kw = dict(
        dim=args.dim, clusters=args.clusters, intrinsic_dim=args.intrinsic_dim, seed=args.seed
    )
    from .datasets import query_rows

    train = mixture_rows(lo, hi - lo, **kw)
    test = query_rows(0, args.queries, **kw)
    return Dataset(train, test, metric=args.metric or "l2"), lo


def _make_index(args: argparse.Namespace, dim: int, metric: str) -> Any:
    from .flat import FlatIndex
    from .ivf import IVFFlatIndex, IVFPQIndex

    if args.kind == "flat":
        return FlatIndex(dim, metric, backend=args.backend)
    if args.kind == "ivfflat":
        return IVFFlatIndex(dim, args.nlist, metric, backend=args.backend)
    return IVFPQIndex(
        dim, args.nlist, m=args.m, nbits=args.nbits, metric=metric, backend=args.backend
    )


def _check_out(args: argparse.Namespace) -> None:
    """``--out`` refused before any work when it cannot be written (every rank alike)."""
    try:
        check_output_path("--out", args.out)
    except UsageError as exc:
        raise on_all_ranks(exc) from None


def _backend(args: argparse.Namespace) -> Any:
    """Collective. The backend, chosen by every rank: its first choice is collective (the
    node's cores are shared among the ranks), so under ``mpirun`` rank 0 must not make it
    alone while the others have left."""
    from hpc.backend import BackendUnavailableError, get_backend

    name = getattr(args, "backend", None)
    try:
        return get_backend(name)
    except (BackendUnavailableError, ValueError) as exc:  # the same answer on every rank
        raise on_all_ranks(UsageError(f"--backend {name}: {exc}")) from None


def _build(args: argparse.Namespace) -> int:
    _check_out(args)
    comm = hpc.world()
    backend = _backend(args)
    if comm.Get_rank() != 0:
        return 0
    from hpc.io import atomic_output

    from hpc.comm import self_comm
    from hpc.jobs import Job, journal_key

    ds, _ = _load_data(args, comm, shard=False)
    index = _make_index(args, ds.train.shape[1], ds.metric)
    n, dim = ds.train.shape
    key = journal_key(args, backend=backend.name, data=_data_identity(args.data))
    # progress in vectors: every k-means iteration passes over its sample, filling over all
    ivf = args.kind != "flat"
    sample = min(n, index.nlist * index.max_points_per_centroid) if ivf else 0
    train_units = sample * (index.niter + 1) if ivf else 0
    # one process builds: the journal, bar and record are this process's alone
    with Job(
        args, self_comm(), unit="vectors", total=train_units + n, backend=backend, key=key
    ) as job:
        t0 = time.perf_counter()
        with job.progress.phase(train_units):
            index.train(ds.train)
        with job.progress.phase(n):
            index.add(ds.train)
        seconds = time.perf_counter() - t0
        flops = _build_flops(args.kind, n, sample, dim, index)
        figures: dict[str, Any] = {"work": float(n), "work_unit": "vectors"}
        if flops:  # the assignments are GEMMs: set against this device's GEMM rate
            from hpc.runrecord import gemm_peak_flops

            figures.update(
                limit=gemm_peak_flops(backend) / 1e9,
                limit_unit="GFLOP/s",
                achieved=flops / max(seconds, 1e-12) / 1e9,
            )
        job.finish(**figures, extra={"index": args.kind, "build_seconds": seconds})
        with atomic_output(args.out) as tmp:
            index._save_into(tmp)  # one temporary (the one a rerun's cleanup finds)
            job.write_record(str(tmp), group=None)  # index files hold datasets only
        job.write(f"{index!r}: built in {seconds:.2f} s, saved to {args.out}")
    return 0


def _data_identity(path: str | None) -> Any:
    """Size and modification time of ``--data`` (hashing gigabytes would cost more than the
    build): a journal is resumed only for the same file."""
    if path is None:
        return None
    import os

    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _build_flops(kind: str, n: int, sample: int, dim: int, index: Any) -> float:
    """Floating-point operations of the GEMMs of a build: k-means assignments of the sample
    (``niter + 1`` passes) and the list assignment of every vector, ``2 dim`` per pair."""
    if kind == "flat":
        return 0.0
    pairs = sample * index.nlist * (index.niter + 1) + n * index.nlist
    return 2.0 * dim * pairs


def _search(args: argparse.Namespace) -> int:
    from ._base import load_index

    _check_out(args)
    comm = hpc.world()
    _backend(args)
    if comm.Get_rank() != 0:
        return 0
    index = load_index(args.index_file)
    ds, _ = _load_data(args, comm, shard=False)
    params = _params(index, args.nprobe, args.rerank)
    t0 = time.perf_counter()
    d, i = index.search(ds.test, args.k, **params)
    seconds = time.perf_counter() - t0
    summary: dict[str, Any] = {
        "queries": int(ds.test.shape[0]),
        "k": args.k,
        "seconds": seconds,
        "qps": ds.test.shape[0] / max(seconds, 1e-12),
        **params,
    }
    if ds.neighbors is not None:
        from .datasets import recall_at_k

        summary["recall"] = recall_at_k(i, ds.neighbors, args.k)
    if args.out:
        from hpc.io import atomic_output, open_file

        from hpc.comm import self_comm

        with atomic_output(args.out) as tmp, open_file(tmp, "w", comm=self_comm()) as f:
            f.create_dataset("distances", data=d)
            f.create_dataset("ids", data=i)
    if args.json:
        print(json.dumps(summary))
    else:
        print(", ".join(f"{k} {v}" for k, v in summary.items()))
    return 0


def _params(index: Any, nprobe: int | None, rerank: int | None) -> dict[str, Any]:
    from .ivf import _IVF, IVFPQIndex

    params: dict[str, Any] = {}
    if isinstance(index, _IVF) and nprobe is not None:
        params["nprobe"] = nprobe
    if isinstance(index, IVFPQIndex) and rerank:
        params["rerank"] = rerank
    return params


def _eval(args: argparse.Namespace) -> int:
    from hpc.collectives import allreduce, barrier

    from .datasets import recall_at_k
    from .flat import FlatIndex
    from .sharded import ShardedIndex

    comm = hpc.world()
    ds, _ = _load_data(args, comm, shard=True)
    dim = ds.train.shape[1]
    try:
        sweep = [int(v) for v in str(args.nprobe).split(",") if v.strip()]
    except ValueError:
        raise on_all_ranks(UsageError(f"--nprobe {args.nprobe!r} is not a list of ints")) from None
    if ds.neighbors is None:  # exact ground truth, sharded like the index
        truth = ShardedIndex(FlatIndex(dim, ds.metric, backend=args.backend), comm)
        truth.add(ds.train)
        _, ds.neighbors = truth.search(ds.test, args.k)
    index = ShardedIndex(_make_index(args, dim, ds.metric), comm)
    barrier(comm)
    t0 = time.perf_counter()
    index.train(ds.train)
    index.add(ds.train)
    build = allreduce(time.perf_counter() - t0, "max", comm)
    rows = []
    for nprobe in sweep if args.kind != "flat" else [None]:
        params = _params(index.local, nprobe, args.rerank)
        index.search(ds.test[: min(10, len(ds.test))], args.k, **params)  # compile, warm
        barrier(comm)
        t0 = time.perf_counter()
        _, found = index.search(ds.test, args.k, **params)
        seconds = allreduce(time.perf_counter() - t0, "max", comm)
        rows.append(
            {
                "nprobe": nprobe,
                "recall": recall_at_k(found, ds.neighbors, args.k),
                "qps": ds.test.shape[0] / max(seconds, 1e-12),
            }
        )
        if comm.rank == 0 and not args.json:
            print(
                f"nprobe {nprobe}: recall@{args.k} {rows[-1]['recall']:.4f}, "
                f"{rows[-1]['qps']:.1f} queries/s",
                flush=True,
            )
    if comm.rank == 0:
        if args.plot:
            _plot(args.plot, rows, args)
        record = {
            "index": args.kind,
            "ranks": comm.Get_size(),
            "k": args.k,
            "train": int(index.ntotal),
            "queries": int(ds.test.shape[0]),
            "build_seconds": build,
            "sweep": rows,
        }
        if args.json:
            print(json.dumps(record))
        else:
            print(f"built {args.kind} over {record['train']} vectors in {build:.2f} s")
    else:
        index.ntotal  # noqa: B018 - collective, matched with rank 0's call
    return 0


def _plot(path: str, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([r["recall"] for r in rows], [r["qps"] for r in rows], "o-", label=args.kind)
    for r in rows:
        ax.annotate(str(r["nprobe"]), (r["recall"], r["qps"]), fontsize=7)
    ax.set_xlabel(f"recall@{args.k}")
    ax.set_ylabel("queries per second")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
