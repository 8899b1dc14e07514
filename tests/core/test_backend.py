"""Backend selection: CPU always works, GPU errors are clear, a broken CuPy falls back."""

from __future__ import annotations

import sys
import types

import numba
import numpy as np
import pytest

from hpc import backend as be


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    be._reset_cache()
    yield
    be._reset_cache()


def _broken_cupy(message: str) -> types.ModuleType:
    """A stand-in for CuPy installed on a machine without a CUDA driver."""
    cupy = types.ModuleType("cupy")

    def no_driver() -> int:
        raise RuntimeError(message)

    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=no_driver))
    return cupy


def test_cpu_backend_uses_numpy_and_numba():
    b = be.get_backend("cpu")
    assert b.name == "cpu" and b.xp is np and not b.is_gpu
    a = b.zeros((3, 4), np.float32)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32

    @numba.njit(parallel=True)
    def double(x, out):
        for i in numba.prange(x.size):
            out[i] = 2 * x[i]

    out = np.zeros(10)
    b.launch(double, (10,), np.arange(10.0), out)  # on the CPU: called once, it loops itself
    assert out.tolist() == [2.0 * i for i in range(10)]
    assert be.get_backend("cpu") is b


def test_auto_falls_back_to_cpu_when_cupy_has_no_driver(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "cupy", _broken_cupy("cudaErrorInsufficientDriver"))
    monkeypatch.setenv("HPC_BACKEND", "auto")
    with caplog.at_level("INFO", logger="hpc.backend"):
        b = be.get_backend()
    assert b.name == "cpu"
    assert "cudaErrorInsufficientDriver" in caplog.text


def test_gpu_without_a_device_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _broken_cupy("no CUDA-capable device"))
    monkeypatch.setenv("HPC_BACKEND", "gpu")
    with pytest.raises(be.BackendUnavailableError, match="HPC_BACKEND=gpu.*no CUDA-capable"):
        be.get_backend()


def test_cupy_missing_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    assert "not importable" in be.gpu_unavailable_reason()


def test_unknown_backend_name(monkeypatch):
    monkeypatch.setenv("HPC_BACKEND", "tpu")
    with pytest.raises(ValueError, match="HPC_BACKEND='tpu'"):
        be.get_backend()


def test_to_host_and_array_module_on_host_arrays():
    a = np.arange(3)
    assert be.to_host(a) is a
    assert be.array_module(a) is np
    assert not be.is_device_array(a)


@pytest.mark.gpu
def test_gpu_backend_allocates_on_the_device():
    b = be.get_backend("gpu")
    a = b.zeros((4, 4))
    assert be.is_device_array(a) and be.array_module(a) is b.xp
    assert np.array_equal(be.to_host(a), np.zeros((4, 4)))
