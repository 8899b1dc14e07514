"""Run under mpirun: arrays, tables and checkpoints written on N ranks read back on M ranks.

``write DIR`` writes the reference data; ``read DIR`` (on any rank count) checks every value
bitwise against the same reference, regenerated from its definition.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
from hpc.io import Checkpoint, read_array, read_table, write_array, write_table

import hpc
from hpc.comm import world
from hpc.decomposition import chunk

SHAPES = [(37,), (13, 11), (7, 6, 5), (3, 40, 2)]
DTYPES = [np.float32, np.float64, np.int32, np.int64]
WORDS = ["", "alpha", "β-δ", "日本語", "naïve", "x" * 30]


def reference(shape: tuple[int, ...], dtype) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(repr((shape, np.dtype(dtype).str)).encode()))
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def rows_of(rank: int) -> int:
    """Rows a writer rank contributes: rank 1 contributes none (an empty partition)."""
    return 0 if rank == 1 else 5 + rank


def table_rows(start: int, stop: int) -> dict[str, np.ndarray]:
    i = np.arange(start, stop)
    day = np.datetime64("2024-02-28", "D") + i.astype("timedelta64[D]")
    day = np.where(i % 4 == 1, np.datetime64("NaT"), day).astype("datetime64[D]")
    ns = np.datetime64("2020-01-01T00:00:00", "ns") + (i * 1_000_000_007).astype("timedelta64[ns]")
    return {
        "id": i.astype(np.int64),
        "x": np.where(i % 3 == 0, np.nan, i * 0.5),
        "flag": i % 2 == 0,
        "word": np.array([WORDS[k % len(WORDS)] for k in i.tolist()], dtype=str),
        "day": day,
        "stamp": ns,
        "small": (i % 7).astype(np.uint8),
    }


def write(directory: Path) -> None:
    comm = world()
    for shape in SHAPES:
        d = hpc.CartDecomposition(shape, periodic=True, halo=1)
        for dtype in DTYPES:
            g = reference(shape, dtype)
            local = d.allocate(dtype, fill=-1)
            d.interior(local)[...] = g[d.local_slices]
            write_array(
                directory / "arrays.h5",
                f"{'x'.join(map(str, shape))}/{np.dtype(dtype).name}",
                local,
                d,
            )
    offset = sum(rows_of(r) for r in range(comm.rank))
    write_table(directory / "table.h5", "t", table_rows(offset, offset + rows_of(comm.rank)))
    d = hpc.CartDecomposition((9, 8, 7), periodic=(True, False, True), halo=2)
    u = d.allocate(np.float64)
    d.interior(u)[...] = reference((9, 8, 7), np.float64)[d.local_slices]
    v = d.allocate(np.int32)
    d.interior(v)[...] = reference((9, 8, 7), np.int32)[d.local_slices]
    ckpt = Checkpoint(directory / "ckpt", keep=2)
    for step in (10, 20, 30):
        ckpt.save(step, {"u": u, "v": v}, d, attrs={"time": step * 0.1, "name": "run"})
    if comm.rank == 0:
        print(f"wrote on {comm.size} ranks")


def read(directory: Path, writers: int) -> None:
    comm = world()
    count = 0
    for shape in SHAPES:
        d = hpc.CartDecomposition(shape, periodic=False, halo=1)
        for dtype in DTYPES:
            local = read_array(
                directory / "arrays.h5", f"{'x'.join(map(str, shape))}/{np.dtype(dtype).name}", d
            )
            assert local.dtype == np.dtype(dtype), (local.dtype, dtype)
            want = reference(shape, dtype)[d.local_slices]
            assert np.array_equal(d.interior(local), want), f"array {shape} {dtype} differs"
            ghosts = local.copy()
            ghosts[d.interior_slices] = 0
            assert not ghosts.any(), "ghost cells of a read array start at zero"
            count += 1
    total = sum(rows_of(r) for r in range(writers))
    start, stop = chunk(total, comm.size, comm.rank)
    got = read_table(directory / "table.h5", "t")
    want = table_rows(start, stop)
    assert list(got) == list(want), (list(got), list(want))
    for name, values in want.items():
        if values.dtype.kind == "U":  # the width is the dictionary's longest word
            assert got[name].dtype.kind == "U", (name, got[name].dtype)
        else:
            assert got[name].dtype == values.dtype, (name, got[name].dtype, values.dtype)
        same = np.array_equal(got[name], values, equal_nan=values.dtype.kind in "fM")
        assert same, f"column {name}: {got[name]} != {values}"
    part = read_table(directory / "table.h5", "t", columns=["word", "id"])
    assert list(part) == ["word", "id"] and np.array_equal(part["id"], want["id"])
    ckpt = Checkpoint(directory / "ckpt", keep=2)
    assert ckpt.steps() == [20, 30], ckpt.steps()
    state = ckpt.load()
    assert state.step == 30 and state.attrs == {"time": 3.0, "name": "run"}
    assert state.meta["nranks"] == writers and state.decomp.halo == 2
    for name, dtype in (("u", np.float64), ("v", np.int32)):
        full = state.decomp.gather(state.arrays[name])
        if comm.rank == 0:
            assert full.tobytes() == reference((9, 8, 7), dtype).tobytes(), f"ckpt {name}"
    comm.Barrier()
    if comm.rank == 0:
        print(
            f"read {count} arrays, {total} rows, checkpoint 30 on {comm.size} ranks "
            f"(written on {writers})"
        )


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2])
    if mode == "write":
        write(where)
    else:
        read(where, int(sys.argv[3]))
