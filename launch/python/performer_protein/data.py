"""The trainer's protein data files (schema performer-protein-v1 / -v2,
docs/data.md), read with h5py: each split's sequences as token arrays, their
ids and, for a cluster split, their clusters.

The file is checked as the C++ handle (data/prepared_data.h) checks it where
that costs no read of a dataset: the schema name against schema_version, the
vocabulary, the split rule and the content digest's form when opened; a
split's datasets' types and lengths against each other and against the
group's sequences and residues before any is read, then its offsets."""

import re
from dataclasses import dataclass
from typing import List, Optional

import h5py
import numpy as np

from . import vocab
from .checkpoint import _text

SCHEMAS = {"performer-protein-v1": 1, "performer-protein-v2": 2}
SPLIT_RULES = ("sequence", "cluster")
_DIGEST = re.compile(r"fnv1a64:[0-9a-fA-F]{16}")


class DataFileError(ValueError):
    """A file that is not a readable data file; the message names the file and dataset."""


@dataclass
class Split:
    name: str
    tokens: np.ndarray             # uint8 [residues], all sequences back to back
    offsets: np.ndarray            # int64 [sequences + 1]
    ids: List[str]
    clusters: Optional[np.ndarray]  # int64 [sequences] (cluster splits)

    def __len__(self):
        return len(self.offsets) - 1

    def sequence(self, i):
        """Residue tokens of sequence i (no <end>)."""
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]


def _int(value):
    """An integer attribute (a scalar, or an array of one)."""
    return int(np.asarray(value).reshape(-1)[0])


def _require_integers(path, where, dset, dtype):
    """The stored type is `dtype` (h5py would convert another one silently)."""
    if dset.dtype != np.dtype(dtype):
        raise DataFileError(f"{path}: {where} holds {dset.dtype}, the schema stores {np.dtype(dtype)} there")


class ProteinData:
    def __init__(self, path):
        self.path = path
        try:
            self.file = h5py.File(path, "r")
        except OSError as e:
            raise DataFileError(f"{path}: not a readable HDF5 data file: {e}") from None
        try:
            self._check()
        except BaseException:
            self.file.close()  # a refused file is not left open
            raise

    def _check(self):
        path = self.path
        a = self.file.attrs
        schema = _text(a.get("schema", b""))
        if schema not in SCHEMAS:
            raise DataFileError(f"{path}: schema {schema!r}, this package reads {', '.join(SCHEMAS)}")
        version = _int(a["schema_version"]) if "schema_version" in a else None
        if version != SCHEMAS[schema]:
            raise DataFileError(f"{path}: schema {schema!r} with schema_version {version}, "
                                f"expected {SCHEMAS[schema]}")
        if _text(a.get("vocabulary", b"")) != vocab.DESCRIPTION:
            raise DataFileError(f"{path}: another vocabulary ({_text(a.get('vocabulary', b''))!r})")
        self.split_rule = _text(a["split_rule"]) if "split_rule" in a else "sequence"
        if self.split_rule not in SPLIT_RULES:
            raise DataFileError(f"{path}: split_rule {self.split_rule!r}, expected one of {', '.join(SPLIT_RULES)}")
        self.content_digest = _text(a["content_digest"]) if "content_digest" in a else ""
        if self.content_digest and not _DIGEST.fullmatch(self.content_digest):
            raise DataFileError(f"{path}: content_digest {self.content_digest!r}, expected 'fnv1a64:' and "
                                f"16 hexadecimal digits")

    def splits(self):
        return [name for name in ("train", "valid", "test", "ood") if name in self.file]

    def split(self, name) -> Split:
        if name not in self.file:
            raise DataFileError(f"{self.path}: no split /{name} (it has {', '.join(self.splits())})")
        g = self.file[name]
        try:
            tokens, offsets, ids = g["tokens"], g["offsets"], g["ids"]
            clusters = g["clusters"] if "clusters" in g else None
        except (KeyError, OSError) as e:
            raise DataFileError(f"{self.path}: /{name}: a dataset is missing or failed its checksum: {e}") from None
        # Types and lengths before anything is read: a crafted length is not allocated.
        _require_integers(self.path, f"/{name}/tokens", tokens, np.uint8)
        _require_integers(self.path, f"/{name}/offsets", offsets, np.int64)
        if clusters is not None:
            _require_integers(self.path, f"/{name}/clusters", clusters, np.int64)
        for key, d in (("tokens", tokens), ("offsets", offsets), ("ids", ids)):
            if d.ndim != 1:
                raise DataFileError(f"{self.path}: /{name}/{key} has shape {d.shape}, the schema stores 1-D data")
        if offsets.shape[0] == 0:
            raise DataFileError(f"{self.path}: /{name}/offsets is empty (it holds sequences + 1 entries)")
        sequences, residues = offsets.shape[0] - 1, tokens.shape[0]
        for attr, want in (("sequences", sequences), ("residues", residues)):
            if attr in g.attrs and _int(g.attrs[attr]) != want:
                raise DataFileError(f"{self.path}: /{name}: offsets has {offsets.shape[0]} entries and tokens "
                                    f"{residues}, but the group records {attr} = {_int(g.attrs[attr])}")
        if sequences > residues:
            raise DataFileError(f"{self.path}: /{name}: {sequences} sequences but only {residues} residues "
                                f"(performer-data prepare writes no empty sequence)")
        if ids.shape[0] != sequences:
            raise DataFileError(f"{self.path}: /{name}/ids has {ids.shape[0]} entries for {sequences} sequences")
        if "headers" in g and g["headers"].shape != (sequences,):
            raise DataFileError(f"{self.path}: /{name}/headers has shape {g['headers'].shape} for {sequences} "
                                f"sequences")
        if clusters is not None and clusters.shape != (sequences,):
            raise DataFileError(f"{self.path}: /{name}/clusters has {clusters.shape[0]} entries for {sequences} "
                                f"sequences")
        try:
            tokens = np.asarray(tokens[...], dtype=np.uint8)
            offsets = np.asarray(offsets[...], dtype=np.int64)
            ids = [_text(x) for x in ids[...]]
            clusters = np.asarray(clusters[...], dtype=np.int64) if clusters is not None else None
        except OSError as e:
            raise DataFileError(f"{self.path}: /{name}: a dataset is missing or failed its checksum: {e}") from None
        if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(tokens) or np.any(np.diff(offsets) <= 0):
            raise DataFileError(f"{self.path}: /{name}/offsets do not describe the {len(tokens)} tokens "
                                f"(must start at 0, increase and end at the token count: no sequence is empty)")
        return Split(name=name, tokens=tokens, offsets=offsets, ids=ids, clusters=clusters)

    def close(self):
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
