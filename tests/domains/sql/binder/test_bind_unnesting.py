"""Correlated subqueries of any depth, outer-aggregating ones and LATERAL: planned with no
outer reference left (every node reads only its inputs' columns), aggregates of the enclosing
query's groups computed by that query's Aggregate, the errors DuckDB raises raised alike,
and the answers equal to DuckDB's on fresh random tables with NULLs and duplicates."""

from __future__ import annotations

import numpy as np
import pytest
from hpc.domains.sql.binder.select import bind
from hpc.domains.sql.errors import SQLError
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical import plan as P
from hpc.domains.sql.logical.types import BIGINT, INTEGER, VARCHAR

SCHEMA = {"a": {"id": BIGINT, "k": INTEGER, "x": BIGINT, "s": VARCHAR},
          "b": {"k": BIGINT, "y": BIGINT, "s": VARCHAR},
          "c": {"k": BIGINT, "z": BIGINT}}

# (query, whether the outer row order is compared); a, b, c and the empty e (b's columns)
NESTED = [
    # two and three levels out: EXISTS, IN, NOT IN, scalar, ALL
    ("select a.id from a where exists (select 1 from b where b.k = a.k and exists (select 1 "
     "from c where c.k = b.k and c.z > a.x)) order by a.id", True),
    ("select a.id from a where a.k in (select b.k from b where b.y in (select c.z from c "
     "where c.k <> a.k)) order by a.id", True),
    ("select a.id from a where not exists (select 1 from b where b.k = a.k and b.y not in "
     "(select c.z from c where c.k = a.k)) order by a.id", True),
    ("select a.id, (select max(b.y) from b where b.k = a.k and b.y < (select avg(c.z) from c "
     "where c.k = b.k and c.z <> a.x)) as m from a order by a.id", True),
    ("select a.id from a where a.x >= all (select b.y from b where b.s = a.s and b.y > (select "
     "min(c.z) from c where c.k = a.k)) order by a.id", True),
    ("select a.id from a where exists (select 1 from b where b.k = a.k and exists (select 1 "
     "from c where c.k = b.k and exists (select 1 from b as b2 where b2.y = c.z and "
     "b2.s = a.s))) order by a.id", True),
    # non-equalities only; the empty table e; NULL keys matched with IS NOT DISTINCT FROM
    ("select a.id, (select count(*) from b where b.y < a.x and exists (select 1 from c where "
     "c.z > a.x and c.k > b.k)) as n from a order by a.id", True),
    ("select a.id, (select count(*) from e where e.k = a.k and e.y in (select c.z from c "
     "where c.k = a.k)) as n from a order by a.id", True),
    ("select a.id, (select count(*) from b where b.k is not distinct from a.k and exists "
     "(select 1 from c where c.k is not distinct from b.k and c.z is not distinct from a.x)) "
     "as n from a order by a.id", True),
    # LIMIT, DISTINCT, set operations and outer joins per outer row
    ("select a.id, (select b.y from b where b.k = a.k and b.y > (select min(c.z) from c "
     "where c.k = a.k) order by b.y desc limit 1 offset 1) as y from a order by a.id", True),
    ("select a.id, (select count(*) from (select b.y from b where b.k = a.k union select c.z "
     "from c where c.k = a.k and c.z < a.x) as q) as n from a order by a.id", True),
    ("select a.id, (select count(c.z) from b left join c on c.k = b.k and c.z > a.x where "
     "b.y < a.x) as n from a order by a.id", True),
    # LATERAL derived tables, per left row
    ("select a.id, l.y from a left join lateral (select b.y from b where b.k = a.k and b.y > "
     "a.x order by b.y limit 2) as l on true order by a.id, l.y", True),
    ("select a.id, l.n from a, lateral (select count(*) as n from b where b.s = a.s and "
     "exists (select 1 from c where c.k = b.k and c.z < a.x)) as l order by a.id", True),
    # aggregates of the enclosing query's groups in HAVING and SELECT subqueries
    ("select a.k, count(*) as n from a group by a.k having (select count(*) from b where "
     "b.y < max(a.x)) > 3", False),
    ("select a.k, (select count(*) from b where b.k = a.k and b.y between min(a.x) and "
     "max(a.x)) as n, sum(a.x) as s from a group by a.k", False),
    ("select (select count(*) from b where b.y < avg(a.x)) as n from a", False),
    ("select a.s, count(*) as n from a group by a.s having sum(a.x) > (select sum(b.y) from "
     "b where b.s = a.s) or not exists (select 1 from c where c.z = count(a.x))", False),
]


def _refs_resolve(plan: P.Node) -> list[str]:
    """Nodes reading a column none of their inputs has (an outer reference left behind)."""
    bad = []
    for node in P.nodes(plan):
        have = {f.name for child in node.inputs for f in child.schema}
        if isinstance(node, P.Project | P.Filter | P.Join | P.Aggregate | P.Sort | P.Window):
            loose = set().union(*(E.refs(e) for e in P.expressions(node))) - have
            if loose:
                bad.append(f"{node.describe()} reads {sorted(loose)}")
    return bad


@pytest.mark.parametrize("sql", [q for q, _ in NESTED])
def test_nested_subqueries_leave_no_outer_reference(sql):
    schema = {**SCHEMA, "e": SCHEMA["b"]}
    assert _refs_resolve(bind(sql, schema)) == []


def test_an_aggregate_of_outer_columns_groups_the_enclosing_query():
    """MAX(a.x) in the subquery aggregates a's rows (DuckDB's reading): a's Aggregate computes
    it, and the query has one row."""
    plan = bind("select (select count(*) from b where b.y < max(a.x)) as n from a", SCHEMA)
    groups = [n for n in P.nodes(plan) if isinstance(n, P.Aggregate)]
    outer = [g for g in groups if any(a.name == "max" for _, a in g.aggregates)]
    assert len(set(outer)) == 1 and not outer[0].keys  # one subplan (the domain's too)
    assert {n.alias for n in P.nodes(outer[0]) if isinstance(n, P.Scan)} == {"a"}


@pytest.mark.parametrize("sql, words", [
    ("select a.id from a where a.x > (select max(a.x) from b)", "WHERE clause cannot contain "
                                                                 "aggregates"),
    ("select a.k, (select count(*) from b where b.y > count(*)) from a group by a.k",
     "WHERE clause cannot contain aggregates"),
    ("select a.k from a group by a.k having exists (select 1 from b where b.y = a.x)",
     "a.x must appear in GROUP BY"),
    ("select a.k, (select count(*) from b where b.y = a.x) from a group by a.k",
     "a.x must appear in GROUP BY"),
])
def test_errors_name_the_column_or_clause(sql, words):
    with pytest.raises(SQLError, match=words):
        bind(sql, SCHEMA)


# -- against DuckDB, on fresh random tables ---------------------------------------------------
def _random_tables(seed: int) -> dict[str, object]:
    """a, b, c: small keys with NULLs and duplicates; e: empty, b's columns."""
    pa = pytest.importorskip("pyarrow")
    rng = np.random.default_rng(seed)

    def ints(n: int, low: int, high: int, nulls: float) -> object:
        values = rng.integers(low, high, n)
        return pa.array([None if rng.random() < nulls else int(v) for v in values], pa.int64())

    def strings(n: int) -> object:
        pool = ["p", "q", "r", "P", ""]
        return pa.array([None if rng.random() < 0.2 else pool[rng.integers(0, len(pool))]
                         for _ in range(n)], pa.string())

    n_a, n_b, n_c = (int(x) for x in rng.integers(20, 40, 3))
    b = pa.table({"k": ints(n_b, 0, 7, 0.15), "y": ints(n_b, -20, 20, 0.15),
                  "s": strings(n_b)})
    return {
        "a": pa.table({"id": pa.array(range(n_a), pa.int64()), "k": ints(n_a, 0, 6, 0.2),
                       "x": ints(n_a, -20, 20, 0.15), "s": strings(n_a)}),
        "b": b,
        "c": pa.table({"k": ints(n_c, 0, 7, 0.15), "z": ints(n_c, -20, 20, 0.15)}),
        "e": b.schema.empty_table(),
    }


@pytest.fixture(scope="module")
def engines():
    """Our catalog and DuckDB over the same fresh random tables, and their seed."""
    duckdb = pytest.importorskip("duckdb")
    from hpc.domains.sql import Catalog, Table

    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    catalog, con = Catalog(), duckdb.connect()
    for name, table in _random_tables(seed).items():
        catalog.register(name, Table.from_arrow(table))
        con.register(name, table)
    return catalog, con, seed


@pytest.mark.parametrize("sql, ordered", NESTED)
def test_nested_subqueries_answer_like_duckdb(engines, sql, ordered):
    from tests.domains.sql import querygen

    catalog, con, seed = engines
    problem = querygen.check(sql, ordered, catalog, con)
    assert problem is None, f"seed {seed}: {sql}\n{problem}"


@pytest.mark.parametrize("sql", [
    "select a.id, (select b.y from b where b.k is distinct from a.k + 100) as y from a",
    "select a.id, (select c.z from c where coalesce(c.z, 0) > coalesce(a.x, 0) - 100 and "
    "exists (select 1 from b where b.y is distinct from c.z + 1000)) as z from a",
    "select (select max(a.x) from b) as m from a",
])
def test_a_scalar_subquery_of_several_rows_fails_as_in_duckdb(engines, sql):
    """Every outer row meets every row of b or c (20 or more; MAX(a.x) is one row of a's
    aggregate): both engines refuse, with DuckDB's message."""
    from hpc.domains.sql import query

    catalog, con, seed = engines
    with pytest.raises(Exception, match="(?i)more than one row returned by a subquery"):
        con.sql(sql).fetchall()
    with pytest.raises(SQLError, match="(?i)more than one row returned by a subquery"):
        query(sql, catalog)
