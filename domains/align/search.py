"""Distributed search and pair alignment: streaming top-k over database batches, hits to HDF5.

A search reads the database in batches of consecutive sequences (:mod:`.database`: a list, a
FASTA/FASTQ file or an HDF5 sequence store, so the database need not fit in memory). Each
batch is scored against all queries and reduced to its top-k per query: a rank holds one batch
of scores (``queries x batch``) and top-k lists, never the whole ``queries x database``
matrix. Consecutive batches form the blocks of :func:`hpc.run.map_blocks` (dealt round-robin
to the MPI ranks, or sent to Dask tasks), whose rows are the blocks' top-k lists, gathered and
folded into one list per query; so a search inside ``with hpc.journal.Journal(...)`` resumes
after a kill, on any rank count, with the same hits. Tracebacks of the hits are split into
contiguous blocks over the ranks, and every rank writes its rows of one HDF5 table
collectively (:func:`hpc.io.write_table`).

Local alignments get bit scores and E-values (:mod:`.stats`) for the database's size; an
E-value threshold is applied before the top-k, so the hits are the ``top`` best-scoring of
those that pass it. DNA searches score both strands: the query and its reverse complement.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
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
_MIN_BATCHES = 512  # and at least this many batches, unless that leaves a batch fewer
_MIN_PAIRS = 1 << 12  # pairs than this (small score blocks lose the batched kernels' speed)
_ROWS_BYTES = 1 << 26  # gathered top-k rows of all blocks: at most about this (64 MiB)


def _say(comm: Any, progress: bool, text: str) -> None:
    if progress and (comm is None or comm.Get_rank() == 0):
        from hpc.progress import active_phase

        phase = active_phase()
        if phase is not None and phase.progress.enabled:  # a bar is drawn: do not break it
            phase.progress.write(f"hpc align: {text}")
        else:
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
    figures: dict[str, Any] | None = None,
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
        Database sequences per batch (default: at most 16384, at most about 4 million scores
        per batch, so the memory of a search does not grow with the database, and at least
        512 batches where each still holds 4096 query x target pairs). The batches are the
        work of :func:`hpc.run.map_blocks` (for large query sets, consecutive batches grouped
        into blocks and the queries cut into chunks, see :func:`_layout`), so inside
        ``with hpc.journal.Journal(...)`` finished blocks are journaled and a rerun resumes
        them, and inside ``with progress.phase(cells)`` they move the progress bar. The
        layout depends on the inputs and ``batch`` only, never on the rank count.
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
    figures : dict, optional
        Filled with the scoring phase's figures (the same on every rank): ``cell_updates``
        (query letters, both strands, times database letters), ``scored_cell_updates`` (those
        scored by this run, not taken from a journal), ``score_seconds``, ``blocks``,
        ``resumed_blocks``.

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
        if figures is not None:
            figures.update(cell_updates=0.0, scored_cell_updates=0.0, score_seconds=0.0,
                           blocks=0, resumed_blocks=0)  # fmt: skip
        none = np.empty(0, dtype=np.int64)
        return _rows(qe, {}, none, none, scoring, m, qn, band, strands, stats)
    qx = qe if strands == 1 else _concat(qe, reverse_complement(qe))
    k = min(top, nt * strands)
    lay = _layout(nt, len(qx), k, batch)
    t0 = time.perf_counter()
    args = (k, strands, stats, evalue, scoring, mode, backend)
    scan = figures if figures is not None else {}
    best_s, best_i = _scan(qx, db, lay, args, executor, comm, scheduler, scan)
    if strands == 2:  # fold the reverse-complement rows into their query's list
        minus = np.where(best_i[nq:] >= 0, best_i[nq:] + 1, -1)
        best_s, best_i = merge_best(best_s[:nq], best_i[:nq], best_s[nq:], minus)
        best_i[best_s == _MISSING] = -1
    dt = time.perf_counter() - t0
    rate = scan["scored_cell_updates"] / max(scan["score_seconds"], 1e-9) / 1e9
    resumed = f", {scan['resumed_blocks']} of {lay.nblocks} blocks resumed" * bool(
        scan["resumed_blocks"]
    )
    _say(comm, progress, f"scored {nq} x {nt} pairs in {dt:.2f} s ({rate:.2f} GCUPS{resumed})")
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


@dataclass(frozen=True)
class _Layout:
    """How a search is cut into :func:`hpc.run.map_blocks` blocks (see :func:`_layout`).

    Block ``b`` scores query chunk ``b // ndb`` (``qrows`` rows at a time of the queries and
    their reverse complements) against database block ``b % ndb`` (``per`` consecutive
    batches of ``bsize`` sequences); its row holds ``k`` scores and ``k`` ids per query row.
    """

    bsize: int  # database sequences per batch
    nbatches: int
    per: int  # batches per database block
    ndb: int  # database blocks
    qrows: int  # query rows per chunk
    nqc: int  # query chunks
    k: int

    @property
    def nblocks(self) -> int:
        return self.nqc * self.ndb

    @property
    def half(self) -> int:
        """Scores (or ids) in a block's row."""
        return self.qrows * self.k


def _layout(nt: int, rows: int, k: int, batch: int | None) -> _Layout:
    """The blocks of a search of ``rows`` query rows against ``nt`` sequences, top ``k``.

    Depends on the inputs alone, never on the rank count, so a journal written on some ranks
    resumes on others. The default batch keeps a score block under :data:`_BATCH_CELLS` and
    cuts the database into at least :data:`_MIN_BATCHES` batches (ranks to feed, progress,
    little work lost to a kill) where a batch keeps :data:`_MIN_PAIRS` pairs. Every rank
    gathers one top-k list per block, so when the lists of all batches would pass
    :data:`_ROWS_BYTES` consecutive batches share a database block, and the queries are cut
    into chunks to keep as many blocks (the gathered bytes do not grow with the chunks: each
    holds its own rows' lists).
    """
    if batch:
        bsize = int(batch)
    else:
        many = max(-(-nt // _MIN_BATCHES), -(-_MIN_PAIRS // rows))
        bsize = max(1, min(many, _BATCH_CELLS // rows, _BATCH_MAX))
    nbatches = -(-nt // bsize)
    per = -(-nbatches // max(1, _ROWS_BYTES // (16 * rows * k + 16)))
    ndb = -(-nbatches // per)
    nqc = min(rows, -(-min(nbatches, _MIN_BATCHES) // ndb))
    qrows = -(-rows // nqc)
    return _Layout(bsize, nbatches, per, ndb, qrows, -(-rows // qrows), k)


def _chunk_rows(enc: Encoded, lo: int, hi: int) -> Encoded:
    """Sequences ``lo .. hi - 1`` of ``enc``."""
    off = enc.offsets[lo : hi + 1]
    return Encoded(enc.codes[int(off[0]) : int(off[-1])], off - off[0])


def _scan(
    qx: Encoded, db: Database, lay: _Layout, args: tuple, executor: str, comm: Any,
    scheduler: Any, figures: dict[str, Any],
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Score every batch and fold the blocks into one top-k list per row of ``qx``.

    A :func:`hpc.run.map_blocks` block's row (float64; scores and ids are integers below
    2**53, so exact) is ``[run nonce, cell updates, scores, target ids]``: the ``k`` best per
    row of its query chunk over its database block. A journal (an enclosing
    :class:`hpc.journal.Journal`) keeps the rows of finished blocks; the nonce tells the
    blocks scored by this run from those taken from the journal. The top-k of a union does
    not depend on how it is grouped (scores descending, ids ascending: a total order), so
    folding the blocks gives the same lists whatever the batches, blocks and ranks.
    """
    from hpc.progress import active_phase
    from hpc.run import map_blocks

    k, _strands, _stats, _ev, scoring = args[:5]
    rows, qrows, half = len(qx), lay.qrows, lay.half
    nonce = float(int.from_bytes(os.urandom(6), "little") + 1)  # < 2**53: exact
    if comm is not None and comm.Get_size() > 1:  # one run, one nonce: rank 0's
        from hpc.collectives import bcast_object

        nonce = float(bcast_object(nonce, 0, comm))
    # the bar's figure beside the rate; not for Dask (the phase does not travel to workers)
    phase = active_phase() if executor != "dask" else None
    clock: list[float] = []
    failure: list[BaseException] = []

    def one(b: int, out: np.ndarray) -> None:
        c, d = divmod(b, lay.ndb)
        lo, hi = c * qrows, min((c + 1) * qrows, rows)
        chunk = _chunk_rows(qx, lo, hi)
        best_s = np.full((hi - lo, k), _MISSING, dtype=np.int64)
        best_i = np.full((hi - lo, k), -1, dtype=np.int64)
        residues = 0
        for t in range(d * lay.per, min((d + 1) * lay.per, lay.nbatches)):
            names, seqs = db.read(t * lay.bsize, lay.bsize)
            te = encode_all(seqs, scoring, _what(db), names)
            residues += int(te.lengths.sum())
            bs, bi = _block_best(chunk, te, t * lay.bsize, *args)
            best_s, best_i = merge_best(best_s, best_i, bs, bi)
        out[:] = -1.0  # the last chunk's missing rows: empty slots
        out[0], out[1] = nonce, float(chunk.lengths.sum()) * residues
        n = (hi - lo) * k
        out[2 : 2 + n] = best_s.reshape(-1)
        out[2 + half : 2 + half + n] = best_i.reshape(-1)

    def block(first: int, count: int) -> np.ndarray:
        out = np.empty((count, 2 + 2 * half))
        try:
            for j in range(count):
                one(first + j, out[j])
                _show_rate(phase, clock)
        except Exception as exc:
            failure.append(exc)
            raise
        return out

    t0 = time.perf_counter()
    try:
        got = map_blocks(block, lay.nblocks, 2 + 2 * half, executor=executor, comm=comm,
                         scheduler=scheduler)  # fmt: skip
    except RuntimeError as exc:
        if comm is None or not getattr(exc, "all_ranks", False):
            raise
        raise _agreed_failure(failure, comm) from None
    finally:
        db.close()
    figures["score_seconds"] = time.perf_counter() - t0
    figures["blocks"] = lay.nblocks
    figures["resumed_blocks"] = int(np.count_nonzero(got[:, 0] != nonce))
    figures["cell_updates"] = float(got[:, 1].sum())
    figures["scored_cell_updates"] = float(got[got[:, 0] == nonce, 1].sum())
    best_s = np.full((lay.nqc * qrows, k), _MISSING, dtype=np.int64)
    best_i = np.full((lay.nqc * qrows, k), -1, dtype=np.int64)
    for b, r in enumerate(got):
        c = b // lay.ndb
        part = slice(c * qrows, (c + 1) * qrows)
        bs = r[2 : 2 + half].astype(np.int64).reshape(qrows, k)
        bi = r[2 + half :].astype(np.int64).reshape(qrows, k)
        bs[bi < 0] = _MISSING
        best_s[part], best_i[part] = merge_best(best_s[part], best_i[part], bs, bi)
    return best_s[:rows], best_i[:rows]


def _show_rate(phase: Any, clock: list[float]) -> None:
    """Rank 0: GCUPS of this run beside the bar (``clock``: start time and units then)."""
    if phase is None or not phase.progress.enabled or phase.progress.rank != 0:
        return
    now, done = time.perf_counter(), phase.progress.n
    if not clock:  # the first block: journaled blocks are counted already
        clock.extend((now, done))
    elif now > clock[0] and done > clock[1]:  # rank 0's count moves between its batches
        phase.progress.set_rate(GCUPS=(done - clock[1]) / (now - clock[0]) / 1e9)


def _agreed_failure(failure: list[BaseException], comm: Any) -> Exception:
    """Collective. The failure of some ranks' blocks as one exception on every rank: a
    ValueError (bad input: the command line reports it) when every failure was one."""
    from hpc.collectives import allgather_object
    from hpc.errors import on_all_ranks

    rank = comm.Get_rank()
    mine = [(isinstance(e, ValueError), f"rank {rank}: {e}") for e in failure[:1]]
    errors = [e for part in allgather_object(mine, comm) for e in part]
    kind = ValueError if errors and all(bad for bad, _ in errors) else RuntimeError
    return on_all_ranks(kind("search failed: " + "; ".join(text for _, text in errors)))


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
