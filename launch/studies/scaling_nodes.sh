#!/usr/bin/env bash
# Scaling across node counts on a namespaced cluster (tests/cluster/nodes.sh):
# the comm benchmark and real training steps on 1, 2 and 4 nodes with 1 or 2
# ranks per node, TCP between nodes with each node's link limited to a stated
# rate, then the performance model's prediction from the link latency and
# bandwidth measured in the same run (launch/studies/scaling_nodes.py).
#
#   launch/studies/scaling_nodes.sh [OUT_DIR]   (default docs/results/scaling_nodes)
#
# Environment (the defaults run in about 10 minutes on 2 shared cores):
#   BUILD=build             build folder holding launch/performer-bench
#   RATES="1gbit 10gbit"    per-node link rates (tc tbf, both directions)
#   LAYOUTS="1x2 2x1 2x2 4x1"  NODESxRANKS_PER_NODE; one-node layouts run once
#                           (no link between nodes), the others at every rate
#   PRESET=small LENGTH=4096 STEPS=3  training steps: local length per rank,
#                           sp = all ranks (one sequence over every rank)
#   MAX_BYTES=4194304       largest comm-benchmark message per rank
#   PYTHON=/usr/bin/python3 interpreter with numpy and matplotlib
# Needs root (namespaces). Every node shares this machine's cores: the
# figures measure the network path and the model's form, not a real
# cluster's compute. OUT_DIR is a new folder, an empty one or an earlier
# output of this script (launch/scripts/output_dir.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/launch/scripts/output_dir.sh"
OUT=${1:-$ROOT/docs/results/scaling_nodes}
pf_claim_output OUT_DIR "$OUT"
BUILD=${BUILD:-$ROOT/build}
RATES=${RATES:-"1gbit 10gbit"}
LAYOUTS=${LAYOUTS:-"1x2 2x1 2x2 4x1"}
PRESET=${PRESET:-small}
LENGTH=${LENGTH:-4096}
STEPS=${STEPS:-3}
MAX_BYTES=${MAX_BYTES:-4194304}
PYTHON=${PYTHON:-/usr/bin/python3}
BENCH=$BUILD/launch/performer-bench
[ -x "$BENCH" ] || {
  echo "scaling_nodes.sh: no $BENCH (build first)" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || {
  echo "scaling_nodes.sh: needs root (the nodes are namespaces)" >&2
  exit 1
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
work=$(mktemp -d /tmp/pf-scaling-nodes-XXXXXX)
cluster=$work/cluster
cleanup() {
  "$ROOT/tests/cluster/nodes.sh" stop "$cluster" 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
pf_remove_own "$OUT" comm.csv train.csv
{
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(getconf _NPROCESSORS_ONLN) cores shared by every node"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: launch/studies/scaling_nodes.sh (RATES='$RATES' LAYOUTS='$LAYOUTS' PRESET=$PRESET LENGTH=$LENGTH STEPS=$STEPS MAX_BYTES=$MAX_BYTES)"
} >"$OUT/machine.txt"

bench_failed() {
  tail -30 "$work/bench.log" >&2
  echo "scaling_nodes.sh: performer-bench $1 failed on $nodes node(s) x $per_node (log above)" >&2
  exit 1
}
# append DEST TMP RATE NODES PER_NODE: TMP's rows (header once) tagged with the layout.
append() {
  if [ ! -s "$1" ]; then head -1 "$2" | sed 's/^/rate,nodes,per_node,/' >"$1"; fi
  grep -v '^#' "$2" | tail -n +2 | sed "s/^/$3,$4,$5,/" >>"$1"
}

for layout in $LAYOUTS; do
  nodes=${layout%x*} per_node=${layout#*x}
  ranks=$((nodes * per_node))
  rates=$RATES
  [ "$nodes" -gt 1 ] || rates=none
  hosts=$(seq -f "node%g:$per_node" "$nodes" | paste -sd, -)
  for rate in $rates; do
    echo "[$(date -u +%H:%M:%S)] $nodes node(s) x $per_node rank(s), link ${rate}" >&2
    "$ROOT/tests/cluster/nodes.sh" start "$nodes" "$cluster" "${rate#none}" >/dev/null
    mpirun=("$cluster/mpirun" -n "$ranks" -H "$hosts" --bind-to none -x OMP_NUM_THREADS)
    pf_run "${mpirun[@]}" "$BENCH" comm --min-bytes 1024 --max-bytes "$MAX_BYTES" --factor 4 --csv "$cluster/shared/comm.csv" \
      >"$work/bench.log" 2>&1 || bench_failed comm
    append "$OUT/comm.csv" "$cluster/shared/comm.csv" "$rate" "$nodes" "$per_node"
    pf_run "${mpirun[@]}" "$BENCH" train --preset "$PRESET" --length "$LENGTH" --batch 1 --sp "$ranks" --steps "$STEPS" \
      --csv "$cluster/shared/train.csv" >"$work/bench.log" 2>&1 || bench_failed train
    append "$OUT/train.csv" "$cluster/shared/train.csv" "$rate" "$nodes" "$per_node"
    "$ROOT/tests/cluster/nodes.sh" stop "$cluster"
  done
done
pf_run "$PYTHON" "$ROOT/launch/studies/scaling_nodes.py" "$OUT" "$PRESET"
