"""Exact SUMs of integer and DECIMAL arithmetic per group in one pass: the arguments' ``+ -
*`` (``SUM(price * (1 - discount) * (1 + tax))``) and CASTs up in scale run as postfix
programs, block by block, and each block's results are summed into its group at once.

Evaluated one operation at a time, such a SUM writes a column of 8 bytes a row per
operation, reads it back for the next one and again for the sums. Here the operands of a
block of rows stay in the cache from the first operation to the group's sum, and a scanned
DECIMAL column is read from Parquet's chunks where it lies (never converted into a column
of its own). Every operation is the checked int64 operation of :mod:`.evaluate` (same
values, same range of the result type), so the sums are the ones the operation-at-a-time
path gives. A group's sum is one int64 while the blocks' largest magnitudes add up to
less than 2**62 (no wrap possible), else its 32-bit halves are summed (exact below 2**31
rows). Where any operation of a row that counts overflows, or a group's sum leaves int64,
nothing is returned and the caller takes that path, which raises DuckDB's error or falls
back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.types import SQLType
from hpc.domains.sql.scan_kernels import read_only_list
from numba import njit, prange

from .checked import _HALF, _SIGN, _chunks, _magnitude
from .evaluate import Batch, _limits, _literal_scalar, _scale_of, _widens, evaluate
from .lazy_decimals import LazyDecimals

__all__ = ["SumPrograms", "compile_sums"]

_COLUMN, _CONSTANT, _ADD, _SUB, _MUL, _EARLIER = range(6)
DIRECT_FROM = 1 << 15  # rows from which one SUM of a column gains too (see SumPrograms.worth)
_OPS = {"add": _ADD, "sub": _SUB, "mul": _MUL}
_BLOCK = 512  # rows per block: a few int64 operands of 4 kB stay in the L1 cache
_I64 = (int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max))


@njit(inline="always")
def _binary(code, a, b, oa, ob, width, rlo, rhi, nulls):  # type: ignore[no-untyped-def]
    """``a op= b`` over a block (``oa &= ob`` where the program has ``nulls``), in unsigned
    arithmetic (which wraps by definition: signed overflow is undefined to the compiler,
    see :func:`.checked._run`); returns the rows where both operands are valid and the
    result overflowed int64 or left ``[rlo, rhi]``. Branch-free loops over unsigned
    indices (no negative-index test), one per operation, so that they vectorise; a product
    checks its overflow by a division only in blocks holding an operand of 2**31 or
    more."""
    uw = np.uint64(width)
    wrong = np.int64(0)
    if code == _ADD:
        for j in range(uw):
            ux = np.uint64(a[j])
            uy = np.uint64(b[j])
            ur = ux + uy
            a[j] = np.int64(ur)
            wrong += _tally(((ux ^ ur) & (uy ^ ur) & _SIGN) != 0, np.int64(ur), rlo, rhi,
                            oa, ob, j, nulls)
    elif code == _SUB:
        for j in range(uw):
            ux = np.uint64(a[j])
            uy = np.uint64(b[j])
            ur = ux - uy
            a[j] = np.int64(ur)
            wrong += _tally(((ux ^ uy) & (ux ^ ur) & _SIGN) != 0, np.int64(ur), rlo, rhi,
                            oa, ob, j, nulls)
    else:
        big = np.uint64(0)
        for j in range(uw):
            big |= _magnitude(a[j]) | _magnitude(b[j])
        if big < _HALF:  # every product fits: no division
            for j in range(uw):
                r = np.int64(np.uint64(a[j]) * np.uint64(b[j]))
                a[j] = r
                wrong += _tally(False, r, rlo, rhi, oa, ob, j, nulls)
        else:
            for j in range(uw):
                x = a[j]
                y = b[j]
                wraps = False
                mx = _magnitude(x)
                my = _magnitude(y)
                if (mx | my) >= _HALF and my != 0:
                    limit = np.uint64(0x7FFFFFFFFFFFFFFF) if (x < 0) == (y < 0) else _SIGN
                    wraps = mx > limit // my
                r = np.int64(np.uint64(x) * np.uint64(y))
                a[j] = r
                wrong += _tally(wraps, r, rlo, rhi, oa, ob, j, nulls)
    return wrong


@njit(inline="always")
def _tally(wraps, r, rlo, rhi, oa, ob, j, nulls):  # type: ignore[no-untyped-def]
    # 1 where row j's result went wrong and counts (both operands valid; oa &= ob)
    bad = wraps | (r < rlo) | (r > rhi)
    if nulls:
        ok = oa[j] & ob[j]
        oa[j] = ok
        return np.int64(ok & bad)
    return np.int64(bad)


@njit(inline="always")
def _load(words, first, stride, factor, out, width):  # type: ignore[no-untyped-def]
    """``out[j]`` = value ``first + j`` of a chunk (``words[stride i]``: an integer chunk's
    own values, or the low word of Arrow's little-endian decimal128 pair) times
    ``factor``; returns how many need more than 64 bits (their scaled value, or a
    decimal128's high word that is not the low word's sign)."""
    if stride == 1 and factor == 1:
        out[:width] = words[first:first + width]
        return 0
    src = words[stride * first:stride * (first + width)]
    limit = _MAX // factor
    wrong = 0
    for j in range(np.uint64(width)):
        if stride == 2:
            x = src[np.uint64(2) * j]
            wrong += np.int64(src[np.uint64(2) * j + np.uint64(1)] != (x >> 63))
        else:
            x = src[j]
        wrong += np.int64((x > limit) | (x < -limit))
        out[j] = x * factor
    return wrong


_LANES = 4  # accumulators per group: rows in a row go to different ones (no chain of adds)
_LANED_GROUPS = 1 << 12  # more groups: one accumulator each (rows rarely share a group)
# An accumulator holds a sum of at most _SAFE in magnitude, so it cannot wrap; a block whose
# values reach _BIG (512 of them could pass _SAFE) is summed by its 32-bit halves
_SAFE = np.int64(1 << 62)
_BIG = np.uint64(1 << 52)
_MAX = np.int64(0x7FFFFFFFFFFFFFFF)
_LOW = np.int64(0xFFFFFFFF)
_FLUSHES = 4  # an accumulator emptied into the halves after at least this many rows a slot


@njit(parallel=True, nogil=True, cache=True)
def _run(ids, codes, args, los, his, starts, keep, nullable, words, bounds, seg_word,  # type: ignore[no-untyped-def]
         seg_base, strides, factors, valids, constants, depth, ngroups, lanes, chunks, acc,
         m, size, wide_hi, wide_lo, halves):
    # per chunk of rows (prange) and block of rows: each program leaves its values and
    # validity on a stack of blocks; each op checks int64 overflow and its type's range on
    # the rows where both operands are valid. A leaf's block is read from its chunk:
    # ``words[seg_word[leaf, u]]`` holds rows ``bounds[u]:bounds[u + 1]`` from row
    # ``seg_base[leaf, u]`` on (strides and factors per chunk, see _load), so a scanned
    # DECIMAL column is summed straight from Parquet's chunks, never converted whole.
    # Each result adds to its group in one of ``lanes`` accumulators by row (consecutive
    # rows of one group do not wait on each other), as one int64 while the sum of the
    # blocks' largest magnitudes stays below _SAFE (no wrap possible), else by its 32-bit
    # halves (exact below 2**31 rows, as checked._halves_many). The rows of each group
    # (``size``) are counted once; a program with NULLs counts its own (``m``). Per chunk
    # c: its accumulators acc[c], its halves wide_hi[c] / wide_lo[c] where halves[c], all
    # summed over the chunks and lanes by _combine.
    n = ids.shape[0]
    bad = 0
    for c in prange(chunks):
        bad += _chunk(c * n // chunks, (c + 1) * n // chunks, c, ids, codes, args, los, his,
                      starts, keep, nullable, words, bounds, seg_word, seg_base, strides,
                      factors, valids, constants, depth, ngroups, lanes, acc[c], m[c],
                      size[c], wide_hi[c], wide_lo[c], halves[c:c + 1])
    return bad


@njit(nogil=True, cache=True)
def _chunk(start, stop, c, ids, codes, args, los, his, starts, keep, nullable, words,  # type: ignore[no-untyped-def]
           bounds, seg_word, seg_base, strides, factors, valids, constants, depth, ngroups,
           lanes, acc, m, size, wide_hi, wide_lo, halves):
    # _run's rows start:stop into the chunk's accumulators (zeros from NumPy: huge pages,
    # where numba's fault in 4 KiB ones; the halves' pages untouched unless used, and
    # halves[0] set then); returns the rows that overflowed
    nprog = starts.shape[0] - 1
    slots = ngroups * lanes
    budget = np.zeros(nprog, np.int64)
    since = np.zeros(nprog, np.int64)
    wide = np.zeros(nprog, np.bool_)
    vals = np.empty((depth, _BLOCK), np.int64)
    oks = np.ones((depth, _BLOCK), np.bool_)
    slot = np.empty(_BLOCK, np.uint64)  # unsigned indices: no negative-index test
    ulanes, umask = np.uint64(lanes), np.uint64(lanes - 1)
    kept = np.empty((nprog, _BLOCK), np.int64)
    kept_ok = np.empty((nprog, _BLOCK), np.bool_)
    wrong = 0
    for u in range(bounds.shape[0] - 1):
        s0, s1 = max(start, bounds[u]), min(stop, bounds[u + 1])
        for b0 in range(s0, s1, _BLOCK):
            width = min(_BLOCK, s1 - b0)
            uw = np.uint64(width)
            block = ids[b0:b0 + width]
            for j in range(uw):
                s = np.uint64(block[j]) * ulanes + (j & umask)
                slot[j] = s
                size[s] += 1
            for p in range(nprog):
                top = 0
                for k in range(starts[p], starts[p + 1]):
                    code = codes[k]
                    if code == _COLUMN:
                        leaf = args[k]
                        w = seg_word[leaf, u]
                        wrong += _load(words[w], b0 - seg_base[leaf, u], strides[w],
                                       factors[w], vals[top], width)
                        valid = valids[leaf]
                        ok = oks[top]
                        if valid.shape[0] == 0:  # no NULLs
                            ok[:width] = True
                        else:
                            ok[:width] = valid[b0:b0 + width]
                        top += 1
                    elif code == _EARLIER:  # an earlier program's values
                        q = args[k]
                        vals[top, :width] = kept[q, :width]
                        oks[top, :width] = kept_ok[q, :width]
                        top += 1
                    elif code == _CONSTANT:
                        vals[top, :width] = constants[args[k]]
                        oks[top, :width] = True
                        top += 1
                    else:
                        top -= 1
                        wrong += _binary(code, vals[top - 1], vals[top], oks[top - 1],
                                         oks[top], width, los[k], his[k], nullable[p])
                v = vals[0]
                if keep[p]:
                    kept[p, :width] = v[:width]
                    kept_ok[p, :width] = oks[0, :width]
                if nullable[p]:
                    ok = oks[0]
                    mp = m[p]
                    for j in range(uw):
                        v[j] = v[j] if ok[j] else 0
                        mp[slot[j]] += np.int64(ok[j])
                big = np.uint64(0)
                for j in range(uw):
                    big |= _magnitude(v[j])
                add = np.int64(big) * width
                if not wide[p] and (big >= _BIG or budget[p] + add > _SAFE):
                    halves[0] = True
                    if wide_hi.shape[1] == 0:  # no halves given: the caller reruns with
                        return wrong  # them (rarely: sums near 2**62 or values past 2**52)
                    if big < _BIG and since[p] >= _FLUSHES * slots:
                        _flush(acc[p], wide_hi[p], wide_lo[p])  # rarely: many rows
                        budget[p] = 0
                        since[p] = 0
                    else:  # flushing would cost more than the rows: halves from now on
                        wide[p] = True
                if wide[p]:
                    hp, lp = wide_hi[p], wide_lo[p]
                    for j in range(uw):
                        hp[slot[j]] += v[j] >> 32
                        lp[slot[j]] += v[j] & _LOW
                else:
                    ap = acc[p]
                    for j in range(uw):
                        ap[slot[j]] += v[j]
                    budget[p] += add
                    since[p] += width
    return wrong


@njit(inline="always")
def _flush(acc, wide_hi, wide_lo):  # type: ignore[no-untyped-def]
    # an accumulator's sums into the halves, and emptied
    for s in range(acc.shape[0]):
        wide_hi[s] += acc[s] >> 32
        wide_lo[s] += acc[s] & _LOW
        acc[s] = 0


@njit(parallel=True, nogil=True, cache=True)
def _combine(acc, m, size, wide_hi, wide_lo, halves, nullable, lanes, total, rows,  # type: ignore[no-untyped-def]
             group_rows):
    # the chunks' and lanes' accumulators (and halves, where a chunk used them) of each
    # program and group into its exact sum (``total``) and count (``rows``: a program
    # without NULLs counts the group's rows, ``group_rows``), in one parallel pass over
    # the groups; returns how many sums leave int64
    chunks, k = acc.shape[0], acc.shape[1]
    ngroups = group_rows.shape[0]
    over = 0
    for g in prange(ngroups):
        r = np.int64(0)
        for c in range(chunks):
            for q in range(lanes):
                r += size[c, g * lanes + q]
        group_rows[g] = r
        for p in range(k):
            h = np.int64(0)
            low = np.int64(0)
            n = np.int64(0)
            for c in range(chunks):
                for q in range(lanes):
                    s = g * lanes + q
                    a = acc[c, p, s]
                    h += a >> 32
                    low += a & _LOW
                    if halves[c]:
                        h += wide_hi[c, p, s]
                        low += wide_lo[c, p, s]
                    if nullable[p]:
                        n += m[c, p, s]
            top = h + (low >> 32)  # below 2**62: under 2**31 rows
            over += np.int64((top < -(1 << 31)) | (top >= (1 << 31)))
            total[p, g] = (top << 32) | (low & _LOW)
            if nullable[p]:
                rows[p, g] = n
    return over


@dataclass
class SumPrograms:
    """Postfix programs over shared leaves (columns evaluated the usual way) and
    constants; :meth:`sums` runs them all in one pass."""

    leaves: list[E.Expr] = field(default_factory=list)
    constants: list[int] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    args: list[int] = field(default_factory=list)
    los: list[int] = field(default_factory=list)
    his: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=lambda: [0])
    depth: int = 1
    programs: dict[E.Expr, int] = field(default_factory=dict)  # argument -> its program
    wanted: list[int] = field(default_factory=list)  # the program of each argument
    reused: list[int] = field(default_factory=list)  # programs a later one reads
    # arithmetic inside a leaf (a CASE's branch): evaluated for the leaf anyway, so read as
    # a leaf column where a program holds it too, not computed twice
    evaluated: set[E.Expr] = field(default_factory=set)

    def worth(self, rows: int) -> bool:
        """Whether the programs gain over summing their arguments' columns on ``rows``:
        they fuse arithmetic or several arguments, or read enough rows that a column not
        converted (or one pass instead of the conversion's) outweighs setting them up."""
        return rows >= DIRECT_FROM or len(self.starts) > 2 or \
            any(c != _COLUMN for c in self.codes)

    def sums(self, batch: Batch, ids: np.ndarray, ngroups: int
             ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
        """Per argument ``(sums, counts, overflowed)`` per group over the rows where its
        value is not NULL, as :func:`.checked.group_sums_many`; None where an operation
        of a row that counts overflows its type (the caller evaluates the usual way, which
        raises the error)."""
        out = self.sums_and_sizes(batch, ids, ngroups)
        return None if out is None else out[0]

    def sums_and_sizes(self, batch: Batch, ids: np.ndarray, ngroups: int
                       ) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                                  np.ndarray] | None:
        """:meth:`sums`, and the rows of each group (``COUNT(*)``), counted in the same
        pass."""
        n = len(ids)
        pieces, valids = self._sources(batch)
        bounds = np.unique(np.array([0, n] + [p[0] for parts in pieces for p in parts
                                              if 0 < p[0] < n], dtype=np.int64))
        if len(bounds) == 1:
            bounds = np.array([0, 0], np.int64)
        flat: list[np.ndarray] = []
        strides, factors = [], []
        seg_word = np.zeros((max(len(pieces), 1), len(bounds) - 1), np.int64)
        seg_base = np.zeros_like(seg_word)
        for leaf, parts in enumerate(pieces):
            first_row = np.array([p[0] for p in parts], np.int64)
            which = np.searchsorted(first_row, bounds[:-1], side="right") - 1
            seg_word[leaf] = len(flat) + which
            seg_base[leaf] = first_row[which]
            for _, words, stride, factor in parts:
                flat.append(words)
                strides.append(stride)
                factors.append(factor)
        k = len(self.starts) - 1
        chunks = _chunks(n, ngroups, k)
        nullable = np.array([any(valids[a].shape[0] for c, a in zip(
            self.codes[self.starts[p]:self.starts[p + 1]],
            self.args[self.starts[p]:self.starts[p + 1]], strict=True) if c == _COLUMN)
            for p in range(k)], dtype=np.bool_)
        # programs reading earlier ones inherit their NULLs
        for p in range(k):
            for c, a in zip(self.codes[self.starts[p]:self.starts[p + 1]],
                            self.args[self.starts[p]:self.starts[p + 1]], strict=True):
                if c == _EARLIER:
                    nullable[p] |= nullable[a]
        lanes = _LANES if ngroups <= _LANED_GROUPS else 1
        slots = ngroups * lanes
        acc = np.zeros((chunks, k, slots), np.int64)
        m = np.zeros((chunks, k, slots if nullable.any() else 0), np.int64)
        seen = np.zeros((chunks, slots), np.int64)  # rows per chunk and slot
        # typed lists of read-only views: one kernel type for any number of leaves
        args = (np.ascontiguousarray(ids, dtype=np.int64), _i64(self.codes), _i64(self.args),
                _i64(self.los), _i64(self.his), _i64(self.starts),
                np.isin(np.arange(k), self.reused), nullable,
                read_only_list(flat or [np.zeros(1, np.int64)]), bounds, seg_word, seg_base,
                _i64(strides or [1]), _i64(factors or [1]),
                read_only_list(valids or [np.ones(0, np.bool_)]),
                _i64(self.constants + [0]), self.depth, ngroups, lanes, chunks)
        # first without the 32-bit halves (two more arrays of partial sums to clear)
        wide_hi = wide_lo = np.zeros((chunks, k, 0), np.int64)
        halves = np.zeros(chunks, np.bool_)
        bad = _run(*args, acc, m, seen, wide_hi, wide_lo, halves)
        if not bad and halves.any():  # some sum needs them: again, with them
            for a in (acc, m, seen, halves):
                a[...] = 0
            wide_hi = np.zeros((chunks, k, slots), np.int64)
            wide_lo = np.zeros((chunks, k, slots), np.int64)
            bad = _run(*args, acc, m, seen, wide_hi, wide_lo, halves)
        if bad:
            return None
        total = np.empty((k, ngroups), np.int64)
        rows = np.empty((k, ngroups), np.int64)  # (written for the programs with NULLs)
        size = np.empty(ngroups, np.int64)
        if _combine(acc, m, seen, wide_hi, wide_lo, halves, nullable, lanes, total, rows,
                    size):
            return None  # a group's sum leaves int64: the usual path says which
        over = np.zeros(ngroups, np.bool_)
        out = [(total[j], rows[j] if nullable[j] else size, over) for j in range(k)]
        return [out[j] for j in self.wanted], size

    def _sources(self, batch: Batch) -> tuple[list[list[tuple[int, np.ndarray, int, int]]],
                                              list[np.ndarray]]:
        """Per leaf its chunks ``(first row, words, stride, factor)`` (see :func:`_load`)
        and its validity (empty: no NULLs): a scanned DECIMAL column not yet converted as
        Parquet's chunks, any other leaf evaluated, as one chunk of int64."""
        pieces, valids = [], []
        every = np.ones(0, np.bool_)  # no NULLs (a one-row mask has one element)
        for leaf in self.leaves:
            col = batch.columns.get(leaf.name) if isinstance(leaf, E.Ref) else None
            parts = col.scaled_chunks() if isinstance(col, LazyDecimals) else None
            if parts is None:
                col = evaluate(leaf, batch)
                parts = [(0, np.ascontiguousarray(col.values, dtype=np.int64), 1, 1)]
            pieces.append(parts)
            valids.append(every if col.valid is None else
                          np.ascontiguousarray(col.valid, dtype=np.bool_))
        return pieces, valids

    # -- compiling ----------------------------------------------------------------------
    def add(self, e: E.Expr) -> None:
        """Append the program of ``e`` (see :func:`compile_sums`), one for equal arguments
        (``SUM(x)`` and ``AVG(x)``)."""
        if e not in self.programs:
            self.programs[e] = len(self.programs)
            self._emit(e, 0)
            self.starts.append(len(self.codes))
        self.wanted.append(self.programs[e])

    def _emit(self, e: E.Expr, height: int) -> None:
        t = e.type
        if e in self.programs and len(self.starts) > self.programs[e] + 1:
            # a whole earlier argument (``price * (1 - discount)`` inside a later SUM)
            self.reused.append(self.programs[e])
            self._code(_EARLIER, self.programs[e], height + 1)
            return
        if _is_arith(e) and e not in self.evaluated:
            a_e, b_e = e.args if e.name != "neg" else (E.Literal(0, t), e.args[0])
            op = "sub" if e.name == "neg" else e.name
            to = t.scale if t.kind == "decimal" and op != "mul" else None
            self._operand(a_e, height, to)
            self._operand(b_e, height + 1, to)
            lo, hi = _limits(t) or _I64
            self._code(_OPS[op], 0, height, lo, hi)
            return
        if _is_cast(e) and e not in self.evaluated:
            # a CAST up in scale: its operand times 10**k, in the target's range
            (a_e,) = e.args
            self._emit(a_e, height)
            up = _scale_of(t) - _scale_of(a_e.type)
            if up or not _widens(a_e.type, t):
                self.constants.append(10 ** up)
                self._code(_CONSTANT, len(self.constants) - 1, height + 2)
                self._code(_MUL, 0, height + 1, *(_limits(t) or _I64))
            return
        if isinstance(e, E.Literal):
            self.constants.append(int(_literal_scalar(e.value, t)))
            self._code(_CONSTANT, len(self.constants) - 1, height + 1)
            return
        if e not in self.leaves:
            self.leaves.append(e)
        self._code(_COLUMN, self.leaves.index(e), height + 1)

    def _operand(self, e: E.Expr, height: int, scale: int | None) -> None:
        """``e`` at ``scale`` (None: its own), scaled up by a checked multiplication as
        :func:`.evaluate._scale_up` does."""
        self._emit(e, height)
        up = 0 if scale is None else scale - _scale_of(e.type)
        if up:
            self.constants.append(10 ** up)
            self._code(_CONSTANT, len(self.constants) - 1, height + 2)
            self._code(_MUL, 0, height + 1, *_I64)

    def _code(self, code: int, arg: int, height: int, lo: int = 0, hi: int = 0) -> None:
        self.codes.append(code)
        self.args.append(arg)
        self.los.append(lo)
        self.his.append(hi)
        self.depth = max(self.depth, height)


def compile_sums(exprs: list[E.Expr]) -> SumPrograms:
    """The programs of the SUM arguments ``exprs`` (integer or DECIMAL). Any part that is
    not integer or DECIMAL ``+ - *`` or a CAST up in scale (a column, a CASE) is a leaf,
    evaluated as usual, or read from Parquet's chunks where it is a scanned DECIMAL
    column: even one SUM of a column gains (no converted copy of the column)."""
    programs = SumPrograms(evaluated={n for e in exprs for leaf in _leaves(e)
                                      for n in E.walk(leaf) if n is not leaf})
    for e in exprs:
        programs.add(e)
    return programs


def _leaves(e: E.Expr) -> list[E.Expr]:
    """The parts of ``e`` that a program reads as columns (see :func:`_is_arith`)."""
    if _is_arith(e) or _is_cast(e):
        return [x for a in e.args for x in _leaves(a)]
    return [] if isinstance(e, E.Literal) else [e]


def _exact(t: SQLType) -> bool:
    return t.kind in ("integer", "decimal")


def _is_arith(e: E.Expr) -> bool:
    """An integer or DECIMAL add, sub, mul or neg that :func:`.evaluate._arith` computes
    by checked int64 operations on its operands as they are (DECIMALs aligned up to the
    result's scale; a product at the sum of the scales)."""
    if not isinstance(e, E.Call) or e.name not in ("add", "sub", "mul", "neg"):
        return False
    if not _exact(e.type) or not all(_exact(a.type) for a in e.args):
        return False
    if any(isinstance(a, E.Literal) and a.value is None for a in e.args):
        return False
    scale, scales = _scale_of(e.type), [_scale_of(a.type) for a in e.args]
    if e.type.kind == "integer":
        return all(a.type.kind == "integer" for a in e.args)
    if e.name == "mul":
        return sum(scales) == scale
    return all(s <= scale for s in scales) and (e.name != "neg" or scales[0] == scale)


def _is_cast(e: E.Expr) -> bool:
    """A CAST between integer and DECIMAL types that keeps or raises the scale (at most
    by 18 digits): :func:`.evaluate.cast_column` multiplies by ``10**k`` and checks the
    target's range, as a checked product does."""
    if not isinstance(e, E.Call) or e.name != "cast" or len(e.args) != 1:
        return False
    src, dst = e.args[0].type, e.type
    return _exact(src) and _exact(dst) and 0 <= _scale_of(dst) - _scale_of(src) <= 18


def _i64(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)
