"""Columnar SQL on backend arrays: tables with dictionary-encoded strings, per-rank Parquet
and HDF5 readers, numba hash-join and group-by kernels, a sqlglot front end and distributed
operators (shuffle or broadcast joins, partial aggregation), answering TPC-H like DuckDB
(see docs/sql.md)."""

from __future__ import annotations

from hpc.lazy import lazy_exports

# name -> submodule defining it; imported when the name is first read
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Catalog": ".catalog",
        "Column": ".table",
        "QueryOptions": ".engine",
        "SQLError": ".errors",
        "Table": ".table",
        "UnsupportedSQL": ".errors",
        "explain": ".engine",
        "hash_join": ".join",
        "query": ".engine",
        "read_parquet": ".table",
    },
)
