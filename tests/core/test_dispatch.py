"""hpc.dispatch: a device table gives each backend its implementations, complete or refused."""

from __future__ import annotations

import numpy as np
import pytest

from hpc.backend import get_backend
from hpc.dispatch import DeviceTable


def test_each_device_gets_its_own_implementations_and_constants():
    table = DeviceTable("demo")
    table.constants("cpu", block=64)
    table.constants("gpu", block=4096)

    @table.cpu("total")
    def _total_cpu(x):
        return ("cpu", int(np.sum(x)))

    @table.gpu("total")
    def _total_gpu(x):
        return ("gpu", int(np.sum(x)))

    @table.both("scale")
    def _scale(x, c):
        return x * c

    cpu = table.on(get_backend("cpu"))
    assert (cpu.kind, cpu.block, cpu.total([1, 2, 3])) == ("cpu", 64, ("cpu", 6))
    gpu = table.on("gpu")
    assert (gpu.block, gpu.total([4]), gpu.scale(2, 3)) == (4096, ("gpu", 4), 6)
    assert cpu.scale is gpu.scale


def test_an_incomplete_or_ambiguous_table_is_refused():
    table = DeviceTable("demo")
    table.cpu("search")(lambda: None)
    table.cpu("merge")(lambda: None)
    table.gpu("search")(lambda: None)
    with pytest.raises(ValueError, match="demo: merge not implemented for gpu"):
        table.on("gpu")
    assert table.on("cpu").merge() is None
    with pytest.raises(ValueError, match="already registered for cpu"):
        table.cpu("search")(lambda: None)
    with pytest.raises(ValueError, match="device kind 'tpu'"):
        table.register("tpu", "search")
    with pytest.raises(ValueError, match="no implementations for device 'tpu'"):
        table.on("tpu")
