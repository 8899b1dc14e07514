"""The library's one error root: every exception ``hpc`` raises on purpose is an
:class:`HPCError`, and also the built-in kind it is (``ValueError`` for bad input, ``OSError``
for storage), so ``except ValueError`` keeps working.

``all_ranks`` says the error was agreed among the ranks before it was raised (every rank of the
communicator raises it at the same point). An error raised on some ranks only, inside a
collective section, ends the job instead (:func:`hpc.comm.collective_section`): the others
could be waiting in a collective that never completes.
"""

from __future__ import annotations

import os
from typing import TypeVar

__all__ = ["HPCError", "UsageError", "on_all_ranks", "check_output_path", "check_count"]

E = TypeVar("E", bound=BaseException)


class HPCError(Exception):
    """Root of the library's exceptions."""

    all_ranks: bool = False


class UsageError(HPCError, ValueError):
    """A command line that cannot be run as given (the message says which option and why)."""


def on_all_ranks(exc: E) -> E:
    """``exc``, marked as raised by every rank alike (input every rank reads the same way)."""
    exc.all_ranks = True  # type: ignore[attr-defined]
    return exc


def check_output_path(option: str, path: str | os.PathLike[str] | None) -> None:
    """Local. Refuse an output ``path`` whose directory does not exist, before any work is
    done (a long run must not fail at its last step); ``None`` passes.

    Raises
    ------
    UsageError
        Naming the option, the path and the missing directory.
    """
    if path is None:
        return
    parent = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {os.fspath(path)}: the directory {parent!r} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"{option} {os.fspath(path)}: is a directory, expected a file name")


def check_count(option: str, value: int, minimum: int = 0) -> None:
    """Local. Refuse a count option below ``minimum`` (``UsageError`` naming it)."""
    if value < minimum:
        raise UsageError(f"{option} {value}: expected {minimum} or more")
