"""Peaks of the GPU measured in the same run: what a GPU benchmark's fraction is taken against.

No spec-sheet figure enters a fraction: each peak is timed on the device the benchmark ran
on, just before or after it, with the simplest code that reaches it.

``copy_bandwidth``
    A device-to-device copy of a large array (CuPy), bytes read + written per second: the
    ceiling of a memory-bound kernel (LBM, halo packing, hash join).
``matmul_rate``
    One large matrix product (cuBLAS through CuPy) in a given precision, 2 n^3 flops over its
    seconds: the ceiling of a GEMM-bound search (exact k-NN).
``fma_rate``
    Independent chains of fused multiply-adds (numba.cuda; an FMA counts 2 flops) in float32
    or float64 on every thread of a full device: the scalar floating-point ceiling of a kernel
    that cannot use the tensor cores (Monte Carlo paths).
``int32_rate``
    Independent chains of an int32 add then max on every thread (numba.cuda): the ceiling of a
    dynamic-programming cell update built of those two operations (Smith-Waterman). Hopper may
    issue an add and a max as one DPX instruction; rates count operations, as the alignment
    benchmark's cell count does.

The numba.cuda kernels run on numba's current device, CuPy's work on CuPy's: the same one in
a one-process run, which is what the GPU benchmarks measure these peaks for.

The numba.cuda kernels also run under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) at a
tiny launch (``blocks``, ``threads``, ``iterations``), which is how they are tested; the
figures they give there mean nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda, int32

__all__ = ["copy_bandwidth", "matmul_rate", "fma_rate", "int32_rate", "fraction", "CHAINS"]

CHAINS = 8  # independent dependency chains per thread: enough to hide an FMA's latency


def fraction(work: float, seconds: float, peak: float) -> float:
    """``work / seconds / peak``: the share of a measured peak rate that a run reached.

    Parameters
    ----------
    work : float
        Units of work done (bytes moved, flops, int32 operations).
    seconds : float
        Seconds the work took.
    peak : float
        The peak rate in the same units per second.

    Returns
    -------
    float
        The fraction (1.0: the run went at the peak).

    Raises
    ------
    ValueError
        When ``seconds`` or ``peak`` is not positive.
    """
    if not seconds > 0 or not peak > 0:
        raise ValueError(f"fraction of peak: seconds {seconds} and peak {peak} must be > 0")
    return work / seconds / peak


def _best(fn: Callable[[], None], sync: Callable[[], None], reps: int) -> float:
    """The fastest of ``reps`` timed calls of ``fn`` (after one untimed), each synchronised."""
    fn()
    sync()
    best = math.inf
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def copy_bandwidth(xp: Any, nbytes: int = 1 << 30, reps: int = 10, comm: Any = None) -> float:
    """Device copy rate in bytes per second (bytes read + written), the best of ``reps``.

    Parameters
    ----------
    xp : module
        CuPy (or :data:`hpc.testing.device.xp` under the simulator).
    nbytes : int
        Bytes of the copied array.
    reps : int
        Timed copies; the fastest counts.
    comm : MPI communicator, optional
        Collective when given: every rank copies at once (barrier-aligned), the slowest rank's
        time counts and the rate is the sum over the ranks, so ranks that share a device
        share its bandwidth, as they do in the benchmark.

    Returns
    -------
    float
        Bytes per second.
    """
    src = xp.ones(max(1, nbytes // 8))
    dst = xp.empty_like(src)
    moved = 2 * 8 * src.size

    def copy() -> None:
        dst[...] = src

    sync = xp.cuda.Device().synchronize
    if comm is None:
        return moved / _best(copy, sync, reps)
    from mpi4py import MPI

    copy()
    sync()
    best = math.inf
    for _ in range(max(1, reps)):
        comm.Barrier()
        t0 = time.perf_counter()
        copy()
        sync()
        best = min(best, comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return comm.Get_size() * moved / best


def matmul_rate(xp: Any, dtype: Any = np.float32, size: int = 8192, reps: int = 3) -> float:
    """Flops per second of one ``size`` x ``size`` matrix product in ``dtype`` (2 size^3
    flops), the best of ``reps``: cuBLAS's GEMM through CuPy, with CuPy's default math mode."""
    a = xp.ones((size, size), dtype=dtype)
    b = xp.ones((size, size), dtype=dtype)
    c = xp.empty((size, size), dtype=dtype)
    seconds = _best(lambda: xp.matmul(a, b, out=c), xp.cuda.Device().synchronize, reps)
    return 2.0 * size**3 / seconds


# -- the numba.cuda kernels: CHAINS independent chains a thread, one store at the end -------


@cuda.jit(device=True, inline=True)
def _max32(v: Any, w: Any) -> Any:
    return int32(v if v > w else w)


@cuda.jit
def _fma_chains(out: Any, seed: Any, a: Any, b: Any, iterations: int) -> None:
    # the chains start from distinct values read at run time (equal ones would be merged),
    # and x * b + a is contracted to one FMA by NVVM; |b| < 1 keeps x bounded and normal
    i = cuda.grid(1)
    x0, x1, x2, x3 = seed[0], seed[1], seed[2], seed[3]
    x4, x5, x6, x7 = seed[4], seed[5], seed[6], seed[7]
    for _ in range(iterations):
        x0 = x0 * b + a
        x1 = x1 * b + a
        x2 = x2 * b + a
        x3 = x3 * b + a
        x4 = x4 * b + a
        x5 = x5 * b + a
        x6 = x6 * b + a
        x7 = x7 * b + a
    if i < out.shape[0]:
        out[i] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))


@cuda.jit
def _int32_chains(out: Any, seed: Any, b: Any, c: Any, iterations: int) -> None:
    # an add then a max a step, kept 32-bit as the alignment kernel keeps its cells
    i = cuda.grid(1)
    x0, x1, x2, x3 = seed[0], seed[1], seed[2], seed[3]
    x4, x5, x6, x7 = seed[4], seed[5], seed[6], seed[7]
    for _ in range(iterations):
        x0 = _max32(int32(x0 + b), c)
        x1 = _max32(int32(x1 + b), c)
        x2 = _max32(int32(x2 + b), c)
        x3 = _max32(int32(x3 + b), c)
        x4 = _max32(int32(x4 + b), c)
        x5 = _max32(int32(x5 + b), c)
        x6 = _max32(int32(x6 + b), c)
        x7 = _max32(int32(x7 + b), c)
    if i < out.shape[0]:
        low = int32(int32(x0 ^ x1) ^ int32(x2 ^ x3))
        out[i] = int32(low ^ int32(int32(x4 ^ x5) ^ int32(x6 ^ x7)))


def _launch_shape(blocks: int | None, threads: int) -> int:
    """Blocks of ``threads`` that fill every multiprocessor several times over."""
    if blocks is not None:
        return blocks
    sms = getattr(cuda.get_current_device(), "MULTIPROCESSOR_COUNT", 1)
    return int(sms) * max(1, 2048 // threads)


def _chain_rate(
    name: str, dtype: Any, args: tuple, ops_per_step: int, iterations: int,
    blocks: int | None, threads: int, reps: int,
) -> float:  # fmt: skip
    blocks = _launch_shape(blocks, threads)
    n = blocks * threads
    out = cuda.device_array(n, dtype=dtype)
    seed = cuda.to_device(np.arange(1, CHAINS + 1, dtype=dtype))
    kernel = _fma_chains if name == "fma" else _int32_chains

    def run() -> None:
        kernel[blocks, threads](out, seed, *args, iterations)

    seconds = _best(run, cuda.synchronize, reps)
    return n * CHAINS * iterations * ops_per_step / seconds


def fma_rate(
    dtype: Any = np.float64,
    iterations: int = 1 << 16,
    blocks: int | None = None,
    threads: int = 256,
    reps: int = 5,
) -> float:
    """Flops per second of fused multiply-add chains in ``dtype`` (an FMA counts 2 flops).

    Parameters
    ----------
    dtype : numpy dtype
        ``float32`` or ``float64``.
    iterations : int
        Steps of each chain (:data:`CHAINS` chains a thread).
    blocks : int, optional
        Thread blocks; default: enough to fill every multiprocessor (2048 threads each).
    threads : int
        Threads per block.
    reps : int
        Timed launches (after one untimed, which compiles); the fastest counts.

    Returns
    -------
    float
        Flops per second.
    """
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"fma_rate: dtype {dt} is not float32 or float64")
    args = (dt.type(0.5), dt.type(0.9990234375))  # a, b: x -> a / (1 - b) = 512, no denormals
    return _chain_rate("fma", dt, args, 2, iterations, blocks, threads, reps)


def int32_rate(
    iterations: int = 1 << 16,
    blocks: int | None = None,
    threads: int = 256,
    reps: int = 5,
) -> float:
    """int32 operations per second of add-then-max chains (2 operations a step).

    Parameters are those of :func:`fma_rate` (without ``dtype``).

    Returns
    -------
    float
        int32 operations per second.
    """
    args = (np.int32(3), np.int32(-7))  # b, c
    return _chain_rate("int32", np.int32, args, 2, iterations, blocks, threads, reps)
