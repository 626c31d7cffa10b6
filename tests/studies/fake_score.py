#!/usr/bin/env python3
"""A stand-in for performer-score with log-probabilities known by construction,
for aligned_copy_checks.py: the same options, TSV columns and --per-residue
HDF5 layout as the tool (launch/infer/score_output.h), a causal family-mode
checkpoint's rules (alone: the first residue is not scored; given a context:
every residue and <end>), and values from alone_logprob() / given_logprob() (top flags: alone_top() /
given_top()).
FAKE_SCORE_BAD=1 writes a log_likelihood 0.5 away from the per-residue sum.
  fake_score.py --checkpoint C [--set K=V]... [--context CTX] --output TSV --per-residue H5 QUERY.fasta
"""
import argparse
import math
import os


def alone_logprob(seq, i):
    """log P of residue i (0-based; i == len(seq): <end>) of a query scored alone."""
    if i == 0:
        return math.nan
    if i == len(seq):
        return -2.5
    return -0.2 * (1 + (ord(seq[i]) - 65) % 7) - 0.01 * i


def given_logprob(seq, i):
    """log P of residue i (0-based; i == len(seq): <end>) of a query given a context."""
    if i == len(seq):
        return -1.5
    return -0.05 * (1 + (ord(seq[i]) - 65) % 5) - 0.003 * i


def alone_top(seq, i):
    """1.0 where the query's residue i, scored alone, has the largest logit."""
    return math.nan if i == 0 else float(i % 2 == 0)


def given_top(seq, i):
    """1.0 where the query's residue i, given a context, has the largest logit."""
    return float(i == len(seq) or ord(seq[i]) % 3 != 0)


def read_fasta(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                out.append([line[1:].split()[0], ""])
            elif line:
                out[-1][1] += line
    return out


def main():
    import h5py
    import numpy as np
    p = argparse.ArgumentParser()
    p.add_argument("query")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--context")
    p.add_argument("--output", required=True)
    p.add_argument("--per-residue", required=True)
    a = p.parse_args()
    queries = read_fasta(a.query)
    bad = 0.5 if os.environ.get("FAKE_SCORE_BAD") == "1" else 0.0
    ids, lengths, offsets, logprob, top = [], [], [0], [], []
    with open(a.output, "w") as out:
        out.write("id\tlength\tmeasure\tscored\tlog_likelihood\tperplexity" +
                  ("\talone_scored\talone_log_likelihood\tgain_per_token\n" if a.context else "\n"))
        for name, seq in queries:
            n = len(seq)
            alone = [alone_logprob(seq, i) for i in range(n + 1)]
            given = [given_logprob(seq, i) for i in range(n + 1)] if a.context else alone
            terms = [x for x in given if not math.isnan(x)]
            total = sum(terms) + bad
            row = [name, n, "log_likelihood_given_context" if a.context else "log_likelihood", len(terms),
                   f"{total:.6f}", f"{math.exp(-total / len(terms)):.6f}"]
            if a.context:
                a_terms = [x for x in alone if not math.isnan(x)]
                common = sum(g for g, s in zip(given, alone) if not math.isnan(s))
                row += [len(a_terms), f"{sum(a_terms):.6f}", f"{(common - sum(a_terms)) / len(a_terms):.6f}"]
            out.write("\t".join(str(x) for x in row) + "\n")
            ids.append(name)
            lengths.append(n)
            logprob += given
            top += [given_top(seq, i) for i in range(n + 1)] if a.context else [alone_top(seq, i) for i in range(n + 1)]
            offsets.append(len(logprob))
    with h5py.File(a.per_residue, "w") as h:
        h.create_dataset("ids", data=ids, dtype=h5py.string_dtype())
        h.create_dataset("lengths", data=np.array(lengths, dtype=np.int64))
        h.create_dataset("offsets", data=np.array(offsets, dtype=np.int64))
        h.create_dataset("logprob", data=np.array(logprob, dtype=np.float64))
        h.create_dataset("top", data=np.array(top, dtype=np.float64))
        h.attrs["measure"] = "log_likelihood_given_context" if a.context else "log_likelihood"


if __name__ == "__main__":
    main()
