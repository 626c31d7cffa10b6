#!/usr/bin/env python3
"""Seconds per query against the context's length, one line per kernel and
mode, from the CSV of launch/studies/context_cost.sh (log-log axes).

  plot_context_cost.py context_cost.csv OUT.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    fig, ax = plt.subplots(figsize=(6, 4))
    for key in sorted({(r["kernel"], r["mode"]) for r in rows}):
        pts = sorted((int(r["context_tokens"]), float(r["per_query_s"])) for r in rows if (r["kernel"], r["mode"]) == key)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{key[0]} {key[1]}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("context tokens")
    ax.set_ylabel("seconds per query (given the context)")
    ax.set_title("performer-score --context, small preset, 1 rank, 2 threads")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
