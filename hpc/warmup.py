"""``hpc warmup``: compile the kernels each domain uses, ahead of time, into the disk caches.

Each domain lists its warm-up tasks in ``hpc.domains.<name>.warmup.TASKS``: ``(name, run)``
pairs, each a tiny computation through the public API that compiles one group of kernels for the
types the domain's commands use. The kernels land in numba's cache (beside the project's source
for module-level kernels, beside the generated modules under ``HPC_CACHE_DIR/kernels`` for
those of :func:`hpc.jit.specialise`), so a later process loads them in milliseconds. The core's
own kernels (random streams, halo packing) are the ``core`` group.

Run it once per machine image, notebook kernel or CI job: ``hpc warmup`` (all) or
``hpc warmup risk sql``.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable, Sequence

__all__ = ["DOMAINS", "warmup", "tasks"]

DOMAINS = ("core", "risk", "cfd", "sql", "vector", "align")


def _core_rng() -> None:
    from .rng import RandomStreams, philox4x32

    streams = RandomStreams(seed=1)
    streams.normals(0, 64, 4)
    streams.uniforms(0, 64, 3)
    philox4x32((0, 0, 0, 0), (0, 0))


def _core_pack() -> None:
    from .decomposition import CartDecomposition
    from .halo import HaloExchange

    for dims in ((16, 16), (8, 8, 8)):
        for dtype in ("float64", "float32"):
            decomp = CartDecomposition(dims, periodic=True, halo=1)
            u = decomp.allocate(dtype)
            HaloExchange(decomp, u.dtype).exchange(u)


def _core_shuffle() -> None:
    import numpy as np

    from .comm import self_comm
    from .shuffle import (
        combined_hash,
        group_by_destination,
        hash_destinations,
        hash_partition,
        shuffle,
    )

    for n in (1000, 300_000):  # one thread, and the chunked (threaded) passes
        keys = np.arange(n, dtype=np.int64)
        group_by_destination(hash_partition(keys, 4), 4)
        for key_columns in ([keys], [keys, keys]):  # one and two key columns
            combined_hash(key_columns)
            hash_destinations(key_columns, 4)
        columns = {"i8": keys, "i4": keys.astype(np.int32), "i2": keys.astype(np.int16),
                   "b": keys % 2 == 0}
        for dest in (np.zeros(n, np.int64), np.zeros(n, np.uint8)):  # (narrow: hashed ranks)
            shuffle(columns, dest, self_comm())


CORE_TASKS: list[tuple[str, Callable[[], object]]] = [
    ("random streams (Philox normals, uniforms)", _core_rng),
    ("halo packing (2-D and 3-D, float32 and float64)", _core_pack),
    ("shuffle (hash partition, counting sort by destination, row gather)", _core_shuffle),
]


def tasks(domain: str) -> list[tuple[str, Callable[[], object]]]:
    """The warm-up tasks of ``domain`` (one of :data:`DOMAINS`)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}: expected some of {', '.join(DOMAINS)}")
    if domain == "core":
        return CORE_TASKS
    return list(importlib.import_module(f"hpc.domains.{domain}.warmup").TASKS)


def warmup(domains: Sequence[str] | None = None, quiet: bool = False) -> list[str]:
    """Run the warm-up tasks of ``domains`` (all by default), printing one line per task with
    its seconds. Returns the names of the tasks that failed (each failure is printed, and the
    others still run)."""
    import numpy as np

    from .jit import cache_stats

    chosen = list(DOMAINS if not domains else domains)
    for d in chosen:  # every name checked before any work
        if d not in DOMAINS:
            raise ValueError(f"unknown domain {d!r}: expected some of {', '.join(DOMAINS)}")
    failed: list[str] = []
    start = time.perf_counter()
    for domain in chosen:
        for name, run in tasks(domain):
            before = cache_stats()
            t0 = time.perf_counter()
            try:
                with np.errstate(all="ignore"):
                    run()
            except Exception as exc:  # reported; the other tasks still warm up
                failed.append(f"{domain}: {name}")
                print(
                    f"[warmup] {domain:<6s} {name}: FAILED ({type(exc).__name__}: {exc})",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            if not quiet:
                note = _compiled_note(before, cache_stats())
                print(
                    f"[warmup] {domain:<6s} {name}: {time.perf_counter() - t0:6.2f} s{note}",
                    flush=True,
                )
    if not quiet:
        print(f"[warmup] done in {time.perf_counter() - start:.2f} s", flush=True)
    return failed


def _compiled_note(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> str:
    """Which generated kernels the task compiled and which it loaded from the cache."""
    compiled, loaded = [], []
    for key, (hits, misses) in after.items():
        h0, m0 = before.get(key, (0, 0))
        if misses > m0:
            compiled.append(key)
        elif hits > h0:
            loaded.append(key)
    parts = []
    if compiled:
        parts.append("compiled " + ", ".join(compiled))
    if loaded:
        parts.append("from cache " + ", ".join(loaded))
    return f"  ({'; '.join(parts)})" if parts else ""
