#!/usr/bin/env python3
"""The context-gain tables of performer-eval outputs (family mode) as CSV:
one row per relatives bucket of each file, the run named by the file name
without its "eval_" prefix and ".txt" suffix.

  context_gain_csv.py eval_RUN.txt [...] > context_gain.csv
"""
import os
import sys


def rows(path):
    run = os.path.basename(path)
    run = run[len("eval_"):] if run.startswith("eval_") else run
    run = run[:-len(".txt")] if run.endswith(".txt") else run
    in_table = False
    found = False
    for line in open(path):
        words = line.split()
        if words[:2] == ["relatives", "tokens"]:
            in_table, found = True, True
            continue
        if in_table and len(words) == 6:
            yield [run] + words
        elif in_table and words[1:] != ["none"]:
            in_table = False
    if not found:
        sys.exit(f"context_gain_csv.py: {path}: no context-gain table (a performer-eval output in family mode?)")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("run,relatives,tokens,ppl_context,ppl_alone,gain_nats,accuracy_context")
    for path in sys.argv[1:]:
        for r in rows(path):
            print(",".join(r))


if __name__ == "__main__":
    main()
