#!/usr/bin/env python3
"""Tables and plots of launch/studies/scaling.sh: strong and weak scaling, the
scan algorithms inside training steps, FAVOR+ against exact softmax attention.

    python3 launch/studies/plot_scaling.py DIR

Reads DIR/{strong,weak,scan_algorithms,attention,longest}.csv (rows of
`performer-bench train`, prefixed with study, scan and the 1-minute load).
Each configuration is summarised by its fastest timed step (the least
disturbed by other processes on a shared machine) and that step's split.
Writes DIR/summary.csv, DIR/tables.md and DIR/{scaling,scan_algorithms,attention}.png.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PARTS = [("attention_s", "attention"), ("other_s", "other compute"), ("scan_exposed_s", "scan (exposed)"),
         ("allreduce_s", "allreduce"), ("optimizer_s", "optimizer"), ("data_s", "data")]
KEY = ("study", "scan", "attention", "ranks", "sp", "batch", "local_length")


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [r for r in csv.DictReader(f) if not r[next(iter(r))].startswith("#")]


def summarise(rows):
    """Fastest step of each configuration, in input order."""
    best = {}
    for r in rows:
        k = tuple(r[c] for c in KEY)
        if k not in best or float(r["seconds"]) < float(best[k]["seconds"]):
            best[k] = r
    return list(best.values())


def mib(x):
    return float(x) / 2**20


def max_peak(r):
    """' / max' of the largest peak over the ranks, when the CSV has it."""
    return f" / {mib(r['max_peak_bytes']):.0f}" if r.get("max_peak_bytes") else ""


def table(rows, title, lead=("ranks", "N")):
    out = [f"### {title}", "",
           f"| {lead[1]} | local length | global length | step s | tokens/s | attention s | other s | scan s "
           "| scan exposed s | allreduce s | optimizer s | data s | peak MiB rank 0 [/ max over ranks] (planned) | load |",
           "|" + "---:|" * 14]
    for r in rows:
        glob = int(r["local_length"]) * int(r["sp"])
        out.append(f"| {r[lead[0]]} | {r['local_length']} | {glob} | {float(r['seconds']):.3f} | "
                   f"{float(r['tokens_per_s']):.0f} | {float(r['attention_s']):.3f} | {float(r['other_s']):.3f} | "
                   f"{float(r['scan_s']):.4f} | {float(r['scan_exposed_s']):.4f} | {float(r['allreduce_s']):.4f} | "
                   f"{float(r['optimizer_s']):.4f} | {float(r['data_s']):.4f} | "
                   f"{mib(r['peak_bytes']):.0f}{max_peak(r)} ({mib(r['planned_bytes']):.0f}) | {r['load1']} |")
    return "\n".join(out) + "\n"


def stacked(ax, rows, labels, title):
    bottom = [0.0] * len(rows)
    for i, (col, name) in enumerate(PARTS):
        vals = [float(r[col]) for r in rows]
        ax.bar(range(len(rows)), vals, bottom=bottom, label=name, color=f"C{i}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.plot(range(len(rows)), [float(r["seconds"]) for r in rows], "k_", markersize=20, label="step (wall)")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("seconds per step (rank 0)")
    ax.set_title(title)


def scaling_plot(strong, weak, out):
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    for row, (rows, name) in enumerate([(strong, "strong"), (weak, "weak")]):
        if not rows:
            continue
        n = [int(r["ranks"]) for r in rows]
        tps = [float(r["tokens_per_s"]) for r in rows]
        ax = axes[row][0]
        ax.plot(n, tps, "o-", label="measured")
        ax.plot(n, [tps[0] * k / n[0] for k in n], "k--", label="ideal (linear in N)")
        ax.plot(n, [tps[0] * min(k, 2) / min(n[0], 2) for k in n], "k:", label="ideal on 2 cores")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks N (sp = N; N > 2 oversubscribed)")
        ax.set_ylabel("tokens/s (all ranks)")
        ax.set_title(f"{name} scaling: throughput")
        ax.legend(fontsize=8)
        stacked(axes[row][1], rows, [f"N={k}\n{int(r['local_length'])}/rank" for k, r in zip(n, rows)],
                f"{name} scaling: step split")
        if row == 0:
            axes[row][1].legend(fontsize=8)
        ax = axes[row][2]
        ax.plot(n, [mib(r["peak_bytes"]) for r in rows], "o-", label="measured peak (rank 0)")
        ax.plot(n, [mib(r["planned_bytes"]) for r in rows], "s--", label="planner")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks N")
        ax.set_ylabel("MiB per rank")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{name} scaling: peak memory per rank")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def scan_plot(rows, out):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, n in zip(axes, ("4", "8")):
        sel = [r for r in rows if r["ranks"] == n]
        if not sel:
            continue
        stacked(ax, sel, [r["scan"].replace("_", "\n") for r in sel], f"N = {n}, scan inside training steps")
        for i, r in enumerate(sel):
            ax.text(i, float(r["seconds"]), f" scan {1e3 * float(r['scan_s']):.1f} ms", ha="center", va="bottom",
                    fontsize=8)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def attention_plot(rows, out):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for kind, style in (("favor", "o-"), ("softmax", "s--")):
        sel = sorted((r for r in rows if r["attention"] == kind), key=lambda r: int(r["local_length"]))
        n = [int(r["local_length"]) for r in sel]
        axes[0].plot(n, [float(r["tokens_per_s"]) for r in sel], style, label=kind)
        axes[1].plot(n, [mib(r["peak_bytes"]) for r in sel], style, label=kind)
    for ax, yl, t in ((axes[0], "tokens/s", "throughput"), (axes[1], "peak MiB", "peak memory")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length (one rank)")
        ax.set_ylabel(yl)
        ax.set_title(f"FAVOR+ vs exact softmax, same model: {t}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def crossover(rows):
    """Shortest measured length from which FAVOR+ has more tokens/s than softmax at every longer length."""
    by = {}
    for r in rows:
        by.setdefault(int(r["local_length"]), {})[r["attention"]] = float(r["tokens_per_s"])
    lengths = sorted(n for n in by if len(by[n]) == 2)
    win = None
    for n in reversed(lengths):
        if by[n]["favor"] > by[n]["softmax"]:
            win = n
        else:
            break
    return win, [(n, by[n]["favor"], by[n]["softmax"]) for n in lengths]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    strong = summarise(read(os.path.join(d, "strong.csv")))
    weak = summarise(read(os.path.join(d, "weak.csv")))
    scans = summarise(read(os.path.join(d, "scan_algorithms.csv")))
    attn = summarise(read(os.path.join(d, "attention.csv")))
    allrows = strong + weak + scans + attn
    if allrows:
        with open(os.path.join(d, "summary.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(allrows[0].keys()))
            w.writeheader()
            w.writerows(allrows)
    md = []
    if strong:
        md.append(table(strong, "Strong scaling"))
        scaling_plot(strong, weak, os.path.join(d, "scaling.png"))
    if weak:
        md.append(table(weak, "Weak scaling"))
    if scans:
        md.append(table(scans, "Scan algorithms inside training steps (N = 4, 8)", lead=("scan", "scan")).replace(
            "| scan | local", "| scan (N) | local"))
        scan_plot(scans, os.path.join(d, "scan_algorithms.png"))
    if attn:
        md.append(table(attn, "FAVOR+ vs exact softmax attention (one rank)", lead=("attention", "attention")))
        attention_plot(attn, os.path.join(d, "attention.png"))
        win, pairs = crossover(attn)
        md.append("| length | FAVOR+ tokens/s | softmax tokens/s | ratio |\n|---:|---:|---:|---:|\n" + "\n".join(
            f"| {n} | {f:.0f} | {s:.0f} | {f / s:.2f} |" for n, f, s in pairs) + "\n")
        md.append(f"FAVOR+ faster from length {win} on (among the measured lengths).\n" if win else
                  "FAVOR+ not faster at any measured length.\n")
    longest = read(os.path.join(d, "longest.csv"))
    if longest:
        md.append("### Longest local length under the cap (planner, preset paper)\n\n"
                  "| checkpointing | batch | longest local length | planned peak GiB | cap GiB |\n"
                  "|---|---:|---:|---:|---:|\n"
                  + "\n".join(f"| {'on' if r['checkpointing'] == '1' else 'off'} | {r['batch']} | "
                              f"{r['longest_local_length']} | {float(r['planned_peak_bytes']) / 2**30:.2f} | "
                              f"{float(r['cap_bytes']) / 2**30:.0f} |" for r in longest) + "\n")
    with open(os.path.join(d, "tables.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
