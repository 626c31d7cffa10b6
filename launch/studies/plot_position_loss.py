#!/usr/bin/env python3
"""Loss by position inside long proteins, scored whole and in windows of the
trained length, from CSVs of launch/studies/position_loss.py: one pair of
lines per CSV (label = file name without .csv).

  plot_position_loss.py OUT.png A.csv [B.csv ...]
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for path in sys.argv[2:]:
        rows = list(csv.DictReader(open(path)))
        label = os.path.basename(path)[:-len(".csv")] if path.endswith(".csv") else os.path.basename(path)
        x = [max(int(r["position_from"]), 1) for r in rows]
        line, = ax.plot(x, [float(r["loss_whole"]) for r in rows], marker="o", label=f"{label}: whole protein")
        ax.plot(x, [float(r["loss_windows"]) for r in rows], marker="x", linestyle="--", color=line.get_color(),
                label=f"{label}: windows (positions restart)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("position inside the protein (bucket start)")
    ax.set_ylabel("loss (nats per residue)")
    ax.set_title("proteins longer than the trained length, scored whole or in windows")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=120)


if __name__ == "__main__":
    main()
