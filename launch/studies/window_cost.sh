#!/usr/bin/env bash
# Cost of model.window (docs/results/family-context.md): one training step of
# the small preset on one rank (performer-bench train), FAVOR+ alone and with
# local windows beside it, the window alone and full softmax, at several
# sample lengths. Run on an idle machine: the times are compared with FAVOR+
# alone in the same run.
#   launch/studies/window_cost.sh OUT.csv [LENGTH...]     (default lengths 1024 4096)
# Env: BUILD (default build), THREADS (OMP threads, default all cores),
# STEPS (timed steps, 5), BATCH (samples, 1).
set -euo pipefail
out=${1:?usage: window_cost.sh OUT.csv [LENGTH...]}
shift
lengths=${*:-1024 4096}
repo=$(cd "$(dirname "$0")/../.." && pwd)
bench=$(realpath "${BUILD:-$repo/build}")/launch/performer-bench
threads=${THREADS:-$(getconf _NPROCESSORS_ONLN)}
tmp=$out.tmp
echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(getconf _NPROCESSORS_ONLN) cores, $threads threads" >"$tmp"
header=
# attention:window
for n in $lengths; do
  for spec in favor:0 favor:64 favor:256 softmax:64 softmax:0; do
    attention=${spec%%:*}
    window=${spec#*:}
    csv=$(OMP_NUM_THREADS=$threads "$bench" train --preset small --set "model.attention=\"$attention\"" \
      --set "model.window=$window" --length "$n" --batch "${BATCH:-1}" --steps "${STEPS:-5}" --warmup 1 2>/dev/null |
      grep -v '^#' | grep -v '^rank ')
    if [ -z "$header" ]; then
      header=$(echo "$csv" | head -1)
      echo "window,$header" >>"$tmp"
    fi
    echo "$csv" | tail -n +2 | sed "s/^/$window,/" >>"$tmp"
    echo "[$(date -u +%H:%M:%S)] $attention window $window, length $n" >&2
  done
done
mv "$tmp" "$out"
echo "$out" >&2
