#!/usr/bin/env python3
"""Tables and the plot of launch/studies/kernel_study.sh.

Reads OUT/runs.csv, OUT/evals.csv, OUT/<run>/metrics.jsonl and OUT/<run>/rank.csv
(the last row of each run and split wins, so a run repeated after a crash
counts once) and writes to RESULTS:
  runs.csv     per run: test / ood perplexity, gain over the split's unigram
               baseline (nats per token), median tokens/s, wall time, effective
               rank of the attention matrices (mean over layers, heads and proteins)
  table.csv    per kernel, m and objective over the seeds run: count, test
               perplexity mean / std / min / max, gain mean and std, ood
               perplexity mean, median tokens/s, effective rank and rank / n
  paired.csv   exp against FAVOR+ at the same m and model seed: both test
               perplexities and their difference
  baselines.csv  unigram (causal) and best context-free (masked) baselines
  kernel_study.png  test perplexity per kernel (mean and spread over seeds), both objectives
"""
import argparse
import csv
import math
import os
import statistics
import sys
from collections import OrderedDict, defaultdict

import h5py
import matplotlib
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from protein_table_report import mlm_context_free, read_metrics, unigram, write_csv  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def last_rows(path, key):
    rows = OrderedDict()
    with open(path) as f:
        for r in csv.DictReader(f):
            rows[key(r)] = r
    return rows


def label(kind, m):
    return kind if int(m) == 0 else f"{kind} m={m}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--results", required=True)
    a = ap.parse_args()
    os.makedirs(a.results, exist_ok=True)

    with h5py.File(a.data, "r") as h5:
        base = {}
        for split in ("test", "ood"):
            base[("clm", split)] = unigram(h5, split, True)
            base[("mlm", split)] = mlm_context_free(h5, split)
    write_csv(os.path.join(a.results, "baselines.csv"), ["objective", "split", "loss", "ppl", "accuracy"],
              [[o, s, f"{v[0]:.4f}", f"{v[1]:.3f}", f"{v[2]:.4f}"] for (o, s), v in sorted(base.items())])

    runs = last_rows(os.path.join(a.out, "runs.csv"), lambda r: r["run"])
    evals = last_rows(os.path.join(a.out, "evals.csv"), lambda r: (r["run"], r["split"]))
    per_run = []
    for name, r in runs.items():
        if not os.path.exists(os.path.join(a.out, name, "done")):
            continue
        steps, _ = read_metrics(os.path.join(a.out, name, "metrics.jsonl"))
        tps = float(np.median([s["tokens_per_s"] for s in steps[1:]])) if len(steps) > 1 else float("nan")
        ranks = list(csv.DictReader(open(os.path.join(a.out, name, "rank.csv"))))
        rank = statistics.mean(float(x["rank_mean"]) for x in ranks)
        rank_n = statistics.mean(float(x["rank_over_n"]) for x in ranks)
        test, ood = evals[(name, "test")], evals[(name, "ood")]
        obj = r["objective"]
        gain = base[(obj, "test")][0] - float(test["loss"])
        per_run.append(dict(run=name, attention=r["attention"], features=r["features"], objective=obj,
                            seed=r["seed"], steps=r["steps"], test_ppl=float(test["ppl"]),
                            test_loss=float(test["loss"]), gain=gain, ood_ppl=float(ood["ppl"]), tokens_per_s=tps,
                            wall_s=float(r["wall_s"]), rank=rank, rank_over_n=rank_n))
    write_csv(os.path.join(a.results, "runs.csv"),
              ["run", "attention", "features", "objective", "seed", "steps", "test_ppl", "gain_nats", "ood_ppl",
               "median_tokens_per_s", "wall_s", "effective_rank", "rank_over_n"],
              [[r["run"], r["attention"], r["features"], r["objective"], r["seed"], r["steps"], f"{r['test_ppl']:.3f}",
                f"{r['gain']:.4f}", f"{r['ood_ppl']:.3f}", f"{r['tokens_per_s']:.0f}", f"{r['wall_s']:.1f}",
                f"{r['rank']:.2f}", f"{r['rank_over_n']:.4f}"] for r in per_run])

    groups = defaultdict(list)
    for r in per_run:
        groups[(r["objective"], r["attention"], int(r["features"]))].append(r)

    def sd(xs):
        return statistics.stdev(xs) if len(xs) > 1 else float("nan")

    table = []
    for (obj, kind, m), rs in sorted(groups.items()):
        ppl = [r["test_ppl"] for r in rs]
        gain = [r["gain"] for r in rs]
        table.append([obj, kind, m, len(rs), f"{statistics.mean(ppl):.3f}", f"{sd(ppl):.3f}", f"{min(ppl):.3f}",
                      f"{max(ppl):.3f}", f"{statistics.mean(gain):.4f}", f"{sd(gain):.4f}",
                      f"{statistics.mean(r['ood_ppl'] for r in rs):.3f}",
                      f"{statistics.median(r['tokens_per_s'] for r in rs):.0f}",
                      f"{statistics.mean(r['rank'] for r in rs):.2f}",
                      f"{statistics.mean(r['rank_over_n'] for r in rs):.4f}", f"{base[(obj, 'test')][1]:.3f}"])
    write_csv(os.path.join(a.results, "table.csv"),
              ["objective", "attention", "features", "seeds", "test_ppl_mean", "test_ppl_std", "test_ppl_min",
               "test_ppl_max", "gain_nats_mean", "gain_nats_std", "ood_ppl_mean", "median_tokens_per_s",
               "effective_rank", "rank_over_n", "baseline_test_ppl"], table)

    # Paired by seed: the same model seed (so the same initial weights apart
    # from the attention's own, and the same data order) with exp and with
    # FAVOR+ at the same m.
    by_key = {(r["objective"], r["attention"], int(r["features"]), r["seed"]): r for r in per_run}
    paired = []
    for (obj, kind, m, seed), r in sorted(by_key.items()):
        other = by_key.get((obj, "favor", m, seed))
        if kind == "exp" and other:
            paired.append([obj, m, seed, f"{r['test_ppl']:.3f}", f"{other['test_ppl']:.3f}",
                           f"{r['test_ppl'] - other['test_ppl']:+.3f}"])
    write_csv(os.path.join(a.results, "paired.csv"),
              ["objective", "features", "seed", "exp_test_ppl", "favor_test_ppl", "exp_minus_favor"], paired)

    objectives = [o for o in ("clm", "mlm") if any(k[0] == o for k in groups)]
    if not objectives:
        return
    fig, axes = plt.subplots(1, len(objectives), figsize=(6.5 * len(objectives), 4.2), squeeze=False)
    for ax, obj in zip(axes[0], objectives):
        keys = [k for k in sorted(groups) if k[0] == obj]
        xs = np.arange(len(keys))
        for x, k in zip(xs, keys):
            ppl = [r["test_ppl"] for r in groups[k]]
            ax.scatter([x] * len(ppl), ppl, color="tab:blue", s=14, alpha=0.6)
            ax.errorbar([x], [statistics.mean(ppl)], yerr=[[statistics.mean(ppl) - min(ppl)],
                                                          [max(ppl) - statistics.mean(ppl)]],
                        fmt="o", color="black", capsize=3)
        ax.axhline(base[(obj, "test")][1], color="gray", linestyle="--", label="unigram" if obj == "clm"
                   else "best context-free")
        ax.set_xticks(xs)
        ax.set_xticklabels([label(k[1], k[2]) for k in keys], rotation=35, ha="right")
        ax.set_ylabel("test perplexity")
        ax.set_title(f"{'causal' if obj == 'clm' else 'masked'} LM, cluster split")
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.results, "kernel_study.png"), dpi=120)


if __name__ == "__main__":
    main()
