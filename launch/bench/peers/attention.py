#!/usr/bin/env python3
"""FAVOR+ attention forward + backward of a public peer, one case per process.

    .peers/venv/bin/python launch/bench/peers/attention.py --peer performer-pytorch|fast-transformers
        --mode causal|bidirectional [--batch 1 --heads 8 -n 4096 -d 64 -m 256] [--reps 3 --warmup 1]
        [--threads T] [--feature-map favor|ft-favor] [--header]

Prints one CSV row (with --header, the header first): forward, backward and
forward + backward seconds of the best of --reps runs after --warmup untimed
runs, tokens/s = B n / (fwd + bwd), the process's peak RSS (ru_maxrss) and its
RSS before the first run, and the peer side's sgemm GFLOP/s (torch fp32
matmul 2048^3, measured in the same process after the case).

What is computed, as in our `performer-bench kernels` (favor_attention_*):
q, k, v [B, H, n, d] fp32 (fast-transformers: its [B, n, H, d] layout),
FAVOR+ positive orthogonal random features with m features of q and k
(x = d^-1/4 q, phi(x) = m^-1/2 exp(W x - |x|^2/2 - max)), linear attention
over them, causal or bidirectional, with the normalisation by
phi(q) . sum phi(k); backward: gradients of q, k, v for an upstream gradient
g (W held constant, as ours).

- performer-pytorch: performer_pytorch.FastAttention(d, nb_features=m,
  causal=...). Its causal path is chosen at construction: it imports
  fast_transformers.causal_product.causal_product_cuda and, on failure (a
  CPU-only install), uses causal_linear_attention_noncuda, which splits the
  sequence into 128 chunks and materialises a [B, H, n/128, m, d] context per
  chunk (O(n m d) memory). The `impl` column says which path it took;
  --causal-path ft-cpu forces the other one (fast_transformers'
  CausalDotProduct, whose CPU extension then runs).
  Bidirectional: its linear_attention (torch einsums).
- fast-transformers: fast_transformers.attention.CausalLinearAttention (its
  CPU extension causal_product_cpu: scalar loops over positions, OpenMP over
  B x H) or LinearAttention (bidirectional; torch einsums), with the feature
  map --feature-map favor (default: the FAVOR+ features above with m
  projections, like ours and performer-pytorch's; query max per row, key max
  per head) or ft-favor (its own fast_transformers.feature_maps.Favor with
  n_dims=m: m/2 projections, features exp(+-Wx), redrawn every call, as
  shipped).
"""
import argparse
import contextlib
import io
import math
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

HEADER = ("who,case,impl,mode,batch,heads,n,d,m,threads,warmup,reps,fwd_s,bwd_s,fwd_bwd_s,tokens_per_s,"
          "peak_rss_bytes,base_rss_bytes,sgemm_gflops,blas_core")


def orthogonal_features(torch, m, d, generator):
    """[m, d]: blocks of d orthonormal rows, each row scaled by the norm of a
    d-dimensional Gaussian (chi-distributed), like ours and performer-pytorch's."""
    blocks = []
    for _ in range(math.ceil(m / d)):
        q, _ = torch.linalg.qr(torch.randn(d, d, generator=generator))
        blocks.append(q.t())
    w = torch.cat(blocks)[:m]
    return w * torch.randn(m, d, generator=generator).norm(dim=1, keepdim=True)


def performer_pytorch_case(torch, a):
    try:
        from performer_pytorch import FastAttention
    except ImportError as e:
        common.die(f"cannot import performer_pytorch ({e}); {common.INSTALL_HINT}")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # its "unable to import cuda code" message
        attn = FastAttention(dim_heads=a.d, nb_features=a.m, causal=a.mode == "causal")
    if a.mode == "causal" and a.causal_path == "ft-cpu":
        # What FastAttention picks when fast_transformers' CUDA causal product
        # imports: causal_linear_attention, i.e. CausalDotProduct, which runs
        # the CPU extension on CPU tensors. Forced here (labelled in `impl`).
        from performer_pytorch.performer_pytorch import causal_linear_attention
        attn.causal_linear_fn = causal_linear_attention
    if a.mode == "causal":
        fn = attn.causal_linear_fn
        name = getattr(fn, "func", fn).__name__
        impl = {"causal_linear_attention_noncuda": "FastAttention/causal_linear_attention_noncuda (torch, 128 chunks)",
                "causal_linear_attention": "FastAttention/causal_linear_attention (fast_transformers CausalDotProduct)"
                }.get(name, "FastAttention/" + name)
        if printed.getvalue().strip():
            print(f"attention.py: performer-pytorch said: {printed.getvalue().strip()}", file=sys.stderr)
        if a.causal_path == "ft-cpu":
            impl += " [forced]"
    else:
        impl = "FastAttention/linear_attention (torch einsums)"
    shape = (a.batch, a.heads, a.n, a.d)
    return attn, shape, impl, lambda q, k, v: attn(q, k, v)


class PositiveFeatures:
    """FAVOR+ positive features with m projections, as a fast-transformers feature map."""

    @staticmethod
    def make(torch, m):
        from fast_transformers.feature_maps.base import FeatureMap

        class Favor(FeatureMap):
            def __init__(self, query_dims):
                super().__init__(query_dims)
                self.register_buffer("w", orthogonal_features(torch, m, query_dims, torch.Generator().manual_seed(1)))
                self.scale = query_dims ** -0.25

            def new_feature_map(self, device):  # W held constant, as ours
                pass

            def _phi(self, x, is_query):  # x [B, n, H, d] -> [B, n, H, m]
                x = x * self.scale
                u = x @ self.w.t() - 0.5 * (x * x).sum(-1, keepdim=True)
                mx = u.amax(dim=-1, keepdim=True) if is_query else u.amax(dim=(1, 3), keepdim=True)
                return torch.exp(u - mx.detach()) * m ** -0.5

            def forward_queries(self, x):
                return self._phi(x, True)

            def forward_keys(self, x):
                return self._phi(x, False)

        return Favor


def fast_transformers_case(torch, a):
    try:
        import fast_transformers.causal_product as cp
        # fast_transformers/attention/__init__.py imports every attention module,
        # among them the clustered and reformer ones that need the CPU extensions
        # a causal-product-only install does not build. Register the package
        # without running its __init__, then import the two modules we use.
        import fast_transformers
        pkg = types.ModuleType("fast_transformers.attention")
        pkg.__path__ = [os.path.join(os.path.dirname(fast_transformers.__file__), "attention")]
        sys.modules.setdefault("fast_transformers.attention", pkg)
        from fast_transformers.attention.causal_linear_attention import CausalLinearAttention
        from fast_transformers.attention.linear_attention import LinearAttention
        from fast_transformers.feature_maps import Favor
        from fast_transformers.masking import FullMask, LengthMask, TriangularCausalMask
    except ImportError as e:
        common.die(f"cannot import fast_transformers and its CPU causal product ({e}); {common.INSTALL_HINT}")
    if a.feature_map == "favor":
        fmap, fname = PositiveFeatures.make(torch, a.m), f"FAVOR+ m={a.m} projections"
    else:
        fmap, fname = Favor.factory(n_dims=a.m), f"ft Favor n_dims={a.m}"
    lengths = LengthMask(torch.full((a.batch,), a.n, dtype=torch.long), max_len=a.n)
    if a.mode == "causal":
        attn, mask = CausalLinearAttention(a.d, feature_map=fmap), TriangularCausalMask(a.n)
        impl = f"CausalLinearAttention/{cp.causal_dot_product_cpu.__module__} ({fname})"
    else:
        attn, mask = LinearAttention(a.d, feature_map=fmap), FullMask(a.n, a.n)
        impl = f"LinearAttention (torch einsums; {fname})"
    shape = (a.batch, a.n, a.heads, a.d)
    return attn, shape, impl, lambda q, k, v: attn(q, k, v, mask, lengths, lengths)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--peer", required=True, choices=["performer-pytorch", "fast-transformers"])
    p.add_argument("--mode", required=True, choices=["causal", "bidirectional"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("-n", type=int, default=4096)
    p.add_argument("-d", type=int, default=64)
    p.add_argument("-m", type=int, default=256)
    p.add_argument("--reps", type=int, default=3, help="timed runs (best kept)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first")
    p.add_argument("--threads", type=int, default=common.default_threads())
    p.add_argument("--feature-map", default="favor", choices=["favor", "ft-favor"], help="fast-transformers only")
    p.add_argument("--causal-path", default="auto", choices=["auto", "ft-cpu"],
                   help="performer-pytorch causal only: auto (what it picks) or ft-cpu (force fast_transformers' "
                        "CausalDotProduct, its path when fast_transformers' CUDA module imports)")
    p.add_argument("--header", action="store_true", help="print the CSV header first")
    a = p.parse_args()
    if a.reps < 1 or a.warmup < 0:
        common.die("--reps must be >= 1 and --warmup >= 0")

    torch = common.import_torch(a.threads)
    core = common.check_blas_core()
    case = performer_pytorch_case if a.peer == "performer-pytorch" else fast_transformers_case
    module, shape, impl, fn = case(torch, a)

    g = torch.Generator().manual_seed(99)
    q, k, v, dout = (torch.randn(*shape, generator=g) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    base_rss = common.current_rss_bytes()

    def step():
        for t in (q, k, v):
            t.grad = None
        t0 = common.time.perf_counter()
        out = fn(q, k, v)
        t1 = common.time.perf_counter()
        out.backward(dout)
        t2 = common.time.perf_counter()
        del out
        return (t1 - t0, t2 - t1)

    tf, tb = common.best_of(step, a.reps, a.warmup)
    peak = common.peak_rss_bytes()
    if not all(bool(torch.isfinite(t.grad).all()) for t in (q, k, v)):
        common.die("non-finite gradients")
    del q, k, v, dout, module
    sgemm = common.sgemm_gflops(torch)

    if a.header:
        print(HEADER)
    t = tf + tb
    print(f"{a.peer},attn {a.mode} n={a.n},\"{impl}\",{a.mode},{a.batch},{a.heads},{a.n},{a.d},{a.m},{a.threads},"
          f"{a.warmup},{a.reps},{tf:.4f},{tb:.4f},{t:.4f},{a.batch * a.n / t:.0f},{peak},{base_rss},{sgemm:.1f},{core}")


if __name__ == "__main__":
    main()
