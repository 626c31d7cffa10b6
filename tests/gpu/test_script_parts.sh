#!/usr/bin/env bash
# Parts of the GPU script that can be checked without a GPU (ctest:
# gpu_script_parts): a failed gate step skips the steps after it; the table
# is on disk after each step, so a run stopped from outside keeps it, and
# so are the packed results (--results), within what a GPU machine hands
# back; a deadline cuts the steps' limits; --results and OUT may not lie
# inside each other; the steps' limits fit the budget; the device probe compiles (where nvcc is)
# and fails where there is no GPU; the test step fails when GPU tests were
# skipped that the machine's GPUs could run; unpack_deps.sh refuses packages
# that need a newer glibc than the machine has, naming the package, and
# otherwise keeps its libraries off LD_LIBRARY_PATH for everything but its
# wrapped tools.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() {  # check DESCRIPTION CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi
}

# Gates: step a fails, b and c are skipped; without the gate, b runs.
(
  cd "$repo" && . tests/gpu/lib.sh
  OUT="$work/gates" gpu_init unused >/dev/null
  step_a() { return 3; }
  step_b() { figure "b ran"; }
  step_c() { figure "c ran"; }
  run_steps "gates" a:5:gate b:5 c:5
) >"$work/gates.txt" 2>&1
rc=$?
check "a failed gate fails the run" [ "$rc" = 1 ]
check "the steps after a failed gate are skipped" grep -q '| b .*| skipped .*not run: a failed' "$work/gates.txt"
(
  cd "$repo" && . tests/gpu/lib.sh
  OUT="$work/nogate" gpu_init unused >/dev/null
  step_a() { return 3; }
  step_b() { figure "b ran"; }
  run_steps "no gate" a:5 b:5
) >"$work/nogate.txt" 2>&1
check "without a gate the next step runs" grep -q '| b .*| ok .*b ran' "$work/nogate.txt"

# A run stopped from outside during step b keeps a's row and names b as
# running in $OUT/summary.md; a's row was printed when a ended. Its packed
# results (RESULTS) hold a's log and the same table.
setsid bash -c '
  cd "$1" && . tests/gpu/lib.sh
  OUT="$2" gpu_init unused >/dev/null
  export RESULTS="$3"
  step_a() { figure "a ran"; echo "a log line"; }
  step_b() { sleep 120; }
  step_c() { figure "c ran"; }
  run_steps "stopped" a:5 b:150 c:5
' stopped "$repo" "$work/stopped" "$work/stopped-results" >"$work/stopped.txt" 2>&1 &
pid=$!
deadline=$((SECONDS + 60))
until grep -q '| b .*| running' "$work/stopped/summary.md" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; do
  sleep 0.1
done
# The step's timeout leads a process group of its own: stop the run's group,
# then that timeout, which passes the signal on to the step.
step_timeout=$(pgrep -P "$pid" -x timeout)
kill -TERM -- "-$pid"
wait "$pid" 2>/dev/null
[ -z "$step_timeout" ] || kill -TERM $step_timeout
check "the table on disk keeps the step that ran" grep -q '| a .*| ok .*a ran' "$work/stopped/summary.md"
check "the table on disk names the step that was running" grep -q '| b .*| running .*limit 150s' "$work/stopped/summary.md"
check "the table on disk shows the steps not reached" grep -q '| c .*| not run yet' "$work/stopped/summary.md"
check "the table was printed after the first step" grep -q '| a .*| ok .*a ran' "$work/stopped.txt"
check "the packed table names the step that was running" \
  grep -q '| b .*| running .*limit 150s' "$work/stopped-results/summary.md"
check "the pack holds the log of the step that ended" \
  bash -c "tar -xzOf '$work/stopped-results/gpu-run.tar.gz' stopped/a.log | grep -q 'a log line'"
check "the pack holds no log of the step that was running" \
  bash -c "! tar -tzf '$work/stopped-results/gpu-run.tar.gz' | grep -q 'stopped/b.log'"

check "a stopped run's results pass check_results.py" \
  python3 "$repo/tests/gpu/check_results.py" "$work/stopped-results"

# The packed results as a GPU machine hands them back: a finished run
# passes check_results.py; of a file over 1 MiB the pack keeps its first
# 256 KiB as FILE.head and its last 1 MiB as FILE.tail and left_out.txt
# says so; more files than 8 in the
# folder fail the check.
(
  cd "$repo" && . tests/gpu/lib.sh
  OUT="$work/packed" gpu_init unused >/dev/null
  export RESULTS="$work/packed-results"
  step_a() {
    figure "a ran"
    { echo "the first error"; head -c 4000000 /dev/zero; echo "the end of a long log"; } >"$OUT/big.log"
    mkdir -p "$OUT/peers-site" && : >"$OUT/peers-site/x.py"
  }
  step_b() { echo "b,1" >"$OUT/b.csv"; echo "$step_left $(readlink /proc/$$/fd/0)" >"$OUT/b.env"; }
  run_steps "packed" a:5 b:5
) >"$work/packed.txt" 2>&1
check "a finished run's pack passes check_results.py" python3 "$repo/tests/gpu/check_results.py" "$work/packed-results"
check "a step knows its seconds (step_left) and reads no stdin" grep -qx '5 /dev/null' "$work/packed/b.env"
check "the pack holds each step's CSV" bash -c "tar -tzf '$work/packed-results/gpu-run.tar.gz' | grep -qx 'packed/b.csv'"
check "a file over 1 MiB is packed as its last 1 MiB" \
  bash -c "[ \"\$(tar -xzOf '$work/packed-results/gpu-run.tar.gz' packed/big.log.tail | wc -c)\" = 1048576 ] &&
    tar -xzOf '$work/packed-results/gpu-run.tar.gz' packed/big.log.tail | tail -1 | grep -qx 'the end of a long log' &&
    ! tar -tzf '$work/packed-results/gpu-run.tar.gz' | grep -qx 'packed/big.log'"
check "and as its first 256 KiB" \
  bash -c "[ \"\$(tar -xzOf '$work/packed-results/gpu-run.tar.gz' packed/big.log.head | wc -c)\" = 262144 ] &&
    tar -xzOf '$work/packed-results/gpu-run.tar.gz' packed/big.log.head | head -1 | grep -qx 'the first error'"
check "left_out.txt says so" \
  bash -c "tar -xzOf '$work/packed-results/gpu-run.tar.gz' packed/left_out.txt | grep -q '^big.log: 4000038 bytes; its first 262144 bytes as big.log.head, its last 1048576 as big.log.tail'"
check "the peers' installed packages stay out of the pack" \
  bash -c "! tar -tzf '$work/packed-results/gpu-run.tar.gz' | grep -q 'peers-site'"
for i in 1 2 3 4 5 6 7; do : >"$work/packed-results/extra$i.txt"; done  # beside summary.md and the pack
python3 "$repo/tests/gpu/check_results.py" "$work/packed-results" >"$work/check_many.txt" 2>&1
check "9 files in the results folder fail the check" [ $? = 1 ]
check "the failure counts the files" grep -q '9 files (at most 8)' "$work/check_many.txt"

# A deadline (PF_GPU_DEADLINE_S): a step's limit is cut to the time left, and
# a step with under 5 s left is skipped, saying so.
(
  cd "$repo" && . tests/gpu/lib.sh
  OUT="$work/deadline" gpu_init unused >/dev/null
  export PF_GPU_DEADLINE_S=14
  step_a() { sleep 1; figure "a ran"; }
  step_b() { sleep 60; }
  step_c() { figure "c ran"; }
  run_steps "deadline" a:5 b:100 c:5
) >"$work/deadline.txt" 2>&1
check "a deadline cuts the limit of the step that would pass it" grep -q '| b .*| TIMEOUT .*| [5-9]s ' "$work/deadline.txt"
check "a step with no time left is skipped, saying so" \
  grep -q "| c .*| skipped .*not run: no time left of the call's 14s" "$work/deadline/summary.md"

# --results inside OUT, or OUT inside --results, is refused before anything runs.
OUT="$work/logs" "$repo/tests/gpu/run.sh" --dry-run --results "$work/logs/r" >"$work/inside1.txt" 2>&1
check "--results inside OUT is refused" [ $? = 2 ]
check "the refusal says why" grep -q 'is inside OUT=' "$work/inside1.txt"
OUT="$work/r2/logs" "$repo/tests/gpu/run.sh" --dry-run --results "$work/r2" >"$work/inside2.txt" 2>&1
check "OUT inside --results is refused" [ $? = 2 ]
check "that refusal says why" grep -q 'is inside --results' "$work/inside2.txt"

# Each step runs in a shell of its own that sees only the functions
# run_steps exports: every function of lib.sh and deps.sh but the main
# shell's own is visible there, and every function of run.sh carries a
# prefix run_steps exports (step_, bench_, deps_, cuda_). A helper outside
# both would fail on the GPU only, in the step that calls it.
(
  cd "$repo" && . tests/gpu/lib.sh
  OUT="$work/exports" gpu_init unused >/dev/null
  step_list() { declare -F | awk '{print $3}' >"$OUT/visible.txt"; }
  run_steps "exports" list:5
) >"$work/exports.txt" 2>&1
main_shell_only="check_limits gpu_absolute gpu_init pack_results run_steps summary_table"
unexported=$(grep -ohE '^[a-z_0-9]+\(\)' "$repo/tests/gpu/lib.sh" "$repo/tests/gpu/deps.sh" | tr -d '()' |
  while read -r f; do
    case " $main_shell_only " in *" $f "*) continue ;; esac
    grep -qx "$f" "$work/exports/visible.txt" || echo "$f"
  done)
check "every helper of lib.sh and deps.sh is visible in a step's shell (missing: ${unexported:-none})" \
  test -s "$work/exports/visible.txt" -a -z "$unexported"
unprefixed=$(grep -ohE '^[a-z_0-9]+\(\)' "$repo/tests/gpu/run.sh" | tr -d '()' | grep -vE '^(step|bench|deps|cuda)_' || true)
check "every function of run.sh has an exported prefix (not: ${unprefixed:-none})" test -z "$unprefixed"

# Limits: the call fits the 570 s budget (the remote machine's command runs at
# most 600 s); a list over it is refused.
"$repo/tests/gpu/run.sh" --limits >"$work/limits.txt" 2>&1
rc=$?
check "run.sh --limits passes" [ "$rc" = 0 ]
sum=$(sed -n 's/^sum of the limits: \([0-9]*\) s.*/\1/p' "$work/limits.txt")
check "the sum of the call's limits (${sum:-none} s) is at most 570 s" [ "${sum:-999}" -le 570 ]
(cd "$repo" && . tests/gpu/lib.sh && check_limits 570 a:400 b:171) >/dev/null
check "limits over the budget are refused" [ $? = 1 ]

# The device probe, compiled as the preflight compiles it. Without a GPU
# it must fail and say why; with one it must pass.
nvcc=$(. "$repo/tests/gpu/deps.sh" && find_nvcc)
if [ -z "$nvcc" ]; then
  echo "skipped: no nvcc, so the device probe cannot be compiled here"
else
  (cd "$repo" && . tests/gpu/lib.sh && build_device_probe "$nvcc" "$work/device_probe" native) >"$work/probe_build.txt" 2>&1
  check "the device probe compiles with $nvcc" [ -x "$work/device_probe" ]
  "$work/device_probe" >"$work/probe.txt" 2>&1
  rc=$?
  check "the probe prints the runtime's CUDA version" grep -q '^device probe: runtime (toolkit): CUDA [0-9]' "$work/probe.txt"
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    check "with a GPU the probe passes" [ "$rc" = 0 ]
    check "with a GPU the probe reads back what its kernel wrote" grep -q '^device probe: ok: a kernel wrote' "$work/probe.txt"
  else
    check "without a GPU the probe fails" [ "$rc" = 1 ]
    check "without a GPU the probe says why" grep -q '^device probe: FAILED: ' "$work/probe.txt"
  fi
fi

# The test step's skip rule on made-up ctest outputs of the gpu entries.
gpu_entries="test_posops_gpu test_column_sums_gpu test_feature_map_gpu test_linear_attention_gpu
  test_softmax_attention_gpu test_favor_attention_gpu test_model_gpu test_comm_nccl.np1 test_comm_nccl.np2
  test_comm_nccl.np3 test_comm_nccl.np4 test_comm_staged_gpu.np1 test_comm_staged_gpu.np2
  test_comm_staged_gpu.np3 test_comm_staged_gpu.np4"
ctest_output() {  # ctest_output SKIPPED_REGEX: ctest's result lines, skipped where the name matches
  local n=0 name
  echo "Test project /build"
  for name in $gpu_entries; do
    n=$((n + 1))
    echo "    Start $n: $name"
    if [[ "$name" =~ $1 ]]; then
      printf '%d/15 Test #%d: %s ....................***Skipped   0.41 sec\n' "$n" "$n" "$name"
    else
      printf '%d/15 Test #%d: %s ....................   Passed    2.03 sec\n' "$n" "$n" "$name"
    fi
  done
}
skips() { python3 "$repo/tests/gpu/check_gpu_skips.py" "$@"; }
ctest_output '.' >"$work/all_skipped.txt"
ctest_output '^test_comm_nccl\.np[234]$' >"$work/nccl_skipped.txt"
ctest_output '^test_comm_nccl\.np[1234]$' >"$work/nccl1_skipped.txt"
: >"$work/no_output.txt"
skips "$work/all_skipped.txt" 1 >"$work/skips1.txt"
check "every gpu entry skipped on one GPU fails" [ $? = 1 ]
check "the failure names the skipped entries" grep -q 'skipped with 1 GPU(s) enough to run them: .*test_model_gpu' "$work/skips1.txt"
skips "$work/nccl_skipped.txt" 1 >"$work/skips2.txt"
check "only NCCL's 2-4 rank entries skipped on one GPU passes" [ $? = 0 ]
check "the pass names the allowed skips" \
  grep -q '12 of 15 gpu entries passed, 3 skipped (needing more than 1 GPU(s): test_comm_nccl.np2, test_comm_nccl.np3, test_comm_nccl.np4)' "$work/skips2.txt"
skips "$work/nccl_skipped.txt" 4 >/dev/null
check "NCCL's 2-4 rank entries skipped on four GPUs fails" [ $? = 1 ]
skips "$work/nccl1_skipped.txt" 1 >/dev/null
check "NCCL's one-rank entry skipped on one GPU fails" [ $? = 1 ]
skips "$work/no_output.txt" 1 >/dev/null
check "an output without results fails" [ $? = 1 ]
skips "$work/all_skipped.txt" 0 >/dev/null
check "without a GPU (the dry run) every entry may skip" [ $? = 0 ]

# unpack_deps.sh on two made-up packages. NCCL_ROOT names a made-up NCCL,
# so that the machine's own NCCL, or its lack, does not decide the checks.
mkdir -p "$work/nccl/include" "$work/nccl/lib"
printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 99\n#define NCCL_PATCH 0\n' >"$work/nccl/include/nccl.h"
: >"$work/nccl/lib/libnccl.so.2"
export NCCL_ROOT="$work/nccl"
make_deb() {  # make_deb NAME GLIBC_NEEDED|none FOLDER: a package with a fake mpiexec and patchelf
  local d="$work/pkg-$1" depends="Depends: libc6 (>= $2)"
  [ "$2" = none ] && depends="Depends: made-up-other"
  mkdir -p "$d/DEBIAN" "$d/usr/bin" "$d/usr/lib/x86_64-linux-gnu"
  cat >"$d/DEBIAN/control" <<CONTROL
Package: $1
Version: 1.0
Architecture: amd64
Maintainer: test <test@example.invalid>
$depends
Description: made-up package for the unpack_deps test
CONTROL
  printf '#!/bin/sh\necho "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"\n' >"$d/usr/bin/mpiexec.openmpi"
  printf '#!/bin/sh\nexit 1\n' >"$d/usr/bin/patchelf"  # "no run path" for every file
  chmod +x "$d/usr/bin/mpiexec.openmpi" "$d/usr/bin/patchelf"
  dpkg-deb --build --root-owner-group "$d" "$3/$1.deb" >/dev/null
}
have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
mkdir -p "$work/new" "$work/old"
make_deb fakempi-new 99.0 "$work/new"
PF_DEPS_FORCE=1 "$repo/tests/gpu/unpack_deps.sh" "$work/new" "$work/prefix-new" "$work/new.env" >"$work/new.txt" 2>&1
rc=$?
check "a package needing glibc 99.0 is refused" [ "$rc" = 1 ]
check "the refusal names the package and both versions" \
  grep -q "glibc $have is older than the 99.0 that fakempi-new.deb needs" "$work/new.txt"
check "nothing is unpacked after a refusal" [ ! -e "$work/prefix-new" ]

make_deb fakempi-old 2.2.5 "$work/old"
make_deb fakeheaders none "$work/old"  # no libc6 dependency at all (header-only packages)
PF_DEPS_FORCE=1 "$repo/tests/gpu/unpack_deps.sh" "$work/old" "$work/prefix" "$work/old.env" >"$work/old.txt" 2>&1
rc=$?
check "a package needing glibc 2.2.5 is unpacked" [ "$rc" = 0 ]
check "the environment sets no LD_LIBRARY_PATH" bash -c "! grep -q LD_LIBRARY_PATH '$work/old.env'"
got=$(env -u LD_LIBRARY_PATH bash -c ". '$work/old.env'; mpiexec" 2>&1)
check "the wrapped mpiexec runs with the prefix's libraries" \
  [ "$got" = "LD_LIBRARY_PATH=$work/prefix/usr/lib/x86_64-linux-gnu:$work/prefix/usr/lib/x86_64-linux-gnu/openblas-pthread:$work/prefix/usr/lib/x86_64-linux-gnu/hdf5/serial/lib:$work/prefix/usr/lib/x86_64-linux-gnu/openmpi/lib" ]
got=$(env -u LD_LIBRARY_PATH bash -c ". '$work/old.env'; echo \"\${LD_LIBRARY_PATH:-unset}\"")
check "other programs see no LD_LIBRARY_PATH" [ "$got" = unset ]
check "the build gets the prefix as its RPATH" grep -q 'CMAKE_BUILD_RPATH=.*prefix/usr/lib/x86_64-linux-gnu;' "$work/old.env"

[ "$fail" = 0 ] && echo "gpu_script_parts: all checks passed"
exit "$fail"
