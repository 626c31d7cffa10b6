#!/usr/bin/env bash
# Faults that only a network produces, on 2 namespaced nodes
# (tests/cluster/nodes.sh) with one rank each, sp = 2, parallel.timeout_s = 5:
#   1. node2's link set down mid-run: the watchdog on rank 0 names the wait,
#      and the job (mpirun) ends;
#   2. every process of node2 killed mid-run: the job ends.
# After each, the run resumes from its last checkpoint on the surviving
# layout (node1 alone, 2 ranks) and ends with the parameters of an
# uninterrupted run of that layout (bits). Prints the time from each fault to
# the job's end. Exit 77 (ctest: skipped) where no cluster can run.
#   faults_test.sh BUILD_DIR MPIEXEC [MPIEXEC FLAGS...]
set -euo pipefail
build=$1
shift
mpiexec=("$@")
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d /tmp/pf-faults-XXXXXX)
cluster=$work/cluster
launcher=""
cleanup() {
  [ -z "$launcher" ] || kill -KILL "$launcher" 2>/dev/null || true
  "$repo/tests/cluster/nodes.sh" stop "$cluster" || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
# shellcheck source=tests/cluster/lib.sh
source "$repo/tests/cluster/lib.sh"
start_cluster 2
train=$build/launch/performer-train
opts() { # NAME: the run's options
  echo --set "data.files=[\"$shared/q.h5\"]" --set model.layers=2 --set model.width=32 --set model.heads=2 \
    --set model.ffn=64 --set model.features=16 --set data.sample_length=64 --set data.batch_size=2 \
    --set train.eval_interval=0 --set train.eval_batches=1 --set train.steps=400 --set train.log_interval=10 \
    --set checkpoint.interval=20 --set "checkpoint.dir=\"$shared/$1/ck\"" \
    --set "train.metrics=\"$shared/$1/m.jsonl\"" --set parallel.sp=2
}
# shellcheck disable=SC2046
"${mpiexec[@]}" -n 2 "$train" $(opts reference) >"$work/reference.log" 2>&1 || fail "the reference run failed"

# fault NAME COMMAND...: a run across the 2 nodes, COMMAND at step 50, the job's end awaited.
fault() {
  local name=$1
  shift
  mkdir -p "$shared/$name"
  # shellcheck disable=SC2046
  "$cluster/mpirun" -n 2 --map-by node --bind-to none -x OMP_NUM_THREADS "$train" $(opts "$name") \
    --set parallel.timeout_s=5 >"$shared/$name/log" 2>&1 &
  launcher=$!
  await_lines "$shared/$name/m.jsonl" 50 "$launcher" "$name"
  "$@"
  local t
  t=$(now)
  await_exit "$launcher" "$name"
  launcher=""
  echo "$name: fault to the job's end $(since "$t") s (parallel.timeout_s = 5), mpirun exit status $rc"
  [ "$rc" != 0 ] || fail "$name: the job reported success"
}
# resume NAME: the surviving layout, node1 alone with both ranks.
resume() {
  # shellcheck disable=SC2046
  "$cluster/mpirun" -n 2 -H node1:2 --bind-to none -x OMP_NUM_THREADS "$train" $(opts "$1") --resume auto \
    >"$shared/$1/resume.log" 2>&1 || fail "$1: resuming on node1 failed: $(tail -5 "$shared/$1/resume.log")"
  grep -m1 "resumed from" "$shared/$1/resume.log" || fail "$1: the run did not resume from a checkpoint"
  "$py" "$repo/tests/cluster/same_params.py" "$shared/reference/ck" "$shared/$1/ck" ||
    fail "$1: resumed on node1, the parameters differ from an uninterrupted run"
}

echo "== 1. node2's link down mid-run"
fault link "$repo/tests/cluster/nodes.sh" link "$cluster" node2 down
grep -m1 "watchdog on rank 0: no progress for" "$shared/link/log" || fail "link: no watchdog message from rank 0"
"$repo/tests/cluster/nodes.sh" link "$cluster" node2 up
resume link

echo "== 2. every process of node2 killed mid-run"
fault killed "$repo/tests/cluster/nodes.sh" kill "$cluster" node2
resume killed
echo "PASS: a lost link and a lost node end the job; the run resumes on the surviving node"
