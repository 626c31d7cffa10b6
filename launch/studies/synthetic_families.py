#!/usr/bin/env python3
"""Synthetic protein families with a known divergence, as FASTA: each family
is a random root (residues uniform over the 20 amino acids, length uniform in
[MIN, MAX]) and MEMBERS copies of it in which every residue is replaced by
another random amino acid with probability 1 - IDENTITY (no insertions or
deletions, so residue i of every member is aligned with residue i of the
root). Seeded: the same arguments give the same file. Headers name the family
and member: >fam<f>_m<k>.

  synthetic_families.py OUT.fasta [--families 2000] [--members 4]
      [--identity 0.9] [--min 60] [--max 160] [--seed 0]

Prepared with `performer-data prepare --cluster-identity 0.5` the families
come back as MMseqs2 clusters (at identity 0.9 every member of a family is
within 0.5 of the others), which data.mode = "family" reads as contexts.
"""
import argparse
import random

AMINO = "ACDEFGHIKLMNPQRSTVWY"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--families", type=int, default=2000)
    p.add_argument("--members", type=int, default=4)
    p.add_argument("--identity", type=float, default=0.9)
    p.add_argument("--min", type=int, default=60)
    p.add_argument("--max", type=int, default=160)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if not 0 <= a.identity <= 1 or a.min < 1 or a.max < a.min or a.members < 1:
        p.error("need 0 <= identity <= 1, 1 <= min <= max, members >= 1")
    rng = random.Random(a.seed)
    with open(a.out, "w") as f:
        for fam in range(a.families):
            root = [rng.choice(AMINO) for _ in range(rng.randint(a.min, a.max))]
            for k in range(a.members):
                member = [r if rng.random() < a.identity else rng.choice(AMINO.replace(r, "")) for r in root]
                f.write(f">fam{fam}_m{k}\n{''.join(member)}\n")


if __name__ == "__main__":
    main()
