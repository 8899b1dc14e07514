"""A filter's conjuncts evaluated on the rows the earlier ones kept: the rows equal those
where the whole condition is TRUE under SQL's three-valued logic, NULLs included."""

from __future__ import annotations

import numpy as np
from hpc.domains.sql.logical import expr as E
from hpc.domains.sql.logical.types import BIGINT, BOOLEAN
from hpc.domains.sql.physical import executor
from hpc.domains.sql.physical.join import Side
from hpc.domains.sql.table import Column
from hypothesis import given, settings
from hypothesis import strategies as st

_OPS = {"lt": np.less, "gt": np.greater, "eq": np.equal, "ne": np.not_equal}


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_rows_passing_equal_the_whole_condition(data):
    n = data.draw(st.integers(0, 60))
    cols, values, valids = {}, {}, {}
    for name in ("a", "b", "c"):
        v = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), np.int64)
        ok = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
        cols[name] = Column(v, "int", None, None if ok.all() else ok)
        values[name], valids[name] = v, ok
    terms, truth = [], np.ones(n, bool)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(sorted(_OPS)))
        name = data.draw(st.sampled_from(sorted(cols)))
        k = data.draw(st.integers(-3, 3))
        terms.append(E.Call(op, (E.Ref(name, BIGINT), E.Literal(k, BIGINT)), BOOLEAN))
        truth &= _OPS[op](values[name], k) & valids[name]  # NULL is not TRUE
    side = Side(cols, n)
    condition = E.conjoin(terms)
    for after in (1, 2, 10**9):  # always, at half, never on the kept rows alone
        executor.SELECTIVE_AFTER = after
        try:
            rows = executor._rows_passing(condition, side)
        finally:
            executor.SELECTIVE_AFTER = 2
        assert rows.tolist() == np.flatnonzero(truth).tolist()
