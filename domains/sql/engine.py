"""The SQL engine's entry points: :func:`query` and :func:`explain` over a catalog.

A query passes through the layers of :mod:`.pipeline`: sqlglot parses it, the binder
(:mod:`.binder`) resolves names and types into a logical plan of this package's own nodes
(:mod:`.logical`), the optimizer's passes (:mod:`.optimizer`) rewrite it and place its
exchanges, and the physical operators (:mod:`.physical`) run it on the backend's arrays, on
the host or the device, every rank on its own rows. The result is a :class:`Table` on rank 0
and an empty table with the same columns elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpc.backend import Backend, get_backend
from hpc.comm import resolve_comm

from . import pipeline
from .catalog import Catalog
from .table import Column, Table

__all__ = ["QueryOptions", "query", "explain"]


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
        the operators run there (EXPLAIN ANALYZE marks the few that run on the host); the
        result is on the host.
    """

    broadcast_rows: int = 1_000_000
    backend: str | Backend | None = None


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
    options = options or QueryOptions()
    return pipeline.run(sql, catalog, resolve_comm(comm), options.broadcast_rows,
                        get_backend(options.backend))


_EXPLAIN = re.compile(r"EXPLAIN(\s+ANALYZE)?\s+", re.IGNORECASE)


def explain(sql: str, catalog: Catalog, comm: Any = None,
            options: QueryOptions | None = None) -> str:
    """Collective. The plan as it ran (like EXPLAIN ANALYZE): the logical plan, then the
    physical plan with the rows each operator produced over all ranks and its milliseconds
    on rank 0."""
    options = options or QueryOptions()
    return pipeline.explain(sql, catalog, resolve_comm(comm), analyze=True,
                            broadcast_rows=options.broadcast_rows,
                            backend=get_backend(options.backend))
