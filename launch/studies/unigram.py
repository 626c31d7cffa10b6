#!/usr/bin/env python3
"""The causal-LM unigram baseline of a prepared file: residue and <end>
frequencies of /train, scored on the targets of SPLIT (every residue and one
<end> per sequence). Prints "loss ppl accuracy targets".

    unigram.py FILE [SPLIT]      (SPLIT defaults to valid)
"""
import sys

import h5py

from protein_table_report import unigram

if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    with h5py.File(sys.argv[1], "r") as h5:
        loss, ppl, acc, targets = unigram(h5, sys.argv[2] if len(sys.argv) == 3 else "valid", True)
    print(f"{loss:.5f} {ppl:.4f} {acc:.5f} {targets}")
