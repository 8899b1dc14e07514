"""Warm-up tasks of the vector domain (see :mod:`hpc.warmup`): float32 vectors, every index."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _data(n: int = 2048, dim: int = 32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, dim), dtype=np.float32), rng.standard_normal(
        (16, dim), dtype=np.float32
    )


def _flat() -> None:
    from .flat import FlatIndex

    x, q = _data()
    for metric in ("l2", "ip"):
        index = FlatIndex(x.shape[1], metric)
        index.add(x)
        index.search(q, 10)


def _ivf_flat() -> None:
    from .ivf import IVFFlatIndex

    x, q = _data()
    index = IVFFlatIndex(x.shape[1], 16)
    index.train(x)
    index.add(x)
    index.search(q, 10, nprobe=4)  # per-query scan
    index.search(q, 10, nprobe=16)  # grouped list scan (GEMM per list)


def _ivf_pq() -> None:
    from .ivf import IVFPQIndex

    x, q = _data()
    index = IVFPQIndex(x.shape[1], 16, m=8, nbits=8)
    index.train(x)
    index.add(x)
    index.search(q, 10, nprobe=4)


TASKS: list[tuple[str, Callable[[], object]]] = [
    ("exact (GEMM + top-k), L2 and inner product", _flat),
    ("IVF-Flat (k-means, list scan)", _ivf_flat),
    ("IVF-PQ (codebooks, ADC scan)", _ivf_pq),
]
