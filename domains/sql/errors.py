"""Errors of the SQL front end: each names the construct and, where sqlglot knows it, the
position (line and column) in the query text."""

from __future__ import annotations

from typing import Any

from hpc.errors import HPCError

__all__ = ["SQLError", "UnsupportedSQL", "describe", "position"]


class SQLError(HPCError, ValueError):
    """A query that cannot be answered: malformed, unknown table or column, type mismatch."""


class UnsupportedSQL(SQLError):
    """Valid SQL using a construct this engine does not implement (never a wrong answer)."""


def position(node: Any) -> str:
    """``" at line L, column C"`` from the node (or the first descendant) that carries a
    position; empty when sqlglot recorded none."""
    places = [  # sqlglot's col is a token's last character: report its first
        (n.meta["line"], n.meta["col"] - (n.meta.get("end", 0) - n.meta.get("start", 0)))
        for n in (node.walk() if hasattr(node, "walk") else ())
        if "line" in (getattr(n, "meta", None) or {}) and "col" in n.meta
    ]
    if not places:
        return ""
    line, col = min(places)
    return f" at line {line}, column {col}"


def describe(node: Any) -> str:
    """The construct's SQL text (shortened) and its position, for error messages."""
    text = node.sql(dialect="duckdb") if hasattr(node, "sql") else str(node)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(node).__name__.upper()} ({text}){position(node)}"
