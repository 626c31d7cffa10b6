#!/usr/bin/env bash
# Cost of model.window (docs/results/family-context.md): one training step of
# the small preset on one rank (performer-bench train), FAVOR+ alone and with
# local windows beside it, the window alone and full softmax, at several
# sample lengths. Run on an idle machine: the times are compared with FAVOR+
# alone in the same run.
#   launch/studies/window_cost.sh OUT.csv [LENGTH...]     (default lengths 1024 4096)
# Env: BUILD (default build), THREADS (OMP threads, default all cores),
# STEPS (timed steps, 5), BATCH (samples, 1). OUT.csv is a new file or an
# earlier output of this script (its first line starts "# window_cost.sh;"); it
# is written under a temporary name beside it and renamed when complete.
set -euo pipefail
out=${1:?usage: window_cost.sh OUT.csv [LENGTH...]}
shift
lengths=${*:-1024 4096}
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/launch/scripts/output_dir.sh"
if [ -L "$out" ] || { [ -e "$out" ] && ! head -c 17 -- "$out" 2>/dev/null | grep -qx '# window_cost.sh;'; }; then
  echo "window_cost.sh: OUT.csv '$out': exists and is not an earlier output of window_cost.sh; name a new file" >&2
  exit 2
fi
bench=$(realpath "${BUILD:-$repo/build}")/launch/performer-bench
threads=${THREADS:-$(getconf _NPROCESSORS_ONLN)}
tmp=$(mktemp "$(dirname -- "$out")/.window_cost.XXXXXX")
run=$(mktemp)
trap 'rm -f "$tmp" "$run" "$run.err"' EXIT
echo "# window_cost.sh; cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(getconf _NPROCESSORS_ONLN) cores, $threads threads" >"$tmp"
header=
# attention:window
for n in $lengths; do
  for spec in favor:0 favor:64 favor:256 softmax:64 softmax:0; do
    attention=${spec%%:*}
    window=${spec#*:}
    OMP_NUM_THREADS=$threads pf_run "$bench" train --preset small --set "model.attention=\"$attention\"" \
      --set "model.window=$window" --length "$n" --batch "${BATCH:-1}" --steps "${STEPS:-5}" --warmup 1 2>"$run.err" >"$run" ||
      { tail -20 "$run.err" >&2; echo "window_cost.sh: $attention window $window at $n failed (above)" >&2; exit 1; }
    csv=$(grep -v '^#' "$run" | grep -v '^rank ')
    if [ -z "$header" ]; then
      header=$(echo "$csv" | head -1)
      echo "window,$header" >>"$tmp"
    fi
    echo "$csv" | tail -n +2 | sed "s/^/$window,/" >>"$tmp"
    echo "[$(date -u +%H:%M:%S)] $attention window $window, length $n" >&2
  done
done
chmod "$(printf '%o' $((0666 & ~$(umask))))" "$tmp"  # mktemp made it 0600
mv "$tmp" "$out"
echo "$out" >&2
