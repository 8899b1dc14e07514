"""Run under mpirun: the generated cases of the JSON manifest argv[1] (drawn by the parent,
:func:`tests.fuzz.draw`): each case a directory of Parquet tables (several row groups, so every
rank holds some rows) and queries; every query's rows on rank 0 equal DuckDB's over the same
files, and no other rank holds rows. Prints the failing cases by index, or ``ok``."""

from __future__ import annotations

import json
import sys

from hpc.domains.sql import Catalog

from hpc.comm import world
from tests.domains.sql.querygen import check, duckdb_over


def main() -> int:
    comm = world()
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    failures = []
    for i, case in enumerate(cases):
        catalog = Catalog.from_directory(case["dir"])
        con = duckdb_over(case["dir"], catalog.tables) if comm.Get_rank() == 0 else None
        for sql, ordered in case["queries"]:
            try:
                problem = check(sql, ordered, catalog, con, comm)
            except Exception as exc:  # noqa: BLE001 - raised alike on every rank: reported
                problem = f"{type(exc).__name__}: {exc}"
            if problem:
                failures.append(f"case {i} ({case['dir']}) {sql!r}: {problem}")
    failures = [f for part in comm.allgather(failures) for f in part]
    if failures:
        print("\n".join(failures), flush=True)
        return 1
    if comm.Get_rank() == 0:
        print(f"ok: {sum(len(c['queries']) for c in cases)} queries of {len(cases)} cases on "
              f"{comm.Get_size()} ranks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
