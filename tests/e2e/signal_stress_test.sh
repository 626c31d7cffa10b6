#!/usr/bin/env bash
# Stop signals at random instants (docs/checkpoints.md, Preemption).
# SIGINT, SIGTERM or SIGUSR1 goes to one rank or to every rank of a 2- or
# 4-rank training run at a random time from start-up to the last steps, in
# four layouts: family samples with a local window (sp = 2), packed samples
# (dp 2 x sp 2, two OpenMP threads a rank, so OpenBLAS starts its thread pool
# as it is loaded, before main) and concat samples (sp = 2, and sp = 4 with
# asynchronous, jittered CPU streams). After each signal:
#   - the launcher and every rank exit 0 (the run stopped with a checkpoint,
#     or it had already finished);
#   - no AddressSanitizer or UndefinedBehaviorSanitizer report, no crash
#     (under the PF_SANITIZE=address build these are what a memory error shows);
#   - the checkpoint folder holds no temporary file;
#   - `--resume auto` to the last step gives a final checkpoint whose
#     parameters and AdamW moments equal, bit for bit (h5diff), those of the
#     same run never interrupted.
#   signal_stress_test.sh <performer-data> <performer-train> <trials> <seed> <mpiexec> [flags...]
set -euo pipefail
data_tool=$1; train=$2; trials=$3; seed=$4; shift 4
mpiexec=("$@")
command -v h5diff > /dev/null || { echo "signal_stress_test: h5diff (hdf5-tools) is missing"; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/pf-signals-XXXXXX")
[ -n "${PF_SIGNALS_KEEP:-}" ] && echo "signal_stress_test: keeping $dir" || trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
RANDOM=$seed
# ASan's report ends the process with status 86, UBSan's is made fatal too;
# both write to the run's log.
export ASAN_OPTIONS=${ASAN_OPTIONS:-exitcode=86:detect_leaks=0:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:exitcode=87:print_stacktrace=1}

"$data_tool" prepare --output "$dir/plain.h5" --val-fraction 0.1 /usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz \
  > /dev/null
python3 "$repo/launch/studies/synthetic_families.py" "$dir/fam.fasta" --families 120 --members 4 --min 20 --max 60 \
  > /dev/null
"$data_tool" prepare --output "$dir/fam.h5" --cluster-identity 0.5 --val-fraction 0.1 "$dir/fam.fasta" > /dev/null

steps=24
common=(--set model.layers=2 --set model.heads=2 --set model.features=16
        --set data.batch_size=2 --set train.eval_interval=0 --set train.eval_batches=1 --set train.log_interval=1
        --set checkpoint.interval=5 --set checkpoint.keep=2 --set train.steps=$steps)
# name ranks environment --set...
layouts=(
  "family_window 2 - data.files=[\"$dir/fam.h5\"] data.mode=\"family\" data.sample_length=1024 model.width=64 model.ffn=128 model.window=32 parallel.sp=2"
  "packed 4 OMP_NUM_THREADS=2 data.files=[\"$dir/plain.h5\"] data.mode=\"packed\" data.sample_length=128 model.width=32 model.ffn=64 parallel.sp=2"
  "concat 2 PF_CPU_STREAMS=async+jitter=2 data.files=[\"$dir/plain.h5\"] data.mode=\"concat\" data.sample_length=128 model.width=32 model.ffn=64 parallel.sp=2"
  "concat_sp4 4 PF_CPU_STREAMS=async+jitter=4 data.files=[\"$dir/plain.h5\"] data.mode=\"concat\" data.sample_length=128 model.width=32 model.ffn=64 parallel.sp=4"
)

# run <out folder> <ranks> <env> <log> [--set ...]: the run in the background, its pid in $run_pid.
run() {
  local out=$1 ranks=$2 env=$3 log=$4; shift 4
  local envs=(-x ASAN_OPTIONS -x UBSAN_OPTIONS)
  [ "$env" != "-" ] && envs+=(-x "$env")
  [[ $env == OMP_NUM_THREADS=* ]] || envs+=(-x OMP_NUM_THREADS=1)
  "${mpiexec[@]}" -n "$ranks" "${envs[@]}" "$train" "${common[@]}" "$@" --set "checkpoint.dir=\"$out/ck\"" \
    --set "train.metrics=\"$out/m.jsonl\"" > "$log" 2>&1 &
  run_pid=$!
}

# clean <log>: no sanitizer report, no crash message.
clean() {
  if grep -qE "AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|Segmentation fault|corrupted|double free|free\(\): |malloc\(\)|Aborted|signal 11|signal 6" "$1"; then
    echo "--- $1"; grep -nE -A30 "AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|Segmentation|corrupted|double free|free\(\): |malloc\(\)|Aborted|signal 11|signal 6" "$1" | head -80
    return 1
  fi
}

same_state() {  # same_state <a.h5> <b.h5>: /params and /optimizer equal bit for bit
  h5diff "$1" "$2" /params /params > "$dir/diff" 2>&1 && h5diff "$1" "$2" /optimizer /optimizer >> "$dir/diff" 2>&1
}

declare -A reference reference_seconds
for layout in "${layouts[@]}"; do
  read -r name ranks env sets <<< "$layout"
  read -r -a sets <<< "$sets"
  args=(); for s in "${sets[@]}"; do args+=(--set "$s"); done
  mkdir -p "$dir/ref-$name"
  start=$SECONDS
  run "$dir/ref-$name" "$ranks" "$env" "$dir/ref-$name/log" "${args[@]}"
  rc=0; wait "$run_pid" || rc=$?
  clean "$dir/ref-$name/log" || { echo "FAIL: the uninterrupted $name run shows a memory error"; exit 1; }
  [ "$rc" -eq 0 ] || { tail -20 "$dir/ref-$name/log"; echo "FAIL: the uninterrupted $name run exited $rc"; exit 1; }
  reference[$name]=$(ls "$dir/ref-$name/ck"/ckpt-*.h5 | tail -1)
  reference_seconds[$name]=$((SECONDS - start + 1))
  echo "reference $name: ${reference[$name]##*/} in ${reference_seconds[$name]} s"
done

signals=(INT TERM USR1)
stopped=0
for ((t = 0; t < trials; ++t)); do
  layout=${layouts[$((t % ${#layouts[@]}))]}
  read -r name ranks env sets <<< "$layout"
  read -r -a sets <<< "$sets"
  args=(); for s in "${sets[@]}"; do args+=(--set "$s"); done
  sig=${signals[$((RANDOM % 3))]}
  whom=$([ $((RANDOM % 2)) -eq 0 ] && echo one || echo all)
  # A random instant from start-up (MPI and the data files) to about the last
  # steps (3/4 of the uninterrupted run's time, which includes its start-up).
  delay_ms=$((RANDOM % (reference_seconds[$name] * 750)))
  out="$dir/t$t"; mkdir -p "$out"
  run "$out" "$ranks" "$env" "$out/log" "${args[@]}"
  sleep "$((delay_ms / 1000)).$(printf %03d $((delay_ms % 1000)))"
  # The launcher's children are the ranks. A rank is signalled once it
  # blocks the stop signals (the first call of its main; before it, in the
  # dynamic loader, the default action would end it).
  pids=($(pgrep -P "$run_pid" || true))
  if [ ${#pids[@]} -gt 0 ]; then
    [ "$whom" = one ] && pids=("${pids[$((RANDOM % ${#pids[@]}))]}")
    for p in "${pids[@]}"; do
      for ((w = 0; w < 200; ++w)); do
        blocked=$(sed -n 's/^SigBlk:\s*//p' "/proc/$p/status" 2>/dev/null || true)
        [ -z "$blocked" ] && break  # the rank has ended
        (( (0x$blocked >> ($(kill -l "$sig") - 1)) & 1 )) && break
        sleep 0.05
      done
      kill -"$sig" "$p" 2>/dev/null || true
    done
  fi
  rc=0; wait "$run_pid" || rc=$?
  what="trial $t: $name, SIG$sig to $whom rank(s) after ${delay_ms} ms"
  clean "$out/log" || { echo "FAIL: $what: a memory error"; exit 1; }
  [ "$rc" -eq 0 ] || { tail -20 "$out/log"; echo "FAIL: $what: exit status $rc, not 0"; exit 1; }
  if ls "$out/ck" 2>/dev/null | grep -q "tmp"; then
    ls -la "$out/ck"; echo "FAIL: $what: a temporary file is left in the checkpoint folder"; exit 1
  fi
  at="finished"
  if grep -q "stop requested (signal" "$out/log"; then
    stopped=$((stopped + 1))
    at=$(sed -n 's/.*stop requested (signal \([0-9]*\)): saving a checkpoint at step \([0-9]*\).*/signal \1 at step \2/p' "$out/log")
    run "$out" "$ranks" "$env" "$out/log2" "${args[@]}" --resume auto
    rc=0; wait "$run_pid" || rc=$?
    clean "$out/log2" || { echo "FAIL: $what: a memory error in the resumed run"; exit 1; }
    [ "$rc" -eq 0 ] || { tail -20 "$out/log2"; echo "FAIL: $what: the resumed run exited $rc"; exit 1; }
  fi
  last=$(ls "$out/ck"/ckpt-*.h5 2>/dev/null | tail -1)
  [ "${last##*/}" = "${reference[$name]##*/}" ] ||
    { echo "FAIL: $what: the run ends at ${last##*/}, not ${reference[$name]##*/}"; exit 1; }
  same_state "$last" "${reference[$name]}" ||
    { head -20 "$dir/diff"; echo "FAIL: $what ($at): the resumed run differs from the uninterrupted one"; exit 1; }
  echo "$what: $at, exit 0, resumed to the uninterrupted run's state bit for bit"
  rm -rf "$out"
done
[ "$stopped" -gt 0 ] || { echo "FAIL: no trial stopped a run (every signal came after the end)"; exit 1; }
echo "PASS: $trials signals, $stopped stopped a run; no memory error, exit 0, no temporary file, bit-exact resume"
