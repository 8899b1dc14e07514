"""``hpc align``: database search and pair alignment under MPI, hits to HDF5 (and SAM).

Examples::

    mpirun -n 2 hpc align search queries.fa db.fa --mode local --matrix BLOSUM62 \\
        --gap-open 11 --gap-extend 1 --top 10 --evalue 1e-5 --out hits.h5 --tabular hits.tsv
    hpc align store db.fa --out db.h5       # an HDF5 sequence store, searched in batches
    hpc align search queries.fa db.h5 --top 5 --sam hits.sam
    hpc align pairs reads.fq windows.fa --mode semi-global --matrix DNA --sam reads.sam
    mpirun -n 8 hpc align search q.fa db.h5 --journal search.j --out hits.h5 \\
        --metrics /var/lib/node_exporter/align.prom   # rerun the same line after a kill

``--journal DIR`` journals every scored block of database batches and resumes from it: rerun
the same command line after a crash or preemption, on any rank count or executor, and the
outputs are those of an uninterrupted run (:mod:`hpc.journal`). ``--out`` files carry a run
record (:mod:`hpc.runrecord`: GCUPS); a progress bar in cell updates shows on a terminal.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import hpc  # lazy: MPI starts at the first hpc.world()
from hpc.errors import UsageError, check_count, check_output_path, on_all_ranks
from hpc.jobs import add_job_options

__all__ = ["add_parser"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=["local", "global", "semi-global"], default="local")
    p.add_argument(
        "--matrix",
        default="BLOSUM62",
        help="BLOSUM45/50/62/80/90, PAM30/70/250, DNA or DNA:MATCH:MISMATCH[:N] (BLOSUM62)",
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
    p.add_argument(
        "--sam",
        default=None,
        help="SAM file of the hits (local hits soft-clipped, flag 16 on the minus strand)",
    )
    p.add_argument("--json", action="store_true", help="print the hits as JSON lines")


def add_parser(sub: Any) -> None:
    """Register ``hpc align`` on the ``hpc`` parser's subparsers."""
    al = sub.add_parser("align", help="sequence alignment: search a database, align pairs")
    cmds = al.add_subparsers(dest="align_command", metavar="COMMAND", required=True)
    s = cmds.add_parser("search", help="the top hits of every query in a FASTA/FASTQ database")
    s.add_argument("queries", help="FASTA or FASTQ (plain or gzip)")
    s.add_argument("database", help="FASTA or FASTQ (plain or gzip), or an HDF5 sequence store")
    s.add_argument("--top", type=int, default=10, help="hits per query (10)")
    s.add_argument("--executor", choices=["mpi", "local", "dask"], default="mpi")
    s.add_argument("--scheduler", default=None, help="Dask scheduler address (default: local)")
    s.add_argument("--backend", default="cpu", help="cpu, gpu or auto (cpu)")
    s.add_argument(
        "--evalue",
        type=float,
        default=None,
        help="keep hits of E-value at most this (local mode; the matrix and gaps need NCBI's "
        "published statistics: BLOSUM45/50/62/90, PAM30/70/250, blastn's DNA scores)",
    )
    s.add_argument(
        "--evalue-method",
        choices=["karlin", "spouge"],
        default="karlin",
        help="karlin: Karlin-Altschul with BLAST's length adjustment (BLAST with OLD_FSC, "
        "blastn); spouge: Spouge's finite-size correction (blastp's default). Default karlin",
    )
    s.add_argument(
        "--strand",
        choices=["plus", "both"],
        default=None,
        help="both: also align each query's reverse complement (DNA; the default for DNA)",
    )
    s.add_argument(
        "--batch",
        type=int,
        default=None,
        help="database sequences scored at a time (default: at most 16384, and about 4 million "
        "scores)",
    )
    s.add_argument(
        "--tabular", default=None, help="BLAST tabular file of the hits (-outfmt 6 columns)"
    )
    _common(s)
    add_job_options(
        s,
        journal_help="journal the scored database batches in DIR and resume from it when it "
        "exists (rerun the same command line after a kill, on any rank count: the same "
        "hits); removed when the outputs are written",
    )
    s.epilog = (
        "The database is a FASTA/FASTQ file or an HDF5 sequence store ('hpc align store'), "
        "read in batches: memory does not grow with it. Local hits get bit scores and "
        "E-values for the database's size."
    )
    s.set_defaults(func=_search)
    st = cmds.add_parser("store", help="write a FASTA/FASTQ file as an HDF5 sequence store")
    st.add_argument("sequences", help="FASTA or FASTQ (plain or gzip), streamed")
    st.add_argument("--out", required=True, help="the HDF5 sequence store to write")
    add_job_options(st, journal=False)
    st.set_defaults(func=_store)
    p = cmds.add_parser("pairs", help="align record k of one file with record k of another")
    p.add_argument("queries", help="FASTA or FASTQ (plain or gzip)")
    p.add_argument("targets", help="FASTA or FASTQ, as many records as the queries")
    _common(p)
    add_job_options(p, journal=False)
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
    if args.sam and args.mode != "semi-global" and args.align_command == "pairs":
        raise UsageError("--sam needs --mode semi-global for pairs (reads aligned end to end)")
    if getattr(args, "evalue", None) is not None:
        if not args.evalue > 0:
            raise UsageError(f"--evalue {args.evalue}: expected a positive number")
        if args.mode != "local":
            raise UsageError("--evalue needs --mode local (E-values are for local alignments)")
    if getattr(args, "batch", None) is not None:
        check_count("--batch", args.batch, 1)
    if getattr(args, "strand", None) == "both" and not args.matrix.upper().startswith("DNA"):
        raise UsageError("--strand both needs a DNA matrix (a protein has one strand)")
    check_output_path("--out", args.out)
    check_output_path("--sam", args.sam)
    check_output_path("--tabular", getattr(args, "tabular", None))


def _prepare(args: argparse.Namespace, qpath: str, tpath: str, stream: bool = False) -> Any:
    """Scoring and both inputs, read and checked on every rank alike. With ``stream`` the
    targets are a database opened (and counted), not read: their letters are checked batch
    by batch during the search."""
    from .scoring import Scoring

    comm = hpc.world()
    try:
        _check_options(args)
        scoring = Scoring(args.matrix, args.gap_open, args.gap_extend, args.gap_convention)
        if getattr(args, "evalue", None) is not None:
            from .stats import karlin_altschul

            karlin_altschul(scoring)  # refused before any file is read
        q = _load(qpath)
        from .batch import encode_all

        encode_all(q[1], scoring, f"{qpath}: query", q[0])  # letters checked up front
        if stream:
            t = _open_db(tpath)
        else:
            t = _load(tpath)
            encode_all(t[1], scoring, f"{tpath}: target", t[0])
    except (ValueError, OSError) as exc:  # bad input: every rank reads the same files
        raise on_all_ranks(exc) from None
    return comm, scoring, q, t


def _open_db(path: str) -> Any:
    from hpc.io.errors import from_os_error

    from .database import open_database

    try:
        db = open_database(path)
    except OSError as exc:
        raise from_os_error(exc, "reading sequences", path) from None
    if db.count == 0:
        raise UsageError(f"{path}: no sequences (the file has no FASTA/FASTQ records)")
    return db


def _finish(args: argparse.Namespace, comm: Any, rows: dict[str, Any], q, t, job: Any) -> int:
    """Collective. The outputs: ``--out`` (the table ``hits`` and the run record, one atomic
    file), then ``--sam``, ``--tabular`` and the terminal (rank 0)."""
    import json

    job.progress.close()  # the work is done: the lines below go to a clean terminal

    if args.out:
        from hpc.io import atomic_output, write_table

        with atomic_output(args.out, comm) as tmp:
            total = write_table(tmp, "hits", rows, comm=comm)
            job.write_record(tmp)
        if comm.rank == 0 and not args.quiet:
            print(f"hpc align: {total} hits written to {args.out}:hits", file=sys.stderr)
    if args.sam or args.json or getattr(args, "tabular", None) or not args.out:
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
                    if r.get("strand") == "-":
                        r["sequence"] = _revcomp(r["sequence"])
                # @SQ lines of the targets hit, in database order
                refs = sorted(
                    {(r["target_index"], r["target"], r["target_length"]) for r in allrows}
                )
                write_sam(args.sam, [(name, n) for _, name, n in refs], allrows)
            if getattr(args, "tabular", None):
                from .seqio import write_tabular

                write_tabular(args.tabular, allrows)
            if args.json:
                for r in allrows:
                    job.write(json.dumps(r))
            elif not (args.out or args.sam or getattr(args, "tabular", None)):
                for r in allrows:
                    job.write(
                        f"{r['query']}\t{r['target']}\t{r['score']}\t"
                        f"{r['query_start']}-{r['query_end']}\t"
                        f"{r['target_start']}-{r['target_end']}\t{r['cigar']}\t"
                        f"{r['identity']:.3f}\t{r['strand']}\t{r['evalue']:.3g}"
                    )
    return 0


def _revcomp(seq: str) -> str:
    return seq.upper().translate(str.maketrans("ACGTUN", "TGCAAN"))[::-1]


def _search(args: argparse.Namespace) -> int:
    from hpc.backend import BackendUnavailableError, get_backend
    from hpc.jobs import Job

    from .search import _strand_count, search

    comm, scoring, q, db = _prepare(args, args.queries, args.database, stream=True)
    try:  # resolved here: the run record names the backend the kernels ran on
        backend = get_backend(args.backend)
    except (BackendUnavailableError, ValueError) as exc:  # the same answer on every rank
        raise on_all_ranks(UsageError(f"--backend {args.backend}: {exc}")) from None
    # progress and rate in cell updates: query letters (both strands) x database letters
    cells = float(sum(map(len, q[1])) * _strand_count(args.strand, scoring) * db.residues)
    key = _search_key(args, q, db)
    with Job(args, comm, unit="cell updates", total=cells, backend=backend, key=key) as job:
        if job.journal is not None and job.journal.resumed and comm.rank == 0:
            _remove_stale_outputs(args)
        figures: dict[str, Any] = {}
        with job.progress.phase(cells):
            rows = search(
                q[1], db, scoring, args.mode, top=args.top, query_names=q[0],
                executor=args.executor, comm=comm, scheduler=args.scheduler,
                backend=backend, band=args.band, progress=not args.quiet,
                evalue=args.evalue, evalue_method=args.evalue_method, strand=args.strand,
                batch=args.batch, figures=figures,
            )  # fmt: skip
        if args.executor != "mpi" and comm.rank != 0:
            # every rank ran the whole search alike (local, dask): rank 0's rows are the table
            rows = {name: column[:0] for name, column in rows.items()}
        _finish_record(job, args, figures)
        return _finish(args, comm, rows, q, db, job)


def _search_key(args: argparse.Namespace, q: Any, db: Any) -> dict[str, Any]:
    """The journal's key: the options the hits depend on and the inputs' identity (the
    queries' SHA-256; the database's size and modification time, since hashing a large
    database would cost a pass over it). Output paths, ``--executor``, ``--scheduler``,
    ``--quiet``, ``--metrics`` and ``--backend`` (scores are exact integers on every
    backend) may differ between runs."""
    import hashlib
    import os

    from hpc.jobs import journal_key

    digest = hashlib.sha256()
    for name, seq in zip(q[0], q[1], strict=True):
        digest.update(f">{name}\n{seq}\n".encode())
    st = os.stat(args.database)
    return journal_key(
        args,
        exclude=("sam", "tabular", "backend"),
        queries_sha256=digest.hexdigest(),
        database_file={"size": st.st_size, "mtime_ns": st.st_mtime_ns},
        database_records={"count": db.count, "residues": db.residues},
    )


def _remove_stale_outputs(args: argparse.Namespace) -> None:
    """Rank 0 of a resumed run: the temporaries of ``--sam`` and ``--tabular`` a killed run
    was writing (:class:`hpc.jobs.Job` removes those of ``--out``)."""
    from hpc.journal import remove_stale_temporaries

    for path in (args.sam, args.tabular):
        if path:
            remove_stale_temporaries(path)


def _finish_record(job: Any, args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """Collective. The run record: GCUPS of the cell updates this run scored (a resumed run
    does not count the journal's), over the scoring phase's wall time."""
    scored = float(figures["scored_cell_updates"])
    seconds = float(figures["score_seconds"])
    job.finish(
        work=scored,
        work_unit="cell updates",
        rate=scored / max(seconds, 1e-12) / 1e9,
        rate_unit="GCUPS",
        extra={
            "executor": args.executor,
            "cell_updates": float(figures["cell_updates"]),
            "score_seconds": seconds,
            "blocks": int(figures["blocks"]),
            "resumed_blocks": int(figures["resumed_blocks"]),
        },
    )


def _store(args: argparse.Namespace) -> int:
    from hpc.jobs import Job

    from .database import write_store

    comm = hpc.world()
    try:
        check_output_path("--out", args.out)
    except UsageError as exc:
        raise on_all_ranks(exc) from None
    # a streaming pass of unknown length: no bar (rank 0 alone reads), the record and metrics
    with Job(args, comm, unit="letters", backend="cpu", journal=False) as job:

        def record(tmp: Any, count: int, residues: int) -> None:
            job.finish(work=float(residues), work_unit="letters", extra={"sequences": count})
            job.write_record(str(tmp))

        try:
            count, residues = write_store(args.out, args.sequences, comm=comm, before_commit=record)
        except (ValueError, OSError) as exc:  # every rank reads the same file
            raise on_all_ranks(exc) from None
    if comm.rank == 0 and not args.quiet:
        print(f"hpc align: {count} sequences ({residues} letters) written to {args.out}",
              file=sys.stderr)  # fmt: skip
    return 0


def _pairs(args: argparse.Namespace) -> int:
    from hpc.jobs import Job

    from .search import align_pair_list

    comm, scoring, q, t = _prepare(args, args.queries, args.targets)
    if len(q[1]) != len(t[1]):
        raise on_all_ranks(
            UsageError(
                f"{args.queries} has {len(q[1])} records but {args.targets} {len(t[1])}; pairs "
                "need equal counts"
            )
        )
    cells = float(sum(len(a) * len(b) for a, b in zip(q[1], t[1], strict=True)))
    with Job(args, comm, unit="cell updates", total=cells, backend="cpu", journal=False) as job:
        import time

        t0 = time.perf_counter()
        rows = align_pair_list(
            q[1], t[1], scoring, args.mode, q[0], t[0], comm=comm, band=args.band
        )
        from hpc.collectives import allreduce

        seconds = float(allreduce(time.perf_counter() - t0, "max", comm))
        job.progress.update(cells)
        job.finish(
            work=cells,
            work_unit="cell updates",
            rate=cells / max(seconds, 1e-12) / 1e9,
            rate_unit="GCUPS",
            extra={"align_seconds": seconds},
        )
        return _finish(args, comm, rows, q, t, job)
