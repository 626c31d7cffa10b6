#!/usr/bin/env python3
"""The protein study on two splits side by side (docs/results/protein-study.md).

Reads the table.csv and evals.csv of two results folders of
launch/studies/protein_table.sh (one with SPLIT=sequence, one with
SPLIT=cluster) and writes, per attention kind and objective, the test and
OOD perplexity of each split (mean and standard deviation over the runs of
that kind: the first seed and any repeats), the split's own baseline, and the
gain over it in nats per token, ln(baseline ppl) - ln(model ppl). A leak of
near-copies from training into test shows as a larger test gain on the
sequence-hash split; the OOD split (whole organisms, the same sequences in
both files) is the control: whatever else differs between the two studies
(the training split, the data order, the build) moves its gain too.

  protein_split_compare.py --sequence DIR --cluster DIR --out side_by_side.csv
"""
import argparse
import csv
import math
from collections import defaultdict


def load(folder):
    """{(attention, objective): [per-run dict of test/ood ppl and baselines]}."""
    rows = defaultdict(list)
    base = {r["run"]: r for r in csv.DictReader(open(f"{folder}/table.csv"))}
    for run, r in base.items():
        if run.startswith("favor-ft") or not r["test_ppl"]:
            continue
        rows[(r["attention"], r["objective"])].append({
            "test": float(r["test_ppl"]), "ood": float(r["ood_ppl"]),
            "base_test": float(r["baseline_test_ppl"]), "base_ood": float(r["baseline_ood_ppl"])})
    return rows


def stats(values):
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else float("nan")
    return mean, std


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sequence", required=True, help="results folder of SPLIT=sequence")
    ap.add_argument("--cluster", required=True, help="results folder of SPLIT=cluster")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    splits = {"sequence": load(a.sequence), "cluster": load(a.cluster)}
    header = ["attention", "objective"]
    for s in splits:
        header += [f"{s}_runs", f"{s}_test_ppl_mean", f"{s}_test_ppl_std", f"{s}_baseline_test_ppl",
                   f"{s}_test_gain_nats", f"{s}_test_gain_std", f"{s}_ood_ppl_mean", f"{s}_ood_gain_nats"]
    # sequence minus cluster, for test and for the OOD control; their
    # difference is the part of the test difference that the control does not share.
    header += ["test_gain_difference_nats", "ood_gain_difference_nats", "test_minus_ood_difference_nats"]
    out = []
    keys = sorted(set(splits["sequence"]) & set(splits["cluster"]), key=lambda k: (k[1], k[0]))
    for key in keys:
        row = list(key)
        gains, ood_gains = {}, {}
        for s, data in splits.items():
            runs = data[key]
            test_mean, test_std = stats([r["test"] for r in runs])
            gain, gain_std = stats([math.log(r["base_test"]) - math.log(r["test"]) for r in runs])
            ood_mean, _ = stats([r["ood"] for r in runs])
            ood_gain, _ = stats([math.log(r["base_ood"]) - math.log(r["ood"]) for r in runs])
            gains[s] = gain
            ood_gains[s] = ood_gain
            row += [len(runs), f"{test_mean:.3f}", f"{test_std:.3f}", f"{runs[0]['base_test']:.3f}", f"{gain:.4f}",
                    f"{gain_std:.4f}", f"{ood_mean:.3f}", f"{ood_gain:.4f}"]
        test_diff = gains["sequence"] - gains["cluster"]
        ood_diff = ood_gains["sequence"] - ood_gains["cluster"]
        row += [f"{test_diff:.4f}", f"{ood_diff:.4f}", f"{test_diff - ood_diff:.4f}"]
        out.append(row)
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(out)
    for row in [header] + out:
        print(",".join(str(x) for x in row))


if __name__ == "__main__":
    main()
