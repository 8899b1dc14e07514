"""hpc.memory: with freed memory kept, large arrays come from the heap and are reused."""

from __future__ import annotations

import os
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


_ARROW_PROBE = r"""
import resource, sys, time
mode = sys.argv[1]
if mode == "keep":
    from hpc.memory import keep_freed_memory
    ok = keep_freed_memory(arrow=True)
import numpy as np
import pyarrow as pa
if mode == "late":  # pyarrow already loaded: only new arenas can be changed
    from hpc.memory import keep_freed_memory
    ok = keep_freed_memory(arrow=True)
if mode == "decay-only":  # what set_decay_ms alone does to the arenas jemalloc starts with
    pa.set_memory_pool(pa.jemalloc_memory_pool())
    pa.jemalloc_set_decay_ms(-1)
    ok = True

def faults():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt

def fill():
    buffer = pa.allocate_buffer(64 << 20)  # 16384 pages of 4 kB
    np.frombuffer(buffer, dtype=np.uint8)[:] = 1

fill()
time.sleep(1.2)  # past jemalloc's default decay of one second
fill()
before = faults()
fill()  # the same 64 MB again on the same thread
print(ok, pa.default_memory_pool().backend_name, faults() - before)
"""


def _arrow_probe(mode: str) -> tuple[str, str, int]:
    env = {k: v for k, v in os.environ.items() if k != "JE_ARROW_MALLOC_CONF"}
    out = subprocess.run([sys.executable, "-c", _ARROW_PROBE, mode], capture_output=True,
                         text=True, timeout=120, check=True, env=env)
    ok, backend, faults = out.stdout.split()
    return ok, backend, int(faults)


def test_arrow_buffers_come_from_a_jemalloc_pool_that_keeps_pages():
    pa = pytest.importorskip("pyarrow")
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow has no jemalloc")
    ok, backend, faults = _arrow_probe("keep")
    assert (ok, backend) == ("True", "jemalloc")
    assert faults < 1000  # the freed 64 MB are reused, not faulted in again
    # the control: the main thread's arena, made at start, purges after a second
    assert _arrow_probe("decay-only")[2] > 8000
    ok, backend, faults = _arrow_probe("late")
    assert (ok, backend) == ("False", "jemalloc")  # too late for the first arenas: said so
