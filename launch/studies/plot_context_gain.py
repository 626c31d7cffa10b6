#!/usr/bin/env python3
"""Plots of the family-context study (docs/results/family-context.md):

  plot_context_gain.py CONTEXT_GAIN.csv VALIDATION.csv PREFIX OUT_FOLDER

gain.png: the context gain (nats per token) by relatives before a member, one
line per run of CONTEXT_GAIN.csv (context_gain_csv.py) whose name starts with
PREFIX; validation.png: the validation loss by step of each run of
VALIDATION.csv (run,step,validation_loss) whose name starts with PREFIX.
PREFIX may list several, comma-separated (a run is labelled without the
first one it starts with when that one ends in "_", else by its whole name),
and VALIDATION.csv several files, comma-separated."""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    gain_csv, val_csvs, prefixes, out = sys.argv[1:]
    prefixes = prefixes.split(",")

    def label(run):
        for p in prefixes:
            if run.startswith(p):
                return (run[len(p):] if p.endswith("_") else "") or run
        return None

    buckets = ["1", "2-3", "4-7"]
    gains = {}
    for r in csv.DictReader(open(gain_csv)):
        if label(r["run"]) and r["relatives"] in buckets:
            gains.setdefault(r["run"], {})[r["relatives"]] = float(r["gain_nats"])
    curves = {}
    for val_csv in val_csvs.split(","):
        for r in csv.DictReader(open(val_csv)):
            if label(r["run"]):
                curves.setdefault(r["run"], []).append((int(r["step"]), float(r["validation_loss"])))
    prefix, val_csv = ",".join(prefixes), val_csvs
    if not gains or not curves:
        sys.exit(f"plot_context_gain.py: no run named {prefix}* in {gain_csv} or {val_csv}")
    os.makedirs(out, exist_ok=True)
    colors = plt.cm.tab20.colors
    ordered = sorted(gains, key=lambda k: -gains[k].get("4-7", 0))
    figure(os.path.join(out, "gain.png"), "Gain from relatives, synthetic 95 % families, 3,000 steps",
           "relatives before the member", "context gain (nats per token)",
           [(label(run), buckets, [gains[run].get(b) for b in buckets], "o") for run in ordered],
           colors)
    figure(os.path.join(out, "validation.png"), "Validation loss, family mode", "step",
           "validation loss (nats per token)",
           [(label(run), [p[0] for p in sorted(curves[run])], [p[1] for p in sorted(curves[run])], None)
            for run in sorted(curves)], colors)


def figure(path, title, xlabel, ylabel, lines, colors):
    """One line plot, the legend beside it: lines are (label, x, y, marker)."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for i, (label, x, y, marker) in enumerate(lines):
        ax.plot(x, y, marker=marker, color=colors[i % len(colors)], label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)

if __name__ == "__main__":
    main()
