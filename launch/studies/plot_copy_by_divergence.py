#!/usr/bin/env python3
"""Plot of copy accuracy by divergence (docs/results/family-context.md):

  plot_copy_by_divergence.py COPY_BY_DIVERGENCE.csv OUT.png [TITLE]

One line per run of the CSV (copy_by_divergence.sh): the accuracy on copyable
residues (an earlier relative holds the same residue in the aligned column)
given the relatives, by the families' identity to their root; the accuracy of
the same residues scored alone, dashed, in the same colour."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    path, out = sys.argv[1:3]
    title = sys.argv[3] if len(sys.argv) == 4 else "Copyable residues predicted, held-out families"
    runs = {}
    for r in csv.DictReader(open(path)):
        if r["category"] == "copyable":
            runs.setdefault(r["run"], []).append(
                (float(r["identity"]), float(r["accuracy_context"]), float(r["accuracy_alone"])))
    if not runs:
        sys.exit(f"plot_copy_by_divergence.py: {path}: no 'copyable' rows")
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    colors = plt.cm.tab10.colors
    for k, run in enumerate(sorted(runs, key=lambda r: -max(a for _, a, _ in runs[r]))):
        pts = sorted(runs[run])
        x = [p[0] for p in pts]
        c = colors[k % len(colors)]
        ax.plot(x, [p[1] for p in pts], "o-", color=c, label=f"{run}, with relatives")
        ax.plot(x, [p[2] for p in pts], "x--", color=c, alpha=0.6, label=f"{run}, alone")
    ax.set_xlabel("identity of the members to their root")
    ax.set_ylabel("accuracy on copyable residues")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
