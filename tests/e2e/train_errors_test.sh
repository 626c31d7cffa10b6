#!/usr/bin/env bash
# Usage and configuration errors of performer-train, end to end (one rank, no
# launcher): each exits 2 with a message that names the key, the file or the
# split, and leaves what is on disk untouched.
#   - --resume auto after a change of model shape: the checkpoint is refused
#     (file and differing keys), not skipped; checkpoints and metrics unchanged;
#   - a mistyped or absent validation split: refused before step 1;
#   - optimizer values out of range (key, value and allowed range);
#   - data.mode / parallel.scan values; model.width past its range;
#   - a TOML array with a missing bracket in --set;
#   - --resume of a missing file, a folder or a FIFO (named as checkpoint.resume);
#   - checkpoint.init_from naming a folder (its newest checkpoint named; no
#     empty checkpoint.dir left).
# A checkpoint whose metadata was changed is refused by an explicit --resume
# (exit 1, "metadata checksum") and skipped by --resume auto.
#   train_errors_test.sh <performer-data> <performer-train>
# KEEP_GOING=1 reports every failing case instead of stopping at the first.
set -uo pipefail
data_tool=$1; train=$2
dir=$(mktemp -d /tmp/pf-train-errors-XXXXXX)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/cli_checks.sh"
"$data_tool" prepare --output "$dir/p.h5" --val-fraction 0.1 /usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz \
  > /dev/null 2>&1 || fail "prepare"
common=(--set "data.files=[\"$dir/p.h5\"]" --set model.layers=2 --set model.width=32 --set model.heads=2
        --set model.ffn=64 --set model.features=16 --set data.sample_length=48 --set data.batch_size=2
        --set train.steps=8 --set train.log_interval=100 --set train.eval_interval=0 --set train.eval_batches=1
        --set "checkpoint.dir=\"$dir/ck\"" --set checkpoint.interval=0 --set "train.metrics=\"$dir/m.jsonl\"")

# DEDUPED = the arguments with each --set key once, at its last value: the
# cases below vary keys of `common`, and performer-train refuses a key given
# twice.
last_sets() {
  local -A last=()
  local i args=("$@")
  for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = --set ] && last[${args[i + 1]%%=*}]=$((i + 1)); done
  DEDUPED=()
  for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[i]}" = --set ]; then
      [ "${last[${args[i + 1]%%=*}]}" -eq $((i + 1)) ] && DEDUPED+=(--set "${args[i + 1]}")
      i=$((i + 1))
    else
      DEDUPED+=("${args[i]}")
    fi
  done
}

# expect_usage_error NAME TEXT... -- ARGS: performer-train ARGS exits 2, every TEXT in the output.
expect_usage_error() {
  local name=$1; shift
  local texts=()
  while [ "$1" != "--" ]; do texts+=("$1"); shift; done
  shift
  last_sets "$@"
  expect_status "$name" 2 "${texts[@]}" -- "$train" "${DEDUPED[@]}"
}

# A run stopped at step 4 leaves ckpt-4 and 4 metrics lines.
"$train" "${common[@]}" --set train.stop_at=4 > "$dir/log" 2>&1 || { tail "$dir/log"; fail "first run"; }
ck="$dir/ck/ckpt-000000004.h5"
[ -f "$ck" ] || fail "no checkpoint at step 4"
before=$(md5sum "$ck" "$dir/m.jsonl")
for change in model.width=48 model.ffn=96 model.layers=3; do
  key=${change%=*}
  expect_usage_error "resume auto, $change" "$ck" "$key: " "in the checkpoint" -- \
    "${common[@]}" --set "$change" --resume auto
  [ "$(md5sum "$ck" "$dir/m.jsonl")" = "$before" ] || fail "$change: the checkpoint or the metrics changed"
  [ "$(ls "$dir/ck")" = "ckpt-000000004.h5" ] || fail "$change: checkpoint folder changed: $(ls "$dir/ck")"
done
expect_usage_error "resume a missing file" "checkpoint.resume = '$dir/ck/ckpt-000000099.h5': no such file" -- \
  "${common[@]}" --resume "$dir/ck/ckpt-000000099.h5"
expect_usage_error "resume a folder" "checkpoint.resume = '$dir/ck' is a folder" -- "${common[@]}" --resume "$dir/ck"
mkfifo "$dir/fifo.h5"
expect_usage_error "resume a FIFO" "checkpoint.resume = '$dir/fifo.h5' is not a regular file" -- \
  "${common[@]}" --resume "$dir/fifo.h5"
# checkpoint.init_from naming the checkpoint folder instead of a file in it:
# refused naming the folder and its newest checkpoint, and the fresh
# checkpoint.dir of the refused run is not left behind (empty).
rc=0
last_sets "${common[@]}" --set "checkpoint.init_from=\"$dir/ck\"" --set "checkpoint.dir=\"$dir/ck-init/run\"" \
  --set "train.metrics=\"$dir/m-init.jsonl\""
"$train" "${DEDUPED[@]}" > "$dir/out" 2>&1 || rc=$?
if [ "$rc" -ne 2 ]; then
  tail -3 "$dir/out"; fail "checkpoint.init_from = a folder: exit $rc, not 2 (a usage error)"
elif ! grep -qF "checkpoint.init_from = '$dir/ck' is a folder" "$dir/out" ||
     ! grep -qF "newest of the 1 checkpoint(s) in it is '$ck'" "$dir/out"; then
  tail -3 "$dir/out"; fail "checkpoint.init_from = a folder: the message does not name the key, the folder and its newest checkpoint"
elif [ -e "$dir/ck-init" ]; then
  fail "checkpoint.init_from = a folder: the refused run left $(find "$dir/ck-init" | tr '\n' ' ')"
else
  echo "ok: checkpoint.init_from = a folder: exit $rc, $(grep -m1 -F "is a folder" "$dir/out" | cut -c1-200); no checkpoint.dir left"
fi
expect_usage_error "resume FILE, model.width=48" "$ck" "model.width: 32 in the checkpoint, 48 now" -- \
  "${common[@]}" --set model.width=48 --resume "$ck"

# Splits are checked before step 1: no step line, no checkpoint.
for split in vaild ood; do
  rm -rf "$dir/ck2" "$dir/m2.jsonl"
  expect_usage_error "data.valid_split=$split" "data.valid_split" "'$split'" "$dir/p.h5" "train, valid, test" -- \
    "${common[@]}" --set "data.valid_split=\"$split\"" --set "checkpoint.dir=\"$dir/ck2\"" \
    --set "train.metrics=\"$dir/m2.jsonl\""
  [ -z "$(ls "$dir/ck2" 2>/dev/null)" ] && [ ! -s "$dir/m2.jsonl" ] || fail "$split: the run trained before refusing the split"
done
expect_usage_error "data.train_split=tain" "data.train_split" "'tain'" "$dir/p.h5" -- \
  "${common[@]}" --set 'data.train_split="tain"'

expect_usage_error "optimizer.lr=inf" "optimizer.lr" "inf" "finite" -- "${common[@]}" --set optimizer.lr=inf
expect_usage_error "optimizer.beta1=1.5" "optimizer.beta1" "1.5" "[0, 1)" -- "${common[@]}" --set optimizer.beta1=1.5
expect_usage_error "optimizer.beta2=1" "optimizer.beta2" "[0, 1)" -- "${common[@]}" --set optimizer.beta2=1
expect_usage_error "optimizer.eps=0" "optimizer.eps" "> 0" -- "${common[@]}" --set optimizer.eps=0
expect_usage_error "optimizer.weight_decay=-0.1" "optimizer.weight_decay" "-0.1" ">= 0" -- \
  "${common[@]}" --set optimizer.weight_decay=-0.1
expect_usage_error "optimizer.clip_norm=nan" "optimizer.clip_norm" "nan" -- "${common[@]}" --set optimizer.clip_norm=nan
expect_usage_error "data.mode=chunks" "data.mode" "chunks" -- "${common[@]}" --set data.mode=chunks
expect_usage_error "an unknown option" "--frobnicate" -- "${common[@]}" --frobnicate
expect_usage_error "a --config that does not exist" "--config" "$dir/absent.toml" -- --config "$dir/absent.toml"
expect_usage_error "parallel.scan=tree" "parallel.scan" "tree" -- "${common[@]}" --set parallel.scan=tree
expect_usage_error "model.width=3000000000" "model.width" "3000000000" -- "${common[@]}" --set model.width=3000000000
expect_usage_error "missing bracket" "data.files" "[\"$dir/p.h5\"" -- "${common[@]}" --set "data.files=[\"$dir/p.h5\""
expect_usage_error "exp with redraws" "model.redraw_interval" "exp" "never redrawn" -- "${common[@]}" \
  --set 'model.attention="exp"' --set model.redraw_interval=5
expect_usage_error "exp_key_norm with favor" "model.exp_key_norm" "exp" "favor" -- "${common[@]}" \
  --set model.exp_key_norm=true
expect_usage_error "resume an exp checkpoint as favor" "$ck" "model.attention: favor in the checkpoint, exp now" -- \
  "${common[@]}" --set 'model.attention="exp"' --resume "$ck"

# A changed byte of metadata: an explicit --resume refuses the file (exit 1,
# the reason named), --resume auto skips it with a warning and resumes from
# the previous checkpoint.
rm -rf "$dir/ck" "$dir/m.jsonl"
"$train" "${common[@]}" --set train.stop_at=2 > "$dir/log" 2>&1 || fail "run to step 2"
"$train" "${common[@]}" --set train.stop_at=4 --resume auto > "$dir/log" 2>&1 || fail "run to step 4"
python3 - "$ck" <<'EOF' || fail "could not change the stored configuration"
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
at = data.find(b"eval_batches = 1")
assert at >= 0, "configuration text not found"
data[at + len("eval_batches = ")] = ord("7")
open(path, "wb").write(bytes(data))
EOF
rc=0; "$train" "${common[@]}" --resume "$ck" > "$dir/out" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then
  fail "a checkpoint with changed metadata was resumed"
elif ! grep -qF "metadata checksum" "$dir/out"; then
  tail -3 "$dir/out"; fail "the refusal does not name the metadata checksum"
else
  echo "ok: --resume FILE with changed metadata: exit $rc, $(grep -m1 -F "metadata checksum" "$dir/out" | cut -c1-160)"
fi
rc=0; "$train" "${common[@]}" --resume auto > "$dir/out" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
  tail -3 "$dir/out"; fail "--resume auto did not fall back to the previous checkpoint"
elif ! grep -qF "skipping unusable checkpoint $ck" "$dir/out"; then
  fail "no warning about the damaged checkpoint"
elif ! grep -qF "resumed from $dir/ck/ckpt-000000002.h5 at step 2" "$dir/out"; then
  fail "did not resume from step 2"
else
  echo "ok: --resume auto skipped the damaged checkpoint and resumed from step 2"
fi
[ "$failures" -eq 0 ] || { echo "FAIL: $failures case(s) failed"; exit 1; }
echo "PASS: every usage error exits 2 and names its key; nothing on disk was changed"
