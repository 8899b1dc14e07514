"""Answers compared with DuckDB's, for the SQL tests and their MPI job scripts."""

from __future__ import annotations

from typing import Any

from hpc.domains.sql import query
from hpc.domains.sql.compare import same_rows


def differences(ours: Any, ref: Any, ordered: bool = False) -> str | None:
    """:func:`same_rows` of two pandas frames with every NULL spelled alike: numbers as NaN,
    others as None."""
    import pandas as pd

    def spelled(frame: Any) -> Any:
        out = frame.copy()
        for c in out.columns:
            if pd.api.types.is_numeric_dtype(out[c]):
                out[c] = out[c].astype("float64")
            else:
                out[c] = out[c].astype(object).where(out[c].notna(), None)
        return out

    return same_rows(spelled(ours), spelled(ref), ordered)


def check_queries(queries: tuple[str, ...], catalog: Any, con: Any, comm: Any) -> None:
    """Collective. Each query answered on every rank of ``comm``; on rank 0 its rows equal
    DuckDB's on ``con`` (in order where the query says ORDER BY), else AssertionError."""
    for sql in queries:
        got = query(sql, catalog, comm)
        if comm.rank == 0:
            differs = differences(got.to_pandas(), con.execute(sql).df(), "order by" in sql)
            assert differs is None, f"{sql}: {differs}"
