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


def write_sam(
    path: str | os.PathLike[str],
    references: Sequence[tuple[str, int]],
    rows: Sequence[dict[str, Any]],
) -> None:
    """Local. Write semi-global hits as SAM (the file appears whole or not at all).

    Parameters
    ----------
    references : list of (name, length)
        The ``@SQ`` lines.
    rows : list of dict
        Keys ``query``, ``target``, ``target_start`` (0-based), ``cigar``, ``score``,
        ``sequence`` and optionally ``quality`` and ``mapq``.
    """
    from hpc.io import atomic_open

    with atomic_open(path) as fh:
        fh.write("@HD\tVN:1.6\tSO:unsorted\n")
        for name, length in references:
            fh.write(f"@SQ\tSN:{name}\tLN:{int(length)}\n")
        fh.write("@PG\tID:hpc-align\tPN:hpc align\n")
        for r in rows:
            qual = r.get("quality") or "*"
            fh.write(
                f"{r['query']}\t0\t{r['target']}\t{int(r['target_start']) + 1}\t"
                f"{int(r.get('mapq', 255))}\t{r['cigar'] or '*'}\t*\t0\t0\t{r['sequence']}\t"
                f"{qual}\tAS:i:{int(r['score'])}\n"
            )
