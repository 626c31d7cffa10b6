"""Protein sequence files as the trainer's tools read them
(data/sequence_reader.h): FASTA (.fa .fasta .faa) and Swiss-Prot / UniProt flat
files (.dat .txt .sp), plain or gzipped. A header without a sequence, an
unknown letter or an unknown extension is an error naming the file and line;
one trailing '*' (stop) is stripped."""

import gzip
from dataclasses import dataclass, field
from typing import Iterator, List

from . import vocab


class SequenceFileError(ValueError):
    """A malformed sequence file; the message names the file and line."""


@dataclass
class SequenceRecord:
    id: str              # first word of the header
    header: str          # header text without '>'
    tokens: List[int] = field(default_factory=list)
    line: int = 0        # 1-based line of the header / ID line


_FASTA = (".fa", ".fasta", ".faa")
_SWISS = (".dat", ".txt", ".sp")


def sequence_format(path):
    name = path[:-3] if path.endswith(".gz") else path
    if name.endswith(_FASTA):
        return "fasta"
    if name.endswith(_SWISS):
        return "swissprot"
    raise SequenceFileError(f"{path}: unknown sequence file extension (FASTA: {' '.join(_FASTA)}; "
                            f"Swiss-Prot: {' '.join(_SWISS)}; optionally .gz)")


def _lines(path):
    # UTF-8, line by line, as the C++ reader (headers may hold any UTF-8 text;
    # a residue that is not a letter of the vocabulary is refused later).
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise SequenceFileError(f"{path}:{number}: not UTF-8 text (byte {e.start + 1} of the line)") from None
            yield number, line.rstrip("\r\n")


def _add_residues(rec, text, path, number, map_unknown_to_x, column0=0):
    for col, c in enumerate(text):
        if c.isspace():
            continue
        t = vocab.token_of(c, map_unknown_to_x)
        if t is None:
            raise SequenceFileError(f"{path}:{number}:{column0 + col + 1}: {c!r} is not a residue letter "
                                    f"(allowed: {vocab.RESIDUES}, either case)")
        rec.tokens.append(t)


def _finish(rec, path):
    if rec is None:
        return None
    if not rec.tokens:
        raise SequenceFileError(f"{path}:{rec.line}: the record '{rec.id}' has no sequence")
    return rec


def _read_fasta(path, map_unknown_to_x):
    rec = None
    for number, line in _lines(path):
        if line.startswith(">"):
            done = _finish(rec, path)
            if done:
                yield done
            header = line[1:].strip()
            rec = SequenceRecord(id=header.split()[0] if header else "", header=header, line=number)
        elif line.strip():
            if rec is None:
                raise SequenceFileError(f"{path}:{number}: sequence data before the first '>' header")
            text = line.strip()
            if text.endswith("*"):
                text = text[:-1]
            _add_residues(rec, text, path, number, map_unknown_to_x)
    done = _finish(rec, path)
    if done:
        yield done


def _read_swissprot(path, map_unknown_to_x):
    # The id as the C++ reader makes it: "sp|<first accession>|<entry name>"
    # ("tr|" for unreviewed entries).
    rec, in_seq, name, accession, reviewed = None, False, "", "", True
    for number, line in _lines(path):
        if rec is None:
            if not line.strip():
                continue
            if not line.startswith("ID"):
                raise SequenceFileError(f"{path}:{number}: expected an ID line to start a Swiss-Prot entry")
            words = line[2:].split()
            if not words:
                raise SequenceFileError(f"{path}:{number}: ID line without an entry name")
            name, accession, reviewed, in_seq = words[0], "", "Unreviewed;" not in line, False
            rec = SequenceRecord(id="", header="", line=number)
        elif line.startswith("//"):
            if not rec.tokens:
                raise SequenceFileError(f"{path}:{rec.line}: entry '{name}' has no sequence")
            rec.header = ("sp|" if reviewed else "tr|") + (accession or name) + "|" + name
            rec.id = rec.header
            yield rec
            rec = None
        elif in_seq:
            text = line.strip()
            if text.endswith("*"):
                text = text[:-1]
            _add_residues(rec, text, path, number, map_unknown_to_x)
        elif line.startswith("AC") and not accession:
            accession = line[5:].split(";")[0].strip()
        elif line.startswith("SQ"):
            in_seq = True
    if rec is not None:
        raise SequenceFileError(f"{path}:{rec.line}: entry '{name}' is not terminated by '//' (truncated file?)")


def read_sequences(path, map_unknown_to_x=False) -> Iterator[SequenceRecord]:
    """The records of one file, one at a time."""
    fmt = sequence_format(path)
    records = _read_fasta(path, map_unknown_to_x) if fmt == "fasta" else _read_swissprot(path, map_unknown_to_x)
    count = 0
    for rec in records:
        count += 1
        yield rec
    if count == 0:
        raise SequenceFileError(f"{path}: no sequences")
