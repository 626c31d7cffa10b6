#!/usr/bin/env python3
"""Tables and a plot of launch/studies/streams.sh's CSV: median step time and
exposed scan time per case, synchronous against asynchronous CPU streams.

    plot_streams.py streams.csv OUT_DIR     (writes streams.md and streams.png)
"""
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = list(csv.DictReader(open(sys.argv[1])))
out_dir = sys.argv[2]
cases = {}
for r in rows:
    key = (r["preset"], int(r["ranks"]), int(r["local_length"]))
    cases.setdefault(key, {}).setdefault(r["mode"], []).append(r)


def med(rs, key):
    return statistics.median(float(r[key]) for r in rs)


lines = [
    "| preset | ranks | tokens per rank | mode | steps | step s (median) | step s (min-max) | tokens/s | scan s | "
    "scan exposed s | allreduce exposed s | async / sync step time |",
    "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
]
labels, step, exposed = [], {"sync": [], "async": []}, {"sync": [], "async": []}
for (preset, ranks, n), modes in sorted(cases.items()):
    base = med(modes["sync"], "seconds") if "sync" in modes else None
    labels.append(f"{preset}\n{ranks} rank{'s' if ranks > 1 else ''}")
    for mode in ("sync", "async"):
        rs = modes.get(mode, [])
        if not rs:
            step[mode].append(0)
            exposed[mode].append(0)
            continue
        t = med(rs, "seconds")
        secs = [float(r["seconds"]) for r in rs]
        ratio = f"{t / base:.3f}" if base and mode == "async" else ""
        lines.append(
            f"| {preset} | {ranks} | {n} | {mode} | {len(rs)} | {t:.3f} | {min(secs):.2f}-{max(secs):.2f} | "
            f"{med(rs, 'tokens_per_s'):.0f} | {med(rs, 'scan_s'):.4f} | {med(rs, 'scan_exposed_s'):.4f} | "
            f"{med(rs, 'allreduce_exposed_s'):.4f} | {ratio} |")
        step[mode].append(t)
        exposed[mode].append(med(rs, "scan_exposed_s"))
open(f"{out_dir}/streams.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
x = range(len(labels))
for ax, data, title in ((axes[0], step, "median step time (s)"), (axes[1], exposed, "median exposed scan time (s)")):
    ax.bar([i - 0.2 for i in x], data["sync"], 0.4, label="sync")
    ax.bar([i + 0.2 for i in x], data["async"], 0.4, label="async")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    ax.set_title(title)
    ax.legend()
fig.suptitle("CPU streams: synchronous vs asynchronous (launch/studies/streams.sh)")
fig.tight_layout()
fig.savefig(f"{out_dir}/streams.png", dpi=110)
