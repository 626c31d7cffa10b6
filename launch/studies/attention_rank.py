#!/usr/bin/env python3
"""Effective rank of the attention matrices of trained checkpoints on held-out
proteins or families (docs/results/kernel-study.md).

Samples. Single proteins (--family 0, the default): the first --proteins
proteins of --split whose length lies in [--min-length, --max-length], each on
its own: its residues (no <end>), positions 0..n-1. Families (--family K,
K >= 1; a cluster split): the first --proteins clusters of --split (in the
order of the file's /clusters table) with at least K members in the split,
each sample the first K of them in file order laid out as the trainer's
family sample (docs/data.md#family-contexts, docs/model.md#family-contexts):
the members back to back, each its residues then <end>, positions restarting
at 0 for every member (a member's <end> at its length), one attention segment
over the whole family. --min-length and --max-length then bound the family's
length n (all K members with their <end>s); K = 1 is a member alone in that
layout, the control with no relatives.

For each checkpoint, sample, layer and head, from the layer's q and k on that
sample exactly as the model computes them (performer_protein, the trainer's
function in PyTorch, float64; the script checks that A V gives the model's
attention output):
  rank            the effective rank of the row-normalised attention matrix A
                  [n, n] (causal models masked to j <= i): the number of
                  singular values above --threshold times the largest. A linear
                  attention matrix D^-1 phi(Q) phi(K)^T has rank at most m; the
                  causal mask lifts that bound (a lower-triangular matrix with a
                  positive diagonal has full rank), so a causal (clm) model's
                  rank can exceed m and the bound speaks for the masked-LM
                  (bidirectional) models; the score rank below has the bound
                  for every model.
  score rank      the effective rank (same threshold) of the unmasked,
                  unnormalised score matrix, each row divided by its largest
                  entry: softmax exp(q k^T / sqrt(D) - row max) (the stable
                  softmax's numerator), linear kernels phi(Q) phi(K)^T (the keys
                  at their true relative scales, FAVOR+ and exp included). The
                  row scaling leaves the rank as it is and removes the queries'
                  scales, which cancel in attention; a scale shared by the whole
                  matrix would let the rows of the largest scores hide the rest.
                  For the linear kernels the rank is at most m whatever the
                  mask: how many independent directions the attention state can
                  hold. For softmax the matrix is generically of full rank n,
                  but a trained model's scores can span tens to hundreds of
                  nats in a row, so its effective rank can be far below n. (The
                  bidirectional A is this matrix with its rows rescaled to sum
                  to 1, so even there the two effective ranks may differ.)
  relatives mass  the fraction of A's mass that a member's rows put on the
                  members before it (sum over the columns of earlier members of
                  each row of every member after the first, residues and <end>,
                  averaged over those rows): how much a member reads its
                  relatives. 0 for single proteins and K = 1 (no relatives).

Prints and writes (--output) a CSV row per checkpoint and layer: checkpoint,
attention, objective, features (m; 0 for softmax), layer, rank_mean / min /
max over heads and samples, length_mean (mean n), rank_over_n (mean rank / n),
family (K; 0 for single proteins), score_rank_mean / max over heads and
samples, relatives_mass_mean (over heads and samples) and
relatives_mass_uniform (the same for attention spread evenly over what each
row may read: the base rate to compare with). An existing --output
is appended to when its header is this header, else refused.
"""
import argparse
import csv
import math
import os
import sys

import torch

from performer_protein import PerformerProtein, ProteinData, packed_layout, vocab
from performer_protein.attention import _features, attention

HEADER = ["checkpoint", "attention", "objective", "features", "layer", "rank_mean", "rank_min", "rank_max",
          "length_mean", "rank_over_n", "family", "score_rank_mean", "score_rank_max", "relatives_mass_mean",
          "relatives_mass_uniform"]


def _linear_features(cfg, layer, x, true_scale):
    """phi(x) [H, n, m] of q or k [H, n, D]; with true_scale the features at exp(c - max c)
    (c the per-row log-scales of FAVOR+ / exp), else as they come (query scale dropped)."""
    W = layer.features if cfg.attention == "exp" else layer.projection
    f, c = _features(cfg.attention, x, W, cfg.exp_key_norm)
    if c is not None and true_scale:  # every row at the scale of the largest
        f = f * torch.exp(c - c.max(-1, keepdim=True).values).unsqueeze(-1)
    return f


def attention_matrix(cfg, layer, q, k):
    """A [H, n, n] of q, k [H, n, D] for the layer's attention kind."""
    H, n, D = q.shape
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    if cfg.attention == "softmax":
        s = (q @ k.transpose(1, 2)) / math.sqrt(D)
        if cfg.causal:
            s = s.masked_fill(~causal, -math.inf)
        return torch.softmax(s, -1)
    # The query's scale cancels in the normalisation; the keys carry theirs.
    a = _linear_features(cfg, layer, q, False) @ _linear_features(cfg, layer, k, True).transpose(1, 2)
    if cfg.causal:
        a = a * causal
    return a / a.sum(-1, keepdim=True)


def score_matrix(cfg, layer, q, k):
    """The unmasked, unnormalised scores [H, n, n] of q, k [H, n, D], each row divided by its
    largest entry: exp(q k^T / sqrt(D) - row max) (softmax) or phi(Q) phi(K)^T (linear kernels;
    the keys at their true relative scales)."""
    if cfg.attention == "softmax":
        s = (q @ k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        return torch.exp(s - s.amax(-1, keepdim=True))
    a = _linear_features(cfg, layer, q, False) @ _linear_features(cfg, layer, k, True).transpose(1, 2)
    return a / a.amax(-1, keepdim=True)


def effective_rank(A, threshold):
    s = torch.linalg.svdvals(A)  # [H, n], descending
    return (s > threshold * s[..., :1]).sum(-1)


def relatives_mass(A, members):
    """[H]: the mean over the rows of every member after the first of the mass each row of A
    [H, n, n] puts on the members before it; members are [begin, end) row ranges back to back
    from row 0. Zero when there is one member."""
    parts = [A[:, b:e, :b].sum(-1) for b, e in members[1:]]  # members before row b are columns [0, b)
    if not parts:
        return torch.zeros(A.shape[0], dtype=A.dtype)
    return torch.cat(parts, 1).mean(-1)


def uniform_attention(n, causal):
    """[1, n, n]: every row's mass spread evenly over the positions it may read (the base rate
    of relatives_mass: later members have more earlier tokens than their own)."""
    A = torch.tril(torch.ones(n, n, dtype=torch.float64)) if causal else torch.ones(n, n, dtype=torch.float64)
    return (A / A.sum(-1, keepdim=True))[None]


def family_sample(seqs):
    """ids [1, n], positions [1, n], segments and member row ranges of members (residue arrays)
    laid out as the trainer's family sample: each member its residues then <end>, positions
    restarting at 0 for every member, one segment (the members after the first join it)."""
    ids, members, begin = [], [], 0
    for s in seqs:
        ids += [int(t) for t in s] + [vocab.END]
        members.append((begin, begin + len(s) + 1))
        begin += len(s) + 1
    n = len(ids)
    positions, segments = packed_layout([0] * len(seqs), [b for b, _ in members], [0] * len(seqs), 1, n,
                                        [0] + [1] * (len(seqs) - 1))
    return torch.as_tensor(ids, dtype=torch.long)[None], positions, segments, members


def single_sample(seq):
    ids = torch.as_tensor(seq.astype("int64"))[None]
    n = ids.shape[1]
    return ids, torch.arange(n)[None], [[(0, n)]], [(0, n)]


def load_samples(args):
    """(ids, positions, segments, members) of every sample; exits naming the file when there is none."""
    with ProteinData(args.data) as data:
        split = data.split(args.split)
        if args.family == 0:
            seqs = [split.sequence(i) for i in range(len(split))
                    if args.min_length <= len(split.sequence(i)) <= args.max_length][:args.proteins]
            if not seqs:
                sys.exit(f"attention_rank.py: {args.data} /{args.split} has no protein of length "
                         f"{args.min_length}-{args.max_length}")
            return [single_sample(s) for s in seqs]
        if split.clusters is None:
            sys.exit(f"attention_rank.py: --family needs a cluster split; {args.data} is split by "
                     f"{data.split_rule} (no /{args.split}/clusters)")
        families = {}
        for i, c in enumerate(split.clusters.tolist()):  # members in ascending protein order
            families.setdefault(c, []).append(i)
        samples = []
        for c in sorted(families):  # the order of the /clusters table
            members = families[c]
            if len(members) < args.family:
                continue
            seqs = [split.sequence(i) for i in members[:args.family]]
            if args.min_length <= sum(len(s) + 1 for s in seqs) <= args.max_length:
                samples.append(family_sample(seqs))
                if len(samples) == args.proteins:
                    break
        if not samples:
            sys.exit(f"attention_rank.py: {args.data} /{args.split} has no cluster of at least {args.family} "
                     f"members whose first {args.family} are {args.min_length}-{args.max_length} tokens "
                     f"together (residues and <end>s)")
        return samples


def check_header(path):
    """True when path exists with this script's header (append), False when it is new or empty;
    exits naming the file when its header differs."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return False
    with open(path, newline="") as f:
        first = next(csv.reader(f), [])
    if first != HEADER:
        sys.exit(f"attention_rank.py: {path} has another header ({','.join(first)}); this script writes "
                 f"{','.join(HEADER)}: give a new --output")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="prepared HDF5 data file")
    ap.add_argument("--split", default="test")
    ap.add_argument("--proteins", type=int, default=16, help="samples: proteins, or families with --family")
    ap.add_argument("--family", type=int, default=0, metavar="K",
                    help="K >= 1: samples of K members of one cluster (a family sample); 0: single proteins")
    ap.add_argument("--min-length", type=int, default=64, help="of a protein, or of a family sample")
    ap.add_argument("--max-length", type=int, default=256, help="of a protein, or of a family sample")
    ap.add_argument("--threshold", type=float, default=0.01)
    ap.add_argument("--output", help="CSV to write (appended to when it exists with the same header)")
    ap.add_argument("checkpoints", nargs="+")
    args = ap.parse_args()
    if args.family < 0:
        ap.error(f"--family must be 0 (single proteins) or K >= 1, got {args.family}")
    if args.proteins < 1:
        ap.error(f"--proteins must be at least 1, got {args.proteins}")
    append = check_header(args.output) if args.output else False

    samples = load_samples(args)
    rows = []
    for path in args.checkpoints:
        model = PerformerProtein.from_checkpoint(path, dtype=torch.float64).eval()
        cfg = model.config
        H, D = cfg.heads, cfg.head_dim
        per_layer = [{"rank": [], "score": [], "mass": [], "uniform": []} for _ in range(cfg.layers)]
        lengths = []
        with torch.no_grad():
            for ids, positions, segments, members in samples:
                n = ids.shape[1]
                lengths.append(n)
                for l, layer in enumerate(model.layers):
                    x = model.hidden_states(ids, positions, segments, layer=l)
                    qkv = layer.qkv(layer.ln1(x)).view(1, n, 3, H, D).permute(2, 0, 3, 1, 4)
                    q, k, v = qkv[0, 0], qkv[1, 0], qkv[2, 0]
                    A = attention_matrix(cfg, layer, q, k)
                    W = layer.features if cfg.attention == "exp" else layer.projection
                    want = attention(cfg.attention, q, k, v, W, cfg.causal, cfg.chunk, cfg.exp_key_norm)
                    err = float((A @ v - want).abs().max() / want.abs().max())
                    if not err < 1e-6:
                        sys.exit(f"attention_rank.py: {path} layer {l}: A V differs from the model's attention "
                                 f"output by {err:.3g} (relative); the matrix is not the model's")
                    d = per_layer[l]
                    d["rank"] += [(int(r), n) for r in effective_rank(A, args.threshold)]
                    d["score"] += [int(r) for r in effective_rank(score_matrix(cfg, layer, q, k), args.threshold)]
                    d["mass"] += [float(r) for r in relatives_mass(A, members)]
                    d["uniform"] += [float(r) for r in relatives_mass(uniform_attention(n, cfg.causal), members)]
        m = cfg.features if cfg.attention != "softmax" else 0
        for l, d in enumerate(per_layer):
            ranks = [r for r, _ in d["rank"]]
            row = [path, cfg.attention, cfg.objective, m, l, sum(ranks) / len(ranks), min(ranks), max(ranks),
                   sum(lengths) / len(lengths), sum(r / n for r, n in d["rank"]) / len(d["rank"]),
                   args.family, sum(d["score"]) / len(d["score"]), max(d["score"]),
                   sum(d["mass"]) / len(d["mass"]), sum(d["uniform"]) / len(d["uniform"])]
            rows.append(row)
            print(",".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row), flush=True)
    if args.output:
        with open(args.output, "a", newline="") as f:
            w = csv.writer(f)
            if not append:
                w.writerow(HEADER)
            w.writerows(rows)


if __name__ == "__main__":
    main()
