"""A test driver that SIGKILLs jobs at random moments and resumes them (journal tests).

:func:`kill_chain` starts each launch in turn (a plain process, or ``mpirun -n N``), kills its
whole session with SIGKILL at a random moment (either any time after the start, or a random
time after the job's journal gained a segment, so most kills land inside the work), and checks
what the kill left behind. The caller then runs the job once more to completion and compares
its output with an uninterrupted run.

Open MPI puts every rank in a process group of its own, so a kill of mpirun's group would leave
the ranks running: the session (``start_new_session``) is what is killed, process by process.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpc.launcher import mpirun_command
from tests.conftest import ROOT


@dataclass
class Launch:
    """One run: ``argv`` after the interpreter (``["-m", "hpc.cli", ...]`` or a script), on
    ``nranks`` ranks under mpirun, or as a plain process when ``nranks`` is None."""

    argv: list[str]
    nranks: int | None = None

    def command(self) -> list[str]:
        if self.nranks is None:
            return [sys.executable, *self.argv]
        return mpirun_command(self.nranks, self.argv)

    def __str__(self) -> str:
        return f"{'plain' if self.nranks is None else f'mpirun -n {self.nranks}'} {self.argv}"


@dataclass
class Trial:
    launch: Launch
    mode: str
    segments_before: int
    segments_after: int
    finished: bool  # the job ended by itself before the kill
    temporaries: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}


def session_pids(sid: int) -> list[int]:
    """The processes of session ``sid`` (from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid:  # state, ppid, pgrp, session
            pids.append(int(entry))
    return pids


def kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process of ``proc``'s session (mpirun and its ranks), then reap it."""
    for _ in range(100):
        pids = session_pids(proc.pid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
        proc.poll()
    proc.wait(timeout=30)


def segments(journal: Path) -> int:
    """Files the journal holds besides its key (segments, iteration states)."""
    if not journal.is_dir():
        return 0
    try:
        return sum(1 for p in journal.iterdir() if p.name != "key.json" and ".tmp-" not in p.name)
    except FileNotFoundError:  # removed while we looked: the job completed
        return 0


def temporaries(where: Path) -> list[str]:
    """Every temporary (``.NAME.tmp-TOKEN``) under ``where``."""
    return sorted(str(p.relative_to(where)) for p in where.rglob("*") if ".tmp-" in p.name)


def kill_chain(
    launches: list[Launch],
    journal: Path,
    workdir: Path,
    rng: random.Random,
    max_delay: float,
    timeout: float = 30,
) -> list[Trial]:
    """Start each launch and SIGKILL it at a random moment; return what happened.

    ``max_delay``: the longest random wait after the first new segment in ``journal`` (mode
    ``working``); mode ``anytime`` waits up to four times that from the start. After each
    kill at most one temporary per rank (the segment each was writing) and one of the output
    may remain.
    """
    trials = []
    for launch in launches:
        trials.append(_trial(launch, journal, workdir, rng, max_delay, timeout,
                             rng.choice(["anytime", "working", "working"])))
    # a run that resumed a killed one's journal and was killed itself must be among them;
    # random moments on a fast machine may all miss the work: then two kills at the first
    # new piece of the journal make one
    for _ in range(4):
        if any(t.segments_before > 0 and not t.finished for t in trials):
            break
        trials.append(_trial(launches[-1], journal, workdir, rng, 0.0, timeout, "working"))
    return trials


def _trial(launch: Launch, journal: Path, workdir: Path, rng: random.Random,
           max_delay: float, timeout: float, mode: str) -> Trial:
    """Start ``launch``, SIGKILL it at a random moment (``mode`` as :func:`kill_chain`),
    check the temporaries it left."""
    before = segments(journal)
    with tempfile.TemporaryFile() as errors:  # kept for a launch that fails by itself
        return _kill_once(launch, journal, workdir, rng, max_delay, timeout, mode, before,
                          errors)


def _kill_once(launch: Launch, journal: Path, workdir: Path, rng: random.Random,
               max_delay: float, timeout: float, mode: str, before: int,
               errors: Any) -> Trial:
    proc = subprocess.Popen(
        launch.command(),
        cwd=workdir,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=errors,
        start_new_session=True,
    )
    start = time.monotonic()
    if mode == "working":  # wait for the job to journal something, then a little more
        while (
            proc.poll() is None
            and segments(journal) <= before
            and time.monotonic() - start < timeout
        ):
            time.sleep(0.01)
        if proc.poll() is None and segments(journal) <= before:
            kill_session(proc)
            raise AssertionError(f"{launch} journaled nothing in {timeout} s (a hang?)")
    # anytime: from the interpreter's start to well into the work
    delay = rng.uniform(0, max_delay if mode == "working" else 4 * max_delay)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        pass
    finished = proc.poll() is not None
    if finished and proc.returncode != 0:
        errors.seek(0)
        tail = errors.read().decode(errors="replace")[-4000:]
        raise AssertionError(f"{launch} failed by itself with exit status {proc.returncode}"
                             f"\n--- stderr (last 4000 characters)\n{tail}")
    kill_session(proc)
    left = temporaries(workdir)
    trial = Trial(
        launch, mode, before, segments(journal), finished, left, time.monotonic() - start
    )
    limit = (launch.nranks or 1) + 1
    assert len(left) <= limit, f"{len(left)} temporaries after killing {launch}: {left}"
    return trial


def run_to_completion(launch: Launch, workdir: Path, timeout: float = 120) -> str:
    """Run ``launch`` without a kill; its stdout (the job must succeed)."""
    proc = subprocess.run(
        launch.command(),
        cwd=workdir,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{launch} exited {proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def describe(trials: list[Trial]) -> str:
    """One line per trial, for failure messages."""
    return "\n".join(
        f"{t.launch}: {t.mode}, segments {t.segments_before}->{t.segments_after}, "
        f"{'finished' if t.finished else 'killed'} after {t.seconds:.1f} s, "
        f"temporaries {t.temporaries}"
        for t in trials
    )
