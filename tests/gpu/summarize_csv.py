#!/usr/bin/env python3
"""One line of key figures from a benchmark CSV of the GPU script.

    summarize_csv.py train CSV     performer-bench train --longest --confirm
    summarize_csv.py step CSV      performer-bench train --length N (a timed step, "# rank" lines)
    summarize_csv.py reductions CSV  performer-bench reductions
    summarize_csv.py kernels CSV   performer-bench kernels
    summarize_csv.py ratio CSV BASE  two performer-bench train --length N runs: best step time of CSV over BASE's
"""
import csv
import sys

MIB = 1 << 20


def train(path):
    rows, confirmed = [], None
    with open(path) as f:
        for line in f:
            if line.startswith("# confirmed,"):
                confirmed = line.strip().split(",")[1:]
            elif line.strip():
                rows.append(line)
    row = next(csv.DictReader(rows))
    text = (f"longest {int(row['longest_local_length']):,} tokens, planned peak "
            f"{int(row['planned_peak_bytes']) / MIB:,.0f} MiB of {int(row['cap_bytes']) / MIB:,.0f}")
    if confirmed:
        measured = int(confirmed[2])
        where = f" on {confirmed[4]}" if len(confirmed) > 4 else ""
        text += (f"; one step{where} {float(confirmed[3]):.2f} s, measured peak {measured / MIB:,.0f} MiB "
                 f"(measured/planned {measured / int(row['planned_peak_bytes']):.3f})")
    else:
        text += "; no confirming step"
    return text


def step(path):
    rows, ranks = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("# rank,") and not line.startswith("# rank,planned"):
                ranks.append([int(x) for x in line.strip().split(",")[1:]])
            elif line.strip() and not line.startswith("#"):
                rows.append(line)
    timed = list(csv.DictReader(rows))
    last = timed[-1]
    tokens = int(last["local_length"]) * int(last["sp"]) * int(last["batch"])
    text = (f"sp {last['sp']} x dp {last['dp']}, {tokens:,} tokens per sample: step {float(last['seconds']):.2f} s "
            f"({float(last['tokens_per_s']):,.0f} tok/s)")
    if not ranks:
        return text + "; no per-rank memory lines"
    worst = max(ranks, key=lambda r: r[2] / r[1])
    pools = [r[3] for r in ranks if r[3] >= 0]
    text += (f"; per rank planned {worst[1] / MIB:,.0f} MiB, largest tracked/planned {worst[2] / worst[1]:.4f}"
             f" (rank {worst[0]})")
    if pools:
        text += f", largest device pool high {max(pools) / MIB:,.0f} MiB"
    return text


def reductions(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    widest = max(int(r["C"]) for r in rows)
    parts = [f"{r['op']} {float(r['seconds']) * 1e3:.2f} ms ({float(r['fraction_of_copy']):.2f} of copy)"
             for r in rows if int(r["C"]) == widest]
    return (f"T={int(rows[0]['T']):,} C={widest:,} on {rows[0]['device']}: " + ", ".join(parts) +
            f"; copy {float(rows[-1]['copy_gb_per_s']):,.0f} GB/s")


def kernels(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    n = max(int(r["n"]) for r in rows)
    at = {(r["kernel"], r["mode"], int(r["n"])): r for r in rows}
    both = [int(r["n"]) for r in rows if r["kernel"] == "softmax"]
    parts = []
    for mode in ("causal", "bidirectional"):
        favor = at.get(("favor", mode, n))
        if not favor:
            continue
        part = f"{mode} favor {float(favor['tokens_per_s']):,.0f} tok/s ({float(favor['fraction_of_peak']):.2f} of sgemm)"
        if both:
            m = max(both)
            soft, fav = at[("softmax", mode, m)], at[("favor", mode, m)]
            part += f", softmax {float(soft['fwd_bwd_s']) / float(fav['fwd_bwd_s']):.1f}x its time at n={m:,}"
        for variant in ("favor_tf32", "favor_tf32_slices64", "favor_tf32_tiles", "favor_bf16", "favor_bf16_global_w",
                        "favor_windowed"):
            other = at.get((variant, mode, n))
            if other:
                part += f", {variant} {float(favor['fwd_bwd_s']) / float(other['fwd_bwd_s']):.2f}x favor's speed"
        parts.append(part)
    peak = float(rows[-1]["peak_sgemm_gflops"])
    return f"n={n:,}: " + "; ".join(parts) + f"; sgemm peak {peak:,.0f} GFLOP/s"


def best_step(path):
    with open(path) as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return min(float(r["seconds"]) for r in rows)


def ratio(path, base):
    mine, theirs = best_step(path), best_step(base)
    return f"{mine / theirs:.2f} ({mine * 1e3:.1f} ms / {theirs * 1e3:.1f} ms, best of the timed steps)"


def main():
    modes = {"train": train, "step": step, "reductions": reductions, "kernels": kernels, "ratio": ratio}
    arity = {"ratio": 4}
    if len(sys.argv) < 3 or sys.argv[1] not in modes or len(sys.argv) != arity.get(sys.argv[1], 3):
        sys.exit(__doc__)
    try:
        print(modes[sys.argv[1]](*sys.argv[2:]))
    except (OSError, KeyError, StopIteration, ValueError, IndexError, ZeroDivisionError) as e:
        sys.exit(f"{sys.argv[2]}: cannot summarise: {e!r}")


if __name__ == "__main__":
    main()
