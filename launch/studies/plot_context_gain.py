#!/usr/bin/env python3
"""Plots of the family-context study (docs/results/family-context.md):

  plot_context_gain.py CONTEXT_GAIN.csv VALIDATION.csv PREFIX OUT_FOLDER

gain.png: the context gain (nats per token) by relatives before a member, one
line per run of CONTEXT_GAIN.csv (context_gain_csv.py) whose name starts with
PREFIX; validation.png: the validation loss by step of each run of
VALIDATION.csv (run,step,validation_loss) whose name starts with PREFIX."""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    gain_csv, val_csv, prefix, out = sys.argv[1:]
    buckets = ["1", "2-3", "4-7"]
    gains = {}
    for r in csv.DictReader(open(gain_csv)):
        if r["run"].startswith(prefix) and r["relatives"] in buckets:
            gains.setdefault(r["run"], {})[r["relatives"]] = float(r["gain_nats"])
    curves = {}
    for r in csv.DictReader(open(val_csv)):
        if r["run"].startswith(prefix):
            curves.setdefault(r["run"], []).append((int(r["step"]), float(r["validation_loss"])))
    if not gains or not curves:
        sys.exit(f"plot_context_gain.py: no run named {prefix}* in {gain_csv} or {val_csv}")
    os.makedirs(out, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    colors = plt.cm.tab20.colors
    for i, run in enumerate(sorted(gains, key=lambda k: -gains[k].get("4-7", 0))):
        g = gains[run]
        ax.plot(buckets, [g.get(b) for b in buckets], marker="o", color=colors[i % len(colors)],
                label=run[len(prefix):] or run)
    ax.set_xlabel("relatives before the member")
    ax.set_ylabel("context gain (nats per token)")
    ax.set_title("Gain from relatives, synthetic 95 % families, 3,000 steps")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "gain.png"), dpi=120)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for i, run in enumerate(sorted(curves)):
        pts = sorted(curves[run])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[i % len(colors)],
                label=run[len(prefix):] or run)
    ax.set_xlabel("step")
    ax.set_ylabel("validation loss (nats per token)")
    ax.set_title("Validation loss, family mode")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "validation.png"), dpi=120)


if __name__ == "__main__":
    main()
