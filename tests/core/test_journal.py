"""hpc.journal and map_blocks(journal=...): resume after failures and SIGKILLs, bitwise."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from hpc.journal import (
    CorruptJournalError,
    Journal,
    JournalError,
    JournalMismatchError,
    journal_segments,
)
from hpc.run import map_blocks
from tests.conftest import mpi_script, run_mpi
from tests.core import journal_job
from tests.core.sigkill import Launch, describe, kill_chain, run_to_completion, temporaries

WIDTH = journal_job.WIDTH


def rows(first: int, count: int) -> np.ndarray:
    return journal_job.rows(first, count)


class Boom(Exception):
    pass


def failing_after(limit: int):
    """A block function that raises once ``limit`` blocks were computed (a crash mid-run)."""
    done = []

    def fn(first: int, count: int) -> np.ndarray:
        if sum(done) + count > limit:
            raise Boom(f"crash at block {first}")
        done.append(count)
        return rows(first, count)

    return fn


def counting(calls: list[tuple[int, int]]):
    def fn(first: int, count: int) -> np.ndarray:
        calls.append((first, count))
        return rows(first, count)

    return fn


def test_a_rerun_computes_only_the_missing_blocks_and_equals_the_full_run(tmp_path):
    reference = rows(0, 50)
    path = tmp_path / "j"
    with pytest.raises(Boom):
        map_blocks(failing_after(23), 50, WIDTH, "local", batch=5, journal=path, key={"a": 1})
    assert path.is_dir() and len(list(journal_segments(path))) == 4  # blocks 0..19
    calls: list[tuple[int, int]] = []
    got = map_blocks(counting(calls), 50, WIDTH, "local", batch=7, journal=path, key={"a": 1})
    assert got.tobytes() == reference.tobytes()
    assert calls == [(20, 7), (27, 7), (34, 7), (41, 7), (48, 2)]
    assert not path.exists()  # a path journal is removed when the call completes


def test_a_journal_object_holds_several_stages_and_is_removed_on_success(tmp_path):
    path = tmp_path / "j"
    with pytest.raises(Boom), Journal(path, {"seed": 3}) as journal:
        map_blocks(rows, 9, WIDTH, "local", batch=2)  # stage 0, complete
        map_blocks(failing_after(4), 12, WIDTH, "local", batch=2)  # stage 1, crashes
    assert not journal.resumed
    names = sorted(p.name for p in journal_segments(path))
    assert (
        names[0] == "s0000-b000000000000-n2.seg" and sum(n.startswith("s0001") for n in names) == 2
    )
    calls: list[tuple[int, int]] = []
    with Journal(path, {"seed": 3}) as journal:
        assert journal.resumed
        a = map_blocks(counting(calls), 9, WIDTH, "local", batch=2)
        b = map_blocks(counting(calls), 12, WIDTH, "local", batch=2)
    assert calls == [(4, 2), (6, 2), (8, 2), (10, 2)]  # stage 0 entirely from the journal
    assert a.tobytes() == rows(0, 9).tobytes() and b.tobytes() == rows(0, 12).tobytes()
    assert not path.exists()


def test_dask_resumes_a_journal_written_by_the_local_executor(tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    path = tmp_path / "j"
    with pytest.raises(Boom):
        map_blocks(failing_after(10), 31, WIDTH, "local", batch=3, journal=path, key={})
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        got = map_blocks(rows, 31, WIDTH, "dask", batch=4, scheduler=client, journal=path, key={})
    assert got.tobytes() == rows(0, 31).tobytes()


def test_a_journal_for_other_arguments_is_refused_naming_each_difference(tmp_path):
    path = tmp_path / "j"
    Journal(path, {"seed": 1, "paths": 1000, "model": {"vol": 0.2}})
    with pytest.raises(JournalMismatchError) as info:
        Journal(path, {"seed": 2, "paths": 1000, "model": {"vol": 0.3}, "extra": True})
    message = str(info.value)
    assert str(path) in message
    assert "seed: 2 here, 1 in the journal" in message
    assert "model.vol: 0.3 here, 0.2 in the journal" in message
    assert "extra: true here, absent in the journal" in message
    assert "paths" not in message
    assert info.value.all_ranks


def test_a_stage_with_other_sizes_is_refused_naming_the_segment(tmp_path):
    path = tmp_path / "j"
    with pytest.raises(Boom):
        map_blocks(failing_after(4), 10, WIDTH, "local", batch=2, journal=path, key={})
    with pytest.raises(
        JournalMismatchError,
        match=r"s0000-b000000000000-n2\.seg.*10 blocks of "
        r"width 5, this run has 11 of width 5",
    ):
        map_blocks(rows, 11, WIDTH, "local", journal=path, key={})


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_a_damaged_segment_is_an_error_naming_the_file(tmp_path, damage):
    path = tmp_path / "j"
    with pytest.raises(Boom):
        map_blocks(failing_after(6), 10, WIDTH, "local", batch=3, journal=path, key={})
    seg = sorted(journal_segments(path))[1]
    data = bytearray(seg.read_bytes())
    if damage == "flip":
        data[-3] ^= 0x40
    elif damage == "truncate":
        data = data[:-8]
    else:
        data = bytearray(b"not a segment at all")
    seg.write_bytes(bytes(data))
    expected = {
        "flip": "checksum mismatch",
        "truncate": "bytes of rows",
        "garbage": "not a journal",
    }
    with pytest.raises(CorruptJournalError, match=expected[damage]) as info:
        map_blocks(rows, 10, WIDTH, "local", journal=path, key={})
    assert str(seg) in str(info.value)
    assert len(list(journal_segments(path))) == 2  # nothing removed or half-written


def test_a_directory_that_is_no_journal_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(JournalMismatchError, match="no key.json"):
        Journal(tmp_path / "d", {})
    with pytest.raises(JournalError, match="no such directory"):
        Journal(tmp_path / "missing" / "j", {})
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "key.json").write_text("{broken")
    with pytest.raises(CorruptJournalError, match="key.json"):
        Journal(tmp_path / "j", {})


def test_stale_temporaries_are_removed_when_a_journal_is_resumed(tmp_path):
    path = tmp_path / "j"
    Journal(path, {"k": 1})
    stale = path / ".s0000-b000000000000-n4.seg.tmp-0123456789ab"
    stale.write_bytes(b"half a segment")
    key = json.loads((path / "key.json").read_text())["key"]
    assert key["k"] == 1 and "hpc_version" in key
    assert Journal(path, {"k": 1}).resumed
    assert not stale.exists()
    # a journal whose creation was killed: its temporary directory goes with the next run
    half = tmp_path / ".j2.tmp-0123456789ab"
    half.mkdir()
    (half / "key.json").write_text("{}")
    assert not Journal(tmp_path / "j2", {}).resumed
    assert not half.exists() and (tmp_path / "j2" / "key.json").exists()


def test_stage_batches_cover_exactly_the_missing_blocks():
    from hpc.journal import Stage

    done = np.zeros(20, dtype=bool)
    done[[0, 1, 2, 7, 8, 19]] = True
    stage = Stage(None, 0, 20, 1, done, np.zeros((20, 1)))  # type: ignore[arg-type]
    assert stage.batches(4) == [(3, 4), (9, 4), (13, 4), (17, 2)]
    covered = [b for first, count in stage.batches(3) for b in range(first, first + count)]
    assert covered == list(np.flatnonzero(~done))


@pytest.mark.mpi
def test_mpi_resume_on_other_rank_counts_and_errors_on_every_rank():
    proc = run_mpi(3, [str(mpi_script("check_journal.py"))], timeout=120)
    assert "journal: ok" in proc.stdout


@pytest.mark.mpi
def test_sigkill_at_random_moments_then_resume_on_other_ranks_and_executors(tmp_path):
    """Seven kills at random moments over local, dask and 1-3 MPI ranks, then a run to the end
    on yet another rank count: the output equals the uninterrupted rows bitwise, the journal
    is gone and no temporary is left."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    nblocks = 1200  # enough work (several seconds on one process) for kills to land inside it
    script = str(Path(journal_job.__file__))
    journal, out = tmp_path / "j", tmp_path / "out.npy"

    def job(executor: str, nranks: int | None) -> Launch:
        return Launch([script, str(journal), str(out), executor, str(nblocks)], nranks)

    plan = [
        job("mpi", 2), job("local", None), job("mpi", 3), job("dask", None), job("mpi", 1),
        job("local", None), job("mpi", 2),
    ]  # fmt: skip
    trials = kill_chain(plan, journal, tmp_path, rng, max_delay=0.6)
    history = f"seed {seed}\n{describe(trials)}"
    assert any(t.segments_before > 0 and not t.finished for t in trials), history
    run_to_completion(job("mpi", 2), tmp_path)
    assert np.load(out).tobytes() == rows(0, nblocks).tobytes(), history
    assert not journal.exists(), history
    assert temporaries(tmp_path) == [], history
