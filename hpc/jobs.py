"""What every long command shares: ``--journal``, ``--quiet``, ``--metrics``, and the
:class:`Job` that wires a journal, a progress bar, a run record and a metrics file together.

A command line registers the options with :func:`add_job_options` and runs its work inside a
:class:`Job`::

    def add_parser(sub):
        p = sub.add_parser("price", ...)
        ...
        add_job_options(p)                      # --journal DIR, --quiet, --metrics FILE

    def _price(args):
        comm = hpc.world()
        with Job(args, comm, unit="paths", total=n * paths, backend=backend.name) as job:
            for ...:
                with job.progress.phase(paths):  # map_blocks inside: journaled, counted
                    ...
            record = job.finish(work=n * paths, work_unit="paths")
            with atomic_output(args.out, comm) as tmp:
                write_table(tmp, ...)
                job.write_record(tmp)
        # leaving the block: the journal is removed, --metrics written (rank 0)

On an error the journal stays for the rerun and no metrics are written.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import UsageError, check_output_path, on_all_ranks

__all__ = ["add_job_options", "journal_key", "Job", "NOT_IN_KEY"]

# options that do not change the results: a journal written with other values is resumed
NOT_IN_KEY = frozenset(
    {"journal", "quiet", "metrics", "executor", "scheduler", "json", "out", "func", "plot", "argv"}
)


def add_job_options(
    parser: argparse.ArgumentParser, journal: bool = True, journal_help: str | None = None
) -> None:
    """Register ``--journal DIR`` (unless ``journal=False``), ``--quiet`` and
    ``--metrics FILE`` on a subcommand's parser."""
    if journal:
        parser.add_argument(
            "--journal",
            metavar="DIR",
            default=None,
            help=journal_help
            or "journal finished work in DIR and resume from it when it exists (after a crash "
            "or preemption, on any rank count); removed when the run completes",
        )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bar (it shows only on a terminal)"
    )
    parser.add_argument(
        "--metrics",
        metavar="FILE",
        default=None,
        help="write the run's figures in Prometheus' text format to FILE (for a node "
        "exporter's textfile collector)",
    )


def journal_key(
    args: argparse.Namespace, exclude: Iterable[str] = (), **extra: Any
) -> dict[str, Any]:
    """Local. The arguments the results depend on: every option of ``args`` except
    :data:`NOT_IN_KEY` and ``exclude``, plus ``extra`` (resolved values such as the backend's
    name). The library version is added by :class:`hpc.journal.Journal`."""
    skip = NOT_IN_KEY | set(exclude)
    key = {
        k: v
        for k, v in sorted(vars(args).items())
        if k not in skip and not callable(v) and not k.endswith("_command")
    }
    key["command"] = " ".join(
        str(getattr(args, k)) for k in sorted(vars(args)) if k.endswith("_command")
    )
    key.update(extra)
    return key


class Job:
    """Collective over ``comm``. A command's run: journal, progress bar, run record, metrics.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line, with the options of :func:`add_job_options` (missing ones
        count as not given) and ``out`` when the command writes a file.
    comm : MPI.Comm, optional
        The run's ranks (default :func:`hpc.comm.world`).
    unit : str
        The progress bar's unit (``paths``, ``scenarios``, ``vectors``, ``steps``).
    total : float, optional
        Units of the whole run.
    backend : str or Backend, optional
        Recorded in the run record; ``gpu`` samples the GPU with NVML.
    key : mapping, optional
        The journal's key (default :func:`journal_key` of ``args``).
    journal : bool
        False: ``--journal`` is the command's own business (the CFD solver's checkpoints);
        no :class:`hpc.journal.Journal` is opened.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        comm: Any = None,
        *,
        unit: str,
        total: float | None = None,
        backend: Any = None,
        key: Mapping[str, Any] | None = None,
        journal: bool = True,
        desc: str | None = None,
    ) -> None:
        from .comm import resolve_comm

        self.args = args
        self.comm = resolve_comm(comm)
        self.unit = unit
        self.total = total
        self.backend = backend
        self.desc = desc
        self._key = key
        self._use_journal = journal and getattr(args, "journal", None) is not None
        self.metrics_path: str | None = getattr(args, "metrics", None)
        try:
            check_output_path("--metrics", self.metrics_path)
        except UsageError as exc:
            raise on_all_ranks(exc) from None
        self.journal: Any = None
        self.progress: Any = None
        self.run_record: Any = None
        self.record: dict[str, Any] | None = None

    def __enter__(self) -> Job:
        from .journal import Journal, remove_stale_temporaries
        from .progress import Progress
        from .runrecord import RunRecord

        self.run_record = RunRecord(self.comm, self.backend, getattr(self.args, "argv", None))
        if self._use_journal:
            key = self._key if self._key is not None else journal_key(self.args)
            self.journal = Journal(self.args.journal, key, self.comm)
            out = getattr(self.args, "out", None)
            if self.journal.resumed and out and self.comm.Get_rank() == 0:
                # what a killed run was writing: the output is written anew
                remove_stale_temporaries(out)
            self.journal.__enter__()
        self.progress = Progress(
            self.total,
            self.unit,
            self.comm,
            enabled=not getattr(self.args, "quiet", False),
            desc=self.desc,
        )
        return self

    def finish(self, **figures: Any) -> dict[str, Any]:
        """Collective. Stop the clock; the run record (:meth:`hpc.runrecord.RunRecord.finish`
        takes the same keywords: ``rate``, ``rate_unit``, ``work``, ``work_unit``, ``limit``,
        ``limit_unit``, ``achieved``, ``extra``)."""
        self.record = self.run_record.finish(**figures)
        return self.record

    def write_record(self, path_or_group: Any, group: str | None = "run") -> None:
        """Collective. Store the run record (call :meth:`finish` first) in an HDF5 file or
        open group (:func:`hpc.runrecord.write_run_record`; ``group=None``: as the root
        attribute ``run_record``)."""
        from .runrecord import write_run_record

        if self.record is None:
            raise RuntimeError("Job.write_record before Job.finish")
        write_run_record(path_or_group, self.record, self.comm, group=group)

    def write(self, text: str) -> None:
        """Local. Print a line on rank 0 without breaking the progress bar."""
        self.progress.write(text)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.progress is not None:
            self.progress.close()
        if self.run_record is not None and self.run_record.sampler is not None:
            self.run_record.sampler.stop()  # idempotent: the thread ends with the run
        if self.journal is not None:
            self.journal.__exit__(exc_type, exc, tb)  # completes (removes) only on success
        if exc_type is None and self.record is None:
            self.finish()  # every rank leaves without an error: the collective is matched
        if exc_type is None and self.metrics_path and self.comm.Get_rank() == 0:
            from .metrics import write_metrics

            write_metrics(self.metrics_path, self.record or {})
