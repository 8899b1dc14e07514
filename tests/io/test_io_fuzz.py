"""Differential fuzzing of hpc.io: random shapes, dtypes, halos, table columns (NaN payloads,
NaT, unicode, empty tables) and checkpoints round-trip bit for bit, on 1 rank in process and
written on 2, 3 and 4 ranks (empty partitions included), each job reading the previous job's
files on its own rank count, the last read back here on one rank."""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from mpi4py import MPI

from tests.conftest import mpi_script, run_mpi
from tests.fuzz import draw, fuzz
from tests.io.check_io_fuzz import pack, run

ARRAY_DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8",
                "c16", ">i4", ">f8", "<f4"]  # fmt: skip
COLUMN_DTYPES = ["?", "i1", "u2", "i4", "i8", "u8", "f2", "f4", "f8", ">f8"]
UNITS = ["D", "s", "ms", "ns"]
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def _raw(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random bytes as ``dtype`` (every bit pattern: NaN payloads, -0.0, inf); bools 0/1."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    size = int(np.prod(shape)) * dt.itemsize
    return np.frombuffer(rng.bytes(size), dtype=dt).reshape(shape).copy()


@st.composite
def io_case(draw_: st.DrawFn) -> dict:
    ndim = draw_(st.integers(1, 3))
    shape = tuple(draw_(st.lists(st.integers(1, 7), min_size=ndim, max_size=ndim)))
    seed = draw_(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    nrows = draw_(st.sampled_from([0, 1, 2, 3, draw_(st.integers(4, 60))]))
    table: dict[str, np.ndarray] = {}
    for c in range(draw_(st.integers(1, 4))):
        kind = draw_(st.sampled_from(["number", "string", "datetime"]))
        if kind == "number":
            table[f"n{c}"] = _raw(rng, (nrows,), draw_(st.sampled_from(COLUMN_DTYPES)))
        elif kind == "string":
            words = draw_(st.lists(TEXT, min_size=1, max_size=6))
            table[f"s{c}"] = np.array([words[w] for w in rng.integers(0, len(words), nrows)],
                                      dtype=str).reshape(nrows)  # fmt: skip
        else:
            unit = draw_(st.sampled_from(UNITS))
            ticks = rng.integers(-(2**62), 2**62, size=nrows)
            ticks[rng.random(nrows) < 0.2] = np.iinfo(np.int64).min  # NaT
            table[f"t{c}"] = ticks.view(f"datetime64[{unit}]")
    return dict(
        array=_raw(rng, shape, draw_(st.sampled_from(ARRAY_DTYPES))),
        halo=draw_(st.integers(0, 2)),
        halo_read=draw_(st.integers(0, 2)),
        checksum=draw_(st.booleans()),
        nrows=nrows,
        table=table,
        weights=draw_(st.lists(st.sampled_from([0, 0, 1, 2, 5]), min_size=4, max_size=4)),
        checkpoint=draw_(st.booleans()),
        other=_raw(rng, shape, "f8"),
        step=draw_(st.integers(0, 10**6)),
        attrs={"t": draw_(st.floats(allow_nan=False)), "name": draw_(TEXT)},
    )


def regression_cases() -> list[dict]:
    """Found by this fuzzing: float16 and non-native byte orders crashed the gather/scatter
    path (HPC_IO_MODE=serial) in MPI; a checksummed complex array could not be created (an
    integer fill value); a table of no rows aborted a job writing with MPI-IO."""
    rng = np.random.default_rng(0)
    base = dict(halo=1, halo_read=0, checkpoint=False, step=1, attrs={"t": 1.0, "name": "r"})
    return [
        {**base, "array": _raw(rng, (5, 3), "f2"), "checksum": False, "nrows": 5,
         "table": {"h": _raw(rng, (5,), "f2"), "b": _raw(rng, (5,), ">f8")},
         "weights": [0, 1, 0, 1], "other": _raw(rng, (5, 3), "f8")},
        {**base, "array": _raw(rng, (2, 3, 2), "c16"), "checksum": True, "nrows": 1,
         "table": {"c": _raw(rng, (1,), "i8")}, "weights": [0, 0, 0, 1],
         "checkpoint": True, "other": _raw(rng, (2, 3, 2), "f8")},
        {**base, "array": _raw(rng, (1, 2), ">i4"), "checksum": True, "nrows": 0,
         "table": {"s": np.array([], dtype=str), "x": _raw(rng, (0,), "f4")},
         "weights": [1, 1, 1, 1], "other": _raw(rng, (1, 2), "f8")},
    ]  # fmt: skip


def test_io_regressions_round_trip_on_one_rank(tmp_path):
    failures = run(regression_cases(), "-", str(tmp_path), MPI.COMM_WORLD)
    failures += run(regression_cases(), str(tmp_path), "-", MPI.COMM_WORLD)
    assert not failures, failures[0]


@fuzz(60)
@given(io_case())
def test_io_fuzz_one_rank_round_trips_bitwise(tmp_path_factory, case):
    where = tmp_path_factory.mktemp("io")
    failures = run([case], "-", str(where), MPI.COMM_WORLD)
    failures += run([case], str(where), "-", MPI.COMM_WORLD)
    assert not failures, failures[0]


def test_io_fuzz_written_on_2_3_4_ranks_reads_on_the_next(tmp_path):
    cases = regression_cases() + draw(io_case(), 25)
    path = tmp_path / "cases.pkl"
    path.write_bytes(pickle.dumps(pack(cases)))
    script = str(mpi_script("check_io_fuzz.py"))
    previous = "-"
    # 3 ranks through rank 0 (HPC_IO_MODE=serial), the others with MPI-IO
    for nranks, mode in ((2, "auto"), (3, "serial"), (4, "auto")):
        written = tmp_path / f"on{nranks}"
        written.mkdir()
        proc = run_mpi(nranks, [script, str(path), previous, str(written)], timeout=240,
                       env={"HPC_IO_MODE": mode})  # fmt: skip
        assert f"io fuzz: {len(cases)} cases on {nranks} ranks: PASS" in proc.stdout, proc.stdout
        previous = str(written)
    failures = run(cases, previous, "-", MPI.COMM_WORLD)  # and back on one rank
    assert not failures, failures[0]
