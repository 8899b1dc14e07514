"""Raw string columns: a VARCHAR column that its scan's filter reads only through per-entry
predicates (LIKE, ILIKE, STARTS_WITH, a comparison with a constant, IN a list of constants,
IS NULL) is read with Parquet's dictionaries as they are (``Scan.raw``): not sorted into a
dictionary before the filter (a free-text column of millions of distinct entries). Read
nowhere else, it is dropped right after the filter; read above too, it is settled there
(``Filter.settle``: a sorted dictionary of the strings of the rows the filter keeps, often
few). Planned column states: EXPLAIN shows them on the scan and the filter."""

from __future__ import annotations

from dataclasses import replace

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

__all__ = ["raw_strings"]

_PER_ENTRY = frozenset({"like", "ilike", "starts_with", "eq", "ne", "lt", "le", "gt", "ge",
                        "in", "is_null", "is_not_null"})


def raw_strings(plan: P.Node) -> P.Node:
    """``plan`` with the scans' raw string columns marked."""
    uses: dict[str, int] = {}
    for node in P.nodes(plan):
        for e in P.expressions(node):
            for name in E.refs(e):
                uses[name] = uses.get(name, 0) + 1
    return _mark(plan, uses)


def _mark(node: P.Node, uses: dict[str, int]) -> P.Node:
    if isinstance(node, P.Filter) and isinstance(node.input, P.Scan):
        scan = node.input
        names = [n for n, _, t in scan.columns if t.kind == "varchar"
                 and n in E.refs(node.condition) and _per_entry_only(node.condition, n)]
        if names:
            raw = tuple(src for n, src, _ in scan.columns if n in names)
            read_above = tuple(n for n in names if uses.get(n, 0) > 1)
            marked = P.Filter(replace(scan, raw=raw), node.condition, read_above)
            if len(read_above) == len(names):
                return marked
            kept = tuple((f.name, E.Ref(f.name, f.type)) for f in scan.schema
                         if f.name not in names or f.name in read_above)
            return P.Project(marked, kept)
        return node
    return node.with_inputs(tuple(_mark(c, uses) for c in node.inputs))


def _per_entry_only(e: E.Expr, name: str) -> bool:
    """Whether every read of column ``name`` in ``e`` is a per-entry predicate of it alone
    against constants."""
    if isinstance(e, E.Ref):
        return e.name != name
    if isinstance(e, E.Call) and e.name in _PER_ENTRY and e.args and isinstance(
            e.args[0], E.Ref) and e.args[0].name == name:
        return all(isinstance(a, E.Literal) for a in e.args[1:])
    if isinstance(e, E.Call) and e.name in ("eq", "ne", "lt", "le", "gt", "ge") and \
            isinstance(e.args[1], E.Ref) and e.args[1].name == name:
        return isinstance(e.args[0], E.Literal)
    return all(_per_entry_only(c, name) for c in e.children)
