"""``hpc.config.settings``: a snapshot of the ``HPC_*`` variables that follows every change
of the environment between calls (it is kept only while they stay the same)."""

from __future__ import annotations

import pytest

from hpc.config import settings


def test_settings_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HPC_BACKEND", "cpu")
    monkeypatch.setenv("HPC_CACHE_DIR", str(tmp_path / "a"))
    first = settings()
    assert (first.backend, first.cache_dir) == ("cpu", str(tmp_path / "a"))
    assert settings() is first  # unchanged variables: the same snapshot
    monkeypatch.setenv("HPC_BACKEND", "GPU ")
    monkeypatch.setenv("HPC_CACHE_DIR", str(tmp_path / "b"))
    second = settings()
    assert (second.backend, second.cache_dir) == ("gpu", str(tmp_path / "b"))
    monkeypatch.setenv("HPC_BACKEND", "tpu")
    for _ in range(2):  # a bad value is refused on every call, never kept
        with pytest.raises(ValueError, match="HPC_BACKEND='tpu'"):
            settings()
    monkeypatch.delenv("HPC_BACKEND")
    monkeypatch.delenv("HPC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    third = settings()
    assert (third.backend, third.cache_dir) == ("auto", str(tmp_path / "xdg" / "hpc"))


def test_the_snapshot_reads_what_os_environ_reads(monkeypatch, tmp_path):
    """The fast snapshot (the environment's own dictionary of encoded names) equals
    ``os.environ.get`` of every name, set, changed, non-ASCII or removed."""
    import os

    from hpc.config import _NAMES, _snapshot

    def want() -> tuple:
        return tuple(os.environ.get(name) for name in _NAMES)

    def snapshot() -> tuple:  # the raw values, decoded as os.environ decodes them
        return tuple(None if v is None else os.environ.decodevalue(v) for v in _snapshot())

    assert snapshot() == want()
    monkeypatch.setenv("HPC_IO_MODE", "serial")
    monkeypatch.setenv("HPC_CACHE_DIR", str(tmp_path / "été"))
    assert snapshot() == want()
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("HPC_IO_MODE")
    assert snapshot() == want()
    assert settings().cache_dir == str(tmp_path / "été")
