#!/usr/bin/env bash
# The watchdog (parallel.timeout_s, runtime/watchdog.h) on a 2-rank training
# run, sp = 2, with a timeout of 5 s:
#   1. SIGSTOP of rank 1 mid-run: the job ends with exit status 75, rank 0's
#      message names the operation it waited in (size, communicator, step,
#      the peer of a message) and the last operations it completed; the last
#      checkpoint resumes, and the resumed run ends with the parameters of an
#      uninterrupted run (bits).
#   2. SIGSTOP of rank 0 while it writes a checkpoint: the job ends with 75,
#      rank 1's message names the checkpoint save; the earlier checkpoint
#      resumes and the run finishes.
#   3. Rank 1 ending early (SIGKILL): the launcher ends the job; the run
#      resumes to the uninterrupted run's parameters.
#   4. A slow but progressing run (ranks descheduled by a CPU load for most
#      of every step) with a timeout far below its run time never fires.
# Prints the time from each fault to the job's end (timeout plus the slack).
#   watchdog_test.sh <performer-data> <performer-train> <mpiexec> [mpiexec flags...]
set -euo pipefail
data_tool=$1 train=$2
shift 2
mpiexec=("$@")
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
dir=$(mktemp -d /tmp/pf-watchdog-XXXXXX)
launcher=""
cleanup() {
  [ -z "$launcher" ] || kill -KILL "$launcher" 2>/dev/null || true
  pkill -KILL -f "$dir/" 2>/dev/null || true
  [ -n "${PF_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
# shellcheck source=tests/cluster/lib.sh
source "$repo/tests/cluster/lib.sh"
timeout_s=5
"$data_tool" prepare --output "$dir/p.h5" /usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz >/dev/null
# run NAME SETS...: options of a run in $dir/NAME (tiny model, sp = 2).
opts() {
  local name=$1
  shift
  echo --set "data.files=[\"$dir/p.h5\"]" --set model.layers=2 \
    --set data.sample_length=64 --set data.batch_size=2 --set train.eval_interval=0 --set train.eval_batches=1 \
    --set train.log_interval=10 --set "checkpoint.dir=\"$dir/$name/ck\"" --set "train.metrics=\"$dir/$name/m.jsonl\"" \
    --set parallel.sp=2 "$@"
}
# finish NAME: waits for the launcher, bounded (a hang fails the test).
finish() {
  await_exit "$launcher" "$1"
  launcher=""
}
# start_run NAME OPTIONS...: a run in the background, awaited to step 50.
start_run() {
  local name=$1
  shift
  mkdir -p "$dir/$name"
  "${mpiexec[@]}" -n 2 "$train" "$@" >"$dir/$name/log" 2>&1 &
  launcher=$!
  await_lines "$dir/$name/m.jsonl" 50 "$launcher" "$name"
}
small=(--set model.width=32 --set model.ffn=64 --set model.heads=2 --set model.features=16)

echo "== 1. SIGSTOP of rank 1 mid-run"
mkdir -p "$dir/ref1"
# shellcheck disable=SC2046
start_run stop1 $(opts stop1 "${small[@]}" --set train.steps=400 --set checkpoint.interval=20 \
  --set parallel.timeout_s=$timeout_s)
victim=$(rank_pid "$launcher" 1)
[ -n "$victim" ] || fail "no rank 1 under the launcher"
kill -STOP "$victim"
t=$(now)
finish stop1
took=$(since "$t")
echo "SIGSTOP of rank 1 to the job's end: $took s (timeout $timeout_s s), exit status $rc"
grep -A3 "watchdog on rank" "$dir/stop1/log" | head -4
[ "$rc" = 75 ] || fail "exit status $rc, expected 75 (tail: $(tail -3 "$dir/stop1/log"))"
grep -qE "watchdog on rank 0: no progress for [0-9.]+ s \(parallel.timeout_s = 5.0\) in [a-z]+ of [0-9]+ x [a-z0-9]+ \([0-9]+ B\).* on rank 0 of 2 \(mpi\), during step [0-9]+" \
  "$dir/stop1/log" || fail "rank 0's message does not name its operation, size, communicator and step"
grep -q "last operations completed on this rank" "$dir/stop1/log" || fail "no flight recorder in the message"
# shellcheck disable=SC2046
"${mpiexec[@]}" -n 2 "$train" $(opts stop1 "${small[@]}" --set train.steps=400 --set checkpoint.interval=20) \
  --resume auto >"$dir/stop1/resume.log" 2>&1 || fail "the resume failed: $(tail -5 "$dir/stop1/resume.log")"
grep -m1 "resumed from" "$dir/stop1/resume.log" || fail "the run after the fault did not resume"
# shellcheck disable=SC2046
"${mpiexec[@]}" -n 2 "$train" $(opts ref1 "${small[@]}" --set train.steps=400 --set checkpoint.interval=20) \
  >"$dir/ref1/log" 2>&1 || fail "the reference run failed"
"$py" "$repo/tests/cluster/same_params.py" "$dir/ref1/ck" "$dir/stop1/ck" ||
  fail "stopped, aborted and resumed: parameters differ from the uninterrupted run"

echo "== 2. SIGSTOP of rank 0 while it writes a checkpoint"
mkdir -p "$dir/save0/ck"
# A model whose checkpoint takes long enough to write to be caught (about 40 MB).
big=(--set model.width=512 --set model.ffn=2048 --set model.heads=8 --set model.features=32)
# shellcheck disable=SC2046
"${mpiexec[@]}" -n 2 "$train" $(opts save0 "${big[@]}" --set train.steps=100000 --set checkpoint.interval=4 \
  --set checkpoint.keep=2 --set parallel.timeout_s=$timeout_s) >"$dir/save0/log" 2>&1 &
launcher=$!
end=$((SECONDS + 300))
until [ -n "$(ls "$dir/save0/ck"/ckpt-*.h5 2>/dev/null)" ]; do
  [ "$SECONDS" -lt "$end" ] || fail "the run wrote no checkpoint in 300 s"
  kill -0 "$launcher" 2>/dev/null || fail "the run ended early: $(tail -3 "$dir/save0/log")"
  sleep 0.1
done
writer=$(rank_pid "$launcher" 0)
[ -n "$writer" ] || fail "no rank 0 under the launcher"
# Stops rank 0 as soon as its next checkpoint's temporary file appears.
"$py" - "$dir/save0/ck" "$writer" <<'PY' || fail "rank 0 was not caught writing a checkpoint"
import os, signal, sys, time
folder, pid = sys.argv[1], int(sys.argv[2])
end = time.time() + 300
while time.time() < end:
    names = [n for n in os.listdir(folder) if ".tmp-" in n]
    if names:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.2)
        left = [n for n in names if os.path.exists(os.path.join(folder, n))]
        print(f"rank 0 stopped while writing {names[0]}: {'still there' if left else 'already renamed'}")
        sys.exit(0 if left else 2)
    time.sleep(0.0005)
sys.exit(1)
PY
t=$(now)
finish save0
took=$(since "$t")
echo "SIGSTOP of rank 0 during a save to the job's end: $took s (timeout $timeout_s s), exit status $rc"
grep -A1 "watchdog on rank" "$dir/save0/log" | head -2
[ "$rc" = 75 ] || fail "exit status $rc, expected 75"
grep -qE "watchdog on rank 1: .*during the checkpoint save at step [0-9]+" "$dir/save0/log" ||
  fail "rank 1's message does not name the checkpoint save"
done_step=$(ls "$dir/save0/ck"/ckpt-*.h5 | tail -1 | sed 's/.*ckpt-0*\([0-9]*\)\.h5/\1/')
# shellcheck disable=SC2046
"${mpiexec[@]}" -n 2 "$train" $(opts save0 "${big[@]}" --set train.steps=$((done_step + 2)) --set checkpoint.interval=4 \
  --set checkpoint.keep=2) --resume auto >"$dir/save0/resume.log" 2>&1 ||
  fail "resuming after the stopped save failed: $(tail -5 "$dir/save0/resume.log")"
grep -m1 "resumed from .* at step $done_step" "$dir/save0/resume.log" ||
  fail "the resume did not start from the last complete checkpoint (step $done_step)"

echo "== 3. rank 1 ends early (SIGKILL) mid-run"
# shellcheck disable=SC2046
start_run gone1 $(opts gone1 "${small[@]}" --set train.steps=400 --set checkpoint.interval=20 \
  --set parallel.timeout_s=$timeout_s)
victim=$(rank_pid "$launcher" 1)
[ -n "$victim" ] || fail "no rank 1 under the launcher"
kill -KILL "$victim"
t=$(now)
finish gone1
echo "SIGKILL of rank 1 to the job's end: $(since "$t") s, exit status $rc"
[ "$rc" != 0 ] || fail "the job reported success with a rank gone"
# shellcheck disable=SC2046
"${mpiexec[@]}" -n 2 "$train" $(opts gone1 "${small[@]}" --set train.steps=400 --set checkpoint.interval=20) \
  --resume auto >"$dir/gone1/resume.log" 2>&1 || fail "the resume failed: $(tail -5 "$dir/gone1/resume.log")"
"$py" "$repo/tests/cluster/same_params.py" "$dir/ref1/ck" "$dir/gone1/ck" ||
  fail "a rank lost and the run resumed: parameters differ from the uninterrupted run"

echo "== 4. a slow, progressing run under a CPU load does not fire"
mkdir -p "$dir/slow"
load=()
for _ in $(seq $(($(getconf _NPROCESSORS_ONLN) * 2))); do
  (while :; do :; done) &
  load+=($!)
done
rc=0
# shellcheck disable=SC2046
"${mpiexec[@]}" -n 2 "$train" $(opts slow "${big[@]}" --set train.steps=6 --set checkpoint.interval=0 \
  --set parallel.timeout_s=2) >"$dir/slow/log" 2>&1 || rc=$?
kill "${load[@]}" 2>/dev/null || true
wait "${load[@]}" 2>/dev/null || true
run_s=$(sed -n 's/^done: [0-9]* steps in \(.*\)$/\1/p' "$dir/slow/log")
echo "6 steps under the load with parallel.timeout_s = 2: exit status $rc, ${run_s:-?}"
[ "$rc" = 0 ] || fail "the slow run ended with $rc: $(grep -m1 -A2 'watchdog on' "$dir/slow/log")"
! grep -q "watchdog on rank" "$dir/slow/log" || fail "the watchdog fired on a progressing run"
echo "PASS: the watchdog ends hung jobs with exit status 75 and leaves progressing ones alone"
