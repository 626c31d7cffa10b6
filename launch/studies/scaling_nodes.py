#!/usr/bin/env python3
"""The performance model against scaling_nodes.sh's measurements over TCP.

    python3 launch/studies/scaling_nodes.py DIR [PRESET]

Reads DIR/comm.csv and DIR/train.csv; fits each link from the same run
(latency a and inverse bandwidth b of one message, t = a + n b, from the
forward chain scan of 2 ranks: on two nodes for a link between nodes, on one
node for shared memory), then predicts every measured scan and allreduce with
perf_model.py's formulas (scan_time, allreduce_time) on those links, and the
scan and gradient-allreduce time of the training steps. Writes DIR/links.csv,
DIR/model_comm.csv, DIR/model_train.csv, DIR/scaling_nodes.md (tables) and
DIR/scaling_nodes.png.
"""
import csv
import os
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_model as pm  # noqa: E402

# Combine cost of the scans on the CPU (s/byte): read two states, write one,
# at about 10 GB/s of one core; small beside the links measured here.
G_CPU = 3 / 10e9


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def fit_link(rows):
    """t = a + n b from (bytes, seconds): b from the two largest messages,
    a from the smallest ones once their transfer time is taken off."""
    pts = sorted((int(r["bytes"]), float(r["best_us"]) * 1e-6) for r in rows)
    (n1, t1), (n2, t2) = pts[-2], pts[-1]
    b = max((t2 - t1) / (n2 - n1), 1e-15)
    small = [t - n * b for n, t in pts if n <= 16384]
    a = max(min(small), 0.0) if small else 0.0
    return dict(a=a, b=b)


def chain_rows(comm, rate, nodes, per_node):
    return [r for r in comm if r["rate"] == rate and int(r["nodes"]) == nodes and int(r["per_node"]) == per_node
            and r["op"] == "scan" and r["algorithm"] == "chain" and r["direction"] == "forward"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    preset = pm.PRESETS[sys.argv[2] if len(sys.argv) > 2 else "small"]
    comm, train = read(os.path.join(d, "comm.csv")), read(os.path.join(d, "train.csv"))
    shm = fit_link(chain_rows(comm, "none", 1, 2)) if chain_rows(comm, "none", 1, 2) else dict(a=1e-6, b=1 / 5e9)
    rates = sorted({r["rate"] for r in comm if r["rate"] != "none"}, key=lambda s: float(s.rstrip("gbit") or 0))
    links = {"none": shm}
    for rate in rates:
        rows = chain_rows(comm, rate, 2, 1)
        if rows:
            links[rate] = fit_link(rows)
    with open(os.path.join(d, "links.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["link", "latency_us", "bandwidth_GBps", "fitted_from"])
        for k, L in links.items():
            w.writerow(["shared memory" if k == "none" else f"tcp {k}", f"{L['a'] * 1e6:.1f}", f"{1 / L['b'] / 1e9:.3f}",
                        "1 node x 2 ranks, chain scan" if k == "none" else "2 nodes x 1 rank, chain scan"])

    def net(rate, per_node):
        inter = links.get(rate, shm)
        return dict(intra=shm, inter=inter, g=G_CPU, per_node=per_node)

    # Comm benchmark rows beside the model.
    model_comm = []
    for r in comm:
        op, alg = r["op"], r["algorithm"]
        if op not in ("scan", "allreduce") or r["direction"] == "reverse" or alg == "auto":
            continue
        if r["rate"] != "none" and r["rate"] not in links:
            continue
        P, n = int(r["ranks"]), int(r["bytes"])
        nt = net(r["rate"], int(r["per_node"]))
        pred = pm.allreduce_time(P, n, nt) if op == "allreduce" else pm.scan_time(alg, P, n, nt)
        meas = float(r["best_us"]) * 1e-6
        model_comm.append(dict(rate=r["rate"], nodes=r["nodes"], per_node=r["per_node"], ranks=P, op=op, algorithm=alg,
                               bytes=n, measured_best_us=f"{meas * 1e6:.1f}", measured_median_us=r["median_us"],
                               predicted_us=f"{pred * 1e6:.1f}", measured_over_predicted=f"{meas / pred:.2f}"))
    with open(os.path.join(d, "model_comm.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(model_comm[0].keys()))
        w.writeheader()
        w.writerows(model_comm)

    # Training steps: median over the timed steps of each layout.
    by = defaultdict(list)
    for r in train:
        by[(r["rate"], int(r["nodes"]), int(r["per_node"]))].append(r)
    model_train = []
    rate_value = lambda r: 0.0 if r == "none" else float(r.rstrip("gbit"))  # noqa: E731
    for (rate, nodes, per_node), rows in sorted(by.items(),
                                                key=lambda kv: (kv[0][1] * kv[0][2], kv[0][1], rate_value(kv[0][0]))):
        if rate != "none" and rate not in links:
            continue
        P = nodes * per_node
        nt = net(rate, per_node)
        med = lambda key: statistics.median(float(x[key]) for x in rows)  # noqa: E731
        scan_pred = preset["layers"] * 2 * pm.scan_time("chain", P, pm.scan_bytes(preset), nt)
        ar_pred = pm.allreduce_time(P, 4 * pm.params(preset), nt)
        model_train.append(dict(rate=rate, nodes=nodes, per_node=per_node, ranks=P, local_length=rows[0]["local_length"],
                                step_s=f"{med('seconds'):.4f}", tokens_per_s=f"{med('tokens_per_s'):.0f}",
                                scan_s=f"{med('scan_s'):.4f}", scan_predicted_s=f"{scan_pred:.4f}",
                                allreduce_s=f"{med('allreduce_s'):.4f}", allreduce_predicted_s=f"{ar_pred:.4f}"))
    with open(os.path.join(d, "model_train.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(model_train[0].keys()))
        w.writeheader()
        w.writerows(model_train)

    # Tables.
    lines = ["# Scaling across node counts: measured beside the model", "",
             "Links fitted in the same run (t = a + n b of one message):", "",
             "| link | latency | bandwidth |", "|---|---:|---:|"]
    for k, L in links.items():
        lines.append(f"| {'shared memory' if k == 'none' else 'TCP, ' + k} | {L['a'] * 1e6:.1f} us | "
                     f"{1 / L['b'] / 1e9:.3f} GB/s |")
    lines += ["", "Training steps (median of the timed steps; sp = all ranks). The measured scan and allreduce times",
              "include waiting for the other ranks' compute; the model's (in parentheses) are the transfers alone:", "",
              "| link | nodes x ranks | step s | tokens/s | scan s (model) | allreduce s (model) |",
              "|---|---|---:|---:|---:|---:|"]
    for t in model_train:
        lines.append(f"| {'shared memory' if t['rate'] == 'none' else t['rate']} | {t['nodes']} x {t['per_node']} | "
                     f"{t['step_s']} | {t['tokens_per_s']} | {t['scan_s']} ({t['scan_predicted_s']}) | "
                     f"{t['allreduce_s']} ({t['allreduce_predicted_s']}) |")
    big = [c for c in model_comm if c["bytes"] == max(x["bytes"] for x in model_comm)]
    lines += ["", f"Comm benchmark at {big[0]['bytes']} bytes per rank (best of the repetitions):", "",
              "| link | nodes x ranks | op | measured us | model us | measured / model |", "|---|---|---|---:|---:|---:|"]
    for c in big:
        name = c["op"] if c["op"] == "allreduce" else f"scan {c['algorithm']}"
        lines.append(f"| {'shared memory' if c['rate'] == 'none' else c['rate']} | {c['nodes']} x {c['per_node']} | "
                     f"{name} | {c['measured_best_us']} | {c['predicted_us']} | {c['measured_over_predicted']} |")
    with open(os.path.join(d, "scaling_nodes.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    # Plot: chain scan and allreduce, measured (points) and model (lines), per link.
    panels = [k for k in links if k != "none"] or ["none"]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False)
    for ax, rate in zip(axes[0], panels):
        layouts = sorted({(int(c["nodes"]), int(c["per_node"])) for c in model_comm if c["rate"] == rate})
        for i, (nodes, per_node) in enumerate(layouts):
            for op, alg, marker in (("scan", "chain", "o"), ("allreduce", "sum", "s")):
                sel = sorted((c for c in model_comm if c["rate"] == rate and int(c["nodes"]) == nodes
                              and int(c["per_node"]) == per_node and c["op"] == op and c["algorithm"] == alg),
                             key=lambda c: c["bytes"])
                if not sel:
                    continue
                x = [c["bytes"] for c in sel]
                ax.loglog(x, [float(c["measured_best_us"]) for c in sel], marker, color=f"C{i}", markersize=4,
                          label=f"{nodes}x{per_node} {op} measured")
                ax.loglog(x, [float(c["predicted_us"]) for c in sel], "-" if op == "scan" else "--", color=f"C{i}",
                          linewidth=1, label=f"{nodes}x{per_node} {op} model")
        ax.set_title(f"TCP links at {rate}" if rate != "none" else "one node")
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("time (us)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.suptitle("chain scan and allreduce across namespaced nodes: measured (points) and model (lines)")
    fig.tight_layout()
    fig.savefig(os.path.join(d, "scaling_nodes.png"), dpi=110)


if __name__ == "__main__":
    main()
