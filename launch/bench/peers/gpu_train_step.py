#!/usr/bin/env python3
"""Training steps of our model's shape in plain PyTorch with SDPA, one CSV row per length.

    python3 launch/bench/peers/gpu_train_step.py [--device cuda|cpu] [--preset small|paper]
        [--sizes 4096 16384 65536] [--dtype bf16|fp32] [--steps 3] [--warmup 1] [--header]

The peer a user would train instead of ours: the same pre-LayerNorm
transformer as `performer-bench train --preset P` (model/, docs/model.md):
tokens of a 29-letter protein vocabulary, sqrt(C)-scaled embedding plus the
sinusoidal encoding, L layers of x + Wo attn(Wqkv LN1(x)) and
x + W2 gelu(W1 LN2(x)), a final LayerNorm and the tied head, next-token
cross-entropy, AdamW (fused on the GPU); weights N(0, 0.02^2). Attention is
torch.nn.functional.scaled_dot_product_attention, causal, restricted on the
GPU to the FlashAttention backend (sdpa_kernel(SDPBackend.FLASH_ATTENTION))
with --dtype bf16, and to the memory-efficient backend
(SDPBackend.EFFICIENT_ATTENTION) with --dtype fp32, which the flash backend
does not take (it runs fp16 and bf16 only); --dtype bf16 runs the step under torch.autocast(bfloat16) with fp32 master
weights, as our bf16 models keep theirs. Presets: small (2 layers, width
128, 4 heads, FFN 512), paper (6, 512, 8, 2048).

One sample of n tokens per step (B = 1, drawn uniformly from the 20 amino
acids); --warmup untimed steps, then --steps timed ones, each timed with
CUDA events (or the host clock on the CPU); the median. peak_bytes is
torch.cuda.max_memory_allocated over the steps (reset before the model is
built). A length that runs out of memory is a row with status "oom".
Columns: impl,preset,dtype,n,step_s,tokens_per_s,peak_bytes,status.

--device cpu is the GPU script's dry run (SDPA's math backend, fp32); with
a torch older than 2.0 (no SDPA) it computes the same attention explicitly.
Without torch it prints one "unavailable" row.
"""
import argparse
import contextlib
import math
import statistics
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import seconds_of  # noqa: E402

PRESETS = {"small": (2, 128, 4, 512), "paper": (6, 512, 8, 2048)}  # layers, width, heads, FFN
VOCAB = 29
HEADER = "impl,preset,dtype,n,step_s,tokens_per_s,peak_bytes,status"


def row(a, n, step=None, peak=None, status="ok"):
    tokens = "" if step is None else f"{n / step:.0f}"
    print(f"pytorch_sdpa,{a.preset},{a.dtype},{n},{'' if step is None else f'{step:.5f}'},{tokens},"
          f"{'' if peak is None else peak},{status}", flush=True)


def build(torch, layers, width, heads, ffn, device):
    nn, F = torch.nn, torch.nn.functional
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    def attention(q, k, v):
        if sdpa is not None:
            return sdpa(q, k, v, is_causal=True)
        n = q.shape[-2]  # torch < 2.0 (the CPU dry run): the same, explicitly
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        return s.masked_fill(mask, float("-inf")).softmax(-1) @ v

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.ffn1, self.ffn2 = nn.Linear(width, ffn), nn.Linear(ffn, width)

        def forward(self, x):
            n = x.shape[1]
            q, k, v = self.qkv(self.ln1(x)).view(1, n, 3, heads, width // heads).permute(2, 0, 3, 1, 4)
            x = x + self.out(attention(q, k, v).transpose(1, 2).reshape(1, n, width))
            return x + self.ffn2(F.gelu(self.ffn1(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, width)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.ln_f = nn.LayerNorm(width)
            for p in self.parameters():
                if p.dim() > 1:
                    nn.init.normal_(p, std=0.02)

        def forward(self, ids):
            n = ids.shape[1]
            pos = torch.arange(n, device=ids.device, dtype=torch.float32)[:, None]
            freq = torch.exp(torch.arange(0, width, 2, device=ids.device) * (-math.log(10000.0) / width))
            enc = torch.zeros(n, width, device=ids.device)
            enc[:, 0::2], enc[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
            x = self.embed(ids) * math.sqrt(width) + enc
            for layer in self.layers:
                x = layer(x)
            return self.ln_f(x) @ self.embed.weight.t()

    return Model().to(device)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="paper")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384, 65536])
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--header", action="store_true")
    a = ap.parse_args()
    if a.header:
        print(HEADER, flush=True)
    try:
        import torch
    except ImportError as e:
        row(a, 0, status=f"unavailable: no torch ({e})".replace(",", ";"))
        return 0
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_train_step.py: --device cuda, but torch sees no GPU", file=sys.stderr)
        return 2
    cuda = device.type == "cuda"
    flash = None
    if cuda:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        # The flash backend takes fp16/bf16 only: fp32 runs the memory-efficient one.
        backend = SDPBackend.FLASH_ATTENTION if a.dtype == "bf16" else SDPBackend.EFFICIENT_ATTENTION
        flash = lambda: sdpa_kernel(backend)  # noqa: E731
    for n in a.sizes:
        model = opt = None
        try:
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            torch.manual_seed(n)
            model = build(torch, *PRESETS[a.preset], device)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, **({"fused": True} if cuda else {}))
            ids = torch.randint(4, 24, (1, n + 1), device=device)

            def step():
                opt.zero_grad(set_to_none=True)
                autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16")
                with autocast, (flash() if flash else contextlib.nullcontext()):
                    logits = model(ids[:, :-1])
                    loss = torch.nn.functional.cross_entropy(logits.float().view(-1, VOCAB), ids[:, 1:].reshape(-1))
                loss.backward()
                opt.step()
                return loss

            times = []
            loss = [None]

            def run():
                loss[0] = step()

            for s in range(a.warmup + a.steps):
                t = seconds_of(torch, cuda, run)
                if s >= a.warmup:
                    times.append(t)
            status = "ok" if math.isfinite(float(loss[0])) else "non-finite loss"
            row(a, n, statistics.median(times), torch.cuda.max_memory_allocated() if cuda else None, status)
        except torch.cuda.OutOfMemoryError:
            row(a, n, status="oom")
        except Exception as e:  # a failed length is a row, never the end of the table
            row(a, n, status=f"error: {type(e).__name__}: {str(e)[:80]}".replace(",", ";"))
        finally:
            del model, opt
    return 0


if __name__ == "__main__":
    sys.exit(main())
