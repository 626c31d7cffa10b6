#!/usr/bin/env bash
# tests/support/signal_stack_probe.sh BUILD_DIR OUT.csv: signal_stack_probe
# (signal_stack_probe.cc) over square shapes and a width-64 layer's GEMMs at
# 4,096 tokens, for oneDNN and OpenBLAS, 2 s each on one thread; one CSV row
# per shape (docs/testing.md#stop-signals). A run that the corrupted heap
# aborts has exit 134 and no counts; its last line is glibc's message.
set -u
build=${1:?usage: signal_stack_probe.sh BUILD_DIR OUT.csv}
out=${2:?usage: signal_stack_probe.sh BUILD_DIR OUT.csv}
probe="$build/tests/signal_stack_probe"
[ -x "$probe" ] || { echo "signal_stack_probe.sh: no $probe (build the tests on x86-64)" >&2; exit 2; }
echo "backend,M,N,K,trans,exit,first_off_stack_reported,sgemm_calls,signals_sent,handler_runs_on_stack,handler_runs_off_stack,last_line" >"$out"
shapes=("64 64 64 NN" "256 256 256 NN" "512 512 512 NN" "1000 1000 1000 NN" "1024 1024 1024 NN"
        "4096 64 64 NN" "4096 192 64 NN" "4096 256 64 NN" "4096 64 192 NT" "4096 64 256 NT"
        "64 192 4096 TN" "64 256 4096 TN")
for backend in onednn openblas; do
  for shape in "${shapes[@]}"; do
    o=$(OMP_NUM_THREADS=1 "$probe" $backend $shape 2 2>&1)
    rc=$?
    first=$(grep -c '^first handler run off' <<<"$o")
    last=$(grep -v '^first' <<<"$o" | tail -1 | tr -d '"')
    counts=",,,"
    if [[ $last =~ :\ ([0-9]+)\ sgemm\ calls,\ ([0-9]+)\ signals\ sent,\ handler\ runs\ on\ the\ thread.s\ stack\ ([0-9]+),\ off\ it\ ([0-9]+) ]]; then
      counts="${BASH_REMATCH[1]},${BASH_REMATCH[2]},${BASH_REMATCH[3]},${BASH_REMATCH[4]}"
    fi
    echo "$backend,${shape// /,},$rc,$first,$counts,\"$last\"" >>"$out"
  done
done
