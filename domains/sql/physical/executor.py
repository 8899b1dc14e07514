"""Running a distributed logical plan: one operator per node type, each on this rank's rows.

The plan holds its Exchange nodes (:mod:`..optimizer.distribute`); the Exchange operator
(:mod:`.exchange`) is the only one that communicates, so every other operator is local. The
result is gathered on rank 0. With ``analyze``, every node's rows (over all ranks) and its
seconds on this rank are recorded for EXPLAIN ANALYZE.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from hpc.domains.sql.aggregate import mask_groups
from hpc.domains.sql.catalog import Catalog, ScanCache
from hpc.domains.sql.errors import SQLError
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.partial import state_name, states
from hpc.domains.sql.ops import columns_on_host
from hpc.domains.sql.optimizer.distribute import BROADCAST_ROWS, equi_keys
from hpc.domains.sql.table import (
    Column,
    Decimals,
    Deferred,
    Rows,
    Table,
    deferred_gather,
    settle,
    settle_columns,
)

from hpc.backend import Backend, get_backend, to_host
from hpc.jit import SERIAL_BELOW, serial_below

from .aggregates import Sums, aggregate_column, fusable
from .checked import group_sums_many
from .columns import carried_keys, group_keys, sort_order, stack, top_candidates
from .device import kernels, running_on, xp
from .evaluate import Batch, evaluate
from .exchange import Ranks, agree, exchange, global_count_many, mark_global, skewed
from .from_statistics import answer_from_statistics
from .join import Side, join, null_safe_keys
from .lazy_decimals import lazy_decimal
from .partial_aggregates import merged, partial_states
from .skew_join import skew_exchanges, staying_sides
from .sum_programs import compile_sums
from .window import window_columns

__all__ = ["Executor"]


def _batch(side: Side) -> Batch:
    return Batch(side.columns, side.nrows)


def _rows_where(c: Column) -> np.ndarray:
    """Rows where a boolean column is TRUE (not FALSE, not NULL)."""
    return np.flatnonzero(_true(c))


def _true(c: Column) -> np.ndarray:
    """Where a boolean column is TRUE (not FALSE, not NULL), as a mask."""
    keep = c.values if c.values.dtype == np.bool_ else c.values.astype(np.bool_)
    return keep & c.valid if c.valid is not None else keep


def _rows_passing(condition: E.Expr, side: Side, as_mask: bool = False) -> np.ndarray:
    """The rows of ``side`` where ``condition`` is TRUE. The conjuncts a predicate program
    expresses (:mod:`.predicate_programs`: comparisons, ranges, IN lists, NULL tests and
    string tests under AND, OR and NOT) run first, in one pass; the others then conjunct
    by conjunct: once the conjuncts so far keep at most half of the rows, each later one
    reads only the rows kept (its columns gathered for them), as a selection vector would:
    a costly predicate after a selective one (a range of decimals after a string equality)
    is evaluated, and its decimals converted from Parquet's chunks, for the few rows left."""
    from .predicate_programs import compile_predicate  # (here: loads its kernels when used)

    terms = E.conjuncts(condition)
    mask = rows = None
    if PREDICATE_PROGRAMS and side.nrows >= PROGRAM_FROM and kernels().host_kernels:
        program, rest = compile_predicate(terms, side.columns, side.nrows)
        found = None if program is None else program.rows(side.columns, side.nrows,
                                                            as_mask and not rest)
        if found is not None:
            if not rest:
                return found
            terms = rest
            if found.dtype == np.bool_:
                mask = found
            else:
                rows = found
    batch = _batch(side)
    if mask is None and rows is None:
        mask = _true(evaluate(terms[0], batch))
        terms = terms[1:]
    kept: dict[str, Column] = {}  # columns gathered for ``rows`` so far
    for t in terms:
        if rows is None and SELECTIVE_AFTER * int(np.count_nonzero(mask)) <= side.nrows:
            rows = np.flatnonzero(mask)
        if rows is None:  # not in place: the first mask may be a boolean column's values
            mask = mask & _true(evaluate(t, batch))
            continue
        for n in E.refs(t) - kept.keys():
            kept[n] = side.columns[n].gather(rows)
        passed = np.flatnonzero(_true(evaluate(t, Batch(kept, len(rows)))))
        if len(passed) < len(rows):
            rows = rows[passed]
            kept = {n: c.gather(passed) for n, c in kept.items()}
    if rows is None:  # never selective: the mask says it, as it is with ``as_mask``
        return mask if as_mask else np.flatnonzero(mask)
    return rows


PREDICATE_PROGRAMS = True  # the conjuncts a program expresses run in one pass (see above)
PROGRAM_FROM = 1 << 18  # ... on inputs of at least this many rows (below: making the
# program, its tables and its kernel's start, 0.2-0.5 ms, cost more than NumPy's passes)
SELECTIVE_AFTER = 2  # later conjuncts read only the kept rows once at most 1/this remain


def _fused_sums(node: P.Aggregate, batch: Batch, ids: np.ndarray, ngroups: int
                ) -> dict[str, tuple[Column, Sums]]:
    """The exact sums per group of every :func:`~.aggregates.fusable` SUM and AVG of a
    complete aggregate, in one pass over the group ids (:mod:`.sum_programs`): name ->
    (its argument, its sums); a ``COUNT(*)`` gets the rows of each group, counted in the
    same pass, as its counts."""
    if node.phase != "complete" or not kernels().host_kernels:  # (else each SUM alone)
        return {}
    fused = [(name, agg) for name, agg in node.aggregates if fusable(agg)]
    if not fused:
        return {}
    programs = compile_sums([agg.args[0] for _, agg in fused])
    if FUSE_ARITHMETIC and programs.worth(len(ids)):
        done = programs.sums_and_sizes(batch, ids, ngroups)
        if done is not None:  # else an overflow: evaluated below, which raises or widens
            sums, sizes = done
            out = {name: (_NOT_READ, s) for (name, _), s in zip(fused, sums, strict=True)}
            out.update({name: (_NOT_READ, (sizes, sizes, sizes)) for name, agg in
                        node.aggregates if agg.name == "count_star" and agg.filter is None})
            return out
    if len(fused) < 2:
        return {}
    args = [evaluate(agg.args[0], batch) for _, agg in fused]
    sums = group_sums_many(ids, [a.values for a in args], [a.valid for a in args], ngroups)
    return {name: (a, s) for (name, _), a, s in zip(fused, args, sums, strict=True)}


FUSE_ARITHMETIC = True  # SUM arguments' arithmetic fused with the sums (.sum_programs)
# the argument of a SUM whose sums came from a program: its values are never read (its sums
# are exact and in range), only its NULLs, which the sums' counts already hold
_NOT_READ = Column(np.zeros(0, np.int64), "int")


DEFER_FILTERS = True  # a filter's columns gathered when read (see _kept)
DEFER_FROM = 8  # ... when it keeps at least 1/DEFER_FROM of the rows


def _kept(side: Side, rows: np.ndarray) -> Side:
    """A filter's rows ``rows`` (ascending) of ``side``: nothing moves when every row
    passes. When many rows pass, plain host columns are gathered only when read, and a
    later gather (a join's rows) composes with these rows, so a column read only above a
    join is gathered once, for the rows left, and a column nothing reads is never gathered.
    A selective filter gathers at once: its few rows then stay in cache for the random
    reads of a join above (composed, those reads would go to the whole column)."""
    if len(rows) == side.nrows:
        return Side(dict(side.columns), side.nrows)
    if not DEFER_FILTERS or len(rows) * DEFER_FROM < side.nrows or \
            not kernels().host_kernels:
        return _take(side, rows)  # few rows: gathered now, small enough to stay in cache
    shared = Rows(rows)
    return Side({n: deferred_gather(c, shared) if type(c) in (Column, Deferred)
                 else c.take(rows) for n, c in side.columns.items()}, len(rows))


MASK_DENSE_FILTERS = True  # a dense filter below an aggregate passes a mask (see Masked)
FROM_STATISTICS = True  # MIN/MAX/COUNT of a whole Parquet table from its footers
DENSE_NUM, DENSE_DEN = 7, 8  # ... when it keeps at least 7/8 of the rows


@dataclass
class Masked(Side):
    """The rows of a filter that keeps most of them (``kept``, ``count`` of them), for the
    aggregate above it: the columns as they were, unfiltered. Gathering nearly every row of
    every column costs more than grouping the dropped rows into one extra group, which the
    aggregate then leaves out."""

    kept: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))
    count: int = 0


def _kept_groups(ids: np.ndarray, ngroups: int, first: np.ndarray, kept: np.ndarray,
                 keep_empty: bool) -> tuple[np.ndarray, int, np.ndarray]:
    """Group ids over every row restricted to the ``kept`` rows: the dropped rows in group
    ``ngroups'`` (one past the groups), the groups that only dropped rows held removed
    (unless ``keep_empty``: one group without keys is there even without rows). The ids
    are the grouping's own: rewritten in place (a fresh array of a row each would fault
    its pages in)."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    out = ids if ids.flags.writeable else np.empty(len(ids), np.int64)
    present = np.zeros(ngroups, np.bool_)
    mask_groups(ids, kept, ngroups, out, present)
    if keep_empty or bool(present.all()):
        return out, ngroups, first
    remap = np.cumsum(present) - 1
    n = int(present.sum())
    remap = np.append(remap, n)  # the dropped rows' group: again one past the groups
    return remap[out], n, first[present]


def _take(side: Side, rows: np.ndarray) -> Side:
    return Side({n: c.take(rows) for n, c in side.columns.items()}, len(rows))


class Executor:
    """Runs plans over ``catalog`` on the ranks of ``comm``.

    Parameters
    ----------
    catalog : Catalog
    comm : MPI communicator
    analyze : bool
        Record rows and seconds per node (:attr:`profile`).
    """

    def __init__(self, catalog: Catalog, comm: Any, analyze: bool = False,
                 backend: Backend | None = None, broadcast_rows: int = BROADCAST_ROWS) -> None:
        self.backend = backend or get_backend("cpu")
        self.broadcast_rows = broadcast_rows  # the most rows a skewed join copies to all
        self._host = get_backend("cpu")  # where operators the device lacks run
        self.catalog = catalog
        self.scans = ScanCache(catalog)
        self.comm = comm
        self.analyze = analyze
        self.profile: dict[int, tuple[int, float]] = {}
        self._ranged: dict[P.Node, bool] = {}  # "partition" exchanges that chose ranges
        self._ready: dict[int, Side] = {}  # inputs computed before their node's own work
        self._shared: dict[P.Node, Side | None] = {}  # subplans met more than once: rows
        # scanned column (held, so its id stays its own) -> its physical form
        self._converted: dict[tuple[int, Any], tuple[Column, Column]] = {}

    def run(self, plan: P.Node) -> Table:
        """Collective. The plan's result: all rows on rank 0, none elsewhere. An error on
        any rank (a value that does not convert, an overflow) is raised on every rank.
        A subplan that appears more than once (equal nodes: the rows grouping sets regroup)
        runs once."""
        if not isinstance(plan, P.Output):
            raise TypeError("run: the plan must end in an Output node")
        with running_on(self.backend):
            return self._run(plan)

    def _run(self, plan: P.Output) -> Table:
        seen = Counter(P.nodes(plan))
        self._shared = {node: None for node, count in seen.items() if count > 1}
        # a sort only a LIMIT reads: the rows it keeps (offset + limit), see _sort
        self._top = {n.input: n.offset + n.limit for n in seen if isinstance(n, P.Limit)
                     and isinstance(n.input, P.Sort) and n.limit is not None
                     and seen[n.input] == 1}
        self._grouped_filters = {id(n.input) for n in seen if isinstance(n, P.Aggregate)
                                 and isinstance(n.input, P.Filter) and n.phase != "final"
                                 and seen[n.input] == 1} if MASK_DENSE_FILTERS else set()
        try:
            side, failure = self.side(plan), None
        except SQLError as exc:
            side, failure = None, exc
        agree(failure, self.comm)
        assert side is not None
        names = _unique(plan.names)
        with serial_below(side.nrows):
            settled = settle_columns(side.columns)  # carried strings: on the rows left
        if self.backend.is_gpu:  # the result on the host
            settled = columns_on_host(settled)
        cols = [_presented(settled[f.name], f) for f in plan.input.schema]
        return Table(dict(zip(names, cols, strict=True)))

    def side(self, node: P.Node) -> Side:
        """Collective. This rank's rows of ``node``: its inputs first (each rank in the same
        order), then the node's own work, on one thread when its inputs are small (a
        parallel kernel's start, tens of microseconds idle and milliseconds on a busy
        machine, costs more than such inputs' work)."""
        ready = self._ready.pop(id(node), None)
        if ready is not None:
            return ready
        t0 = time.perf_counter()
        shared = node in self._shared
        out = self._shared[node] if shared else None
        if out is None and FROM_STATISTICS and isinstance(node, P.Aggregate):
            out = answer_from_statistics(node, self.catalog, self.comm.Get_rank())
            if out is not None:
                out = _side_on(self.backend, out)
                if shared:
                    self._shared[node] = out
        if out is None:
            if isinstance(node, P.Join):
                self._join_exchanges(node)
            rows = 0  # an Exchange computes its input itself: an error there meets the ranks
            for child in () if isinstance(node, P.Exchange) else node.inputs:
                done = self.side(child)
                self._ready[id(child)] = done
                rows = max(rows, done.nrows)
            small = bool(node.inputs) and not isinstance(node, P.Exchange)
            try:
                with serial_below(rows if small else SERIAL_BELOW):
                    out = self._own_work(node)
            finally:
                for child in node.inputs:
                    self._ready.pop(id(child), None)
            if shared:
                self._shared[node] = out
        if self.analyze:
            rows = out.count if isinstance(out, Masked) else out.nrows
            self.profile[id(node)] = (rows, time.perf_counter() - t0)
        return out

    def _own_work(self, node: P.Node) -> Side:
        """The node's operator on its inputs, on the host where the run's device has no
        operator for it yet (:func:`on_host`): its inputs moved to the host, its rows moved
        back."""
        if not self.backend.is_gpu or not on_host(node) or isinstance(node, P.Exchange):
            return _OPERATORS[type(node)](self, node)  # (an exchange computes its input itself)
        for child in () if isinstance(node, P.Exchange) else node.inputs:
            self._ready[id(child)] = _side_on(self._host, self._ready[id(child)])
        with running_on(self._host):
            out = _OPERATORS[type(node)](self, node)
        return _side_on(self.backend, out)

    def global_profile(self) -> dict[int, tuple[int, float]]:
        """Collective. :attr:`profile` with the rows summed over the ranks (the seconds are
        this rank's)."""
        keys = list(self.profile)  # every rank visited the same nodes in the same order
        rows = [self.profile[k][0] for k in keys]
        total = global_count_many(rows, self.comm)
        return {k: (int(r), self.profile[k][1]) for k, r in zip(keys, total, strict=True)}

    def _root(self) -> bool:
        return self.comm.Get_rank() == 0

    # -- leaves -----------------------------------------------------------------------------
    def _scan(self, node: P.Scan) -> Side:
        sources = [source for _, source, _ in node.columns]
        renamed = {name: source for name, source, _ in node.columns}
        device = self.backend.is_gpu  # strings settled and decimals converted on the host
        where = None if node.prune is None else E.transform(  # over the table's names
            node.prune, lambda e: E.Ref(renamed[e.name], e.type)
            if isinstance(e, E.Ref) and e.name in renamed else None)
        table = self.scans.load(node.table, sources, self.comm,
                                unsorted=() if device else node.raw, where=where)
        cols = {}
        for (name, source, t) in node.columns:
            raw = table[source]
            key = (id(raw), t)  # a table scanned twice converts its decimals once
            if key not in self._converted:
                physical = _physical(raw, t, lazy=not device)
                if device:
                    physical = _on_device(self.backend, physical)
                self._converted[key] = (raw, physical)
            cols[name] = self._converted[key][1]
        return Side(cols, table.num_rows)

    def _values(self, node: P.Values) -> Side:
        """Constant rows, on rank 0 (the binder makes one row of no columns: FROM-less)."""
        if node.fields:
            raise TypeError("Values with columns are not produced by the binder")
        return Side({}, len(node.rows) if self._root() else 0)

    # -- row-wise ---------------------------------------------------------------------------
    def _filter(self, node: P.Filter) -> Side:
        side = self.side(node.input)
        grouped = id(node) in self._grouped_filters and not node.settle and \
            kernels().host_kernels  # (the aggregate's masked groups: a CPU kernel)
        rows = _rows_passing(node.condition, side, as_mask=grouped)
        if rows.dtype == np.bool_:  # a mask: the filter kept at least half of the rows
            count = int(np.count_nonzero(rows))
            if count < side.nrows and DENSE_NUM * side.nrows <= DENSE_DEN * count:
                return Masked(side.columns, side.nrows, rows, count)
            rows = np.flatnonzero(rows)
        kept = _kept(side, rows)
        for name in node.settle:  # raw strings read above: sorted, on the rows kept
            kept.columns[name] = settle(kept.columns[name])
        return kept

    def _project(self, node: P.Project) -> Side:
        side = self.side(node.input)
        batch = _batch(side)
        return Side({name: evaluate(e, batch) for name, e in node.exprs}, side.nrows)

    # -- joins ------------------------------------------------------------------------------
    def _join(self, node: P.Join) -> Side:
        left, right = self.side(node.left), self.side(node.right)
        safe: list[bool] = []
        lk, rk, rest = equi_keys(node, safe)
        nulls = (False, False)
        if node.null_aware:  # the quantified comparisons: keys only where NULLs allow
            terms = E.conjuncts(node.condition)
            compared = terms[len(terms) - node.null_aware:]
            plain = replace(node, condition=E.conjoin(terms[: len(terms) - node.null_aware]))
            safe = []
            lk, rk, rest = equi_keys(plain, safe) if plain.condition is not None else \
                ([], [], [])
            single = equi_keys(replace(node, condition=compared[0]))
            if not lk and not rest and len(compared) == 1 and single[0]:
                lk, rk = single[0], single[1]  # x [NOT] IN (q): hashed, NULLs judged below
                safe = [False]
            else:
                rest = rest + compared  # judged pair by pair, NULLs and all
        lkeys = [evaluate(e, _batch(left)) for e in lk]
        rkeys = [evaluate(e, _batch(right)) for e in rk]
        if any(safe):
            lkeys, rkeys = null_safe_keys(lkeys, rkeys, safe)
        if node.null_aware and lk and not rest:  # the right side is all here (broadcast)
            nulls = (right.nrows > 0, rkeys[0].valid is not None and
                     not bool(np.all(rkeys[0].valid)))
        return join(node.kind, left, right, lkeys, rkeys, E.conjoin(rest), node.mark,
                    node.null_aware, nulls)

    # -- grouping ---------------------------------------------------------------------------
    def _aggregate(self, node: P.Aggregate) -> Side:
        side = self.side(node.input)
        batch = _batch(side)
        keys = [evaluate(e, batch) for _, e in node.keys]
        if (not node.keys and node.phase != "partial" and not self._root()
                and self.comm.Get_size() > 1):
            return Side({f.name: _empty(f) for f in node.schema}, 0)
        keys, grouped = carried_keys(keys)
        ids, ngroups, first = grouped or group_keys([k for k in keys if not k.raw],
                                                    side.nrows)
        # the rows a dense filter dropped (see _filter) go to one extra group, dropped
        base = ngroups
        if isinstance(side, Masked):
            ids, ngroups, first = _kept_groups(ids, ngroups, first, side.kept,
                                               keep_empty=not node.keys)
            base = ngroups + 1
        if not node.keys:
            first = xp().zeros(0, np.int64)
        out = {name: k.take(first) for (name, _), k in zip(node.keys, keys, strict=True)}
        fused = _fused_sums(node, batch, ids, base)
        every = xp().arange(ngroups)
        for name, agg in node.aggregates:
            if node.phase == "final":
                parts = {s: side.columns[state_name(name, s)] for s, _ in states(agg)}
                out[name] = merged(agg, ids, base, parts)
                if base != ngroups:
                    out[name] = out[name].take(every)
                continue
            if name in fused:
                arg, sums = fused[name]
                column = aggregate_column(agg, ids, base, [arg],
                                          [a.type for a in agg.args] or None, None, sums)
                out[name] = column.take(every) if base != ngroups else column
                continue
            args = [evaluate(a, batch) for a in agg.args]
            order = [evaluate(k.expr, batch) for k in agg.order]
            own, groups = ids, base
            if agg.filter is not None:  # the rows it drops go to one extra group, dropped
                own = np.full(side.nrows, ngroups, np.int64)
                kept = _rows_where(evaluate(agg.filter, batch))
                own[kept] = ids[kept]
                groups = ngroups + 1
            if node.phase == "partial":
                for suffix, column in partial_states(agg, own, groups, args,
                                                     [a.type for a in agg.args]).items():
                    out[state_name(name, suffix)] = column.take(every) \
                        if groups != ngroups else column
                continue
            column = aggregate_column(agg, own, groups, args, [a.type for a in agg.args], order)
            out[name] = column.take(every) if groups != ngroups else column
        return Side(out, ngroups)

    def _distinct(self, node: P.Distinct) -> Side:
        side = self.side(node.input)
        _, ngroups, first = group_keys(list(side.columns.values()), side.nrows)
        if not side.columns:  # no columns: one row if there were any
            return Side({}, min(side.nrows, 1))
        return _take(side, first)

    def _setop(self, node: P.SetOp) -> Side:
        left, right = self.side(node.left), self.side(node.right)
        cols = [stack(a, b) for a, b in zip(left.columns.values(), right.columns.values(),
                                             strict=True)]
        n = left.nrows + right.nrows
        names = [f.name for f in node.fields]
        if node.kind == "union" and node.all:
            return Side(dict(zip(names, cols, strict=True)), n)
        ids, ngroups, first = group_keys(cols, n)
        x = xp()
        if not cols:  # no columns: rows are all equal
            ids, ngroups, first = x.zeros(n, np.int64), int(n > 0), x.zeros(int(n > 0),
                                                                            np.int64)
        on_left = np.bincount(ids[: left.nrows], minlength=ngroups)[:ngroups]
        on_right = np.bincount(ids[left.nrows:], minlength=ngroups)[:ngroups]
        if node.kind == "union":
            copies = x.ones(ngroups, np.int64)
        elif node.kind == "intersect":
            copies = np.minimum(on_left, on_right) if node.all else (
                (on_left > 0) & (on_right > 0)).astype(np.int64)
        else:
            copies = np.maximum(on_left - on_right, 0) if node.all else (
                (on_left > 0) & (on_right == 0)).astype(np.int64)
        rows = np.repeat(first, copies)
        return Side({name: c.take(rows) for name, c in zip(names, cols, strict=True)},
                    len(rows))

    def _window(self, node: P.Window) -> Side:
        side = self.side(node.input)
        spread = isinstance(node.input, P.Exchange) and (
            node.input.how == "range" or self._ranged.get(node.input, False))
        ranks = Ranks(side.nrows, self.comm) if spread else None  # one ordered sequence
        added = window_columns(node, _batch(side), ranks)
        return Side({**side.columns, **added}, side.nrows)

    # -- ordering ---------------------------------------------------------------------------
    def _sort(self, node: P.Sort) -> Side:
        side = self.side(node.input)
        batch = _batch(side)
        keys = [(evaluate(k.expr, batch), k.ascending, k.nulls_first) for k in node.keys]
        top = self._top.get(node)
        if top is not None and keys:  # under a LIMIT: only the rows that can make its cut
            rows = top_candidates(keys[0][0], keys[0][1], top)
            if rows is not None:
                side = _take(side, rows)
                keys = [(c.take(rows), a, f) for c, a, f in keys]
        keys = [(settle(c), a, f) for c, a, f in keys]  # raw strings: sorted, on these rows
        return _take(side, sort_order(keys, side.nrows))

    def _limit(self, node: P.Limit) -> Side:
        side = self.side(node.input)
        stop = side.nrows if node.limit is None else min(side.nrows, node.offset + node.limit)
        return _take(side, xp().arange(min(node.offset, side.nrows), stop))

    # -- movement ---------------------------------------------------------------------------
    def _exchange(self, node: P.Exchange) -> Side:
        # the ranks meet here: an error below on any rank is raised on all of them first
        try:
            side, failure = self.side(node.input), None  # (its input on the run's device)
        except SQLError as exc:
            side, failure = None, exc
        return self._moved(node, side, failure)  # on the run's device

    def _moved(self, node: P.Exchange, side: Side | None, failure: SQLError | None) -> Side:
        """Collective. The exchange of ``side``'s rows (``failure``: an error computing them
        on this rank, raised on every rank)."""
        try:
            if side is not None:
                keys = [evaluate(e, _batch(side)) for e in node.keys or
                        [k.expr for k in node.order]]
                order = [evaluate(k.expr, _batch(side)) for k in node.order] \
                    if node.how == "partition" else []
        except SQLError as exc:
            side, failure = None, exc
        agree(failure, self.comm)
        assert side is not None
        how = node.how
        if how == "partition":  # hashed, or ranges where one partition is too big for a rank
            ranged = skewed(keys, side.nrows, self.comm)
            self._ranged[node] = ranged
            how, keys = ("range", order) if ranged else ("hash", keys)
        directions = [(k.ascending, k.nulls_first) for k in node.order]
        cols, n = exchange(side.columns, side.nrows, how, keys, self.comm, directions)
        return Side(cols, n)

    def _join_exchanges(self, node: P.Join) -> None:
        """Collective. Both hash exchanges of a join on several ranks, moved together where
        its keys are skewed (:mod:`.skew_join`: heavy values' rows stay, the other side's
        rows of them go to every rank), else as each exchange alone; their rows left ready
        for the join. Nothing where the join's sides are not two hash exchanges of their
        own or its kind must see all of the other side's rows of a key on one rank."""
        sides = (node.left, node.right)
        if (self.comm.Get_size() == 1 or node.null_aware or node.mark
                or not staying_sides(node.kind)
                or not all(isinstance(e, P.Exchange) and e.how == "hash" and e.keys
                           and e not in self._shared for e in sides)):
            return
        t0 = time.perf_counter()
        inputs: list[tuple[Side, list[Column]]] = []
        for e in sides:  # each input computed and its keys evaluated, an error met as in
            try:  # _moved: on every rank before the next collective
                side, failure = self.side(e.input), None
                keys = [evaluate(k, _batch(side)) for k in e.keys]
            except SQLError as exc:
                side, failure, keys = None, exc, []
            agree(failure, self.comm)
            inputs.append((side, keys))
        stay = staying_sides(node.kind)  # (one side, or both for an inner join)
        safe: list[bool] = []  # keys compared by IS NOT DISTINCT FROM: NULLs meet there
        equi_keys(node, safe)
        nulls_meet = any(safe) or len(safe) != len(node.left.keys)
        _, moved = skew_exchanges([(s.columns, s.nrows, k) for s, k in inputs],
                                  stay[0] if len(stay) == 1 else None, self.comm,
                                  self.broadcast_rows, nulls_meet)
        seconds = (time.perf_counter() - t0) / 2
        for e, (columns, n) in zip(sides, moved, strict=True):
            self._ready[id(e)] = Side(columns, n)
            if self.analyze:
                self.profile[id(e)] = (n, seconds)

    def _output_side(self, node: P.Output) -> Side:
        return self.side(node.input)


# each node type's operator, as a function of (executor, node): a table of the class's
# functions, not of an executor's bound methods, so that an executor (and every column a
# query read, which it holds) is freed when its query returns, not by a later cycle
# collection (which kept a large scan's columns alive for several later queries, each of
# them faulting in fresh pages)
_OPERATORS: dict[type, Any] = {
    P.Scan: Executor._scan, P.Values: Executor._values, P.Filter: Executor._filter,
    P.Project: Executor._project, P.Join: Executor._join, P.Aggregate: Executor._aggregate,
    P.Distinct: Executor._distinct, P.Sort: Executor._sort, P.Limit: Executor._limit,
    P.Exchange: Executor._exchange, P.Output: Executor._output_side, P.SetOp: Executor._setop,
    P.Window: Executor._window,
}


def _physical(c: Column, t: Any, lazy: bool = True) -> Column:
    """A scanned column in the physical form of its logical type (``lazy``: a decimal
    converted when read, where that applies)."""
    if t.kind == "decimal" and c.kind != "decimal":
        deferred = lazy_decimal(c, t.scale) if lazy else None  # converted when read: only
        if deferred is not None:  # the rows kept, if few
            return deferred
        exact = c.unscaled(t.scale) if isinstance(c, Decimals) else None
        if exact is None:  # through float64: exact up to 15 digits
            exact = np.rint(np.asarray(c.values, dtype=np.float64) * 10.0 ** t.scale).astype(
                np.int64)
        return Column(exact, "decimal", None, c.valid)
    if c.kind == "string" and not c.raw:
        mark_global(c.dictionary)
    return c


# operators that run on the device (the others run on the host, see Executor._own_work)
_ON_DEVICE: tuple[type, ...] = (P.Scan, P.Output, P.Filter, P.Project, P.Sort, P.Limit, P.Join,
                                P.Distinct, P.SetOp, P.Window)
# aggregates with device kernels (exact sums by 32-bit halves, min and max, counts)
_DEVICE_AGGREGATES = frozenset({"count_star", "count", "sum", "avg", "min", "max"})
# aggregates the window operator computes on the device over any frame (by prefix sums and
# segment trees, see .window_device; over a whole partition as grouped aggregates)
_DEVICE_WINDOW_AGGREGATES = _DEVICE_AGGREGATES | {
    "bool_and", "bool_or", "stddev_samp", "stddev_pop", "var_samp", "var_pop"}


def on_host(node: P.Node) -> bool:
    """Whether the GPU backend runs ``node``'s operator on the host (its inputs moved there
    and its rows moved back): the device has no operator for it yet."""
    if isinstance(node, P.Aggregate):
        return not all(
            agg.name in _DEVICE_AGGREGATES and not agg.distinct and agg.filter is None
            and not agg.order for _, agg in node.aggregates)
    if isinstance(node, P.Window):  # the host's: a sequence over ranks (.window_spread),
        # GROUPS frames, EXCLUDE, and aggregates over whole partitions only (DISTINCT, ...)
        spread = isinstance(node.input, P.Exchange) and node.input.how in ("range", "partition")
        return spread or not all(
            w.frame.kind != "groups" and w.frame.exclude == "no_others" and (
                w.name in E.WINDOW_FUNCTIONS or
                (w.name in _DEVICE_WINDOW_AGGREGATES and not w.distinct))
            for _, w in node.functions)
    return not isinstance(node, _ON_DEVICE)


def _side_on(where: Backend, side: Side) -> Side:
    """``side``'s rows with their columns on ``where``'s device (or host)."""
    if where.is_gpu:
        cols = {n: _on_device(where, c) for n, c in side.columns.items()}
    else:
        cols = columns_on_host(settle_columns(side.columns))
    if isinstance(side, Masked):
        kept = where.xp.asarray(side.kept) if where.is_gpu else to_host(side.kept)
        return Masked(cols, side.nrows, kept, side.count)
    return Side(cols, side.nrows)


def _on_device(backend: Backend, c: Column) -> Column:
    """A host column on ``backend``'s device (a string column's dictionary stays on the
    host: string functions run on it, and its codes map the results back to the rows)."""
    c = settle(c)
    move = backend.xp.asarray
    return Column(move(to_host(c.values)), c.kind, c.dictionary,
                  None if c.valid is None else move(to_host(c.valid)))


def _presented(c: Column, f: P.Field) -> Column:
    """A result column as users read it: DECIMAL as float64 (its exact digits are in the
    plan's type), everything else as it is."""
    if f.type.kind == "decimal":
        return Column(c.values.astype(np.float64) / 10.0 ** f.type.scale, "float", None,
                      c.valid)
    return c


def _empty(f: P.Field) -> Column:
    """A column of ``f``'s type with no rows, on the run's device (a string column's
    dictionary on the host)."""
    kind = f.type.kind
    if kind == "varchar":
        return Column(xp().zeros(0, np.int32), "string", np.zeros(0, dtype=object))
    dtype = {"boolean": bool, "double": np.float64, "date": np.int32}.get(kind, np.int64)
    name = {"boolean": "bool", "double": "float", "date": "date", "decimal": "decimal",
            "timestamp": "timestamp", "varchar": "string"}.get(kind, "int")
    return Column(xp().zeros(0, dtype), name)


def _unique(names: tuple[str, ...]) -> list[str]:
    """Output names made unique as DuckDB's result frames do (``x``, ``x_1``, ...)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if n in seen:
            seen[n] += 1
            candidate = f"{n}_{seen[n]}"
            while candidate in seen:
                seen[n] += 1
                candidate = f"{n}_{seen[n]}"
            out.append(candidate)
            seen[candidate] = 0
        else:
            seen[n] = 0
            out.append(n)
    return out
