"""Database search that scales and that biologists can trust: E-values and bit scores against
NCBI BLAST+, the streaming top-k against the full score matrix, both DNA strands, the HDF5
sequence store, SAM and BLAST tabular output, and the same table on 2 MPI ranks."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hpc.domains.align import Scoring, score_many, search
from hpc.domains.align.database import open_database, write_store
from hpc.domains.align.search import HIT_COLUMNS
from hpc.domains.align.seqio import tabular_fields
from hpc.domains.align.stats import StatisticsError, karlin_altschul

from tests.conftest import run_mpi

try:
    from Bio import Align
except ImportError:
    Align = None

AMINO = np.array(list("ARNDCQEGHILKMFPSTWYV"))
BASES = np.array(list("ACGT"))
HAS_BLAST = bool(shutil.which("blastp") and shutil.which("makeblastdb"))
requires_blast = pytest.mark.skipif(not HAS_BLAST, reason="needs NCBI BLAST+ (ncbi-blast+)")


def _random(rng, letters, lengths):
    return ["".join(letters[rng.integers(0, letters.size, int(n))]) for n in lengths]


def _mutate(rng, seq, rate):
    """Substitutions, deletions and insertions at ``rate`` per letter."""
    out = []
    for c in seq:
        r = rng.random()
        if r < 0.7 * rate:
            out.append(AMINO[rng.integers(0, 20)])
        elif r < 0.85 * rate:
            continue
        elif r < rate:
            out.append(c + AMINO[rng.integers(0, 20)])
        else:
            out.append(c)
    return "".join(out)


def _write_fasta(path, names, seqs):
    path.write_text("".join(f">{n}\n{s}\n" for n, s in zip(names, seqs, strict=True)))


def _rows(table):
    return [{k: v[i] for k, v in table.items()} for i in range(len(table["score"]))]


def _same_table(a, b, keys=HIT_COLUMNS):
    for key in keys:
        if a[key].dtype.kind == "f":
            assert np.array_equal(a[key], b[key], equal_nan=True), key
        else:
            assert np.array_equal(a[key], b[key]), key


# --------------------------------------------------------------------------- statistics


def test_published_parameters_and_refused_settings():
    ka = karlin_altschul(Scoring("BLOSUM62", 11, 1))
    assert (ka.lam, ka.k, ka.h, ka.alpha, ka.beta) == (0.267, 0.041, 0.14, 1.9, -30)
    # the same gaps in the other spelling: BLAST's 11/1 is first-letter 12/1
    assert karlin_altschul(Scoring("BLOSUM62", 12, 1, "first")) == ka
    bits = ka.bit_scores(100)
    assert bits == pytest.approx((0.267 * 100 - math.log(0.041)) / math.log(2), rel=1e-15)
    with pytest.raises(StatisticsError, match=r"BLOSUM62 with BLAST gap costs 5/5.*11/1"):
        karlin_altschul(Scoring("BLOSUM62", 5, 5))
    with pytest.raises(StatisticsError, match="no published statistical parameters"):
        karlin_altschul(Scoring("DNA:3:-3", 5, 2))  # 1/-1 has no 5/2 row (scaled by 3)
    # a common factor: 2/-4 is 1/-2 with lambda halved and the gap costs doubled
    dna = karlin_altschul(Scoring("DNA:2:-4", 4, 2))
    assert (dna.lam, dna.k, dna.alpha, dna.beta) == (1.29 / 2, 0.49, 1.4 / 2, -1)
    assert karlin_altschul(Scoring("DNA:2:-3", 5, 2)).even_scores
    with pytest.raises(StatisticsError, match="Spouge"):
        dna.evalues(20, 100, 100, 10_000, 10, method="spouge")


def test_length_adjustment_is_the_floor_of_the_fixed_point():
    from scipy.optimize import brentq

    ka = karlin_altschul(Scoring("BLOSUM62", 11, 1))
    # a large database; a short query against a small one (the bound binds); a long query
    for m, n, count in [(250, 10**6, 3000), (57, 20_000, 40), (1000, 10**9, 3 * 10**6)]:

        def f(ell, m=m, n=n, count=count):
            logk, a = math.log(ka.k), ka.alpha / ka.lam
            return a * (logk + math.log((m - ell) * (n - count * ell))) + ka.beta - ell

        def room(ell, m=m, n=n, count=count):  # BLAST keeps K m' n' above max(m, n)
            return ka.k * (m - ell) * (n - count * ell) - max(m, n)

        top = min(m, n / count) - 1e-6
        fixed = brentq(f, 0.0, top)
        cap = brentq(room, 0.0, top) if room(top) < 0 else top
        ell = math.floor(min(fixed, cap))
        assert ka.length_adjustment(m, n, count) == ell
        space = (m - ell) * (n - count * ell)
        assert ka.evalues(60, m, 1, n, count) == pytest.approx(
            space * ka.k * math.exp(-ka.lam * 60), rel=1e-12
        )


# --------------------------------------------------------------------------- against BLAST+


def _blast_hits(tmp_path, queries, targets, scoring, old_fsc):
    """``{(query, target): (score, bits, evalue, hsp)}`` of BLAST's best HSPs."""
    _write_fasta(tmp_path / "q.fa", [f"q{k}" for k in range(len(queries))], queries)
    _write_fasta(tmp_path / "db.fa", [f"t{k}" for k in range(len(targets))], targets)
    db = tmp_path / "db"
    subprocess.run(["makeblastdb", "-in", str(tmp_path / "db.fa"), "-dbtype", "prot",
                    "-out", str(db)], check=True, capture_output=True)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OLD_FSC"}
    if old_fsc:
        env["OLD_FSC"] = "1"  # BLAST's Karlin-Altschul E-values instead of Spouge's
    gap_open, gap_extend = scoring.gaps.blast
    out = tmp_path / "out.xml"
    subprocess.run(["blastp", "-query", str(tmp_path / "q.fa"), "-db", str(db),
                    "-use_sw_tback", "-comp_based_stats", "0", "-seg", "no",
                    "-matrix", scoring.matrix.name, "-gapopen", str(gap_open),
                    "-gapextend", str(gap_extend), "-evalue", "10", "-max_target_seqs", "500",
                    "-outfmt", "5", "-out", str(out)],
                   check=True, capture_output=True, env=env, timeout=120)  # fmt: skip
    hits = {}
    for it in ET.parse(out).getroot().iter("Iteration"):
        q = int(it.find("Iteration_query-def").text[1:])
        for hit in it.iter("Hit"):
            t = int(hit.find("Hit_def").text[1:])
            hsp = hit.find("Hit_hsps/Hsp")
            hits[q, t] = (
                int(hsp.find("Hsp_score").text),
                hsp.find("Hsp_bit-score").text,
                float(hsp.find("Hsp_evalue").text),
                {c.tag: c.text for c in hsp},
            )
    return hits


def _printed_equal(value, text):
    """``value`` equals BLAST's printed number to the digits printed (``%g``: 6 digits)."""
    printed = float(text)
    if printed == 0:
        return value == 0
    return abs(value - printed) <= 0.5 * 10 ** (math.floor(math.log10(abs(printed))) - 5) * 1.01


@requires_blast
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "matrix, gaps", [("BLOSUM62", (11, 1)), ("PAM30", (9, 1)), ("PAM250", (14, 2))]
)
def test_scores_bit_scores_and_evalues_equal_blastp(tmp_path, matrix, gaps):
    rng = np.random.default_rng()
    scoring = Scoring(matrix, *gaps, convention="blast")
    queries = _random(rng, AMINO, rng.integers(60, 300, 6))
    targets = _random(rng, AMINO, rng.integers(40, 400, 50))
    for k, q in enumerate(queries):  # related targets: mutated copies, from close to remote
        targets[7 * k + 1] = _mutate(rng, q, 0.1 + 0.1 * k)
    ka = karlin_altschul(scoring)
    full = score_many(queries, targets, scoring, "local", backend="cpu")
    db_length, db_count = sum(map(len, targets)), len(targets)
    worst = {}
    for method, old_fsc in (("karlin", True), ("spouge", False)):
        hits = _blast_hits(tmp_path, queries, targets, scoring, old_fsc)
        assert len(hits) >= len(queries)  # at least the mutated copies
        ours = search(queries, targets, scoring, top=db_count, evalue=10, executor="local",
                      evalue_method=method)  # fmt: skip
        pairs = zip(ours["query_index"], ours["target_index"], strict=True)
        by_pair = {(int(q), int(t)): i for i, (q, t) in enumerate(pairs)}
        rel = []
        for (q, t), (score, bits, evalue, _) in hits.items():
            assert score == full[q, t], (q, t)  # the exact Smith-Waterman score
            assert _printed_equal(float(ka.bit_scores(score)), bits), (q, t, bits)
            e = ka.evalues(score, len(queries[q]), len(targets[t]), db_length, db_count, method)
            if evalue == 0:  # BLAST prints 0 below about 1e-180
                assert e < 1e-170
                continue
            rel.append(abs(float(e) / evalue - 1))
            if evalue <= 10 * 0.98 and (q, t) in by_pair:  # the search reports it the same
                row = by_pair[q, t]
                assert ours["score"][row] == score
                assert ours["evalue"][row] == pytest.approx(float(e), rel=1e-12)
        # BLAST's heuristics may miss a hit the full search finds, never the other way round
        missed = [qt for qt, h in hits.items() if h[2] <= 9.8 and qt not in by_pair]
        assert not missed
        worst[method] = max(rel)
        assert worst[method] < 0.02, (method, worst[method])
    print(f"\n{matrix} {gaps}: {len(hits)} BLAST alignments, max E-value rel. diff {worst}")


@requires_blast
@pytest.mark.timeout(120)
def test_tabular_columns_equal_blastp_where_the_alignment_is_the_same(tmp_path):
    rng = np.random.default_rng()
    scoring = Scoring("BLOSUM62", 11, 1)
    queries = _random(rng, AMINO, rng.integers(80, 250, 5))
    targets = _random(rng, AMINO, rng.integers(60, 300, 30))
    for k, q in enumerate(queries):
        targets[6 * k] = _mutate(rng, q, 0.15 + 0.05 * k)
    hits = _blast_hits(tmp_path, queries, targets, scoring, old_fsc=True)
    ours = search(queries, targets, scoring, top=3, executor="local", evalue=1e-3,
                  query_names=[f"q{k}" for k in range(5)],
                  target_names=[f"t{k}" for k in range(30)])  # fmt: skip
    same = 0
    for r in _rows(ours):
        q, t = int(r["query_index"]), int(r["target_index"])
        h = hits[q, t][3]
        f = tabular_fields(r)
        coords = [int(h[k]) for k in ("Hsp_query-from", "Hsp_query-to", "Hsp_hit-from",
                                      "Hsp_hit-to")]  # fmt: skip
        if [int(x) for x in f[6:10]] != coords:
            continue  # a co-optimal alignment elsewhere: the columns need not agree
        same += 1
        length, ident, gaps = (int(h[k]) for k in ("Hsp_align-len", "Hsp_identity", "Hsp_gaps"))
        assert f[:2] == [f"q{q}", f"t{t}"]
        # percent identity printed with 3 decimals: within half a unit of the last one (a
        # tie such as 92.1875 prints either way; 1e-9 absorbs the binary representation)
        assert int(f[3]) == length
        assert abs(float(f[2]) - 100 * ident / length) <= 5e-4 + 1e-9
        assert int(f[4]) == length - ident - gaps
    assert same >= len(queries) // 2  # most best alignments are unique


# --------------------------------------------------------------------------- streaming top-k


def _full_topk(queries, targets, scoring, top, evalue=None):
    full = score_many(queries, targets, scoring, "local", backend="cpu")
    if evalue is not None:
        ka = karlin_altschul(scoring)
        e = ka.evalues(full, np.array([len(q) for q in queries])[:, None],
                       np.array([len(t) for t in targets])[None, :],
                       sum(map(len, targets)), len(targets))  # fmt: skip
        full = np.where(e <= evalue, full, -(1 << 62))
    order = np.argsort(-full, axis=1, kind="stable")[:, :top]  # ties: the lower index
    keep = np.take_along_axis(full, order, 1) > -(1 << 62)
    return order[keep], np.take_along_axis(full, order, 1)[keep]


@pytest.mark.parametrize("batch", [1, 7, None])
def test_streaming_topk_equals_the_full_matrix_topk(tmp_path, batch):
    rng = np.random.default_rng()
    scoring = Scoring("BLOSUM62", 11, 1)
    queries = _random(rng, AMINO, rng.integers(5, 40, 4))  # short: many tied scores
    targets = _random(rng, AMINO, rng.integers(5, 60, 40))
    targets[11] = targets[3]  # an exact tie between two targets
    targets[25] = _mutate(rng, queries[1], 0.1)
    names = [f"t{k}" for k in range(40)]
    want_t, want_s = _full_topk(queries, targets, scoring, 6)
    got = search(queries, targets, scoring, top=6, executor="local", batch=batch)
    assert np.array_equal(got["target_index"], want_t)
    assert np.array_equal(got["score"], want_s)
    # the E-value threshold is applied before the top-k
    want_t, want_s = _full_topk(queries, targets, scoring, 6, evalue=5.0)
    got = search(queries, targets, scoring, top=6, executor="local", batch=batch, evalue=5.0)
    assert np.array_equal(got["target_index"], want_t)
    assert np.array_equal(got["score"], want_s) and (got["evalue"] <= 5.0).all()
    # the same hits from a FASTA file and from an HDF5 sequence store
    _write_fasta(tmp_path / "db.fa", names, targets)
    assert write_store(tmp_path / "db.h5", str(tmp_path / "db.fa")) == (40, sum(map(len, targets)))
    for db in (str(tmp_path / "db.fa"), str(tmp_path / "db.h5")):
        other = search(queries, db, scoring, top=6, executor="local", batch=batch, evalue=5.0)
        _same_table(other, {**got, "target": np.array([names[t] for t in got["target_index"]])})


def test_db_size_sets_the_search_space_and_other_modes_have_no_evalues():
    rng = np.random.default_rng()
    queries = _random(rng, AMINO, [60, 90])
    targets = _random(rng, AMINO, rng.integers(50, 150, 12))
    got = search(queries, targets, top=3, executor="local", db_size=(10**9, 10**6))
    ka = karlin_altschul(Scoring())
    space = np.array([ka.search_space(int(m), 10**9, 10**6) for m in got["query_length"]])
    want = space * 0.041 * np.exp(-0.267 * got["score"])  # BLOSUM62 11/1: K, lambda
    assert np.allclose(got["evalue"], want, rtol=1e-12, atol=0)
    assert np.allclose(got["bit_score"], ka.bit_scores(got["score"]), rtol=1e-15)
    semi = search(queries, targets, top=3, mode="semi-global", executor="local")
    assert np.isnan(semi["evalue"]).all() and np.isnan(semi["bit_score"]).all()
    with pytest.raises(StatisticsError, match="local alignments"):
        search(queries, targets, mode="global", evalue=1.0, executor="local")
    with pytest.raises(StatisticsError, match="5/5"):
        search(queries, targets, Scoring("BLOSUM62", 5, 5), evalue=1.0, executor="local")


def test_no_block_of_scores_is_larger_than_a_batch(monkeypatch):
    import importlib

    search_module = importlib.import_module("hpc.domains.align.search")

    seen = []
    real = search_module.score_many

    def spy(queries, targets, *args, **kwargs):
        seen.append(len(targets))
        return real(queries, targets, *args, **kwargs)

    monkeypatch.setattr(search_module, "score_many", spy)
    rng = np.random.default_rng()
    search(_random(rng, AMINO, [30] * 3), _random(rng, AMINO, [40] * 23), top=2,
           executor="local", batch=5)  # fmt: skip
    assert seen == [5, 5, 5, 5, 3]


def test_store_reads_back_the_records_and_refuses_other_files(tmp_path):
    records = [("a", "acgtn"), ("b", ""), ("c", "MKV" * 1000)]
    assert write_store(tmp_path / "s.h5", records, chunk=7) == (3, 3005)
    db = open_database(str(tmp_path / "s.h5"))
    assert (db.count, db.residues) == (3, 3005)
    assert [b[1:] for b in db.batches(2)] == [(["a", "b"], ["ACGTN", ""]), (["c"], ["MKV" * 1000])]
    assert db.fetch(np.array([2, 0])) == {0: ("a", "ACGTN"), 2: ("c", "MKV" * 1000)}
    from hpc.io import MissingDataError, write_table

    write_table(tmp_path / "t.h5", "x", {"v": np.arange(3)})
    with pytest.raises(MissingDataError, match="no sequence store"):
        open_database(str(tmp_path / "t.h5"))


# --------------------------------------------------------------------------- DNA strands


@pytest.mark.skipif(Align is None, reason="needs biopython")
def test_dna_search_scores_both_strands_and_reports_the_strand(tmp_path):
    rng = np.random.default_rng()
    scoring = Scoring("DNA:1:-2", 2, 1)  # blastn's 1/-2 with BLAST gaps 2/1
    targets = _random(rng, BASES, rng.integers(200, 600, 12))
    window = targets[5][50:170]
    comp = str.maketrans("ACGT", "TGCA")
    reads = [window.translate(comp)[::-1], window, _random(rng, BASES, [90])[0]]
    got = search(reads, targets, scoring, top=3, executor="local")
    bio = Align.PairwiseAligner(mode="local", match_score=1, mismatch_score=-2,
                                open_gap_score=-3, extend_gap_score=-1)  # fmt: skip
    for r in _rows(got):
        read = reads[int(r["query_index"])]
        aligned = read.translate(comp)[::-1] if r["strand"] == "-" else read
        assert r["score"] == bio.score(targets[int(r["target_index"])], aligned)
    first = {int(q): i for i, q in reversed(list(enumerate(got["query_index"])))}
    assert got["strand"][first[0]] == "-" and got["strand"][first[1]] == "+"
    assert got["target_index"][first[0]] == 5 and got["score"][first[0]] == 120
    assert got["evalue"][first[0]] < 1e-50
    # blastn's coordinates on the minus strand: the query as read, the subject backwards
    f = tabular_fields(_rows(got)[first[0]])
    assert f[6:10] == ["1", "120", "170", "51"]
    assert set(got["strand"]) <= {"+", "-"}
    plus = search(reads, targets, scoring, top=3, executor="local", strand="plus")
    assert set(plus["strand"]) == {"+"}
    with pytest.raises(ValueError, match="DNA"):
        search(reads, targets, Scoring("BLOSUM62"), executor="local", strand="both")


@pytest.mark.skipif(not shutil.which("blastn"), reason="needs NCBI BLAST+ (ncbi-blast+)")
@pytest.mark.timeout(120)
def test_dna_evalues_and_strands_equal_blastn(tmp_path):
    rng = np.random.default_rng()
    targets = _random(rng, BASES, rng.integers(300, 1500, 30))
    comp = str.maketrans("ACGT", "TGCA")
    reads = []
    for k in range(6):  # windows of targets, mutated, every other one reverse-complemented
        w = "".join(c if rng.random() > 0.05 + 0.03 * k else BASES[rng.integers(0, 4)]
                    for c in targets[4 * k][50:300])  # fmt: skip
        reads.append(w.translate(comp)[::-1] if k % 2 else w)
    _write_fasta(tmp_path / "q.fa", [f"q{k}" for k in range(6)], reads)
    _write_fasta(tmp_path / "db.fa", [f"t{k}" for k in range(30)], targets)
    subprocess.run(["makeblastdb", "-in", str(tmp_path / "db.fa"), "-dbtype", "nucl",
                    "-out", str(tmp_path / "db")], check=True, capture_output=True)  # fmt: skip
    worst, agree, total = 0.0, 0, 0
    for match, mismatch, gap_open, gap_extend in ((1, -2, 2, 1), (2, -3, 5, 2)):  # 2/-3: even
        out = tmp_path / "out.xml"
        subprocess.run(["blastn", "-task", "blastn", "-query", str(tmp_path / "q.fa"),
                        "-db", str(tmp_path / "db"), "-reward", str(match),
                        "-penalty", str(mismatch), "-gapopen", str(gap_open),
                        "-gapextend", str(gap_extend), "-dust", "no", "-soft_masking", "false",
                        "-evalue", "10", "-outfmt", "5", "-out", str(out)],
                       check=True, capture_output=True, timeout=60)  # fmt: skip
        scoring = Scoring(f"DNA:{match}:{mismatch}", gap_open, gap_extend)
        ours = search(reads, str(tmp_path / "db.fa"), scoring, top=30, evalue=10,
                      executor="local")  # fmt: skip
        keys = zip(ours["query_index"], ours["target"], ours["strand"], strict=True)
        row = {(int(q), str(t), s): i for i, (q, t, s) in enumerate(keys)}
        for it in ET.parse(out).getroot().iter("Iteration"):
            q = int(it.find("Iteration_query-def").text[1:])
            for hit in it.iter("Hit"):
                hsp = hit.find("Hit_hsps/Hsp")
                strand = "+" if int(hsp.find("Hsp_hit-frame").text) > 0 else "-"
                score, evalue = int(hsp.find("Hsp_score").text), float(hsp.find("Hsp_evalue").text)
                i = row[q, hit.find("Hit_def").text, strand]  # ours has every hit, same strand
                total += 1
                if ours["score"][i] != score:  # blastn's X-drop may stop short of the optimum
                    assert ours["score"][i] > score
                    continue
                agree += 1
                if evalue > 0:
                    worst = max(worst, abs(ours["evalue"][i] / evalue - 1))
    assert agree >= 0.9 * total and total >= 12
    assert worst < 0.02
    print(f"\nblastn: {total} alignments, {agree} same score, max E-value rel. diff {worst:.2g}")


# --------------------------------------------------------------------------- CLI and MPI


def test_cli_store_search_tabular_sam_and_refusals(tmp_path, capsys):
    from hpc.io import read_table

    from hpc.cli import main

    rng = np.random.default_rng()
    queries = _random(rng, AMINO, [80, 120])
    targets = _random(rng, AMINO, rng.integers(50, 200, 15))
    targets[4] = queries[1][10:100]
    _write_fasta(tmp_path / "q.fa", ["qa", "qb"], queries)
    _write_fasta(tmp_path / "db.fa", [f"t{k}" for k in range(15)], targets)
    assert main(["align", "store", str(tmp_path / "db.fa"), "--out", str(tmp_path / "db.h5")]) == 0
    assert "15 sequences" in capsys.readouterr().err
    (tmp_path / "cut.fa").write_text(">a\nACGT\n>b\n")
    assert main(["align", "store", str(tmp_path / "cut.fa"), "--out", str(tmp_path / "x.h5")]) == 2
    assert "cut.fa, line 3: record 'b' has no sequence" in capsys.readouterr().err
    assert not (tmp_path / "x.h5").exists()
    argv = ["align", "search", str(tmp_path / "q.fa"), str(tmp_path / "db.h5"), "--top", "2",
            "--evalue", "1e-3", "--quiet", "--out", str(tmp_path / "hits.h5"),
            "--tabular", str(tmp_path / "hits.tsv"),
            "--sam", str(tmp_path / "hits.sam")]  # fmt: skip
    assert main(argv) == 0
    table = read_table(tmp_path / "hits.h5", "hits")
    assert table["query"].tolist() == ["qb"] and table["target"].tolist() == ["t4"]
    line = (tmp_path / "hits.tsv").read_text().splitlines()
    assert line[0].split("\t")[:10] == ["qb", "t4", "100.000", "90", "0", "0", "11", "100", "1",
                                        "90"]  # fmt: skip
    sam = [x.split("\t") for x in (tmp_path / "hits.sam").read_text().splitlines()]
    assert ["@SQ", "SN:t4", "LN:90"] in sam
    assert sam[-1][:6] == ["qb", "0", "t4", "1", "255", "10S90M20S"]
    for extra, words in [
        (["--evalue", "1", "--gap-open", "5", "--gap-extend", "5"], "no published statistical"),
        (["--evalue", "0"], "--evalue 0"),
        (["--evalue", "1", "--mode", "global"], "--evalue needs --mode local"),
        (["--strand", "both"], "--strand both needs a DNA matrix"),
        (["--batch", "0"], "--batch 0"),
    ]:
        assert main(argv[:4] + extra) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("hpc align search: error: ") and words in err, err


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_two_ranks_stream_a_store_in_batches_into_the_one_process_table(tmp_path):
    from hpc.io import read_table

    rng = np.random.default_rng()
    queries = _random(rng, AMINO, rng.integers(30, 120, 4))
    targets = _random(rng, AMINO, rng.integers(20, 150, 41))
    targets[9] = _mutate(rng, queries[2], 0.2)
    names = [f"t{k}" for k in range(41)]
    _write_fasta(tmp_path / "q.fa", [f"q{k}" for k in range(4)], queries)
    _write_fasta(tmp_path / "db.fa", names, targets)
    write_store(tmp_path / "db.h5", str(tmp_path / "db.fa"))
    out = tmp_path / "hits.h5"
    run_mpi(2, ["-m", "hpc", "align", "search", str(tmp_path / "q.fa"), str(tmp_path / "db.h5"),
                "--top", "3", "--batch", "4", "--evalue", "5", "--evalue-method", "spouge",
                "--quiet", "--out", str(out)])  # fmt: skip
    table = read_table(out, "hits")
    local = search(queries, targets, Scoring(), top=3, executor="local", evalue=5,
                   evalue_method="spouge", query_names=[f"q{k}" for k in range(4)],
                   target_names=names)  # fmt: skip
    _same_table(table, local)
    assert "t9" in table["target"][table["query"] == "q2"]
    # a bad letter in a batch of one rank: both ranks stop with the message, no hang
    _write_fasta(tmp_path / "bad.fa", [*names, "odd"], [*targets, "MKV1LA"])
    argv = ["-m", "hpc", "align", "search", str(tmp_path / "q.fa"), str(tmp_path / "bad.fa"),
            "--batch", "3", "--quiet"]  # fmt: skip
    proc = run_mpi(2, argv, check=False)
    assert proc.returncode == 2
    assert "bad.fa: target 'odd': letter '1' at position 4" in proc.stderr
