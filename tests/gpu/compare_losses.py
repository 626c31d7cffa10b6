#!/usr/bin/env python3
"""Compares the per-step training losses of metrics JSONL files with the first.

    compare_losses.py TOLERANCE REFERENCE.jsonl OTHER.jsonl...

Every file must hold the same steps; each loss must be within TOLERANCE
(relative) of the reference's. Prints one line per file with the largest
relative difference, then the largest overall; exits 1 on a violation.
"""
import json
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not JSON: {e}")
            if "step" in record and "loss" in record:
                out[record["step"]] = record["loss"]
    if not out:
        sys.exit(f"{path}: no training steps")
    return out


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    tolerance = float(sys.argv[1])
    reference_path = sys.argv[2]
    reference = losses(reference_path)
    worst_all, failed = 0.0, False
    for path in sys.argv[3:]:
        other = losses(path)
        if sorted(other) != sorted(reference):
            print(f"{path}: steps {sorted(other)} differ from {reference_path}'s {sorted(reference)}")
            failed = True
            continue
        worst = max(abs(other[s] - reference[s]) / abs(reference[s]) for s in reference)
        worst_all = max(worst_all, worst)
        verdict = "ok" if worst <= tolerance else f"EXCEEDS {tolerance:g}"
        print(f"{path}: {len(reference)} steps, largest relative loss difference {worst:.2e} ({verdict})")
        failed |= worst > tolerance
    print(f"largest relative loss difference {worst_all:.2e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
