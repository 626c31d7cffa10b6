#!/usr/bin/env bash
# SIGTERM during training (cluster preemption): a signal on one rank stops
# every rank at the same step after a checkpoint, every rank exits 0, and a
# resumed run continues from that step.
#   sigterm_test.sh <performer-data> <performer-train> <mpiexec> [mpiexec flags...]
set -euo pipefail
data_tool=$1; train=$2; shift 2
mpiexec=("$@")
dir=$(mktemp -d /tmp/pf-sigterm-XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$data_tool" prepare --output "$dir/p.h5" --val-fraction 0.1 /usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz > /dev/null
common=(--set "data.files=[\"$dir/p.h5\"]" --set model.layers=2 --set model.width=32 --set model.heads=2
        --set model.ffn=64 --set model.features=16 --set data.sample_length=64 --set data.batch_size=2
        --set train.steps=100000 --set train.log_interval=1 --set train.eval_interval=0 --set train.eval_batches=1
        --set "checkpoint.dir=\"$dir/ck\"" --set checkpoint.interval=0 --set "train.metrics=\"$dir/m.jsonl\""
        --set parallel.sp=2)
"${mpiexec[@]}" -n 2 "$train" "${common[@]}" > "$dir/log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ -f "$dir/m.jsonl" ] && [ "$(wc -l < "$dir/m.jsonl")" -ge 5 ] && break
  sleep 0.1
done
# The scheduler's signal reaches one rank (here the first); the ranks agree to
# stop at the same step, and the launcher sees every rank exit 0.
rank=$(pgrep -P "$pid" | head -1)
[ -n "$rank" ] || { echo "FAIL: no rank process under the launcher"; exit 1; }
kill -TERM "$rank"
rc=0; wait "$pid" || rc=$?
cat "$dir/log" | tail -5
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc after SIGTERM"; exit 1; }
grep -q "stop requested (signal 15)" "$dir/log" || { echo "FAIL: no stop message"; exit 1; }
ck=$(ls "$dir/ck"/ckpt-*.h5 | tail -1)
[ -n "$ck" ] || { echo "FAIL: no checkpoint after SIGTERM"; exit 1; }
step=$(basename "$ck" .h5); step=$((10#${step#ckpt-}))
# Resume: the run continues from the saved step.
"${mpiexec[@]}" -n 2 "$train" "${common[@]}" --set train.steps=$((step + 2)) --resume auto > "$dir/log2" 2>&1
grep -q "resumed from $ck at step $step" "$dir/log2" || { echo "FAIL: did not resume from $ck"; cat "$dir/log2"; exit 1; }
grep -q "step $((step + 2))/$((step + 2))" "$dir/log2" || { echo "FAIL: resumed run did not finish"; exit 1; }
echo "PASS: stopped at step $step with a checkpoint, resumed and finished"
