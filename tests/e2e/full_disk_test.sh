#!/usr/bin/env bash
# Every tool against a full disk, and performer-train against folders it
# cannot write (docs/testing.md#full-disk). As root (it mounts small tmpfs
# folders and runs one case as the user nobody); exit 77 (skipped) otherwise.
#   - performer-data prepare, performer-eval --fasta (TMPDIR full),
#     performer-score --output/--per-residue, performer-embed: exit 1, the
#     reason (No space left on device) named, no crash at exit, nothing left
#     under the output names or their temporary names;
#   - performer-train with train.metrics on a nearly full disk: exit 1
#     naming the file, the step and what was lost; the file cut back to its
#     last complete line;
#   - performer-train whose checkpoint does not fit: exit 1 naming it and
#     saying the earlier ones are kept, no file of it left;
#   - performer-train with checkpoint.dir on a read-only filesystem, or in a
#     folder it may not write: exit 2 before step 1, the reason named.
#   full_disk_test.sh <performer-data> <performer-train> <performer-eval> <performer-score> <performer-embed>
set -uo pipefail
data_tool=$1; train=$2; eval_tool=$3; score=$4; embed=$5
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (mounts tmpfs)"; exit 77; }
dir=$(mktemp -d /tmp/pf-full-disk-XXXXXX)
mounts=()
cleanup() {
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
# mount_tmpfs DIR SIZE [OPTIONS]
mount_tmpfs() {
  mkdir -p "$1"
  mount -t tmpfs -o "size=$2${3:+,$3}" tmpfs "$1" || { echo "SKIP: cannot mount tmpfs"; exit 77; }
  mounts+=("$1")
}
# fill DIR FREE_KIB: fills the tmpfs at DIR until about FREE_KIB are left.
fill() {
  local avail
  avail=$(df -k --output=avail "$1" | tail -1)
  dd if=/dev/zero of="$1/.filler" bs=1k count=$((avail - $2)) status=none 2>/dev/null || true
}
source "$(dirname "$0")/cli_checks.sh"
# nothing_left NAME DIR: DIR holds nothing but the filler.
nothing_left() {
  local left
  left=$(ls -A "$2" | grep -v '^\.filler$')
  [ -z "$left" ] || fail "$1: left behind in $2: $left"
}

query=/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz
zcat "$query" | head -60 > "$dir/few.fasta"
"$data_tool" prepare --output "$dir/p.h5" --val-fraction 0.1 "$query" > /dev/null 2>&1 || fail "prepare"
tiny=(--set "data.files=[\"$dir/p.h5\"]" --set model.layers=1 --set model.width=32 --set model.heads=2
      --set model.ffn=64 --set model.features=16 --set data.sample_length=48 --set data.batch_size=2
      --set train.eval_interval=0 --set train.eval_batches=1)
run=("${tiny[@]}" --set checkpoint.interval=0)
"$train" "${run[@]}" --set train.steps=4 --set train.log_interval=1000 --set "checkpoint.dir=\"$dir/ck\"" \
  > "$dir/log" 2>&1 \
  || { tail -3 "$dir/log"; fail "training the checkpoint"; }
ck="$dir/ck/ckpt-000000004.h5"

mount_tmpfs "$dir/full" 1m
fill "$dir/full" 0
expect_status "prepare --output on a full disk" 1 "No space left on device" -- \
  "$data_tool" prepare --output "$dir/full/p.h5" "$query"
nothing_left "prepare" "$dir/full"
# (Open MPI keeps its own session files under /tmp, so that it starts)
expect_status "eval --fasta with TMPDIR on a full disk" 1 "No space left on device" -- \
  env TMPDIR="$dir/full" OMPI_MCA_orte_tmpdir_base=/tmp "$eval_tool" --checkpoint "$ck" --fasta "$dir/few.fasta"
nothing_left "eval --fasta" "$dir/full"
expect_status "score --output --per-residue on a full disk" 1 "No space left on device" -- \
  "$score" --checkpoint "$ck" --output "$dir/full/s.tsv" --per-residue "$dir/full/r.h5" "$dir/few.fasta"
nothing_left "score" "$dir/full"
expect_status "embed --output on a full disk" 1 "No space left on device" -- \
  "$embed" --checkpoint "$ck" --output "$dir/full/e.h5" "$dir/few.fasta"
nothing_left "embed" "$dir/full"

# Metrics on a nearly full disk: the run stops at the first line that does
# not fit, naming the file and what was lost.
mount_tmpfs "$dir/nearly" 1m
fill "$dir/nearly" 16
expect_status "train.metrics on a nearly full disk" 1 "train.metrics '$dir/nearly/m.jsonl': writing failed" \
  "No space left on device" "are lost" -- \
  "$train" "${run[@]}" --set train.steps=400 --set train.log_interval=1 --set "checkpoint.dir=\"$dir/ck2\"" \
  --set "train.metrics=\"$dir/nearly/m.jsonl\""
python3 - "$dir/nearly/m.jsonl" <<'EOF' || fail "train.metrics on a nearly full disk: not cut back to complete lines"
import json, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n"), "the last line is cut short"
lines = text.splitlines()
assert len(lines) >= 1, "no line written"
for line in lines:
    json.loads(line)  # every line complete
print(f"ok: the metrics file ends with its last complete line ({len(lines)} lines)")
EOF

# A checkpoint that does not fit: exit 1 naming it and saying the earlier
# ones are kept; neither it nor its temporary file is left.
mount_tmpfs "$dir/small" 1m
mkdir -p "$dir/small/ck"
fill "$dir/small" 24
expect_status "a checkpoint on a nearly full disk" 1 \
  "checkpoint $dir/small/ck/ckpt-000000002.h5 of step 2 was not written (the earlier checkpoints are kept)" -- \
  "$train" "${tiny[@]}" --set train.steps=4 --set checkpoint.interval=2 --set "checkpoint.dir=\"$dir/small/ck\"" \
  --set "train.metrics=\"$dir/m5.jsonl\""
! ls "$dir/small/ck" | grep -q 'ckpt-' || fail "a checkpoint on a nearly full disk: left $(ls "$dir/small/ck")"

# Folders that cannot be written: refused before step 1.
mount_tmpfs "$dir/ro" 1m ro
expect_status "checkpoint.dir on a read-only filesystem" 2 "checkpoint.dir: cannot write in the folder '$dir/ro'" \
  "Read-only file system" -- \
  "$train" "${run[@]}" --set train.steps=4 --set "checkpoint.dir=\"$dir/ro\"" --set "train.metrics=\"$dir/m3.jsonl\""
[ ! -s "$dir/m3.jsonl" ] || fail "read-only checkpoint.dir: the run trained before refusing"
mkdir -p "$dir/forbidden" "$dir/open"
chmod 755 "$dir" "$dir/forbidden"
chmod 1777 "$dir/open"
expect_status "checkpoint.dir not writable for the user" 2 "checkpoint.dir: cannot write in the folder" \
  "Permission denied" -- \
  setpriv --reuid=nobody --regid=nogroup --clear-groups "$train" "${run[@]}" --set train.steps=4 \
  --set "checkpoint.dir=\"$dir/forbidden\"" --set "train.metrics=\"$dir/open/m4.jsonl\""
[ ! -s "$dir/open/m4.jsonl" ] || fail "forbidden checkpoint.dir: the run trained before refusing"

[ "$failures" -eq 0 ] || { echo "FAIL: $failures case(s) failed"; exit 1; }
echo "PASS: full disks and unwritable folders end each tool cleanly, with nothing left behind"
