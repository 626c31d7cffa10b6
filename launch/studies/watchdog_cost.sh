#!/usr/bin/env bash
# The watchdog's cost in training steps: performer-bench train with
# parallel.timeout_s = 0 (no watchdog thread) and 600 (the default),
# alternating, REPS times each, for presets small and paper on 1 and 2 ranks;
# then the cost of one watched wait (performer-bench watchdog), and from the
# two the watchdog's share of a step: waits per step x cost per wait / step.
#   launch/studies/watchdog_cost.sh [OUT_DIR]    (default docs/results/watchdog)
# Environment: BUILD=build REPS=3 STEPS=3 SMALL_LENGTH=4096 PAPER_LENGTH=1024
# OUT_DIR is a new folder, an empty one or an earlier output of this script
# (launch/scripts/output_dir.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/launch/scripts/output_dir.sh"
OUT=${1:-$ROOT/docs/results/watchdog}
pf_claim_output OUT_DIR "$OUT"
BUILD=${BUILD:-$ROOT/build}
REPS=${REPS:-3}
STEPS=${STEPS:-3}
BENCH=$BUILD/launch/performer-bench
PYTHON=${PYTHON:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
{
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(getconf _NPROCESSORS_ONLN) cores"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: launch/studies/watchdog_cost.sh (REPS=$REPS STEPS=$STEPS)"
} >"$OUT/machine.txt"
csv=$OUT/steps.csv
echo "preset,ranks,timeout_s,rep,step,seconds,watched_waits" >"$csv"
tmpdir=$(mktemp -d)
tmp=$tmpdir/run.csv  # a new file: --csv replaces only an earlier CSV of the benchmark
trap 'rm -rf "$tmpdir"' EXIT
for preset in small paper; do
  length=${SMALL_LENGTH:-4096}
  [ "$preset" = small ] || length=${PAPER_LENGTH:-1024}
  for ranks in 1 2; do
    for rep in $(seq "$REPS"); do
      for timeout in 0 600; do
        echo "[$(date -u +%H:%M:%S)] $preset, $ranks rank(s), timeout $timeout, rep $rep" >&2
        pf_run mpirun --oversubscribe -np "$ranks" -x OMP_NUM_THREADS "$BENCH" train --preset "$preset" --length "$length" \
          --batch 1 --sp "$ranks" --steps "$STEPS" --set "parallel.timeout_s=$timeout" --csv "$tmp" >"$tmp.log" 2>&1 ||
          { tail -20 "$tmp.log" >&2; echo "watchdog_cost.sh: the run failed (above)" >&2; exit 1; }
        grep -v '^#' "$tmp" | tail -n +2 | awk -F, -v p="$preset" -v r="$ranks" -v t="$timeout" -v k="$rep" \
          '{print p "," r "," t "," k "," $8 "," $9 "," $27}' >>"$csv"
      done
    done
  done
done
pf_run "$BENCH" watchdog --csv "$OUT/op_cost.csv"
"$PYTHON" - "$OUT" <<'PY'
import csv, statistics, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/steps.csv")))
ops = list(csv.DictReader(open(f"{d}/op_cost.csv")))
cost_ns = max(float(o["ns_per_op"]) for o in ops if o["setting"] == "on")
lines = ["| preset | ranks | median step, timeout 0 | median step, timeout 600 | ratio (600 / 0) | watched waits per step "
         "| their cost / step |", "|---|---:|---:|---:|---:|---:|---:|"]
for preset in ("small", "paper"):
    for ranks in ("1", "2"):
        sel = lambda t: [r for r in rows if r["preset"] == preset and r["ranks"] == ranks and r["timeout_s"] == t]  # noqa
        med = {t: statistics.median(float(r["seconds"]) for r in sel(t)) for t in ("0", "600")}
        waits = statistics.median(int(r["watched_waits"]) for r in sel("600"))
        share = waits * cost_ns * 1e-9 / med["600"]
        lines.append(f"| {preset} | {ranks} | {med['0']:.4f} s | {med['600']:.4f} s | {med['600'] / med['0']:.3f} | "
                     f"{waits:.0f} | {share:.1e} |")
lines += ["", "| watchdog | threads | ns per watched wait |", "|---|---:|---:|"]
lines += [f"| {o['setting']} | {o['threads']} | {o['ns_per_op']} |" for o in ops]
open(f"{d}/cost.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
