#!/usr/bin/env python3
"""Checks that every ctest entry labelled gpu has a TIMEOUT of its own below
the GPU script's test step limit, so that one hung test cannot take the step.

    check_timeouts.py BUILD_DIR STEP_LIMIT_S
"""
import json
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, limit = sys.argv[1], float(sys.argv[2])
    out = subprocess.run(["ctest", "--test-dir", build, "-L", "gpu", "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    tests = json.loads(out)["tests"]
    if not tests:
        sys.exit(f"check_timeouts: no ctest entry labelled gpu in {build}")
    timeouts = {}
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        timeouts[t["name"]] = float(props.get("TIMEOUT", 0))
    bad = [f"{n} ({s:g} s)" for n, s in timeouts.items() if s <= 0 or s >= limit]
    if bad:
        sys.exit(f"check_timeouts: gpu entries without a TIMEOUT below the step's {limit:g} s: " + ", ".join(bad))
    print(f"check_timeouts: {len(timeouts)} gpu entries, TIMEOUT {min(timeouts.values()):g}-"
          f"{max(timeouts.values()):g} s, each below the step's {limit:g} s")


if __name__ == "__main__":
    main()
