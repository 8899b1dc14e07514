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
