"""Differential fuzzing of hpc.io: drawn cases (a pickle from the parent) written on this job's
ranks and read back bit for bit, also from the files an earlier job wrote on another rank count.

``python -m mpi4py check_io_fuzz.py CASES READ_DIR WRITE_DIR``: verify the files in READ_DIR
(``-`` for none) on this job's ranks, then write every case into WRITE_DIR. The writer's process
grid puts as many ranks as it can along an axis shorter than the rank count, so some ranks own
nothing; the reader uses the default grid, and the table rows are split at the case's cuts.
"""

from __future__ import annotations

import pickle
import sys
import traceback
from pathlib import Path

import numpy as np
from hpc.io import Checkpoint, read_array, read_table, write_array, write_table

import hpc
from hpc.comm import world
from hpc.decomposition import chunk
from tests.jobs import report


def pack(obj: object) -> object:
    """``obj`` with every array as (dtype string, shape, bytes): NumPy's pickle turns
    non-native byte orders into native ones, and the byte order is part of what is tested."""
    if isinstance(obj, np.ndarray):
        return ("__ndarray__", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, dict):
        return {k: pack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [pack(v) for v in obj]
    return obj


def unpack(obj: object) -> object:
    if isinstance(obj, tuple) and obj and obj[0] == "__ndarray__":
        _, dtype, shape, raw = obj
        return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
    if isinstance(obj, dict):
        return {k: unpack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [unpack(v) for v in obj]
    return obj


def writer_dims(shape: tuple[int, ...], nranks: int) -> tuple[int, ...]:
    """All ranks along the shortest axis (empty partitions when it is shorter than nranks)."""
    axis = int(np.argmin(shape))
    return tuple(nranks if a == axis else 1 for a in range(len(shape)))


def row_range(case: dict, nrows: int, rank: int, size: int) -> tuple[int, int]:
    """The rows a writer rank contributes: the case's cut fractions (some ranks none)."""
    weights = np.asarray(case["weights"][:size], dtype=np.float64)
    if weights.sum() == 0:
        weights = np.ones(size)
    edges = np.round(np.concatenate([[0], np.cumsum(weights)]) / weights.sum() * nrows)
    edges = edges.astype(int)
    edges[-1] = nrows
    return int(edges[rank]), int(edges[rank + 1])


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def write_case(j: int, case: dict, where: Path, comm) -> None:
    g = case["array"]
    d = hpc.CartDecomposition(
        g.shape, halo=case["halo"], dims=writer_dims(g.shape, comm.size), comm=comm
    )
    local = d.allocate(g.dtype, fill=1)  # ghosts hold junk that must not be written
    d.interior(local)[...] = g[d.local_slices]
    write_array(where / "arrays.h5", f"a{j}", local, d, checksum=case["checksum"])
    lo, hi = row_range(case, case["nrows"], comm.rank, comm.size)
    write_table(
        where / "tables.h5", f"t{j}", {k: v[lo:hi] for k, v in case["table"].items()}, comm=comm
    )
    if case["checkpoint"]:
        other = d.allocate(np.float64)
        d.interior(other)[...] = case["other"][d.local_slices]
        Checkpoint(where / f"ckpt{j}", comm=comm, keep=1).save(
            case["step"], {"a": local, "b": other}, d, attrs=case["attrs"]
        )


def read_case(j: int, case: dict, where: Path, comm) -> None:
    g = case["array"]
    problems: list[str] = []

    def check(ok: bool, what: object) -> None:  # collectives first, then assert
        if not ok:
            problems.append(str(what))

    d = hpc.CartDecomposition(g.shape, halo=case["halo_read"], comm=comm)
    local = read_array(where / "arrays.h5", f"a{j}", d)
    check(same_bytes(np.ascontiguousarray(d.interior(local)), g[d.local_slices]), f"array a{j}")
    got = read_table(where / "tables.h5", f"t{j}", comm=comm)
    lo, hi = chunk(case["nrows"], comm.size, comm.rank)
    check(list(got) == list(case["table"]), (list(got), list(case["table"])))
    for name, values in case["table"].items():
        want = values[lo:hi]
        if name not in got:
            continue
        if want.dtype.kind == "U":  # the width is the dictionary's longest word
            check(got[name].dtype.kind == "U" and got[name].tolist() == want.tolist(), name)
        else:
            check(same_bytes(got[name], want), f"table t{j} column {name}: {got[name]} {want}")
    if case["checkpoint"]:
        state = Checkpoint(where / f"ckpt{j}", comm=comm, keep=1).load()
        check(state.step == case["step"] and state.attrs == case["attrs"], f"checkpoint {j}")
        for name, want in (("a", g), ("b", case["other"])):
            mine = np.ascontiguousarray(state.decomp.interior(state.arrays[name]))
            check(same_bytes(mine, want[state.decomp.local_slices]), f"checkpoint {j} {name}")
    assert not problems, "; ".join(problems)


def run(cases: list[dict], read_dir: str, write_dir: str, comm) -> list[str]:
    failures = []
    for step, where in (("read", read_dir), ("write", write_dir)):
        if where == "-":
            continue
        for j, case in enumerate(cases):
            try:
                (read_case if step == "read" else write_case)(j, case, Path(where), comm)
            except AssertionError:
                shown = {k: case[k] for k in ("halo", "checksum", "nrows", "weights")}
                failures.append(
                    f"{step} case {j} {case['array'].dtype} "
                    f"{case['array'].shape} {shown}:\n{traceback.format_exc()}"
                )
    return failures


def main() -> int:
    comm = world()
    with open(sys.argv[1], "rb") as fh:
        cases = unpack(pickle.load(fh))
    failures = run(cases, sys.argv[2], sys.argv[3], comm)
    return report(comm, failures, f"io fuzz: {len(cases)} cases on {comm.size} ranks: PASS")


if __name__ == "__main__":
    sys.exit(main())
