#!/usr/bin/env python3
"""Whether the newest checkpoints of two checkpoint folders hold the same
parameters, bit for bit.

    same_params.py FOLDER_A FOLDER_B

Prints the two files compared and the verdict; exits 1 when they differ.
"""
import glob
import sys

import h5py
import numpy as np


def params(folder):
    paths = sorted(glob.glob(folder + "/ckpt-*.h5"))
    if not paths:
        sys.exit(f"{folder}: no checkpoint (ckpt-*.h5)")
    with h5py.File(paths[-1], "r") as f:
        return paths[-1], {k: np.asarray(f["params"][k]) for k in f["params"]}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    (pa, a), (pb, b) = params(sys.argv[1]), params(sys.argv[2])
    same = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    print(f"{pa} vs {pb}: {'identical' if same else 'DIFFERENT'} parameters ({len(a)} tensors)")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
