#!/usr/bin/env bash
# A run owns its checkpoint folder and knows its data, end to end (one rank,
# no launcher; docs/checkpoints.md#one-run-per-folder):
#   - a second run on a live run's checkpoint.dir exits 2 naming the owner,
#     and the first run's checkpoints and metrics go on untouched;
#   - the lock of a run killed with SIGKILL is taken over with a message;
#   - a fresh run refuses a checkpoint.dir that holds checkpoints;
#   - a resume from an earlier checkpoint than the run's newest sets the newer
#     ones aside, so that --resume auto continues the new branch;
#   - a resume after the data file was prepared again (another split seed,
#     or a smaller file) exits 2 naming the file and what changed;
#     checkpoint.allow_data_change = true goes on with the loader restarted;
#   - checks before step 1: checkpoint.dir a regular file, a batch larger
#     than the training split;
#   - --set given twice, a bad --set value named as the --set, --plan and
#     --print-config of an sp = 2 configuration without a launcher,
#     performer-generate --max-length 0.
#   run_ownership_test.sh <performer-data> <performer-train> <performer-generate>
set -uo pipefail
data_tool=$1; train=$2; generate=$3
dir=$(mktemp -d /tmp/pf-ownership-XXXXXX)
first=
trap '[ -n "$first" ] && kill -9 "$first" 2>/dev/null; [ -n "${KEEP_DIR:-}" ] || rm -rf "$dir"' EXIT
source "$(dirname "$0")/cli_checks.sh"
query=/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz
"$data_tool" prepare --output "$dir/p.h5" --val-fraction 0.1 "$query" > /dev/null 2>&1 || fail "prepare"
core=(--set "data.files=[\"$dir/p.h5\"]" --set model.layers=1 --set model.heads=2 --set model.ffn=64
      --set model.features=16 --set data.sample_length=48 --set train.log_interval=1 --set train.eval_interval=0
      --set train.eval_batches=1 --set checkpoint.interval=5 --set model.width=32 --set data.batch_size=2)
model=("${core[@]:0:20}" --set "train.metrics=\"$dir/m.jsonl\"")
# (a key may be given once: the cases below add the keys that they vary)
base=("${model[@]}" --set model.width=32 --set data.batch_size=2)
common=("${base[@]}" --set "checkpoint.dir=\"$dir/ck\"")

# expect_usage_error NAME TEXT... -- COMMAND...: exit 2 and every TEXT in the output.
expect_usage_error() {
  local name=$1; shift
  expect_status "$name" 2 "$@"
}
lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }

# A long first run; the second starts once the first has logged steps.
"$train" "${common[@]}" --set train.steps=1000000 --resume auto > "$dir/first.log" 2>&1 &
first=$!
# (a wait bounded by time, generously: a loaded machine starts slowly)
end=$((SECONDS + 300))
while [ "$(lines "$dir/m.jsonl")" -lt 12 ] && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
[ "$(lines "$dir/m.jsonl")" -ge 12 ] || { tail -3 "$dir/first.log"; fail "the first run logged no steps"; }
expect_usage_error "second run on a live checkpoint.dir" "checkpoint.dir = '$dir/ck' is in use by run" \
  "pid $first" -- "$train" "${common[@]}" --set train.steps=1000000 --resume auto
expect_usage_error "second run with only the metrics shared" "train.metrics = '$dir/m.jsonl' is in use by run" \
  "pid $first" -- "$train" "${base[@]}" --set train.steps=10 --set "checkpoint.dir=\"$dir/other\""
before=$(lines "$dir/m.jsonl")
sleep 1
[ "$(lines "$dir/m.jsonl")" -gt "$before" ] || fail "the first run's metrics stopped growing after the refusals"
grep -q "dropped" "$dir/first.log" && fail "the first run's metrics were rewritten"
kill -0 "$first" 2>/dev/null || fail "the first run did not survive the refusals"
kill -9 "$first"; wait "$first" 2>/dev/null; first=

# Its lock is taken over; the run resumes from its newest checkpoint.
newest=$(ls "$dir/ck" | grep -E "^ckpt-[0-9]+\.h5$" | tail -1)
"$train" "${common[@]}" --set train.steps=1000000 --set train.stop_at=1 --resume auto > "$dir/out" 2>&1 \
  || { tail -3 "$dir/out"; fail "resume after SIGKILL"; }
grep -qF "checkpoint.dir = '$dir/ck': taking over the lock from run" "$dir/out" \
  && grep -qF "which no longer holds it" "$dir/out" \
  && echo "ok: the lock of the killed run was taken over: $(grep -m1 -F "taking over" "$dir/out" | cut -c1-200)" \
  || fail "no takeover message after SIGKILL"
grep -qF "resumed from $dir/ck/$newest" "$dir/out" || fail "did not resume from the newest checkpoint $newest"

# A fresh run into a folder with checkpoints.
listing=$(ls "$dir/ck")
expect_usage_error "fresh run into a used checkpoint.dir" "already holds" "--resume auto" -- \
  "$train" "${common[@]}" --set train.steps=10
[ "$(ls "$dir/ck")" = "$listing" ] || fail "the refused fresh run changed the checkpoint folder"

# The data prepared again with another split seed: refused, then allowed.
cp "$dir/p.h5" "$dir/p0.h5"
"$data_tool" prepare --output "$dir/p.h5" --val-fraction 0.1 --seed 7 "$query" > /dev/null 2>&1 || fail "prepare seed 7"
expect_usage_error "resume on data prepared with --seed 7" "the data changed since this checkpoint" \
  "data.files[0] '$dir/p.h5': content digest" "split rule 'hash seed=0" "'hash seed=7" "allow_data_change" -- \
  "$train" "${common[@]}" --set train.steps=1000000 --resume auto
[ "$(ls "$dir/ck")" = "$listing" ] || fail "the refused resume changed the checkpoint folder"
"$train" "${common[@]}" --set train.steps=1000000 --set train.stop_at=1 --set checkpoint.allow_data_change=true \
  --resume auto > "$dir/out" 2>&1 || { tail -3 "$dir/out"; fail "resume with checkpoint.allow_data_change"; }
grep -qF "the loader restarted" "$dir/out" && grep -qE "at step [0-9]+ \(data epoch 0, sample 0\)" "$dir/out" \
  && echo "ok: checkpoint.allow_data_change = true goes on with the loader at epoch 0, sample 0" \
  || { tail -5 "$dir/out"; fail "allow_data_change: no restart of the loader"; }
# A smaller replacement file: named as a change of data, not a loader error.
zcat "$query" | head -400 > "$dir/small.fasta"
"$data_tool" prepare --output "$dir/p.h5" --val-fraction 0.1 --seed 7 "$dir/small.fasta" > /dev/null 2>&1 \
  || fail "prepare the smaller file"
expect_usage_error "resume on a smaller replacement file" "the data changed since this checkpoint" "content digest" -- \
  "$train" "${common[@]}" --set train.steps=1000000 --resume auto
cp "$dir/p0.h5" "$dir/p.h5"

# A resume from an earlier checkpoint than the run's newest starts a branch:
# the newer checkpoints are set aside, and --resume auto continues the branch.
ckpts=($(ls "$dir/ck" | grep -E "^ckpt-[0-9]+\.h5$"))
older=${ckpts[0]}
"$train" "${common[@]}" --set train.steps=1000000 --set train.stop_at=1 --resume "$dir/ck/$older" > "$dir/out" 2>&1 \
  || { tail -3 "$dir/out"; fail "resume from the older checkpoint $older"; }
# The metrics lines past the branch point are kept beside the file, not lost.
older_step=$(echo "$older" | sed 's/^ckpt-0*\([0-9][0-9]*\)\.h5$/\1/')
kept_lines=$(cat "$dir"/m.jsonl.dropped-after-"$older_step"* 2>/dev/null | wc -l)
[ "$kept_lines" -gt 0 ] && grep -qF "to $dir/m.jsonl.dropped-after-$older_step" "$dir/out" \
  || { ls "$dir"; fail "the metrics lines past step $older_step were not kept beside m.jsonl"; }
for newer in "${ckpts[@]:1}"; do
  # (the branch's own next checkpoint may take the name again)
  [ -f "$dir/ck/$newer.superseded" ] || fail "$newer was not set aside"
  grep -qF "set aside as $dir/ck/$newer.superseded" "$dir/out" || fail "no message about setting $newer aside"
done
branch=$(ls "$dir/ck" | grep -E "^ckpt-[0-9]+\.h5$" | tail -1)
"$train" "${common[@]}" --set train.steps=1000000 --set train.stop_at=1 --resume auto > "$dir/out" 2>&1 \
  && grep -qF "resumed from $dir/ck/$branch" "$dir/out" \
  && echo "ok: a resume from $older set aside $((${#ckpts[@]} - 1)) newer checkpoint(s); --resume auto continued from $branch" \
  || { tail -3 "$dir/out"; fail "--resume auto after the branch did not continue from $branch"; }
# Back to the first lineage at a step where the branch has a checkpoint too:
# the branch's checkpoint of that step is set aside with its newer ones, so
# no file of another lineage stays under a checkpoint name.
s1=${ckpts[1]}
[ -f "$dir/ck/$s1" ] && [ -f "$dir/ck/$s1.superseded" ] || { ls "$dir/ck"; fail "no branch checkpoint beside $s1.superseded"; }
branch_bytes=$(md5sum < "$dir/ck/$s1")
"$train" "${common[@]}" --set train.steps=1000000 --set train.stop_at=1 --resume "$dir/ck/$s1.superseded" \
  > "$dir/out" 2>&1 || { tail -3 "$dir/out"; fail "resume from $s1.superseded"; }
grep -qF "beside this run's other checkpoint of that step $dir/ck/$s1: set aside" "$dir/out" \
  || { tail -5 "$dir/out"; fail "the branch's $s1 was not set aside"; }
[ ! -f "$dir/ck/$s1" ] || [ "$(md5sum < "$dir/ck/$s1")" != "$branch_bytes" ] \
  || fail "the branch's $s1 stayed beside the resumed lineage"
echo "ok: a resume from $s1.superseded set aside the branch's checkpoint of that step"
expect_usage_error "--resume and --set checkpoint.resume" "both say where to resume from" -- \
  "$train" "${common[@]}" --set train.steps=10 --set 'checkpoint.resume="auto"' --resume auto

# A file that only bears a checkpoint's name (skipped by --resume auto as
# unreadable) is set aside when the run saves that step, never replaced.
mkdir -p "$dir/ck4"
echo "my notes" > "$dir/ck4/ckpt-000000005.h5"
"$train" "${core[@]}" --set train.steps=5 --set "train.metrics=\"$dir/m4.jsonl\"" \
  --set "checkpoint.dir=\"$dir/ck4\"" --resume auto > "$dir/out" 2>&1 || { tail -3 "$dir/out"; fail "run into ck4"; }
[ "$(cat "$dir/ck4/ckpt-000000005.h5.set-aside" 2>/dev/null)" = "my notes" ] \
  || { ls "$dir/ck4"; fail "the file named ckpt-000000005.h5 was not kept as ckpt-000000005.h5.set-aside"; }
grep -qF "set aside as $dir/ck4/ckpt-000000005.h5.set-aside" "$dir/out" || fail "no message about the file set aside"
echo "ok: a non-checkpoint bearing a checkpoint's name was set aside, not replaced"

# A resume may change the optimizer's values; the log names each change.
"$train" "${common[@]}" --set train.steps=1000000 --set train.stop_at=1 --set optimizer.lr=0.001 \
  --resume auto > "$dir/out" 2>&1 || { tail -3 "$dir/out"; fail "resume with another optimizer.lr"; }
grep -qE "with optimizer.lr: [0-9.e-]+ in the checkpoint, 0.001 now" "$dir/out" \
  || { grep -i "resumed" "$dir/out"; fail "the change of optimizer.lr was not logged"; }
echo "ok: a resume with another optimizer.lr logs the change"

# Checks before step 1.
touch "$dir/a-file"
expect_usage_error "checkpoint.dir is a regular file" "checkpoint.dir: '$dir/a-file' is not a folder" -- \
  "$train" "${base[@]}" --set train.steps=10 --set "checkpoint.dir=\"$dir/a-file\""
ln -s "$dir/gone" "$dir/dangling"
expect_usage_error "checkpoint.dir is a symbolic link to nothing" \
  "checkpoint.dir: '$dir/dangling' is a symbolic link to '$dir/gone', which does not exist" -- \
  "$train" "${base[@]}" --set train.steps=10 --set "checkpoint.dir=\"$dir/dangling\""
[ -L "$dir/dangling" ] && [ ! -e "$dir/gone" ] || fail "the dangling link or its target was changed"
"$data_tool" prepare --output "$dir/p7.h5" --val-fraction 0.1 --seed 7 "$query" > /dev/null 2>&1 || fail "prepare seed 7"
expect_usage_error "two files of one source split differently" \
  "data.files '$dir/p.h5' and '$dir/p7.h5' were both prepared from a source named 'QUERY.fasta.gz' but split differently" \
  "seed 0" "seed 7" -- "$train" "${core[@]:2}" --set "data.files=[\"$dir/p.h5\", \"$dir/p7.h5\"]" \
  --set train.steps=10 --set "checkpoint.dir=\"$dir/ck5\"" --set "train.metrics=\"$dir/m5.jsonl\""
[ ! -e "$dir/ck5" ] || [ -z "$(ls "$dir/ck5")" ] || fail "the refused run wrote checkpoints"
"$data_tool" prepare --output "$dir/pnv.h5" --val-fraction 0 --test-fraction 0 "$query" > /dev/null 2>&1 ||
  fail "prepare without validation"
expect_usage_error "an empty validation split" \
  "data.valid_split = 'valid' cannot give one validation sample, and validation runs at least once (at the end)" \
  "$dir/pnv.h5" -- \
  "$train" "${core[@]:2}" --set "data.files=[\"$dir/pnv.h5\"]" \
  --set train.steps=10 --set "checkpoint.dir=\"$dir/ck5\"" --set "train.metrics=\"$dir/m5.jsonl\""
ln -s "$dir/p.h5" "$dir/p-link.h5"
expect_usage_error "one data file listed twice, under another name" \
  "data.files[0] '$dir/p.h5' and data.files[1] '$dir/p-link.h5' are the same file" -- \
  "$train" "${core[@]:2}" --set "data.files=[\"$dir/p.h5\", \"$dir/p-link.h5\"]" \
  --set train.steps=10 --set "checkpoint.dir=\"$dir/ck5\"" --set "train.metrics=\"$dir/m5.jsonl\""
cp "$dir/p.h5" "$dir/p-copy.h5"
expect_usage_error "a copy of a data file" \
  "data.files[0] '$dir/p.h5' and data.files[1] '$dir/p-copy.h5' hold the same data (content digest fnv1a64:" -- \
  "$train" "${core[@]:2}" --set "data.files=[\"$dir/p.h5\", \"$dir/p-copy.h5\"]" \
  --set train.steps=10 --set "checkpoint.dir=\"$dir/ck5\"" --set "train.metrics=\"$dir/m5.jsonl\""
printf 'user notes\n' > "$dir/notes.lock"
expect_usage_error "a metrics lock path holding a file of the user's" \
  "its lock file '$dir/notes.lock' exists and holds something else than a lock record" -- \
  "$train" "${core[@]}" --set train.steps=10 --set "train.metrics=\"$dir/notes\"" --set "checkpoint.dir=\"$dir/ck6\""
[ "$(cat "$dir/notes.lock")" = "user notes" ] || fail "the user's notes.lock was changed"
rm -rf "$dir/ck3"
expect_usage_error "batch larger than the split" "fewer than one step takes" "data.batch_size 100000" -- \
  "$train" "${model[@]}" --set model.width=32 --set train.steps=10 --set data.batch_size=100000 \
  --set "checkpoint.dir=\"$dir/ck3\""
[ -z "$(ls "$dir/ck3" 2>/dev/null)" ] || fail "the refused run wrote checkpoints"

# Configuration items.
expect_usage_error "--set twice" "--set: model.width is given twice ('model.width=32', then 'model.width=64')" -- \
  "$train" "${base[@]}" --set model.width=64 --plan
expect_usage_error "bad --set value" "--set 'model.ffn=64x': model.ffn must be an integer" -- \
  "$train" --set "data.files=[\"$dir/p.h5\"]" --set model.ffn=64x --plan
out=$("$train" "${common[@]}" --set parallel.sp=2 --plan 2>&1) \
  && grep -qF "memory plan per rank (sp 2, any dp" <<< "$out" \
  && echo "ok: --plan of an sp = 2 configuration without a launcher: $out" \
  || { echo "$out" | tail -3; fail "--plan with parallel.sp = 2 alone"; }
"$train" "${common[@]}" --set parallel.sp=2 --print-config 2>&1 | grep -qF "sp = 2" \
  && echo "ok: --print-config of an sp = 2 configuration without a launcher" \
  || fail "--print-config with parallel.sp = 2 alone"
expect_usage_error "generate --max-length 0" "--max-length must be >= 1" -- \
  "$generate" --checkpoint "$dir/ck/$newest" --num 1 --max-length 0 --output "$dir/gen.fasta"
[ ! -e "$dir/gen.fasta" ] || fail "generate --max-length 0 wrote a file"

[ "$failures" -eq 0 ] || { echo "FAIL: $failures case(s) failed"; exit 1; }
echo "PASS: one run per folder, checkpoints that know their data, checks before step 1"
