"""Differential tests of the SQL engine against DuckDB: hand-written queries per feature."""
