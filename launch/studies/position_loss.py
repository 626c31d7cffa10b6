#!/usr/bin/env python3
"""The loss of a checkpoint by position inside a protein, beyond the length it
was trained on: every protein of the input longer than --window residues is
scored twice with performer-score,
  whole     the protein in one pass, positions 0..n-1 (what performer-score
            does for any protein);
  windows   cut into windows of --window residues, each scored as a protein
            of its own (positions restart at 0 in every window: what the
            model saw in training, where a long protein is a crop of at most
            data.sample_length tokens at positions 0..L-1).
Both score the same residues; a window's first residue is context only, so
those residues are left out of both. The table gives, per position bucket of
the residue inside the whole protein, the residues counted and the loss
(nats per residue) of each way, and writes it as CSV.

  position_loss.py --score BIN/performer-score --checkpoint CKPT --window 2048 \
      --output position_loss.csv PROTEINS.fasta[.gz] [MORE.fasta ...]
  [--launcher "mpirun -np 2 -x OMP_NUM_THREADS=1"] [--work DIR]
"""
import argparse
import gzip
import os
import shlex
import subprocess
import sys
import tempfile

import h5py
import numpy as np

EDGES = [0, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def read_fasta(path):
    opener = gzip.open if path.endswith(".gz") else open
    name, seq = None, []
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                if name is not None:
                    yield name, "".join(seq).rstrip("*")
                name, seq = line[1:].split()[0], []
            elif line:
                seq.append(line)
    if name is not None:
        yield name, "".join(seq).rstrip("*")


def score(a, fasta, per_residue):
    cmd = shlex.split(a.launcher) + [a.score, "--checkpoint", a.checkpoint, "--first-residue", "context",
                                     "--output", per_residue + ".tsv", "--per-residue", per_residue, fasta]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"position_loss.py: {' '.join(cmd)} failed:\n{r.stderr}")
    with h5py.File(per_residue, "r") as h:
        off, lp = h["offsets"][...], h["logprob"][...]
    # Slot i of a protein: log P of residue i (0-based); the last slot is <end>.
    return [lp[off[k]:off[k + 1] - 1] for k in range(len(off) - 1)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+")
    p.add_argument("--score", required=True, help="the performer-score executable")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--window", type=int, required=True, help="residues per window (the trained length)")
    p.add_argument("--output", required=True, help="CSV to write")
    p.add_argument("--launcher", default="", help="command before performer-score, e.g. mpirun -np 2")
    p.add_argument("--work", help="folder for the FASTA and score files (default: a temporary one)")
    a = p.parse_args()
    if a.window < 2:
        p.error("--window must be at least 2")
    proteins = [(n, s) for path in a.inputs for n, s in read_fasta(path) if len(s) > a.window]
    if not proteins:
        sys.exit(f"position_loss.py: no protein longer than {a.window} residues in {', '.join(a.inputs)}")
    work = a.work or tempfile.mkdtemp(prefix="position-loss-")
    os.makedirs(work, exist_ok=True)
    whole_fa, windows_fa = os.path.join(work, "whole.fasta"), os.path.join(work, "windows.fasta")
    with open(whole_fa, "w") as w, open(windows_fa, "w") as v:
        for n, s in proteins:
            w.write(f">{n}\n{s}\n")
            for k in range(0, len(s), a.window):
                if len(s) - k >= 2:  # a window of one residue scores nothing but <end>
                    v.write(f">{n}_w{k}\n{s[k:k + a.window]}\n")
    whole = score(a, whole_fa, os.path.join(work, "whole.h5"))
    windows = score(a, windows_fa, os.path.join(work, "windows.h5"))
    nb = len(EDGES)
    count, nll_whole, nll_windows = np.zeros(nb), np.zeros(nb), np.zeros(nb)
    it = iter(windows)
    for (n, s), lw in zip(proteins, whole):
        pieces = [next(it) for k in range(0, len(s), a.window) if len(s) - k >= 2]
        lv = np.concatenate(pieces)
        if len(s) % a.window == 1:  # the last window of one residue was not scored
            lv = np.concatenate([lv, [np.nan]])
        assert len(lv) == len(lw) == len(s), (n, len(lv), len(lw), len(s))
        pos = np.arange(len(s))
        both = ~np.isnan(lw) & ~np.isnan(lv)
        bucket = np.searchsorted(EDGES, pos, side="right") - 1
        for b in range(nb):
            m = both & (bucket == b)
            count[b] += m.sum()
            nll_whole[b] -= lw[m].sum()
            nll_windows[b] -= lv[m].sum()
    with open(a.output, "w") as f:
        f.write("position_from,position_to,residues,loss_whole,loss_windows,ppl_whole,ppl_windows\n")
        print(f"{len(proteins)} proteins longer than {a.window} residues ({sum(len(s) for _, s in proteins)} "
              f"residues); loss in nats per residue")
        print(f"{'positions':>14} {'residues':>9} {'whole':>8} {'windows':>8} {'whole-windows':>14}")
        for b in range(nb):
            if count[b] == 0:
                continue
            hi = EDGES[b + 1] - 1 if b + 1 < nb else -1
            lw, lv = nll_whole[b] / count[b], nll_windows[b] / count[b]
            f.write(f"{EDGES[b]},{hi},{int(count[b])},{lw:.5f},{lv:.5f},{np.exp(lw):.4f},{np.exp(lv):.4f}\n")
            label = f"{EDGES[b]}-{hi}" if hi >= 0 else f"{EDGES[b]}+"
            print(f"{label:>14} {int(count[b]):>9} {lw:8.4f} {lv:8.4f} {lw - lv:14.4f}")


if __name__ == "__main__":
    main()
