"""Run under mpirun: every ``"ok"`` differential query over the Parquet tables in the
directory argv[1] gives DuckDB's rows on rank 0 and leaves no rows on the other ranks;
argv[2] is the broadcast limit in rows (0 forces shuffle joins everywhere), argv[3] the
backend (``cpu``; ``device``: every third query on the GPU backend, under the CUDA simulator
with strict stand-ins for CuPy arrays, :mod:`hpc.testing.device`). Prints the
mismatches by query id, or ``ok: N queries on R ranks``. A query marked
``wrong_on_ranks`` must still differ (a known bug), and fails the job once it agrees."""

from __future__ import annotations

import sys

from hpc.domains.sql import Catalog, QueryOptions, query

from hpc.comm import world
from tests.domains.sql.differential import data, harness
from tests.domains.sql.differential.queries import QUERIES
from tests.jobs import report


def main() -> int:
    comm = world()
    directory, limit, where = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    catalog = Catalog.from_directory(directory)
    con = data.duckdb_over(directory) if comm.Get_rank() == 0 else None
    options = QueryOptions(broadcast_rows=limit, backend="cpu")
    device = where == "device"
    if device:
        from hpc.testing.device import simulated_backend

        options = QueryOptions(broadcast_rows=limit, backend=simulated_backend())
    ok = [q for q in QUERIES if q.status == "ok"]
    if device:  # every third query: each feature's, at a third of the simulator's time
        ok = ok[::3]
    failures = []
    for q in ok:
        try:
            result = query(q.sql, catalog, comm, options)
        except Exception as exc:  # noqa: BLE001 - raised alike on every rank: reported
            failures.append(f"{q.id}: {type(exc).__name__}: {exc}")
            continue
        if con is not None:
            problem = harness.difference(result, harness.duckdb_frame(con, q.sql), q.sql,
                                         q.feature)
        else:
            problem = f"holds {result.num_rows} rows" if result.num_rows else None
        if q.wrong_on_ranks and con is not None and problem is None:
            failures.append(f"{q.id} now equals DuckDB on {comm.Get_size()} ranks: drop its "
                            "wrong_on_ranks")
        elif problem and not (q.wrong_on_ranks and con is not None):
            failures.append(f"{q.id}: {q.sql}\n{problem}")
    return report(comm, failures, f"ok: {len(ok)} queries on {comm.Get_size()} ranks, "
                                  f"broadcast <= {limit} rows", shown=len(ok))


if __name__ == "__main__":
    sys.exit(main())
