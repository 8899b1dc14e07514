"""``hpc align``: database search and pair alignment under MPI, hits to HDF5 (and SAM).

Examples::

    mpirun -n 2 hpc align search queries.fa db.fa --mode local --matrix BLOSUM62 \\
        --gap-open 11 --gap-extend 1 --top 10 --out hits.h5
    hpc align pairs reads.fq windows.fa --mode semi-global --matrix DNA --sam reads.sam
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import hpc  # lazy: MPI starts at the first hpc.world()
from hpc.errors import UsageError, check_count, check_output_path, on_all_ranks

__all__ = ["add_parser"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=["local", "global", "semi-global"], default="local")
    p.add_argument(
        "--matrix",
        default="BLOSUM62",
        help="BLOSUM45/50/62/80, PAM250, DNA or DNA:MATCH:MISMATCH[:N] (BLOSUM62)",
    )
    p.add_argument("--gap-open", type=int, default=11, help="gap open cost (11)")
    p.add_argument("--gap-extend", type=int, default=1, help="gap extend cost (1)")
    p.add_argument(
        "--gap-convention",
        choices=["blast", "first"],
        default="blast",
        help="blast: a gap of length L costs open + L*extend (BLAST, minimap2); first: "
        "open + (L-1)*extend (parasail, Biopython). Default blast",
    )
    p.add_argument("--band", type=int, default=None, help="band half-width (global, local)")
    p.add_argument("--out", default=None, help="HDF5 file for the table 'hits'")
    p.add_argument("--sam", default=None, help="SAM file of the hits (semi-global mode)")
    p.add_argument("--json", action="store_true", help="print the hits as JSON lines")
    p.add_argument("--quiet", action="store_true", help="no progress on rank 0")


def add_parser(sub: Any) -> None:
    """Register ``hpc align`` on the ``hpc`` parser's subparsers."""
    al = sub.add_parser("align", help="sequence alignment: search a database, align pairs")
    cmds = al.add_subparsers(dest="align_command", metavar="COMMAND", required=True)
    s = cmds.add_parser("search", help="the top hits of every query in a FASTA/FASTQ database")
    s.add_argument("queries", help="FASTA or FASTQ (plain or gzip)")
    s.add_argument("database", help="FASTA or FASTQ (plain or gzip)")
    s.add_argument("--top", type=int, default=10, help="hits per query (10)")
    s.add_argument("--executor", choices=["mpi", "local", "dask"], default="mpi")
    s.add_argument("--scheduler", default=None, help="Dask scheduler address (default: local)")
    s.add_argument("--backend", default="cpu", help="cpu, gpu or auto (cpu)")
    _common(s)
    s.set_defaults(func=_search)
    p = cmds.add_parser("pairs", help="align record k of one file with record k of another")
    p.add_argument("queries", help="FASTA or FASTQ (plain or gzip)")
    p.add_argument("targets", help="FASTA or FASTQ, as many records as the queries")
    _common(p)
    p.set_defaults(func=_pairs)


def _load(path: str) -> tuple[list[str], list[str], list[str | None]]:
    from hpc.io.errors import from_os_error

    from .seqio import read_sequences

    names, seqs, quals = [], [], []
    try:
        for rec in read_sequences(path):
            names.append(rec.name)
            seqs.append(rec.sequence)
            quals.append(rec.quality)
    except OSError as exc:  # missing, a directory, unreadable: the error names the file
        raise from_os_error(exc, "reading sequences", path) from None
    if not names:
        raise UsageError(f"{path}: no sequences (the file has no FASTA/FASTQ records)")
    return names, seqs, quals


def _check_options(args: argparse.Namespace) -> None:
    """Options that can be refused before any file is read."""
    check_count("--top", getattr(args, "top", 1), 1)
    if args.band is not None:
        check_count("--band", args.band)
        if args.mode == "semi-global":
            raise UsageError("--band needs --mode global or local")
    if args.sam and args.mode != "semi-global":
        raise UsageError("--sam needs --mode semi-global (reads aligned end to end)")
    check_output_path("--out", args.out)
    check_output_path("--sam", args.sam)


def _prepare(args: argparse.Namespace, qpath: str, tpath: str) -> Any:
    """Scoring and both inputs, read and checked on every rank alike."""
    from .scoring import Scoring

    comm = hpc.world()
    try:
        _check_options(args)
        scoring = Scoring(args.matrix, args.gap_open, args.gap_extend, args.gap_convention)
        q = _load(qpath)
        t = _load(tpath)
        from .batch import encode_all

        encode_all(q[1], scoring, f"{qpath}: query", q[0])  # letters checked up front
        encode_all(t[1], scoring, f"{tpath}: target", t[0])
    except (ValueError, OSError) as exc:  # bad input: every rank reads the same files
        raise on_all_ranks(exc) from None
    return comm, scoring, q, t


def _finish(args: argparse.Namespace, comm: Any, rows: dict[str, Any], q, t) -> int:
    import json

    from .search import write_hits

    if args.out:
        total = write_hits(args.out, rows, comm=comm)
        if comm.rank == 0 and not args.quiet:
            print(f"hpc align: {total} hits written to {args.out}:hits", file=sys.stderr)
    if args.sam or args.json or not args.out:
        mine = [
            {k: v[i].item() if hasattr(v[i], "item") else v[i] for k, v in rows.items()}
            for i in range(rows["score"].size)
        ]
        from hpc.collectives import gather_object

        everyone = gather_object(mine, 0, comm)
        if comm.rank == 0:
            allrows = [r for part in everyone for r in part]
            if args.sam:
                from .seqio import write_sam

                for r in allrows:
                    r["sequence"] = q[1][r["query_index"]]
                    r["quality"] = q[2][r["query_index"]]
                write_sam(args.sam, list(zip(t[0], (len(s) for s in t[1]), strict=True)), allrows)
            if args.json:
                for r in allrows:
                    print(json.dumps(r))
            elif not args.out and not args.sam:
                for r in allrows:
                    print(
                        f"{r['query']}\t{r['target']}\t{r['score']}\t"
                        f"{r['query_start']}-{r['query_end']}\t"
                        f"{r['target_start']}-{r['target_end']}\t{r['cigar']}\t"
                        f"{r['identity']:.3f}"
                    )
    return 0


def _search(args: argparse.Namespace) -> int:
    from .search import search

    comm, scoring, q, t = _prepare(args, args.queries, args.database)
    rows = search(
        q[1], t[1], scoring, args.mode, top=args.top, query_names=q[0], target_names=t[0],
        executor=args.executor, comm=comm, scheduler=args.scheduler, backend=args.backend,
        band=args.band, progress=not args.quiet,
    )  # fmt: skip
    return _finish(args, comm, rows, q, t)


def _pairs(args: argparse.Namespace) -> int:
    from .search import align_pair_list

    comm, scoring, q, t = _prepare(args, args.queries, args.targets)
    if len(q[1]) != len(t[1]):
        raise on_all_ranks(
            UsageError(
                f"{args.queries} has {len(q[1])} records but {args.targets} {len(t[1])}; pairs "
                "need equal counts"
            )
        )
    rows = align_pair_list(q[1], t[1], scoring, args.mode, q[0], t[0], comm=comm, band=args.band)
    return _finish(args, comm, rows, q, t)
