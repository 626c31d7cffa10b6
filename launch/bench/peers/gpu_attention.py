#!/usr/bin/env python3
"""Attention forward + backward of the GPU peers, one CSV row per case.

    python3 launch/bench/peers/gpu_attention.py [--device cuda|cpu] [--sizes 4096 16384 65536 131072]
        [--batch 1 --heads 8 -d 64 -m 256] [--reps 5] [--budget-s 40] [--peers sdpa,fla,performer]

The shapes are those of `performer-bench kernels` (q, k, v [B, H, n, d],
an upstream gradient g of the output), so its CSV and this one line up
(launch/bench/peers/gpu_table.py joins them). The peers:

- sdpa_flash: torch.nn.functional.scaled_dot_product_attention restricted
  to the FlashAttention backend (sdpa_kernel(SDPBackend.FLASH_ATTENTION)),
  bf16, causal and bidirectional: the exact attention a user would run.
- fla_chunk: flash-linear-attention's chunked linear attention
  (fla.ops.linear_attn.chunk_linear_attn, Triton, normalize=True), bf16,
  causal only (the package's chunk kernel has no bidirectional form), over
  FAVOR+ features of dimension m that torch makes from q and k inside the
  timed region, as our kernels do: phi(x) = m^-1/2 exp(W x - |x|^2/2 - max),
  x = d^-1/4 q (the row max for queries, the head's max for keys), W the
  same kind of orthogonal projection, held constant.
- performer_pytorch: performer_pytorch.FastAttention(d, nb_features=m,
  causal=...), fp32 (its causal path without fast-transformers' CUDA
  extension is causal_linear_attention_noncuda: 128-row chunks in torch).

Each case: inputs drawn fresh (normal), one untimed run (Triton's compile
happens there), then --reps timed runs of the forward and of the backward
with CUDA events; the median of each. peak_bytes is
torch.cuda.max_memory_allocated over the case, inputs and gradients
included (reset before the inputs are made). A case that runs out of
memory is a row with status "oom"; a peer that does not import is one row
with status "unavailable: ..."; once a peer has spent --budget-s seconds,
its remaining cases are rows with status "skipped: budget". Rows go to
stdout as they come (flushed), so a run stopped at its limit keeps them.

--device cpu is the dry run of the GPU script: SDPA's math backend in fp32
at the sizes given, fla skipped (it needs a GPU), performer_pytorch in fp32;
without torch every peer is one "unavailable" row.
"""
import argparse
import contextlib
import importlib
import statistics
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import seconds_of  # noqa: E402

HEADER = "peer,precision,mode,n,batch,heads,d,m,fwd_s,bwd_s,fwd_bwd_s,tokens_per_s,peak_bytes,status"


def row(peer, precision, mode, n, a, fwd=None, bwd=None, peak=None, status="ok"):
    def num(x, fmt):
        return "" if x is None else format(x, fmt)

    total = None if fwd is None or bwd is None else fwd + bwd
    tokens = None if total is None else a.batch * n / total
    print(
        f"{peer},{precision},{mode},{n},{a.batch},{a.heads},{a.d},{a.m},{num(fwd, '.5f')},{num(bwd, '.5f')},"
        f"{num(total, '.5f')},{num(tokens, '.0f')},{num(peak, 'd')},{status}",
        flush=True,
    )


def orthogonal_projection(torch, m, d, device, generator):
    """Orthogonal blocks of d rows with chi-distributed norms (ours: ChiNorms), [m, d] fp32."""
    blocks = []
    for _ in range((m + d - 1) // d):
        g = torch.randn(d, d, generator=generator, dtype=torch.float64)
        blocks.append(torch.linalg.qr(g)[0])
    w = torch.cat(blocks)[:m]
    norms = torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=1, keepdim=True)
    return (w * norms).to(torch.float32).to(device)


def favor_features(torch, x, W, is_query):
    """FAVOR+ positive features of x [B, T, H, d] -> [B, T, H, m] in x's dtype (exp in fp32)."""
    d, m = x.shape[-1], W.shape[0]
    xs = x.float() * d**-0.25
    u = xs @ W.t() - 0.5 * (xs * xs).sum(-1, keepdim=True)
    top = u.amax(-1, keepdim=True) if is_query else u.amax(dim=(1, 3), keepdim=True)
    return (torch.exp(u - top) * m**-0.5).to(x.dtype)


def sdpa_case(torch, device, a, n, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    backend = SDPBackend.FLASH_ATTENTION if device.type == "cuda" else SDPBackend.MATH
    q, k, v = (torch.randn(a.batch, a.heads, n, a.d, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    g = torch.randn(a.batch, a.heads, n, a.d, device=device, dtype=dtype)

    def forward():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return forward, (q, k, v), g, "bf16" if dtype == torch.bfloat16 else "fp32"


def fla_case(torch, device, a, n, causal):
    from fla.ops.linear_attn import chunk_linear_attn

    if not causal:
        return None
    gen = torch.Generator().manual_seed(n)
    W = orthogonal_projection(torch, a.m, a.d, device, gen)
    shape = (a.batch, n, a.heads, a.d)  # fla's layout [B, T, H, K]
    q, k, v = (torch.randn(*shape, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(*shape, device=device, dtype=torch.bfloat16)

    def forward():
        pq, pk = favor_features(torch, q, W, True), favor_features(torch, k, W, False)
        o, _ = chunk_linear_attn(pq, pk, v, scale=1.0, normalize=True)
        return o

    return forward, (q, k, v), g, "bf16"


def performer_case(torch, device, a, n, causal):
    from performer_pytorch import FastAttention

    attn = FastAttention(dim_heads=a.d, nb_features=a.m, causal=causal).to(device)
    q, k, v = (torch.randn(a.batch, a.heads, n, a.d, device=device, requires_grad=True) for _ in range(3))
    g = torch.randn(a.batch, a.heads, n, a.d, device=device)
    return (lambda: attn(q, k, v)), (q, k, v), g, "fp32"


# key: (the CSV's name, the case maker, the module it needs)
PEERS = {
    "sdpa": ("sdpa_flash", sdpa_case, "torch.nn.attention"),
    "fla": ("fla_chunk", fla_case, "fla.ops.linear_attn"),
    "performer": ("performer_pytorch", performer_case, "performer_pytorch"),
}


def run_peer(torch, device, a, key):
    name, make, module = PEERS[key]
    if key == "fla" and device.type != "cuda":
        row(name, "bf16", "causal", 0, a, status="unavailable: needs a GPU (Triton)")
        return
    try:
        with contextlib.redirect_stdout(sys.stderr):
            importlib.import_module(module)
    except Exception as e:  # ImportError, or a package that fails while importing
        row(name, "", "", 0, a, status=f"unavailable: {type(e).__name__}: {str(e)[:80]}".replace(",", ";"))
        return
    cuda, spent = device.type == "cuda", 0.0
    for n in a.sizes:
        for causal in (True, False):
            mode = "causal" if causal else "bidirectional"
            if spent > a.budget_s:
                row(name, "", mode, n, a, status="skipped: budget")
                continue
            t0 = time.perf_counter()
            try:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                with contextlib.redirect_stdout(sys.stderr):  # a peer's prints stay out of the CSV
                    case = make(torch, device, a, n, causal)
                if case is None:
                    row(name, "bf16", mode, n, a, status="n/a: no bidirectional chunk kernel")
                    continue
                forward, inputs, g, precision = case
                fwd_s, bwd_s = [], []
                for rep in range(a.reps + 1):
                    for x in inputs:
                        x.grad = None
                    out = [None]

                    def fwd():
                        out[0] = forward()

                    tf = seconds_of(torch, cuda, fwd)
                    tb = seconds_of(torch, cuda, lambda: out[0].backward(g))
                    if rep > 0:
                        fwd_s.append(tf)
                        bwd_s.append(tb)
                bad = [x for x in inputs if x.grad is None or not bool(torch.isfinite(x.grad).all())]
                peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else None
                status = "ok" if not bad else "non-finite gradient"
                row(name, precision, mode, n, a, statistics.median(fwd_s), statistics.median(bwd_s), peak, status)
            except torch.cuda.OutOfMemoryError:
                row(name, "", mode, n, a, status="oom")
            except Exception as e:  # a peer's failure is a row, never the end of the table
                row(name, "", mode, n, a, status=f"error: {type(e).__name__}: {str(e)[:80]}".replace(",", ";"))
            finally:
                spent += time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384, 65536, 131072])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("-d", type=int, default=64)
    ap.add_argument("-m", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=40.0, help="seconds per peer before its cases are skipped")
    ap.add_argument("--peers", default="sdpa,fla,performer")
    a = ap.parse_args()
    keys = [p for p in a.peers.split(",") if p]
    unknown = [p for p in keys if p not in PEERS]
    if unknown:
        ap.error(f"unknown peer(s) {', '.join(unknown)}; choose from {', '.join(PEERS)}")
    print(HEADER, flush=True)
    try:
        import torch
    except ImportError as e:
        for key in keys:
            row(PEERS[key][0], "", "", 0, a, status=f"unavailable: no torch ({e})".replace(",", ";"))
        return 0
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_attention.py: --device cuda, but torch sees no GPU", file=sys.stderr)
        return 2
    for key in keys:
        run_peer(torch, device, a, key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
