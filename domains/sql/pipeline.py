"""The layered query path: bind (sqlglot to the logical plan), optimize (small passes), run
(physical operators, one Exchange operator moving rows).

============  ======================================  ======================================
layer         modules                                 works on
============  ======================================  ======================================
bind          :mod:`.binder`                          sqlglot trees -> logical plan
logical       :mod:`.logical`                         types, expressions, plan nodes
optimize      :mod:`.optimizer`                       plan -> plan
physical      :mod:`.physical`                        plan -> columns on each rank
============  ======================================  ======================================

Plans are cached per catalog by the query's text and the catalog's
:meth:`~.catalog.Catalog.version` (a table registered or a file changed: planned again),
so a query asked again skips parsing, binding and optimizing: on small tables these cost
as much as running it. Plans are immutable, so one plan serves every run. Bound plans
(before the optimizer) are cached by the query's text and the tables' columns and types: a
file rewritten with the same columns, or a new catalog of the same tables, runs only the
optimizer again (on its statistics).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from hpc.backend import Backend
from hpc.comm import resolve_comm

from .binder.select import bind
from .catalog import Catalog
from .logical import plan as P
from .logical.types import SQLType
from .optimizer.distribute import BROADCAST_ROWS, distribute
from .optimizer.eager_aggregate import eager_aggregates
from .optimizer.join_order import order_joins
from .optimizer.prune import prune_columns
from .optimizer.pushdown import push_filters
from .optimizer.raw_strings import raw_strings
from .optimizer.reduce_groups import reduce_groups
from .optimizer.semi_joins import semi_to_inner
from .optimizer.simplify import simplify
from .optimizer.zone_maps import zone_maps
from .table import Table

__all__ = ["logical_plan", "physical_plan", "run", "explain"]


PLANS_KEPT = 256  # plans cached per catalog, the least recently used dropped (0: none)


class _Plans:
    """One catalog's cached plans, valid for its version ``version``; ``schema``: its tables'
    columns and types then, the key of the bound plans."""

    def __init__(self, version: int, types: dict[str, dict[str, SQLType]]) -> None:
        self.version = version
        self.types = types
        self.schema = tuple((t, tuple(cols.items())) for t, cols in types.items())
        self.plans: OrderedDict[Hashable, P.Node] = OrderedDict()


_CACHES: weakref.WeakKeyDictionary[Catalog, _Plans] = weakref.WeakKeyDictionary()
# bound plans (before the optimizer) by the query's text and the tables' columns and types,
# whatever the catalog: a file rewritten with other rows but the same columns is optimized
# again (its statistics changed), not parsed and bound again; so is a new catalog of the
# same tables
_BOUND: OrderedDict[tuple[str, Hashable], P.Node] = OrderedDict()


def _cached(catalog: Catalog, key: Hashable, make: Callable[[], P.Node]) -> P.Node:
    """The plan cached for ``catalog`` under ``key``, made (and kept) when there is none.
    A plan that fails to build (a malformed query) raises each time: it is not kept."""
    if PLANS_KEPT <= 0:
        return make()
    return _kept(_current(catalog).plans, key, make)


def _current(catalog: Catalog) -> _Plans:
    """The catalog's cache for its current version."""
    version = catalog.version()
    cache = _CACHES.get(catalog)
    if cache is None or cache.version != version:
        cache = _CACHES[catalog] = _Plans(version, catalog.types())
    return cache


def _kept(plans: OrderedDict[Any, P.Node], key: Hashable, make: Callable[[], P.Node]
          ) -> P.Node:
    plan = plans.get(key)
    if plan is not None:
        plans.move_to_end(key)
        return plan
    plan = plans[key] = make()
    while len(plans) > PLANS_KEPT:
        plans.popitem(last=False)
    return plan


def logical_plan(sql: str, catalog: Catalog) -> P.Node:
    """The bound, optimized logical plan of ``sql`` (no exchanges); cached (see above)."""
    return _cached(catalog, sql, lambda: _optimized(sql, catalog))


def _optimized(sql: str, catalog: Catalog) -> P.Node:
    if PLANS_KEPT > 0:
        cache = _current(catalog)
        plan = _kept(_BOUND, (sql, cache.schema), lambda: bind(sql, cache.types))
    else:
        plan = bind(sql, catalog.types())
    plan = semi_to_inner(push_filters(simplify(plan)))
    plan = eager_aggregates(reduce_groups(order_joins(plan, catalog), catalog), catalog)
    return zone_maps(raw_strings(prune_columns(plan)))


def physical_plan(sql: str, catalog: Catalog, ranks: int,
                  broadcast_rows: int = BROADCAST_ROWS) -> P.Node:
    """The plan with the exchanges ``ranks`` ranks need; cached (see above)."""
    return _cached(catalog, (sql, ranks, broadcast_rows), lambda: distribute(
        logical_plan(sql, catalog), catalog.num_rows, ranks, broadcast_rows, catalog))


def run(sql: str, catalog: Catalog, comm: Any = None,
        broadcast_rows: int = BROADCAST_ROWS, backend: Backend | None = None) -> Table:
    """Collective. Answer ``sql``: the result on rank 0 (on the host), no rows elsewhere.
    ``backend``: where the columns live and the kernels run (default the CPU)."""
    from .physical.executor import Executor

    comm = resolve_comm(comm)
    physical = physical_plan(sql, catalog, comm.Get_size(), broadcast_rows)
    return Executor(catalog, comm, backend=backend, broadcast_rows=broadcast_rows).run(physical)


def run_logical(plan: P.Node, catalog: Catalog, comm: Any = None,
                broadcast_rows: int = BROADCAST_ROWS, backend: Backend | None = None) -> Table:
    """Collective. Run a logical plan (:func:`logical_plan`) on the ranks of ``comm``."""
    from .physical.executor import Executor

    comm = resolve_comm(comm)
    physical = distribute(plan, catalog.num_rows, comm.Get_size(), broadcast_rows, catalog)
    return Executor(catalog, comm, backend=backend, broadcast_rows=broadcast_rows).run(physical)


def explain(sql: str, catalog: Catalog, comm: Any = None, analyze: bool = False,
            broadcast_rows: int = BROADCAST_ROWS, backend: Backend | None = None) -> str:
    """Collective. The logical plan and the physical plan (with its exchanges); with
    ``analyze``, the physical plan as it ran: rows over all ranks, milliseconds on rank 0."""
    from .physical.executor import Executor, on_host

    comm = resolve_comm(comm)
    logical = logical_plan(sql, catalog)
    physical = physical_plan(sql, catalog, comm.Get_size(), broadcast_rows)
    text = "Logical plan\n" + P.explain(logical) + "\n\nPhysical plan\n"
    if not analyze:
        return text + P.explain(physical)
    ex = Executor(catalog, comm, analyze=True, backend=backend,
                  broadcast_rows=broadcast_rows)
    ex.run(physical)
    profile = ex.global_profile()

    def note(node: P.Node) -> str:
        rows, seconds = profile.get(id(node), (0, 0.0))
        where = " on host" if ex.backend.is_gpu and on_host(node) else ""
        return f"rows={rows} {seconds * 1e3:.1f} ms{where}"

    return text + P.explain(physical, note)
