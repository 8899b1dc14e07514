"""The logical layer of the SQL engine: types, expressions, plan nodes (no arrays, no sqlglot)."""
