#!/usr/bin/env python3
"""Training-step throughput of performer-pytorch's PerformerLM at our `paper`
preset's sizes, one case per process.

    .peers/venv/bin/python launch/bench/peers/train_step.py --mode causal|bidirectional -n 2048
        [--batch 1] [--reps 3 --warmup 1] [--threads T] [--pos rotary|absolute] [--header]

Model (our `performer-bench train --preset paper`): 6 layers, width 512,
8 heads of 64, FFN 2048 (ff_mult 4), nb_features (m) 256, vocabulary 29,
fp32, no dropout; performer-pytorch's defaults otherwise (pre-LayerNorm,
GELU FFN, untied output layer, rotary position embedding; --pos absolute
uses its learned absolute embedding instead, closer to our fixed sinusoidal
one). Causal: next-token loss on every position (the causal attention path
is the one FastAttention picks, see attention.py; --causal-path ft-cpu
forces fast_transformers' CausalDotProduct). Bidirectional
(non-causal, our masked objective): 15% of the positions replaced by a mask
token, loss on those. One step = forward + loss + backward + AdamW step, timed
as a whole; best of --reps after --warmup untimed steps. Prints one CSV row:
seconds per step, tokens/s = B n / seconds, peak RSS (ru_maxrss), the RSS
before the first step, the parameter count and the peer side's sgemm
GFLOP/s (torch matmul 2048^3, in the same process, after the steps).
"""
import argparse
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

HEADER = ("who,case,impl,mode,batch,n,params,threads,warmup,reps,seconds,tokens_per_s,peak_rss_bytes,"
          "base_rss_bytes,sgemm_gflops,blas_core")
VOCAB, MASK_TOKEN = 29, 2  # <mask> (performer_protein.vocab)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", required=True, choices=["causal", "bidirectional"])
    p.add_argument("-n", type=int, required=True, help="sequence length")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=common.default_threads())
    p.add_argument("--pos", default="rotary", choices=["rotary", "absolute"])
    p.add_argument("--causal-path", default="auto", choices=["auto", "ft-cpu"], help="as attention.py's")
    p.add_argument("--header", action="store_true")
    a = p.parse_args()
    if a.reps < 1 or a.warmup < 0:
        common.die("--reps must be >= 1 and --warmup >= 0")

    torch = common.import_torch(a.threads)
    core = common.check_blas_core()
    try:
        from performer_pytorch import PerformerLM
    except ImportError as e:
        common.die(f"cannot import performer_pytorch ({e}); {common.INSTALL_HINT}")
    import torch.nn.functional as F

    causal = a.mode == "causal"
    torch.manual_seed(0)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        model = PerformerLM(num_tokens=VOCAB, max_seq_len=a.n, dim=512, depth=6, heads=8, dim_head=64,
                            causal=causal, ff_mult=4, nb_features=256, rotary_position_emb=a.pos == "rotary")
    if printed.getvalue().strip():
        print(f"train_step.py: performer-pytorch said: {sorted(set(printed.getvalue().split(chr(10))))[-1]}",
              file=sys.stderr)
    model.train()
    from performer_pytorch.performer_pytorch import FastAttention
    fa = next(mod for mod in model.modules() if isinstance(mod, FastAttention))
    attn = getattr(fa.causal_linear_fn, "func", fa.causal_linear_fn).__name__ if causal else "linear_attention"
    if causal and a.causal_path == "ft-cpu":  # see attention.py --causal-path
        from performer_pytorch.performer_pytorch import causal_linear_attention
        for mod in model.modules():
            if isinstance(mod, FastAttention):
                mod.causal_linear_fn = causal_linear_attention
        attn = "causal_linear_attention = fast_transformers CausalDotProduct [forced]"
    params = sum(t.numel() for t in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(4, 24, (a.batch, a.n), generator=g)
    if causal:
        inputs, targets = tokens, torch.cat([tokens[:, 1:], torch.full((a.batch, 1), -100)], dim=1)
    else:
        masked = torch.rand(a.batch, a.n, generator=g) < 0.15
        inputs = tokens.masked_fill(masked, MASK_TOKEN)
        targets = tokens.masked_fill(~masked, -100)
    base_rss = common.current_rss_bytes()

    def step():
        t0 = common.time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        if not torch.isfinite(loss):
            common.die("non-finite loss")
        return (common.time.perf_counter() - t0,)

    (secs,) = common.best_of(step, a.reps, a.warmup)
    peak = common.peak_rss_bytes()
    del model, opt
    sgemm = common.sgemm_gflops(torch)
    if a.header:
        print(HEADER)
    print(f"performer-pytorch,train {a.mode} n={a.n},\"PerformerLM ({attn}; {a.pos} pos)\",{a.mode},{a.batch},"
          f"{a.n},{params},{a.threads},{a.warmup},{a.reps},{secs:.4f},{a.batch * a.n / secs:.1f},{peak},{base_rss},"
          f"{sgemm:.1f},{core}")


if __name__ == "__main__":
    main()
