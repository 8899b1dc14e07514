"""Columnar SQL on backend arrays (in progress): tables with dictionary-encoded strings, a
per-rank Parquet reader and hash-join kernels. The SQL front end and distributed operators
stand on these (see docs/sql.md)."""

from .join import hash_join
from .table import Column, Table, read_parquet

__all__ = ["Column", "Table", "hash_join", "read_parquet"]
