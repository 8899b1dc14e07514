"""Binding: sqlglot syntax trees to the logical plan (names resolved, types inferred, subqueries
planned as joins)."""
