"""``hpc align search|pairs`` as jobs: --journal survives SIGKILLs bitwise, progress in cell
updates, run records (GCUPS), metrics."""

from __future__ import annotations

import io
import random
from pathlib import Path

import h5py
import numpy as np
import pytest
from hpc.io import read_table
from prometheus_client.parser import text_string_to_metric_families

from hpc.cli import main
from hpc.journal import Journal
from hpc.runrecord import read_run_record
from tests.conftest import cli_error
from tests.core.sigkill import Launch, describe, kill_chain, run_to_completion, temporaries

AMINO = "ACDEFGHIKLMNPQRSTVWY"


def _write_fasta(path: Path, names: list[str], seqs: list[str]) -> None:
    path.write_text("".join(f">{n}\n{s}\n" for n, s in zip(names, seqs, strict=True)))


def _inputs(
    tmp_path: Path, nq: int, nt: int, seed: int | None = None, qlen: tuple[int, int] = (60, 160)
) -> tuple[Path, Path]:
    """Random protein queries and a database holding mutated copies of them."""
    rng = np.random.default_rng(seed)
    queries = ["".join(rng.choice(list(AMINO), int(n))) for n in rng.integers(*qlen, nq)]
    targets = ["".join(rng.choice(list(AMINO), int(n))) for n in rng.integers(40, 240, nt)]
    for k in range(nq):  # true hits, scattered over the database
        seq = np.array(list(queries[k]))
        change = rng.random(seq.size) < 0.3
        seq[change] = rng.choice(list(AMINO), int(change.sum()))
        targets[int(rng.integers(nt))] = "".join(seq)
    q, db = tmp_path / "q.fa", tmp_path / "db.fa"
    _write_fasta(q, [f"q{k}" for k in range(nq)], queries)
    _write_fasta(db, [f"t{k}" for k in range(nt)], targets)
    return q, db


def _letters(path: Path) -> int:
    return sum(len(line) for line in path.read_text().splitlines() if not line.startswith(">"))


def _cells(q: Path, db: Path) -> float:
    """Query letters times database letters (one strand: protein)."""
    return float(_letters(q) * _letters(db))


def _hits(path: Path) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in read_table(path, "hits").items()}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Bitwise for numbers (NaN E-values included), element-wise for strings."""
    return a.keys() == b.keys() and all(
        a[k].tobytes() == b[k].tobytes() if a[k].dtype.kind != "U" else list(a[k]) == list(b[k])
        for k in a
    )


def _families(prom: Path) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(prom.read_text())}


def test_search_out_holds_a_run_record_and_metrics_parse(tmp_path, capsys):
    q, db = _inputs(tmp_path, 3, 60)
    out, prom, journal = tmp_path / "hits.h5", tmp_path / "align.prom", tmp_path / "j"
    plain = tmp_path / "plain.h5"
    argv = ["align", "search", str(q), str(db), "--top", "4", "--batch", "7", "--quiet"]
    assert main([*argv, "--out", str(plain)]) == 0
    full = [*argv, "--executor", "local", "--out", str(out), "--metrics", str(prom)]
    full += ["--journal", str(journal)]
    assert main(full) == 0
    capsys.readouterr()
    assert _same(_hits(out), _hits(plain))  # a journal changes nothing
    record = read_run_record(out)
    assert record["command"] == "hpc " + " ".join(full)
    assert (record["ranks"], record["backend"], record["executor"]) == (1, "cpu", "local")
    cells = _cells(q, db)
    assert (record["work"], record["work_unit"]) == (cells, "cell updates")
    assert record["cell_updates"] == cells
    assert (record["blocks"], record["resumed_blocks"]) == (9, 0)  # 60 targets, batches of 7
    assert record["rate_unit"] == "GCUPS"
    assert record["rate"] == cells / record["score_seconds"] / 1e9
    assert 0 < record["score_seconds"] <= record["wall_seconds"]
    assert "limit" not in record
    families = _families(prom)
    rate = families["hpc_run_rate"][0]
    assert rate.value == record["rate"]
    assert rate.labels == {"command": "align search", "backend": "cpu", "unit": "GCUPS"}
    work = families["hpc_run_work"][0]
    assert (work.value, work.labels["unit"]) == (cells, "cell updates")
    assert families["hpc_run_wall_seconds"][0].value == record["wall_seconds"]
    assert families["hpc_run_ranks"][0].value == 1
    info = families["hpc_run_info"][0].labels
    assert info["version"] == record["hpc_version"] and info["command"] == "align search"
    assert not journal.exists()
    assert temporaries(tmp_path) == []


def test_a_resumed_run_records_only_the_cell_updates_it_scored(tmp_path, capsys, monkeypatch):
    q, db = _inputs(tmp_path, 2, 50)
    journal, out = tmp_path / "j", tmp_path / "hits.h5"
    argv = ["align", "search", str(q), str(db), "--top", "3", "--batch", "5", "--quiet"]
    argv += ["--executor", "local", "--journal", str(journal), "--out", str(out)]
    monkeypatch.setattr(Journal, "complete", lambda self: None)  # keep the full journal
    assert main(argv) == 0
    first = _hits(out)
    # lose some segments, as a kill would: their blocks are scored again, the rest resumed
    segments = sorted(journal.glob("s0000-*.seg"))
    lost = segments[1::2]
    lost_blocks = sum(int(s.name.rsplit("-n", 1)[1].split(".")[0]) for s in lost)
    for seg in lost:
        seg.unlink()
    monkeypatch.undo()
    assert main(argv) == 0
    capsys.readouterr()
    assert _same(_hits(out), first)
    record = read_run_record(out)
    assert (record["blocks"], record["resumed_blocks"]) == (10, 10 - lost_blocks)
    assert record["cell_updates"] == _cells(q, db)
    assert 0 < record["work"] < record["cell_updates"]
    assert record["rate"] == record["work"] / record["score_seconds"] / 1e9
    assert not journal.exists() and temporaries(tmp_path) == []


def test_a_journal_for_other_arguments_or_another_database_is_refused(
    tmp_path, capsys, monkeypatch
):
    from hpc.domains.align.cli import _load, _open_db, _search_key

    from hpc.cli import build_parser

    q, db = _inputs(tmp_path, 2, 30)
    journal = tmp_path / "j"
    argv = ["align", "search", str(q), str(db), "--quiet", "--journal", str(journal)]
    Journal(journal, {"top": 3})  # left by another run
    err = cli_error(capsys, [*argv, "--top", "4"])
    assert f"journal {str(journal)!r} was written for other arguments" in err
    assert "top: 4 here, 3 in the journal" in err and 'matrix: "BLOSUM62" here, absent' in err
    # what the key holds: the options the hits depend on and the inputs' identity
    args = build_parser().parse_args(
        [*argv, "--top", "4", "--out", "a.h5", "--sam", "a.sam", "--tabular", "a.tsv",
         "--executor", "local", "--metrics", "m.prom", "--backend", "gpu"]
    )  # fmt: skip
    key = _search_key(args, _load(str(q)), _open_db(str(db)))
    assert not {"out", "sam", "tabular", "executor", "scheduler", "quiet", "metrics",
                "journal", "backend", "json"} & set(key)  # fmt: skip
    for name, value in [("top", 4), ("matrix", "BLOSUM62"), ("gap_open", 11), ("gap_extend", 1),
                        ("gap_convention", "blast"), ("mode", "local"), ("evalue", None),
                        ("evalue_method", "karlin"), ("strand", None), ("batch", None),
                        ("queries", str(q)), ("database", str(db))]:  # fmt: skip
        assert key[name] == value, name
    assert key["database_file"]["size"] == db.stat().st_size
    assert key["database_records"] == {"count": 30, "residues": _letters(db)}
    assert len(key["queries_sha256"]) == 64 and key["command"] == "search"
    # the same path with other content: refused, naming the database's identity
    journal2 = tmp_path / "j2"
    argv = ["align", "search", str(q), str(db), "--quiet", "--journal", str(journal2)]
    monkeypatch.setattr(Journal, "complete", lambda self: None)  # keep the full journal
    assert main(argv) == 0
    monkeypatch.undo()
    capsys.readouterr()
    with open(db, "a") as fh:
        fh.write(">extra\nMKV\n")
    err = cli_error(capsys, argv)
    assert "database_file.size" in err and "database_records.count: 31 here, 30 in" in err


def test_search_feeds_a_progress_bar_in_cell_updates_with_gcups():
    from hpc.domains.align import Scoring, search

    from hpc.comm import self_comm
    from hpc.progress import Progress

    rng = np.random.default_rng()
    queries = ["".join(rng.choice(list(AMINO), 50)) for _ in range(2)]
    targets = ["".join(rng.choice(list(AMINO), int(n))) for n in rng.integers(20, 90, 40)]
    cells = 100.0 * sum(map(len, targets))
    buf = io.StringIO()
    figures: dict = {}
    with Progress(cells, "cell updates", comm=self_comm(), file=buf) as bar:
        with bar.phase(cells) as phase:
            search(queries, targets, Scoring(), top=2, executor="local", batch=3,
                   figures=figures)  # fmt: skip
        counter = phase.counters[0]
        assert (counter.nblocks, counter.mine) == (figures["blocks"], 14)  # 40 targets / 3
        assert bar.n == cells == figures["cell_updates"]
    text = buf.getvalue()
    assert "cell updates/s" in text and "GCUPS=" in text


def test_pairs_out_holds_a_run_record_and_metrics(tmp_path, capsys):
    rng = np.random.default_rng()
    reads = ["".join(rng.choice(list("ACGT"), 60)) for _ in range(5)]
    windows = ["".join(rng.choice(list("ACGT"), 200)) for _ in range(5)]
    _write_fasta(tmp_path / "r.fa", [f"r{k}" for k in range(5)], reads)
    _write_fasta(tmp_path / "w.fa", [f"w{k}" for k in range(5)], windows)
    out, prom = tmp_path / "pairs.h5", tmp_path / "pairs.prom"
    argv = ["align", "pairs", str(tmp_path / "r.fa"), str(tmp_path / "w.fa")]
    argv += ["--mode", "semi-global", "--matrix", "DNA", "--out", str(out), "--metrics", str(prom)]
    assert main(argv) == 0
    capsys.readouterr()
    record = read_run_record(out)
    assert record["command"] == "hpc " + " ".join(argv)
    assert (record["work"], record["work_unit"], record["rate_unit"]) == (
        5 * 60 * 200.0,
        "cell updates",
        "GCUPS",
    )
    assert record["rate"] == record["work"] / record["align_seconds"] / 1e9
    with h5py.File(out, "r") as f:
        assert sorted(f) == ["hits", "run"]
    families = _families(prom)
    assert families["hpc_run_rate"][0].labels["command"] == "align pairs"
    assert families["hpc_run_rate"][0].value == record["rate"]
    assert temporaries(tmp_path) == []


def test_store_out_holds_a_run_record(tmp_path, capsys):
    from hpc.domains.align.database import open_database

    _, db = _inputs(tmp_path, 1, 25)
    out, prom = tmp_path / "db.h5", tmp_path / "store.prom"
    argv = ["align", "store", str(db), "--out", str(out), "--metrics", str(prom), "--quiet"]
    assert main(argv) == 0
    assert capsys.readouterr().err == ""
    record = read_run_record(out)
    assert record["command"] == "hpc " + " ".join(argv)
    assert (record["work"], record["work_unit"], record["sequences"]) == (
        _letters(db),
        "letters",
        25,
    )
    assert record["rate"] == record["work"] / record["wall_seconds"]
    assert (open_database(str(out)).count, open_database(str(out)).residues) == (25, _letters(db))
    assert _families(prom)["hpc_run_rate"][0].labels["unit"] == "letters/s"
    assert temporaries(tmp_path) == []


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_two_ranks_with_the_local_executor_write_each_hit_once(tmp_path):
    q, db = _inputs(tmp_path, 3, 40)
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    argv = ["-m", "hpc", "align", "search", str(q), str(db), "--top", "2", "--quiet"]
    run_to_completion(Launch([*argv, "--tabular", str(one)]), tmp_path)
    run_to_completion(Launch([*argv, "--executor", "local", "--tabular", str(two)], 2), tmp_path)
    assert len(one.read_text().splitlines()) == 6
    assert two.read_bytes() == one.read_bytes()


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_search_survives_ten_sigkills_on_changing_ranks_and_executors(tmp_path, capsys):
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    # about 3e9 cell updates in 300 blocks: 2 s of scoring on an idle 2-core machine, so
    # most kills land inside the work
    q, db = _inputs(tmp_path, 6, 12000, seed, qlen=(250, 350))
    common = [str(q), str(db), "--top", "5", "--batch", "40", "--evalue", "10"]
    names = ("hits.h5", "hits.tsv", "hits.sam")
    ref = [tmp_path / f"reference.{n}" for n in names]
    outputs = ["--out", str(ref[0]), "--tabular", str(ref[1]), "--sam", str(ref[2])]
    assert main(["align", "search", *common, "--executor", "local", "--quiet", *outputs]) == 0
    capsys.readouterr()
    reference = (_hits(ref[0]), ref[1].read_bytes(), ref[2].read_bytes())
    for path in ref:
        path.unlink()
    journal = tmp_path / "j"
    out = [tmp_path / n for n in names]

    def job(nranks: int | None, executor: str = "mpi") -> Launch:
        argv = ["-m", "hpc.cli", "align", "search", *common, "--executor", executor, "--quiet"]
        argv += ["--journal", str(journal), "--out", str(out[0])]
        return Launch([*argv, "--tabular", str(out[1]), "--sam", str(out[2])], nranks)

    plan = [
        job(2), job(None, "local"), job(1), job(3), job(None, "dask"),
        job(2), job(None), job(2, "local"), job(1), job(None, "local"),
    ]  # fmt: skip
    trials = kill_chain(plan, journal, tmp_path, rng, max_delay=0.7)
    history = f"seed {seed}\n{describe(trials)}"
    assert any(t.segments_before > 0 and not t.finished for t in trials), history
    left = trials[-1].segments_after  # what the last kill left: the final run resumes it
    run_to_completion(job(3), tmp_path)
    got = (_hits(out[0]), out[1].read_bytes(), out[2].read_bytes())
    assert _same(got[0], reference[0]), history
    assert got[1:] == reference[1:], history
    record = read_run_record(out[0])
    assert record["ranks"] == 3 and record["cell_updates"] == _cells(q, db), history
    assert (record["resumed_blocks"] > 0) == (left > 0), history
    assert not journal.exists(), history
    assert temporaries(tmp_path) == [], history


def test_many_queries_cut_into_chunks_resume_to_the_same_hits(tmp_path, monkeypatch):
    import importlib

    from hpc.domains.align import Scoring, search

    search_module = importlib.import_module("hpc.domains.align.search")
    rng = np.random.default_rng()
    queries = ["".join(rng.choice(list(AMINO), int(n))) for n in rng.integers(10, 60, 13)]
    targets = ["".join(rng.choice(list(AMINO), int(n))) for n in rng.integers(10, 80, 50)]
    kwargs = dict(scoring=Scoring(), top=3, executor="local", batch=4)
    want = search(queries, targets, **kwargs)
    # top-k lists of all blocks limited to ~3 database blocks: the queries go in chunks
    monkeypatch.setattr(search_module, "_ROWS_BYTES", 3 * (16 * 13 * 3 + 16))
    lay = search_module._layout(50, 13, 3, 4)
    assert (lay.nbatches, lay.per, lay.ndb, lay.qrows, lay.nqc) == (13, 5, 3, 3, 5)
    journal = tmp_path / "j"
    monkeypatch.setattr(Journal, "complete", lambda self: None)  # keep the full journal
    figures: dict = {}
    with Journal(journal, {"case": 1}):
        got = search(queries, targets, **kwargs, figures=figures)
    assert _same(got, want)
    assert (figures["blocks"], figures["resumed_blocks"]) == (15, 0)
    for seg in sorted(journal.glob("s0000-*.seg"))[::2]:
        seg.unlink()
    with Journal(journal, {"case": 1}):
        got = search(queries, targets, **kwargs, figures=figures)
    assert _same(got, want)
    assert 0 < figures["resumed_blocks"] < 15
    assert 0 < figures["scored_cell_updates"] < figures["cell_updates"]
    assert figures["cell_updates"] == sum(map(len, queries)) * sum(map(len, targets))
