"""Running a planned query on every rank: scans, distributed joins, aggregation, ordering.

Physical operators (each rank works on its rows; collectives move rows on raw buffers):

- **Scan**: the table's needed columns of this rank (Parquet row groups or HDF5 row blocks),
  then its pushed filters.
- **Join order**: greedy operator ordering: the two connected groups of tables whose join
  costs least are joined next, the cost being the estimated result ``|A| |B| / max(ndv(a),
  ndv(b))`` over the join keys (distinct counts estimated on a sample of each scan) plus
  twice the build side's rows; every join builds its hash table on the smaller side.
- **Join**: broadcast the smaller side (all-gather) when it has at most ``broadcast_rows``
  rows in all, else hash-partition both sides on the first key (all-to-all shuffle); then the
  local numba hash join. Several keys are combined into one key id per row.
- **Aggregate**: per-rank partial aggregates (sum, count, min, max; avg as sum and count),
  shuffled by the hash of the group key, then combined, so each group ends on one rank. With
  COUNT(DISTINCT) the rows are partitioned by group key first and aggregated once.
- **Order/limit**: each rank sorts and keeps its top LIMIT rows (top-k), the survivors are
  gathered on rank 0, which sorts again and cuts.

The result is a :class:`Table` on rank 0 and an empty table (same columns) elsewhere.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sqlglot import exp

from hpc.backend import Backend, array_module, get_backend
from hpc.collectives import bcast_object
from hpc.comm import resolve_comm
from hpc.jit import serial_below

from . import aggregate, carried, ops, pipeline, strings
from .catalog import Catalog, ScanCache
from .errors import SQLError, UnsupportedSQL, describe
from .exchange import allgather_columns, global_rows, partition_by_keys, ship
from .expressions import Frame, InSet, column_key, evaluate, predicate_mask, to_column
from .ops import OPS
from .planner import QueryPlan, Source, aliases_of, parse, plan_select
from .ranges import bounds_mask, split_bounds
from .restrict import restricted
from .subqueries import resolve_subqueries
from .table import Column, Rows, Table, deferred_gather, settle_columns

__all__ = ["query", "explain", "QueryOptions"]

_AGG_NAMES = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max", exp.Count: "count"}


@dataclass
class QueryOptions:
    """Tuning of the physical plan.

    Attributes
    ----------
    broadcast_rows : int
        The largest total row count of a join side that is broadcast to every rank instead
        of shuffling both sides.
    backend : {"auto", "cpu", "gpu"}, Backend or None
        Where the columns live and the kernels run (default ``HPC_BACKEND``, see
        :func:`hpc.backend.get_backend`). On the GPU, scanned columns move to the device and
        joins, group-bys and aggregates run as numba.cuda kernels; the result is on the host.
    path : {"auto", "layered", "fast"}
        Which executor answers: ``"layered"`` the layered engine (:mod:`.pipeline`: every
        supported construct, exact DECIMAL) on ``backend`` (on the GPU, the operators it
        has no device operator for yet run on the host: EXPLAIN marks them); ``"fast"``
        the single-pass engine
        of this module (the TPC-H subset, DECIMAL as float64, the GPU) where it answers the
        query exactly as written (no SEMI/ANTI join syntax, no CAST to DECIMAL, and its
        planner accepts it), else the layered one on the host; ``"auto"`` the layered
        engine on the CPU backend and ``"fast"`` on the GPU.
    """

    broadcast_rows: int = 1_000_000
    backend: str | Backend | None = None
    path: str = "auto"


@dataclass
class _Trace:
    """Operators as they ran, for EXPLAIN: (depth, text, global rows, seconds)."""

    enabled: bool
    comm: Any
    steps: list[tuple[str, int, float]] = field(default_factory=list)
    _t: float = 0.0

    def start(self) -> None:
        self._t = time.perf_counter()

    def add(self, text: Callable[[], str], frame_rows: int) -> None:
        """One step: ``text()`` (called only for EXPLAIN: printing SQL costs time)."""
        if self.enabled:
            rows = global_rows(frame_rows, self.comm)
            self.steps.append((text(), rows, time.perf_counter() - self._t))
            self._t = time.perf_counter()


def query(sql: str, catalog: Catalog, comm: Any = None,
          options: QueryOptions | None = None) -> Table:
    """Collective. Answer a SELECT over the catalog's tables.

    Parameters
    ----------
    sql : str
        The query (DuckDB/ANSI dialect). ``EXPLAIN SELECT ...`` returns the plan as a
        one-column table (see :func:`explain`).
    catalog : Catalog
        Tables by name.
    comm : MPI.Comm, optional
        Default :func:`hpc.comm.world`; every rank of it must call.
    options : QueryOptions, optional

    Returns
    -------
    Table
        The result on rank 0; an empty table with the same columns on the other ranks.

    Raises
    ------
    SQLError
        Malformed query, unknown table or column, type mismatch (raised on every rank).
    UnsupportedSQL
        A construct this engine does not implement, named with its position.
    """
    text = sql.strip()
    explained = _EXPLAIN.match(text)
    if explained:  # EXPLAIN and EXPLAIN ANALYZE both run the query and time its operators
        lines = explain(text[explained.end():], catalog, comm, options).splitlines()
        return Table({"plan": Column(np.arange(len(lines), dtype=np.int32), "string",
                                     np.asarray(lines, dtype=object))})
    comm = resolve_comm(comm)
    options = _checked_options(options)
    answer = _on_fast_path(sql, catalog, options, lambda select: _execute(
        select, ScanCache(catalog), comm, options, None, {}, "root"))
    if answer is not None:
        return answer
    return pipeline.run(sql, catalog, comm, options.broadcast_rows, _layered_on(options))


def _layered_on(options: QueryOptions) -> Backend:
    """Where the layered engine runs: the options' backend when they name the layered path,
    else (the fast engine's fallback) the host."""
    return get_backend(options.backend if options.path == "layered" else "cpu")


def _on_fast_path(sql: str, catalog: Catalog, options: QueryOptions,
                  run: Callable[[exp.Select], Any]) -> Any:
    """``run(the parsed query)`` when the fast engine answers ``sql``; None when the layered
    engine does: the path says so, or the fast engine does not take the query as written
    (its SQLError: the layered engine's binder then says whether it is valid SQL at all)."""
    if options.path == "layered" or (options.path == "auto" and not _on_device(options)):
        return None
    try:
        select = parse(sql, catalog)
        if _fast_exact(select):
            with serial_below(_rows_read(select, catalog)):  # small tables: one thread
                return run(select)
    except SQLError:
        pass
    return None


def _on_device(options: QueryOptions) -> bool:
    """Whether the query's columns live on a GPU (where only the fast engine runs)."""
    return get_backend(options.backend).is_gpu  # a Backend comes back as it is


def _rows_read(tree: exp.Expression, catalog: Catalog) -> int:
    """The rows of the largest catalog table the query reads."""
    names = {t.name for t in tree.find_all(exp.Table)} & set(catalog.tables)
    return max((catalog.num_rows(n) for n in names), default=0)


def _checked_options(options: QueryOptions | None) -> QueryOptions:
    options = options or QueryOptions()
    if options.path not in ("auto", "layered", "fast"):
        raise ValueError(f"path={options.path!r}: expected 'auto', 'layered' or 'fast'")
    return options


# functions the fast engine evaluates outside its expression table: aggregates, EXISTS
# (resolved as a subquery), IF (qualify's spelling of a one-branch CASE)
_FAST_ELSEWHERE = (exp.AggFunc, exp.Exists, exp.If)


def _fast_exact(tree: exp.Expression) -> bool:
    """Whether the fast engine answers the parsed query as written, decided before anything
    runs: every scalar function is in its expression table (else it would scan, then refuse),
    there are no grouping sets; it would read SEMI/ANTI join syntax as an inner join and ignore
    a CAST to DECIMAL (its decimals are float64)."""
    from .expressions import _HANDLERS

    for node in tree.walk():
        if isinstance(node, exp.Func) and not isinstance(node, _FAST_ELSEWHERE) \
                and type(node) not in _HANDLERS:
            return False
        if isinstance(node, exp.Rollup | exp.Cube | exp.GroupingSets):
            return False
        if isinstance(node, exp.Join) and (node.kind or "").upper() in ("SEMI", "ANTI"):
            return False
        if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.DECIMAL:
            return False
    return True


_EXPLAIN = re.compile(r"EXPLAIN(\s+ANALYZE)?\s+", re.IGNORECASE)


def explain(sql: str, catalog: Catalog, comm: Any = None,
            options: QueryOptions | None = None) -> str:
    """Collective. The plan as it ran (like EXPLAIN ANALYZE): for the fast engine one line
    per operator with the rows it produced over all ranks and its seconds on rank 0; for
    the layered engine its logical and physical plans, the latter with rows and times."""
    comm = resolve_comm(comm)
    options = _checked_options(options)
    text = _on_fast_path(sql, catalog, options,
                         lambda select: _explain_fast(select, catalog, comm, options))
    if text is not None:
        return text
    return pipeline.explain(sql, catalog, comm, analyze=True,
                            broadcast_rows=options.broadcast_rows,
                            backend=_layered_on(options))


def _explain_fast(select: exp.Select, catalog: Catalog, comm: Any,
                  options: QueryOptions) -> str:
    trace = _Trace(True, comm)
    trace.start()  # a subquery run before the plan is timed from here
    _execute(select, ScanCache(catalog), comm, options, trace, {}, "root")
    width = max(len(t) for t, _, _ in trace.steps)
    return "\n".join(f"{t:<{width}}  rows={r:<10d} {s * 1e3:9.1f} ms" for t, r, s in trace.steps)


# ---------------------------------------------------------------------------------------------
def _execute(select: exp.Select, catalog: ScanCache, comm: Any, options: QueryOptions | None,
             trace: _Trace | None, ctes: dict[str, exp.Select], gather: str) -> Table:
    """Collective. Resolve the subqueries, plan, run. ``gather``: ``"root"`` (the result on
    rank 0), ``"all"`` (on every rank) or ``"none"`` (left where it was computed)."""
    options = options or QueryOptions()
    if not isinstance(options.backend, Backend):
        options = replace(options, backend=get_backend(options.backend))
    trace = trace or _Trace(False, comm)
    ctes = dict(ctes)
    with_ = select.args.get("with_") or select.args.get("with")
    if with_:
        ctes.update({c.alias_or_name: c.this for c in with_.expressions})

    def run(sub: exp.Select) -> Table:
        trace.add(lambda: f"Subquery {_sql(sub)[:90]}", 0)
        return _execute(sub, catalog, comm, options, trace, ctes, "all")

    plan = plan_select(resolve_subqueries(select, run), ctes)
    trace.start()
    frames: dict[str, Frame] = {}
    refs = _refs_after_scans(plan)
    used = {column_key(c) for c in refs}
    device = OPS.on(options.backend)
    # raw carried strings where the device has their grouping check (a CPU kernel)
    kept_raw = carried.carried_columns(plan, refs) if device.carries_raw_columns else set()
    # one table grouped: a filter that keeps most rows hands its mask to the aggregate
    # instead of gathering every column (TPC-H Q1 keeps 98% of lineitem)
    defer = (len(plan.sources) == 1 and plan.sources[0].subquery is None and bool(plan.group)
             and not plan.residual and not plan.distinct and device.defers_scan_filter)
    selection = None
    for src in plan.sources:  # the scans first: their keys restrict the derived tables
        if src.subquery is None:
            frames[src.alias], selection = _scan(src, catalog, comm, options.backend, trace,
                                                 used, kept_raw, defer)

    def derive(src: Source, partners: dict[str, Column]) -> Frame:
        """A derived table, restricted to the keys its join partners have, unless this
        query has already computed it whole."""
        whole = (_sql(src.subquery), tuple(sorted((n, id(s)) for n, s in ctes.items())))
        if whole in catalog.derived:
            return _derived_frame(src, catalog.derived[whole], trace)
        links = []
        for a, b in [*plan.edges, *_equalities(src.on)]:
            for mine, other in ((a, b), (b, a)):
                if mine.table == src.alias and column_key(other) in partners:
                    links.append((mine.name, partners[column_key(other)]))
        sub = restricted(src.subquery, links, comm)
        table = ops.table_on(options.backend, _execute(sub, catalog, comm, options, trace, ctes,
                                                       "none"))
        if sub is src.subquery:
            catalog.derived[whole] = table
        return _derived_frame(src, table, trace)

    scanned = {k: c for f in frames.values() for k, c in f.columns.items()}
    for src in plan.sources:  # a LEFT JOINed one waits for the rows it is joined to
        if src.subquery is not None and not src.left_join:
            frames[src.alias] = derive(src, scanned)
    frame = _join_all(plan, frames, comm, options, trace, derive)
    if plan.aggregates or plan.group or plan.distinct:
        return _aggregate(plan, frame, comm, options.backend, trace, gather, selection)
    return _finish(plan, frame, list(plan.select.expressions), comm, trace, None, gather)


def _is_equality(term: exp.Expression) -> bool:
    return (isinstance(term, exp.EQ) and isinstance(term.this, exp.Column)
            and isinstance(term.expression, exp.Column))


def _equalities(terms: list[exp.Expression]) -> list[tuple[exp.Column, exp.Column]]:
    """The column = column terms among ``terms`` (a LEFT JOIN's ON)."""
    return [(t.this, t.expression) for t in terms if _is_equality(t)]


def _derived_frame(src: Source, table: Table, trace: _Trace) -> Frame:
    """A derived table or WITH table (its rows where they were computed, not gathered),
    filtered."""
    frame = Frame({f"{src.alias}.{n}": c for n, c in table.columns.items()}, table.num_rows)
    frame = _filter(frame, *src.filters)
    trace.add(lambda: f"Derived table {src.alias} [{', '.join(table.columns)}]", frame.nrows)
    return frame


_COSTLY = (InSet, exp.Like, exp.In, exp.Substring)  # hash probes, string scans: run last
_NARROW = 4  # once terms keep under 1/_NARROW of the rows, the rest run on those rows only


def _mask(frame: Frame, terms: list[exp.Expression]) -> Any:
    """Rows where every term is true (None without terms). Cheap terms run first; once they
    keep few rows, the costly ones (a semi join's probe, LIKE) run on those rows only."""
    xp = frame.xp
    mask, rows = None, None
    if xp is np and frame.nrows:  # bounds of numeric columns by constants: one kernel pass
        bounds, terms = split_bounds(terms, frame)
        if bounds:
            mask = bounds_mask(bounds, frame)
    for term in sorted(terms, key=lambda t: any(True for _ in t.find_all(*_COSTLY))):
        if rows is None and mask is not None and frame.nrows >= 1 << 16:
            if _NARROW * int(xp.count_nonzero(mask)) < frame.nrows:
                rows = xp.flatnonzero(mask)
        if rows is None:
            m = predicate_mask(evaluate(term, frame), frame.nrows, xp)
            mask = m if mask is None else mask & m
            continue
        needed = {column_key(c) for c in term.find_all(exp.Column)}
        sub = Frame({k: c.gather(rows) for k, c in frame.columns.items() if k in needed},
                    len(rows))
        rows = rows[predicate_mask(evaluate(term, sub), len(rows), xp)]
    if rows is not None:
        mask = xp.zeros(frame.nrows, dtype=bool)
        mask[rows] = True
    return mask


def _filter(frame: Frame, *terms: exp.Expression) -> Frame:
    """Rows where every term is true: one mask, then one pass over each column."""
    mask = _mask(frame, list(terms))
    return frame if mask is None else _filter_by_mask(frame, mask)


def _filter_by_mask(frame: Frame, mask: Any) -> Frame:
    index = frame.xp.flatnonzero(mask)  # once: faster than a boolean mask per column
    if len(index) == frame.nrows:
        return frame
    rows = Rows(index)  # each column gathered when read, or composed with a join's rows
    return Frame({n: deferred_gather(c, rows) for n, c in frame.columns.items()}, len(index))


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


def _refs_after_scans(plan: QueryPlan) -> list[exp.Column]:
    """The column references the plan reads after the scans: a column only a scan filter
    reads is not carried (nor gathered by the filter)."""
    select = plan.select
    nodes = [*select.expressions, *plan.group, *_having(select), *_order_nodes(select),
             *(c for e in plan.edges for c in e), *plan.residual,
             *(t for src in plan.sources for t in src.on)]
    return [c for n in nodes for c in
            ([n] if isinstance(n, exp.Column) else n.find_all(exp.Column))]


def _scan(src: Source, catalog: ScanCache, comm: Any, backend: Backend, trace: _Trace,
          used: set[str], kept_raw: set[str], defer: bool = False) -> tuple[Frame, Any]:
    """This rank's rows of a table, filtered; a column only the filters read is dropped
    once they have read it (not gathered by the filter, not carried further). With
    ``defer``, a filter that keeps at least half the rows is returned as a mask over the
    unfiltered rows instead: ``(frame, mask or None)``."""
    table = ops.table_on(backend, catalog.load(src.table, src.columns, comm,
                                               carried.unsorted_columns(src, used, kept_raw)))
    frame = Frame({f"{src.alias}.{n}": c for n, c in table.columns.items()}, table.num_rows)
    mask = _mask(frame, src.filters)
    rows = None
    if mask is not None:
        kept = {k: c for k, c in frame.columns.items() if k in used}
        frame = Frame(kept, frame.nrows) if kept else frame
        if defer and kept:
            rows = int(frame.xp.count_nonzero(mask))
        if rows is None or 2 * rows < frame.nrows:
            frame, mask, rows = _filter_by_mask(frame, mask), None, None

    def text() -> str:
        where = f" WHERE {' AND '.join(_sql(t) for t in src.filters)}" if src.filters else ""
        return f"Scan {src.table} AS {src.alias} [{', '.join(src.columns)}]{where}"

    trace.add(text, frame.nrows if rows is None else rows)
    return frame, mask


# -- joins ------------------------------------------------------------------------------------
def _ndv(col: Column, total: int) -> float:
    """Distinct values of a join key over all ranks, estimated from this rank's sample."""
    n = len(col)
    if n == 0 or total == 0:
        return 1.0
    sample = col.values[:: max(1, n // 50_000)]
    xp = array_module(sample)
    if xp is np:
        distinct = aggregate.distinct_values(sample)
    else:
        distinct = len(xp.unique(sample))
    return float(total) if distinct > 0.9 * len(sample) else float(min(distinct, total))


@dataclass
class _Joined:
    aliases: set[str]
    frame: Frame
    rows: int  # over all ranks
    ndv: dict[str, float]


def _edge_keys(edges, left: set[str], right: set[str]) -> list[tuple[exp.Column, exp.Column]]:
    """Edges between the two alias sets, oriented (left column, right column)."""
    out = []
    for a, b in edges:
        if a.table in left and b.table in right:
            out.append((a, b))
        elif b.table in left and a.table in right:
            out.append((b, a))
    return out


def _estimate(x: _Joined, y: _Joined, keys) -> float:
    best = 1.0
    for a, b in keys:
        nx = min(x.ndv.get(column_key(a), x.rows), x.rows)
        ny = min(y.ndv.get(column_key(b), y.rows), y.rows)
        best = max(best, nx, ny)
    return x.rows * y.rows / best


def _cost(x: _Joined, y: _Joined, keys) -> float:
    """The estimated result rows, plus the build side's rows twice over: a hash table costs
    more per row to build than to probe, and a small one stays in cache."""
    return _estimate(x, y, keys) + 2.0 * min(x.rows, y.rows)


def _join_all(plan: QueryPlan, frames: dict[str, Frame], comm: Any, options: QueryOptions,
              trace: _Trace, derive) -> Frame:
    """Inner joins in greedy cost order, residual filters as soon as their tables meet, then
    the LEFT JOINs in query order (``derive(src, columns)`` runs a LEFT JOINed derived table
    restricted to the keys of the joined ``columns``)."""
    key_names = {column_key(c) for e in plan.edges for c in e}
    parts = {}
    for src in plan.sources:
        if src.left_join:
            continue
        f = frames[src.alias]
        rows = global_rows(f.nrows, comm)
        ndv = {k: _ndv(f.columns[k], rows) for k in key_names if k in f.columns}
        if comm.Get_size() > 1 and ndv:  # the same estimate (so the same plan) on every rank
            names = sorted(ndv)
            agreed = bcast_object([ndv[k] for k in names], 0, comm)
            ndv = dict(zip(names, agreed, strict=True))
        parts[src.alias] = _Joined({src.alias}, f, rows, ndv)
    residual = list(plan.residual)
    # greedy operator ordering: join the two connected groups of tables whose join is
    # cheapest (_cost), until one is left, so a fact table meets its most selective
    # dimension first, not whichever small tables pair up cheapest
    groups = list(parts.values())
    while len(groups) > 1:
        candidates = [(i, j, _edge_keys(plan.edges, groups[i].aliases, groups[j].aliases))
                      for i in range(len(groups)) for j in range(i + 1, len(groups))]
        candidates = [c for c in candidates if c[2]]
        if not candidates:
            raise UnsupportedSQL(f"tables {sorted(a for g in groups for a in g.aliases)} are "
                                 "not connected by equi-joins (cross joins are not supported)")
        i, j, _ = min(candidates, key=lambda c: _cost(groups[c[0]], groups[c[1]], c[2]))
        joined = _join(groups[i], groups[j], plan.edges, "inner", comm, options, trace)
        joined, residual = _apply_residual(joined, residual, trace)
        groups = [g for k, g in enumerate(groups) if k not in (i, j)] + [joined]
    current = groups[0]
    current, residual = _apply_residual(current, residual, trace)
    for src in plan.sources:
        if src.left_join:
            frame = frames[src.alias] if src.alias in frames else derive(
                src, current.frame.columns)
            current = _left_join(current, src, frame, comm, options, trace)
    current, residual = _apply_residual(current, residual, trace)
    if residual:
        raise SQLError(f"condition refers to unknown tables: {describe(residual[0])}")
    return current.frame


def _apply_residual(current: _Joined, residual: list[exp.Expression], trace: _Trace):
    keep = []
    for term in residual:
        if aliases_of(term) <= current.aliases:
            frame = _filter(current.frame, term)
            current = _Joined(current.aliases, frame, current.rows, current.ndv)
            trace.add(lambda term=term: f"Filter {_sql(term)}", frame.nrows)
        else:
            keep.append(term)
    return current, keep


def _left_join(current: _Joined, src: Source, frame: Frame, comm: Any, options: QueryOptions,
               trace: _Trace) -> _Joined:
    edges = _equalities(src.on)
    for term in src.on:
        refs = aliases_of(term)
        if refs == {src.alias}:
            frame = _filter(frame, term)
        elif not _is_equality(term):
            raise UnsupportedSQL(f"LEFT JOIN ... ON term {describe(term)}: only equalities "
                                 "between the two sides and filters of the joined table")
    keys = _edge_keys(edges, current.aliases, {src.alias})
    if not keys:
        raise UnsupportedSQL(f"LEFT JOIN {src.table}: needs an equality with the left side")
    right = _Joined({src.alias}, frame, global_rows(frame.nrows, comm), {})
    return _join(current, right, edges, "left", comm, options, trace)


def _key_arrays(x: Column, y: Column) -> tuple[np.ndarray, np.ndarray]:
    """Join keys of both sides as comparable int64 arrays."""
    if x.kind == "string" and y.kind == "string":
        if x.dictionary is y.dictionary:
            return x.values.astype(np.int64), y.values.astype(np.int64)
        merged = strings.merge([x.dictionary, y.dictionary])
        xp = array_module(x.values)
        rx = xp.asarray(strings.remap(x.dictionary, merged).astype(np.int64))
        ry = xp.asarray(strings.remap(y.dictionary, merged).astype(np.int64))

        def codes(remap: Any, values: Any) -> Any:  # no entries: every row a null, code any
            return remap[values] if len(remap) else xp.zeros(len(values), np.int64)

        return codes(rx, x.values), codes(ry, y.values)
    if x.kind == "string" or y.kind == "string" or (x.kind == "date") != (y.kind == "date"):
        raise UnsupportedSQL(f"join keys of kinds {x.kind} and {y.kind}: numbers, dates or "
                             "strings on both sides")
    if x.values.dtype.kind == "f" or y.values.dtype.kind == "f":  # equal values, equal bits
        def bits(v: np.ndarray) -> np.ndarray:
            return (v.astype(np.float64) + 0.0).view(np.int64)  # -0.0 as 0.0

        return bits(x.values), bits(y.values)
    return x.values.astype(np.int64, copy=False), y.values.astype(np.int64, copy=False)


def _join(x: _Joined, y: _Joined, edges, how: str, comm: Any, options: QueryOptions,
          trace: _Trace) -> _Joined:
    keys = _edge_keys(edges, x.aliases, y.aliases)
    if how == "inner" and y.rows > x.rows:  # probe the larger side
        x, y = y, x
        keys = [(b, a) for a, b in keys]
    probe_cols, build_cols = dict(x.frame.columns), dict(y.frame.columns)

    def inexact(pair) -> bool:  # a float key: hashing its bits needs a hash factorisation
        return "float" in (probe_cols[column_key(pair[0])].kind,
                           build_cols[column_key(pair[1])].kind)

    keys = sorted(keys, key=inexact)  # integer keys first: they pack into one hash key
    exact = sum(not inexact(k) for k in keys)
    if how != "inner" or exact == 0:
        exact = len(keys)
    kp, kb = [], []
    for i, (a, b) in enumerate(keys):
        pa, pb = probe_cols[column_key(a)], build_cols[column_key(b)]
        va, vb = _key_arrays(pa, pb)
        probe_cols[f"\0key{i}"] = Column(va, "int", None, pa.valid)
        build_cols[f"\0key{i}"] = Column(vb, "int", None, pb.valid)
        kp.append(f"\0key{i}")
        kb.append(f"\0key{i}")
    size = comm.Get_size()
    if size > 1 and y.rows <= options.broadcast_rows:
        strategy = "broadcast"
        build_cols = allgather_columns(build_cols, comm)
    elif size > 1:
        strategy = "shuffle"
        probe_cols = partition_by_keys(probe_cols, [probe_cols[kp[0]]], comm)
        build_cols = partition_by_keys(build_cols, [build_cols[kb[0]]], comm)
    else:
        strategy = "local"
    backend = options.backend
    pkey, pvalid, bkey, bvalid = _combined_keys(backend, [probe_cols[k] for k in kp[:exact]],
                                                [build_cols[k] for k in kb[:exact]])
    left, right = OPS.on(backend).join(backend.xp, pkey, bkey,
                                       "left" if how == "left" else "inner", pvalid, bvalid)
    if exact < len(keys):  # an inner join's float keys: compared on the pairs
        left, right = _equal_pairs(left, right, [probe_cols[k] for k in kp[exact:]],
                                   [build_cols[k] for k in kb[exact:]])
    inner = how == "inner"  # every pair has both rows: the columns are deferred
    frame = Frame({**_carried(probe_cols, left, inner), **_carried(build_cols, right, inner)},
                  len(left))
    def text() -> str:
        on = " AND ".join(f"{_sql(a)} = {_sql(b)}" for a, b in keys)
        return (f"{'HashJoin' if how == 'inner' else 'LeftHashJoin'} ({strategy}, build "
                f"{'+'.join(sorted(y.aliases))}) ON {on}")

    trace.add(text, frame.nrows)
    rows = global_rows(frame.nrows, comm)
    return _Joined(x.aliases | y.aliases, frame, rows, {**y.ndv, **x.ndv})


def _carried(columns: dict[str, Column], index: Any, defer: bool) -> dict[str, Column]:
    """A join side's columns (not its packed keys) at rows ``index``: deferred like a
    filter's, or taken at once (``-1``, a LEFT JOIN's missing row, reads as a null)."""
    rows = Rows(index)
    return {n: deferred_gather(c, rows) if defer else c.take(index)
            for n, c in columns.items() if not n.startswith("\0key")}


def _equal_pairs(left: Any, right: Any, probe: list[Column], build: list[Column]):
    """The pairs whose remaining keys are equal (and not null) on both sides."""
    keep = None
    for p, b in zip(probe, build, strict=True):
        same = p.values[left] == b.values[right]
        for valid, rows in ((p.valid, left), (b.valid, right)):
            if valid is not None:
                same &= valid[rows]
        keep = same if keep is None else keep & same
    rows = array_module(left).flatnonzero(keep)
    return left[rows], right[rows]


def _combined_keys(backend: Backend, probe: list[Column], build: list[Column]):
    """One int64 key per row for several join keys (equal exactly when all keys are), and
    the validity (a null in any key matches nothing)."""
    pv = ops.all_valid([c.valid for c in probe])
    bv = ops.all_valid([c.valid for c in build])
    if len(probe) == 1:
        return probe[0].values, pv, build[0].values, bv
    n = len(probe[0])
    xp = array_module(probe[0].values)
    both = [xp.concatenate([p.values, b.values]) for p, b in zip(probe, build, strict=True)]
    ids = ops.combine_ids(backend, both, [None] * len(both))
    return ids[:n], pv, ids[n:], bv


# -- aggregation ------------------------------------------------------------------------------
@dataclass
class _Agg:
    op: str  # sum, avg, min, max, count, count_distinct
    arg: exp.Expression | None  # None: COUNT(*)


def _agg_of(node: exp.Expression) -> _Agg:
    op = _AGG_NAMES[type(node)]
    arg = node.this
    if isinstance(arg, exp.Distinct):
        if op != "count" or len(arg.expressions) != 1:
            raise UnsupportedSQL(f"DISTINCT inside {describe(node)}: only COUNT(DISTINCT x)")
        return _Agg("count_distinct", arg.expressions[0])
    if isinstance(arg, exp.Star) or arg is None:
        if op != "count":
            raise SQLError(f"{op.upper()}(*) is not valid SQL: {describe(node)}")
        return _Agg("count", None)
    if any(arg.find_all(*_AGG_NAMES)):
        raise SQLError(f"nested aggregate in {describe(node)}")
    return _Agg(op, arg)


def _aggregate(plan: QueryPlan, frame: Frame, comm: Any, backend: Backend, trace: _Trace,
               gather: str, selection: Any = None) -> Table:
    """``selection``: the rows that count (the scan's deferred filter), None for all."""
    select = plan.select
    keys = list(plan.group)
    if plan.distinct and not keys:
        if plan.aggregates:
            raise UnsupportedSQL("SELECT DISTINCT with aggregates is not supported")
        keys = [e.unalias() for e in select.expressions]
    aggs: list[_Agg] = []
    agg_sql: dict[str, int] = {}
    key_sql = {_sql(k): j for j, k in enumerate(keys)}

    key_types = tuple({type(k) for k in keys})

    def rewrite(node: exp.Expression) -> exp.Expression:
        is_agg = isinstance(node, tuple(_AGG_NAMES))
        if not is_agg and not isinstance(node, key_types):
            return node  # printing each node's SQL to compare would cost more than the query
        text = _sql(node)
        if text in key_sql:
            return exp.column(f"\0key{key_sql[text]}")
        if is_agg:
            if text not in agg_sql:
                agg_sql[text] = len(aggs)
                aggs.append(_agg_of(node))
            return exp.column(f"\0agg{agg_sql[text]}")
        return node

    # collect the aggregates first (the rewritten trees are built again in _finish)
    for node in list(select.expressions) + _order_nodes(select) + _having(select):
        node.copy().transform(rewrite)
    xp = frame.xp
    shared = Frame(frame.columns, frame.nrows, memo={})  # common subexpressions run once
    key_cols = [to_column(evaluate(k, shared), frame.nrows, xp) for k in keys]
    args = [None if a.arg is None else to_column(evaluate(a.arg, shared), frame.nrows, xp)
            for a in aggs]
    size = comm.Get_size()
    distinct = any(a.op == "count_distinct" for a in aggs)
    if selection is not None and (distinct or not key_cols):
        index = xp.flatnonzero(selection)  # filtered after all: the keys and arguments only
        key_cols = [c.gather(index) for c in key_cols]
        args = [None if c is None else c.gather(index) for c in args]
        frame, selection = Frame({}, len(index)), None
    if selection is not None:  # the selection as a last key; the unselected groups dropped
        key_cols.append(Column(selection, "bool"))
    if distinct and size > 1:  # partition the rows by group, aggregate once
        key_cols = list(settle_columns(dict(enumerate(key_cols)), comm).values())
        cols = {f"k{j}": c for j, c in enumerate(key_cols)}
        cols.update({f"a{i}": c for i, c in enumerate(args) if c is not None})
        cols["\0rows"] = Column(xp.zeros(frame.nrows, np.int8), "int")
        if key_cols:
            cols = partition_by_keys(cols, [cols[f"k{j}"] for j in range(len(keys))], comm)
        else:
            cols = ship(cols, xp.zeros(frame.nrows, np.int64), comm)
        nrows = len(cols["\0rows"])
        key_cols = [cols[f"k{j}"] for j in range(len(keys))]
        args = [None if a is None else cols[f"a{i}"] for i, a in enumerate(args)]
        states, key_out, ngroups = _partial(backend, key_cols, aggs, args, nrows,
                                            not keys and comm.Get_rank() == 0, comm)
        final = _final(aggs, states)
    else:
        states, key_out, ngroups = _partial(backend, key_cols, aggs, args, frame.nrows,
                                            not keys, comm)
        if selection is not None:
            states, key_out, ngroups = _selected_groups(states, key_out)
        if size > 1:
            states, key_out, ngroups = _combine(backend, aggs, states, key_out, ngroups, comm)
        final = _final(aggs, states)
    columns = {f"\0key{j}": c for j, c in enumerate(key_out)}
    columns.update({f"\0agg{i}": c for i, c in enumerate(final)})
    agg_frame = Frame(columns, ngroups)
    trace.add(lambda: f"Aggregate GROUP BY [{', '.join(_sql(k) for k in keys)}] "
              f"[{', '.join(a.op for a in aggs)}]", ngroups)
    for term in _having(select):
        agg_frame = _filter(agg_frame, _rewritten(term, rewrite))
        trace.add(lambda term=term: f"Having {_sql(term)}", agg_frame.nrows)
    return _finish(plan, agg_frame, list(select.expressions), comm, trace,
                   lambda n: _rewritten(n, rewrite), gather)


_PER_GROUP = ("sum", "count", "value")  # the states' arrays of one entry a group


def _selected_groups(states: list, key_out: list[Column]) -> tuple[list, list[Column], int]:
    """The groups whose last key (the selection) is true, without that key."""
    keep = np.flatnonzero(key_out[-1].values)
    kept = [{k: v[keep] if k in _PER_GROUP else v for k, v in s.items()} for s in states]
    return kept, [c.take(keep) for c in key_out[:-1]], len(keep)


def _rewritten(node: exp.Expression, rewrite) -> exp.Expression:
    out = node.copy().transform(rewrite)
    for col in out.find_all(exp.Column):
        if not col.name.startswith("\0"):
            raise SQLError(f"column {col.sql()} must appear in GROUP BY or in an aggregate "
                           f"({describe(node)})")
    return out


def _having(select: exp.Select) -> list[exp.Expression]:
    return [select.args["having"].this] if select.args.get("having") else []


def _order_nodes(select: exp.Select) -> list[exp.Expression]:
    order = select.args.get("order")
    return [o.this for o in order.expressions] if order else []


def _partial(backend: Backend, key_cols: list[Column], aggs: list[_Agg],
             args: list[Column | None], nrows: int, one_group: bool, comm: Any):
    """Collective (when a key is a raw carried string). Per-group states of this rank's
    rows: ``(states, key columns, ngroups)``."""
    xp = backend.xp
    device = OPS.on(backend)
    if not aggs and len(key_cols) == 1 and key_cols[0].valid is None and not key_cols[0].raw:
        distinct = device.distinct_keys(xp, key_cols[0].values)
        if distinct is not None:  # DISTINCT k (an IN or EXISTS subquery's keys): no group ids
            col = key_cols[0]
            return [], [Column(distinct, col.kind, col.dictionary)], len(distinct)
    if key_cols:
        ids, ngroups, first, key_cols = carried.group_ids(backend, key_cols, comm)
        key_out = [c.take(first) for c in key_cols]
    else:
        ids = xp.zeros(nrows, np.int64)
        ngroups = 1 if one_group else 0
        if not one_group and nrows:
            raise AssertionError("rows without a group")
        key_out = []
    states: list[dict[str, Any] | None] = [None] * len(aggs)
    counts: dict[int | None, Any] = {}  # rows per group depend only on the validity mask
    device.fused_sums(xp, ids, ngroups, aggs, args, states, counts)  # a CPU pass, or nothing
    for i, (a, col) in enumerate(zip(aggs, args, strict=True)):
        if states[i] is not None:
            continue
        values = None if col is None else col.values
        valid = None if col is None else col.valid
        if values is not None and col.kind in ("string", "bool", "date") and a.op in ("sum",
                                                                                      "avg"):
            raise SQLError(f"type mismatch: {a.op.upper()} of a {col.kind} column")
        mask_id = None if valid is None else id(valid)
        if mask_id not in counts:
            counts[mask_id] = device.reduce_groups(xp, "count", ids, ngroups, values, valid)[0]
        count = counts[mask_id]
        if a.op in ("sum", "avg"):
            total, _ = device.reduce_groups(xp, "sum", ids, ngroups, values, valid)
            states[i] = {"sum": total, "count": count}
        elif a.op in ("min", "max"):
            best, seen = device.reduce_groups(xp, a.op, ids, ngroups, values, valid)
            states[i] = {"value": best, "count": seen.astype(np.int64),
                         "kind": col.kind, "dictionary": col.dictionary}
        elif a.op == "count":
            states[i] = {"count": count}
        else:
            distinct, _ = device.reduce_groups(xp, "count_distinct", ids, ngroups, values,
                                               valid)
            states[i] = {"count": distinct}
    return states, key_out, ngroups


def _combine(backend: Backend, aggs: list[_Agg], states, key_out: list[Column], ngroups: int,
             comm: Any):
    """Collective. Ship partial states to the rank owning each group and merge them."""
    xp = backend.xp
    device = OPS.on(backend)
    key_out = list(settle_columns(dict(enumerate(key_out)), comm).values())
    cols: dict[str, Column] = {f"k{j}": c for j, c in enumerate(key_out)}
    for i, s in enumerate(states):
        for name in ("sum", "count", "value"):
            if name in s:
                cols[f"s{i}.{name}"] = Column(s[name], "int")
    cols["\0groups"] = Column(xp.zeros(ngroups, np.int8), "int")
    if key_out:
        cols = partition_by_keys(cols, [cols[f"k{j}"] for j in range(len(key_out))], comm)
        n = len(cols["\0groups"])
        keys = [cols[f"k{j}"] for j in range(len(key_out))]
        combined = ops.combine_ids(backend, [c.values for c in keys], [c.valid for c in keys])
        ids, ngroups, first = device.group_ids(xp, combined)
        key_out = [c.take(first) for c in keys]
    else:
        cols = ship(cols, xp.zeros(ngroups, np.int64), comm)
        n = len(cols["\0groups"])
        ids = xp.zeros(n, np.int64)
        ngroups = 1 if comm.Get_rank() == 0 else 0
    merged = []
    for i, (a, s) in enumerate(zip(aggs, states, strict=True)):
        out: dict[str, Any] = {}
        count = cols[f"s{i}.count"].values
        out["count"], _ = device.reduce_groups(xp, "sum", ids, ngroups, count, None)
        if "sum" in s:
            out["sum"], _ = device.reduce_groups(xp, "sum", ids, ngroups,
                                                 cols[f"s{i}.sum"].values, None)
        if "value" in s:
            out["value"], _ = device.reduce_groups(xp, a.op, ids, ngroups,
                                                   cols[f"s{i}.value"].values, count > 0)
            out.update(kind=s["kind"], dictionary=s["dictionary"])
        merged.append(out)
    return merged, key_out, ngroups


def _final(aggs: list[_Agg], states) -> list[Column]:
    out = []
    for a, s in zip(aggs, states, strict=True):
        count = s["count"].astype(np.int64, copy=False)
        present = count > 0
        valid = None if bool(present.all()) else present
        if a.op in ("count", "count_distinct"):
            out.append(Column(count, "int"))
        elif a.op == "sum":
            total = s["sum"]
            out.append(Column(total, "float" if total.dtype.kind == "f" else "int", None, valid))
        elif a.op == "avg":
            xp = array_module(count)
            avg = xp.where(present, s["sum"] / xp.maximum(count, 1), 0.0)
            out.append(Column(avg, "float", None, valid))
        else:
            out.append(Column(s["value"], s["kind"], s["dictionary"], valid))
    return out


# -- projection, order, limit, gather ---------------------------------------------------------
def _sort_order(keys: list[tuple[Column, bool, bool]], n: int) -> np.ndarray:
    """Row order for ORDER BY keys ``(column, descending, nulls_first)`` (stable)."""
    if not keys:
        return np.arange(n)
    arrays = []
    for col, desc, nulls_first in keys:
        v = col.values
        v = v.astype(np.int64) if v.dtype.kind == "b" else v
        v = -v if desc else v
        null = np.zeros(n, np.int8) if col.valid is None else (~col.valid).astype(np.int8)
        if col.valid is not None:  # NULLs tie with each other: their stored values are noise
            v = np.where(col.valid, v, np.zeros(1, v.dtype))
        arrays.append(-null if nulls_first else null)
        arrays.append(v)
    return np.lexsort(arrays[::-1])


def _finish(plan: QueryPlan, frame: Frame, items: list[exp.Expression], comm: Any,
            trace: _Trace, rewrite, gather: str) -> Table:
    select = plan.select
    prep = rewrite or (lambda n: n)
    names = [item.alias_or_name for item in items]
    if len(set(names)) != len(names):
        raise UnsupportedSQL(f"duplicate output column names {names}: use AS to rename")
    xp = frame.xp
    out: dict[str, Column] = {}
    for name, item in zip(names, items, strict=True):
        out[name] = to_column(evaluate(prep(item.unalias()), frame), frame.nrows, xp)
    order = select.args.get("order")
    order_keys = []
    for i, o in enumerate(order.expressions if order else []):
        target = o.this
        if isinstance(target, exp.Column) and not target.table and target.name in out:
            col = out[target.name]
        else:
            matches = [n for n, it in zip(names, items, strict=True)
                       if _sql(it.unalias()) == _sql(target)]
            col = out[matches[0]] if matches else to_column(
                evaluate(prep(target), frame), frame.nrows, xp)
        out[f"\0order{i}"] = col
        order_keys.append((f"\0order{i}", bool(o.args.get("desc")),
                           bool(o.args.get("nulls_first"))))

    def cut(cols: dict[str, Column], n: int) -> dict[str, Column]:
        idx = _sort_order([(cols[k], d, nf) for k, d, nf in order_keys], n)
        if plan.limit is not None:
            idx = idx[: plan.limit]
        return {k: c.take(idx) for k, c in cols.items()}

    n = frame.nrows
    ordered = bool(order_keys) or plan.limit is not None
    if ordered or gather != "none":  # results, and the few rows ordering keeps, on the host
        out = ops.columns_on_host(out)
    if ordered:
        out = carried.settle_named(out, [k for k, _, _ in order_keys], comm)
        out = cut(out, n)  # this rank's top rows
    out = settle_columns(out, comm)  # carried strings: the rows that are left
    if comm.Get_size() > 1 and (gather != "none" or ordered):
        n_local = len(next(iter(out.values()))) if out else 0
        out = ship(out, np.zeros(n_local, np.int64), comm)
        if comm.Get_rank() == 0 and ordered:
            out = cut(out, len(next(iter(out.values()))))
        if gather == "all":
            out = allgather_columns(out, comm)
    result = Table({k: c for k, c in out.items() if not k.startswith("\0")})
    def text() -> str:
        label = "Project"
        if order_keys:
            label = f"Sort [{', '.join(_sql(o) for o in order.expressions)}]"
        if plan.limit is not None:
            label += f" Limit {plan.limit}"
        return f"{label} -> gather on rank 0"

    trace.add(text, result.num_rows)
    return result
