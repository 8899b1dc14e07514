"""Raw string columns: VARCHAR columns read with Parquet's dictionaries as they are
(``Scan.raw``), not sorted into a dictionary when scanned.

Two kinds of column stay raw:

- **Filtered by entries.** A column its scan's filter reads only entry by entry: through
  per-entry predicates (LIKE, ILIKE, STARTS_WITH, a comparison with a constant, IN a list
  of constants, IS NULL) or per-entry string functions of constants (SUBSTRING, LOWER,
  UPPER, LENGTH, TRIM, REPLACE, STRPOS, LEFT, RIGHT: their result is a sorted column of its
  own). These run once per dictionary entry (a free-text column of millions of distinct
  entries is never sorted). Read nowhere else, it is dropped right
  after the filter; read above as anything but a carried column, it is settled there
  (``Filter.settle``: a sorted dictionary of the strings of the rows the filter keeps).
- **Carried.** A column every operator above only passes along (late materialisation): an
  output column, a bare GROUP BY key, a column joins, filters, sorts and limits carry
  without reading it, or one read entry by entry as above. Some operators read it without a
  sorted dictionary, so they count as passing it along too: MIN and MAX (they compare its
  strings' bytes; their result is the column under a new name), COUNT and COUNT(DISTINCT)
  (distinct strings found by hashing), an equi-join key (``l.s = r.s``: both sides' strings
  hashed) and a bare ORDER BY key under a LIMIT (the k-th string found by a selection over
  the bytes, only the rows that can make the cut settled). It moves as row references
  through the joins and is settled once, on the rows that remain (a customer's name and
  address beside a top-20 of revenue: 20 rows, not the whole table). The operators settle
  it where they must: a range exchange (hash, gather and broadcast exchanges ship its rows'
  bytes), an operator that compares it, the result.

EXPLAIN shows both on the scan (``(raw)``) and the settling on the filter.
"""

from __future__ import annotations

from dataclasses import replace

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

__all__ = ["raw_strings", "carried_columns", "compared"]

_PER_ENTRY = frozenset({"like", "ilike", "starts_with", "eq", "ne", "lt", "le", "gt", "ge",
                        "in", "is_null", "is_not_null"})
# string functions of one string and constants, computed once per dictionary entry: their
# result is a column of its own (sorted), so they read a raw column as well as a settled one
_PER_ENTRY_FUNCTIONS = frozenset({"lower", "upper", "length", "trim", "ltrim", "rtrim",
                                  "substring", "replace", "strpos", "left", "right"})


def raw_strings(plan: P.Node) -> P.Node:
    """``plan`` with the scans' raw string columns marked."""
    uses: dict[str, int] = {}
    for node in P.nodes(plan):
        for e in P.expressions(node):
            for name in E.refs(e):
                uses[name] = uses.get(name, 0) + 1
    return _mark(plan, uses, carried_columns(plan))


def carried_columns(plan: P.Node) -> set[str]:
    """The VARCHAR columns of ``plan``'s scans that no operator reads but to pass them along
    (under their name or another: ``x := col``, a GROUP BY key) or through a per-entry
    predicate of a filter."""
    blocked: set[str] = set()
    renamed: dict[str, list[str]] = {}
    limited = {id(n.input) for n in P.nodes(plan) if isinstance(n, P.Limit)
               and isinstance(n.input, P.Sort) and n.limit is not None}
    for node in P.nodes(plan):
        if isinstance(node, P.SetOp | P.Distinct):  # rows compared column by column
            blocked |= {f.name for child in node.inputs for f in child.schema}
        elif isinstance(node, P.Project):
            _passed(node.exprs, renamed, blocked)
        elif isinstance(node, P.Aggregate):
            _passed(node.keys, renamed, blocked)
            for name, a in node.aggregates:
                if a.name in ("min", "max") and len(a.args) == 1 and isinstance(
                        a.args[0], E.Ref) and not a.order:
                    # compared string by string in the aggregate: its result is the column
                    # under a new name, raw as long as that name is only passed along
                    renamed.setdefault(a.args[0].name, []).append(name)
                    blocked |= compared(a.filter) if a.filter is not None else set()
                elif a.name == "count" and len(a.args) == 1 and isinstance(
                        a.args[0], E.Ref) and not a.order:
                    # NULLs counted, or distinct strings told apart by hashing their bytes
                    blocked |= compared(a.filter) if a.filter is not None else set()
                else:
                    blocked |= compared(a)
        elif isinstance(node, P.Window):
            for e in [*node.partition, *(k.expr for k in node.order),
                      *(w for _, w in node.functions)]:
                blocked |= compared(e)
        elif isinstance(node, P.Sort) and id(node) in limited:
            # ORDER BY ... LIMIT: a bare column key is ranked by its bytes for the cut, and
            # settled on the rows that make it (the executor's top-k selection)
            blocked |= {n for k in node.keys if not isinstance(k.expr, E.Ref)
                        for n in compared(k.expr)}
        elif isinstance(node, P.Join) and node.condition is not None:
            blocked |= {n for e in _join_reads(node) for n in compared(e)}
        elif not isinstance(node, P.Output):
            blocked |= {n for e in P.expressions(node) for n in compared(e)}

    def free(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in blocked or name in seen:
            return name not in blocked
        return all(free(n, seen | {name}) for n in renamed.get(name, []))

    return {name for node in P.nodes(plan) if isinstance(node, P.Scan)
            for name, _, t in node.columns if t.kind == "varchar" and free(name)}


def compared(e: E.Expr) -> set[str]:
    """The columns ``e`` reads other than entry by entry: not as the subject of a per-entry
    predicate (``s LIKE 'x%'``, ``s = 'x'``, ``s IN ('a', 'b')``) or of a per-entry string
    function (``SUBSTRING(s, 1, 2)``, ``LOWER(s)``) whose other arguments are constants."""
    if isinstance(e, E.Ref):
        return {e.name}
    if isinstance(e, E.Call) and e.args:
        subject, rest = e.args[0], e.args[1:]
        if e.name in ("eq", "ne", "lt", "le", "gt", "ge") and isinstance(subject, E.Literal):
            subject, rest = e.args[1], e.args[:1]
        if (e.name in _PER_ENTRY or e.name in _PER_ENTRY_FUNCTIONS) and isinstance(
                subject, E.Ref) and all(isinstance(a, E.Literal) for a in rest):
            return set()
    return {n for c in e.children for n in compared(c)}


def _join_reads(node: P.Join) -> list[E.Expr]:
    """The conjuncts of a join's condition that read strings other than as an equi-join key:
    ``l.s = r.s``, one column of each side, is a key, matched by hashing the strings of both
    dictionaries (:func:`~hpc.domains.sql.strings.equal_codes`), so its columns may be raw.
    A null-aware join's conditions are all read."""
    terms = E.conjuncts(node.condition)
    if node.null_aware:
        return terms
    left = {f.name for f in node.left.schema}
    right = {f.name for f in node.right.schema}

    def key(e: E.Expr) -> bool:
        if not (isinstance(e, E.Call) and e.name == "eq" and len(e.args) == 2
                and all(isinstance(a, E.Ref) for a in e.args)):
            return False
        a, b = (x.name for x in e.args)
        return (a in left and b in right) or (a in right and b in left)

    return [t for t in terms if not key(t)]


def _passed(pairs: tuple[tuple[str, E.Expr], ...], renamed: dict[str, list[str]],
            blocked: set[str]) -> None:
    """Columns a Project or GROUP BY passes on as they are (perhaps renamed); the columns
    its other expressions compare are blocked."""
    for name, e in pairs:
        if isinstance(e, E.Ref):
            if name != e.name:
                renamed.setdefault(e.name, []).append(name)
        else:
            blocked |= compared(e)


def _mark(node: P.Node, uses: dict[str, int], carried: set[str]) -> P.Node:
    if isinstance(node, P.Filter) and isinstance(node.input, P.Scan):
        scan = node.input
        strings = [n for n, _, t in scan.columns if t.kind == "varchar"]
        names = [n for n in strings if n in E.refs(node.condition)
                 and n not in compared(node.condition)]
        kept_raw = [n for n in strings if n in carried and n not in names]
        if names or kept_raw:
            raw = tuple(src for n, src, _ in scan.columns if n in names or n in kept_raw)
            read_above = tuple(n for n in names if uses.get(n, 0) > 1)
            settle = tuple(n for n in read_above if n not in carried)
            marked = P.Filter(replace(scan, raw=raw), node.condition, settle)
            if len(read_above) == len(names):
                return marked
            kept = tuple((f.name, E.Ref(f.name, f.type)) for f in scan.schema
                         if f.name not in names or f.name in read_above)
            return P.Project(marked, kept)
        return node
    if isinstance(node, P.Scan):
        raw = tuple(src for n, src, t in node.columns if t.kind == "varchar" and n in carried)
        return replace(node, raw=raw) if raw else node
    return node.with_inputs(tuple(_mark(c, uses, carried) for c in node.inputs))
