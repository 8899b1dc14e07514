"""Distributed search and pair alignment: streaming top-k over database batches, hits to HDF5.

A search reads the database in batches of consecutive sequences (:mod:`.database`: a list, a
FASTA/FASTQ file or an HDF5 sequence store, so the database need not fit in memory). Each
batch is scored against all queries and folded into a running top-k per query: a rank holds
one batch of scores (``queries x batch``) and ``queries x top`` best hits, never the whole
``queries x database`` matrix. Batches are dealt round-robin to the MPI ranks (or sent to Dask
tasks); the ranks' lists are merged along a binomial tree (:func:`hpc.collectives.merge_topk`)
and broadcast. Tracebacks of the hits are split into contiguous blocks over the ranks, and
every rank writes its rows of one HDF5 table collectively (:func:`hpc.io.write_table`).

Local alignments get bit scores and E-values (:mod:`.stats`) for the database's size; an
E-value threshold is applied before the top-k, so the hits are the ``top`` best-scoring of
those that pass it. DNA searches score both strands: the query and its reverse complement.
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

from .batch import Encoded, _align_codes, _mode, _ops, encode_all, score_many, score_pairs
from .database import Database, open_database
from .scoring import Scoring
from .stats import EVALUE_METHODS, KarlinAltschul, StatisticsError, karlin_altschul

__all__ = [
    "search",
    "align_pair_list",
    "write_hits",
    "merge_best",
    "reverse_complement",
    "HIT_COLUMNS",
    "STRANDS",
]

HIT_COLUMNS = (
    "query", "target", "query_index", "target_index", "strand", "score", "bit_score", "evalue",
    "query_start", "query_end", "target_start", "target_end", "cigar", "identity", "matches",
    "query_length", "target_length",
)  # fmt: skip
STRANDS = ("plus", "both")
_MISSING = np.iinfo(np.int64).min // 4  # the score of an empty top-k slot
_BATCH_CELLS = 1 << 22  # default batch: at most this many query x target scores (32 MiB)
_BATCH_MAX = 1 << 14  # and at most this many database sequences


def _say(comm: Any, progress: bool, text: str) -> None:
    if progress and (comm is None or comm.Get_rank() == 0):
        print(f"hpc align: {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- top-k lists


def merge_best(
    s1: np.ndarray, i1: np.ndarray, s2: np.ndarray, i2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Local. The ``k`` best ``(score, id)`` pairs per row of two ``(rows, k)`` lists: higher
    score first, ties to the lower id; empty slots (id -1) last."""
    k = s1.shape[1]
    s = np.concatenate([s1, s2], axis=1)
    i = np.concatenate([i1, i2], axis=1)
    missing = i < 0
    order = np.lexsort((np.where(missing, np.iinfo(np.int64).max, i), -s, missing), axis=1)
    order = order[:, :k]
    return np.take_along_axis(s, order, 1), np.take_along_axis(i, order, 1)


def _batch_best(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of a ``(rows, batch)`` score block whose columns have ``ids``
    (increasing): a stable sort keeps the lower id first among equal scores."""
    rows, nb = scores.shape
    best_s = np.full((rows, k), _MISSING, dtype=np.int64)
    best_i = np.full((rows, k), -1, dtype=np.int64)
    if nb == 0:
        return best_s, best_i
    take = min(k, nb)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :take]
    got = np.take_along_axis(scores, order, 1)
    best_s[:, :take] = got
    best_i[:, :take] = np.where(got > _MISSING, ids[order], -1)
    best_s[best_i < 0] = _MISSING
    return best_s, best_i


# --------------------------------------------------------------------------- strands

_COMPLEMENT = np.array([3, 2, 1, 0, 4], dtype=np.uint8)  # A C G T N -> T G C A N


def reverse_complement(enc: Encoded) -> Encoded:
    """Local. The reverse complements of DNA sequences encoded with the DNA matrix (codes
    ``ACGTN``; IUPAC codes other than U read as N, so they stay N)."""
    lengths = enc.lengths
    seq = np.repeat(np.arange(len(enc)), lengths)
    # position p of sequence k comes from position offsets[k] + offsets[k + 1] - 1 - p
    src = enc.offsets[seq] + enc.offsets[seq + 1] - 1 - np.arange(enc.codes.size)
    return Encoded(_COMPLEMENT[enc.codes[src]], enc.offsets.copy())


def _strand_count(strand: str | None, scoring: Scoring) -> int:
    dna = scoring.matrix.dna is not None
    if strand is None:
        return 2 if dna else 1
    if strand not in STRANDS:
        raise ValueError(f"strand {strand!r}: expected one of {STRANDS}")
    if strand == "both" and not dna:
        raise ValueError("strand='both' needs a DNA matrix (a protein has one strand)")
    return 2 if strand == "both" else 1


# --------------------------------------------------------------------------- statistics


class _Stats:
    """The statistics of a search, or the reason there are none."""

    def __init__(self, scoring: Scoring, mode: str, method: str, db: tuple[int, int]) -> None:
        if method not in EVALUE_METHODS:
            raise ValueError(f"E-value method {method!r}: expected one of {EVALUE_METHODS}")
        self.method = method
        self.db_length, self.db_count = db
        self.ka: KarlinAltschul | None = None
        self.why = ""
        if _mode(mode) != _mode("local"):
            self.why = f"E-values are defined for local alignments, not mode {mode!r}"
            return
        try:
            self.ka = karlin_altschul(scoring)
            if method == "spouge" and self.ka.gumbel is None:
                raise StatisticsError(
                    f"{self.ka.name}: Spouge's E-values need NCBI's Gumbel parameters, "
                    "published for protein matrices only; use the 'karlin' method"
                )
        except StatisticsError as exc:
            self.ka, self.why = None, str(exc)

    def require(self) -> KarlinAltschul:
        if self.ka is None:
            raise StatisticsError(f"an E-value threshold needs statistics: {self.why}")
        return self.ka

    def evalues(self, scores: Any, qlen: Any, tlen: Any) -> np.ndarray:
        if self.ka is None or np.size(scores) == 0:
            return np.full(np.shape(scores), np.nan)
        return self.ka.evalues(scores, qlen, tlen, self.db_length, self.db_count, self.method)

    def bits(self, scores: Any) -> np.ndarray:
        if self.ka is None:
            return np.full(np.shape(scores), np.nan)
        return self.ka.bit_scores(scores)


# --------------------------------------------------------------------------- search


def _block_best(
    qx: Encoded, te: Encoded, first: int, k: int, strands: int, stats: _Stats,
    evalue: float | None, scoring: Scoring, mode: str, backend: Any,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Score one database batch and keep its ``k`` best per (query, strand) row."""
    sc = score_many(qx, te, scoring, mode, backend=backend)  # (rows, batch)
    if evalue is not None:
        e = stats.evalues(sc, qx.lengths[:, None], te.lengths[None, :])
        sc = np.where(e <= evalue, sc, _MISSING)
    ids = np.arange(first, first + len(te), dtype=np.int64) * strands
    return _batch_best(sc, ids, k)


def search(
    queries: Sequence[Any],
    targets: Any,
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
    evalue: float | None = None,
    evalue_method: str = "karlin",
    strand: str | None = None,
    db_size: tuple[int, int] | None = None,
) -> dict[str, np.ndarray]:
    """Collective for ``executor="mpi"``. The ``top`` best targets of every query, aligned.

    Parameters
    ----------
    queries : sequences of str, bytes or codes
    targets : sequences, path or Database
        A list of sequences (names from ``target_names``), a FASTA/FASTQ file or an HDF5
        sequence store (:func:`~hpc.domains.align.database.write_store`), read in batches.
    scoring : Scoring or matrix name, optional
    mode : {"local", "global", "semi-global"}
    top : int
        Hits per query: the best scores, ties to the lower target index (then the plus
        strand).
    executor : {"mpi", "local", "dask"}
        Where the database batches are scored: round-robin over the ranks of ``comm``, this
        process, or Dask tasks (:func:`hpc.run.map_blocks`).
    batch : int, optional
        Database sequences per batch (default: at most 16384, and at most about 4 million
        scores per batch, so the memory of a search does not grow with the database).
    evalue : float, optional
        Keep only hits of E-value at most this (local mode with published statistics).
    evalue_method : {"karlin", "spouge"}
        Karlin-Altschul with BLAST's length adjustment, or Spouge's finite-size correction
        (``blastp``'s default); see :mod:`hpc.domains.align.stats`.
    strand : {"plus", "both"}, optional
        ``"both"`` also aligns each query's reverse complement (DNA only; the default for a
        DNA matrix).
    db_size : (int, int), optional
        ``(residues, sequences)`` the E-values are computed for (default: the database's),
        like BLAST's ``-dbsize``.
    progress : bool
        Print stage timings on rank 0 (standard error).

    Returns
    -------
    dict of str to ndarray
        This rank's rows of the hit table (:data:`HIT_COLUMNS`), hits ordered by query, then
        by decreasing score; concatenated in rank order they are the whole table. No queries
        or no targets give a table of no rows. ``strand`` is ``"+"`` or ``"-"``; on ``"-"``
        the query coordinates are on the reverse complement. ``bit_score`` and ``evalue``
        are NaN where there are no statistics (global and semi-global modes, settings
        without published parameters).

    Raises
    ------
    StatisticsError
        If ``evalue`` is given and the scoring has no published statistics.
    """
    comm = resolve_comm(comm) if executor == "mpi" else None
    rank, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
    scoring = Scoring.of(scoring)
    m = _mode(mode)
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    if evalue is not None and not evalue > 0:
        raise ValueError(f"evalue must be > 0, got {evalue}")
    strands = _strand_count(strand, scoring)
    _ops(backend)  # the backend's first use is collective: all ranks, before any batch
    qe = encode_all(queries, scoring, "query", query_names)
    qn = list(query_names) if query_names is not None else [str(k) for k in range(len(qe))]
    db = open_database(targets, target_names)
    nq, nt = len(qe), db.count
    stats = _Stats(scoring, mode, evalue_method, db_size or (db.residues, db.count))
    if evalue is not None:
        stats.require()
    elif stats.ka is None:
        _say(comm, progress, f"no E-values: {stats.why}")
    if nq == 0 or nt == 0:  # nothing to score: an empty table, on every rank alike
        none = np.empty(0, dtype=np.int64)
        return _rows(qe, {}, none, none, scoring, m, qn, band, strands, stats)
    qx = qe if strands == 1 else _concat(qe, reverse_complement(qe))
    k = min(top, nt * strands)
    # default batch: bounded memory, and at least one batch per rank
    bsize = (
        int(batch) if batch else max(1, min(-(-nt // size), _BATCH_CELLS // len(qx), _BATCH_MAX))
    )
    t0 = time.perf_counter()
    args = (k, strands, stats, evalue, scoring, mode, backend)
    if executor == "dask":
        best_s, best_i = _dask_best(qx, db, bsize, args, scheduler)
    else:
        best_s, best_i = _stream_best(qx, db, bsize, args, comm, rank, size)
    if strands == 2:  # fold the reverse-complement rows into their query's list
        minus = np.where(best_i[nq:] >= 0, best_i[nq:] + 1, -1)
        best_s, best_i = merge_best(best_s[:nq], best_i[:nq], best_s[nq:], minus)
        best_i[best_s == _MISSING] = -1
    cells = float(qx.lengths.sum()) * float(db.residues)
    dt = time.perf_counter() - t0
    rate = cells / max(dt, 1e-9) / 1e9
    _say(comm, progress, f"scored {nq} x {nt} pairs in {dt:.2f} s ({rate:.2f} GCUPS)")
    keep = best_i >= 0
    qidx = np.nonzero(keep)[0].astype(np.int64)  # row-major: by query, then by rank
    cand = best_i[keep]
    lo, hi = chunk(qidx.size, size, rank)
    mine_t = cand[lo:hi] // strands
    found = db.fetch(mine_t)
    rows = _rows(qe, found, qidx[lo:hi], cand[lo:hi], scoring, m, qn, band, strands, stats)
    _say(comm, progress, f"aligned {qidx.size} hits in {time.perf_counter() - t0:.2f} s")
    return rows


def _what(db: Database) -> str:
    return "target" if db.label == "target" else f"{db.label}: target"


def _concat(a: Encoded, b: Encoded) -> Encoded:
    return Encoded(np.concatenate([a.codes, b.codes]),
                   np.concatenate([a.offsets, a.offsets[-1] + b.offsets[1:]]))  # fmt: skip


def _stream_best(
    qx: Encoded, db: Database, bsize: int, args: tuple, comm: Any, rank: int, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """This process's batches (every ``size``-th), folded into one top-k list; with MPI the
    ranks' lists merged (a failure on any rank raised on all of them)."""
    k, strands, _stats, _ev, scoring = args[:5]
    best_s = np.full((len(qx), k), _MISSING, dtype=np.int64)
    best_i = np.full((len(qx), k), -1, dtype=np.int64)
    error = None
    try:
        for b, (first, names, seqs) in enumerate(db.batches(bsize)):
            if b % size != rank:
                continue
            te = encode_all(seqs, scoring, _what(db), names)
            bs, bi = _block_best(qx, te, first, *args)
            best_s, best_i = merge_best(best_s, best_i, bs, bi)
    except Exception as exc:  # every rank must learn of it, or the others hang in the merge
        if comm is None:
            raise
        error = exc
    if comm is None or size == 1:
        if error is not None:
            raise error
        return best_s, best_i
    from hpc.collectives import allgather_object, bcast_array, merge_topk
    from hpc.errors import on_all_ranks

    mine = None if error is None else (isinstance(error, ValueError), f"rank {rank}: {error}")
    errors = [e for e in allgather_object(mine, comm) if e]
    if errors:  # the same exception on every rank: bad input stays a ValueError
        kind = ValueError if all(bad for bad, _ in errors) else RuntimeError
        raise on_all_ranks(kind("search failed: " + "; ".join(text for _, text in errors)))

    def merge(d1, i1, d2, i2):  # merge_topk's order is ascending: scores travel negated
        s, i = merge_best(-d1, i1, -d2, i2)
        return -s, i

    d, i = merge_topk(-best_s, best_i, 0, comm, merge=merge)
    d = bcast_array(d, 0, comm)
    i = bcast_array(i, 0, comm)
    return -d, i


def _dask_best(
    qx: Encoded, db: Database, bsize: int, args: tuple, scheduler: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Batches as Dask tasks (:func:`hpc.run.map_blocks`, one block per batch); each returns
    its top-k rows, folded here."""
    from hpc.run import map_blocks

    k, strands, _stats, _ev, scoring = args[:5]
    nb = -(-db.count // bsize)
    width = len(qx) * k * 2

    def block(first: int, count: int) -> np.ndarray:
        out = np.empty((count, width))
        for j in range(count):
            lo = (first + j) * bsize
            found = db.fetch(np.arange(lo, min(lo + bsize, db.count)))
            names = [found[t][0] for t in sorted(found)]
            te = encode_all([found[t][1] for t in sorted(found)], scoring, _what(db), names)
            bs, bi = _block_best(qx, te, lo, *args)
            out[j] = np.concatenate([bs.reshape(-1), bi.reshape(-1)]).astype(np.float64)
        return out

    rows = map_blocks(block, nb, width, executor="dask", batch=1, scheduler=scheduler)
    best_s = np.full((len(qx), k), _MISSING, dtype=np.int64)
    best_i = np.full((len(qx), k), -1, dtype=np.int64)
    half = len(qx) * k
    for r in rows:
        bs = r[:half].astype(np.int64).reshape(len(qx), k)
        bi = r[half:].astype(np.int64).reshape(len(qx), k)
        bs[bi < 0] = _MISSING
        best_s, best_i = merge_best(best_s, best_i, bs, bi)
    return best_s, best_i


# --------------------------------------------------------------------------- hit rows


def _rows(
    qe: Encoded,
    found: dict[int, tuple[str, Any]],
    qidx: np.ndarray,
    cand: np.ndarray,
    scoring: Scoring,
    mode: int,
    qnames: Sequence[str],
    band: int | None,
    strands: int,
    stats: _Stats,
) -> dict[str, np.ndarray]:
    tidx = np.asarray(cand, dtype=np.int64) // strands
    minus = (np.asarray(cand, dtype=np.int64) % strands) == 1
    rc = reverse_complement(qe) if strands == 2 and minus.any() else None
    tcodes = {t: encode_all([found[t][1]], scoring, "target", [found[t][0]]).get(0)
              for t in {int(x) for x in tidx}}  # fmt: skip
    als = [
        _align_codes((rc if neg else qe).get(int(a)), tcodes[int(b)], scoring, mode, band)
        for a, b, neg in zip(qidx, tidx, minus, strict=True)
    ]
    score = np.array([a.score for a in als], dtype=np.int64)
    qlen = qe.lengths[np.asarray(qidx, dtype=np.int64)] if len(qidx) else np.empty(0, np.int64)
    tlen = np.array([tcodes[int(b)].size for b in tidx], dtype=np.int64)
    return {
        "query": np.array([qnames[int(a)] for a in qidx], dtype=str),
        "target": np.array([found[int(b)][0] for b in tidx], dtype=str),
        "query_index": np.asarray(qidx, dtype=np.int64),
        "target_index": tidx,
        "strand": np.where(minus, "-", "+").astype(str),
        "score": score,
        "bit_score": stats.bits(score),
        "evalue": stats.evalues(score, qlen, tlen),
        "query_start": np.array([a.query_start for a in als], dtype=np.int64),
        "query_end": np.array([a.query_end for a in als], dtype=np.int64),
        "target_start": np.array([a.target_start for a in als], dtype=np.int64),
        "target_end": np.array([a.target_end for a in als], dtype=np.int64),
        "cigar": np.array([a.cigar for a in als], dtype=str),
        "identity": np.array([a.identity for a in als], dtype=np.float64),
        "matches": np.array([a.matches for a in als], dtype=np.int64),
        "query_length": qlen.astype(np.int64),
        "target_length": tlen,
    }


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
    contiguous blocks; returns this rank's rows of the hit table (one strand, no E-values:
    there is no database)."""
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
    found = {int(i): (tn[int(i)], te.get(int(i))) for i in idx}
    stats = _Stats(scoring, "global", "karlin", (1, 1))  # no database: no E-values
    return _rows(qe, found, idx, idx, scoring, m, qn, band, 1, stats)


def write_hits(path: str | os.PathLike[str], rows: dict[str, np.ndarray], comm: Any = None) -> int:
    """Collective. Write every rank's hit rows as the HDF5 table ``hits`` of ``path``.

    The file appears whole or not at all (:func:`hpc.io.atomic_output`).
    """
    from hpc.io import atomic_output, write_table

    comm = resolve_comm(comm)
    with atomic_output(path, comm) as tmp:
        return write_table(tmp, "hits", rows, comm=comm)
