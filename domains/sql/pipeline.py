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
"""

from __future__ import annotations

from typing import Any

from hpc.backend import Backend
from hpc.comm import resolve_comm

from .binder.select import bind
from .catalog import Catalog
from .logical import plan as P
from .optimizer.distribute import BROADCAST_ROWS, distribute
from .optimizer.eager_aggregate import eager_aggregates
from .optimizer.join_order import order_joins
from .optimizer.prune import prune_columns
from .optimizer.pushdown import push_filters
from .optimizer.raw_strings import raw_strings
from .optimizer.reduce_groups import reduce_groups
from .optimizer.semi_joins import semi_to_inner
from .optimizer.simplify import simplify
from .table import Table

__all__ = ["logical_plan", "physical_plan", "run", "explain"]


def logical_plan(sql: str, catalog: Catalog) -> P.Node:
    """The bound, optimized logical plan of ``sql`` (no exchanges)."""
    plan = bind(sql, catalog.types())
    plan = semi_to_inner(push_filters(simplify(plan)))
    plan = eager_aggregates(reduce_groups(order_joins(plan, catalog), catalog), catalog)
    return raw_strings(prune_columns(plan))


def physical_plan(sql: str, catalog: Catalog, ranks: int,
                  broadcast_rows: int = BROADCAST_ROWS) -> P.Node:
    """The plan with the exchanges ``ranks`` ranks need."""
    return distribute(logical_plan(sql, catalog), catalog.num_rows, ranks, broadcast_rows)


def run(sql: str, catalog: Catalog, comm: Any = None,
        broadcast_rows: int = BROADCAST_ROWS, backend: Backend | None = None) -> Table:
    """Collective. Answer ``sql``: the result on rank 0 (on the host), no rows elsewhere.
    ``backend``: where the columns live and the kernels run (default the CPU)."""
    return run_logical(logical_plan(sql, catalog), catalog, comm, broadcast_rows, backend)


def run_logical(plan: P.Node, catalog: Catalog, comm: Any = None,
                broadcast_rows: int = BROADCAST_ROWS, backend: Backend | None = None) -> Table:
    """Collective. Run a logical plan (:func:`logical_plan`) on the ranks of ``comm``."""
    from .physical.executor import Executor

    comm = resolve_comm(comm)
    physical = distribute(plan, catalog.num_rows, comm.Get_size(), broadcast_rows)
    return Executor(catalog, comm, backend=backend).run(physical)


def explain(sql: str, catalog: Catalog, comm: Any = None, analyze: bool = False,
            broadcast_rows: int = BROADCAST_ROWS, backend: Backend | None = None) -> str:
    """Collective. The logical plan and the physical plan (with its exchanges); with
    ``analyze``, the physical plan as it ran: rows over all ranks, milliseconds on rank 0."""
    from .physical.executor import Executor, on_host

    comm = resolve_comm(comm)
    logical = logical_plan(sql, catalog)
    physical = distribute(logical, catalog.num_rows, comm.Get_size(), broadcast_rows)
    text = "Logical plan\n" + P.explain(logical) + "\n\nPhysical plan\n"
    if not analyze:
        return text + P.explain(physical)
    ex = Executor(catalog, comm, analyze=True, backend=backend)
    ex.run(physical)
    profile = ex.global_profile()

    def note(node: P.Node) -> str:
        rows, seconds = profile.get(id(node), (0, 0.0))
        where = " on host" if ex.backend.is_gpu and on_host(node) else ""
        return f"rows={rows} {seconds * 1e3:.1f} ms{where}"

    return text + P.explain(physical, note)
