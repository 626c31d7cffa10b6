#!/usr/bin/env python3
"""Plots of the approximation study (CSV of `performer-bench approx --csv`).

    python3 launch/studies/plot_approx.py docs/results/approx.csv docs/results

writes approx_error_vs_m.png (error vs m: orthogonal/iid x positive/trig),
approx_error_vs_scale.png (error vs the query/key norm scale) and
approx_top1_vs_sharpness.png (planted top-1 agreement vs alpha), one panel per
mode (bidirectional, causal).
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = ["bidirectional", "causal"]
STYLES = {
    ("positive", "orthogonal"): dict(color="C0", marker="o", label="positive (FAVOR+), orthogonal"),
    ("positive", "iid"): dict(color="C0", marker="s", linestyle="--", label="positive (FAVOR+), iid"),
    ("trig", "orthogonal"): dict(color="C3", marker="o", label="trig, orthogonal"),
    ("trig", "iid"): dict(color="C3", marker="s", linestyle="--", label="trig, iid"),
}


def load(path):
    with open(path) as f:
        return [r for r in csv.DictReader(f)]


def series(rows, study, mode, features, projection, x, y):
    pts = [(float(r[x]), float(r[y])) for r in rows
           if r["study"] == study and r["mode"] == mode and r["features"] == features and r["projection"] == projection]
    pts.sort()
    return [p[0] for p in pts], [p[1] for p in pts]


def line_plot(rows, study, x, y, xlabel, ylabel, title, out, logx=False, logy=True, projections=("orthogonal", "iid")):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, mode in zip(axes, MODES):
        for (features, projection), style in STYLES.items():
            if projection not in projections:
                continue
            xs, ys = series(rows, study, mode, features, projection, x, y)
            if xs:
                ax.plot(xs, ys, **style)
        ax.set_title(f"{title} ({mode})")
        ax.set_xlabel(xlabel)
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print("wrote", out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    line_plot(rows, "features", "m", "rms_err_over_rms_v", "features m", "RMS output error / RMS(V)",
              "error vs m", os.path.join(out, "approx_error_vs_m.png"), logx=True)
    line_plot(rows, "scale", "scale", "rms_err_over_rms_v", "q, k norm scale s", "RMS output error / RMS(V)",
              "error vs norm scale, m=256", os.path.join(out, "approx_error_vs_scale.png"))
    line_plot(rows, "sharpness", "alpha", "planted_top1", "planted key k_j* = alpha q_i*",
              "planted query: top-1 agreement", "top-1 vs sharpness, m=256", os.path.join(out, "approx_top1_vs_sharpness.png"),
              logy=False, projections=("orthogonal",))


if __name__ == "__main__":
    main()
