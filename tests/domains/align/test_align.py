"""Sequence alignment: scores against parasail and Biopython, tracebacks, I/O, MPI, CLI."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from hpc.domains.align import (
    AlphabetError,
    Gaps,
    Scoring,
    SequenceFormatError,
    align,
    get_matrix,
    read_fasta,
    read_fastq,
    read_sequences,
    rescore_cigar,
    score_many,
    score_pairs,
)

from tests.conftest import run_cudasim, run_mpi

try:  # the references (absent on the GPU machine's image: the GPU tests need neither)
    import parasail
    from Bio import Align
except ImportError:
    parasail = Align = None
requires_references = pytest.mark.skipif(parasail is None, reason="needs parasail, biopython")

AMINO = "ARNDCQEGHILKMFPSTWYV"
BASES = "ACGT"


def _seqs(rng, letters, lengths):
    pool = np.array(list(letters))
    return ["".join(pool[rng.integers(0, pool.size, int(n))]) for n in lengths]


def _lengths(rng, count, long=2):
    """Mostly short random lengths, plus ``long`` near 2000 (lengths 1 to 2000 covered)."""
    n = rng.integers(1, 300, count)
    n[:long] = rng.integers(1800, 2001, long)
    n[long] = 1
    return n


def _biopython(matrix_name, scoring, mode):
    a = Align.PairwiseAligner(mode="local" if mode == "local" else "global")
    if matrix_name.startswith("DNA"):
        mat = scoring.matrix
        arr = Align.substitution_matrices.Array(alphabet=mat.alphabet, dims=2)
        k = mat.size
        arr[:, :] = mat.scores[:k, :k]
        a.substitution_matrix = arr
    else:
        a.substitution_matrix = Align.substitution_matrices.load(matrix_name)
    a.open_gap_score = -scoring.gaps.first
    a.extend_gap_score = -scoring.gaps.extend
    if mode == "semi-global":  # the query end to end, the target's ends free
        a.end_deletion_score = 0
    return a


_PARASAIL = {"local": "sw", "global": "nw", "semi-global": "sg_dx"}


def _parasail_matrix(scoring):
    mat = scoring.matrix
    if mat.dna is None:
        return getattr(parasail, mat.name.lower())
    match, mismatch, ambiguous, _ = mat.dna
    pm = parasail.matrix_create(mat.alphabet, match, mismatch)
    for k in range(mat.size):
        pm.set_value(4, k, ambiguous)
        pm.set_value(k, 4, ambiguous)
    return pm


CASES = [
    ("BLOSUM62", 11, 1, "blast"),
    ("BLOSUM50", 10, 2, "first"),
    ("PAM250", 3, 3, "blast"),
    ("BLOSUM45", 2, 4, "first"),  # extend > first
    ("DNA:2:-3", 5, 2, "blast"),
    ("DNA:1:-1:0", 1, 3, "first"),  # extend > first
]


@requires_references
@pytest.mark.parametrize("mode", ["local", "global", "semi-global"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}")
def test_scores_equal_biopython_and_parasail_on_fresh_pairs(case, mode):
    rng = np.random.default_rng()
    name, gap_open, gap_extend, convention = case
    scoring = Scoring(name, gap_open, gap_extend, convention=convention)
    letters = "ACGTN" if name.startswith("DNA") else AMINO + "BZX"
    qs = _seqs(rng, letters, _lengths(rng, 12, 1))
    ts = _seqs(rng, letters, _lengths(rng, 12, 1))
    ours = score_pairs(qs, ts, scoring, mode, backend="cpu")
    bio = _biopython(name, scoring, mode)
    want = np.array([bio.score(t, q) for q, t in zip(qs, ts, strict=True)])
    assert np.array_equal(ours, want), (ours - want, case, mode)
    first, extend = scoring.gaps.parasail
    if extend <= first:  # parasail's scores are not those of its gap model beyond (docs)
        fn = getattr(parasail, f"{_PARASAIL[mode]}_striped_32")
        pm = _parasail_matrix(scoring)
        theirs = [fn(q, t, first, extend, pm).score for q, t in zip(qs, ts, strict=True)]
        assert np.array_equal(ours, theirs), (ours - theirs, case, mode)
    # all-vs-all (the shared-query kernel) gives the same numbers as the pair kernel
    many = score_many(qs[:3], ts, scoring, mode, backend="cpu")
    for k in range(3):
        row = score_pairs([qs[k]] * len(ts), ts, scoring, mode, backend="cpu")
        assert np.array_equal(many[k], row)
    assert np.array_equal(np.diag(many[:, :3]), ours[:3])


@pytest.mark.parametrize("mode", ["local", "global", "semi-global"])
def test_traceback_score_and_cigar_rescoring_equal_the_reported_score(mode):
    rng = np.random.default_rng()
    for name, letters, gaps in (("BLOSUM62", AMINO, (11, 1, "blast")),
                                ("DNA", BASES, (2, 5, "first"))):  # fmt: skip
        scoring = Scoring(name, *gaps[:2], convention=gaps[2])
        base = _seqs(rng, letters, rng.integers(1, 400, 8))
        qs = [_similar(rng, s, letters) for s in base]
        qs.append(_seqs(rng, letters, [1])[0])
        base.append(_seqs(rng, letters, [1500])[0])
        scores = score_pairs(qs, base, scoring, mode, backend="cpu")
        for q, t, s in zip(qs, base, scores, strict=True):
            a = align(q, t, scoring, mode)
            assert a.score == s
            assert rescore_cigar(q, t, a, scoring) == a.score
            used_q = sum(int(n) for n, op in _ops(a.cigar) if op in "MI")
            used_t = sum(int(n) for n, op in _ops(a.cigar) if op in "MD")
            assert a.query_end - a.query_start == used_q
            assert a.target_end - a.target_start == used_t
            if mode != "local":
                assert (a.query_start, a.query_end) == (0, len(q))
            if mode == "global":
                assert (a.target_start, a.target_end) == (0, len(t))
            assert 0.0 <= a.identity <= 1.0


def _ops(cigar):
    import re

    return re.findall(r"(\d+)([MID])", cigar)


def _similar(rng, seq, letters):
    out = []
    for c in seq:
        r = rng.random()
        if r < 0.05:
            out.append(letters[rng.integers(len(letters))])
        elif r < 0.07:
            continue
        elif r < 0.09:
            out.append(c + letters[rng.integers(len(letters))])
        else:
            out.append(c)
    return "".join(out) or letters[0]


def test_band_gives_the_full_score_when_wide_and_never_more():
    rng = np.random.default_rng()
    scoring = Scoring("DNA", 5, 2)
    t = _seqs(rng, BASES, [1200])[0]
    q = _similar(rng, t, BASES)
    full = align(q, t, scoring, "global")
    wide = align(q, t, scoring, "global", band=len(q) + len(t))
    assert wide == full
    narrow = align(q, t, scoring, "global", band=30)
    assert narrow.score <= full.score and rescore_cigar(q, t, narrow, scoring) == narrow.score
    assert narrow.score == full.score  # 2% indels stay inside a 30-cell band here
    with pytest.raises(ValueError, match="band"):
        align(q, t, scoring, "semi-global", band=5)


@requires_references
def test_16_bit_overflow_is_retried_with_32_bits():
    rng = np.random.default_rng()
    scoring = Scoring("DNA:20:-30", 5, 2)
    t = _seqs(rng, BASES, [1900, 300])
    q = [t[0], t[1]]  # identical: 38000 > 32767 for the first pair
    got = score_pairs(q, t, scoring, "local", backend="cpu")
    pm = _parasail_matrix(scoring)
    first, extend = scoring.gaps.parasail
    want = [
        parasail.sw_striped_32(a, b, first, extend, pm).score for a, b in zip(q, t, strict=True)
    ]
    assert list(got) == want and got[0] == 38000
    many = score_many([t[0]], t, scoring, "local", backend="cpu")
    assert many[0, 0] == 38000
    for mode in ("global", "semi-global"):  # decided before the run from the lengths
        got = score_pairs(q, t, scoring, mode, backend="cpu")
        fn = getattr(parasail, f"{_PARASAIL[mode]}_striped_32")
        assert list(got) == [fn(a, b, first, extend, pm).score for a, b in zip(q, t, strict=True)]


def test_gap_conventions_are_explicit():
    assert Gaps(11, 1, "blast") == Gaps(12, 1, "first") == Gaps(12, 1, "parasail")
    g = Gaps(11, 1, "blast")
    assert g.cost(1) == 12 and g.cost(5) == 16 and g.blast == (11, 1) and g.parasail == (12, 1)
    with pytest.raises(ValueError, match="convention"):
        Gaps(1, 1, "bwa")
    with pytest.raises(ValueError, match="non-negative"):
        Gaps(-1, 1)


def test_bad_input_gives_clear_errors():
    s = Scoring()
    with pytest.raises(AlphabetError, match=r"query 1: letter 'J' at position 3"):
        score_pairs(["ACD", "ACJ"], ["ACD", "ACD"], s)
    # an empty sequence (a read trimmed away) scores as the recurrences define
    first = s.gaps.first
    assert score_pairs([""], ["ACD"], s, "global").tolist() == [-(first + 2 * s.gaps.extend)]
    assert (align("ACD", "", s, "semi-global").score, align("", "", s, "global").score) == (
        -(first + 2 * s.gaps.extend),
        0,
    )
    with pytest.raises(ValueError, match="mode"):
        score_pairs(["A"], ["A"], s, mode="fuzzy")
    with pytest.raises(ValueError, match="unknown matrix"):
        Scoring("BLOSUM99")
    dna = get_matrix("DNA")
    assert dna.encode("acgtnRYu").tolist() == [0, 1, 2, 3, 4, 4, 4, 3]  # IUPAC codes -> N
    with pytest.raises(AlphabetError, match="'X' at position 2"):
        dna.encode("AX")
    # local alignment of unrelated letters: a documented empty alignment of score 0
    a = align("WWW", "PPP", s, "local")
    assert (a.score, a.cigar, a.query_start, a.query_end) == (0, "", 0, 0)


def test_fasta_and_fastq_readers_stream_plain_and_gzip_and_name_bad_lines(tmp_path):
    fa = tmp_path / "x.fa.gz"
    with gzip.open(fa, "wt") as fh:
        fh.write(">a first\nACGT\nAC\n\n>b\nGG\n")
    recs = list(read_sequences(fa))
    assert [(r.name, r.sequence, r.description, r.line) for r in recs] == [
        ("a", "ACGTAC", "first", 1),
        ("b", "GG", "", 5),
    ]
    fq = tmp_path / "x.fq"
    fq.write_text("@r1\nACGT\n+\nIIII\n@r2\nAC\n+\nII\n")
    assert [(r.name, r.sequence, r.quality) for r in read_sequences(fq)] == [
        ("r1", "ACGT", "IIII"),
        ("r2", "AC", "II"),
    ]
    bad = tmp_path / "bad.fq"
    bad.write_text("@r1\nACGT\n+\nIIII\n@r2\nACG\n+\nII\n")
    with pytest.raises(SequenceFormatError, match=r"bad.fq, line 8: quality has 2"):
        list(read_fastq(bad))
    bad.write_text("@r1\nACGT\n-\nIIII\n")
    with pytest.raises(SequenceFormatError, match=r"line 3: expected the '\+'"):
        list(read_fastq(bad))
    bad_fa = tmp_path / "bad.fa"
    bad_fa.write_text("ACGT\n>a\nAC\n")
    with pytest.raises(SequenceFormatError, match=r"bad.fa, line 1: sequence before"):
        list(read_fasta(bad_fa))
    bad_fa.write_text(">a\nAC\n>b\n>c\nGG\n")
    with pytest.raises(SequenceFormatError, match=r"line 3: record 'b' has no sequence"):
        list(read_fasta(bad_fa))


def _write_fasta(path, names, seqs):
    path.write_text("".join(f">{n}\n{s}\n" for n, s in zip(names, seqs, strict=True)))


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_cli_search_on_two_ranks_writes_one_table_equal_to_one_process(tmp_path):
    from hpc.domains.align import search
    from hpc.io import read_table

    rng = np.random.default_rng()
    qs = _seqs(rng, AMINO, rng.integers(20, 120, 5))
    ts = _seqs(rng, AMINO, rng.integers(20, 120, 37))
    ts[7] = qs[2][5:]  # a true hit
    _write_fasta(tmp_path / "q.fa", [f"q{k}" for k in range(5)], qs)
    _write_fasta(tmp_path / "db.fa", [f"t{k}" for k in range(37)], ts)
    out = tmp_path / "hits.h5"
    argv = ["-m", "hpc", "align", "search", str(tmp_path / "q.fa"), str(tmp_path / "db.fa"),
            "--mode", "local", "--matrix", "BLOSUM62", "--gap-open", "11", "--gap-extend", "1",
            "--top", "4", "--out", str(out)]  # fmt: skip
    proc = run_mpi(2, argv)
    assert "hits written" in proc.stderr
    table = read_table(out, "hits")
    local = search(qs, ts, Scoring("BLOSUM62", 11, 1), "local", top=4, executor="local",
                   query_names=[f"q{k}" for k in range(5)],
                   target_names=[f"t{k}" for k in range(37)])  # fmt: skip
    for key, col in local.items():
        assert np.array_equal(table[key], col), key
    assert table["target"][8] == "t7" and table["query"][8] == "q2"
    full = score_many(qs, ts, Scoring("BLOSUM62", 11, 1), "local", backend="cpu")
    best = np.sort(full, axis=1)[:, ::-1][:, :4].reshape(-1)
    assert np.array_equal(table["score"], best)
    assert not list(tmp_path.glob("*.tmp*"))


def test_cli_pairs_semi_global_writes_sam_and_reports_bad_files(tmp_path, capsys):
    from hpc.cli import main

    rng = np.random.default_rng()
    windows = _seqs(rng, BASES, [300] * 4)
    reads = [_similar(rng, w[50:200], BASES) for w in windows]
    (tmp_path / "r.fq").write_text(
        "".join(f"@r{k}\n{r}\n+\n{'I' * len(r)}\n" for k, r in enumerate(reads))
    )
    _write_fasta(tmp_path / "w.fa", [f"w{k}" for k in range(4)], windows)
    sam = tmp_path / "r.sam"
    rc = main(["align", "pairs", str(tmp_path / "r.fq"), str(tmp_path / "w.fa"), "--mode",
               "semi-global", "--matrix", "DNA", "--gap-open", "5", "--gap-extend", "2",
               "--sam", str(sam), "--quiet"])  # fmt: skip
    assert rc == 0
    lines = [ln.split("\t") for ln in sam.read_text().splitlines() if not ln.startswith("@")]
    assert len(lines) == 4
    scoring = Scoring("DNA", 5, 2)
    for k, f in enumerate(lines):
        a = align(reads[k], windows[k], scoring, "semi-global")
        assert f[0] == f"r{k}" and f[2] == f"w{k}" and int(f[3]) == a.target_start + 1
        assert f[5] == a.cigar and f[9] == reads[k] and f[11] == f"AS:i:{a.score}"
        assert abs(a.target_start - 50) < 10
    (tmp_path / "bad.fa").write_text(">a\nAC\n>b\nAXZ!\n")
    rc = main(["align", "pairs", str(tmp_path / "bad.fa"), str(tmp_path / "bad.fa"),
               "--matrix", "DNA"])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert "bad.fa" in err and "'X' at position 2" in err and "'b'" in err


def test_gpu_kernel_under_the_cuda_simulator_matches_the_cpu():
    run_cudasim("check_align_cudasim.py")


@pytest.mark.gpu
def test_gpu_scores_equal_the_cpu_scores():
    rng = np.random.default_rng()
    for name, letters in (("BLOSUM62", AMINO), ("DNA", BASES)):
        s = Scoring(name, 11, 1)
        qs = _seqs(rng, letters, rng.integers(1, 600, 300))
        ts = _seqs(rng, letters, rng.integers(1, 900, 300))
        for mode in ("local", "global", "semi-global"):
            cpu = score_pairs(qs, ts, s, mode, backend="cpu")
            gpu = score_pairs(qs, ts, s, mode, backend="gpu")
            assert np.array_equal(cpu, gpu), mode


@requires_references
def test_bench_align_prints_the_json_contract_last():
    proc = run_mpi(
        1,
        [
            "-m",
            "hpc",
            "bench",
            "align",
            "--json",
            "--queries",
            "12",
            "--targets",
            "12",
            "--reads",
            "64",
            "--reps",
            "1",
        ],  # fmt: skip
        timeout=240,
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["bench"] == "align" and record["backend"] == "cpu"
    assert [c["case"] for c in record["cases"]] == [
        "protein local BLOSUM62 11/1",
        "DNA semi-global 150 bp x 1 kb",
    ]
    for case in record["cases"]:
        assert case["scores_equal"], case
        peer = case["peers"]
        one = [v for k, v in peer.items() if k.endswith("_1core")][0]
        assert case["ratio"]["parasail_1core"] == pytest.approx(
            case["ours"]["1core"]["GCUPS"] / one["GCUPS"]
        )


@pytest.mark.timeout(120)
def test_search_on_dask_equals_one_process():
    pytest.importorskip("distributed")
    from hpc.domains.align import search

    rng = np.random.default_rng()
    qs = _seqs(rng, AMINO, rng.integers(10, 80, 3))
    ts = _seqs(rng, AMINO, rng.integers(10, 80, 21))
    local = search(qs, ts, top=3, executor="local")
    dask = search(qs, ts, top=3, executor="dask", batch=5)
    for key, col in local.items():
        assert np.array_equal(dask[key], col), key


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_cli_search_on_three_ranks_with_a_rank_owning_no_hits(tmp_path):
    from hpc.domains.align import search
    from hpc.io import read_table

    rng = np.random.default_rng()
    qs = _seqs(rng, "ACGT", [120])
    ts = _seqs(rng, "ACGT", rng.integers(100, 400, 9))
    _write_fasta(tmp_path / "q.fa", ["read"], qs)
    _write_fasta(tmp_path / "w.fa", [f"w{k}" for k in range(9)], ts)
    out = tmp_path / "hits.h5"
    run_mpi(3, ["-m", "hpc", "align", "search", str(tmp_path / "q.fa"), str(tmp_path / "w.fa"),
                "--mode", "semi-global", "--matrix", "DNA", "--top", "2", "--quiet",
                "--out", str(out)])  # fmt: skip
    table = read_table(out, "hits")
    want = search(qs, ts, Scoring("DNA", 11, 1), "semi-global", top=2, executor="local")
    assert table["query"].tolist() == ["read", "read"]
    for key in ("target_index", "score", "target_start", "target_end", "cigar"):
        assert np.array_equal(table[key], want[key]), key


@requires_references
def test_costs_too_large_for_16_bits_use_32_bits():
    rng = np.random.default_rng()
    scoring = Scoring("DNA:9000:-9000", 20000, 3000, convention="first")
    qs = _seqs(rng, BASES, rng.integers(1, 60, 10))
    ts = _seqs(rng, BASES, rng.integers(1, 60, 10))
    for mode in ("local", "global", "semi-global"):
        bio = _biopython("DNA", scoring, mode)
        want = [bio.score(t, q) for q, t in zip(qs, ts, strict=True)]
        assert score_pairs(qs, ts, scoring, mode, backend="cpu").tolist() == want
        assert score_many(qs, ts, scoring, mode, backend="cpu").diagonal().tolist() == want


@pytest.mark.parametrize("nq, nt", [(0, 3), (2, 0), (0, 0)])
def test_search_of_no_queries_or_no_targets_is_an_empty_table(nq, nt):
    from hpc.domains.align.search import HIT_COLUMNS, search

    rng = np.random.default_rng()
    rows = search(_seqs(rng, AMINO, [20] * nq), _seqs(rng, AMINO, [30] * nt), executor="local")
    assert sorted(rows) == sorted(HIT_COLUMNS)
    assert all(len(v) == 0 for v in rows.values())
