#!/usr/bin/env bash
# Synchronous against asynchronous CPU streams in real training steps: the
# small and paper presets, on 1 rank and on 2 ranks (sp = 2, so every layer
# runs a forward and a reverse scan), each run alternately in both modes so
# that a busy spell of the machine falls on both. Writes streams.csv (one row
# per timed step), streams.md (medians per case, async/sync ratios) and
# streams.png (launch/studies/plot_streams.py).
#
#   launch/studies/streams.sh [OUT_DIR]        (default docs/results/streams)
#
# Environment:
#   BUILD=build         build folder holding launch/performer-bench
#   PRESETS="small paper"
#   RANKS="1 2"
#   LENGTH_small=4096   local length per rank (tokens) of each preset
#   LENGTH_paper=2048
#   STEPS=5             timed steps per run (after one warm-up step)
#   REPEATS=3           runs per mode and case, alternating sync/async
#   PYTHON=/usr/bin/python3
# OUT_DIR is a new folder, an empty one or an earlier output of this script
# (launch/scripts/output_dir.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/launch/scripts/output_dir.sh"
OUT=${1:-$ROOT/docs/results/streams}
pf_claim_output OUT_DIR "$OUT"
BUILD=${BUILD:-$ROOT/build}
PRESETS=${PRESETS:-"small paper"}
RANKS=${RANKS:-"1 2"}
LENGTH_small=${LENGTH_small:-4096}
LENGTH_paper=${LENGTH_paper:-2048}
STEPS=${STEPS:-5}
REPEATS=${REPEATS:-3}
PYTHON=${PYTHON:-/usr/bin/python3}
BENCH=$BUILD/launch/performer-bench
[ -x "$BENCH" ] || { echo "streams.sh: $BENCH not found (build first, or set BUILD)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset PF_CPU_STREAMS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cores=$(nproc)
csv=$OUT/streams.csv
first=1
for preset in $PRESETS; do
  length_var=LENGTH_$preset
  length=${!length_var:-2048}
  for np in $RANKS; do
    threads=$(( cores / np > 0 ? cores / np : 1 ))
    for rep in $(seq 1 "$REPEATS"); do
      for mode in sync async; do
        echo "streams: preset $preset, $np rank(s), $length tokens per rank, $mode (run $rep of $REPEATS)" >&2
        pf_run mpirun --oversubscribe --bind-to none -np "$np" -x OMP_NUM_THREADS=$threads "$BENCH" train \
          --preset "$preset" --length "$length" --steps "$STEPS" \
          --set "device.cpu_streams=\"$mode\"" --csv "$tmp/run.csv"
        if [ $first = 1 ]; then
          echo "mode,run,$(head -1 "$tmp/run.csv")" > "$csv"
          first=0
        fi
        grep -v '^#' "$tmp/run.csv" | tail -n +2 | sed "s/^/$mode,$rep,/" >> "$csv"  # (not the "# rank" lines)
      done
    done
  done
done

pf_run "$PYTHON" "$ROOT/launch/studies/plot_streams.py" "$csv" "$OUT"
