#!/usr/bin/env bash
# The whole suite beside a CPU load: runs ctest RUNS times in an existing
# build folder while stress-ng keeps LOAD workers busy (default: twice the
# cores), and writes one line per run and failed test to OUT.
#   tests/under_load.sh [BUILD_DIR] [RUNS] [OUT]
# Needs stress-ng (Debian package stress-ng). Exit status: 0 when every run
# passed, 1 otherwise.
set -euo pipefail
build=${1:-build}
runs=${2:-3}
out=${3:-$build/under_load.csv}
load=${LOAD:-$(($(nproc) * 2))}
jobs=${JOBS:-$(nproc)}
command -v stress-ng >/dev/null || {
  echo "under_load.sh: stress-ng not found (apt-get install stress-ng)" >&2
  exit 2
}
[[ -f $build/CTestTestfile.cmake ]] || {
  echo "under_load.sh: $build is not a configured build folder" >&2
  exit 2
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
stress-ng --cpu "$load" --timeout 0 --quiet &
stress=$!
trap 'kill "$stress" 2>/dev/null; wait "$stress" 2>/dev/null || true' EXIT
echo "run,seconds,tests,failed,failed_tests" >"$out"
status=0
for run in $(seq 1 "$runs"); do
  log=$build/under_load_run$run.log
  start=$(date +%s)
  rc=0
  (cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 900) >"$log" 2>&1 || rc=$?
  seconds=$(($(date +%s) - start))
  total=$(sed -n 's/.*tests passed, [0-9]* tests failed out of \([0-9]*\).*/\1/p' "$log")
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p' "$log")
  # Only the list after "The following tests FAILED:" (the skipped GPU
  # entries have a list of their own).
  names=$(awk '/The following tests FAILED:/ {f = 1; next} f && /^[[:space:]]*[0-9]+ - / {print $3; next} f {f = 0}' \
    "$log" | paste -sd' ' -)
  echo "$run,$seconds,${total:-?},${failed:-?},$names" >>"$out"
  echo "under_load.sh: run $run of $runs: ${failed:-?} of ${total:-?} failed in ${seconds} s ${names:+($names)}"
  ((rc == 0)) || status=1
done
exit $status
