#!/usr/bin/env python3
"""Tables and plots of launch/studies/protein_table.sh.

Reads OUT/runs.csv, OUT/evals.csv and OUT/<run>/metrics.jsonl, computes the
unigram baselines of each split from the HDF5 data file, and writes to RESULTS:
  table.csv      per run: test and ood loss, perplexity, accuracy, and the baselines
  baselines.csv  unigram loss / perplexity / accuracy per split and objective
  dropin.csv     softmax-clm as trained, with FAVOR+ unchanged, after the fine-tune
  features.csv   features sweep: per m, mean / std / min / max over draws
  runs.csv       wall time, peak tracked bytes, max RSS, tokens/s per run
  seeds.csv      per attention kind and objective repeated with other seeds:
                 mean, std, min, max of test perplexity, ood mean and std
  curves_clm.png, curves_mlm.png, features.png
Unigram baselines: token frequencies of /train, evaluated on the split's
targets. Causal LM targets are residues and <end> (each sequence ends with
<end> in concat samples); masked LM targets are residues only. The masked LM
table uses the best context-free predictor instead (mlm_context_free): 20% of
MLM targets show their own or a random residue at the input, which a model
exploits without learning anything about proteins.
"""
import argparse
import csv
import json
import math
import os
from collections import defaultdict

import h5py
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

END, FIRST_RESIDUE, VOCAB = 1, 4, 29


def counts(h5, split, with_end):
    g = h5[split]
    c = np.bincount(g["tokens"][:], minlength=VOCAB).astype(np.float64)
    if with_end:
        c[END] += g.attrs["sequences"]
    return c


def unigram(h5, split, with_end):
    train = counts(h5, "train", with_end)
    target = counts(h5, split, with_end)
    keep = np.arange(VOCAB) >= FIRST_RESIDUE
    if with_end:
        keep[END] = True
    p = np.where(keep, train, 0.0)
    p = p / p.sum()
    t = np.where(keep, target, 0.0)
    with np.errstate(divide="ignore"):
        logp = np.where(t > 0, np.log(np.maximum(p, 1e-300)), 0.0)
    loss = -(t * logp).sum() / t.sum()
    acc = t[int(np.argmax(p))] / t.sum()
    return loss, math.exp(loss), acc, int(t.sum())


def mlm_context_free(h5, split, mask_p=0.8, random_p=0.1, residues=25):
    """The best context-free masked-LM predictor under the corruption rule
    (80% <mask>, 10% random residue, 10% unchanged): unigram at <mask>
    inputs; at other inputs x, q(t | x) ~ p(t) (keep [x = t] + rand / R), so
    the visible token is predicted with high probability. Returns loss, ppl,
    accuracy over the split's residues (expected over the corruption)."""
    train = counts(h5, "train", False)[FIRST_RESIDUE:FIRST_RESIDUE + residues]
    target = counts(h5, split, False)[FIRST_RESIDUE:FIRST_RESIDUE + residues]
    p = train / train.sum()
    t = target / target.sum()
    keep = 1.0 - mask_p - random_p
    loss_mask = -(t * np.log(np.maximum(p, 1e-300))).sum()
    acc_mask = t[int(np.argmax(p))]
    # Non-mask input x given true t: P(x | t) = (keep [x = t] + random_p / R) / (keep + random_p).
    lik = (keep * np.eye(residues) + random_p / residues) / (keep + random_p)  # [t, x]
    joint = p[:, None] * lik
    q = joint / joint.sum(axis=0, keepdims=True)  # q[t, x] = q(t | x)
    loss_vis = -(t[:, None] * lik * np.log(np.maximum(q, 1e-300))).sum()
    best = np.argmax(q, axis=0)  # predicted t for each x
    acc_vis = sum(t[ti] * lik[ti, x] for x in range(residues) for ti in range(residues) if best[x] == ti)
    vis = 1.0 - mask_p
    loss = mask_p * loss_mask + vis * loss_vis
    return loss, math.exp(loss), mask_p * acc_mask + vis * acc_vis


def read_metrics(path):
    steps, evals = [], []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            (evals if "eval" in r else steps).append(r["eval"] if "eval" in r else r)
    return steps, evals


def smooth(x, k=25):
    x = np.asarray(x, dtype=np.float64)
    if len(x) < k:
        return x
    c = np.cumsum(np.insert(x, 0, 0.0))
    out = np.empty_like(x)
    for i in range(len(x)):
        lo = max(0, i - k + 1)
        out[i] = (c[i + 1] - c[lo]) / (i + 1 - lo)
    return out


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--results", required=True)
    a = ap.parse_args()
    os.makedirs(a.results, exist_ok=True)

    with h5py.File(a.data, "r") as h5:
        base = {}
        for split in ("valid", "test", "ood"):
            base[("clm", split)] = unigram(h5, split, True)
            base[("mlm", split)] = unigram(h5, split, False)
            base[("mlm-context-free", split)] = mlm_context_free(h5, split) + (base[("mlm", split)][3],)
    write_csv(os.path.join(a.results, "baselines.csv"), ["baseline", "split", "loss", "ppl", "accuracy", "targets"],
              [[o, s, f"{v[0]:.4f}", f"{v[1]:.3f}", f"{v[2]:.4f}", v[3]] for (o, s), v in sorted(base.items())])

    runs = list(csv.DictReader(open(os.path.join(a.out, "runs.csv"))))
    evals = list(csv.DictReader(open(os.path.join(a.out, "evals.csv"))))
    run_rows, metrics = [], {}
    for r in runs:
        steps, ev = read_metrics(os.path.join(a.out, r["run"], "metrics.jsonl"))
        metrics[r["run"]] = (steps, ev)
        tps = np.median([s["tokens_per_s"] for s in steps[1:]]) if len(steps) > 1 else float("nan")
        train_s = sum(s["seconds"] for s in steps)
        peak = max(s["peak_bytes"] for s in steps)
        run_rows.append([r["run"], r["attention"], r["objective"], r["steps"], r["wall_s"], f"{train_s:.1f}",
                         f"{tps:.0f}", f"{peak / 2**20:.1f}", f"{int(r['max_rss_kib']) / 1024:.1f}"])
    write_csv(os.path.join(a.results, "runs.csv"),
              ["run", "attention", "objective", "steps", "wall_s", "train_step_s", "median_tokens_per_s",
               "peak_tracked_mib", "max_rss_mib"], run_rows)

    trained = {(e["run"], e["split"]): e for e in evals if e["variant"] == "trained"}
    table = []
    for r in runs:
        obj = r["objective"]
        row = [r["run"], r["attention"], obj]
        for split in ("test", "ood"):
            e = trained.get((r["run"], split))
            row += [e["loss"], e["ppl"], e["accuracy"]] if e else ["", "", ""]
        for split in ("test", "ood"):
            b = base[("mlm-context-free" if obj == "mlm" else obj, split)]
            row += [f"{b[1]:.3f}", f"{b[2]:.4f}"]
        table.append(row)
    write_csv(os.path.join(a.results, "table.csv"),
              ["run", "attention", "objective", "test_loss", "test_ppl", "test_acc", "ood_loss", "ood_ppl", "ood_acc",
               "baseline_test_ppl", "baseline_test_acc", "baseline_ood_ppl", "baseline_ood_acc"], table)

    drop = []
    for run, variant, label in (("softmax-clm", "trained", "softmax (as trained)"),
                                ("softmax-clm", "favor-dropin", "FAVOR+ drop-in, no training"),
                                ("favor-ft-clm", "trained", "FAVOR+ after fine-tune"),
                                ("favor-clm", "trained", "FAVOR+ trained from scratch")):
        for split in ("test", "ood"):
            for e in evals:
                if e["run"] == run and e["variant"] == variant and e["split"] == split:
                    drop.append([label, split, e["loss"], e["ppl"], e["accuracy"]])
    write_csv(os.path.join(a.results, "dropin.csv"), ["model", "split", "loss", "ppl", "accuracy"], drop)

    # Run-to-run spread: "<kind>-<obj>" (model.seed 1234) and "<kind>-<obj>-seed<k>".
    spread = defaultdict(list)
    for r in runs:
        name = r["run"]
        base_name = name.split("-seed")[0]
        if base_name != f"{r['attention']}-{r['objective']}":
            continue
        t, o = trained.get((name, "test")), trained.get((name, "ood"))
        if t and o:
            spread[(r["attention"], r["objective"])].append((float(t["ppl"]), float(o["ppl"]),
                                                             float(t["accuracy"]), float(o["accuracy"])))
    seed_rows = []
    for (att, obj), v in sorted(spread.items()):
        if len(v) < 2:
            continue
        v = np.array(v)
        seed_rows.append([att, obj, len(v)] + [f"{x:.3f}" for x in (v[:, 0].mean(), v[:, 0].std(ddof=1),
                                                                     v[:, 0].min(), v[:, 0].max(),
                                                                     v[:, 1].mean(), v[:, 1].std(ddof=1))]
                         + [f"{v[:, 2].mean():.4f}", f"{v[:, 3].mean():.4f}"])
    write_csv(os.path.join(a.results, "seeds.csv"),
              ["attention", "objective", "seeds", "test_ppl_mean", "test_ppl_std", "test_ppl_min", "test_ppl_max",
               "ood_ppl_mean", "ood_ppl_std", "test_acc_mean", "ood_acc_mean"], seed_rows)

    sweep = defaultdict(list)
    for e in evals:
        if e["variant"] == "sweep":
            sweep[int(e["features"])].append((float(e["loss"]), float(e["ppl"]), float(e["accuracy"])))
    feat_rows = []
    for m in sorted(sweep):
        v = np.array(sweep[m])
        feat_rows.append([m, len(v), f"{v[:, 1].mean():.3f}", f"{v[:, 1].std(ddof=1) if len(v) > 1 else 0:.3f}",
                          f"{v[:, 1].min():.3f}", f"{v[:, 1].max():.3f}", f"{v[:, 2].mean():.4f}",
                          f"{v[:, 2].std(ddof=1) if len(v) > 1 else 0:.4f}"])
    write_csv(os.path.join(a.results, "features.csv"),
              ["features", "draws", "ppl_mean", "ppl_std", "ppl_min", "ppl_max", "acc_mean", "acc_std"], feat_rows)

    colors = {"softmax": "C0", "favor": "C1", "relu": "C2"}
    for obj in ("clm", "mlm"):
        if not any(r["objective"] == obj for r in runs):
            continue
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for r in runs:
            if r["objective"] != obj or r["run"].startswith("favor-ft") or "-seed" in r["run"]:
                continue
            steps, ev = metrics[r["run"]]
            steps = [s for s in steps if s["loss"] is not None]  # a masked-LM step without a mask has none
            c = colors[r["attention"]]
            ax[0].plot([s["step"] for s in steps], smooth([s["loss"] for s in steps]), color=c, label=r["attention"])
            ax[1].plot([e["step"] for e in ev], [e["ppl"] for e in ev], "o-", color=c, label=r["attention"])
        b = base[("mlm-context-free" if obj == "mlm" else obj, "valid")]
        label = "context-free baseline (valid)" if obj == "mlm" else "unigram (valid)"
        ax[0].axhline(b[0], color="gray", ls="--", lw=1, label=label)
        ax[1].axhline(b[1], color="gray", ls="--", lw=1, label=label)
        ax[0].set(xlabel="step", ylabel="training loss (25-step mean)", title=f"{obj}: training loss")
        ax[1].set(xlabel="step", ylabel="validation perplexity", title=f"{obj}: validation perplexity")
        for x in ax:
            x.legend()
            x.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(a.results, f"curves_{obj}.png"), dpi=110)
        plt.close(fig)

    if sweep:
        fig, ax = plt.subplots(figsize=(5.5, 4))
        ms = sorted(sweep)
        for m in ms:
            ax.scatter([m] * len(sweep[m]), [v[1] for v in sweep[m]], color="C1", s=14, alpha=0.6)
        ax.plot(ms, [np.mean([v[1] for v in sweep[m]]) for m in ms], "o-", color="C1", label="FAVOR+ (mean of draws)")
        t = trained.get(("favor-clm", "test"))
        if t:
            ax.axhline(float(t["ppl"]), color="C1", ls=":", label="training draw, m=64")
        s = trained.get(("softmax-clm", "test"))
        if s:
            ax.axhline(float(s["ppl"]), color="C0", ls="--", label="exact softmax model")
        ax.axhline(base[("clm", "test")][1], color="gray", ls="--", lw=1, label="unigram")
        ax.set(xscale="log", xlabel="random features m at test time", ylabel="test perplexity",
               title="favor-clm: features redrawn at test time")
        ax.set_xticks(ms)
        ax.set_xticklabels([str(m) for m in ms])
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(a.results, "features.png"), dpi=110)
        plt.close(fig)
    print(f"wrote {a.results}")


if __name__ == "__main__":
    main()
