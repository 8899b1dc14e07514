"""The library's one error root: every exception ``hpc`` raises on purpose is an
:class:`HPCError`, and also the built-in kind it is (``ValueError`` for bad input, ``OSError``
for storage), so ``except ValueError`` keeps working.

``all_ranks`` says the error was agreed among the ranks before it was raised (every rank of the
communicator raises it at the same point). An error raised on some ranks only, inside a
collective section, ends the job instead (:func:`hpc.comm.collective_section`): the others
could be waiting in a collective that never completes.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["HPCError", "UsageError", "on_all_ranks"]

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
