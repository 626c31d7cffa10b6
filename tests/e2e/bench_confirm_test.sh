#!/usr/bin/env bash
# performer-bench train --longest --confirm under mpiexec with 2 ranks: the
# confirming step runs over both ranks (one sequence group, sp = 2, one sample
# of 2 x the local length), and the largest measured peak of any rank is
# under the cap and within 15 % of the per-rank plan.
# Usage: bench_confirm_test.sh PERFORMER_BENCH MPIEXEC [MPIEXEC_FLAGS...]
set -euo pipefail
bench=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$@" -n 2 "$bench" train --preset small --longest --cap 128MiB --checkpointing on --confirm \
  --csv "$work/longest.csv" 2> "$work/log.txt" || { cat "$work/log.txt"; echo "FAIL: performer-bench exited $?"; exit 1; }
cat "$work/longest.csv"
python3 - "$work/longest.csv" <<'PY'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
plan = next(csv.DictReader([l for l in lines if not l.startswith("#")]))
confirmed = [l.split(",") for l in lines if l.startswith("# confirmed,")]
if len(confirmed) != 1:
    sys.exit("FAIL: expected one '# confirmed' line, got %d" % len(confirmed))
_, ckpt, n, peak, secs, device, ranks, sp = confirmed[0]
planned, cap = int(plan["planned_peak_bytes"]), int(plan["cap_bytes"])
if (ranks, sp) != ("2", "2"):
    sys.exit("FAIL: the step ran on %s ranks with sp %s, not 2 and 2" % (ranks, sp))
if n != plan["longest_local_length"]:
    sys.exit("FAIL: confirmed length %s is not the planned %s" % (n, plan["longest_local_length"]))
if int(peak) > cap:
    sys.exit("FAIL: measured peak %s over the cap %d" % (peak, cap))
if abs(int(peak) / planned - 1) > 0.15:
    sys.exit("FAIL: measured peak %s is not within 15 %% of the plan %d" % (peak, planned))
print("PASS: 2 ranks, sp 2, local length %s, measured/planned %.4f" % (n, int(peak) / planned))
PY
