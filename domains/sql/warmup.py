"""Warm-up tasks of the SQL domain (see :mod:`hpc.warmup`): scans, filters, joins, group-bys and
sorts of every column type, by the 22 TPC-H queries on a tiny generated database, on both
query paths (a few synthetic tables when ``tpchgen-cli`` is not installed)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable

import numpy as np


def _tpch() -> None:
    from .catalog import Catalog
    from .tpch import QUERIES, SUPPORTED, generate

    with tempfile.TemporaryDirectory(prefix="hpc-warmup-") as tmp:
        try:
            data = generate(0.01, tmp)
        except FileNotFoundError:
            _synthetic()
            return
        catalog = Catalog.from_directory(data)
        for q in SUPPORTED:
            _query(QUERIES[q], catalog)


def _query(sql: str, catalog: object) -> None:
    from .engine import query

    query(sql, catalog)


def _synthetic() -> None:
    import pandas as pd

    from .catalog import Catalog
    from .table import Table

    rng = np.random.default_rng(0)
    n = 4096
    facts = pd.DataFrame({
        "k": rng.integers(0, 64, n), "x": rng.standard_normal(n), "q": rng.integers(0, 50, n),
        "s": rng.choice(["a", "b", "c"], n), "d": pd.to_datetime("1995-01-01")
        + pd.to_timedelta(rng.integers(0, 1000, n), unit="D"),
    })
    dims = pd.DataFrame({"k": np.arange(64), "name": [f"n{i}" for i in range(64)]})
    catalog = Catalog()
    catalog.register("facts", Table.from_pandas(facts))
    catalog.register("dims", Table.from_pandas(dims))
    _query("SELECT s, count(*), sum(x), avg(q) FROM facts WHERE q < 40 AND d >= DATE "
           "'1995-06-01' GROUP BY s ORDER BY s", catalog)
    _query("SELECT name, sum(x) AS t FROM facts JOIN dims ON facts.k = dims.k GROUP BY name "
           "ORDER BY t DESC LIMIT 5", catalog)


def _predicate_programs() -> None:
    from .physical.predicate_programs import warm_up

    warm_up()  # filters use them on large inputs only, which the tiny database has not


TASKS: list[tuple[str, Callable[[], object]]] = [
    ("TPC-H queries on a generated SF 0.01 database", _tpch),
    ("filter predicate programs", _predicate_programs),
]
