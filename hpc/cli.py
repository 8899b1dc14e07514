"""The ``hpc`` command line: ``hpc info``, ``hpc bench NAME``, and one subcommand per domain.

Run it under MPI as ``mpirun -n N hpc ...``; progress and results print on rank 0 only. An
exception on any rank aborts the whole job (see :func:`hpc.comm.install_excepthook`).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from typing import Any

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

    comm = world()
    if comm.Get_rank() == 0:
        gpu = gpu_unavailable_reason()
        rows = [
            ("hpc", hpc.__version__),
            ("numpy / numba", f"{numpy.__version__} / {numba.__version__}"),
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

    module = importlib.import_module(BENCHMARKS[args.name])
    record: dict[str, Any] = module.run(args)
    if world().Get_rank() == 0:
        if args.json:
            print(json.dumps(record))
        else:
            print(json.dumps(record, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``hpc`` command (every option documented in ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="hpc",
        description="Parallel workloads on one core. Run under MPI as `mpirun -n N hpc ...`.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser("info", help="versions, MPI, parallel HDF5, GPU and backend in use")
    info.set_defaults(func=_info)

    for modname in filter(_present, DOMAINS.values()):
        importlib.import_module(modname).add_parser(sub)

    bench = sub.add_parser(
        "bench",
        help="benchmarks against peers in the same run (last line with --json: one JSON object)",
    )
    bench_sub = bench.add_subparsers(dest="name", metavar="NAME", required=True)
    for name, modname in BENCHMARKS.items():
        if not _present(modname):
            continue
        module = importlib.import_module(modname)
        p = bench_sub.add_parser(name, help=module.__doc__.strip().splitlines()[0])
        p.add_argument("--json", action="store_true", help="print one JSON line (the contract)")
        module.add_arguments(p)
        p.set_defaults(func=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpc`` console script."""
    from hpc.comm import install_excepthook
    from hpc.memory import keep_freed_memory

    install_excepthook()
    keep_freed_memory()  # columnar kernels reuse their memory instead of faulting it in
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
