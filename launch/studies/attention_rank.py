#!/usr/bin/env python3
"""Effective rank of the attention matrices of trained checkpoints on held-out
proteins (docs/results/kernel-study.md).

For each checkpoint, each of the first --proteins proteins of --split whose
length lies in [--min-length, --max-length], each layer and each head: the
row-normalised attention matrix A [n, n] of that head on that protein alone
(positions 0..n-1; causal models masked to j <= i), exactly as the model
computes it (performer_protein, the trainer's function in PyTorch, float64),
and its effective rank: the number of singular values above --threshold times
the largest. A linear attention matrix D^-1 phi(Q) phi(K)^T has rank at most
m; the causal mask lifts that bound (a lower-triangular matrix with a positive
diagonal has full rank), so the number says most for the masked-LM models.

Prints and writes (--output) a CSV: checkpoint, attention, objective,
features, layer, mean / min / max effective rank over heads and proteins,
the mean length n, and mean rank / n.
"""
import argparse
import csv
import math
import sys

import torch

from performer_protein import PerformerProtein, ProteinData
from performer_protein.attention import _features


def attention_matrix(cfg, layer, q, k):
    """A [H, n, n] of q, k [H, n, D] for the layer's attention kind."""
    H, n, D = q.shape
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    if cfg.attention == "softmax":
        s = (q @ k.transpose(1, 2)) / math.sqrt(D)
        if cfg.causal:
            s = s.masked_fill(~causal, -math.inf)
        return torch.softmax(s, -1)
    W = layer.features if cfg.attention == "exp" else layer.projection
    fq, _ = _features(cfg.attention, q, W, cfg.exp_key_norm)
    fk, ck = _features(cfg.attention, k, W, cfg.exp_key_norm)
    if ck is not None:  # every key at the scale of the largest (the query's scale cancels)
        fk = fk * torch.exp(ck - ck.max(-1, keepdim=True).values).unsqueeze(-1)
    a = fq @ fk.transpose(1, 2)
    if cfg.causal:
        a = a * causal
    return a / a.sum(-1, keepdim=True)


def effective_rank(A, threshold):
    s = torch.linalg.svdvals(A)  # [H, n], descending
    return (s > threshold * s[..., :1]).sum(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="prepared HDF5 data file")
    ap.add_argument("--split", default="test")
    ap.add_argument("--proteins", type=int, default=16)
    ap.add_argument("--min-length", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threshold", type=float, default=0.01)
    ap.add_argument("--output", help="CSV to write (appended to when it exists)")
    ap.add_argument("checkpoints", nargs="+")
    args = ap.parse_args()

    with ProteinData(args.data) as data:
        split = data.split(args.split)
        seqs = [split.sequence(i) for i in range(len(split))
                if args.min_length <= len(split.sequence(i)) <= args.max_length][:args.proteins]
    if not seqs:
        sys.exit(f"attention_rank.py: {args.data} /{args.split} has no protein of length "
                 f"{args.min_length}-{args.max_length}")
    header = ["checkpoint", "attention", "objective", "features", "layer", "rank_mean", "rank_min", "rank_max",
              "length_mean", "rank_over_n"]
    rows = []
    for path in args.checkpoints:
        model = PerformerProtein.from_checkpoint(path, dtype=torch.float64).eval()
        cfg = model.config
        H, D = cfg.heads, cfg.head_dim
        per_layer = [[] for _ in range(cfg.layers)]
        lengths = []
        with torch.no_grad():
            for seq in seqs:
                ids = torch.as_tensor(seq.astype("int64"))[None]
                n = ids.shape[1]
                lengths.append(n)
                for l, layer in enumerate(model.layers):
                    x = model.hidden_states(ids, layer=l)
                    qkv = layer.qkv(layer.ln1(x)).view(1, n, 3, H, D).permute(2, 0, 3, 1, 4)
                    A = attention_matrix(cfg, layer, qkv[0, 0], qkv[1, 0])
                    per_layer[l] += [(int(r), n) for r in effective_rank(A, args.threshold)]
        m = cfg.features if cfg.attention != "softmax" else 0
        for l, values in enumerate(per_layer):
            ranks = [r for r, _ in values]
            row = [path, cfg.attention, cfg.objective, m, l, sum(ranks) / len(ranks), min(ranks), max(ranks),
                   sum(lengths) / len(lengths), sum(r / n for r, n in values) / len(values)]
            rows.append(row)
            print(",".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row), flush=True)
    if args.output:
        import os
        new = not os.path.exists(args.output)
        with open(args.output, "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(header)
            w.writerows(rows)


if __name__ == "__main__":
    main()
