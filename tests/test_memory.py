"""hpc.memory: with freed memory kept, large arrays come from the heap and are reused."""

from __future__ import annotations

import subprocess
import sys

import pytest

_PROBE = r"""
import ctypes, sys
import numpy as np
from hpc.memory import keep_freed_memory

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2
if sys.argv[1] == "keep":
    assert keep_freed_memory()
before = libc.mallinfo2().hblkhd  # bytes in mmap'd blocks
a = np.ones(100 << 17)  # 100 MB
mapped = libc.mallinfo2().hblkhd - before
del a
free_after = libc.mallinfo2().fordblks  # free bytes kept in the heap
print(mapped, free_after)
"""


def _probe(mode: str) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True,
                         timeout=120, check=True)
    mapped, free_after = map(int, out.stdout.split())
    return mapped, free_after


def test_large_arrays_come_from_the_heap_and_stay_there():
    pytest.importorskip("numpy")
    try:
        default_mapped, _ = _probe("default")
    except subprocess.CalledProcessError as exc:  # no mallinfo2: not glibc 2.33+
        pytest.skip(f"glibc's mallinfo2 is not available: {exc.stderr.strip()[-200:]}")
    kept_mapped, kept_free = _probe("keep")
    assert default_mapped >= 100 << 20  # glibc's default: a 100 MB array is its own mmap
    assert kept_mapped == 0  # kept: from the heap
    assert kept_free >= 100 << 20  # and freeing it leaves the pages to the process


def test_arrow_buffers_come_from_a_jemalloc_pool_that_keeps_pages():
    pa = pytest.importorskip("pyarrow")
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow has no jemalloc")
    code = ("import pyarrow as pa\nfrom hpc.memory import keep_freed_memory\n"
            "ok = keep_freed_memory(arrow=True)\n"
            "a = pa.array(range(1 << 20))\n"
            "print(ok, pa.default_memory_pool().backend_name, a.nbytes > 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split() == ["True", "jemalloc", "True"]
