"""Everyday analyst SQL over the TPC-H tables against DuckDB on the same Parquet files, same run.

A fixed set of queries of the kind an analyst writes, none of them TPC-H's: window functions
(ROW_NUMBER with QUALIFY, RANK filtered in a derived table, a running SUM, LAG, a moving
AVG, a share of a group total), set operations (UNION, INTERSECT, EXCEPT, UNION ALL), LEFT
and FULL joins, string and date functions, ROLLUP, CUBE and GROUPING SETS,
COALESCE/NULLIF/CASE, a correlated scalar subquery and COUNT(DISTINCT), and free-text columns
(nearly every row a distinct string: MIN/MAX, COUNT(DISTINCT), ORDER BY ... LIMIT, GROUP BY
and an equi-join on them). The tables are ``hpc bench tpch``'s (generated and cached per
scale factor).

Ours: :func:`hpc.domains.sql.query` on every rank, on the CPU. Peer on rank 0: DuckDB with
as many threads as our ranks times numba threads (capped at the cores), over views of the
Parquet files. Every repetition reads the Parquet files again, for both; one untimed pass of
all queries warms the process first. Each answer is checked against DuckDB's
(``equal_to_duckdb``). ``ratio`` is the geometric mean over the queries of DuckDB's seconds
over ours (above 1: we are faster), ``worst`` the query with the lowest; the target ratio is
0.67. A query the chosen ``--path`` refuses (``UnsupportedSQL``) is reported with the
engine's message and left out of the means.
"""

from __future__ import annotations

import argparse
from typing import Any

from hpc.comm import world
from hpc.errors import UsageError

from .timing import affinity_record, cpus_of, thread_ids, time_interleaved
from .tpch import _add_data_arguments, _data, _duckdb, _duckdb_threads, _geomean

__all__ = ["QUERIES", "add_arguments", "run"]

# name -> query (DuckDB dialect). The outermost ORDER BY, where there is one, starts a line
# and orders the rows totally, so answers compare row by row (see _ordered).
QUERIES: dict[str, str] = {
    # ROW_NUMBER per partition, filtered by QUALIFY: the three richest customers per segment
    "top_customers": """
SELECT c_mktsegment, c_name, c_acctbal,
       ROW_NUMBER() OVER (PARTITION BY c_mktsegment ORDER BY c_acctbal DESC, c_custkey) AS rn
FROM customer
QUALIFY rn <= 3
ORDER BY c_mktsegment, rn
""",
    # RANK per partition, filtered in a derived table: the top suppliers of each nation
    "top_suppliers": """
SELECT n_name, s_name, s_acctbal, rnk
FROM (SELECT n.n_name, s.s_name, s.s_acctbal,
             RANK() OVER (PARTITION BY n.n_name ORDER BY s.s_acctbal DESC) AS rnk
      FROM supplier s JOIN nation n ON s.s_nationkey = n.n_nationkey) ranked
WHERE rnk <= 5
ORDER BY n_name, rnk, s_name
""",
    # running SUM per key: each nation's revenue month by month and to date
    "running_total": """
WITH monthly AS (
    SELECT n_name, DATE_TRUNC('month', o_orderdate) AS month, SUM(o_totalprice) AS revenue
    FROM orders
    JOIN customer ON o_custkey = c_custkey
    JOIN nation ON c_nationkey = n_nationkey
    GROUP BY n_name, DATE_TRUNC('month', o_orderdate))
SELECT n_name, month, revenue,
       SUM(revenue) OVER (PARTITION BY n_name ORDER BY month
                          ROWS UNBOUNDED PRECEDING) AS revenue_to_date
FROM monthly
ORDER BY n_name, month
""",
    # LAG: days between a customer's consecutive orders, averaged per market segment
    "order_gaps": """
WITH gaps AS (
    SELECT o_custkey,
           DATE_DIFF('day', LAG(o_orderdate) OVER (PARTITION BY o_custkey
                                                   ORDER BY o_orderdate, o_orderkey),
                     o_orderdate) AS gap_days
    FROM orders)
SELECT c_mktsegment, AVG(gap_days) AS avg_gap_days, MAX(gap_days) AS max_gap_days,
       COUNT(gap_days) AS repeat_orders
FROM gaps JOIN customer ON o_custkey = c_custkey
GROUP BY c_mktsegment
ORDER BY c_mktsegment
""",
    # moving AVG: daily revenue per ship mode in 1995 and its four-day moving average
    "moving_average": """
WITH daily AS (
    SELECT l_shipmode, l_shipdate, SUM(l_extendedprice * (1 - l_discount)) AS revenue
    FROM lineitem
    WHERE l_shipdate >= DATE '1995-01-01' AND l_shipdate < DATE '1996-01-01'
    GROUP BY l_shipmode, l_shipdate)
SELECT l_shipmode, l_shipdate, revenue,
       AVG(revenue) OVER (PARTITION BY l_shipmode ORDER BY l_shipdate
                          ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS moving_avg
FROM daily
ORDER BY l_shipmode, l_shipdate
""",
    # share of a group total: each nation's part of its region's order value
    "region_share": """
SELECT r_name, n_name, SUM(o_totalprice) AS revenue,
       SUM(o_totalprice) / SUM(SUM(o_totalprice)) OVER (PARTITION BY r_name) AS share
FROM orders
JOIN customer ON o_custkey = c_custkey
JOIN nation ON c_nationkey = n_nationkey
JOIN region ON n_regionkey = r_regionkey
GROUP BY r_name, n_name
ORDER BY r_name, n_name
""",
    # UNION: customers who placed an urgent order or a large one
    "union_customers": """
SELECT COUNT(*) AS customers
FROM (SELECT o_custkey FROM orders WHERE o_orderpriority = '1-URGENT'
      UNION
      SELECT o_custkey FROM orders WHERE o_totalprice > 300000)
""",
    # INTERSECT: customers who ordered in 1996 and again in 1997
    "retained_customers": """
SELECT c_mktsegment, COUNT(*) AS retained
FROM (SELECT o_custkey FROM orders
      WHERE o_orderdate >= DATE '1996-01-01' AND o_orderdate < DATE '1997-01-01'
      INTERSECT
      SELECT o_custkey FROM orders
      WHERE o_orderdate >= DATE '1997-01-01' AND o_orderdate < DATE '1998-01-01') kept
JOIN customer ON o_custkey = c_custkey
GROUP BY c_mktsegment
ORDER BY c_mktsegment
""",
    # EXCEPT: customers who ordered in 1996 but not in 1997
    "churned_customers": """
SELECT c_mktsegment, COUNT(*) AS churned, AVG(c_acctbal) AS avg_balance
FROM (SELECT o_custkey FROM orders
      WHERE o_orderdate >= DATE '1996-01-01' AND o_orderdate < DATE '1997-01-01'
      EXCEPT
      SELECT o_custkey FROM orders
      WHERE o_orderdate >= DATE '1997-01-01' AND o_orderdate < DATE '1998-01-01') lost
JOIN customer ON o_custkey = c_custkey
GROUP BY c_mktsegment
ORDER BY c_mktsegment
""",
    # UNION ALL: line items relabelled by shipping channel, then totalled per channel
    "shipping_channels": """
SELECT channel, COUNT(*) AS lines, SUM(revenue) AS revenue
FROM (SELECT 'air' AS channel, l_extendedprice * (1 - l_discount) AS revenue
      FROM lineitem WHERE l_shipmode IN ('AIR', 'REG AIR')
      UNION ALL
      SELECT 'ground', l_extendedprice * (1 - l_discount)
      FROM lineitem WHERE l_shipmode IN ('TRUCK', 'RAIL')
      UNION ALL
      SELECT 'sea', l_extendedprice * (1 - l_discount)
      FROM lineitem WHERE l_shipmode = 'SHIP')
GROUP BY channel
ORDER BY channel
""",
    # LEFT JOIN with COALESCE and NULLIF: every customer's 1998 spend, zero when none
    "customer_spend": """
SELECT c_custkey, c_name, COALESCE(SUM(o_totalprice), 0) AS spend_1998,
       COUNT(o_orderkey) AS orders_1998,
       SUM(o_totalprice) / NULLIF(COUNT(o_orderkey), 0) AS avg_order
FROM customer
LEFT JOIN orders ON o_custkey = c_custkey AND o_orderdate >= DATE '1998-01-01'
GROUP BY c_custkey, c_name
ORDER BY spend_1998 DESC, c_custkey
LIMIT 100
""",
    # FULL JOIN with CASE: parts sold in January 1997 against January 1998
    "part_changes": """
WITH a AS (SELECT l_partkey, SUM(l_quantity) AS qty FROM lineitem
           WHERE l_shipdate >= DATE '1997-01-01' AND l_shipdate < DATE '1997-02-01'
           GROUP BY l_partkey),
     b AS (SELECT l_partkey, SUM(l_quantity) AS qty FROM lineitem
           WHERE l_shipdate >= DATE '1998-01-01' AND l_shipdate < DATE '1998-02-01'
           GROUP BY l_partkey)
SELECT CASE WHEN a.l_partkey IS NULL THEN 'new'
            WHEN b.l_partkey IS NULL THEN 'dropped'
            ELSE 'kept' END AS status,
       COUNT(*) AS parts,
       SUM(COALESCE(b.qty, 0) - COALESCE(a.qty, 0)) AS qty_change
FROM a FULL JOIN b ON a.l_partkey = b.l_partkey
GROUP BY 1
ORDER BY 1
""",
    # string functions: part labels built from manufacturer and name
    "part_labels": """
SELECT CONCAT(LOWER(p_mfgr), ' ', UPPER(SUBSTRING(p_name, 1, 5))) AS label,
       LENGTH(p_container) AS container_len,
       COUNT(*) AS parts, AVG(p_retailprice) AS avg_price
FROM part
WHERE p_name LIKE '%green%' OR p_type LIKE 'PROMO%'
GROUP BY 1, 2
ORDER BY parts DESC, label, container_len
LIMIT 50
""",
    # date functions and COUNT(DISTINCT): shipments per month, transit time, lateness
    "monthly_shipping": """
SELECT DATE_TRUNC('month', l_shipdate) AS month, EXTRACT(year FROM l_shipdate) AS year,
       COUNT(*) AS lines, COUNT(DISTINCT l_orderkey) AS orders,
       AVG(DATE_DIFF('day', l_shipdate, l_receiptdate)) AS avg_transit_days,
       SUM(CASE WHEN l_receiptdate > l_commitdate THEN 1 ELSE 0 END) AS late_lines
FROM lineitem
GROUP BY 1, 2
ORDER BY month
""",
    # ROLLUP: order value per nation, per region, and overall
    "revenue_rollup": """
SELECT r_name, n_name, COUNT(*) AS orders, SUM(o_totalprice) AS revenue
FROM orders
JOIN customer ON o_custkey = c_custkey
JOIN nation ON c_nationkey = n_nationkey
JOIN region ON n_regionkey = r_regionkey
GROUP BY ROLLUP (r_name, n_name)
ORDER BY r_name NULLS LAST, n_name NULLS LAST
""",
    # CUBE with GROUPING: quantities by return flag and line status, every combination
    "lineitem_cube": """
SELECT l_returnflag, l_linestatus, GROUPING(l_returnflag, l_linestatus) AS level,
       SUM(l_quantity) AS qty, AVG(l_discount) AS avg_discount
FROM lineitem
GROUP BY CUBE (l_returnflag, l_linestatus)
ORDER BY level, l_returnflag, l_linestatus
""",
    # GROUPING SETS: order counts by priority and status, by priority, and in all
    "priority_sets": """
SELECT o_orderpriority, o_orderstatus, COUNT(*) AS orders, AVG(o_totalprice) AS avg_value
FROM orders
GROUP BY GROUPING SETS ((o_orderpriority, o_orderstatus), (o_orderpriority), ())
ORDER BY o_orderpriority NULLS LAST, o_orderstatus NULLS LAST
""",
    # free text (1.5M orders' comments, nearly all distinct): MIN, MAX and COUNT(DISTINCT)
    "comment_extremes": """
SELECT o_orderstatus, MIN(o_comment) AS first_comment, MAX(o_comment) AS last_comment,
       COUNT(DISTINCT o_comment) AS comments
FROM orders
GROUP BY o_orderstatus
ORDER BY o_orderstatus
""",
    # the first rows by a free-text column (ORDER BY ... LIMIT)
    "first_comments": """
SELECT o_comment, o_orderkey, o_totalprice
FROM orders
ORDER BY o_comment, o_orderkey
LIMIT 10
""",
    # grouped by a free-text column, its most repeated strings
    "repeated_comments": """
SELECT o_comment, COUNT(*) AS n
FROM orders
GROUP BY o_comment
ORDER BY n DESC, o_comment
LIMIT 10
""",
    # an equi-join on free-text keys of two tables
    "shared_comments": """
SELECT COUNT(*) AS pairs, COUNT(DISTINCT c.c_custkey) AS customers
FROM orders o JOIN customer c ON o.o_comment = c.c_comment
""",
    # correlated scalar subquery: orders above twice their customer's average order
    "large_orders": """
SELECT o_orderpriority, COUNT(*) AS large_orders
FROM orders o
WHERE o.o_totalprice > 2 * (SELECT AVG(o2.o_totalprice) FROM orders o2
                            WHERE o2.o_custkey = o.o_custkey)
GROUP BY o_orderpriority
ORDER BY o_orderpriority
""",
}


def _ordered(sql: str) -> bool:
    """Whether the query's outermost ORDER BY fixes its rows' order: such a clause starts a
    line in :data:`QUERIES`, while an OVER (...) clause's ORDER BY never does."""
    return any(line.startswith("ORDER BY") for line in sql.splitlines())


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``hpc bench sql``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The ``sql`` subcommand's parser.
    """
    _add_data_arguments(p)
    p.add_argument("--queries", default=None,
                   help=f"comma-separated query names (default all: {', '.join(QUERIES)})")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions (median)")


def _wanted(names: str | None) -> list[str]:
    """The queries named on the command line, in the order given (default: all)."""
    if not names:
        return list(QUERIES)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in QUERIES]
    if unknown:
        raise UsageError(f"--queries: unknown {', '.join(map(repr, unknown))}; "
                         f"expected some of {', '.join(QUERIES)}")
    return wanted


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Collective. Time each query, ours and DuckDB's, and check our answers against DuckDB's.

    Parameters
    ----------
    args : argparse.Namespace
        The options of :func:`add_arguments`.

    Returns
    -------
    dict
        The JSON record: per query ``ours_s``, ``duckdb_s``, ``speed_vs_duckdb`` and
        ``equal_to_duckdb`` (with ``difference`` where not equal, ``unsupported`` where the
        engine refused the query), the geometric mean ``ratio``, ``worst`` and ``limits``.
    """
    from hpc.domains.sql import Catalog, QueryOptions, UnsupportedSQL, query
    from hpc.domains.sql.compare import same_rows

    from hpc.backend import get_backend
    from hpc.memory import keep_freed_memory

    keep_freed_memory(arrow=True)  # as the hpc command does for SQL: Arrow's pages reused
    comm = world()
    rank0 = comm.Get_rank() == 0
    wanted = _wanted(args.queries)
    options = QueryOptions(backend=get_backend("cpu"))
    path = _data(args, comm)
    catalog = Catalog.from_directory(path)
    threads = _duckdb_threads(comm)
    before = thread_ids()
    con = _duckdb(path, catalog.tables, threads) if rank0 else None
    peer_threads = thread_ids() - before if rank0 else set()  # DuckDB's, started on connect
    # one pass of every query before any timing, so the process's memory and compiled
    # kernels are as warm for the first query as for the last; it also finds the queries
    # the chosen path refuses (every rank raises UnsupportedSQL alike)
    refused: dict[str, str] = {}
    for name in wanted:
        try:
            query(QUERIES[name], catalog, comm, options)
        except UnsupportedSQL as exc:
            refused[name] = str(exc)
            continue
        if rank0:
            con.execute(QUERIES[name]).fetchall()
    per_query: dict[str, Any] = {}
    for name in wanted:
        if name in refused:
            per_query[name] = {"ours_s": None, "duckdb_s": None, "speed_vs_duckdb": None,
                               "equal_to_duckdb": None, "unsupported": refused[name]}
            continue
        sql = QUERIES[name]
        ours = query(sql, catalog, comm, options)
        difference = None
        if rank0:
            difference = same_rows(ours.to_pandas(), con.execute(sql).df(), _ordered(sql))
        fns = [lambda sql=sql: query(sql, catalog, comm, options),
               (lambda sql=sql: con.execute(sql).fetchall()) if rank0 else (lambda: None)]
        ours_s, duckdb_s = time_interleaved(comm, fns, reps=args.reps, warmup=1)
        entry = {"ours_s": ours_s, "duckdb_s": duckdb_s, "speed_vs_duckdb": duckdb_s / ours_s,
                 "equal_to_duckdb": comm.bcast(difference is None, root=0)}
        if difference is not None:
            entry["difference"] = difference
        per_query[name] = entry
    timed = {k: e for k, e in per_query.items() if e["ours_s"] is not None}
    worst = min(timed, key=lambda k: timed[k]["speed_vs_duckdb"], default=None)
    mean = lambda key: _geomean(e[key] for e in timed.values()) if timed else None  # noqa: E731
    return {
        "bench": "sql",
        "backend": "cpu",
        "ranks": comm.Get_size(),
        "size": {"sf": args.sf, "queries": wanted, "duckdb_threads": threads,
                 "layout": args.layout},
        "ours": {"geomean_s": mean("ours_s")},
        "peers": {"duckdb": {"geomean_s": mean("duckdb_s"), "threads": threads}},
        "ratio": mean("speed_vs_duckdb"),
        "limits": {"target_ratio": 0.67},
        "worst": None if worst is None else {"query": worst,
                                             "ratio": timed[worst]["speed_vs_duckdb"]},
        "refused": list(refused),
        "affinity": affinity_record(comm, cpus_of(peer_threads) if rank0 else [],
                                    peer_threads=peer_threads),
        "queries": per_query,
    }
