"""The SQL engine on the GPU backend gives DuckDB's rows: TPC-H queries and random-table
joins and group-bys, with columns on the device and the numba.cuda kernels doing the joins,
group ids and aggregates.

``python check_sql_gpu_engine.py sim DATA Q...`` runs under the CUDA simulator
(NUMBA_ENABLE_CUDASIM=1; NumPy arrays stand in for CuPy's, so the kernels and the engine's
GPU dispatch run, CuPy itself does not); ``gpu DATA Q...`` runs on a real device. DATA is a
directory of TPC-H Parquet files. Under mpirun each rank holds part of every table and the
answers are compared on rank 0.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np


def main() -> int:
    mode, data, queries = sys.argv[1], sys.argv[2], [int(q) for q in sys.argv[3:]]
    if mode in ("sim", "strict"):
        assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"
    import duckdb
    import pandas as pd
    from hpc.domains.sql import Catalog, QueryOptions, Table, query
    from hpc.domains.sql.compare import same_rows
    from hpc.domains.sql.tpch import QUERIES

    from hpc.backend import Backend, get_backend
    from hpc.comm import world

    comm = world()
    rank0 = comm.Get_rank() == 0
    if mode == "strict":  # device arrays that refuse what CuPy refuses (hpc.testing.device)
        from hpc.testing.device import simulated_backend

        backend = simulated_backend()
    else:
        backend = Backend("gpu", np) if mode == "sim" else get_backend("gpu")
    options = QueryOptions(backend=backend, broadcast_rows=100 if comm.Get_size() > 2 else 10**6)
    failures = []
    con = duckdb.connect()
    catalog = Catalog.from_directory(data)
    for t in catalog.tables:
        con.execute(f"create view {t} as select * from read_parquet('{data}/{t}.parquet')")

    def check(label: str, ours: Table, sql: str, ordered: bool, seconds: float = 0.0) -> None:
        if not rank0:
            return
        if ours.columns and not isinstance(ours[next(iter(ours.columns))].values, np.ndarray):
            failures.append(f"{label}: the result is not on the host")
        ref = con.execute(sql).df()
        got = ours.to_pandas()
        ref = ref.astype({c: got[c].dtype for c in ref.columns
                          if ref[c].dtype.kind == "i" and got[c].dtype.kind == "f"})
        problem = same_rows(got, ref, ordered)
        print(f"{label}: {seconds:.2f} s {'ok' if problem is None else problem}", flush=True)
        if problem:
            failures.append(f"{label}: {problem}")

    for q in queries:
        t0 = time.perf_counter()
        ours = query(QUERIES[q], catalog, comm, options)
        check(f"Q{q}", ours, QUERIES[q], "order by" in QUERIES[q], time.perf_counter() - t0)

    # random tables (the same on every rank, each holding a slice): duplicate, missing and
    # null keys, few and many groups
    rng = np.random.default_rng(comm.bcast(int(np.random.default_rng().integers(2**62))))
    n, m = 700, 300
    a = pd.DataFrame({"k": rng.integers(0, 150, n), "g": rng.integers(0, 6, n),
                      "x": rng.standard_normal(n), "s": rng.choice(["p", "q", "r"], n)})
    b = pd.DataFrame({"k": rng.integers(50, 250, m), "y": rng.integers(-9, 9, m)})
    a.loc[rng.random(n) < 0.1, "k"] = None
    b.loc[rng.random(m) < 0.1, "y"] = None
    mem = Catalog()
    size, rank = comm.Get_size(), comm.Get_rank()
    mem.register("a", Table.from_pandas(a.iloc[rank::size]), comm)
    mem.register("b", Table.from_pandas(b.iloc[rank::size]), comm)
    con.register("a", a)
    con.register("b", b)
    for sql, ordered in [
        ("select a.g, count(*) as n, sum(b.y) as sy, min(a.x) as mn, max(b.y) as mx "
         "from a join b on a.k = b.k group by a.g order by a.g", True),
        ("select a.k, b.y from a left join b on a.k = b.k where a.g < 3", False),
        ("select a.s, count(distinct a.k) as d, avg(a.x) as ax from a group by a.s", False),
        ("select a.k, a.g, sum(a.x) as sx from a group by a.k, a.g", False),
        ("select count(*) as n from a where a.k in (select k from b where y > 0)", False),
    ]:
        check(sql[:60] + "...", query(sql, mem, comm, options), sql, ordered)
    failures = comm.bcast(failures)
    if failures:
        print("\n".join(failures))
        return 1
    if rank0:
        print(f"ok: the GPU SQL engine ({mode}) equals DuckDB on {size} rank(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
