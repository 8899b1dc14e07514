"""Exact SUMs of integer and DECIMAL arithmetic per group in one pass: the arguments' ``+ -
*`` (``SUM(price * (1 - discount) * (1 + tax))``) run as postfix programs, block by block,
and each block's results are summed into its group at once.

Evaluated one operation at a time, such a SUM writes a column of 8 bytes a row per
operation, reads it back for the next one and again for the sums. Here the operands of a
block of rows stay in the cache from the first operation to the group's sum. Every
operation is the checked int64 operation of :mod:`.evaluate` (same values, same range of the
result type), so the sums are the ones the operation-at-a-time path gives. Where any
operation of a row that counts overflows, or a group's sum leaves int64, nothing is
returned and the caller takes that path, which raises DuckDB's error or falls back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.types import SQLType
from hpc.domains.sql.scan_kernels import read_only_list
from numba import njit, prange

from .checked import _HALF, _SIGN, _chunks, _magnitude
from .evaluate import Batch, _limits, _literal_scalar, _scale_of, evaluate

__all__ = ["SumPrograms", "compile_sums"]

_COLUMN, _CONSTANT, _ADD, _SUB, _MUL, _EARLIER = range(6)
_OPS = {"add": _ADD, "sub": _SUB, "mul": _MUL}
_BLOCK = 512  # rows per block: a few int64 operands of 4 kB stay in the L1 cache
_I64 = (int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max))


@njit(inline="always")
def _binary(code, oks, vals, top, width, rlo, rhi):  # type: ignore[no-untyped-def]
    """``vals[top-1] op= vals[top]`` over a block, in unsigned arithmetic (which wraps by
    definition: signed overflow is undefined to the compiler, see :func:`.checked._run`);
    returns the rows where both operands are valid and the result overflowed int64 or left
    ``[rlo, rhi]``. Branch-free loops, so that they vectorise; a product checks its
    overflow by a division only in blocks holding an operand of 2**31 or more."""
    wrong = 0
    if code == _ADD or code == _SUB:
        for j in range(width):
            ux = np.uint64(vals[top - 1, j])
            uy = np.uint64(vals[top, j])
            if code == _ADD:
                ur = ux + uy
                over = ((ux ^ ur) & (uy ^ ur) & _SIGN) != 0
            else:
                ur = ux - uy
                over = ((ux ^ uy) & (ux ^ ur) & _SIGN) != 0
            r = np.int64(ur)
            ok = oks[top - 1, j] & oks[top, j]
            wrong += np.int64(ok & (over | (r < rlo) | (r > rhi)))
            vals[top - 1, j] = r
            oks[top - 1, j] = ok
        return wrong
    big = np.uint64(0)
    for j in range(width):
        big |= _magnitude(vals[top - 1, j]) | _magnitude(vals[top, j])
    for j in range(width):
        x = vals[top - 1, j]
        y = vals[top, j]
        over = False
        if big >= _HALF:
            mx = _magnitude(x)
            my = _magnitude(y)
            if (mx | my) >= _HALF and my != 0:
                limit = np.uint64(0x7FFFFFFFFFFFFFFF) if (x < 0) == (y < 0) else _SIGN
                over = mx > limit // my
        r = np.int64(np.uint64(x) * np.uint64(y))
        ok = oks[top - 1, j] & oks[top, j]
        wrong += np.int64(ok & (over | (r < rlo) | (r > rhi)))
        vals[top - 1, j] = r
        oks[top - 1, j] = ok
    return wrong


_LANES = 4  # accumulators per group: rows in a row go to different ones (no chain of adds)
_LANED_GROUPS = 1 << 12  # more groups: one accumulator each (rows rarely share a group)


@njit(parallel=True, nogil=True, cache=True)
def _run(ids, codes, args, los, his, starts, keep, columns, valids, constants,  # type: ignore[no-untyped-def]
         depth, ngroups, lanes, chunks, hi, lo, counts):
    # per chunk of rows (prange) and block of rows: each program leaves its values and
    # validity on a stack of blocks; each op checks int64 overflow and its type's range on
    # the rows where both operands are valid; each result adds its 32-bit halves to its
    # group (exact below 2**31 rows, as checked._halves_many), in one of ``lanes``
    # accumulators by row, so that consecutive rows of one group do not wait on each other
    n = ids.shape[0]
    nprog = starts.shape[0] - 1
    bad = 0
    for c in prange(chunks):
        start, stop = c * n // chunks, (c + 1) * n // chunks
        h = np.zeros((nprog, ngroups * lanes), np.int64)
        low = np.zeros((nprog, ngroups * lanes), np.int64)
        m = np.zeros((nprog, ngroups * lanes), np.int64)
        vals = np.empty((depth, _BLOCK), np.int64)
        oks = np.empty((depth, _BLOCK), np.bool_)
        slot = np.empty(_BLOCK, np.int64)
        kept = np.empty((nprog, _BLOCK), np.int64)
        kept_ok = np.empty((nprog, _BLOCK), np.bool_)
        wrong = 0
        for b0 in range(start, stop, _BLOCK):
            width = min(_BLOCK, stop - b0)
            for j in range(width):
                slot[j] = ids[b0 + j] * lanes + (j & (lanes - 1))
            for p in range(nprog):
                top = 0
                for k in range(starts[p], starts[p + 1]):
                    code = codes[k]
                    if code == _COLUMN:
                        col = columns[args[k]]
                        valid = valids[args[k]]
                        if valid.shape[0] == 0:  # no NULLs
                            for j in range(width):
                                vals[top, j] = col[b0 + j]
                                oks[top, j] = True
                        else:
                            for j in range(width):
                                vals[top, j] = col[b0 + j]
                                oks[top, j] = valid[b0 + j]
                        top += 1
                    elif code == _EARLIER:  # an earlier program's values
                        q = args[k]
                        for j in range(width):
                            vals[top, j] = kept[q, j]
                            oks[top, j] = kept_ok[q, j]
                        top += 1
                    elif code == _CONSTANT:
                        v = constants[args[k]]
                        for j in range(width):
                            vals[top, j] = v
                            oks[top, j] = True
                        top += 1
                    else:
                        top -= 1
                        wrong += _binary(code, oks, vals, top, width, los[k], his[k])
                if keep[p]:
                    kept[p, :width] = vals[0, :width]
                    kept_ok[p, :width] = oks[0, :width]
                hp, lp, mp = h[p], low[p], m[p]
                for j in range(width):
                    s = slot[j]
                    v = vals[0, j] if oks[0, j] else 0
                    hp[s] += v >> 32
                    lp[s] += v & 0xFFFFFFFF
                    mp[s] += np.int64(oks[0, j])
        for p in range(nprog):
            for g in range(ngroups):
                for q in range(lanes):
                    hi[p, c, g] += h[p, g * lanes + q]
                    lo[p, c, g] += low[p, g * lanes + q]
                    counts[p, c, g] += m[p, g * lanes + q]
        bad += wrong
    return bad


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

    def sums(self, batch: Batch, ids: np.ndarray, ngroups: int
             ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
        """Per argument ``(sums, counts, overflowed)`` per group over the rows where its
        value is not NULL, as :func:`.checked.group_sums_many`; None where an operation
        of a row that counts overflows its type (the caller evaluates the usual way, which
        raises the error)."""
        cols = [evaluate(leaf, batch) for leaf in self.leaves]
        every = np.ones(0, np.bool_)  # no NULLs (a one-row mask has one element)
        # typed lists of read-only views: one kernel type for any number of leaves
        values = read_only_list([np.ascontiguousarray(c.values, dtype=np.int64)
                                 for c in cols] or [np.zeros(1, np.int64)])
        valids = read_only_list([every if c.valid is None else
                                 np.ascontiguousarray(c.valid, dtype=np.bool_)
                                 for c in cols] or [every])
        k = len(self.starts) - 1
        chunks = _chunks(len(ids), ngroups, k)
        hi = np.zeros((k, chunks, ngroups), np.int64)
        lo = np.zeros((k, chunks, ngroups), np.int64)
        counts = np.zeros((k, chunks, ngroups), np.int64)
        lanes = _LANES if ngroups <= _LANED_GROUPS else 1
        bad = _run(np.ascontiguousarray(ids, dtype=np.int64), _i64(self.codes),
                   _i64(self.args), _i64(self.los), _i64(self.his), _i64(self.starts),
                   np.isin(np.arange(k), self.reused), values, valids,
                   _i64(self.constants + [0]), self.depth, ngroups, lanes, chunks, hi, lo,
                   counts)
        if bad:
            return None
        out = []
        for j in range(k):
            high, low = hi[j].sum(axis=0), lo[j].sum(axis=0)
            top = high + (low >> 32)
            over = (top < -(2**31)) | (top >= 2**31)
            if bool(over.any()):
                return None
            out.append(((top << 32) | (low & np.int64(0xFFFFFFFF)), counts[j].sum(axis=0),
                        over))
        return [out[j] for j in self.wanted]

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


def compile_sums(exprs: list[E.Expr]) -> SumPrograms | None:
    """The programs of the SUM arguments ``exprs`` (integer or DECIMAL), or None where
    fusing gains nothing: no arithmetic to fuse and a single argument. Any part that is not
    integer or DECIMAL ``+ - *`` (a column, a CAST, a CASE) is a leaf, evaluated as usual."""
    if len(exprs) < 2 and not any(_is_arith(e) for e in exprs):
        return None
    programs = SumPrograms(evaluated={n for e in exprs for leaf in _leaves(e)
                                      for n in E.walk(leaf) if n is not leaf})
    for e in exprs:
        programs.add(e)
    return programs


def _leaves(e: E.Expr) -> list[E.Expr]:
    """The parts of ``e`` that a program reads as columns (see :func:`_is_arith`)."""
    if _is_arith(e):
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


def _i64(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)
