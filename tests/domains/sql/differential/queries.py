"""The differential queries: hand-written, per feature of the engine's road to everyday SQL,
each with its status today.

- ``"ok"``: the engine answers it and must equal DuckDB;
- ``"pending"``: the engine raises ``UnsupportedSQL`` naming the construct (when it starts
  answering, and equals DuckDB, the test says to mark it ``"ok"``);
- ``"wrong"``: a bug: the engine gives another answer than DuckDB, or raises another error;
  the test is a strict xfail, so the fix turns it into a failure that asks for ``"ok"``.

Tables: see :mod:`.data` (``t``, ``u``, the empty ``e``, the all-NULL ``n``, TPC-H at SF
0.001). Every row order that is compared is fixed by an ORDER BY over a unique key or all
output columns; every computed column has an alias.
"""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = ("ok", "pending", "wrong")


@dataclass(frozen=True)
class Query:
    """One differential query: ``note`` says what is wrong (``"wrong"``) or missing
    (``"pending"``: a word the ``UnsupportedSQL`` message must hold). ``wrong_on_ranks``: an
    ``"ok"`` query that differs from DuckDB on 2 and 3 ranks only (a known bug, what differs);
    the MPI job fails when it starts to agree there."""

    feature: str
    id: str
    sql: str
    status: str = "ok"
    note: str = ""
    wrong_on_ranks: str = ""


def _feature(name: str, *entries: tuple) -> list[Query]:
    return [Query(name, f"{name}-{k:02d}", *e) for k, e in enumerate(entries, 1)]


ORDERING = _feature(
    "ordering",
    # DuckDB's default: ASC NULLS LAST, and DESC NULLS LAST too
    ("select t.id as id, t.g as g from t order by g, id",),
    ("select t.id as id, t.g as g from t order by g desc, id",),
    ("select t.id as id, t.g as g from t order by g nulls first, id",),
    ("select t.id as id, t.g as g from t order by g desc nulls first, id desc",),
    ("select t.id as id, t.s as s from t order by s, id",),
    ("select t.id as id, t.d as d from t order by d desc nulls last, id",),
    ("select t.id as id, t.f as f from t order by f nulls first, id desc",),
    ("select t.id as id, t.m as m from t order by m desc, id",),
    ("select t.id as id, t.g as g, t.s as s from t order by g nulls first, s desc nulls last, "
     "id",),
    ("select t.id as id, t.i as i from t order by i desc nulls last, id limit 5",),
    ("select t.id as id, t.s as s from t order by id limit 5 offset 10",),
    ("select t.id as id from t order by id limit 5 offset 100",),
    ("select t.id as id from t order by id limit 0",),
    ("select distinct t.g as g from t order by g nulls first",),
    ("select distinct t.s as s from t order by s",),
    ("select distinct t.g as g, t.b as b from t order by g, b",),
    ("select count(*) as n from (select distinct t.s, t.d from t) as x",),
    ("select t.id as id, t.f * -1 as nf from t order by nf, id",),
    ("select t.id as id, t.g as g from t order by 2 desc nulls first, 1",),
    ("select t.id as id, t.i + 1 as j from t order by j nulls first, id",),
    ("select o_orderkey, o_totalprice from orders order by o_totalprice desc, o_orderkey "
     "limit 10",),
    ("select distinct c_nationkey from customer order by c_nationkey desc limit 5 offset 2",),
    ("select t.id as id, t.b as b from t order by b nulls first, id",),
    ("select t.id as id from t order by t.d nulls first, t.id",),
    ("select distinct t.b as b from t",),
    ("select t.id as id, t.s as s from t order by lower(s), id",),
    ("select t.id as id, t.i as i from t order by i, id",),
    ("select t.id as id from t order by id limit 1000",),
    ("select t.g as g from t group by t.g order by count(*) desc, g",),
    ("select distinct t.s as s from t order by s desc nulls first limit 4",),
)

JOINS = _feature(
    "joins",
    ("select t.id as id, u.w as w from t join u on t.g = u.k order by id, w",),
    ("select t.id as id, u.w as w, u.s as s from t left join u on t.g = u.k order by id, w, s",),
    ("select t.id as id, u.k as k, u.w as w from t right join u on t.g = u.k "
     "order by k, w, id",),
    ("select t.id as id, u.k as k, u.w as w from t full outer join u on t.g = u.k "
     "order by id, k, w",),
    ("select count(*) as n, sum(t.id * u.w) as s from t cross join u",),
    ("select count(*) as n from t, u where t.i < u.w",),
    ("select t.id as id from t where exists (select 1 from u where u.k = t.g) order by id",),
    ("select t.id as id from t where not exists (select 1 from u where u.k = t.g) "
     "order by id",),
    ("select t.id as id from t where t.g in (select u.k from u) order by id",),
    ("select t.id as id from t where t.g not in (select u.k from u where u.k is not null) "
     "order by id",),
    ("select t.id as id from t semi join u on t.g = u.k order by id",),
    ("select t.id as id from t anti join u on t.g = u.k order by id",),
    ("select x.k as k, x.w as w1, y.w as w2 from u as x join u as y using (k) "
     "order by k, w1, w2",),
    ("select t.id as id, u.w as w from t join u on t.g = u.k and t.i > u.w order by id, w",),
    ("select t.id as id, u.w as w from t join u on t.i between u.w and u.w + 100 "
     "order by id, w",),
    ("select t.id as id, u.w as w from t left join u on t.g = u.k and u.w > 0 "
     "order by id, w",),
    ("select n_name, count(c_custkey) as c from nation left join customer "
     "on c_nationkey = n_nationkey and c_acctbal > 5000 group by n_name order by n_name",),
    ("select c_custkey, count(o_orderkey) as c from customer join nation "
     "on c_nationkey = n_nationkey left join orders on o_custkey = c_custkey "
     "where n_regionkey = 1 group by c_custkey order by c_custkey",),
    ("select t.id as id, u.w as w, n_name from t left join u on t.g = u.k "
     "join nation on n_nationkey = t.g order by id, w, n_name",),
    ("select t.id as id, u.w as w from t join u on t.s = u.s order by id, w",),
    ("select t.id as id, u.w as w from t join u on t.d = u.d order by id, w",),
    ("select t.id as id, e.w as w from t left join e on t.g = e.k order by id",),
    ("select count(*) as n from t join e on t.g = e.k",),
    ("select count(*) as n, sum(a.id + b.id) as s from t as a join t as b "
     "on a.g = b.g and a.id < b.id",),
    ("select n_name, count(*) as c from lineitem, orders, customer, nation "
     "where l_orderkey = o_orderkey and o_custkey = c_custkey and c_nationkey = n_nationkey "
     "group by n_name order by n_name",),
    ("select t.id as id, u.s as us from t full join u on t.s = u.s order by id, us",),
    ("select t.id as id, u.w as w from t join u on t.g + 1 = u.k order by id, w",),
    ("select count(*) as n from nation cross join region",),
    ("select t.id as id, u.w as w from u right join t on t.g = u.k order by id, w",),
    ("select t.id as id, u.w as w, e.s as s from t left join u on t.g = u.k "
     "left join e on e.k = u.k order by id, w",),
    ("select r_name, n_name from region left join nation on n_regionkey = r_regionkey "
     "and n_name like 'A%' order by r_name, n_name",),
    ("select a.id as a, b.id as b from t as a join t as b on a.i = b.i order by a, b",),
    ("select t.id as id, u.w as w from t left join u on t.s = u.s where u.s is null "
     "order by id, w",),
    ("select t.id as id, u.w as w from t left join u on t.g = u.k where u.w > 0 "
     "order by id, w",),
    ("select x.g as g, count(*) as n from (select t.g as g from t where t.i > 0) as x "
     "left join u on x.g = u.k group by x.g order by g",),
    # an aggregate of one side grouped by the other side's join key: computed below the
    # join (eager aggregation), NULL and duplicate keys on both sides, keys without partner
    ("select t.g as g, count(u.w) as c, sum(u.w) as s, min(u.s) as mn, max(u.d) as mx "
     "from t left join u on t.g = u.k group by t.g order by g",),
    ("select t.g as g, count(*) as n, sum(u.m) as s from t join u on t.g = u.k group by t.g "
     "order by g",),
    ("select t.g as g, t.b as b, count(u.w) as c, max(u.w) as mx from t left join u "
     "on t.g = u.k group by t.g, t.b order by g, b",),
    ("select u.k as k, sum(t.i) as s, count(t.f) as c, min(t.d) as mn from t join u "
     "on t.g = u.k group by u.k order by k",),
    ("select t.g as g, count(u.w) as c, sum(u.w) as s from t left join u "
     "on t.g is not distinct from u.k group by t.g order by g",),
    ("select t.g as g, count(e.w) as c, sum(e.w) as s from t left join e on t.g = e.k "
     "group by t.g order by g",),
    ("select t.g + 1 as g1, t.g as g, count(u.s) as c from t left join u on t.g = u.k "
     "group by t.g + 1, t.g order by g",),
    ("select c_count, count(*) as custdist from (select c_custkey, count(o_orderkey) as c_count "
     "from customer left join orders on c_custkey = o_custkey and o_comment not like "
     "'%special%requests%' group by c_custkey) as c_orders group by c_count "
     "order by custdist desc, c_count desc",),
    ("select t.b as b, count(u.w) as c from t left join u on t.g = u.k group by t.b "
     "order by b",),
    ("select t.g as g, count(distinct u.w) as c, count(u.w) as n from t left join u "
     "on t.g = u.k group by t.g order by g",),
    ("select o_orderkey, o_orderpriority, count(l_orderkey) as n, sum(l_quantity) as q "
     "from orders join lineitem on l_orderkey = o_orderkey group by o_orderkey, "
     "o_orderpriority order by o_orderkey limit 20",),
)

EXPRESSIONS = _feature(
    "expressions",
    # an integer against a DECIMAL constant, also one beyond 64 bits (NULLs stay NULL)
    ("select t.id as id, t.i > 100000000000000000000.5 as a, "
     "t.i >= -100000000000000000000.5 as b, t.i = 2.5 as c, t.i <> 2.5 as d, "
     "t.i <= 9000000000000000000.0 as e from t order by id",),
    ("select count(*) as n from t where t.i between -10.5 and 10.5 "
     "or t.i > 8999999999999999999.9",),
    ("select count(*) as n from t where t.i < -9223372036854775808.5 or t.i = 0.0",),
    ("select t.id as id, case when t.i > 0 then 'pos' when t.i < 0 then 'neg' else 'zero' end "
     "as sign from t order by id",),
    ("select t.id as id, case when t.g > 2 then t.d else date '2000-01-01' end as dd from t "
     "order by id",),
    ("select t.id as id, case when t.b then t.i * 2 when not t.b then -1 end as v from t "
     "where t.id <> 3 and t.id <> 21 order by id",),
    ("select t.id as id, case t.g when 1 then 'one' when 2 then 'two' end as name from t "
     "order by id",),
    ("select t.id as id, coalesce(t.i, t.g, -1) as c from t order by id",),
    ("select t.id as id, coalesce(t.s, 'none') as c from t order by id",),
    ("select t.id as id, nullif(t.g, 2) as c from t order by id",),
    ("select t.id as id, t.g is distinct from 2 as x, t.g is not distinct from null as y "
     "from t order by id",),
    ("select t.id as id from t where t.g is not distinct from null order by id",),
    ("select t.id as id, cast(t.f as bigint) as y from t order by id",),
    ("select t.id as id, cast(t.m as varchar) as x from t order by id",),
    ("select t.id as id, cast(t.g as varchar) as x, cast(t.id as varchar) || '!' as y from t "
     "order by id",),
    ("select t.id as id, cast(t.d as varchar) as x from t order by id",),
    ("select cast('2000-02-29' as date) as d, cast('12' as bigint) + 1 as n, "
     "cast('2.5' as double) as f from region where r_regionkey = 0",),
    ("select t.id as id, cast(t.d as timestamp) as ts from t order by id",),
    ("select t.id as id, cast(t.f as decimal(18, 3)) as x from t "
     "where t.f < 1e6 and t.f > -1e6 order by id",),
    ("select t.id as id, cast(t.g as double) / 4 as x from t order by id",),
    ("select t.id as id, t.i // 7 as q, t.i % 7 as r from t where t.id <> 3 and t.id <> 21 "
     "order by id",),
    ("select t.id as id, t.g % 4 as r from t order by id",),
    ("select t.id as id, lower(t.s) as lo, upper(t.s) as up from t order by id",),
    ("select t.id as id, length(t.s) as n from t order by id",),
    ("select t.id as id, concat(t.s, '-', t.g) as c, t.s || '!' as p from t order by id",),
    ("select t.id as id, trim(t.s) as a, ltrim(t.s) as b, rtrim(t.s) as c from t "
     "order by id",),
    ("select t.id as id, substring(t.s, 2, 3) as a, substring(t.s from 1 for 2) as b from t "
     "order by id",),
    ("select t.id as id, replace(t.s, 'a', 'xy') as r from t order by id",),
    ("select t.id as id, strpos(t.s, 'a') as p from t order by id",),
    ("select t.id as id from t where t.s like 'a%' or t.s like '%\\_c' escape '\\' "
     "order by id",),
    ("select t.id as id from t where t.s ilike 'APP%' order by id",),
    ("select t.id as id from t where t.s not like '%a%' order by id",),
    ("select t.id as id, starts_with(t.s, 'ap') as x from t order by id",),
    ("select t.id as id, date_trunc('month', t.d) as m, date_trunc('year', t.d) as y from t "
     "order by id",),
    ("select t.id as id, extract(year from t.d) as y, extract(month from t.d) as m, "
     "extract(day from t.d) as dd from t order by id",),
    ("select t.id as id, date_diff('day', t.d, date '2000-01-01') as dd from t order by id",),
    ("select t.id as id, t.d + interval 1 month as a, t.d - interval 1 year as b from t "
     "order by id",),
    ("select t.id as id, t.d + interval '10' day as a from t order by id",),
    ("select t.id as id, abs(t.i) as a, round(t.f, 2) as r, floor(t.f) as fl, ceil(t.f) as c "
     "from t where t.id <> 3 and t.id <> 21 order by id",),
    ("select t.id as id, power(t.f, 2) as p, sqrt(abs(t.f)) as q from t order by id",),
    ("select t.id as id, ln(t.f) as l, exp(t.f / 1e12) as e from t where t.f > 0 order by id",),
    ("select t.id as id, t.i / nullif(t.g, 0) as q from t order by id",),
    ("select t.id as id, t.i > 0 and t.b as x, t.i > 0 or t.b as y from t order by id",),
    ("select t.id as id from t where case when t.g = 1 then t.i > 0 else t.f < 0 end "
     "order by id",),
    ("select t.id as id from t where t.d between date '1969-01-01' and date '2000-02-29' "
     "order by id",),
    ("select t.id as id from t where t.s in ('a', 'Apple', '') order by id",),
    ("select t.id as id from t where t.s < 'a' order by id",),
    ("select o_orderpriority, count(*) as n from orders "
     "where o_orderdate >= date '1995-01-01' + interval '3' month "
     "group by o_orderpriority order by o_orderpriority",),
    ("select t.id as id, t.f + t.g * 2 - t.i as x from t where t.id <> 3 and t.id <> 21 "
     "order by id",),
    ("select t.id as id, round(t.m) as r from t order by id",),
    ("select t.id as id, cast(t.i as double) as x, cast(t.g as bigint) as y, "
     "cast(t.d as date) as z from t where t.id <> 3 and t.id <> 21 order by id",),
    ("select t.id as id, t.d - 1 as a, t.d + 366 as b from t order by id",),
    ("select t.id as id, t.i * 3 - t.g / 2 as x from t where t.id <> 3 and t.id <> 21 "
     "order by id",),
    ("select t.id as id from t where t.s like 'b_c' order by id",),
    ("select t.id as id from t where t.d < date '1970-01-01' order by id",),
    ("select t.id as id, -t.i as x from t order by id",),
    ("select t.id as id from t where t.s = 'a ' or t.s = ' ' order by id",),
    ("select t.id as id from t where t.s between 'A' and 'a' order by id",),
    ("select t.id as id from t where t.d in (date '2000-02-29', date '1900-02-28') "
     "order by id",),
    ("select t.id as id, t.d - date '1970-01-01' as x from t order by id",),
    ("select t.id as id from t where t.d > '2000-01-01' order by id",),
    ("select t.id as id, t.i / t.g as q from t where t.id <> 3 and t.id <> 21 order by id",),
)

AGGREGATES = _feature(
    "aggregates",
    ("select count(*) as n, count(t.i) as ni, count(distinct t.g) as dg, sum(t.i) as si, "
     "min(t.s) as mins, max(t.d) as maxd from t",),
    ("select t.g as g, count(*) as n, sum(t.i) as si, min(t.f) as mi, max(t.f) as ma from t "
     "group by t.g",),
    ("select t.g as g, avg(t.f) as a, sum(t.f) as s from t group by t.g",),
    ("select t.g as g, sum(t.id) + count(*) * 2 as x, max(t.f) - min(t.f) as span, "
     "sum(t.f) / count(t.f) as mean from t group by t.g",),
    ("select t.g as g, stddev_samp(t.f) as ss, stddev_pop(t.f) as sp, var_samp(t.f) as vs, "
     "var_pop(t.f) as vp from t group by t.g",),
    ("select t.g as g, median(t.i) as med from t where t.id <> 3 and t.id <> 21 group by t.g",),
    ("select t.g as g, quantile_cont(t.f, 0.25) as q from t group by t.g",),
    ("select t.g as g, string_agg(t.s, ',' order by t.s) as s from t group by t.g",),
    ("select t.g as g, bool_and(t.b) as a, bool_or(t.b) as o from t group by t.g",),
    ("select count(*) as n, sum(e.w) as s, min(e.s) as mn, avg(e.w) as a, max(e.d) as md "
     "from e",),
    ("select count(n.k) as c, count(*) as r, sum(n.k) as s, min(n.s) as mn, max(n.d) as md, "
     "avg(n.v) as a from n",),
    ("select e.k as k, count(*) as n from e group by e.k",),
    ("select t.g as g, count(*) as n from t group by t.g having count(*) > 7",),
    ("select t.g as g from t group by t.g having sum(t.id) > 100 and min(t.f) < 0",),
    ("select extract(year from t.d) as y, count(*) as n from t group by extract(year from t.d)",),
    ("select t.s as s, count(*) as n from t group by t.s",),
    ("select t.g as g, count(distinct t.s) as ds, count(t.s) as cs from t group by t.g",),
    ("select sum(t.i) as s, max(t.s) as m, count(t.i) as c from t where t.id < 0",),
    ("select t.g as g, min(t.s) as mns, max(t.s) as mxs, min(t.d) as mnd, max(t.d) as mxd "
     "from t group by t.g",),
    ("select t.g as g, sum(case when t.b then 1 else 0 end) as nb from t group by t.g",),
    ("select avg(t.i) as a, sum(t.i) as s from t",),
    ("select t.g as g, avg(t.i) as a from t group by t.g",),
    ("select l_returnflag, l_linestatus, sum(l_quantity) as q, avg(l_extendedprice) as p, "
     "count(*) as n from lineitem group by l_returnflag, l_linestatus "
     "order by l_returnflag, l_linestatus",),
    ("select t.g as g, t.b as b, count(*) as n from t group by t.g, t.b",),
    ("select count(*) filter (where t.b) as nb, sum(t.i) filter (where t.g = 1) as s from t",),
    ("select sum(distinct t.g) as s, avg(distinct t.g) as a from t",),
    ("select t.g as key, count(*) as n from t group by 1",),
    ("select max(t.i) - min(t.i) as span, count(*) - count(t.i) as nulls from t "
     "where t.id <> 3 and t.id <> 21",),
    ("select u.k as k, stddev_samp(u.w) as sd, median(u.w) as med from u group by u.k",),
    ("select o_orderstatus, count(distinct o_custkey) as c, max(o_orderdate) as d "
     "from orders group by o_orderstatus order by o_orderstatus",),
    ("select min(t.i) as mn, max(t.i) as mx, count(distinct t.i) as d from t",),
    ("select t.d as d, count(*) as n, sum(t.f) as s from t group by t.d",),
    ("select t.g as g, count(*) as n from t group by t.g having t.g is null or count(*) < 8",),
    ("select t.g as g, sum(t.i) as s from t group by t.g having s > 0 order by g",),
    ("select t.g as g, count(*) as n, (select count(*) from u) as m from t group by t.g "
     "order by g",),
)

DECIMAL = _feature(
    "decimal",
    ("select sum(t.m) as s from t",),
    ("select t.g as g, sum(t.m) as s from t group by t.g",),
    ("select sum(u.m) as s from u",),
    ("select t.id as id, t.m * 2 as x from t order by id",),
    ("select t.id as id, t.m + 0.01 as x, t.m - 1.10 as y from t order by id",),
    ("select t.id as id, t.m * t.m as x from t where t.m < 1000000 and t.m > -1000000 "
     "order by id",),
    ("select sum(t.m * 3) as s from t",),
    ("select sum(l_extendedprice * (1 - l_discount)) as revenue from lineitem",),
    ("select o_orderstatus, sum(o_totalprice) as s from orders group by o_orderstatus "
     "order by o_orderstatus",),
    ("select count(*) as n from t where t.m = 1.10",),
    ("select t.g as g, min(t.m) as mn, max(t.m) as mx from t group by t.g",),
    ("select t.id as id, t.m - u.m as x from t join u on t.g = u.k order by id, x",),
    ("select sum(ps_supplycost * ps_availqty) as v from partsupp",),
    ("select l_returnflag, sum(l_quantity) as q, sum(l_extendedprice) as p from lineitem "
     "group by l_returnflag order by l_returnflag",),
    ("select t.id as id from t where t.m > 99.99 or t.m < -0.01 order by id",),
    ("select t.id as id, round(t.m, 1) as r from t order by id",),
    ("select sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as charge from lineitem",),
    ("select t.id as id, t.m * u.m as x from t join u on t.g = u.k "
     "where t.m < 1000000 and t.m > -1000000 and u.m < 1000000 and u.m > -1000000 "
     "order by id, x",),
)

NULLS = _feature(
    "nulls",
    ("select count(*) as n from t where t.i > 0 or t.b",),
    ("select t.id as id from t where not (t.i > 0) order by id",),
    ("select t.id as id from t where (t.i > 0) is null order by id",),
    ("select t.id as id from t where t.b is not true order by id",),
    ("select t.id as id from t where not t.b order by id",),
    ("select count(*) as n from t where t.g = null",),
    ("select count(*) as n from t join u on t.s = u.s",),
    ("select t.id as id, u.k as k from t left join u on t.g = u.k where u.k is null "
     "order by id",),
    ("select count(*) as n, count(t.id) as a, count(u.k) as b from t full join u "
     "on t.g = u.k",),
    ("select t.g as g, count(*) as n from t group by t.g order by g nulls first",),
    ("select count(distinct t.g) as d, count(t.g) as c from t",),
    ("select t.id as id, t.i + null as a, coalesce(null, t.g) as b from t order by id",),
    ("select t.id as id from t where t.g in (1, null) order by id",),
    ("select count(*) as n from t where t.g not in (1, null)",),
    ("select t.id as id, (t.i > 0) and t.b as x, (t.i > 0) or t.b as y, not t.b as z from t "
     "order by id",),
    ("select t.id as id, t.s is null as a, t.d is not null as b, t.m is null as c from t "
     "order by id",),
    ("select t.id as id from t where t.s <> '' order by id",),
    ("select t.id as id, case when null then 1 else 2 end as c from t order by id",),
    ("select t.id as id, case when t.b then 1 when not t.b then 0 end as c from t order by id",),
    ("select t.id as id, u.w as w from t join u on t.d = u.d where t.d is null order by id",),
    ("select n.k as k, count(*) as c from n group by n.k",),
    ("select count(*) as n from t where t.f <> t.f or t.f = t.f",),
    ("select count(*) as n from t where t.f = 0",),
    ("select t.id as id from t where t.s not in ('a', 'A') order by id",),
    ("select count(*) as n from t where t.b",),
)

SUBQUERIES = _feature(
    "subqueries",
    ("select t.id as id from t where t.i > (select avg(u.w) from u) order by id",),
    ("select t.id as id, (select max(u.w) from u) as mw from t order by id",),
    ("select t.id as id from t where t.i > (select avg(u.w) from u where u.k = t.g) "
     "order by id",),
    ("select t.id as id, (select count(*) from u where u.k = t.g) as c from t order by id",),
    ("select t.id as id, (select max(u.w) from u where u.k = t.g) as mw from t order by id",),
    ("select t.id as id from t where exists (select * from u where u.k = t.g and u.w > 20) "
     "order by id",),
    ("select t.id as id from t where not exists (select * from u where u.k = t.g "
     "and u.w <> t.i) order by id",),
    ("select t.id as id from t where t.g in (select u.k from u) order by id",),
    ("select count(*) as n from t where t.g not in (select u.k from u)",),
    ("select t.id as id from t where t.s not in (select u.s from u where u.s is not null) "
     "order by id",),
    ("select x.g as g, x.n as n from (select t.g as g, count(*) as n from t group by t.g) "
     "as x where x.n > 5 order by g",),
    ("with big as (select t.id as id, t.i as i from t where t.i > 100) "
     "select count(*) as n, sum(big.i) as s from big",),
    ("with a as (select t.g as g, sum(t.i) as s from t group by t.g), "
     "b as (select u.k as k, count(*) as c from u group by u.k) "
     "select a.g as g, a.s as s, b.c as c from a join b on a.g = b.k order by g",),
    ("select t.id as id from t where t.g in (select u.k from u where u.w > "
     "(select avg(u2.w) from u as u2)) order by id",),
    ("select count(*) as n from t where t.i > (select max(e.k) from e)",),
    ("select count(*) as n from t where exists (select * from u where u.w > 45)",),
    ("select t.id as id from t where t.s in (select u.s from u) order by id",),
    ("select t.id as id, x.c as c from t join (select u.k as k, count(*) as c from u "
     "group by u.k) as x on t.g = x.k order by id",),
    ("select c_custkey from customer where c_acctbal > (select avg(c_acctbal) from customer) "
     "and c_custkey in (select o_custkey from orders where o_totalprice > 200000) "
     "order by c_custkey",),
    ("select t.g as g, count(*) as n from t group by t.g "
     "having count(*) > (select count(*) from u) / 6 order by g",),
    ("select count(*) as n from (select distinct t.g, t.b from t) as x",),
    ("select t.id as id from t where t.i > all (select u.w from u where u.w is not null) "
     "order by id",),
    ("select t.id as id from t where t.i < any (select u.w from u) order by id",),
    ("select t.id as id, (select min(u.w) from u where u.k = t.g and u.d > t.d) as mw from t "
     "order by id",),
    ("select t.id as id from t where exists (select * from u where u.k = t.g) "
     "or t.i < 0 order by id",),
    ("select count(*) as n from t where t.i in (select u.w from u)",),
    ("select t.id as id from t where t.i = (select max(u.w) from u) "
     "or t.g = (select min(u.k) from u) order by id",),
    ("select t.id as id from t where (t.g, t.s) in (select u.k, u.s from u) order by id",),
    # correlated subqueries of any shape: computed once per distinct outer value (the domain)
    ("select t.id as id, (select count(*) from u where u.k = t.g group by u.s order by "
     "count(*) desc, u.s limit 1) as c from t order by id",),
    ("select t.id as id, (select u.w from u where u.k = t.g order by u.w desc nulls last "
     "limit 1) as top, (select u.w from u where u.k = t.g order by u.w limit 1 offset 1) "
     "as second from t order by id",),
    ("select t.id as id from t where t.i in (select u.w from u where u.k = t.g order by u.w "
     "desc nulls last limit 2) order by id",),
    ("select t.id as id from t where exists (select u.s from u where u.k = t.g group by u.s "
     "having count(*) > 1) order by id",),
    ("select t.id as id, (select count(*) + 1 from u where u.k = t.g having max(u.w) > 0) "
     "as c, (select count(1) + sum(2) from u where u.k = t.g having count(*) < 3) as d "
     "from t order by id",),
    ("select t.id as id, (select count(distinct u.s) from u where u.w > t.i) as c, (select "
     "max(u.w) + t.i from u where u.k = t.g) as m from t where t.i between -1000 and 1000 "
     "order by id",),
    ("select t.id as id from t where t.g in (select distinct u.k from u where u.w > t.i) "
     "order by id",),
    ("select t.id as id, (select sum(x.w) from (select u.w from u where u.k = t.g) x) as s, "
     "(select count(*) from (select distinct u.s from u where u.k = t.g) d) as c from t "
     "order by id",),
    ("select t.id as id, (select max(rn) from (select u.w, row_number() over (order by u.w) "
     "as rn from u where u.k = t.g) q) as m from t order by id",),
    # the COUNT bug: an outer value without inner rows (or NULL) still gets a row of no rows
    ("select t.id as id, (select coalesce(sum(u.w), -1) from u where u.k = t.g) as c, "
     "(select count(*) + 1 from u where u.k > t.g) as n from t order by id",),
    ("select t.id as id from t where not exists (select 1 from u join t t2 on u.k = t2.g "
     "where u.k = t.g and t2.id < t.id limit 1) order by id",),
    ("select c_custkey as c, (select o_totalprice from orders where o_custkey = c_custkey "
     "order by o_totalprice desc, o_orderkey limit 1) as top from customer order by c",),
    ("select o_orderkey as k from orders where o_totalprice > (select avg(o2.o_totalprice) "
     "from orders o2 where o2.o_custkey = orders.o_custkey group by o2.o_orderstatus "
     "order by 1 limit 1) order by k",),
)

SETOPS = _feature(
    "setops",
    ("select t.g as g from t union all select u.k from u order by g nulls first",),
    ("select t.g as g from t union select u.k from u order by g nulls first",),
    ("select t.g as g, t.s as s from t union select u.k, u.s from u order by g nulls first, "
     "s nulls first",),
    ("select t.g as g from t intersect select u.k from u order by g nulls first",),
    ("select t.g as g from t intersect all select u.k from u order by g nulls first",),
    ("select t.g as g from t except select u.k from u order by g nulls first",),
    ("select t.g as g from t except all select u.k from u order by g nulls first",),
    ("select t.i as v from t union all select u.w from u order by v desc nulls last limit 5",),
    ("select t.s as s from t union select u.s from u order by s nulls first limit 4 offset 2",),
    ("select count(*) as n from (select t.g from t union all select e.k from e) as x",),
    ("select x.g as g, count(*) as n from (select t.g as g from t union all "
     "select u.k from u) as x group by x.g order by g nulls first",),
    ("select t.m as m from t union select 1.5 order by m nulls first",),
    ("select n.k as k from n union all select e.k from e order by k",),
    ("with a as (select t.g as g from t where t.i > 0) select g from a union "
     "select u.k from u where u.w < 0 order by g nulls first",),
    ("select t.d as d from t except select u.d from u order by d nulls first",),
    # BY NAME: columns matched by name, case-insensitively; one side's missing ones NULL
    ("select t.g as g, t.s as s from t union by name select u.s as s, u.k as k from u "
     "order by g nulls first, s nulls first, k nulls first",),
    ("select t.g as G from t union all by name select u.w as g, u.d as d from u "
     "order by g nulls first, d nulls first",),
    ("select t.m as m, t.b as b from t union all by name select u.m as m from u "
     "order by m nulls first, b nulls first",),
)

GROUPING = _feature(
    "grouping",
    ("select t.g as g, t.b as b, count(*) as n from t group by rollup(t.g, t.b) "
     "order by g nulls first, b nulls first, n",),
    ("select t.g as g, t.b as b, count(*) as n from t group by cube(t.g, t.b) "
     "order by g nulls first, b nulls first, n",),
    ("select t.g as g, t.b as b, count(*) as n from t group by grouping sets ((t.g), (t.b), "
     "()) order by g nulls first, b nulls first, n",),
    ("select t.g as g, sum(t.m) as s, avg(t.f) as a from t group by rollup(t.g) "
     "order by g nulls first",),
    ("select t.g as g, t.b as b, min(t.s) as mn from t group by t.g, rollup(t.b) "
     "order by g nulls first, b nulls first, mn nulls first",),
    ("select t.g as g, count(*) as n from t group by rollup(t.g) having count(*) > 5 "
     "order by g nulls first",),
    ("select t.g as g, count(*) as n from t group by grouping sets ((t.g)) order by g "
     "nulls first",),
    ("select count(*) as n, sum(t.i) as s from t group by grouping sets (()) ",),
    ("select u.k as k, u.s as s, count(u.w) as c from u group by cube(u.k, u.s) "
     "order by k nulls first, s nulls first, c",),
    ("select e.k as k, count(*) as n from e group by rollup(e.k) order by k nulls first",),
    ("select t.g as g, t.b as b, count(*) as n from t group by rollup(t.g, t.b) "
     "order by n desc, g nulls first, b nulls first limit 4",),
    ("select extract(year from t.d) as y, count(*) as n from t "
     "group by rollup(extract(year from t.d)) order by y nulls first, n",),
    ("select t.g as g, grouping(t.g) as gr, count(*) as n from t group by rollup(t.g) "
     "order by gr, g nulls first",),
    ("select t.g as g, t.b as b, grouping(t.g, t.b) as gr, count(*) as n from t "
     "group by cube(t.g, t.b) order by gr, g nulls first, b nulls first",),
    ("select t.g as g, count(*) as n from t group by rollup(t.g) having grouping(t.g) = 0 "
     "order by g nulls first",),
    ("select t.g as g, grouping(t.g) as gr from t group by t.g order by g nulls first",),
)

WINDOWS = _feature(
    "windows",
    # ranking, ties broken by a unique key where the order must be total
    ("select t.id as id, t.g as g, row_number() over (partition by t.g order by t.f desc "
     "nulls first, t.id) as rn from t order by id",),
    ("select t.id as id, rank() over (order by t.s) as r, dense_rank() over (order by t.s "
     "desc) as dr from t order by id",),
    ("select t.id as id, percent_rank() over (partition by t.b order by t.d) as pr, "
     "cume_dist() over (partition by t.b order by t.d desc) as cd from t order by id",),
    ("select t.id as id, ntile(4) over (partition by t.g order by t.id) as nt, ntile(100) "
     "over (order by t.id) as big from t order by id",),
    # offsets and values, IGNORE NULLS, defaults
    ("select t.id as id, lag(t.i, 3) over (partition by t.g order by t.id) as l3, "
     "lead(t.s, 1, 'none') over (order by t.id) as ld from t order by id",),
    ("select t.id as id, lag(t.f ignore nulls) over (order by t.id) as lf, "
     "lead(t.f, 2 ignore nulls) over (order by t.id) as nf from t order by id",),
    ("select t.id as id, first_value(t.s ignore nulls) over (order by t.id rows between 2 "
     "preceding and 2 following) as fs, nth_value(t.i, 2 ignore nulls) over (partition by "
     "t.g order by t.id) as n2, last_value(t.d ignore nulls) over (order by t.id) as ld "
     "from t order by id",),
    ("select t.id as id, nth_value(t.s, 2) over (partition by t.g order by t.id) as n2, "
     "last_value(t.m) over (partition by t.g order by t.id rows between current row and "
     "unbounded following) as lv from t order by id",),
    # aggregates over ROWS and RANGE frames (RANGE offsets over DECIMAL and DOUBLE keys)
    ("select t.id as id, sum(t.i) over (partition by t.g order by t.id) as s from t "
     "order by id",),
    ("select t.id as id, sum(t.m) over (order by t.m range between 100 preceding and 50.5 "
     "following) as s from t order by id",),
    ("select t.id as id, count(t.f) over (order by t.f desc range between 2 preceding and "
     "current row) as c from t order by id",),
    ("select t.id as id, sum(t.i) over (order by t.g nulls first range between 1 preceding "
     "and current row) as s from t order by id",),
    ("select t.id as id, max(t.i) over (order by t.id rows between 5 preceding and 2 "
     "preceding) as mx, min(t.i) over (order by t.id rows between 1 following and 4 "
     "following) as mn from t order by id",),
    ("select t.id as id, stddev_samp(t.i) over (partition by t.b order by t.id rows between "
     "3 preceding and 3 following) as sd, var_pop(t.f) over (order by t.id rows between "
     "unbounded preceding and current row) as vp from t where t.i between -1000 and 1000 "
     "order by id",),
    ("select t.id as id, bool_and(t.b) over (order by t.id rows 2 preceding) as ba, "
     "bool_or(t.b) over (order by t.id rows between 2 preceding and current row) as bo "
     "from t order by id",),
    ("select t.id as id, avg(t.m) over (order by t.id rows between 2 preceding and 2 "
     "following) as am, sum(t.f) over (order by t.id rows between 1 preceding and 1 "
     "following) as sf, min(t.s) over (partition by t.b order by t.id rows between 1 "
     "preceding and 1 following) as mn from t order by id",),
    # whole partitions: any aggregate, DISTINCT and FILTER too
    ("select t.g as g, count(distinct t.s) over (partition by t.g) as cds, median(t.i) over "
     "(partition by t.g) as med, string_agg(t.s, ',') over (partition by t.g) as sa from t "
     "order by t.id",),
    ("select t.id as id, sum(t.i) filter (where t.b) over (partition by t.g) as sf, count(*) "
     "filter (where t.f > 0) over (order by t.id) as cf from t order by id",),
    ("select u.k as k, u.w as w, avg(u.w) over (partition by u.k) as a, u.w - avg(u.w) over "
     "(partition by u.k) as dev from u order by k nulls first, w nulls first",),
    # windows over grouped rows, in ORDER BY, QUALIFY, named windows, derived tables
    ("select t.g as g, count(*) as n, rank() over (order by count(*) desc) as r, "
     "sum(count(*)) over () as total from t group by t.g order by g nulls first",),
    ("select t.id as id from t order by row_number() over (order by t.s nulls first, t.id "
     "desc) limit 10",),
    ("select t.id as id, t.g as g from t qualify rank() over (partition by t.g order by t.i "
     "desc nulls last, t.id) = 1 order by id",),
    ("select t.id as id, min(t.s) over w as mn, max(t.d) over w as mx, count(*) over "
     "(w2 rows between unbounded preceding and unbounded following) as c from t window w as "
     "(partition by t.b order by t.id rows between 1 preceding and 1 following), w2 as "
     "(partition by t.g) order by id",),
    ("select x.g as g, x.rn as rn from (select t.g as g, t.id as id, row_number() over "
     "(partition by t.g order by t.id desc) as rn from t) as x where x.rn <= 2 "
     "order by g nulls first, rn",),
    ("select distinct t.g as g, count(*) over (partition by t.g) as n from t "
     "order by g nulls first",),
    # empty and all-NULL inputs
    ("select e.k as k, row_number() over (order by e.w) as rn, sum(e.w) over () as s "
     "from e",),
    ("select n.k as k, rank() over (order by n.k) as r, sum(n.k) over (order by n.k) as s, "
     "lag(n.k) over (order by n.k) as l from n",),
    # TPC-H: a running total per customer, shares of a group
    ("select o_custkey as c, o_orderdate as d, sum(o_totalprice) over (partition by o_custkey "
     "order by o_orderdate, o_orderkey rows unbounded preceding) as running from orders "
     "order by c, d, running",),
    ("select l_returnflag as f, l_linestatus as s, sum(l_quantity) as q, "
     "sum(sum(l_quantity)) over (partition by l_returnflag) as fq, rank() over (order by "
     "sum(l_quantity) desc) as r from lineitem group by l_returnflag, l_linestatus "
     "order by f, s",),
    # without PARTITION BY: one sequence over the ranks (range-partitioned), offsets and
    # frames reaching over several ranks, ties (peers) and UNBOUNDED ends
    ("select t.id as id, lag(t.i, 20) over (order by t.id) as l, lead(t.s, 17, 'x') over "
     "(order by t.id desc) as ld, row_number() over (order by t.d nulls first, t.id) as rn "
     "from t order by id",),
    ("select t.id as id, dense_rank() over (order by t.g) as dr, percent_rank() over (order "
     "by t.g desc nulls first) as pr, cume_dist() over (order by t.b) as cd, ntile(7) over "
     "(order by t.g, t.id) as nt, rank() over (order by t.s) as r from t order by id",),
    ("select t.id as id, sum(t.i) over (order by t.id) as run, count(*) over (order by t.g "
     "nulls first) as peers, avg(t.m) over (order by t.id rows between 10 preceding and 12 "
     "following) as mov from t order by id",),
    ("select t.id as id, max(t.f) over (order by t.id rows between unbounded preceding and 3 "
     "following) as mx, min(t.d) over (order by t.id desc rows between 2 preceding and "
     "unbounded following) as mn, bool_or(t.b) over (order by t.id rows between 1 following "
     "and 30 following) as bo, sum(t.m) filter (where t.b) over (order by t.g range between "
     "unbounded preceding and unbounded following) as whole from t order by id",),
    # beyond the grammar: refused with the construct named
    ("select t.id as id, median(t.i) over (order by t.id rows 2 preceding) as m from t",
     "pending", "smaller than the partition"),
    # GROUPS frames: offsets counted in peer groups
    ("select t.id as id, sum(t.i) over (order by t.g groups between 1 preceding and current "
     "row) as s from t order by id",),
    ("select t.id as id, count(*) over (partition by t.b order by t.d groups between 2 "
     "preceding and 1 following) as c from t order by id",),
    ("select t.id as id, min(t.s) over (order by t.g desc nulls first groups between 1 "
     "following and 3 following) as mn, first_value(t.g) over (order by t.g groups between "
     "2 preceding and 2 preceding) as fv from t order by id",),
    ("select t.id as id, avg(t.m) over (order by t.g groups between unbounded preceding and "
     "1 preceding) as a, last_value(t.s) over (order by t.g, t.s groups between current row "
     "and 4 following) as lv from t order by id",),
    # EXCLUDE: the row, its peer group, its peers but itself
    ("select t.id as id, sum(t.i) over (order by t.id rows between 2 preceding and 2 "
     "following exclude current row) as s, avg(t.m) over (order by t.id rows between 3 "
     "preceding and current row exclude current row) as a from t order by id",),
    ("select t.id as id, count(*) over (order by t.g range between unbounded preceding and "
     "current row exclude group) as c, sum(t.m) over (order by t.g groups between 1 "
     "preceding and 1 following exclude group) as s from t order by id",),
    ("select t.id as id, count(t.i) over (order by t.g groups between 1 preceding and 1 "
     "following exclude ties) as c, max(t.f) over (partition by t.b order by t.g range "
     "between current row and unbounded following exclude ties) as mx from t order by id",),
    ("select t.id as id, first_value(t.s) over (order by t.g, t.id rows between 2 preceding "
     "and 2 following exclude current row) as fv, nth_value(t.g, 2) over (order by t.g groups "
     "between 1 preceding and 1 following exclude ties) as n2, last_value(t.g) over (order "
     "by t.g range between unbounded preceding and current row exclude group) as lv "
     "from t order by id",),
    ("select t.id as id, first_value(t.f ignore nulls) over (order by t.id rows between 2 "
     "preceding and 2 following exclude current row) as ff, nth_value(t.g, 2 ignore nulls) "
     "over (order by t.g groups between 1 preceding and 1 following exclude group) as n2, "
     "last_value(t.i ignore nulls) over (order by t.id rows between 4 preceding and 1 "
     "following exclude current row) as li "
     "from t order by id",),
    ("select t.id as id, var_samp(t.i) over (order by t.g groups between 1 preceding and 1 "
     "following exclude group) as vs, bool_or(t.b) over (order by t.id rows between 1 "
     "preceding and 1 following exclude current row) as bo from t where t.i between -1000 "
     "and 1000 order by id",),
    ("select t.id as id, sum(t.i) over (order by t.id rows between current row and current "
     "row exclude current row) as s, count(*) over (order by t.g range between unbounded "
     "preceding and current row exclude no others) as c "
     "from t order by id",),
    # RANGE offsets as intervals over DATE and TIMESTAMP keys
    ("select t.id as id, count(*) over (order by t.d range between interval 30 days "
     "preceding and current row) as c, sum(t.i) over (order by t.d range between current "
     "row and interval '1 year' following) as s from t order by id",),
    ("select t.id as id, count(*) over (order by t.d desc range between interval '2 months' "
     "preceding and interval '10 years' following) as c, min(t.id) over (partition by t.b "
     "order by t.d nulls first range between interval '40 years' preceding and interval 1 "
     "day preceding) as mn from t order by id",),
    ("select t.id as id, count(*) over (order by cast(t.d as timestamp) range between "
     "interval '36 hours' preceding and interval '1 day 12 hours' following) as c, "
     "max(t.id) over (order by cast(t.d as timestamp) desc range between interval '30 "
     "years' preceding and current row exclude current row) as mx from t order by id",),
    ("select o_orderkey as k, sum(o_totalprice) over (order by o_orderdate range between "
     "interval 7 days preceding and current row) as week from orders order by k",),
)

QUERIES: list[Query] = (ORDERING + JOINS + EXPRESSIONS + AGGREGATES + DECIMAL + NULLS + SUBQUERIES
                        + SETOPS + GROUPING + WINDOWS)
BY_ID = {q.id: q for q in QUERIES}
assert len(BY_ID) == len(QUERIES), "query ids are unique"
assert all(q.status in STATUSES for q in QUERIES)


# correlated subqueries of any depth and outer-aggregating ones, decorrelated by the dependent
# join of their outer columns' domain pushed down (Neumann & Kemper): a column two or three
# levels out, correlation through non-equalities and NULLs, empty inner tables, set operations
# and outer joins inside the subquery, and aggregates of the enclosing query's groups written in
# its subqueries (SELECT, HAVING); LATERAL derived tables
UNNESTING = _feature(
    "unnesting",
    # two levels out in WHERE: EXISTS, IN, scalar, NOT IN and ALL
    ("select t.id as id from t where exists (select * from u where u.k = t.g and exists "
     "(select * from t as t2 where t2.id = u.w and t2.i > t.i)) order by id",),
    ("select t.id as id from t where exists (select 1 from u where u.k = t.g and u.w + 50 in "
     "(select t2.id from t as t2 where t2.id > t.id)) order by id",),
    ("select t.id as id from t where t.g in (select u.k from u where exists (select 1 from t "
     "as t2 where t2.g = u.k and t2.i < t.i)) order by id",),
    ("select t.id as id from t where t.i > (select min(u.w) from u where u.k = t.g and u.w > "
     "(select avg(t2.i) from t as t2 where t2.g = u.k and t2.id <> t.id and t2.i between "
     "-1000 and 1000)) order by id",),
    ("select t.id as id from t where not exists (select 1 from u where u.k = t.g and u.w not "
     "in (select t2.i from t as t2 where t2.g = t.g and t2.id <> t.id)) order by id",),
    ("select t.id as id from t where t.i > all (select u.w from u where u.k = t.g and u.w < "
     "(select max(t2.i) from t as t2 where t2.b = t.b)) order by id",),
    # through non-equalities only, over the empty table e
    ("select t.id as id, t.i as i from t where not exists (select 1 from u where u.w < t.i "
     "and exists (select 1 from e where e.k > t.g)) order by id",),
    ("select t.id as id, (select count(*) from e where e.k = t.g and exists (select 1 from u "
     "where u.w = e.w and u.k <> t.g)) as c from t order by id",),
    # in SELECT: two levels out, a LIMIT per outer row, DECIMAL comparisons
    ("select t.id as id, (select max(u.w) from u where u.k = t.g and u.w < (select avg(t2.i) "
     "from t as t2 where t2.g = t.g and t2.i between -1000 and 1000)) as m from t order by id",),
    ("select t.id as id, (select u.w from u where u.k = t.g and u.w > (select min(t2.i) from "
     "t as t2 where t2.id > t.id and t2.i between -1000 and 1000) order by u.w limit 1) as w "
     "from t order by id",),
    ("select t.id as id, (select count(*) from u where u.k = t.g and u.m in (select t2.m from "
     "t as t2 where t2.g = u.k and t2.m > t.m)) as c from t order by id",),
    ("select t.id as id, (select sum(u.w + t.i) from u where u.k = t.g) as s, (select "
     "count(u.w) filter (where u.w > t.i) from u where u.k is not null) as c from t where "
     "t.i between -1000 and 1000 order by id",),
    # NULL correlation values: NULL keys, IS NOT DISTINCT FROM, the all-NULL table n
    ("select t.id as id, (select count(*) from u where u.k is not distinct from t.g and "
     "exists (select 1 from t as t2 where t2.g is not distinct from u.k and t2.s is not "
     "distinct from t.s)) as c from t order by id",),
    ("select n.k as k, (select count(*) from u where u.k is not distinct from n.k and u.s "
     "not in (select t.s from t where t.g is not distinct from n.k)) as c, (select max(u.w) "
     "from u where u.k = n.k) as m from n",),
    # aggregates of the enclosing query's groups in HAVING and SELECT subqueries
    ("select t.g as g, sum(t.i) as s from t where t.i between -1000 and 1000 group by t.g "
     "having (select count(*) from u where u.w < max(t.i) / 20) > 3 order by g",),
    ("select t.g as g, count(*) as n from t where t.i between -1000 and 1000 group by t.g "
     "having sum(t.i) > (select avg(u.w) from u where u.k = t.g) or exists (select 1 from u "
     "where u.w > max(t.i) / 10 and u.k = t.g) order by g",),
    ("select t.g as g, (select count(*) from u where u.w < max(t.i) and u.w > min(t.i)) as c, "
     "count(*) as n from t where t.i between -1000 and 1000 group by t.g order by g",),
    ("select (select count(*) from u where u.w < avg(t.i)) as c, (select max(u.m) from u "
     "where u.m < sum(t.m)) as m from t where t.i between -1000 and 1000",),
    ("select t.b as b, (select string_agg(u.s, ',' order by u.s) from u where u.k = "
     "count(distinct t.g)) as s from t group by t.b order by b",),
    # set operations, outer joins and windows inside a correlated subquery
    ("select t.id as id from t where t.g in (select u.k from u where u.w > t.i union select "
     "t2.g from t as t2 where t2.id = t.id + 1) order by id",),
    ("select t.id as id, (select string_agg(x.s, ',' order by x.s) from (select u.s from u "
     "where u.k = t.g intersect select t2.s from t as t2 where t2.g = t.g) as x) as ss "
     "from t order by id",),
    ("select t.id as id, (select count(*) from (select u.k from u where u.w > t.i except all "
     "select t2.g from t as t2 where t2.id < t.id) as x) as c from t where t.i between -1000 "
     "and 1000 order by id",),
    ("select t.id as id, (select count(t2.id) from u left join t as t2 on t2.g = u.k and "
     "t2.i > t.i where u.w > 0) as c, (select count(*) from u full join t as t2 on t2.g = u.k "
     "and t2.id < t.id) as f from t order by id",),
    ("select t.id as id, (select max(x.r) from (select u.w * t.g + row_number() over "
     "(partition by u.k order by u.w) as r from u) as x) as m from t order by id",),
    # LATERAL: a derived table reading the FROM items before it, per distinct value
    ("select t.id as id, l.w as w from t left join lateral (select u.w from u where u.k = t.g "
     "and u.w > t.i order by u.w limit 1) as l on true order by id, w",),
    ("select t.id as id, l.c as c, l.m as m from t cross join lateral (select count(*) as c, "
     "max(u.m) as m from u where u.k = t.g) as l order by id",),
    ("select t.id as id, l.s as s from t, lateral (select u.s from u where u.k = t.g union "
     "select t2.s from t as t2 where t2.id = t.id + 1) as l order by id, s",),
    # TPC-H: a customer's orders with a line item beyond the customer's balance (two levels)
    ("select c_custkey as c from customer where exists (select 1 from orders where o_custkey "
     "= c_custkey and exists (select 1 from lineitem where l_orderkey = o_orderkey and "
     "l_extendedprice > c_acctbal * 10)) order by c",),
)
QUERIES += UNNESTING
BY_ID.update({q.id: q for q in UNNESTING})
assert len(BY_ID) == len(QUERIES), "query ids are unique"
