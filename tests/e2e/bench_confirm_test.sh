#!/usr/bin/env bash
# performer-bench train --longest --confirm under mpiexec with 2 ranks: the
# confirming step runs over both ranks (one sequence group, sp = 2, one sample
# of 2 x the local length), and the largest measured peak of any rank is
# under the cap and within 15 % of the per-rank plan. With a window of 64
# keys the plan is for the ranks' sequence group: confirmed over sp = 2
# (the halo buffers counted) under the cap, and its longest length below
# that of sp = 1 (two data-parallel ranks, no halo).
# Usage: bench_confirm_test.sh PERFORMER_BENCH MPIEXEC [MPIEXEC_FLAGS...]
set -euo pipefail
bench=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$@" -n 2 "$bench" train --preset small --longest --cap 128MiB --checkpointing on --confirm \
  --csv "$work/longest.csv" 2> "$work/log.txt" || { rc=$?; cat "$work/log.txt"; echo "FAIL: performer-bench exited $rc"; exit 1; }
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
for sp in 1 2; do
  "$@" -n 2 "$bench" train --preset small --longest --cap 128MiB --checkpointing on --sp "$sp" --set model.window=64 \
    $([ "$sp" = 2 ] && echo --confirm) --csv "$work/window_sp$sp.csv" 2> "$work/log.txt" ||
    { rc=$?; cat "$work/log.txt"; echo "FAIL: performer-bench with a window at sp $sp exited $rc"; exit 1; }
done
python3 - "$work/window_sp1.csv" "$work/window_sp2.csv" <<'PY'
import csv, sys
rows = [next(csv.DictReader([l for l in open(p).read().splitlines() if not l.startswith("#")])) for p in sys.argv[1:]]
n1, n2 = (int(r["longest_local_length"]) for r in rows)
confirmed = [l.split(",") for l in open(sys.argv[2]).read().splitlines() if l.startswith("# confirmed,")]
if len(confirmed) != 1 or confirmed[0][7] != "2":
    sys.exit("FAIL: the window's step was not confirmed over sp 2: %s" % confirmed)
peak, cap = int(confirmed[0][3]), int(rows[1]["cap_bytes"])
if peak > cap:
    sys.exit("FAIL: with a window at sp 2 the measured peak %d is over the cap %d" % (peak, cap))
if n2 >= n1:
    sys.exit("FAIL: the plan with a window at sp 2 (%d) is not shorter than at sp 1 (%d): the halo is not counted" % (n2, n1))
print("PASS: a window of 64 at sp 2: local length %d (sp 1: %d), measured %d under the cap %d" % (n2, n1, peak, cap))
PY
