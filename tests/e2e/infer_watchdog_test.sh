#!/usr/bin/env bash
# The watchdog (parallel.timeout_s, runtime/watchdog.h) on a 2-rank
# performer-score run, as watchdog_test.sh has it on training: queries scored
# given a context with the cached state, where each rank runs its queries
# alone and the only exchange is the reduce that sums the scores into rank 0
# (a collective of the sequence group's communicator). Rank 1 is stopped
# (SIGSTOP) while it scores its queries; rank 0 finishes its own and waits in
# that reduce. The job ends with exit status 75 within seconds of the timeout
# (--set parallel.timeout_s=3), rank 0's message names the reduce, its size,
# the communicator and the phase, and tells the user that no output was
# written; no output file is left. Once with synchronous CPU streams and once
# with asynchronous ones (PF_CPU_STREAMS=async: the MPI communicator waits on
# its stream worker).
#   infer_watchdog_test.sh <performer-data> <performer-train> <performer-score> <mpiexec> [mpiexec flags...]
set -euo pipefail
data_tool=$1 train=$2 score=$3
shift 3
mpiexec=("$@")
repo=$(cd "$(dirname "$0")/../.." && pwd)
query=/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz
dir=$(mktemp -d /tmp/pf-infer-watchdog-XXXXXX)
launcher="" victim="" rc=0
cleanup() {
  [ -z "$victim" ] || kill -KILL "$victim" 2>/dev/null || true
  [ -z "$launcher" ] || kill -KILL "$launcher" 2>/dev/null || true
  pkill -KILL -f "$dir/" 2>/dev/null || true
  [ -n "${PF_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
# shellcheck source=tests/cluster/lib.sh
source "$repo/tests/cluster/lib.sh"
timeout_s=3

# A causal checkpoint of 2 steps, of a model wide enough (width 256) that
# reading its parameters, which a rank does once its session is set up,
# shows in its read bytes; a context of 10 proteins and 6 queries.
"$data_tool" prepare --output "$dir/p.h5" "$query" >"$dir/prepare.log" 2>&1 ||
  fail "prepare failed: $(tail -3 "$dir/prepare.log")"
tiny_config "$dir/run.toml" "$dir/p.h5" "$dir/run" 2 2 1
OMP_NUM_THREADS=1 "$train" --config "$dir/run.toml" --set model.width=256 --set model.heads=4 --set model.ffn=512 \
  >"$dir/train.log" 2>&1 || fail "training the checkpoint failed: $(tail -3 "$dir/train.log")"
ckpts=("$dir/run/ckpt"/ckpt-*.h5)
ckpt=${ckpts[-1]}
[ -f "$ckpt" ] || fail "no checkpoint written"
zcat "$query" | awk '/^>/ { n++ } n <= 10' >"$dir/context.fasta"
zcat "$query" | awk '/^>/ { n++ } n > 10 && n <= 16' >"$dir/queries.fasta"


# Bytes a process has read (read and pread calls: its files, HDF5's included).
read_bytes() { awk '/^rchar:/ { print $2 }' "/proc/$1/io" 2>/dev/null || echo 0; }

# stalled NAME STREAMS: a scoring run on CPU streams STREAMS, rank 1 stopped
# once it has read 2 MB: its checkpoint's parameters, read after the
# session's collectives (before them it reads only the checkpoint's
# metadata), so that it stops in the context or its queries, which exchange
# nothing until the reduce.
stalled() {
  local name=$1 streams=$2 end t took
  victim=""
  mkdir -p "$dir/$name"
  "${mpiexec[@]}" -n 2 -x OMP_NUM_THREADS=1 -x "PF_CPU_STREAMS=$streams" "$score" --checkpoint "$ckpt" \
    --context "$dir/context.fasta" --set parallel.timeout_s=$timeout_s --output "$dir/$name/scores.tsv" \
    "$dir/queries.fasta" >"$dir/$name/log" 2>&1 &
  launcher=$!
  end=$((SECONDS + 300))
  until [ -n "$victim" ] && [ "$(read_bytes "$victim")" -ge 2000000 ]; do
    [ "$SECONDS" -lt "$end" ] || fail "$name: rank 1 did not read its checkpoint within 300 s"
    kill -0 "$launcher" 2>/dev/null || fail "$name: the run ended before the stop: $(tail -3 "$dir/$name/log")"
    [ -n "$victim" ] || victim=$(rank_pid "$launcher" 1)
    sleep 0.01
  done
  kill -STOP "$victim"
  t=$(now)
  await_exit "$launcher" "$name"
  launcher="" victim=""
  took=$(since "$t")
  echo "$name: SIGSTOP of rank 1 to the job's end: $took s (timeout $timeout_s s), exit status $rc"
  grep -A2 "watchdog on rank" "$dir/$name/log" | head -3
  [ "$rc" = 75 ] || fail "$name: exit status $rc, expected 75 (tail: $(tail -3 "$dir/$name/log"))"
  grep -qE "watchdog on rank 0: no progress for [0-9.]+ s \(parallel.timeout_s = 3.0\) in reduce of [0-9]+ x f64 \([0-9]+ B\) to rank 0 on rank 0 of 2 \(mpi\), during the scoring of the queries given the context" \
    "$dir/$name/log" || fail "$name: rank 0's message does not name the reduce, its size, the communicator and the phase"
  grep -q "no output file of this command was written; run it again" "$dir/$name/log" ||
    fail "$name: the message does not say that no output was written"
  [ -z "$(find "$dir/$name" -mindepth 1 ! -name log)" ] || fail "$name: left $(ls "$dir/$name")"
}

stalled sync sync
stalled async async
echo "PASS: a stalled rank ends performer-score with exit status 75 and the watchdog's report"
