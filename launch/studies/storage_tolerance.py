#!/usr/bin/env python3
"""Numerical study: rel-L2 error of linear attention with f16/bf16 storage,
behind the tolerance (8 u) of the GPU test's storage cases.

    launch/studies/storage_tolerance.py --count 50000 --count-big 2500 --count-two 10000
    (about 12 minutes on 2 cores; the table is docs/results/storage_tolerance.txt)

Emulates tests/kernels/test_linear_attention_gpu.cc
  LinearAttentionGpu.HalfStorageMatchesReference      (Case{2,7,64,32,4}, Case{3,300,100,64,64};
                                                        causal and bidirectional)
  LinearAttentionGpu.HalfStorageTwoBlocksMatchReference (1 head, n=200, m=64, d=32, cut=77, causal)

Problem (make_problem, c_max = 2):
  pq, pk  = m^-1/2 * (1 - U[0,1))   (float32), [heads, n, m]
  ck      = U[-2, 2)                (float32, NOT rounded to storage), [heads, n]
  v, d_o  = N(0, 1)                 (float64 -> float32), [heads, n, d]
  pq, pk, v, d_o rounded to the storage type (RNE), as rounded_problem() does.

Reference: float64 on the rounded inputs (exact o inside G).
Emulated device result ("got"):
  math in float64 (default) or float32 (--math f32; plain numpy float32, not the
  GPU's summation order), values first rounded to float32, then
  o          = rnd(num/den)                          (normalize writes o once)
  G_i        = [dO_i/den_i, -(dO_i . rnd(o_i))/den_i] (backward reads the stored o; den fp32)
  dq, dk, dv = rnd(...)                              (written once by *_local / bidirectional)
  two-block: dq[i>=cut] = rnd(rnd(local) + prefix), dk/dv[j<cut] = rnd(rnd(local) + suffix)
             (add_* widen the stored gradient, add in fp32, round again)
rnd = round to nearest even: bf16 via the float32 bit trick of tests/support/storage.h,
f16 via numpy float32 -> float16 (11 significant bits, subnormals, max 65504).
"""
import argparse
import multiprocessing as mp
import sys
import time

import numpy as np


def rnd_bf16(x):
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def rnd_f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float64)


RND = {"f16": rnd_f16, "bf16": rnd_bf16}
UNIT = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8}


def make_problem(rng, heads, n, m, d, c_max=2.0):
    top = np.float32(1.0) / np.sqrt(np.float32(m))
    pq = (top * (np.float32(1) - rng.random((heads, n, m)).astype(np.float32))).astype(np.float32)
    pk = (top * (np.float32(1) - rng.random((heads, n, m)).astype(np.float32))).astype(np.float32)
    ck = (np.float32(-c_max) + np.float32(2 * c_max) * rng.random((heads, n)).astype(np.float32)).astype(np.float32)
    v = rng.standard_normal((heads, n, d)).astype(np.float32)
    do = rng.standard_normal((heads, n, d)).astype(np.float32)
    return pq, pk, ck, v, do


def rel_l2(got, ref):
    return float(np.sqrt(np.sum((got - ref) ** 2) / max(np.sum(ref ** 2), 1e-300)))


def head_parts(q, k, e, v, do, causal, o_for_g, dt):
    """Forward pieces and the backward matrix A_ij = G_i . V'_j (masked), in dtype dt."""
    q, k, e, v, do = (x.astype(dt) for x in (q, k, e, v, do))
    n = q.shape[0]
    W = (q @ k.T) * e[None, :]
    if causal:
        W = np.tril(W)
    den = W.sum(1)
    o = (W @ v) / den[:, None]
    return W, den, o


def backward_A(do, v, o_g, den, causal, dt):
    do, v, o_g, den = (x.astype(dt) for x in (do, v, o_g, den))
    A = (do @ v.T - (do * o_g).sum(1)[:, None]) / den[:, None]
    if causal:
        A = np.tril(A)
    return A


def run_one(args):
    """One problem of one (kind, storage, causal). Returns dict of errors."""
    kind, t, causal, shape, seed, math = args
    heads, n, m, d, cut = shape
    rng = np.random.default_rng(seed)
    rnd = RND[t]
    pq, pk, ck, v, do = make_problem(rng, heads, n, m, d)
    pq, pk, v, do = rnd(pq), rnd(pk), rnd(v), rnd(do)  # rounded_problem (float64 holding storage values)
    ck = ck.astype(np.float64)
    dt = np.float32 if math == "f32" else np.float64
    ref = {x: [] for x in ("o", "dq", "dk", "dv")}
    got = {x: [] for x in ref}
    diag = {x: [] for x in ("dq_G", "dk_G", "dq_1r", "dk_1r", "dv_1r")}
    for h in range(heads):
        q, k, c, vv, g = pq[h], pk[h], ck[h], v[h], do[h]
        e = np.exp(c)
        # float64 reference on the rounded inputs
        W, den, o = head_parts(q, k, e, vv, g, causal, None, np.float64)
        A = backward_A(g, vv, o, den, causal, np.float64)
        r_dq = (A * e[None, :]) @ k
        r_dk = e[:, None] * (A.T @ q)
        r_dv = W.T @ (g / den[:, None])
        ref["o"].append(o); ref["dq"].append(r_dq); ref["dk"].append(r_dk); ref["dv"].append(r_dv)
        # emulated device
        if dt is np.float64:
            We, dene, oe = W, den, o
        else:
            We, dene, oe = head_parts(q, k, e, vv, g, causal, None, dt)
        o_s = rnd(oe)
        Ae = backward_A(g, vv, o_s, dene, causal, dt)
        ee = e.astype(dt); kk = k.astype(dt); qq = q.astype(dt); gg = g.astype(dt)
        gden = gg / dene.astype(dt)[:, None]
        if kind == "single":
            dq_raw = (Ae * ee[None, :]) @ kk
            dk_raw = ee[:, None] * (Ae.T @ qq)
            dv_raw = We.astype(dt).T @ gden
            e_dq, e_dk, e_dv = rnd(dq_raw), rnd(dk_raw), rnd(dv_raw)
        else:
            # block 0 = rows [0, cut), block 1 = rows [cut, n); causal only.
            b0 = slice(0, cut); b1 = slice(cut, n)
            AE = Ae * ee[None, :]
            dq_raw = AE @ kk
            dq_loc1 = AE[b1, b1] @ kk[b1]          # block-1 local (j in [cut, i])
            dq_pre1 = AE[b1, b0] @ kk[b0]          # backward_add_prefix (j < cut)
            dq0 = rnd(AE[b0, b0] @ kk[b0])
            dq1 = rnd(rnd(dq_loc1).astype(dt) + dq_pre1)
            e_dq = np.concatenate([dq0, dq1])
            dk_loc0 = ee[b0, None] * (Ae[b0, b0].T @ qq[b0])   # block-0 local (i in [j, cut))
            dk_suf0 = ee[b0, None] * (Ae[b1, b0].T @ qq[b1])   # backward_add_suffix (i >= cut)
            dk1 = rnd(ee[b1, None] * (Ae[b1, b1].T @ qq[b1]))
            dk0 = rnd(rnd(dk_loc0).astype(dt) + dk_suf0)
            e_dk = np.concatenate([dk0, dk1])
            dk_raw = ee[:, None] * (Ae.T @ qq)
            Wt = We.astype(dt)
            dv_loc0 = Wt[b0, b0].T @ gden[b0]
            dv_suf0 = Wt[b1, b0].T @ gden[b1]
            dv1 = rnd(Wt[b1, b1].T @ gden[b1])
            dv0 = rnd(rnd(dv_loc0).astype(dt) + dv_suf0)
            e_dv = np.concatenate([dv0, dv1])
            dv_raw = Wt.T @ gden
        got["o"].append(o_s); got["dq"].append(e_dq); got["dk"].append(e_dk); got["dv"].append(e_dv)
        # diagnostics: G-only (rounded o, no output rounding) and one rounding of the exact value
        diag["dq_G"].append(dq_raw.astype(np.float64)); diag["dk_G"].append(dk_raw.astype(np.float64))
        diag["dq_1r"].append(rnd(r_dq)); diag["dk_1r"].append(rnd(r_dk)); diag["dv_1r"].append(rnd(r_dv))
    cat = lambda L: np.concatenate([x.ravel() for x in L])
    out = {x: rel_l2(cat(got[x]), cat(ref[x])) for x in ref}
    out["dq_G"] = rel_l2(cat(diag["dq_G"]), cat(ref["dq"]))
    out["dk_G"] = rel_l2(cat(diag["dk_G"]), cat(ref["dk"]))
    for x in ("dq", "dk", "dv"):
        out[x + "_1r"] = rel_l2(cat(diag[x + "_1r"]), cat(ref[x]))
    return out


CASES = [
    ("single", (2, 7, 64, 32, 0), "n=7 m=64 d=32 h=2"),
    ("single", (3, 300, 100, 64, 0), "n=300 m=100 d=64 h=3"),
    ("two", (1, 200, 64, 32, 77), "two-block n=200 m=64 d=32 cut=77"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=4000, help="problems per small case")
    ap.add_argument("--count-big", type=int, default=2000, help="problems for the n=300 case")
    ap.add_argument("--count-two", type=int, default=4000, help="problems for the two-block case")
    ap.add_argument("--math", choices=["f64", "f32"], default="f64")
    ap.add_argument("--procs", type=int, default=mp.cpu_count())
    a = ap.parse_args()
    t0 = time.time()
    print(f"math={a.math} procs={a.procs}")
    hdr = f"{'storage':5} {'case':34} {'mode':6} {'out':3} {'N':>5} {'median':>9} {'p99':>9} {'p99.9':>9} {'max':>9} {'max/u':>6}  {'1-round med':>11} {'G-only p99':>10}"
    print(hdr)
    worst = {}
    with mp.Pool(a.procs) as pool:
        for t in ("f16", "bf16"):
            u = UNIT[t]
            for kind, shape, name in CASES:
                for causal in ((True, False) if kind == "single" else (True,)):
                    N = a.count_big if shape[1] == 300 else (a.count_two if kind == "two" else a.count)
                    base = ((t == "bf16") * 8 + CASES.index((kind, shape, name)) * 2 + causal) * 10 ** 6
                    jobs = [(kind, t, causal, shape, base + i, a.math) for i in range(N)]
                    res = pool.map(run_one, jobs, chunksize=max(1, N // (4 * a.procs)))
                    for x in ("o", "dq", "dk", "dv"):
                        arr = np.array([r[x] for r in res])
                        med, p99, p999, mx = np.median(arr), np.quantile(arr, 0.99), np.quantile(arr, 0.999), arr.max()
                        one = np.median([r.get(x + "_1r", r["o"] if x == "o" else np.nan) for r in res])
                        g = np.quantile([r[x + "_G"] for r in res], 0.99) if x in ("dq", "dk") else float("nan")
                        print(f"{t:5} {name:34} {'causal' if causal else 'bidir':6} {x:3} {N:5d} {med:9.3e} {p99:9.3e} {p999:9.3e} {mx:9.3e} {mx/u:6.3f}  {one:11.3e} {g:10.3e}")
                        worst[t] = max(worst.get(t, 0), p999)
                    sys.stdout.flush()
    for t in ("f16", "bf16"):
        u = UNIT[t]
        print(f"{t}: u={u:.4e} u/sqrt3={u/np.sqrt(3):.4e} worst p99.9={worst[t]:.4e} = {worst[t]/u:.3f} u")
    print(f"elapsed {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
