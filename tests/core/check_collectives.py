"""Run under mpirun: ``check_collectives.py CASES.pkl`` checks hpc.collectives on every case.

A case is ``(dtype, row shape, rows per rank, seed, k)`` (the rows per rank also give the
strings per rank of the string allgathers). Every rank builds every rank's rows
from the seed (so each knows the expected result), runs the collectives on its own rows and
compares; rank 0 prints ``ok N`` or the first mismatch.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np

import hpc
from hpc.collectives import (
    allgather_bytes,
    allgather_object,
    allgather_rows,
    allgather_strings,
    allreduce,
    bcast_array,
    gather_rows,
    merge_topk,
    row_counts,
)


def rows_of(rank: int, dtype: str, shape: tuple, counts: list[int], seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, rank])
    n = counts[rank % len(counts)]
    nbytes = n * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    raw = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
    return raw.view(dtype).reshape(n, *shape)


def topk_of(rank: int, nq: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, rank, 7])
    d = rng.integers(0, 5, (nq, k)).astype(np.float32)  # many ties
    i = rng.choice(1000, (nq, k), replace=True).astype(np.int64) + 1000 * rank
    i[rng.random((nq, k)) < 0.2] = -1  # missing entries
    order = np.lexsort((np.where(i < 0, 1 << 62, i), d, i < 0), axis=1)
    return np.take_along_axis(d, order, 1), np.take_along_axis(i, order, 1)


def words_of(rank: int, counts: list[int], seed: int) -> list[str]:
    rng = np.random.default_rng([seed, rank, 3])
    pool = ["", "a", "é", "日本語", "x" * 300, "\0", "tab\t"]
    return [pool[j] + str(rank) * int(j % 2) for j in rng.integers(0, len(pool), counts[0])]


def check(case: tuple, comm) -> str | None:
    dtype, shape, counts, seed, k = case
    rank, size = comm.Get_rank(), comm.Get_size()
    every = [rows_of(r, dtype, shape, counts, seed) for r in range(size)]
    want = np.concatenate(every).astype(np.dtype(dtype))  # concatenate may go native
    mine = every[rank]
    got = allgather_rows(mine, comm)
    if got.dtype != want.dtype or got.tobytes() != want.tobytes() or got.shape != want.shape:
        return f"allgather_rows {case}"
    got = gather_rows(mine, 0, comm)
    if rank == 0 and (got.shape != want.shape or got.tobytes() != want.tobytes()):
        return f"gather_rows {case}"
    if rank != 0 and got is not None:
        return "gather_rows returned rows off the root"
    root = size - 1
    got = bcast_array(every[root] if rank == root else None, root, comm)
    if got.shape != every[root].shape or got.tobytes() != every[root].tobytes():
        return f"bcast_array {case}"
    if list(row_counts(mine.shape[0], comm)) != [e.shape[0] for e in every]:
        return "row_counts"
    if allreduce(mine.shape[0], "sum", comm) != want.shape[0]:
        return "allreduce sum"
    if allreduce(np.full(3, rank), "max", comm).tolist() != [size - 1] * 3:
        return "allreduce max"
    if allgather_object((rank, dtype), comm) != [(r, dtype) for r in range(size)]:
        return "allgather_object"
    words = [words_of(r, counts[r % len(counts):], seed) for r in range(size)]
    if allgather_strings(words[rank], comm) != [w for ws in words for w in ws]:
        return f"allgather_strings {case}"
    encoded = [[w.encode() for w in ws] for ws in words]
    lengths, data, per_rank = allgather_bytes(
        np.array([len(b) for b in encoded[rank]], np.int64),
        np.frombuffer(b"".join(encoded[rank]), np.uint8), comm)
    if (lengths.tolist() != [len(b) for bs in encoded for b in bs]
            or data.tobytes() != b"".join(b"".join(bs) for bs in encoded)
            or per_rank.tolist() != [len(ws) for ws in words]):
        return f"allgather_bytes {case}"
    lists = [topk_of(r, 4, k, seed) for r in range(size)]
    d = np.concatenate([x[0] for x in lists], axis=1)
    i = np.concatenate([x[1] for x in lists], axis=1)
    order = np.lexsort((np.where(i < 0, 1 << 62, i), d, i < 0), axis=1)[:, :k]
    wd, wi = np.take_along_axis(d, order, 1), np.take_along_axis(i, order, 1)
    gd, gi = merge_topk(*lists[rank], root=root, comm=comm)
    if rank == root and not (np.array_equal(gd, wd) and np.array_equal(gi, wi)):
        return f"merge_topk {case}: {gi.tolist()} != {wi.tolist()}"
    return None


def main() -> int:
    with open(sys.argv[1], "rb") as fh:
        cases = pickle.load(fh)
    comm = hpc.world()
    for n, case in enumerate(cases):
        problem = check(case, comm)
        problems = comm.gather(problem, root=0)
        if comm.Get_rank() == 0 and any(problems):
            print(f"case {n}: {next(p for p in problems if p)}", flush=True)
            return 1
    if comm.Get_rank() == 0:
        print(f"ok {len(cases)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
