"""Predicate pushdown: each conjunct of a filter moves to the lowest node that has its
columns, and a conjunct across the two sides of a join becomes part of its condition (a
FROM list joined by WHERE equalities turns from cross joins into equi-joins).

Where a conjunct may not move: below the NULL-padded side of an outer join (it would
filter rows the join pads back in), into the condition of a LEFT/RIGHT/FULL join (it would
pad instead of drop), or below an aggregate unless it reads only grouping keys.
"""

from __future__ import annotations

from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P

__all__ = ["push_filters"]


def push_filters(plan: P.Node) -> P.Node:
    """``plan`` with its filter conjuncts pushed as far down as they may go."""
    return _push(plan, [])


def _disjuncts(e: E.Expr) -> list[E.Expr]:
    if isinstance(e, E.Call) and e.name == "or":
        return [t for a in e.args for t in _disjuncts(a)]
    return [e]


def _disjoin(terms: list[E.Expr]) -> E.Expr:
    return terms[0] if len(terms) == 1 else E.Call("or", tuple(terms), terms[0].type)


def factor_or(term: E.Expr) -> list[E.Expr]:
    """``(a AND b) OR (a AND c)`` as ``a AND (b OR c)`` (a join key inside every branch of
    an OR becomes a join condition), plus the weaker filters the OR implies for each set of
    columns every branch constrains on its own (one per table, for the scans)."""
    branches = [E.conjuncts(b) for b in _disjuncts(term)]
    if len(branches) < 2:
        return [term]
    common = [t for t in branches[0] if all(t in b for b in branches[1:])]
    rest = [[t for t in b if t not in common] for b in branches]
    if any(not r for r in rest):  # a branch is the common part alone: the OR adds nothing
        return common
    out = common + [_disjoin([E.conjoin(r) for r in rest])]  # type: ignore[misc]
    # implied filters: per group of columns read together (a table's, when the names are
    # "alias.column"), the OR of each branch's terms on that group alone
    groups = sorted({_table_of(t) for r in rest for t in r} - {None})  # type: ignore[type-var]
    if len(groups) > 1:
        for g in groups:
            parts = [[t for t in r if _table_of(t) == g] for r in rest]
            if all(parts):
                out.append(_disjoin([E.conjoin(p) for p in parts]))  # type: ignore[misc]
    return out


def _table_of(term: E.Expr) -> str | None:
    """The one table alias a term's columns share (by their ``alias.column`` names)."""
    tables = {n.split(".", 1)[0] for n in E.refs(term) if "." in n}
    return tables.pop() if len(tables) == 1 else None


def _names(node: P.Node) -> set[str]:
    return {f.name for f in node.schema}


def _wrap(node: P.Node, terms: list[E.Expr]) -> P.Node:
    condition = E.conjoin(terms)
    return node if condition is None else P.Filter(node, condition)


def _push(node: P.Node, terms: list[E.Expr]) -> P.Node:
    """``node`` rebuilt with ``terms`` (conjuncts over its columns) applied as low as they
    may go."""
    if isinstance(node, P.Filter):
        own = [t for c in E.conjuncts(node.condition) for t in factor_or(c)]
        return _push(node.input, terms + own)
    if isinstance(node, P.Join):
        return _push_join(node, terms)
    if isinstance(node, P.Project):
        return _push_project(node, terms)
    if isinstance(node, P.Aggregate):
        keys = {n for n, _ in node.keys}
        # (a scalar aggregate gives one row even over no rows: nothing goes below it)
        down = [t for t in terms if keys and E.refs(t) and E.refs(t) <= keys]
        up = [t for t in terms if not any(t is d for d in down)]
        below = _push(node.input, [_through_keys(node, t) for t in down])
        return _wrap(node.with_inputs((below,)), up)
    if isinstance(node, P.Sort | P.Exchange):
        return node.with_inputs((_push(node.input, terms),))
    # Limit, Distinct, Output, Scan, Values: no filter passes through a LIMIT; the others
    # are leaves or would change nothing
    children = tuple(_push(c, []) for c in node.inputs)
    return _wrap(node.with_inputs(children) if children else node, terms)


def _through_keys(node: P.Aggregate, term: E.Expr) -> E.Expr:
    """A conjunct over grouping keys rewritten over the aggregate's input."""
    keys = dict(node.keys)

    def put(e: E.Expr) -> E.Expr | None:
        return keys.get(e.name) if isinstance(e, E.Ref) else None

    return E.transform(term, put)


def _push_project(node: P.Project, terms: list[E.Expr]) -> P.Node:
    """Conjuncts through a projection, its computed columns substituted (a conjunct reading
    an aggregate-free expression is evaluated below instead)."""
    exprs = dict(node.exprs)

    def put(e: E.Expr) -> E.Expr | None:
        return exprs.get(e.name) if isinstance(e, E.Ref) else None

    inside = _names(node.input)
    down, up = [], []
    for t in terms:
        moved = E.transform(t, put)
        (down if E.refs(moved) <= inside else up).append(moved if E.refs(moved) <= inside
                                                          else t)
    return _wrap(node.with_inputs((_push(node.input, down),)), up)


def _push_join(node: P.Join, terms: list[E.Expr]) -> P.Node:
    left, right = _names(node.left), _names(node.right)
    kind = node.kind
    # the join's own condition: for inner and semi-like joins its one-sided conjuncts
    # filter that side; for outer joins only the padded side's may go down
    own = E.conjuncts(node.condition)
    keep: list[E.Expr] = []
    to_left: list[E.Expr] = []
    to_right: list[E.Expr] = []
    for t in own:
        r = E.refs(t)
        if node.null_aware:
            keep.append(t)  # a quantified comparison must see the NULLs it compares with
        elif r and r <= right and kind in ("inner", "left", "semi", "anti", "mark", "single"):
            to_right.append(t)  # the right side's rows that cannot match anyway
        elif r and r <= left and kind in ("inner", "right"):
            to_left.append(t)
        else:
            keep.append(t)
    above: list[E.Expr] = []
    for t in terms:
        r = E.refs(t)
        if r <= left and kind in ("inner", "left", "semi", "anti", "mark", "single"):
            to_left.append(t)
        elif r <= right and kind in ("inner", "right"):
            to_right.append(t)
        elif kind == "inner" and r <= left | right:
            keep.append(t)  # across both sides: the join condition
        else:
            above.append(t)
    new = P.Join(kind, _push(node.left, to_left), _push(node.right, to_right),
                 E.conjoin(keep), node.mark, node.null_aware)
    return _wrap(new, above)
