"""The ``hpc`` command line: ``hpc info``, ``hpc warmup``, ``hpc bench NAME``, and one
subcommand per domain.

``hpc --help`` imports no benchmark and initialises nothing: a benchmark module is imported only
when ``hpc bench`` is the command, the domains' command-line modules import their domain when a
command runs, and MPI starts at the first communication.

Run it under MPI as ``mpirun -n N hpc ...``; progress and results print on rank 0 only. An
exception on any rank aborts the whole job (see :func:`hpc.comm.install_excepthook`).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from typing import Any

from hpc.errors import HPCError, UsageError

__all__ = ["main", "BENCHMARKS"]

# name -> module under hpc.benchmarks; each module has add_arguments(parser) and run(args) -> dict
# domain command lines: name -> module with add_parser(subparsers)
DOMAINS = {
    "cfd": "hpc.domains.cfd.cli",
    "risk": "hpc.domains.risk.cli",
    "sql": "hpc.domains.sql.cli",
    "vector": "hpc.domains.vector.cli",
    "align": "hpc.domains.align.cli",
}
BENCHMARKS = {
    "halo": "hpc.benchmarks.halo",
    "io": "hpc.benchmarks.io",
    "lbm": "hpc.benchmarks.lbm",
    "mc": "hpc.benchmarks.mc",
    "tpch": "hpc.benchmarks.tpch",
    "sql": "hpc.benchmarks.sql",
    "join": "hpc.benchmarks.join",
    "knn": "hpc.benchmarks.knn",
    "align": "hpc.benchmarks.align",
}


def _present(modname: str) -> bool:
    """Whether a registered module is part of this installation (domains land one by one)."""
    return importlib.util.find_spec(modname) is not None


def _info(_: argparse.Namespace) -> int:
    import h5py
    import mpi4py
    import numba
    import numpy

    import hpc
    from hpc.backend import gpu_unavailable_reason
    from hpc.comm import cuda_aware_mpi, mpi_library, world
    from hpc.optlevel import level_in_force
    from hpc.threads import threading_layer

    comm = world()
    if comm.Get_rank() == 0:
        gpu = gpu_unavailable_reason()
        rows = [
            ("hpc", hpc.__version__),
            ("numpy / numba", f"{numpy.__version__} / {numba.__version__}"),
            ("numba threading layer", threading_layer()),
            ("numba optimisation (NUMBA_OPT)", level_in_force()),
            ("mpi4py", mpi4py.__version__),
            ("MPI library", mpi_library()),
            ("ranks", str(comm.Get_size())),
            ("CUDA-aware MPI", str(cuda_aware_mpi())),
            ("h5py / HDF5", f"{h5py.__version__} / {h5py.version.hdf5_version}"),
            ("h5py parallel (mpi)", str(h5py.get_config().mpi)),
            ("GPU", "usable" if gpu is None else gpu),
            ("backend (HPC_BACKEND)", hpc.get_backend().name),
        ]
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from hpc.comm import world
    from hpc.optlevel import level_in_force

    module = importlib.import_module(BENCHMARKS[args.name])
    record: dict[str, Any] = module.run(args)
    record.setdefault("numba_opt", level_in_force())  # for kernels compiled in this run
    if world().Get_rank() == 0:
        if args.json:
            print(json.dumps(record))
        else:
            print(json.dumps(record, indent=2))
    return 0


def _first_line_of_docstring(modname: str) -> str:
    """A module's summary line, read from its source without importing it."""
    spec = importlib.util.find_spec(modname)
    if spec is None or not spec.origin:
        return ""
    with open(spec.origin, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _warmup(args: argparse.Namespace) -> int:
    from hpc.warmup import DOMAINS, warmup

    unknown = [d for d in args.domains if d not in DOMAINS]
    if unknown:
        raise UsageError(
            f"unknown domain {', '.join(map(repr, unknown))}; expected some of {', '.join(DOMAINS)}"
        )
    failed = warmup(args.domains or None, quiet=args.quiet)
    return 1 if failed else 0


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``hpc`` command (every option documented in ``--help``).

    ``argv``: the command line about to be parsed; benchmark modules are imported (for their
    options) only when it runs ``hpc bench``. None: every benchmark is registered in full.
    """
    from hpc.warmup import DOMAINS as WARMUP_DOMAINS

    parser = argparse.ArgumentParser(
        prog="hpc",
        description="Parallel workloads on one core. Run under MPI as `mpirun -n N hpc ...`.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser("info", help="versions, MPI, parallel HDF5, GPU and backend in use")
    info.set_defaults(func=_info)

    warm = sub.add_parser(
        "warmup",
        help="compile the kernels of the named domains now (cached on disk for later runs)",
        description="Compile the kernels a domain uses, for the common types, into the on-disk "
        "caches (HPC_CACHE_DIR and numba's), one progress line per kernel group with its "
        "seconds. For cluster images, notebooks and CI: later processes load them instead.",
    )
    warm.add_argument(
        "domains",
        nargs="*",
        metavar="DOMAIN",
        help=f"some of {', '.join(WARMUP_DOMAINS)} (default: all)",
    )
    warm.add_argument("--quiet", action="store_true", help="print only failures")
    warm.set_defaults(func=_warmup)

    for modname in filter(_present, DOMAINS.values()):
        importlib.import_module(modname).add_parser(sub)

    words = list(sys.argv[1:] if argv is None else argv)
    full = argv is None or "bench" in words
    bench = sub.add_parser(
        "bench",
        help="benchmarks against peers in the same run (last line with --json: one JSON object)",
    )
    bench_sub = bench.add_subparsers(dest="name", metavar="NAME", required=True)
    for name, modname in BENCHMARKS.items():
        if not _present(modname):
            continue
        if not full or (name not in words and any(w in BENCHMARKS for w in words)):
            # summary only: the module is imported when this benchmark is the one run
            bench_sub.add_parser(name, help=_first_line_of_docstring(modname))
            continue
        module = importlib.import_module(modname)
        p = bench_sub.add_parser(name, help=module.__doc__.strip().splitlines()[0])
        p.add_argument("--json", action="store_true", help="print one JSON line (the contract)")
        module.add_arguments(p)
        p.set_defaults(func=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpc`` console script."""
    from hpc.excepthook import install_excepthook
    from hpc.memory import keep_freed_memory

    install_excepthook()
    keep_freed_memory()  # columnar kernels reuse their memory instead of faulting it in
    args = build_parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
    args.argv = ["hpc", *(sys.argv[1:] if argv is None else argv)]  # for run records
    try:
        return int(args.func(args) or 0)
    except (HPCError, ValueError, OSError) as exc:
        return _report(args, exc)


def _report(args: argparse.Namespace, exc: BaseException) -> int:
    """Bad input or a failed environment check: ``hpc <command>: error: <message>`` on stderr
    (once, by rank 0), exit status 2, no traceback. On several ranks only an error every rank
    raised alike is reported so; any other is re-raised, and the excepthook ends the job."""
    from hpc.excepthook import started_world

    comm = started_world()
    if comm is not None and comm.Get_size() > 1 and not getattr(exc, "all_ranks", False):
        raise exc
    if comm is None or comm.Get_rank() == 0:
        words = ["hpc", args.command]
        sub = getattr(args, f"{args.command}_command", None) or getattr(args, "name", None)
        if isinstance(sub, str):
            words.append(sub)
        print(f"{' '.join(words)}: error: {exc}", file=sys.stderr, flush=True)
    if comm is not None and comm.Get_size() > 1:
        # no rank exits (and has the launcher end the job) before rank 0's line is out
        comm.Barrier()
    return 2


if __name__ == "__main__":
    sys.exit(main())
