"""Running one differential query on both engines and comparing the rows.

Both results go through Arrow and the same normalisation before
:func:`hpc.domains.sql.compare.same_rows` compares them: decimals become the correctly rounded
float64 of their exact value (so a DECIMAL result compared with ``rtol=0`` must be that float
bit for bit), booleans 0.0 / 1.0, dates and timestamps days since 1970 (a DATE equals the
TIMESTAMP of its midnight, which DuckDB's ``date + INTERVAL`` gives), every NULL a NaN or
None on both sides.
"""

from __future__ import annotations

from typing import Any

from hpc.domains.sql.compare import same_rows

EXACT_FEATURES = frozenset({"decimal"})  # compared with rtol = 0
RTOL = 1e-9


def ordered(sql: str) -> bool:
    """Whether the outermost SELECT has an ORDER BY (then the row order is compared)."""
    import sqlglot

    tree = sqlglot.parse_one(sql, read="duckdb")
    return bool(tree.args.get("order"))


def _column(arr: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_decimal(t):
        return pa.array([None if v is None else float(v) for v in arr.to_pylist()], pa.float64())
    if pa.types.is_boolean(t):
        return pc.cast(arr, pa.float64())
    if pa.types.is_timestamp(t):  # days since 1970 with the time of day as a fraction
        micros = pc.cast(pc.cast(arr, pa.timestamp("us", t.tz)), pa.int64())
        return pc.divide(pc.cast(micros, pa.float64()), 86_400e6)
    if pa.types.is_date(t):  # days since 1970: a DATE equals the TIMESTAMP of its midnight
        return pc.cast(pc.cast(pc.cast(arr, pa.date32()), pa.int32()), pa.float64())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pc.cast(arr, pa.string())
    if pa.types.is_dictionary(t):
        return _column(arr.cast(t.value_type))
    return arr


def frame(table: Any) -> Any:
    """A ``pyarrow.Table`` as the normalised pandas frame both engines are compared in."""
    import pyarrow as pa

    combined = table.combine_chunks()
    cols = {name: _column(combined.column(name)) for name in combined.column_names}
    arrays = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols.values()]
    normal = pa.table(arrays, names=list(cols))
    return normal.to_pandas()


def duckdb_frame(con: Any, sql: str) -> Any:
    return frame(con.sql(sql).to_arrow_table())


def difference(ours: Any, ref: Any, sql: str, feature: str) -> str | None:
    """None when our :class:`Table` equals DuckDB's frame ``ref`` for ``sql``, else what
    differs (both results shown, shortened)."""
    mine = frame(ours.to_arrow())
    rtol = 0.0 if feature in EXACT_FEATURES else RTOL
    problem = same_rows(mine, ref, ordered(sql), rtol)
    if problem is None:
        return None
    return f"{problem}\n  ours:\n{_show(mine)}\n  duckdb:\n{_show(ref)}"


def _show(df: Any, rows: int = 12) -> str:
    import pandas as pd

    with pd.option_context("display.precision", 17, "display.width", 160):
        text = df.head(rows).to_string()
    more = f"\n  ... {len(df)} rows" if len(df) > rows else ""
    return "    " + text.replace("\n", "\n    ") + more
