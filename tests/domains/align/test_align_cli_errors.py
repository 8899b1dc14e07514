"""``hpc align`` on bad input: one clear line naming the file or option, exit 2, no output
file left behind, checked before any scoring."""

from __future__ import annotations

import pytest

from hpc.cli import main

GOOD = ">a\nACDEFGHIK\n>b\nLMNPQRSTVW\n"


def _files(tmp_path):
    (tmp_path / "good.fa").write_text(GOOD)
    (tmp_path / "empty.fa").write_text("")
    (tmp_path / "blank.fa").write_text("\n\n")
    (tmp_path / "binary.fa").write_bytes(b"\x00\x01\x02garbage")
    (tmp_path / "noseq.fa").write_text(">a\n>b\nACD\n")
    (tmp_path / "short.fq").write_text("@r\nACGT\n+\nII\n")
    (tmp_path / "cut.fq").write_text("@r\nACGT\n+\n")
    (tmp_path / "adir.fa").mkdir()
    return tmp_path


CASES = [
    # (arguments, words of the message)
    (["search", "{t}/empty.fa", "{t}/good.fa"], ["empty.fa", "no sequences"]),
    (["search", "{t}/good.fa", "{t}/blank.fa"], ["blank.fa", "no sequences"]),
    (["pairs", "{t}/empty.fa", "{t}/empty.fa"], ["empty.fa", "no sequences"]),
    (["search", "{t}/missing.fa", "{t}/good.fa"], ["missing.fa", "No such file"]),
    (["search", "{t}/adir.fa", "{t}/good.fa"], ["adir.fa", "directory"]),
    (["search", "{t}/binary.fa", "{t}/good.fa"], ["binary.fa", "line 1", "before the first"]),
    (["search", "{t}/noseq.fa", "{t}/good.fa"], ["noseq.fa", "line 1", "'a' has no sequence"]),
    (["search", "{t}/short.fq", "{t}/good.fa"], ["short.fq", "line 4", "quality"]),
    (["search", "{t}/cut.fq", "{t}/good.fa"], ["cut.fq", "truncated"]),
    (["search", "{t}/good.fa", "{t}/good.fa", "--matrix", "BLOSUM99"], ["unknown matrix"]),
    (["search", "{t}/good.fa", "{t}/good.fa", "--matrix", "DNA:two"], ["DNA:MATCH:MISMATCH"]),
    (["search", "{t}/good.fa", "{t}/good.fa", "--matrix", "DNA"], ["'E' at position 4"]),
    (["search", "{t}/good.fa", "{t}/good.fa", "--gap-open", "-1"], ["non-negative"]),
    (["search", "{t}/good.fa", "{t}/good.fa", "--top", "0"], ["--top 0", "1 or more"]),
    (["search", "{t}/good.fa", "{t}/good.fa", "--band", "-3"], ["--band -3", "0 or more"]),
    (
        ["pairs", "{t}/good.fa", "{t}/good.fa", "--mode", "semi-global", "--band", "2"],
        ["--band needs"],
    ),
    (["pairs", "{t}/good.fa", "{t}/good.fa", "--sam", "{t}/x.sam"], ["--sam needs"]),
    (
        ["search", "{t}/good.fa", "{t}/good.fa", "--out", "{t}/nodir/hits.h5"],
        ["--out", "nodir", "does not exist"],
    ),
]


@pytest.mark.parametrize("argv, words", CASES, ids=lambda c: " ".join(c)[:40] if c else "")
def test_bad_input_is_one_line_naming_the_problem(tmp_path, capsys, argv, words):
    t = _files(tmp_path)
    before = sorted(p.name for p in t.iterdir())
    rc = main(["align", *[a.format(t=t) for a in argv], "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"hpc align {argv[0]}: error: ") and "\n" not in err, err
    for word in words:
        assert word in err, (word, err)
    assert sorted(p.name for p in t.iterdir()) == before  # nothing written, nothing half-written


def test_wrong_types_are_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["align", "search", "q.fa", "db.fa", "--top", "ten"])
    assert exc.value.code == 2
    assert "--top: invalid int value: 'ten'" in capsys.readouterr().err
