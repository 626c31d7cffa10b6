"""The package's data file reader (ProteinData) checks what the C++ handle
(data/prepared_data.h) checks where no dataset has to be read, on small
files written here with h5py (no C++ build), in the empty folder WORK:
    data_reader_checks.py WORK
A file as prepare writes it reads; each damaged copy (schema_version
missing or disagreeing with the schema, another split rule, a malformed
content digest, a split whose datasets disagree with its counts or with each
other, tokens of another type, offsets declared far beyond the residues and
never written, an empty sequence) is refused with a DataFileError naming the
file and the dataset or attribute, before the dataset is read. The last line
is "PASS: ..." only when every check passed. And a refused file is closed;
sequence files are read as UTF-8, a header that is not UTF-8 refused naming
the file and line."""

import os
import sys

import h5py
import numpy as np

from performer_protein import DataFileError, ProteinData, SequenceFileError, read_sequences, vocab

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


SEQUENCES = {"train": ["MKTAYIAK", "QRQISFVKSHF", "SRQ"], "valid": ["MKV"], "test": []}


def write(path, edit=None):
    """A data file laid out as performer-data prepare writes it (docs/data.md),
    then `edit(file)` applied."""
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "performer-protein-v2"
        f.attrs["schema_version"] = np.int64(2)
        f.attrs["vocabulary"] = vocab.DESCRIPTION
        f.attrs["split_rule"] = "sequence"
        f.attrs["content_digest"] = "fnv1a64:0123456789abcdef"
        for name, seqs in SEQUENCES.items():
            g = f.create_group(name)
            tokens = [np.array(vocab.encode(s), np.uint8) for s in seqs]
            g["tokens"] = np.concatenate(tokens) if tokens else np.zeros(0, np.uint8)
            g["offsets"] = np.concatenate([[0], np.cumsum([len(t) for t in tokens])]).astype(np.int64)
            g.create_dataset("ids", data=[f"{name}{i}" for i in range(len(seqs))], dtype=h5py.string_dtype())
            g.create_dataset("headers", data=[f"{name}{i} a protein" for i in range(len(seqs))],
                             dtype=h5py.string_dtype())
            g.attrs["sequences"] = np.int64(len(seqs))
            g.attrs["residues"] = np.int64(sum(len(s) for s in seqs))
        if edit:
            edit(f)


def refused(path, split, pieces, what):
    try:
        with ProteinData(path) as d:
            if split:
                d.split(split)
        check(False, f"{what}: read without an error")
    except DataFileError as e:
        m = str(e)
        check(all(p in m for p in [path] + pieces), f"{what}: {m}")


def replace(group, name, data):
    del group[name]
    group[name] = data


work = sys.argv[1]
good = os.path.join(work, "good.h5")
write(good)
with ProteinData(good) as d:
    train = d.split("train")
    check(d.splits() == ["train", "valid", "test"] and len(train) == 3 and
          list(train.sequence(1)) == vocab.encode("QRQISFVKSHF") and train.ids == ["train0", "train1", "train2"] and
          len(d.split("test")) == 0, "a file as prepare writes it reads (3 splits, an empty one among them)")

cases = [
    ("no schema_version", lambda f: f.attrs.__delitem__("schema_version"), None, ["schema_version None"]),
    ("schema_version 1 for performer-protein-v2", lambda f: f.attrs.__setitem__("schema_version", np.int64(1)), None,
     ["'performer-protein-v2' with schema_version 1"]),
    ("another split rule", lambda f: f.attrs.__setitem__("split_rule", "organism"), None, ["split_rule 'organism'"]),
    ("a malformed digest", lambda f: f.attrs.__setitem__("content_digest", "md5:abc"), None,
     ["content_digest 'md5:abc'"]),
    ("offsets longer than the group records",
     lambda f: replace(f["train"], "offsets", np.array([0, 8, 19, 22, 22], np.int64)), "train",
     ["/train: offsets has 5 entries", "sequences = 3"]),
    ("tokens shorter than the group records",
     lambda f: replace(f["train"], "tokens", np.zeros(21, np.uint8) + 4), "train", ["/train:", "residues = 22"]),
    ("int8 tokens", lambda f: replace(f["train"], "tokens", np.zeros(22, np.int8) + 4), "train",
     ["/train/tokens holds int8"]),
    ("ids of another length",
     lambda f: (f["train"].__delitem__("ids"), f["train"].create_dataset("ids", data=["a"], dtype=h5py.string_dtype())),
     "train", ["/train/ids has 1 entries for 3 sequences"]),
    ("an empty sequence", lambda f: replace(f["train"], "offsets", np.array([0, 8, 8, 22], np.int64)), "train",
     ["/train/offsets", "no sequence is empty"]),
    ("a missing split", None, "ood", ["no split /ood"]),
]
for what, edit, split, pieces in cases:
    path = os.path.join(work, what.replace(" ", "_") + ".h5")
    write(path, edit)
    refused(path, split, pieces, what)


# 2^34 offsets declared and never written (128 GiB if read): refused from the
# counts before a byte of them is read.
def huge_offsets(f):
    g = f["train"]
    del g["offsets"]
    g.create_dataset("offsets", shape=(1 << 34,), dtype=np.int64, chunks=(1 << 16,))
    g.attrs["sequences"] = np.int64((1 << 34) - 1)


path = os.path.join(work, "huge.h5")
write(path, huge_offsets)
refused(path, "train", ["/train:", "17179869183 sequences but only 22 residues"], "offsets declared beyond the residues")

# A refused file is closed: it can be written again at once (h5py refuses
# to truncate a file this process still holds).
path = os.path.join(work, "closed.h5")
write(path, lambda f: f.attrs.__setitem__("schema_version", np.int64(1)))
refused(path, None, ["schema_version 1"], "a refused file (to be rewritten)")
try:
    h5py.File(path, "w").close()
    check(True, "a refused data file is closed")
except OSError as e:
    check(False, f"a refused data file is still open: {e}")

# Sequence files are UTF-8, as the C++ reader reads them: a header may hold
# any UTF-8 text; bytes that are not UTF-8 are refused naming file and line.
fasta = os.path.join(work, "utf8.fasta")
with open(fasta, "wb") as f:
    f.write(">sp|Q1|T1 Prot\u00e9ine de test OS=\u00c5land\nMKTAYIAK\n".encode("utf-8"))
records = list(read_sequences(fasta))
check(len(records) == 1 and list(records[0].tokens) == vocab.encode("MKTAYIAK"),
      "a FASTA file with a UTF-8 header reads")
bad = os.path.join(work, "latin1.fasta")
with open(bad, "wb") as f:
    f.write(b">a\nMKT\n>b Prot\xe9ine\nMKV\n")
try:
    list(read_sequences(bad))
    check(False, "a header that is not UTF-8 read without an error")
except SequenceFileError as e:
    check(f"{bad}:3: not UTF-8 text" in str(e), f"a header that is not UTF-8: {e}")

if failures:
    print(f"FAIL: {len(failures)} check(s) failed")
    sys.exit(1)
print("PASS: the data reader refuses every damaged file before reading it, naming the file and the dataset")
