"""One error vocabulary: every library error is an ``hpc.HPCError`` (and the built-in kind it
is), and every command reports bad input one way: ``hpc <command>: error: <message>``, exit
status 2, no traceback, printed once on any number of ranks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hpc.launcher import mpirun_command
from tests.conftest import ROOT


def test_every_library_error_is_an_hpc_error_of_its_builtin_kind():
    from hpc.domains.align import AlphabetError, SequenceFormatError
    from hpc.domains.risk.portfolio import PortfolioError
    from hpc.domains.sql import SQLError, UnsupportedSQL
    from hpc.io import (
        CorruptDataError,
        LayoutMismatchError,
        MissingDataError,
        StorageError,
        StorageFullError,
        StoragePermissionError,
    )

    import hpc
    from hpc.backend import BackendUnavailableError
    from hpc.errors import UsageError

    value_errors = [SQLError, UnsupportedSQL, AlphabetError, SequenceFormatError,
                    PortfolioError, UsageError]
    storage = [StorageError, CorruptDataError, LayoutMismatchError, MissingDataError,
               StorageFullError, StoragePermissionError]
    for cls in [*value_errors, *storage, BackendUnavailableError]:
        assert issubclass(cls, hpc.HPCError), cls
    assert all(issubclass(c, ValueError) for c in value_errors)
    assert all(issubclass(c, OSError) and issubclass(c, StorageError) for c in storage)


def test_os_errors_become_the_storage_error_their_errno_says():
    import errno

    from hpc.io.errors import from_os_error

    cases = {errno.ENOSPC: "StorageFullError", errno.EDQUOT: "StorageFullError",
             errno.EROFS: "StoragePermissionError", errno.EPERM: "StoragePermissionError",
             errno.EACCES: "StoragePermissionError", errno.ENOENT: "MissingDataError",
             errno.EIO: "StorageError"}
    for code, name in cases.items():
        err = from_os_error(OSError(code, "reason"), "writing", "/data/f.h5", "u")
        assert type(err).__name__ == name
        assert str(err) == "writing failed: reason (file '/data/f.h5', dataset 'u')"
    # h5py gives no errno attribute, only its message
    err = from_os_error(OSError("Unable to create file (errno = 30, error message = 'Read-only"
                                " file system', flags = 13)"), "opening", "/ro/f.h5")
    assert type(err).__name__ == "StoragePermissionError"
    assert str(err) == "opening failed: Read-only file system (file '/ro/f.h5')"


def _hpc(*argv: str, nranks: int = 0, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "hpc", *argv]
    if nranks:
        cmd = mpirun_command(nranks, ["-m", "hpc", *argv])
    # Python's copy of the environment: an MPI singleton of this process edits the C one
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ))


@pytest.mark.parametrize(
    ("argv", "prefix", "words"),
    [
        (["risk", "price", "no/such/book.json"], "hpc risk price: error: ", "no/such/book.json"),
        (["warmup", "nosuch"], "hpc warmup: error: ", "'nosuch'"),
        (["vector", "search", "--index", "no/x.h5"], "hpc vector search: error: ",
         "opening with mode 'r' failed: No such file or directory (file 'no/x.h5')"),
        (["vector", "build", "--out", "x.h5"], "hpc vector build: error: ", "--synthetic"),
        (["cfd", "channel", "--dim", "3"], "hpc cfd channel: error: ", "2-D"),
    ],
)
def test_bad_input_is_one_line_exit_2_no_traceback(argv, prefix, words):
    proc = _hpc(*argv)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(prefix) and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_bad_sequences_and_sql_are_reported_alike(tmp_path):
    bad = tmp_path / "bad.fa"
    bad.write_text("ACGT without a header\n")
    proc = _hpc("align", "search", str(bad), str(bad))
    assert proc.returncode == 2 and proc.stderr.startswith("hpc align search: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and str(bad) in proc.stderr
    proc = _hpc("sql", "query", "SELEC 1", "--data", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and proc.stderr.startswith("hpc sql query: error: "), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_bad_input_on_three_ranks_is_reported_once():
    proc = _hpc("risk", "price", "no/such/book.json", nranks=3)
    assert proc.returncode != 0
    assert proc.stderr.count("hpc risk price: error: ") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
