#!/usr/bin/env bash
# Scaling study: strong and weak scaling of real training steps, the three scan
# algorithms inside training steps, FAVOR+ against exact softmax attention in
# the same model, and the longest trainable local length under a memory cap.
# Writes CSV files and PNG plots, then runs the performance model on them.
#
#   launch/studies/scaling.sh [OUT_DIR]        (default docs/results/scaling)
#
# Environment (the defaults run in 5-7 minutes on 2 shared cores):
#   BUILD=build          build folder holding launch/performer-bench
#   PRESET=small         model preset of the scaling runs (small, medium, paper)
#   STRONG_LENGTH=16384  global sample length of strong scaling (split over N ranks)
#   WEAK_LENGTH=4096     local length per rank of weak scaling (global = N x this)
#   SCAN_LENGTH=4096     local length of the scan-algorithm comparison (N = 4, 8)
#   RANKS="1 2 4 8"      rank counts (sp = N: one sequence over all ranks)
#   ATTN_LENGTHS="512 1024 2048 4096 8192 16384"
#                        one-rank FAVOR+ vs exact softmax lengths
#   STEPS=3              timed steps per run (after one warm-up step)
#   CAP=16GiB            memory cap of the longest-length search (preset paper)
#   CONFIRM=0            1: also run one real step of preset paper at the longest
#                        length under CAP (minutes and ~CAP of host memory)
#   PYTHON=/usr/bin/python3  interpreter with numpy and matplotlib
# Every rank count above the number of cores is oversubscribed: the ranks then
# share cores and the measured times include that sharing. OUT_DIR is a new
# folder, an empty one or an earlier output of this script
# (launch/scripts/output_dir.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/launch/scripts/output_dir.sh"
OUT=${1:-$ROOT/docs/results/scaling}
pf_claim_output OUT_DIR "$OUT"
BUILD=${BUILD:-$ROOT/build}
PRESET=${PRESET:-small}
STRONG_LENGTH=${STRONG_LENGTH:-16384}
WEAK_LENGTH=${WEAK_LENGTH:-4096}
SCAN_LENGTH=${SCAN_LENGTH:-4096}
RANKS=${RANKS:-"1 2 4 8"}
ATTN_LENGTHS=${ATTN_LENGTHS:-"512 1024 2048 4096 8192 16384"}
STEPS=${STEPS:-3}
CAP=${CAP:-16GiB}
CONFIRM=${CONFIRM:-0}
PYTHON=${PYTHON:-/usr/bin/python3}
BENCH=$BUILD/launch/performer-bench
if [ ! -x "$BENCH" ]; then
  echo "no $BENCH: build first (cmake -S . -B build -DPF_CUDA=OFF && cmake --build build -j2)" >&2
  exit 1
fi
tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT
MPIRUN=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
export OMP_NUM_THREADS=1

# Concatenate the CSV of one run (header once) onto $1, tagging each row with
# the study ($2) and the scan setting ($3).
append() {
  local dest=$1 study=$2 scan=$3 tmp=$4
  if [ ! -s "$dest" ]; then head -1 "$tmp" | sed 's/^/study,scan,load1,/' > "$dest"; fi
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  grep -v '^#' "$tmp" | tail -n +2 | sed "s/^/$study,$scan,$load,/" >> "$dest"  # (the per-rank "# rank" lines stay out)
}

run() {  # run N study scan [bench args...]
  local n=$1 study=$2 scan=$3; shift 3
  local tmp
  tmp=$(mktemp -d "$tmpdir/run.XXXXXX")  # --csv writes a new file in it (it replaces only an earlier CSV of the benchmark)
  echo "[$(date -u +%H:%M:%S)] $study N=$n scan=$scan: $*" >&2
  pf_run "${MPIRUN[@]}" -np "$n" "$BENCH" train --steps "$STEPS" --csv "$tmp/run.csv" --set "parallel.scan=$scan" "$@"
  append "$OUT/$study.csv" "$study" "$scan" "$tmp/run.csv"
  rm -rf "$tmp"
}

pf_remove_own "$OUT" strong.csv weak.csv scan_algorithms.csv attention.csv
echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(uname -m)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min, at the start of the run)" > "$OUT/machine.txt"

# Strong scaling: one sample of STRONG_LENGTH tokens split over N ranks.
for n in $RANKS; do
  run "$n" strong auto --preset "$PRESET" --length $((STRONG_LENGTH / n)) --batch 1 --sp "$n"
done
# Weak scaling: WEAK_LENGTH tokens per rank, the sample grows with N.
for n in $RANKS; do
  run "$n" weak auto --preset "$PRESET" --length "$WEAK_LENGTH" --batch 1 --sp "$n"
done
# The scan algorithms inside training steps.
for n in 4 8; do
  for scan in chain allgather recursive_doubling; do
    run "$n" scan_algorithms "$scan" --preset "$PRESET" --length "$SCAN_LENGTH" --batch 1 --sp "$n"
  done
done
# The same scans alone (performer-bench comm) at the payload of one training
# scan: B*H*(1 + m*(D+1)) f32 per rank, for the model preset.
case $PRESET in
  small) H=4 D=32 M=64 ;;
  medium) H=8 D=32 M=128 ;;
  paper) H=8 D=64 M=256 ;;
  *) echo "unknown PRESET $PRESET" >&2; exit 1 ;;
esac
SCAN_BYTES=$((4 * H * (1 + M * (D + 1))))
pf_remove_own "$OUT" comm.csv
for n in 2 4 8; do
  tmp=$(mktemp -d "$tmpdir/comm.XXXXXX")
  echo "[$(date -u +%H:%M:%S)] comm N=$n: $SCAN_BYTES bytes per rank" >&2
  pf_run "${MPIRUN[@]}" -np "$n" "$BENCH" comm --min-bytes "$SCAN_BYTES" --max-bytes "$SCAN_BYTES" --csv "$tmp/run.csv"
  if [ ! -s "$OUT/comm.csv" ]; then head -1 "$tmp/run.csv" > "$OUT/comm.csv"; fi
  tail -n +2 "$tmp/run.csv" >> "$OUT/comm.csv"
  rm -rf "$tmp"
done
# FAVOR+ against exact softmax attention, same model, one rank.
for len in $ATTN_LENGTHS; do
  for kind in favor softmax; do
    run 1 attention auto --preset "$PRESET" --length "$len" --batch 1 --sp 1 --set "model.attention=$kind"
  done
done
# Longest local length under CAP for the paper's speed-study configuration
# (planner only unless CONFIRM=1).
confirm=()
[ "$CONFIRM" = 1 ] && confirm=(--confirm)
pf_run "$BENCH" train --preset paper --longest --cap "$CAP" --batch 1 --csv "$OUT/longest.csv" "${confirm[@]}"

pf_run "$PYTHON" "$ROOT/launch/studies/plot_scaling.py" "$OUT"
PRESET=$PRESET pf_run "$PYTHON" "$ROOT/launch/studies/perf_model.py" "$OUT"
echo "wrote $OUT" >&2
