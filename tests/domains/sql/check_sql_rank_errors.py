"""Run under mpirun: a value only one rank holds makes a layered query fail (a CAST that does
not convert, an overflow): every rank must raise the error instead of waiting at the next
exchange. Each rank registers its own rows; rank ``argv[1]`` gets the bad row."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from hpc.domains.sql import Catalog, QueryOptions, SQLError, Table, query

from hpc.comm import world
from tests.jobs import report

# the failing expression runs where the rows were read (a scan filter), before any exchange
QUERIES = {
    "cast": "SELECT t.g AS g, COUNT(*) AS n FROM t WHERE CAST(t.s AS INTEGER) > 3 GROUP BY t.g",
    "overflow": "SELECT t.g AS g, COUNT(*) AS n FROM t WHERE t.v * t.v > 0 GROUP BY t.g",
    "scalar subquery": "SELECT t.g AS g, (SELECT u.k FROM t AS u WHERE u.g = t.g) AS k FROM t",
}


def main() -> int:
    comm = world()
    bad_rank = int(sys.argv[1])
    n = 50
    rank = comm.Get_rank()
    frame = pd.DataFrame({
        "g": np.arange(n) % 3, "k": np.arange(n) + 1000 * rank,
        "s": [str(i) for i in range(n)], "v": np.arange(n, dtype=np.int64)})
    if rank == bad_rank:
        frame.loc[7, "s"] = "seven"  # does not convert to an integer
        frame.loc[8, "v"] = 2**40  # its square does not fit 64 bits
    catalog = Catalog()
    catalog.register("t", Table.from_pandas(frame), comm)
    failures = []
    for label, sql in QUERIES.items():
        try:
            query(sql, catalog, comm, QueryOptions(broadcast_rows=0))
            failures.append(f"{label}: no error raised")
        except SQLError as exc:
            named = f"on rank {bad_rank}" in str(exc)
            if label != "scalar subquery" and rank != bad_rank and not named:
                failures.append(f"{label}: the error does not name the failing rank: {exc}")
    return report(comm, failures, f"ok: every rank raised, the bad row on rank {bad_rank}")


if __name__ == "__main__":
    sys.exit(main())
