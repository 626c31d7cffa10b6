#!/usr/bin/env bash
# Kernels on family contexts (docs/results/family-context.md): trains the
# small preset in family mode on a prepared family file once per run spec,
# then scores the test split with and without relatives (performer-eval).
# Resumable: each run resumes from its newest checkpoint (--resume auto), and
# a run whose eval file exists is skipped.
#   launch/studies/family_kernels.sh DATA.h5 OUT NAME:ATTENTION:FEATURES:SEED[:WINDOW]...
#   e.g. launch/studies/family_kernels.sh fam95s.h5 runs softmax-s2:softmax:64:2345 favor64-s2:favor:64:2345
#        launch/studies/family_kernels.sh fam95s.h5 runs favor64-w16:favor:64:1234:16   (model.window = 16)
# Env: BUILD (default build), STEPS (3000), THREADS (OMP threads, 1), LENGTH (data.sample_length, 256),
# BATCH (data.batch_size, 8). OUT is a new folder, an empty one or an earlier
# output of this script (launch/scripts/output_dir.sh).
set -euo pipefail
usage="usage: family_kernels.sh DATA.h5 OUT NAME:ATTENTION:FEATURES:SEED[:WINDOW]..."
data=$(realpath "${1:?$usage}")
out=${2:?$usage}
shift 2
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/launch/scripts/output_dir.sh"
bin=$(realpath "${BUILD:-$repo/build}")/launch
steps=${STEPS:-3000}
pf_claim_output OUT "$out"
{
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(getconf _NPROCESSORS_ONLN) cores"
  echo "data: $data; steps: $steps; threads: ${THREADS:-1}; sample length: ${LENGTH:-256}; batch: ${BATCH:-8}"
} >"$out/machine.txt"
for spec in "$@"; do
  IFS=: read -r name attention features seed window <<<"$spec"
  [ -n "$seed" ] || { echo "bad run spec '$spec': expected NAME:ATTENTION:FEATURES:SEED[:WINDOW]" >&2; exit 2; }
  window=${window:-0}
  dir=$out/$name
  [ -s "$out/eval_$name.txt" ] && { echo "[$(date -u +%H:%M:%S)] $name: done already" >&2; continue; }
  echo "[$(date -u +%H:%M:%S)] $name: $attention, m = $features, window = $window, model.seed = $seed, $steps steps" >&2
  OMP_NUM_THREADS=${THREADS:-1} pf_run "$bin/performer-train" --config "$repo/launch/configs/small.toml" \
    --set "data.files=[\"$data\"]" --set 'data.mode="family"' --set "data.sample_length=${LENGTH:-256}" \
    --set "data.batch_size=${BATCH:-8}" --set "model.attention=\"$attention\"" --set "model.features=$features" \
    --set "model.seed=$seed" --set "model.window=$window" --set parallel.sp=1 --set "train.steps=$steps" --set train.eval_interval=250 \
    --set train.log_interval=250 --set checkpoint.interval=500 --set "checkpoint.dir=\"$dir\"" \
    --set "train.metrics=\"$dir/metrics.jsonl\"" --resume auto >>"$out/$name.log" 2>&1
  ckpt=$(printf '%s/ckpt-%09d.h5' "$dir" "$steps")
  OMP_NUM_THREADS=${THREADS:-1} pf_run "$bin/performer-eval" --checkpoint "$ckpt" --split test >"$out/eval_$name.tmp"
  mv "$out/eval_$name.tmp" "$out/eval_$name.txt"
done
