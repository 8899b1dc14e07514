"""hpc.shuffle's fused hash path: destinations hashed, chosen and counted in one pass
(hash_destinations), columns packed straight into their destinations' runs, and hash_shuffle
on 1 to 4 ranks, against a NumPy closed form of the hash and a stable argsort.

Run under mpirun by the MPI test below (``python -m mpi4py THIS_FILE``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from hpc.shuffle import (
    _CHUNK_ROWS,
    _chunk_starts,
    _group,
    _hash_histogram,
    _rows_per_chunk,
    combined_hash,
    hash_destinations,
    hash_partition,
)

_FIB = np.uint64(0x9E3779B97F4A7C15)
_PRIME = np.uint64(0x100000001B3)


def _reference(keys: list[np.ndarray], nparts: int) -> np.ndarray:
    """The destination in NumPy: the columns' combined hash, then the top half of its
    Fibonacci hash modulo ``nparts``."""
    h = np.zeros(len(keys[0]), np.uint64)
    with np.errstate(over="ignore"):
        for k in keys:
            h = (h * _PRIME) ^ (k.astype(np.int64).view(np.uint64) * _FIB)
        return (((h * _FIB) >> np.uint64(32)) % np.uint64(nparts)).astype(np.int64)


@pytest.mark.parametrize("nparts", [1, 2, 3, 4, 5, 8, 256, 257, 70_000])
@pytest.mark.parametrize("n", [0, 1, 1000, _CHUNK_ROWS + 3, 5 * _CHUNK_ROWS + 11])
def test_hash_destinations_match_the_closed_form(n: int, nparts: int) -> None:
    rng = np.random.default_rng(n * 7 + nparts)
    a = rng.integers(-(2**62), 2**62, n)
    b = rng.integers(0, 9, n).astype(np.int32)
    for keys in ([a], [a, b]):
        want = _reference(keys, nparts)
        dest, counts = hash_destinations(keys, nparts)
        assert dest.dtype.kind == "u" and np.iinfo(dest.dtype).max >= nparts - 1
        assert np.array_equal(dest.astype(np.int64), want)
        assert np.array_equal(counts, np.bincount(want, minlength=nparts))
    # one key column: the destination hash_partition gives its hash
    with np.errstate(over="ignore"):
        hashed = (a.view(np.uint64) * _FIB).view(np.int64)
    assert np.array_equal(hash_destinations(a, nparts)[0].astype(np.int64),
                          hash_partition(hashed, nparts))


@pytest.mark.parametrize("n", [0, 1, 1000, 5 * _CHUNK_ROWS + 11])
def test_combined_hash_of_host_integers_matches_the_closed_form(n: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    kinds = [a, a.view(np.uint64), rng.integers(-128, 127, n).astype(np.int8),
             rng.integers(0, 2**32, n).astype(np.uint32)]
    for keys in ([kinds[0]], [kinds[1]], kinds, kinds[2:]):
        want = np.zeros(n, np.uint64)
        with np.errstate(over="ignore"):
            for k in keys:
                want = (want * _PRIME) ^ (k.astype(np.int64).view(np.uint64) * _FIB)
        got = combined_hash(keys)
        assert got.dtype == np.uint64 and np.array_equal(got, want)
    assert np.array_equal(combined_hash(a), combined_hash([a]))
    # a read-only key (an Arrow buffer's) beside a writable one hashes alike
    frozen = a.copy()
    frozen.flags.writeable = False
    mixed = [frozen, kinds[2], a]
    assert np.array_equal(combined_hash(mixed), combined_hash([a, kinds[2], a]))
    assert np.array_equal(hash_destinations(mixed, 3)[0], hash_destinations([a, kinds[2], a], 3)[0])


def test_hash_destinations_of_device_keys_equal_the_host_pass() -> None:
    """Device keys (strict stand-ins for CuPy arrays) get the host pass's ranks, on the
    device, and the same counts."""
    from hpc.testing.device import is_strict_device_array, xp

    rng = np.random.default_rng(7)
    a = rng.integers(-(2**62), 2**62, 5000)
    b = rng.integers(0, 9, 5000).astype(np.int32)
    for nparts in (1, 3, 300):
        want, want_counts = hash_destinations([a, b], nparts)
        dest, counts = hash_destinations([xp.asarray(a), xp.asarray(b)], nparts)
        assert is_strict_device_array(dest) and dest.dtype == want.dtype
        assert np.array_equal(dest.get(), want) and np.array_equal(counts, want_counts)


def test_hash_destinations_refuse_bad_keys() -> None:
    with pytest.raises(ValueError):
        hash_destinations([np.zeros(3, np.int64), np.zeros(4, np.int64)], 2)
    with pytest.raises(ValueError):
        hash_destinations([np.zeros(3, np.float64)], 2)
    with pytest.raises(ValueError):
        hash_destinations([], 2)


@pytest.mark.parametrize("nparts", [1, 2, 3, 4, 7, 64])
@pytest.mark.parametrize("kind", ["uniform", "one", "skewed"])
def test_columns_grouped_as_a_stable_sort_by_destination(nparts: int, kind: str) -> None:
    rng = np.random.default_rng(nparts + len(kind))
    n = 4 * _CHUNK_ROWS + 123  # several chunks: the threaded scatter
    keys = rng.integers(0, 1 << 40, n)
    if kind == "one":
        keys[:] = 12345
    elif kind == "skewed":
        keys[rng.random(n) < 0.9] = 7
    dest, counts = _hash_histogram((keys,), nparts)
    starts = _chunk_starts(counts)
    ends = starts + counts.astype(np.uint64)
    order = np.argsort(_reference([keys], nparts), kind="stable")
    for col in (keys, rng.random(n).astype(np.float32), rng.random(n) < 0.5,
                rng.integers(0, 100, n).astype(np.int16), np.arange(n, dtype=np.float64)):
        got = _group(col, dest, _rows_per_chunk(n, counts.shape[0]), starts, ends)
        assert got.dtype == col.dtype
        assert np.array_equal(got, col[order])


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_hash_shuffle_delivers_every_row_to_its_rank_in_order(nranks: int) -> None:
    from tests.conftest import run_mpi

    proc = run_mpi(nranks, [str(Path(__file__))], timeout=240)
    assert f"fused shuffle ok on {nranks} ranks" in proc.stdout


def _rows(rank: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(100 + rank)
    key = rng.integers(-(2**40), 2**40, n)
    key[: n // 3] = 99  # a heavy key: a third of the rows to one rank
    return {
        "key": key,
        "k2": rng.integers(0, 5, n).astype(np.int32),
        "src": np.full(n, rank, np.int32),
        "pos": np.arange(n, dtype=np.int64),
        "x": rng.standard_normal(n).astype(np.float32),
        "flag": rng.random(n) < 0.5,
    }


def main() -> int:
    from hpc.domains.sql import Column
    from hpc.domains.sql.exchange import key_hash, partition_by_keys, ship
    from hpc.domains.sql.physical.exchange import key_destinations

    from hpc.comm import world
    from hpc.shuffle import hash_shuffle, shuffle

    comm = world()
    size, rank = comm.Get_size(), comm.Get_rank()
    sizes = [0, 3, 5 * _CHUNK_ROWS + 17, 1000]  # an empty rank, several chunks on another
    mine = _rows(rank, sizes[rank % len(sizes)])
    got = hash_shuffle(mine, [mine["key"], mine["k2"]], comm)
    # every rank's rows whose destination is this rank, by source rank, then position
    every = [_rows(r, sizes[r % len(sizes)]) for r in range(size)]
    for name in mine:
        want = np.concatenate([
            rows[name][_reference([rows["key"], rows["k2"]], size) == rank] for rows in every])
        assert got[name].dtype == mine[name].dtype
        assert np.array_equal(got[name], want), name
    # the same rows and order as shuffle() with the engine's destinations
    cols = {n: Column(a, "bool" if a.dtype == bool else "int" if a.dtype.kind == "i"
                      else "float") for n, a in mine.items()}
    cols["x"] = Column(mine["x"], "float", valid=mine["flag"])  # a mask travels too
    dest = hash_partition(key_hash([cols["key"], cols["k2"]]).view(np.int64), size)
    plain = shuffle(mine, dest, comm)
    for name in mine:
        assert np.array_equal(plain[name], got[name]), name
    # the engine's destinations of its own hash exchanges, one byte a row, read as they are
    narrow = key_destinations([cols["key"], cols["k2"]], size)
    assert narrow.dtype == np.uint8 and np.array_equal(narrow.astype(np.int64), dest)
    moved_narrow = shuffle(mine, narrow, comm)
    for name in mine:
        assert np.array_equal(moved_narrow[name], got[name]), name
    fused = partition_by_keys(cols, [cols["key"], cols["k2"]], comm)
    shipped = ship(cols, dest, comm)
    for name in cols:
        assert np.array_equal(fused[name].values, shipped[name].values), name
        fv, sv = fused[name].valid, shipped[name].valid
        assert (fv is None) == (sv is None) and (fv is None or np.array_equal(fv, sv)), name
    # device arrays (strict stand-ins for CuPy's) on the odd ranks take shuffle's path with
    # the same destinations; the ranks mix paths and still meet, the rows and order the same
    from hpc.testing.device import is_strict_device_array, xp

    on_device = rank % 2 == 1
    moved = {n: xp.asarray(a) if on_device else a for n, a in mine.items()}
    keys = [moved["key"], moved["k2"]]
    mixed = hash_shuffle(moved, keys, comm)
    for name in mine:
        assert is_strict_device_array(mixed[name]) == on_device, name
        values = mixed[name].get() if on_device else mixed[name]
        assert values.dtype == got[name].dtype and np.array_equal(values, got[name]), name
    # a bad call raises on every rank instead of hanging
    try:
        hash_shuffle({"a": np.zeros(2)}, [np.zeros(3 if rank == 0 else 2, np.int64)], comm)
    except ValueError:
        pass
    else:
        raise AssertionError("a key column shorter than the columns was accepted")
    comm.Barrier()
    if rank == 0:
        print(f"fused shuffle ok on {size} ranks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
