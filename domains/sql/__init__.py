"""Columnar SQL on backend arrays: tables with dictionary-encoded strings, per-rank Parquet
and HDF5 readers, numba hash-join and group-by kernels, a sqlglot front end and distributed
operators (shuffle or broadcast joins, partial aggregation), answering TPC-H like DuckDB
(see docs/sql.md)."""

from .catalog import Catalog
from .engine import QueryOptions, explain, query
from .errors import SQLError, UnsupportedSQL
from .join import hash_join
from .table import Column, Table, read_parquet

__all__ = [
    "Catalog",
    "Column",
    "QueryOptions",
    "SQLError",
    "Table",
    "UnsupportedSQL",
    "explain",
    "hash_join",
    "query",
    "read_parquet",
]
