"""A filter's conjuncts as one program, run in one parallel pass over the rows: the rows where
the whole condition is TRUE, each column read once, block by block.

Evaluated conjunct by conjunct with NumPy, every comparison is a pass over its column that
writes a mask, and a DECIMAL column is converted whole before it is compared. Here the rows
are cut into pieces (spread over the threads) and each piece into blocks of 8192. A block's
rows still in the running are a bitmap while many are (each test then runs over the whole
block, branch-free, in SIMD lanes) and a selection vector once few are (each test then
reads only those rows): a later test reads only what the earlier ones left, as a per-row
short-circuit would, without its branches. The rows kept are a mask, made row numbers by a
second parallel pass where the caller wants them. A DECIMAL scanned as Parquet's int64
chunks at the column's scale is read in its chunks, never converted.

The condition is normalised first: NOT is pushed down to the leaves by De Morgan's laws,
which hold in SQL's three-valued logic, and each leaf then answers only "is it TRUE": a
leaf is TRUE on a row where its operands are not NULL and its (possibly negated) test holds.
Under AND and OR a node is TRUE exactly where all (any) of its children are TRUE, whatever
the others are (FALSE or NULL), so the program never needs the third value. The leaves:

- a column of integers, DATEs, TIMESTAMPs or DECIMALs (int64 unscaled) in a range
  ``[lo, hi]`` (``=``, ``<``, ``<=``, ``>``, ``>=`` against a constant of its type; the
  ranges of one column under an AND are intersected, so a BETWEEN is one test), or out of it;
- a DOUBLE column in a range, in DuckDB's total order (NaN equal to itself, above all);
- two columns of one type compared (``shipped < received``);
- an integer column IN a list of constants;
- IS [NOT] NULL of a column, a BOOLEAN column;
- any strict test of one dictionary-coded string column against constants (comparisons, IN,
  LIKE, of the column or of strict string functions of it: ``substring(phone, 1, 2) IN
  (...)``): evaluated once per dictionary entry, by :func:`.evaluate.evaluate` itself, into
  a table that the program looks the rows' codes up in (where the dictionary is small next
  to the rows: else the test is left to the caller, for the rows the program keeps).

Conjuncts that hold anything else are left to the caller, evaluated the usual way on the
rows the program kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.scan_kernels import read_only_list
from hpc.domains.sql.table import Column
from numba import njit, prange

from .evaluate import Batch, _literal_scalar, evaluate
from .lazy_decimals import LazyDecimals

__all__ = ["PredicateProgram", "compile_predicate", "warm_up"]

# leaves
_RANGE_I, _RANGE_F, _CMP, _IN, _NULL, _BOOL, _TABLE, _NEVER = range(8)
# instructions
_LEAF, _OR_BEGIN, _OR_NEXT, _OR_END = range(4)
# the arrays a column's values are in
_K_I64, _K_I32, _K_F64, _K_BOOL = range(4)

# rows per block: its selection vector and the OR's flags stay in L2. Each leaf's call and
# its columns' lookups cost a fixed amount a block (references counted across the threads):
# with blocks of 1024 that was half of a three-test filter's time on 6M rows
_BLOCK = 8192
_PIECE = 1 << 16  # rows per piece at most (pieces are what the threads share)
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
_MIRROR = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}
# bits of a two-column comparison: TRUE where (x < y, x = y, x > y) has its bit set
_BITS = {"lt": 4, "le": 6, "eq": 2, "ne": 5, "ge": 3, "gt": 1}
_EXACT_KINDS = ("integer", "decimal", "date", "timestamp")
# a string column's tests that are NULL exactly where the column is NULL: evaluated per
# dictionary entry (functions that turn NULL into a value, as concat does, are left out)
_STRICT_STRING = frozenset({"lower", "upper", "trim", "ltrim", "rtrim", "substring", "left",
                            "right", "replace", "length", "strpos"})
_STRICT_TESTS = _COMPARISONS | {"in", "like", "ilike", "starts_with"}
_LINEAR_IN = 16  # lists up to this long are scanned; longer ones binary-searched
_TABLE_FROM = 4  # string tests by table where the dictionary is at most 1/this of the rows
# a block's rows become a selection vector once at most 1/this are left: denser, the later
# tests would still read most cache lines of their columns, at a gather's cost each
_SPARSE_AFTER = 32
_OR_SPARSE_AFTER = 4  # ... and before an OR (whose alternatives each read the block again)


# -- the kernel ---------------------------------------------------------------------------
# A block's rows in the running are a bitmap (``bm``) while many are (every test then runs
# over all rows of the block, branch-free, in SIMD lanes), and a selection vector (``sel``,
# ``n`` of them) once few are (each test then reads only those rows). Every test below
# takes both: ``bitmap`` says which is live; in the selection it keeps its rows in place.

@njit(nogil=True, cache=True)
def _range(a, base, lo, hi, neg, sel, n, bm, bitmap, width):  # type: ignore[no-untyped-def]
    """Rows where ``lo <= a[j] <= hi`` differs from ``neg``."""
    a = a[base:base + width]  # (a view indexed from 0: no wraparound test, so SIMD)
    if bitmap:
        for j in range(width):
            x = a[j]
            bm[j] &= ((x >= lo) & (x <= hi)) != neg
        return n
    m = 0
    for i in range(n):
        j = sel[i]
        x = a[j]
        sel[m] = j
        m += ((x >= lo) & (x <= hi)) != neg
    return m


@njit(nogil=True, cache=True)
def _range_f(a, base, lo, hi, neg, sel, n, bm, bitmap, width):  # type: ignore[no-untyped-def]
    """:func:`_range` for doubles in DuckDB's total order: NaN above everything and equal to
    itself (a NaN ``lo``: only NaN; a NaN ``hi``: no upper bound)."""
    top = hi != hi
    a = a[base:base + width]
    if bitmap:
        for j in range(width):
            x = a[j]
            bm[j] &= (((x >= lo) | (x != x)) & ((x <= hi) | top)) != neg
        return n
    m = 0
    for i in range(n):
        j = sel[i]
        x = a[j]
        sel[m] = j
        m += (((x >= lo) | (x != x)) & ((x <= hi) | top)) != neg
    return m


@njit(inline="always")
def _order(x, y, lt_on, eq_on, gt_on):  # type: ignore[no-untyped-def]
    """``x`` against ``y`` (doubles in the total order) holds for the bits on."""
    lt = (x < y) | ((x == x) & (y != y))
    eq = (x == y) | ((x != x) & (y != y))
    gt = (x > y) | ((x != x) & (y == y))
    return (lt & lt_on) | (eq & eq_on) | (gt & gt_on)


@njit(nogil=True, cache=True)
def _cmp(a, abase, b, bbase, bits, sel, n, bm, bitmap, width):  # type: ignore[no-untyped-def]
    """Rows where ``a`` compared with ``b`` (less, equal, greater: bits 4, 2, 1 of ``bits``)
    holds."""
    lt_on = (bits & 4) != 0
    eq_on = (bits & 2) != 0
    gt_on = (bits & 1) != 0
    a = a[abase:abase + width]
    b = b[bbase:bbase + width]
    if bitmap:
        for j in range(width):
            bm[j] &= _order(a[j], b[j], lt_on, eq_on, gt_on)
        return n
    m = 0
    for i in range(n):
        j = sel[i]
        sel[m] = j
        m += _order(a[j], b[j], lt_on, eq_on, gt_on)
    return m


@njit(inline="always")
def _member(x, values, lo, hi):  # type: ignore[no-untyped-def]
    """Whether ``x`` is one of ``values[lo:hi]`` (sorted)."""
    if hi - lo <= _LINEAR_IN:
        hit = False
        for k in range(lo, hi):
            hit |= x == values[k]
        return hit
    left, right = lo, hi
    while left < right:
        mid = (left + right) >> 1
        if values[mid] < x:
            left = mid + 1
        else:
            right = mid
    return left < hi and values[left] == x


@njit(nogil=True, cache=True)
def _in(a, base, values, lo, hi, neg, sel, n, bm, bitmap, width):  # type: ignore[no-untyped-def]
    """Rows where ``a``'s value being one of ``values[lo:hi]`` differs from ``neg``."""
    a = a[base:base + width]
    if bitmap:
        for j in range(width):
            if bm[j]:
                bm[j] = _member(a[j], values, lo, hi) != neg
        return n
    m = 0
    for i in range(n):
        j = sel[i]
        sel[m] = j
        m += _member(a[j], values, lo, hi) != neg
    return m


@njit(nogil=True, cache=True)
def _flags(flags, base, want, sel, n, bm, bitmap, width):  # type: ignore[no-untyped-def]
    """Rows where ``flags[base + j]`` is ``want``."""
    flags = flags[base:base + width]
    if bitmap:
        for j in range(width):
            bm[j] &= flags[j] == want
        return n
    m = 0
    for i in range(n):
        j = sel[i]
        sel[m] = j
        m += flags[j] == want
    return m


@njit(nogil=True, cache=True)
def _looked_up(codes, base, table, sel, n, bm, bitmap, width):  # type: ignore[no-untyped-def]
    """Rows whose code is TRUE in ``table``."""
    codes = codes[base:base + width]
    if bitmap:
        for j in range(width):
            bm[j] &= table[codes[j]]
        return n
    m = 0
    for i in range(n):
        j = sel[i]
        sel[m] = j
        m += table[codes[j]]
    return m


@njit(nogil=True, cache=True, inline="always")  # inlined: no call (and no counted refs)
def _leaf(q, p, b0, sel, n, bm, bitmap, width, kinds, cols, cols2, neg, los, his, flos,  # type: ignore[no-untyped-def]
          fhis, colkind, colseg, coloff, colvalid, i64s, i32s, f64s, bools, ints):
    """Leaf ``q`` on block ``b0`` of piece ``p``: the rows left (in ``bm`` or ``sel``)."""
    kind = kinds[q]
    if kind == _NEVER:
        if bitmap:
            bm[:width] = False
        return 0
    c = cols[q]
    ck = colkind[c]
    s = colseg[c, p]
    base = b0 - coloff[c, p]
    if kind == _RANGE_I:
        lo, hi = los[q], his[q]
        if ck == _K_I64:
            n = _range(i64s[s], base, lo, hi, neg[q], sel, n, bm, bitmap, width)
        else:  # compared as int32 (SIMD lanes of 32 bits): no int32 in range, or clamped
            if hi < _I32_MIN or lo > _I32_MAX:
                lo, hi = 1, 0
            n = _range(i32s[s], base, np.int32(max(lo, _I32_MIN)), np.int32(min(hi, _I32_MAX)),
                       neg[q], sel, n, bm, bitmap, width)
    elif kind == _RANGE_F:
        n = _range_f(f64s[s], base, flos[q], fhis[q], neg[q], sel, n, bm, bitmap, width)
    elif kind == _IN:
        if ck == _K_I64:
            n = _in(i64s[s], base, ints, los[q], his[q], neg[q], sel, n, bm, bitmap, width)
        else:
            n = _in(i32s[s], base, ints, los[q], his[q], neg[q], sel, n, bm, bitmap, width)
    elif kind == _NULL:  # TRUE where the column's validity is not ``neg`` (IS NOT NULL)
        v = colvalid[c]
        if v >= 0:
            return _flags(bools[v], b0, neg[q], sel, n, bm, bitmap, width)
        if not neg[q]:  # no NULLs: IS NULL holds nowhere, IS NOT NULL everywhere
            if bitmap:
                bm[:width] = False
            return 0
        return n
    elif kind == _BOOL:
        n = _flags(bools[s], base, not neg[q], sel, n, bm, bitmap, width)
    elif kind == _TABLE:
        if ck == _K_I64:
            n = _looked_up(i64s[s], base, bools[los[q]], sel, n, bm, bitmap, width)
        else:
            n = _looked_up(i32s[s], base, bools[los[q]], sel, n, bm, bitmap, width)
    else:  # _CMP
        d = cols2[q]
        dk = colkind[d]
        t = colseg[d, p]
        dbase = b0 - coloff[d, p]
        bits = los[q]
        if ck == _K_F64:
            n = _cmp(f64s[s], base, f64s[t], dbase, bits, sel, n, bm, bitmap, width)
        elif ck == _K_I64 and dk == _K_I64:
            n = _cmp(i64s[s], base, i64s[t], dbase, bits, sel, n, bm, bitmap, width)
        elif ck == _K_I64:
            n = _cmp(i64s[s], base, i32s[t], dbase, bits, sel, n, bm, bitmap, width)
        elif dk == _K_I64:
            n = _cmp(i32s[s], base, i64s[t], dbase, bits, sel, n, bm, bitmap, width)
        else:
            n = _cmp(i32s[s], base, i32s[t], dbase, bits, sel, n, bm, bitmap, width)
        if colvalid[d] >= 0:
            n = _flags(bools[colvalid[d]], b0, True, sel, n, bm, bitmap, width)
    if colvalid[c] >= 0:  # a NULL operand: not TRUE, whatever the test says
        n = _flags(bools[colvalid[c]], b0, True, sel, n, bm, bitmap, width)
    return n


@njit(parallel=True, nogil=True, cache=True)
def _run(pstarts, code, arg, skip, depth, kinds, cols, cols2, neg, los, his, flos, fhis,  # type: ignore[no-untyped-def]
         colkind, colseg, coloff, colvalid, i64s, i32s, f64s, bools, ints, sparse_after, block,
         mask, counts):
    """Per piece (prange) and block: the instructions run on the block's rows; the rows
    left are set in ``mask`` (``counts``: how many per piece). A block starts as a bitmap
    and turns to a selection vector, outside any OR, once at most 1/``sparse_after`` of its
    rows are left. An OR keeps
    its input (``orig``, ``rem``) and the rows its alternatives accepted (``acc``); each
    alternative runs on the rows none before it accepted."""
    ncode = code.shape[0]
    frames = max(depth, 1)
    for p in prange(pstarts.shape[0] - 1):
        start, stop = pstarts[p], pstarts[p + 1]
        sel = np.empty(block, np.int32)
        bm = np.empty(block, np.bool_)
        words = bm.view(np.uint64)
        rem = np.empty((frames, block), np.int32)
        remn = np.zeros(frames, np.int64)
        orig = np.empty((frames, block), np.bool_)
        acc = np.zeros((frames, block), np.bool_)
        k = start
        for b0 in range(start, stop, block):
            width = min(block, stop - b0)
            n = width
            bitmap = True
            bm[:width] = True
            level = 0
            pc = 0
            while pc < ncode:
                op = code[pc]
                if op == _LEAF:
                    if n == 0:
                        pc = skip[pc]
                        continue
                    n = _leaf(arg[pc], p, b0, sel, n, bm, bitmap, width, kinds, cols, cols2,
                              neg, los, his, flos, fhis, colkind, colseg, coloff, colvalid,
                              i64s, i32s, f64s, bools, ints)
                    if bitmap and level == 0 and n != 0 and pc + 1 < ncode:
                        n = 0
                        for j in range(width):
                            n += bm[j]
                        if n * sparse_after <= width:  # (8 rows at a time: most are none)
                            n = 0
                            full = width >> 3
                            for w in range(full):
                                if words[w] != 0:
                                    for j in range(8 * w, 8 * w + 8):
                                        sel[n] = j
                                        n += bm[j]
                            for j in range(8 * full, width):
                                sel[n] = j
                                n += bm[j]
                            bitmap = False
                elif op == _OR_BEGIN:
                    d = arg[pc]
                    if bitmap and level == 0 and n * _OR_SPARSE_AFTER <= width:
                        # each alternative reads its columns again: only the rows left
                        m = 0
                        for j in range(width):
                            sel[m] = j
                            m += bm[j]
                        n = m
                        bitmap = False
                    level += 1
                    acc[d, :width] = False
                    if bitmap:
                        orig[d, :width] = bm[:width]
                    else:
                        rem[d, :n] = sel[:n]
                        remn[d] = n
                else:  # an alternative done: its rows accepted, the next tries the others
                    d = arg[pc]
                    if bitmap:
                        for j in range(width):
                            acc[d, j] |= bm[j]
                        if op == _OR_NEXT:
                            for j in range(width):
                                bm[j] = orig[d, j] > acc[d, j]  # in, not yet accepted
                        else:
                            bm[:width] = acc[d, :width]
                        n = width  # (not counted inside an OR)
                    else:
                        for i in range(n):
                            acc[d, sel[i]] = True
                        n = 0
                        if op == _OR_NEXT:
                            for i in range(remn[d]):
                                j = rem[d, i]
                                sel[n] = j
                                n += not acc[d, j]
                            rem[d, :n] = sel[:n]
                            remn[d] = n
                        else:
                            for j in range(width):
                                sel[n] = j
                                n += acc[d, j]
                    if op == _OR_END:
                        level -= 1
                pc += 1
            if bitmap:
                mask[b0:b0 + width] = bm[:width]
                for j in range(width):
                    k += bm[j]
            else:
                mask[b0:b0 + width] = False
                for i in range(n):
                    mask[b0 + sel[i]] = True
                k += n
        counts[p] = k - start


@njit(parallel=True, nogil=True, cache=True)
def _mask_rows(mask, pstarts, offsets, block, out):  # type: ignore[no-untyped-def]
    """The rows set in ``mask``, each piece's from ``offsets[p]`` on in ``out``: block by
    block into a buffer with room for a row past the last (branch-free), then copied."""
    for p in prange(pstarts.shape[0] - 1):
        buf = np.empty(block + 1, np.int64)
        k = offsets[p]
        for b0 in range(pstarts[p], pstarts[p + 1], block):
            width = min(block, pstarts[p + 1] - b0)
            flags = mask[b0:b0 + width]
            if not flags.any():
                continue
            m = 0
            for j in range(width):
                buf[m] = b0 + j
                m += flags[j]
            out[k:k + m] = buf[:m]
            k += m


# -- compiling ----------------------------------------------------------------------------

@dataclass
class _Leaf:
    kind: int
    col: Any = None  # the column's name (a _TABLE leaf: its codes' column)
    col2: Any = None
    neg: bool = False
    lo: Any = 0  # a range's bounds, a comparison's bits, an IN list's (start, stop)
    hi: Any = 0
    values: list[int] = field(default_factory=list)  # an IN list (sorted)
    test: E.Expr | None = None  # a _TABLE leaf's test


@dataclass
class PredicateProgram:
    """The program of some conjuncts of a filter over a frame's columns (see
    :func:`compile_predicate`)."""

    leaves: list[_Leaf]
    code: list[int]
    arg: list[int]
    skip: list[int]
    depth: int
    names: list[str]  # the columns read

    def rows(self, columns: dict[str, Column], nrows: int, as_mask: bool = False
             ) -> np.ndarray | None:
        """The rows (ascending int64, or a mask with ``as_mask``) where the conjuncts are
        all TRUE; None where a column's values are not of a kind its leaves read (the
        caller evaluates the usual way)."""
        i64s: list[np.ndarray] = []
        i32s: list[np.ndarray] = []
        f64s: list[np.ndarray] = []
        bools: list[np.ndarray] = [np.zeros(1, np.bool_)]
        ncols = len(self.names)
        cuts = {0, nrows}
        segments: list[tuple[int, list[tuple[int, int]]]] = []  # (kind, [(first row, array)])
        valid = np.full(max(ncols, 1), -1, np.int64)
        for c, name in enumerate(self.names):
            col = columns[name]
            chunks = _int64_chunks(col)
            if chunks is not None:
                kind, parts = _K_I64, []
                for first, words in chunks:
                    parts.append((first, len(i64s)))
                    i64s.append(words)
                    cuts.add(first)
            else:
                kind, values = _held(col.values)
                target = (i64s, i32s, f64s, bools)[kind]
                parts = [(0, len(target))]
                target.append(values)
            segments.append((kind, parts))
            if col.valid is not None:
                valid[c] = len(bools)
                bools.append(np.ascontiguousarray(col.valid, dtype=np.bool_))
        kind_of = {name: k for name, (k, _) in zip(self.names, segments, strict=True)}
        for leaf in self.leaves:
            first = kind_of.get(leaf.col)
            if leaf.kind in _READS and first not in _READS[leaf.kind]:
                return None
            if leaf.kind == _CMP and ((first == _K_F64) != (kind_of[leaf.col2] == _K_F64) or
                                      _K_BOOL in (first, kind_of[leaf.col2])):
                return None
        # pieces: cut at every chunk's first row, at most _PIECE rows each
        bounds = sorted(cuts)
        starts: list[int] = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            starts.extend(range(a, b, _PIECE))
        pstarts = np.asarray(starts + [nrows], np.int64)
        npieces = len(starts)
        colkind = np.zeros(max(ncols, 1), np.int64)
        colseg = np.zeros((max(ncols, 1), max(npieces, 1)), np.int64)
        coloff = np.zeros((max(ncols, 1), max(npieces, 1)), np.int64)
        for c, (kind, parts) in enumerate(segments):
            colkind[c] = kind
            firsts = np.asarray([f for f, _ in parts], np.int64)
            which = np.searchsorted(firsts, pstarts[:-1], side="right") - 1
            colseg[c, :npieces] = np.asarray([s for _, s in parts], np.int64)[which]
            coloff[c, :npieces] = firsts[which]
        index = {name: c for c, name in enumerate(self.names)}
        ints: list[int] = []
        nl = max(len(self.leaves), 1)
        kinds, cols, cols2 = (np.zeros(nl, np.int64) for _ in range(3))
        neg = np.zeros(nl, np.bool_)
        los, his = np.zeros(nl, np.int64), np.zeros(nl, np.int64)
        flos, fhis = np.zeros(nl, np.float64), np.zeros(nl, np.float64)
        for q, leaf in enumerate(self.leaves):
            kinds[q], neg[q] = leaf.kind, leaf.neg
            cols[q] = index.get(leaf.col, 0)
            cols2[q] = index.get(leaf.col2, 0)
            if leaf.kind == _RANGE_F:
                flos[q], fhis[q] = leaf.lo, leaf.hi
            elif leaf.kind == _IN:
                los[q], his[q] = len(ints), len(ints) + len(leaf.values)
                ints.extend(leaf.values)
            elif leaf.kind == _TABLE:
                table = _table(leaf, columns[leaf.col])
                codes = np.flatnonzero(table)
                if len(codes) and codes[-1] - codes[0] == len(codes) - 1:
                    # one run of codes (an equality, a prefix in a sorted dictionary): a
                    # range of codes, compared in SIMD lanes (a lookup is a gather)
                    kinds[q], neg[q] = _RANGE_I, False
                    los[q], his[q] = codes[0], codes[-1]
                elif len(codes) <= _LINEAR_IN:
                    kinds[q], neg[q] = (_IN, False) if len(codes) else (_NEVER, False)
                    los[q], his[q] = len(ints), len(ints) + len(codes)
                    ints.extend(codes.tolist())
                else:
                    los[q] = len(bools)
                    bools.append(table)
            else:
                los[q], his[q] = leaf.lo, leaf.hi
        mask = np.empty(nrows, np.bool_)
        counts = np.zeros(npieces, np.int64)
        _run(pstarts, _i64(self.code), _i64(self.arg), _i64(self.skip), self.depth, kinds,
             cols, cols2, neg, los, his, flos, fhis, colkind, colseg, coloff, valid,
             read_only_list(i64s or [np.zeros(1, np.int64)]),
             read_only_list(i32s or [np.zeros(1, np.int32)]),
             read_only_list(f64s or [np.zeros(1, np.float64)]), read_only_list(bools),
             _i64(ints + [0]), _SPARSE_AFTER, _BLOCK, mask, counts)
        if as_mask:
            return mask
        offsets = np.concatenate([[0], np.cumsum(counts)])
        out = np.empty(int(offsets[-1]), np.int64)
        _mask_rows(mask, pstarts, offsets, _BLOCK, out)
        return out


def _i64(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _int64_chunks(col: Column | None) -> list[tuple[int, np.ndarray]] | None:
    """A DECIMAL still in Parquet's chunks as ``(first row, int64 words)`` per chunk, where
    each chunk holds the unscaled values at the column's scale as they are (nothing to
    convert or check); else None (its ``values`` are read)."""
    if not isinstance(col, LazyDecimals) or col._values is not None:
        return None
    parts = col._source.chunk_words()
    if not parts or any(stride != 1 or scale != col._scale or words.dtype != np.int64
                        for _, words, stride, scale in parts):
        return None
    return [(first, words) for first, words, _, _ in parts]


def _held(values: np.ndarray) -> tuple[int, np.ndarray]:
    """A column's values as the kernel holds them: (their kind, the array)."""
    values = np.ascontiguousarray(values)
    if values.dtype.kind == "f":
        return _K_F64, values.astype(np.float64, copy=False)
    if values.dtype == np.int32:
        return _K_I32, values
    if values.dtype == np.bool_:
        return _K_BOOL, values
    return _K_I64, values.astype(np.int64, copy=False)


# the kinds of values each leaf reads (its first column, its second)
_READS = {_RANGE_I: (_K_I64, _K_I32), _RANGE_F: (_K_F64,), _IN: (_K_I64, _K_I32),
          _TABLE: (_K_I64, _K_I32), _BOOL: (_K_BOOL,)}


def compile_predicate(terms: list[E.Expr], columns: dict[str, Column], nrows: int
                      ) -> tuple[PredicateProgram | None, list[E.Expr]]:
    """The program of the conjuncts ``terms`` of a filter over ``columns`` (``nrows`` rows)
    that it can express, and the others (in their order); None for the program where it
    expresses none. A string test's table is made here."""
    builder = _Builder(columns, nrows)
    nodes, rest = [], []
    for t in terms:
        node = builder.node(t, False)
        if node is None:
            rest.append(t)
        else:
            nodes.append(node)
    program = builder.program(_joined("and", nodes)) if nodes else None
    if program is None or not program.leaves:
        return None, list(terms)
    # even a single range (``d >= x AND d < y``, one leaf): NumPy's two comparisons, their
    # AND and the row numbers take 2-3x the program's one parallel pass
    return program, rest


_Node = Any  # a _Leaf, or ("and" | "or", [children])


def _joined(op: str, kids: list[_Node]) -> _Node:
    """``op`` of ``kids``: nested ones of the same op flattened; under AND, the ranges of one
    integer column intersected."""
    flat: list[_Node] = []
    for k in kids:
        flat.extend(k[1] if isinstance(k, tuple) and k[0] == op else [k])
    if op == "and":
        ranges: dict[str, _Leaf] = {}
        merged: list[_Node] = []
        for k in flat:
            if isinstance(k, _Leaf) and k.kind == _RANGE_I and not k.neg:
                held = ranges.get(k.col)
                if held is not None:
                    held.lo, held.hi = max(held.lo, k.lo), min(held.hi, k.hi)
                    continue
                k = _Leaf(_RANGE_I, k.col, lo=k.lo, hi=k.hi)
                ranges[k.col] = k
            merged.append(k)
        flat = merged
    if len(flat) == 1:
        return flat[0]
    return (op, flat)


class _Builder:
    """Turns conditions into nodes over the columns of one frame."""

    def __init__(self, columns: dict[str, Column], nrows: int) -> None:
        self.columns = columns
        self.nrows = nrows

    def node(self, e: E.Expr, neg: bool) -> _Node | None:
        """``e`` (negated with ``neg``) as a node that is TRUE where it is, or None."""
        if isinstance(e, E.Literal) and e.type.kind in ("boolean", "null"):
            if e.value is None or bool(e.value) == neg:
                return _Leaf(_NEVER)
            return ("and", [])  # TRUE: every row
        if isinstance(e, E.Ref):
            if e.type.kind != "boolean" or e.name not in self.columns:
                return None
            return _Leaf(_BOOL, e.name, neg=neg)
        if not isinstance(e, E.Call):
            return None
        if e.name == "not":
            return self.node(e.args[0], not neg)
        if e.name in ("and", "or"):
            kids = [self.node(a, neg) for a in e.args]
            if any(k is None for k in kids):
                return None
            return _joined("and" if (e.name == "and") != neg else "or", kids)
        if e.name in ("is_null", "is_not_null"):
            x = e.args[0]
            if not isinstance(x, E.Ref) or x.name not in self.columns:
                return None
            return _Leaf(_NULL, x.name, neg=(e.name == "is_not_null") != neg)
        if e.name not in _STRICT_TESTS:
            return None
        string = self._string_test(e, neg)
        if string is not None:
            return string
        if e.name in _COMPARISONS:
            return self._comparison(e, neg)
        if e.name == "in":
            return self._in(e, neg)
        return None

    def _ref(self, e: E.Expr) -> E.Ref | None:
        if isinstance(e, E.Ref) and e.name in self.columns and \
                e.type.kind in _EXACT_KINDS + ("double",):
            return e
        return None

    def _comparison(self, e: E.Call, neg: bool) -> _Node | None:
        a, b = e.args
        name = e.name
        if isinstance(a, E.Literal) and not isinstance(b, E.Literal):
            a, b, name = b, a, _MIRROR[name]
        x = self._ref(a)
        if x is None:
            return None
        if isinstance(b, E.Literal):
            if b.value is None:
                return _Leaf(_NEVER)
            if not _same_domain(x.type, b.type):
                return None
            if x.type.kind == "double":
                lo, hi, flip = _float_range(name, float(b.value))
                return _Leaf(_RANGE_F, x.name, neg=flip != neg, lo=lo, hi=hi)
            c = int(_literal_scalar(b.value, b.type))
            lo, hi = {"eq": (c, c), "ne": (c, c), "lt": (_I64_MIN, c - 1),
                      "le": (_I64_MIN, c), "gt": (c + 1, _I64_MAX),
                      "ge": (c, _I64_MAX)}[name]
            lo, hi = max(lo, _I64_MIN), min(hi, _I64_MAX)
            if lo > hi:
                lo, hi = 1, 0  # no value
            return _Leaf(_RANGE_I, x.name, neg=(name == "ne") != neg, lo=lo, hi=hi)
        y = self._ref(b)
        if y is None or not _same_domain(x.type, y.type):
            return None
        bits = _BITS[name] ^ (7 if neg else 0)
        return _Leaf(_CMP, x.name, y.name, lo=bits)

    def _in(self, e: E.Call, neg: bool) -> _Node | None:
        x = self._ref(e.args[0])
        items = e.args[1:]
        if x is None or x.type.kind == "double" or not all(
                isinstance(i, E.Literal) and (i.value is None or _same_domain(x.type, i.type))
                for i in items):
            return None
        has_null = any(i.value is None for i in items)  # type: ignore[attr-defined]
        values = sorted({int(_literal_scalar(i.value, i.type)) for i in items  # type: ignore[attr-defined]
                         if i.value is not None})  # type: ignore[attr-defined]
        values = [v for v in values if _I64_MIN <= v <= _I64_MAX]
        if (neg and has_null) or (not values and not neg):
            return _Leaf(_NEVER)  # NOT IN a list with NULL: FALSE or NULL, never TRUE
        return _Leaf(_IN, x.name, neg=neg, values=values)

    def _string_test(self, e: E.Call, neg: bool) -> _Node | None:
        """A test of one string column against constants, NULL where the column is: looked
        up by code in a table of the dictionary's entries where it is TRUE (made once the
        program is known to run, see :func:`_table`)."""
        refs: list[E.Ref] = []
        if not _strict_of_strings(e, refs) or len({r.name for r in refs}) != 1:
            return None
        x = refs[0]
        col = self.columns.get(x.name)
        if col is None or col.kind != "string" or col.dictionary is None or \
                not isinstance(col.values, np.ndarray):
            return None
        d = col.dictionary
        if len(d) == 0:
            return _Leaf(_NEVER)  # no strings: every row is NULL
        if len(d) * _TABLE_FROM > self.nrows:  # as costly as the rows' own test: left to
            return None  # the caller, which evaluates it on the rows the program keeps
        return _Leaf(_TABLE, x.name, neg=neg, test=e)

    def program(self, root: _Node) -> PredicateProgram:
        leaves: list[_Leaf] = []
        code: list[int] = []
        arg: list[int] = []
        skip: list[int] = []
        depth = 0

        def emit(node: _Node, level: int) -> list[int]:
            """Appends ``node``'s instructions; returns its leaves' positions that jump,
            when no row is left, to the end of the alternative they are in."""
            nonlocal depth
            if isinstance(node, _Leaf):
                code.append(_LEAF)
                arg.append(len(leaves))
                skip.append(-1)
                leaves.append(node)
                return [len(code) - 1]
            op, kids = node
            if op == "and":
                return [pos for k in kids for pos in emit(k, level)]
            depth = max(depth, level + 1)
            code.append(_OR_BEGIN)
            arg.append(level)
            skip.append(-1)
            for i, k in enumerate(kids):
                pending = emit(k, level + 1)
                code.append(_OR_END if i == len(kids) - 1 else _OR_NEXT)
                arg.append(level)
                skip.append(-1)
                for pos in pending:
                    skip[pos] = len(code) - 1
            return []

        for pos in emit(root, 0):
            skip[pos] = len(code)
        names = sorted({n for leaf in leaves for n in (leaf.col, leaf.col2) if n is not None})
        return PredicateProgram(leaves, code, arg, skip, depth, names)


def _table(leaf: _Leaf, col: Column) -> np.ndarray:
    """A string test's truth per entry of its column's dictionary: TRUE (the test negated
    with ``leaf.neg``) where the test, evaluated on the entries themselves, is."""
    d = col.dictionary
    assert d is not None and leaf.test is not None and leaf.col is not None
    entries = Column(np.arange(len(d), dtype=np.int32), "string", d, None)
    truth = evaluate(leaf.test, Batch({leaf.col: entries}, len(d)))
    values = np.asarray(truth.values, dtype=np.bool_)
    table = ~values if leaf.neg else values
    if truth.valid is not None:
        table = table & truth.valid
    return np.ascontiguousarray(np.broadcast_to(table, (len(d),)))


def _same_domain(a: Any, b: Any) -> bool:
    """Whether values of SQL types ``a`` and ``b`` compare as they are held (int64 unscaled
    at one scale, days, microseconds, doubles): equal types, or two integers."""
    if a.kind == "integer" and b.kind == "integer":
        return True
    return bool(a == b) and a.kind in _EXACT_KINDS + ("double",)


def _float_range(name: str, c: float) -> tuple[float, float, bool]:
    """``x <name> c`` for doubles as ``(lo, hi, negated)``: ``lo <= x <= hi`` in DuckDB's
    total order (NaN above all; a NaN ``lo``: NaN alone; a NaN ``hi``: no upper bound)."""
    nan, inf = math.nan, math.inf
    if name == "ne":
        lo, hi, _ = _float_range("eq", c)
        return lo, hi, True
    empty = (inf, -inf, False)
    if math.isnan(c):
        return {"eq": (nan, nan, False), "lt": (-inf, inf, False), "le": (-inf, nan, False),
                "gt": empty, "ge": (nan, nan, False)}[name]
    if name == "eq":
        return c, c, False
    if name == "le":
        return -inf, c, False
    if name == "ge":
        return c, nan, False
    if name == "lt":
        return empty if c == -inf else (-inf, math.nextafter(c, -inf), False)
    return (nan, nan, False) if c == inf else (math.nextafter(c, inf), nan, False)


def _strict_of_strings(e: E.Expr, refs: list[E.Ref]) -> bool:
    """Whether ``e`` is a test (or a string function) built of constants and string
    columns (appended to ``refs``) by operations that are NULL where a column is."""
    if isinstance(e, E.Literal):
        return True
    if isinstance(e, E.Ref):
        refs.append(e)
        return e.type.kind == "varchar"
    if not isinstance(e, E.Call) or e.name not in _STRICT_STRING | _STRICT_TESTS:
        return False
    return all(_strict_of_strings(a, refs) for a in e.args)


def warm_up() -> None:
    """Compiles (or loads from numba's cache) the kernels: one program over a few rows.
    Filters use programs on large inputs only, so a warm-up of small queries never would."""
    from hpc.domains.sql.logical.types import BIGINT, BOOLEAN

    x = E.Ref("x", BIGINT)
    cond = E.Call("or", (E.Call("lt", (x, E.Literal(1, BIGINT)), BOOLEAN),
                         E.Call("gt", (x, E.Literal(2, BIGINT)), BOOLEAN)), BOOLEAN)
    columns = {"x": Column(np.arange(4, dtype=np.int64), "int")}
    program, _ = compile_predicate([cond], columns, 4)
    assert program is not None
    program.rows(columns, 4)
