"""``hpc risk``: price a portfolio by Monte Carlo under MPI, results to the terminal and HDF5.

Examples::

    mpirun -n 2 hpc risk price examples/portfolio.json --paths 1e7 --out risk.h5
    hpc risk price examples/portfolio.json --executor dask
    hpc risk price examples/portfolio.json --executor local --backend gpu
    mpirun -n 4 hpc risk price book.json --paths 1e9 --journal run.j --out risk.h5 \
        --metrics /var/lib/node_exporter/hpc.prom   # rerun the same line after a kill

``--journal DIR`` journals every finished batch of paths (scenarios) and resumes from it:
rerun the same command line after a crash or preemption, on any rank count or executor, and
the results are bitwise those of an uninterrupted run (:mod:`hpc.journal`). ``--out`` files
carry a run record (:mod:`hpc.runrecord`); a progress bar shows on a terminal.

Every instrument is priced by :func:`.engine.price` (American options by Longstaff-Schwartz,
on the same executor; their regression runs on the host whatever ``--backend`` says).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import hpc  # lazy: MPI starts at the first hpc.world()
from hpc.errors import UsageError, on_all_ranks
from hpc.jobs import add_job_options

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Register ``hpc risk`` on the ``hpc`` parser's subparsers."""
    risk = sub.add_parser("risk", help="Monte Carlo option pricing (reproducible on any ranks)")
    cmds = risk.add_subparsers(dest="risk_command", metavar="COMMAND", required=True)
    p = cmds.add_parser("price", help="price every instrument of a JSON or YAML portfolio")
    p.add_argument("portfolio", help="portfolio file (.json, .yaml)")
    p.add_argument("--paths", type=float, default=1e6, help="paths per instrument (1e6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-antithetic", action="store_true")
    p.add_argument("--no-control-variate", action="store_true")
    p.add_argument("--no-greeks", action="store_true",
                   help="prices only (a barrier then runs without its bumped copies)")
    p.add_argument("--executor", choices=["mpi", "local", "dask"], default="mpi")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (default: local)")
    p.add_argument(
        "--backend",
        choices=["cpu", "gpu"],
        default=None,
        help="device of the path kernels (default: HPC_BACKEND, else auto)",
    )
    p.add_argument("--out", default=None, help="HDF5 file for the results table 'prices'")
    p.add_argument("--json", action="store_true", help="print the results as one JSON line")
    add_job_options(p)
    p.set_defaults(func=_price)
    v = cmds.add_parser("var", help="value at risk and expected shortfall of a risk book")
    v.add_argument("book", help="book file (.json, .yaml): market and positions")
    v.add_argument("--method", choices=["mc", "historical"], default="mc")
    v.add_argument(
        "--returns",
        default=None,
        help="historical: FILE.h5:TABLE of daily log returns, one column per asset",
    )
    v.add_argument("--horizon-days", type=float, default=10.0, help="horizon (250-day year)")
    v.add_argument("--scenarios", type=float, default=1e6, help="Monte Carlo scenarios")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--var-level", type=float, default=0.99)
    v.add_argument("--es-level", type=float, default=0.975)
    v.add_argument("--json", action="store_true", help="print the result as one JSON line")
    add_job_options(v)
    v.set_defaults(func=_var)


def _count(option: str, value: float, minimum: int) -> int:
    """A whole-number option (given as a float, ``1e6``) checked before any work starts."""
    if not math.isfinite(value) or value != int(value) or value < minimum:
        raise on_all_ranks(UsageError(f"{option} {value:g}: expected a whole number >= {minimum}"))
    return int(value)


def _check_out(out: str | None) -> None:
    """Refuse an output path that cannot be written before computing anything (so a bad
    ``--out`` costs nothing and leaves nothing behind)."""
    if out is None:
        return
    path = Path(out)
    if path.is_dir():
        raise on_all_ranks(UsageError(f"--out {out}: is a directory"))
    parent = path.parent
    if not parent.is_dir():
        raise on_all_ranks(UsageError(f"--out {out}: no such directory {str(parent)!r}"))


def _price(args: argparse.Namespace) -> int:
    from hpc.backend import BackendUnavailableError, get_backend

    from .american import American
    from .engine import price
    from .portfolio import PortfolioError, load_portfolio

    comm = hpc.world()
    try:
        book = load_portfolio(args.portfolio)
    except PortfolioError as exc:  # every rank reads the same file
        raise on_all_ranks(exc) from None
    lsm = any(isinstance(option, American) for option in book.instruments)
    args.paths = _count("--paths", args.paths, 10 if lsm else 2)
    _check_out(args.out)
    try:
        backend = get_backend(getattr(args, "backend", None))
    except BackendUnavailableError as exc:  # the same answer on every rank of a node
        raise on_all_ranks(UsageError(f"--backend {args.backend}: {exc}")) from None
    from hpc.jobs import Job, journal_key

    key = journal_key(args, backend=backend.name, portfolio=_digest(args.portfolio))
    total = float(args.paths) * len(book.instruments)
    with Job(args, comm, unit="paths", total=total, backend=backend, key=key) as job:
        rows: list[dict[str, Any]] = []
        for i, (name, option) in enumerate(zip(book.names, book.instruments, strict=True)):
            # one entry point: American options go to Longstaff-Schwartz on the same executor
            with job.progress.phase(args.paths):
                r = price(
                    book.model,
                    option,
                    paths=int(args.paths),
                    seed=args.seed,
                    stream=i,
                    antithetic=not args.no_antithetic,
                    control_variate=not args.no_control_variate,
                    greeks=not args.no_greeks,
                    executor=args.executor,
                    comm=comm,
                    scheduler=args.scheduler,
                    backend=backend,
                )
            rows.append(_row(name, option, r))
            if not args.json:
                job.write(_line(name, r))
        job.finish(
            work=float(sum(row["paths"] for row in rows)),
            work_unit="paths",
            extra={"executor": args.executor},
        )
        if args.out:
            _write_prices(args.out, rows, comm, job)
    if comm.rank == 0 and args.json:
        print(json.dumps(rows))
    return 0


def _digest(path: str) -> str:
    """SHA-256 of an input file: a journal is resumed only for the same content."""
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _write_prices(out: str, rows: list[dict[str, Any]], comm: Any, job: Any) -> None:
    """Collective. The table ``prices`` and the run record into ``out``, atomically: a kill
    leaves the old file (or none), never half a file. An existing file keeps its other
    content (it is copied into the temporary first)."""
    import shutil

    import numpy as np
    from hpc.io import atomic_output, write_table

    mine = rows if comm.rank == 0 else []
    columns = {
        key: np.array(
            [row[key] for row in mine],
            dtype=object if key in ("name", "type") else np.float64 if key != "paths" else np.int64,
        )
        for key in rows[0]
    }
    for key in ("name", "type"):
        columns[key] = np.array([str(v) for v in columns[key]], dtype=str)
    with atomic_output(out, comm) as tmp:
        if comm.rank == 0 and Path(out).is_file():
            shutil.copyfile(out, tmp)  # the collective open in write_table waits for this
        write_table(tmp, "prices", columns, comm=comm)
        job.write_record(tmp)


def _row(name: str, option: Any, r: Any) -> dict[str, Any]:
    nan = float("nan")
    return {
        "name": name,
        "type": type(option).__name__,
        "price": r.price,
        "stderr": r.stderr,
        "ci95_low": r.ci95[0],
        "ci95_high": r.ci95[1],
        "delta": nan if r.delta is None else r.delta,
        "vega": nan if r.vega is None else r.vega,
        "paths": r.paths,
        "seconds": r.seconds,
    }


def _line(name: str, r: Any) -> str:
    return (
        f"{name:>20s}  {r.price:12.6f} +- {r.stderr:.6f}  "
        f"[{r.ci95[0]:.6f}, {r.ci95[1]:.6f}]  {r.paths:,} paths  "
        f"{r.paths / max(r.seconds, 1e-12):.3g} paths/s"
    )


def _var(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from .portfolio import PortfolioError, load_book
    from .var import monte_carlo_var

    comm = hpc.world()
    try:
        market, positions = load_book(args.book)
    except PortfolioError as exc:  # every rank reads the same file
        raise on_all_ranks(exc) from None
    if not (math.isfinite(args.horizon_days) and args.horizon_days > 0):
        raise on_all_ranks(UsageError(f"--horizon-days {args.horizon_days:g}: must be > 0"))
    for option, level in (("--var-level", args.var_level), ("--es-level", args.es_level)):
        if not 0.5 < level < 1:
            raise on_all_ranks(UsageError(f"{option} {level:g}: must lie in (0.5, 1)"))
    if args.method == "mc":
        args.scenarios = _count("--scenarios", args.scenarios, 1)
    horizon = args.horizon_days / 250.0
    levels = dict(var_level=args.var_level, es_level=args.es_level)
    from hpc.backend import get_backend
    from hpc.jobs import Job, journal_key

    backend = get_backend(None)
    if args.method == "historical" and (not args.returns or ":" not in args.returns):
        raise on_all_ranks(UsageError("--method historical needs --returns FILE.h5:TABLE"))
    key = journal_key(args, backend=backend.name, book=_digest(args.book))
    total = float(args.scenarios) if args.method == "mc" else None
    with Job(args, comm, unit="scenarios", total=total, backend=backend, key=key) as job:
        if args.method == "mc":
            with job.progress.phase(args.scenarios):
                res = monte_carlo_var(
                    market,
                    positions,
                    horizon,
                    int(args.scenarios),
                    args.seed,
                    executor="mpi",
                    comm=comm,
                    **levels,
                )
        else:
            res = _historical(args, market, positions, horizon, levels)
        job.finish(work=float(res.scenarios), work_unit="scenarios")
    if comm.rank == 0:
        if args.json:
            print(json.dumps(asdict(res)))
        else:
            print(
                f"portfolio value {res.value:.4f}; horizon {args.horizon_days:g} days, "
                f"{res.scenarios:,} scenarios ({args.method})"
            )
            print(f"VaR {res.var_level:.1%}: {res.var:.4f}   ES {res.es_level:.1%}: {res.es:.4f}")
    return 0


def _historical(
    args: argparse.Namespace, market: Any, positions: Any, horizon: float, levels: Any
) -> Any:
    """VaR and ES from the daily log returns of ``--returns FILE.h5:TABLE``."""
    import numpy as np
    from hpc.io import read_table

    from .var import historical_var

    file, table = args.returns.rsplit(":", 1)
    columns = read_table(file, table)
    if not columns:
        raise UsageError(f"--returns {args.returns}: the table has no columns")
    for name, column in columns.items():
        if np.asarray(column).dtype.kind not in "iuf":
            raise UsageError(
                f"--returns {args.returns}: column {name!r} is not numeric "
                f"({np.asarray(column).dtype})"
            )
    returns = np.column_stack([np.asarray(c, dtype=np.float64) for c in columns.values()])
    return historical_var(market, positions, returns, horizon, **levels)
