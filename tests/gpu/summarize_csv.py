#!/usr/bin/env python3
"""One line of key figures from a benchmark CSV of the GPU script.

    summarize_csv.py train CSV     performer-bench train --longest --confirm
    summarize_csv.py kernels CSV   performer-bench kernels
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
        for variant in ("favor_tf32", "favor_windowed"):
            other = at.get((variant, mode, n))
            if other:
                part += f", {variant} {float(favor['fwd_bwd_s']) / float(other['fwd_bwd_s']):.2f}x favor's speed"
        parts.append(part)
    peak = float(rows[-1]["peak_sgemm_gflops"])
    return f"n={n:,}: " + "; ".join(parts) + f"; sgemm peak {peak:,.0f} GFLOP/s"


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("train", "kernels"):
        sys.exit(__doc__)
    try:
        print(train(sys.argv[2]) if sys.argv[1] == "train" else kernels(sys.argv[2]))
    except (OSError, KeyError, StopIteration, ValueError) as e:
        sys.exit(f"{sys.argv[2]}: cannot summarise: {e!r}")


if __name__ == "__main__":
    main()
