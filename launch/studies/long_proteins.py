#!/usr/bin/env python3
"""Writes FASTA records of long proteins (8,500 to 35,213 residues, the
titin-class tail that DB.fasta.gz lacks) made of real residues: each is the
concatenation of randomly chosen proteins of the input FASTA (plain or .gz),
cut to its length. Deterministic for a given --seed.

  long_proteins.py --input DB.fasta.gz --output long.fasta [--count 8] [--seed 1]
"""
import argparse
import gzip
import random


def read_fasta(path):
    opener = gzip.open if path.endswith(".gz") else open
    seqs, cur = [], []
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith(">"):
                if cur:
                    seqs.append("".join(cur))
                cur = []
            else:
                cur.append(line.strip())
    if cur:
        seqs.append("".join(cur))
    return seqs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    seqs = read_fasta(a.input)
    if not seqs:
        raise SystemExit(f"long_proteins.py: no sequences in {a.input}")
    rng = random.Random(a.seed)
    lengths = [8500, 35213] + [rng.randint(8500, 35213) for _ in range(max(0, a.count - 2))]
    with open(a.output, "w") as out:
        for i, n in enumerate(lengths[: a.count]):
            parts, total = [], 0
            while total < n:
                s = rng.choice(seqs)
                parts.append(s)
                total += len(s)
            seq = "".join(parts)[:n]
            out.write(f">long_{i} synthetic {n} residues\n")
            for k in range(0, n, 60):
                out.write(seq[k : k + 60] + "\n")


if __name__ == "__main__":
    main()
