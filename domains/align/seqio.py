"""Sequence files: streaming FASTA/FASTQ readers (plain or gzip) and a SAM writer.

Readers yield :class:`Record` objects one at a time, so files larger than memory stream. A
malformed record raises :class:`SequenceFormatError` naming the file and the line.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hpc.errors import HPCError

__all__ = [
    "Record",
    "SequenceFormatError",
    "read_sequences",
    "read_fasta",
    "read_fastq",
    "write_fasta",
    "write_sam",
    "write_tabular",
    "tabular_fields",
    "TABULAR_COLUMNS",
]


class SequenceFormatError(HPCError, ValueError):
    """A malformed FASTA/FASTQ record; ``path`` and ``line`` (1-based) say where."""

    def __init__(self, message: str, path: str, line: int) -> None:
        super().__init__(f"{path}, line {line}: {message}")
        self.path = path
        self.line = line


@dataclass(frozen=True)
class Record:
    """One sequence: ``name`` (the header up to the first blank), ``sequence``, ``quality``
    (FASTQ only, else None) and ``line`` (where the record starts)."""

    name: str
    sequence: str
    quality: str | None = None
    description: str = ""
    line: int = 0


def _open(path: str | os.PathLike[str]) -> IO[str]:
    p = Path(path)
    with open(p, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(p, "rt", encoding="ascii", errors="replace")
    return open(p, encoding="ascii", errors="replace")


def _split_header(text: str) -> tuple[str, str]:
    parts = text.strip().split(None, 1)
    if not parts:
        return "", ""
    return parts[0], parts[1] if len(parts) > 1 else ""


def read_fasta(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Local. Stream the records of a FASTA file (``.gz`` detected by content).

    Raises
    ------
    SequenceFormatError
        Sequence letters before the first header, a header without a name, or a record with no
        sequence; the message names the file and the line.
    """
    where = str(path)
    with _open(path) as fh:
        name = desc = None
        start = 0
        chunks: list[str] = []
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith(";"):
                continue
            if line.startswith(">"):
                if name is not None:
                    yield _fasta_record(where, name, desc or "", chunks, start)
                name, desc = _split_header(line[1:])
                if not name:
                    raise SequenceFormatError("a header '>' without a name", where, lineno)
                start, chunks = lineno, []
            else:
                if name is None:
                    raise SequenceFormatError(
                        f"sequence before the first '>' header: {line[:20]!r}", where, lineno
                    )
                if " " in line or "\t" in line:
                    line = "".join(line.split())
                chunks.append(line)
        if name is not None:
            yield _fasta_record(where, name, desc or "", chunks, start)


def _fasta_record(where: str, name: str, desc: str, chunks: list[str], start: int) -> Record:
    seq = "".join(chunks)
    if not seq:
        raise SequenceFormatError(f"record {name!r} has no sequence", where, start)
    return Record(name, seq, None, desc, start)


def read_fastq(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Local. Stream the records of a FASTQ file (four lines per record; ``.gz`` detected).

    Raises
    ------
    SequenceFormatError
        A header not starting with ``@``, a separator not starting with ``+``, a truncated
        record, or a quality string whose length differs from the sequence's.
    """
    where = str(path)
    with _open(path) as fh:
        lineno = 0
        while True:
            head = fh.readline()
            lineno += 1
            if not head:
                return
            if not head.strip():
                continue
            start = lineno
            if not head.startswith("@"):
                raise SequenceFormatError(
                    f"expected a FASTQ header starting with '@', got {head.strip()[:20]!r}",
                    where,
                    lineno,
                )
            seq, plus, qual = fh.readline(), fh.readline(), fh.readline()
            if not qual:
                raise SequenceFormatError("truncated FASTQ record", where, start)
            lineno += 3
            if not plus.startswith("+"):
                raise SequenceFormatError(
                    f"expected the '+' separator, got {plus.strip()[:20]!r}", where, start + 2
                )
            seq, qual = seq.strip(), qual.strip()
            if len(qual) != len(seq):
                raise SequenceFormatError(
                    f"quality has {len(qual)} characters but the sequence {len(seq)}",
                    where,
                    start + 3,
                )
            name, desc = _split_header(head[1:])
            if not name:
                raise SequenceFormatError("a header '@' without a name", where, start)
            yield Record(name, seq, qual, desc, start)


def read_sequences(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Local. FASTA or FASTQ, told apart by the first character (``>`` or ``@``)."""
    with _open(path) as fh:
        first = ""
        for line in fh:
            if line.strip():
                first = line.lstrip()[0]
                break
    if first == "@":
        return read_fastq(path)
    return read_fasta(path)


def write_fasta(path: str | os.PathLike[str], records: Sequence[Record] | Any) -> None:
    """Local. Write records (or ``(name, sequence)`` pairs) as FASTA, 80 letters a line
    (the file appears whole or not at all)."""
    from hpc.io import atomic_open

    with atomic_open(path) as fh:
        for rec in records:
            name, seq = (rec.name, rec.sequence) if isinstance(rec, Record) else rec
            fh.write(f">{name}\n")
            for k in range(0, len(seq), 80):
                fh.write(seq[k : k + 80] + "\n")


def _sam_record(r: dict[str, Any]) -> str:
    """One SAM line. A hit on the minus strand gets flag 16 (its sequence is then the reverse
    complement, the way SAM stores it); query letters outside the alignment are soft-clipped."""
    qual = r.get("quality") or "*"
    minus = r.get("strand") == "-"
    if minus and qual != "*":
        qual = qual[::-1]
    cigar = r["cigar"] or ""
    if cigar and "query_start" in r:
        head = int(r["query_start"])
        tail = len(r["sequence"]) - int(r["query_end"])
        cigar = (f"{head}S" if head else "") + cigar + (f"{tail}S" if tail else "")
    tags = f"AS:i:{int(r['score'])}"
    ev = r.get("evalue")
    if ev is not None and ev == ev:  # not NaN
        tags += f"\tZE:f:{float(ev):.3g}"
    return (
        f"{r['query']}\t{16 if minus else 0}\t{r['target']}\t{int(r['target_start']) + 1}\t"
        f"{int(r.get('mapq', 255))}\t{cigar or '*'}\t*\t0\t0\t{r['sequence']}\t{qual}\t{tags}\n"
    )


def write_sam(
    path: str | os.PathLike[str],
    references: Sequence[tuple[str, int]],
    rows: Sequence[dict[str, Any]],
) -> None:
    """Local. Write hits as SAM (the file appears whole or not at all).

    Parameters
    ----------
    references : list of (name, length)
        The ``@SQ`` lines.
    rows : list of dict
        Keys ``query``, ``target``, ``target_start`` (0-based), ``cigar``, ``score``,
        ``sequence`` (as aligned: the reverse complement for a ``strand`` of ``"-"``) and
        optionally ``quality``, ``mapq``, ``strand``, ``evalue`` (tag ``ZE``), and
        ``query_start``/``query_end`` (letters outside them are soft-clipped: local hits).
    """
    from hpc.io import atomic_open

    with atomic_open(path) as fh:
        fh.write("@HD\tVN:1.6\tSO:unsorted\n")
        for name, length in references:
            fh.write(f"@SQ\tSN:{name}\tLN:{int(length)}\n")
        fh.write("@PG\tID:hpc-align\tPN:hpc align\n")
        for r in rows:
            fh.write(_sam_record(r))


TABULAR_COLUMNS = (
    "qseqid", "sseqid", "pident", "length", "mismatch", "gapopen", "qstart", "qend", "sstart",
    "send", "evalue", "bitscore",
)  # fmt: skip


def _blast_evalue(e: float) -> str:
    """An E-value as BLAST's tabular output prints it."""
    if e != e:
        return "NA"
    if e < 1.0e-180:
        return "0.0"
    if e < 1.0e-99:
        return f"{e:2.0e}"
    if e < 0.0009:
        return f"{e:3.2e}"
    if e < 0.1:
        return f"{e:4.3f}"
    if e < 1.0:
        return f"{e:3.2f}"
    if e < 10.0:
        return f"{e:2.1f}"
    return f"{e:2.0f}"


def _blast_bits(b: float) -> str:
    if b != b:
        return "NA"
    if b > 9999:
        return f"{b:4.3e}"
    if b > 99.9:
        return f"{int(b):3d}"
    return f"{b:2.1f}"


def tabular_fields(r: dict[str, Any]) -> list[str]:
    """Local. The 12 columns of BLAST's tabular output (``-outfmt 6``) for one hit row.

    ``length`` counts alignment columns (gaps included), ``pident`` is identical pairs over
    them, ``mismatch`` the aligned pairs that differ, ``gapopen`` the runs of gaps.
    Coordinates are 1-based and inclusive; on the minus strand the query range is given on
    the query as read and the subject range runs backwards (``sstart > send``), as ``blastn``
    prints it.
    """
    import re

    ops = re.findall(r"(\d+)([MID])", r["cigar"] or "")
    columns = sum(int(n) for n, _ in ops)
    pairs = sum(int(n) for n, c in ops if c == "M")
    matches = int(r["matches"])
    qs, qe = int(r["query_start"]), int(r["query_end"])
    ts, te = int(r["target_start"]), int(r["target_end"])
    if r.get("strand") == "-":
        m = int(r["query_length"])
        q1, q2, s1, s2 = m - qe + 1, m - qs, te, ts + 1
    else:
        q1, q2, s1, s2 = qs + 1, qe, ts + 1, te
    pident = 100.0 * matches / columns if columns else 0.0
    return [
        str(r["query"]), str(r["target"]), f"{pident:.3f}", str(columns), str(pairs - matches),
        str(sum(1 for _, c in ops if c != "M")), str(q1), str(q2), str(s1), str(s2),
        _blast_evalue(float(r["evalue"])), _blast_bits(float(r["bit_score"])),
    ]  # fmt: skip


def write_tabular(path: str | os.PathLike[str], rows: Sequence[dict[str, Any]]) -> None:
    """Local. Write hits as BLAST tabular output (``-outfmt 6``: the columns of
    :data:`TABULAR_COLUMNS`, tab-separated, no header; the file appears whole or not at
    all)."""
    from hpc.io import atomic_open

    with atomic_open(path) as fh:
        for r in rows:
            fh.write("\t".join(tabular_fields(r)) + "\n")
