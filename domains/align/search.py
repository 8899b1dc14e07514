"""Distributed search and pair alignment: work split over MPI ranks or Dask, hits to HDF5.

Scores are computed in batches by :func:`hpc.run.map_blocks` (a batch is a run of database
sequences, or of pairs), dealt round-robin to the ranks (or to Dask tasks); every rank then
holds all scores and picks the same top hits. Tracebacks of the hits are split into
contiguous blocks over the ranks, and every rank writes its rows of one HDF5 table
collectively (:func:`hpc.io.write_table`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from hpc.comm import resolve_comm
from hpc.decomposition import chunk

from .batch import Encoded, _align_codes, _mode, encode_all, score_many, score_pairs
from .scoring import Scoring

__all__ = ["search", "align_pair_list", "write_hits", "HIT_COLUMNS"]

HIT_COLUMNS = (
    "query", "target", "query_index", "target_index", "score", "query_start", "query_end",
    "target_start", "target_end", "cigar", "identity",
)  # fmt: skip


def _say(comm: Any, progress: bool, text: str) -> None:
    if progress and comm.Get_rank() == 0:
        print(f"hpc align: {text}", file=sys.stderr, flush=True)


def _rows(
    qe: Encoded,
    te: Encoded,
    qidx: np.ndarray,
    tidx: np.ndarray,
    scoring: Scoring,
    mode: int,
    qnames: Sequence[str],
    tnames: Sequence[str],
    band: int | None,
) -> dict[str, np.ndarray]:
    als = [
        _align_codes(qe.get(int(a)), te.get(int(b)), scoring, mode, band)
        for a, b in zip(qidx, tidx, strict=True)
    ]
    return {
        "query": np.array([qnames[int(a)] for a in qidx], dtype=str),
        "target": np.array([tnames[int(b)] for b in tidx], dtype=str),
        "query_index": np.asarray(qidx, dtype=np.int64),
        "target_index": np.asarray(tidx, dtype=np.int64),
        "score": np.array([a.score for a in als], dtype=np.int64),
        "query_start": np.array([a.query_start for a in als], dtype=np.int64),
        "query_end": np.array([a.query_end for a in als], dtype=np.int64),
        "target_start": np.array([a.target_start for a in als], dtype=np.int64),
        "target_end": np.array([a.target_end for a in als], dtype=np.int64),
        "cigar": np.array([a.cigar for a in als], dtype=str),
        "identity": np.array([a.identity for a in als], dtype=np.float64),
    }


def search(
    queries: Sequence[Any],
    targets: Sequence[Any],
    scoring: Scoring | str | None = None,
    mode: str = "local",
    top: int = 10,
    query_names: Sequence[str] | None = None,
    target_names: Sequence[str] | None = None,
    executor: str = "mpi",
    comm: Any = None,
    scheduler: Any = None,
    backend: Any = None,
    batch: int | None = None,
    band: int | None = None,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Collective for ``executor="mpi"``. The ``top`` best targets of every query, aligned.

    Parameters
    ----------
    queries, targets : sequences of str, bytes or codes
    scoring : Scoring or matrix name, optional
    mode : {"local", "global", "semi-global"}
    top : int
        Hits per query (ties broken by the lower target index).
    executor : {"mpi", "local", "dask"}
        Where the database batches are scored (see :func:`hpc.run.map_blocks`).
    batch : int, optional
        Database sequences per batch (default: an even share per rank or worker).
    progress : bool
        Print stage timings on rank 0 (standard error).

    Returns
    -------
    dict of str to ndarray
        This rank's rows of the hit table (:data:`HIT_COLUMNS`), hits ordered by query, then
        by decreasing score; concatenated in rank order they are the whole table. No queries
        or no targets give a table of no rows.
    """
    from hpc.run import map_blocks

    comm = resolve_comm(comm) if executor == "mpi" else None
    scoring = Scoring.of(scoring)
    m = _mode(mode)
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    qe = encode_all(queries, scoring, "query", query_names)
    te = encode_all(targets, scoring, "target", target_names)
    qn = list(query_names) if query_names is not None else [str(k) for k in range(len(qe))]
    tn = list(target_names) if target_names is not None else [str(k) for k in range(len(te))]
    nq, nt = len(qe), len(te)
    if nq == 0 or nt == 0:  # nothing to score: an empty table, on every rank alike
        none = np.empty(0, dtype=np.int64)
        return _rows(qe, te, none, none, scoring, m, qn, tn, band)
    say_comm = comm if comm is not None else _One()
    t0 = time.perf_counter()

    def block(first: int, count: int) -> np.ndarray:
        sub = _slice(te, first, count)
        return score_many(qe, sub, scoring, mode, backend=backend).T

    scores = map_blocks(
        block, nt, max(nq, 1), executor=executor, batch=batch, comm=comm, scheduler=scheduler
    )  # (nt, nq), the same everywhere
    cells = float(qe.lengths.sum()) * float(te.lengths.sum())
    dt = time.perf_counter() - t0
    _say(
        say_comm, progress, f"scored {nq} x {nt} pairs in {dt:.2f} s ({cells / dt / 1e9:.2f} GCUPS)"
    )
    k = min(top, nt)
    sc = scores.T.astype(np.int64)  # (nq, nt)
    # sort by (-score, target index): stable argsort of -score keeps target order on ties
    order = np.argsort(-sc, axis=1, kind="stable")[:, :k]
    qidx = np.repeat(np.arange(nq), k)
    tidx = order.reshape(-1)
    rank, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
    lo, hi = chunk(qidx.size, size, rank)
    rows = _rows(qe, te, qidx[lo:hi], tidx[lo:hi], scoring, m, qn, tn, band)
    _say(say_comm, progress, f"aligned {qidx.size} hits in {time.perf_counter() - t0:.2f} s")
    return rows


class _One:
    def Get_rank(self) -> int:  # noqa: N802 (MPI spelling)
        return 0


def _slice(enc: Encoded, first: int, count: int) -> Encoded:
    off = enc.offsets[first : first + count + 1]
    return Encoded(enc.codes[off[0] : off[-1]], off - off[0])


def align_pair_list(
    queries: Sequence[Any],
    targets: Sequence[Any],
    scoring: Scoring | str | None = None,
    mode: str = "local",
    query_names: Sequence[str] | None = None,
    target_names: Sequence[str] | None = None,
    comm: Any = None,
    band: int | None = None,
) -> dict[str, np.ndarray]:
    """Collective. Align ``queries[k]`` with ``targets[k]``, the pairs split over the ranks in
    contiguous blocks; returns this rank's rows of the hit table."""
    comm = resolve_comm(comm)
    scoring = Scoring.of(scoring)
    m = _mode(mode)
    qe = encode_all(queries, scoring, "query", query_names)
    te = encode_all(targets, scoring, "target", target_names)
    if len(qe) != len(te):
        raise ValueError(f"{len(qe)} queries but {len(te)} targets; pairs need equal counts")
    qn = list(query_names) if query_names is not None else [str(k) for k in range(len(qe))]
    tn = list(target_names) if target_names is not None else [str(k) for k in range(len(te))]
    lo, hi = chunk(len(qe), comm.Get_size(), comm.Get_rank())
    idx = np.arange(lo, hi)
    if band is None and idx.size:
        # scores in bulk first: the batched kernels are much faster than tracebacks
        score_pairs(qe, te, scoring, mode, backend="cpu", query_index=idx, target_index=idx)
    return _rows(qe, te, idx, idx, scoring, m, qn, tn, band)


def write_hits(path: str | os.PathLike[str], rows: dict[str, np.ndarray], comm: Any = None) -> int:
    """Collective. Write every rank's hit rows as the HDF5 table ``hits`` of ``path``.

    The file appears whole or not at all (:func:`hpc.io.atomic_output`).
    """
    from hpc.io import atomic_output, write_table

    comm = resolve_comm(comm)
    with atomic_output(path, comm) as tmp:
        return write_table(tmp, "hits", rows, comm=comm)
