"""hpc.collectives against NumPy on every rank's data (each rank can rebuild the others'):
random dtypes (non-native byte order included), row shapes, ranks with no rows, 1-4 ranks."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import strategies as st

from tests.conftest import mpi_script, run_mpi
from tests.fuzz import draw

DTYPES = ["i1", "<u2", ">i4", "<i8", "<f2", ">f4", "<f8", "<c8", ">c16", "|b1", "V3"]

CASES = st.tuples(
    st.sampled_from(DTYPES),
    st.lists(st.integers(0, 4), max_size=2).map(tuple),
    st.lists(st.integers(0, 40), min_size=1, max_size=4),
    st.integers(0, 2**32 - 1),
    st.integers(1, 6),
)


@pytest.mark.mpi
@pytest.mark.timeout(240)
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_collectives_equal_numpy_on_fresh_cases(tmp_path, nranks):
    cases = draw(CASES, 25)
    path = tmp_path / "cases.pkl"
    path.write_bytes(pickle.dumps(cases))
    proc = run_mpi(nranks, [str(mpi_script("check_collectives.py")), str(path)], timeout=200)
    assert proc.stdout.strip() == f"ok {len(cases)}", proc.stdout
