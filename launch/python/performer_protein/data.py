"""The trainer's protein data files (schema performer-protein-v1 / -v2,
docs/data.md), read with h5py: each split's sequences as token arrays, their
ids and, for a cluster split, their clusters."""

from dataclasses import dataclass
from typing import List, Optional

import h5py
import numpy as np

from . import vocab
from .checkpoint import _text

SCHEMAS = {"performer-protein-v1": 1, "performer-protein-v2": 2}


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


class ProteinData:
    def __init__(self, path):
        self.path = path
        try:
            self.file = h5py.File(path, "r")
        except OSError as e:
            raise DataFileError(f"{path}: not a readable HDF5 data file: {e}") from None
        a = self.file.attrs
        schema = _text(a.get("schema", b""))
        if schema not in SCHEMAS:
            raise DataFileError(f"{path}: schema {schema!r}, this package reads {', '.join(SCHEMAS)}")
        if _text(a.get("vocabulary", b"")) != vocab.DESCRIPTION:
            raise DataFileError(f"{path}: another vocabulary ({_text(a.get('vocabulary', b''))!r})")
        self.split_rule = _text(a["split_rule"]) if "split_rule" in a else "sequence"
        self.content_digest = _text(a["content_digest"]) if "content_digest" in a else ""

    def splits(self):
        return [name for name in ("train", "valid", "test", "ood") if name in self.file]

    def split(self, name) -> Split:
        if name not in self.file:
            raise DataFileError(f"{self.path}: no split /{name} (it has {', '.join(self.splits())})")
        g = self.file[name]
        try:
            tokens = np.asarray(g["tokens"][...], dtype=np.uint8)
            offsets = np.asarray(g["offsets"][...], dtype=np.int64)
            ids = [_text(x) for x in g["ids"][...]]
            clusters = np.asarray(g["clusters"][...], dtype=np.int64) if "clusters" in g else None
        except (KeyError, OSError) as e:
            raise DataFileError(f"{self.path}: /{name}: a dataset is missing or failed its checksum: {e}") from None
        if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(tokens) or np.any(np.diff(offsets) < 0):
            raise DataFileError(f"{self.path}: /{name}/offsets do not describe the {len(tokens)} tokens "
                                f"(must start at 0, not decrease and end at the token count)")
        if len(ids) != len(offsets) - 1:
            raise DataFileError(f"{self.path}: /{name}/ids has {len(ids)} entries for {len(offsets) - 1} sequences")
        return Split(name=name, tokens=tokens, offsets=offsets, ids=ids, clusters=clusters)

    def close(self):
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
