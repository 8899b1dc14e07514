"""hpc.shuffle.shuffle_strings: variable-length strings sent by destination rank, against a
reference every rank rebuilds from all ranks' inputs (each rank can regenerate the others'),
and in the order :func:`hpc.shuffle.shuffle` gives the fixed-width columns of the same rows.

Run by pytest (which launches this file under ``mpirun`` on 2 and 3 ranks) or directly as
the job script: ``mpirun -n 3 python -m mpi4py tests/core/test_shuffle_strings.py``.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

WORDS = [b"", b"\x00", b"a\x00b", "é".encode(), "日本語".encode(), "Ωmega 🙂".encode(),
         b"plain ascii", b"\xff\xfe"]


def strings_of(rank: int, case: int, size: int
               ) -> tuple[list[bytes], np.ndarray, np.ndarray | None]:
    """Rank ``rank``'s strings, its rows' destinations and, in case 4, the string each row
    names (a dictionary's codes; -1 a NULL); the same on every rank."""
    rng = np.random.default_rng(7919 * case + rank)
    n = [1000 + 37 * rank, 0 if rank % 2 else 300, 500, 70_000 + rank, 40 * rank][case]
    lengths = rng.integers(0, 13, n)
    blob = rng.integers(0, 256, int(lengths.sum()), dtype=np.uint8).tobytes()
    cut = np.concatenate([[0], np.cumsum(lengths)])
    words = [blob[a:b] for a, b in zip(cut[:-1], cut[1:], strict=True)]
    picks = rng.integers(0, len(WORDS), n)
    words = [WORDS[p] if rng.random() < 0.3 else w for p, w in zip(picks, words, strict=True)]
    rows = rng.integers(-1, n, 3 * n) if case == 4 else None
    dest = rng.integers(0, size, n if rows is None else len(rows))
    if case == 2:  # every row to the last rank
        dest[:] = size - 1
    return words, dest, rows


def row_strings(words: list[bytes], rows: np.ndarray | None) -> list[bytes]:
    """The string each row holds (an empty one for a NULL)."""
    return words if rows is None else [b"" if r < 0 else words[r] for r in rows]


def arrow_style(words: list[bytes], start: int, wide: bool) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (beginning at ``start``, as a slice of an Arrow array's do) and bytes."""
    offsets = np.full(len(words) + 1, start, np.int64 if wide else np.int32)
    np.cumsum([len(w) for w in words], out=offsets[1:])
    offsets[1:] += start
    data = np.frombuffer(b"\x01" * start + b"".join(words) + b"\x02\x03", np.uint8)
    return offsets, data


def received(offsets: np.ndarray, data: np.ndarray) -> list[bytes]:
    raw = data.tobytes()
    return [raw[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def main() -> int:
    from hpc.comm import world
    from hpc.shuffle import shuffle, shuffle_strings

    comm = world()
    size, rank = comm.size, comm.rank
    for case in range(5):
        words, dest, rows = strings_of(rank, case, size)
        offsets, data = arrow_style(words, 3 * case, wide=case % 2 == 1)
        got_off, got = shuffle_strings(offsets, data, dest, rows=rows, comm=comm)
        assert got_off.dtype == np.int64 and got.dtype == np.uint8 and got_off[0] == 0
        assert len(got) == got_off[-1]
        # the reference: every rank's rows rebuilt, those sent here kept in (source, position)
        everyone = [strings_of(src, case, size) for src in range(size)]
        want = [w for ws, d, r in everyone
                for w, to in zip(row_strings(ws, r), d, strict=True) if to == rank]
        strings = received(got_off, got)
        assert strings == want, f"case {case} on rank {rank}"
        # and row for row beside the fixed-width columns shuffle sends to the same ranks
        fixed = shuffle({"i": np.arange(len(dest)), "src": np.full(len(dest), rank)}, dest, comm)
        beside = [row_strings(everyone[s][0], everyone[s][2])[i]
                  for s, i in zip(fixed["src"], fixed["i"], strict=True)]
        assert strings == beside, f"case {case} on rank {rank}: rows misaligned"
        total = comm.allreduce(len(strings))
        assert total == sum(len(d) for _, d, _ in everyone)
    # a destination outside the communicator is refused on every rank
    try:
        shuffle_strings(np.zeros(3, np.int32), np.zeros(0, np.uint8), np.array([0, size]),
                        comm=comm)
    except ValueError as exc:
        assert "dest" in str(exc)
    else:
        raise AssertionError("a bad destination was accepted")
    if rank == 0:
        print(f"shuffle_strings: strings delivered in order on {size} ranks")
    return 0


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [2, 3])
def test_strings_reach_their_ranks_in_shuffle_order(nranks):
    from tests.conftest import mpi_script, run_mpi

    proc = run_mpi(nranks, [str(mpi_script("test_shuffle_strings.py"))], timeout=150)
    assert f"on {nranks} ranks" in proc.stdout


def test_one_rank_keeps_the_strings_and_refuses_bad_offsets():
    from hpc.comm import world
    from hpc.shuffle import shuffle_strings

    words, _, _ = strings_of(0, 0, 1)
    offsets, data = arrow_style(words, 5, wide=False)
    dest = np.zeros(len(words), np.int64)
    got_off, got = shuffle_strings(offsets, data, dest, comm=world())
    assert received(got_off, got) == words
    with pytest.raises(ValueError, match="offsets"):
        shuffle_strings(offsets[:-1], data, dest, comm=world())
    with pytest.raises(ValueError, match="rows"):
        shuffle_strings(offsets, data, dest, rows=np.full(len(words), len(words)), comm=world())


if __name__ == "__main__":
    sys.exit(main())
