#!/usr/bin/env python3
"""How far tensor-core operand rounding moves the relu kernel's gradients, from its mask alone.

    relu_mask_rounding.py [--rounding tf32|bf16] [--draws N] [--seed S] D:M ...

The generalized (ReLU) kernel's derivative is the mask u > 0 of u = s x W^T.
When the feature map's product runs on tensor cores with operands rounded to
TF32 (11 significant bits) or bf16 (8), every u within that rounding of 0
may flip its mask, and each flip moves dq by a whole feature's term. This
computes, in float64, bidirectional relu attention's dq for n = 333 rows (the
GPU test's shape) with u from exact and from rounded operands, everything
else exact, and prints the percentiles of the relative L2 difference over N
draws: the floor under which no kernel with that rounding can bring relu's
dq and dk, whatever its other arithmetic
(tests/kernels/test_favor_attention_gpu.cc takes its tolerances for them
from it).
"""
import argparse

import numpy as np


def tf32(x):
    """x rounded to TF32 (10 stored mantissa bits, to nearest, ties away), as float64."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x1000) & 0xFFFFE000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def bf16(x):
    """x rounded to bf16 (7 stored mantissa bits, to nearest even), as float64."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


ROUNDINGS = {"tf32": tf32, "bf16": bf16}


def projection(rng, m, d):
    """Orthogonal blocks with chi-distributed row norms (the test's ChiNorms)."""
    blocks = [np.linalg.qr(rng.standard_normal((d, d)))[0] for _ in range((m + d - 1) // d)]
    return np.vstack(blocks)[:m] * np.sqrt(rng.chisquare(d, (m, 1)))


def dq(q, k, v, g, W, rounded, eps=1e-3):
    """Relu attention's dq; `rounded` is None (exact) or the operands' rounding."""
    s = q.shape[1] ** -0.25
    if rounded:
        uq, uk = rounded(s * q) @ rounded(W).T, rounded(s * k) @ rounded(W).T
    else:
        uq, uk = s * q @ W.T, s * k @ W.T
    pq, pk = np.maximum(uq, 0) + eps, np.maximum(uk, 0) + eps
    S, z = pk.T @ v, pk.sum(0)
    den = pq @ z
    out = (pq @ S) / den[:, None]
    dphi = (g @ S.T - (out * g).sum(1)[:, None] * z[None, :]) / den[:, None]
    return s * ((uq > 0) * dphi) @ W


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="+", help="D:M (head width : features)")
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounding", choices=sorted(ROUNDINGS), default="tf32")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    rounding = ROUNDINGS[a.rounding]
    print("rounding,d,m,draws,p50,p90,p99,max")
    for shape in a.shapes:
        d, m = (int(x) for x in shape.split(":"))
        errs = []
        for _ in range(a.draws):
            q, k, v, g = (rng.standard_normal((333, d)) for _ in range(4))
            W = projection(rng, m, d)
            exact, rounded = dq(q, k, v, g, W, None), dq(q, k, v, g, W, rounding)
            errs.append(np.linalg.norm(rounded - exact) / np.linalg.norm(exact))
        p = np.percentile(errs, [50, 90, 99, 100])
        print(f"{a.rounding},{d},{m},{a.draws}," + ",".join(f"{x:.4f}" for x in p))


if __name__ == "__main__":
    main()
