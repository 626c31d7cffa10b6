#!/usr/bin/env python3
"""The training, validation and test lines of a quickstart log as CSV
(docs/results/training/quickstart.csv), one row per printed line.

  quickstart_csv.py LOG > quickstart.csv
"""
import re
import sys

NUM = r"loss ([0-9.]+) \| ppl ([0-9.]+) \| acc(?:uracy)? ([0-9.]+)"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("kind,step,loss,ppl,accuracy,tokens,tokens_per_s,useful_fraction,lr,peak_mib")
    test_step = ""
    for line in open(sys.argv[1], errors="replace"):
        m = re.match(r"step (\d+)/\d+ \| " + NUM + r" \| (\d+) tok/s \| useful ([0-9.]+) \| lr ([0-9.e-]+) \| peak ([0-9.]+) MiB", line)
        if m:
            s, loss, ppl, acc, tps, useful, lr, peak = m.groups()
            print(f"train_batch,{s},{loss},{ppl},{acc},,{tps},{useful},{lr},{peak}")
            continue
        m = re.match(r"validation at step (\d+) \| " + NUM + r" \| (\d+) tokens", line)
        if m:
            s, loss, ppl, acc, tok = m.groups()
            print(f"validation,{s},{loss},{ppl},{acc},{tok},,,,")
            continue
        m = re.match(r"checkpoint \S+ \(step (\d+)\), split test, data\.mode \w+: " + NUM + r" \| (\d+) tokens", line)
        if m:
            test_step, loss, ppl, acc, tok = m.groups()
            print(f"test,{test_step},{loss},{ppl},{acc},{tok},,,,")
            continue
        m = re.match(r"\s+proteins of (.+?residues)\s+" + NUM + r" \| (\d+) tokens", line)
        if m:
            name, loss, ppl, acc, tok = m.groups()
            lo_hi = re.findall(r"[0-9][0-9,]*", name)
            kind = "test_" + ("le" if name.startswith("<=") else "gt" if name.startswith(">") else "") + "_".join(
                x.replace(",", "") for x in lo_hi)
            print(f"{kind},{test_step},{loss},{ppl},{acc},{tok},,,,")


if __name__ == "__main__":
    main()
