"""Float arithmetic of several operations in one pass on all threads.

NumPy evaluates ``l_extendedprice * (1 - l_discount) * (1 + l_tax)`` (TPC-H Q1) one operation
at a time on one thread, each writing a temporary the size of the column: four passes over
6M rows. Here such a tree of ``+``, ``-``, ``*`` and unary minus over float64 columns and
numeric constants becomes a postfix program that a kernel runs block by block (each block's
operands stay in the cache), the blocks spread over the threads. The values are the same as
NumPy's: every operation is the same IEEE double operation in the same order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange
from sqlglot import exp

from .scan_kernels import read_only_list

__all__ = ["fused_arithmetic"]

_COLUMN, _CONSTANT, _ADD, _SUB, _MUL, _NEG = range(6)
_OPS = {exp.Add: _ADD, exp.Sub: _SUB, exp.Mul: _MUL}
_BLOCK = 1024  # rows per block: a few operands of 8 kB each stay in the L1/L2 cache
_MIN_ROWS = 1 << 15  # fewer rows: NumPy's passes are as fast as starting the kernel


@njit(parallel=True, nogil=True, cache=True)
def run_program(codes, args, columns, constants, depth, out):  # type: ignore[no-untyped-def]
    """``out`` = the postfix program ``codes`` (operands ``args``: column or constant
    numbers) over ``columns``, block by block."""
    n = out.shape[0]
    blocks = (n + _BLOCK - 1) // _BLOCK
    for b in prange(blocks):
        lo = b * _BLOCK
        m = min(n, lo + _BLOCK) - lo
        stack = np.empty((depth, _BLOCK))
        top = 0
        for k in range(codes.shape[0]):
            code = codes[k]
            if code == _COLUMN:
                col = columns[args[k]]
                for j in range(m):
                    stack[top, j] = col[lo + j]
                top += 1
            elif code == _CONSTANT:
                c = constants[args[k]]
                for j in range(m):
                    stack[top, j] = c
                top += 1
            elif code == _NEG:
                for j in range(m):
                    stack[top - 1, j] = -stack[top - 1, j]
            else:
                top -= 1
                if code == _ADD:
                    for j in range(m):
                        stack[top - 1, j] = stack[top - 1, j] + stack[top, j]
                elif code == _SUB:
                    for j in range(m):
                        stack[top - 1, j] = stack[top - 1, j] - stack[top, j]
                else:
                    for j in range(m):
                        stack[top - 1, j] = stack[top - 1, j] * stack[top, j]
        for j in range(m):
            out[lo + j] = stack[0, j]


def fused_arithmetic(node: exp.Expression, frame: Any) -> Any:
    """``node`` evaluated by :func:`run_program` as a :class:`~.expressions.Value`, or None
    where it does not apply (fewer than two operations, an operand that is not a float64
    column or a numeric constant, a short frame, a device frame)."""
    from .expressions import Value, _and_valid, evaluate

    if frame.nrows < _MIN_ROWS or _operations(node) < 2:
        return None
    codes: list[int] = []
    args: list[int] = []
    columns: list[np.ndarray] = []
    constants: list[float] = []
    leaves: list[Any] = []
    depth = 0

    def emit(code: int, arg: int, height: int) -> None:
        nonlocal depth
        codes.append(code)
        args.append(arg)
        depth = max(depth, height)

    def walk(e: exp.Expression, height: int) -> bool:
        while isinstance(e, exp.Paren):
            e = e.this
        memo = frame.memo
        known = memo is not None and isinstance(e, tuple(_OPS)) and e.sql() in memo
        # constant parts are leaves: the evaluator folds them exactly (0.06 + 0.01 is 0.07)
        known = known or not any(True for _ in e.find_all(exp.Column))
        if type(e) in _OPS and not known:
            if not (walk(e.this, height) and walk(e.expression, height + 1)):
                return False
            emit(_OPS[type(e)], 0, height + 1)
            return True
        if isinstance(e, exp.Neg) and not known:
            if not walk(e.this, height):
                return False
            emit(_NEG, 0, height + 1)
            return True
        v = evaluate(e, frame)  # a leaf: a column, a constant, or a kept common subexpression
        if v.kind not in ("int", "float"):
            return False
        if np.ndim(v.values) == 0:
            if v.valid is not None:
                return False
            emit(_CONSTANT, len(constants), height + 1)
            constants.append(float(v.values))
            return True
        if not isinstance(v.values, np.ndarray) or v.values.dtype != np.float64:
            return False
        emit(_COLUMN, len(columns), height + 1)
        columns.append(np.ascontiguousarray(v.values))
        leaves.append(v)
        return True

    if type(node) not in _OPS or not walk(node, 0) or not columns:
        return None
    out = np.empty(frame.nrows, dtype=np.float64)
    run_program(np.asarray(codes, np.int64), np.asarray(args, np.int64), read_only_list(columns),
                np.asarray(constants + [0.0], np.float64), depth, out)
    return Value(out, "float", valid=_and_valid(*leaves))


def _operations(node: exp.Expression) -> int:
    """The ``+ - *`` and unary minus nodes of ``node`` (through parentheses) that have a
    column below them: the operations a program would run."""
    while isinstance(node, exp.Paren):
        node = node.this
    if type(node) not in _OPS and not isinstance(node, exp.Neg):
        return 0
    if not any(True for _ in node.find_all(exp.Column)):
        return 0
    children = [node.this] if isinstance(node, exp.Neg) else [node.this, node.expression]
    return 1 + sum(_operations(c) for c in children)
