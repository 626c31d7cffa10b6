#!/usr/bin/env python3
"""Plot of `performer-bench kernels --csv`: forward+backward time vs n (log-log)
of FAVOR+ attention and exact softmax attention, causal and bidirectional.

    python3 launch/studies/plot_kernels.py OUT.png CSV [CSV ...]
    e.g. plot_kernels.py docs/results/kernels_time_vs_n.png docs/results/kernels.csv docs/results/kernels_short.csv
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    rows = []
    for path in sys.argv[2:]:
        with open(path) as f:
            rows += list(csv.DictReader(f))
    fig, ax = plt.subplots(figsize=(7, 5))
    styles = {
        ("favor", "causal"): dict(color="C0", marker="o", label="FAVOR+ causal"),
        ("favor", "bidirectional"): dict(color="C0", marker="s", linestyle="--", label="FAVOR+ bidirectional"),
        ("softmax", "causal"): dict(color="C3", marker="o", label="exact softmax causal"),
        ("softmax", "bidirectional"): dict(color="C3", marker="s", linestyle="--", label="exact softmax bidirectional"),
    }
    for (kernel, mode), style in styles.items():
        pts = sorted((int(r["n"]), float(r["fwd_bwd_s"])) for r in rows if r["kernel"] == kernel and r["mode"] == mode)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], **style)
    r0 = rows[0]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("forward + backward seconds")
    ax.set_title(f"B={r0['batch']} H={r0['heads']} d={r0['d']} m={r0['m']}, CPU, {r0['threads']} threads")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


if __name__ == "__main__":
    main()
