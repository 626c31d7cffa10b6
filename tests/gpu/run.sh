#!/usr/bin/env bash
# The call for a machine with one NVIDIA GPU, as one command of at most
# 10 minutes: it builds, proves the CUDA path of the whole trainer, and
# times our kernels and training step beside the GPU peers, the most
# informative steps first. It prints a table after each step. Each step runs
# under its own time limit (their sum is at most 570 s, see `steps` below)
# and logs to $OUT/STEP.log; a step that fails or runs out of time is a row
# of the table, never the end of the script. With --results DIR the run so
# far is packed into DIR after each step as at most three files (lib.sh,
# pack_results), so that a call stopped from outside keeps every step that
# ended.
#
#   tests/gpu/run.sh [--results DIR] [--all]   on the GPU machine (CUDA build
#                               for its GPU); --all adds the steps that the
#                               10-minute call leaves out (below)
#   tests/gpu/run.sh --dry-run [--results DIR] [--all]   every step with the
#                               CPU backend in an existing build: the
#                               script's paths, limits, table and packed
#                               results, tested without a GPU (ctest:
#                               gpu_script_dry_run runs it with --all)
#   tests/gpu/run.sh --limits   each step's limit and the sum; fails when the
#                               call's sum is over its 570 s budget
#
# Steps, most informative first (docs/testing.md#the-gpu-script says what
# each proves); a failed preflight, deps or build skips the rest:
#   preflight   glibc, the GPU (name, memory, compute mode, driver), nvcc,
#               the device probe (a kernel compiled by nvcc must run here; the
#               driver's CUDA version beside the toolkit's), NCCL's location
#               and version, free disk, the build's dependencies; stops the
#               run at once when one of them makes it pointless
#   deps        the build's packages and NCCL from $PF_GPU_DEPS
#               (tests/gpu/pack_deps.sh) unpacked into a private prefix, when
#               the machine lacks them
#   build       CMake, all cores, CUDA for the native architecture; only the
#               tools and the binaries of the ctest entries labelled gpu
#   gpu_tests   ctest -L gpu (each entry under its own short TIMEOUT): every
#               CUDA kernel against its float64 reference, the column sums
#               against their emulated order, the whole model and 30 training
#               steps against the CPU, NCCL on one rank, the staged
#               communicator with 1-4 ranks on the GPU; fails when an entry
#               was skipped that this machine's GPUs could run
#               (tests/gpu/check_gpu_skips.py: only NCCL's multi-rank entries
#               may skip on one GPU)
#   kernels     FAVOR+ (fp32, TF32, bf16, and their variants), exact softmax
#               (fp32, TF32, bf16) and a 256-key window (fp32, bf16) forward
#               + backward at n = 4k..64k, with each row's peak bytes, and
#               the GPU's sgemm peak in the same run
#   profile     Nsight Compute (ncu --clock-control none) on the causal
#               FAVOR+ forward and backward kernels (TF32) and the bf16
#               softmax forward and key-gradient kernels at n = 16,384:
#               speed of light, occupancy, launch, warp-state, compute and
#               memory sections, in $OUT/profile.ncu-rep and the log
#   peers       the GPU peers at n = 4k..128k (launch/bench/peers/gpu_attention.py:
#               SDPA's flash backend, flash-linear-attention's chunked
#               kernel, performer-pytorch; their wheels from $PF_GPU_WHEELS)
#               joined with the kernels step's CSV, the crossover against SDPA
#   train_peers the paper preset's causal training step at n = 4k..64k in
#               plain PyTorch with SDPA (gpu_train_step.py, bf16 and fp32)
#               and in our trainer (softmax, FAVOR+, FAVOR+ beside a
#               256-key window; fp32 and bf16), one CSV, the crossover
#   mission     4 ranks share the GPU (staged communicator), each capped at
#               16 GiB, and train one causal 1,048,576-token sample of the
#               paper preset with activation checkpointing (sp = 4), in fp32
#               and in bf16: each rank's planned bytes, tracked peak and
#               device pool high-water mark, and the step time
#   sanitize    compute-sanitizer: memcheck (out-of-bounds and misaligned
#               accesses, global and shared) over the fused FAVOR+ test and
#               the tensor-core softmax backward test, racecheck (shared
#               memory hazards) over the latter and the mma probe test
#   packed      packed mode across ranks: sp = 2 on the GPU against the CPU,
#               without and with a local window (halo rows); packed against
#               concat step time
# With --all, then (each but train_peers_more ran on an H200 before, see
# docs/results/gpu.md):
#   staged_sp   performer-train with sp = 1, 2, 3, 4 ranks sharing the GPU
#               (staged communicator): the losses of 8 steps must agree (1e-4)
#   mission_sp1 the mission's sample on one rank without a cap (sp = 1)
#   train_f32   the paper preset at its longest local length under a 16 GiB
#               cap: planned and measured peak memory, one real step
#   train_bf16  train_f32 with model.dtype = "bf16"
#   reductions  the backward's column sums (bias, LayerNorm, embedding) at the
#               longest local length, GB/s against a device copy
#   train_peers_more  train_peers for the small preset at 4k..128k and for
#               the paper preset at 128k
# Environment: OUT (default out/gpu; relative paths are under the repository;
# the GPU machine's own results folder is --results, not OUT),
# BUILD_DIR (default build-gpu; for --dry-run, the existing build to use),
# JOBS (default: all cores), PF_GPU_DEPS (default .gpu-deps), PF_GPU_WHEELS
# (default .whl: the peers' wheels, launch/bench/peers/gpu_wheels.sh).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
. tests/gpu/lib.sh

# NAME:LIMIT[:gate], each limit in seconds on the GPU machine, beside what it
# rests on: the times of the runs on a GPU (one H200, 16 cores; the tables
# of docs/results/gpu.md) with room for a slower card or machine. The remote
# machine takes one command of at most 600 s (and 15 minutes of machine
# time with its start), so the call's limits add up to at most 570 s; a
# call stopped at 600 s loses only the step running then (--results).
budget=570
steps=(
  preflight:10:gate  # 3 s on the H200 (probe compiled by nvcc and run, nvidia-smi)
  deps:20:gate       # 11-14 s (135 packages unpacked and patched); <1 s when installed
  build:130:gate     # 84 s from clean for sm_90 on 16 cores as one target before the resident FAVOR+ kernels;
                     # in one file with the rest of the op they took 121-135 s of nvcc on one core of the
                     # 2-core VM (AMD EPYC), so they are now two files of their own (46, 67 and 67 s side by side there)
  gpu_tests:60       # 34-41 s for 15 entries, 4 at a time, each entry's TIMEOUT 45 s (longest: test_column_sums_gpu
                     # 28 s with 4 threads; test_favor_attention_gpu 8.6 s before the resident kernels' tests)
  kernels:50         # 17 s for 4,096, 16,384 and 65,536 (softmax to 16,384), one repetition, three FAVOR+
                     # variants and fp32 softmax; now seven FAVOR+ and five softmax rows; rows kept as they come
  profile:25         # not yet run on a GPU: ncu on 8 launches (4 kernels) at n = 16,384
  peers:60           # not yet run on a GPU: three peers, each stopped after 16 s (gpu_attention.py --budget-s),
                     # Triton's compile of flash-linear-attention's kernels inside its first case
  train_peers:80     # not yet run on a GPU: two PyTorch processes (bf16, fp32; 3 lengths each) and 16 of ours (1 warm-up
                     # and 2 timed steps each; softmax to 16,384 only)
  mission:70         # one fp32 step at sp = 4 took 28.7 s with the tile kernels (attention 23.9 s: 4 ranks share
                     # the GPU); now an fp32 and a bf16 step, no warm-up, and 8 processes' CUDA start
  sanitize:45        # not yet run on a GPU: four small test binaries under compute-sanitizer, 9 s each at most
  packed:20          # 8-9 s (4 processes of 8 tiny steps, 2 x 4 small-preset steps); now 4 more processes (a window)
)
# --all: the steps that have run on a GPU and whose code the kernels' work
# since has not changed, and the training peers beyond the call's lengths,
# after the call's steps (no budget: a machine of your own).
more_steps=(
  staged_sp:15       # 6 s (10 processes of 8 tiny steps)
  mission_sp1:45     # one step of 19.9 s on one rank without a cap, with the tile kernels
  train_f32:15       # 7 s (the planner's search, the CUDA start and one step of 5.5 s)
  train_bf16:10      # 3-4 s
  reductions:10      # 7 s (inputs drawn on 16 cores, 5.8 GB uploaded, the CUDA start)
  train_peers_more:240  # not yet run on a GPU: train_peers for the small preset at 4k..128k and the paper
                        # preset at 128k (PyTorch's fp32 SDPA at 128k may run out of memory: an "oom" row)
)

dry=0 all=0 RESULTS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --all) all=1 ;;
    --results)
      [ $# -ge 2 ] || { echo "--results needs a folder" >&2; exit 2; }
      RESULTS=$2
      shift ;;
    --limits) check_limits "$budget" "${steps[@]}"; exit ;;
    *) echo "usage: tests/gpu/run.sh [--dry-run] [--all] [--results DIR] | --limits" >&2; exit 2 ;;
  esac
  shift
done
check_limits "$budget" "${steps[@]}" >/dev/null || {
  echo "the steps' limits add up to more than the $budget s budget: tests/gpu/run.sh --limits" >&2
  exit 2
}
# The remote GPU machine stops the command at 600 s: no step runs past 590 s
# (run_steps; PF_GPU_DEADLINE_S sets another end for a shorter call), so
# the last pack has every step that ended. --all is for a machine of your own.
if [ "$all" = 1 ]; then
  steps+=("${more_steps[@]}")
else
  export PF_GPU_DEADLINE_S=${PF_GPU_DEADLINE_S:-590}
fi

# The GPU machine's call names its results folder in OUT too
# (`tests/gpu/run.sh --results "$OUT"`): the logs then go to the default.
[ -z "$RESULTS" ] || RESULTS=$(gpu_absolute "$RESULTS")
if [ -n "$RESULTS" ] && [ -n "${OUT:-}" ] && [ "$(gpu_absolute "$OUT")" = "$RESULTS" ]; then
  unset OUT
fi
gpu_init out/gpu
# A folder of the repository's out/ holds only this script's logs: a
# machine kept warm from an earlier call must not pack that call's files.
case "$OUT/" in "$repo"/out/?*/) rm -rf "$OUT" && mkdir -p "$OUT" && : >"$PF_DEPS_ENV" ;; esac
if [ -n "$RESULTS" ]; then
  case "$RESULTS/" in
    "$OUT"/*) echo "--results $RESULTS is inside OUT=$OUT: the packed files would pack themselves" >&2; exit 2 ;;
  esac
  case "$OUT/" in
    "$RESULTS"/*) echo "OUT=$OUT is inside --results $RESULTS: the logs would come back unpacked" >&2; exit 2 ;;
  esac
  mkdir -p "$RESULTS" || { echo "cannot create $RESULTS" >&2; exit 2; }
  rm -f "$RESULTS/summary.md" "$RESULTS/gpu-run.tar.gz" "$RESULTS/profile.ncu-rep"
fi
export RESULTS OUT
if [ "$dry" = 1 ] && [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  echo "--dry-run uses an existing build: BUILD_DIR=$BUILD_DIR has no CMakeCache.txt" >&2
  exit 2
fi
export dry

if [ "$dry" = 1 ]; then
  step_build() {
    local targets
    targets=$(gpu_targets) || return 1
    echo "pf_gpu_binaries: $targets"
    cmake --build "$BUILD_DIR" -j "$JOBS" --target pf_gpu_binaries || return 1
    figure "existing build ($(echo $targets | wc -w) targets), CUDA backend" \
      "$(awk -F= '/^PF_HAVE_CUDA|^PF_CUDA:/{print $2; exit}' "$BUILD_DIR/CMakeCache.txt")"
  }
fi

step_gpu_tests() {
  . "$PF_DEPS_ENV"
  # Each gpu entry has its own TIMEOUT (PF_GPU_TEST_TIMEOUT, tests/CMakeLists.txt),
  # so one hung test cannot take the step's whole limit.
  python3 tests/gpu/check_timeouts.py "$BUILD_DIR" "$step_limit" || return 1
  ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure -j 4 2>&1 | tee "$OUT/ctest_gpu.txt"
  local rc=${PIPESTATUS[0]}
  # A skipped entry passes ctest; it passes this step only when it needs more
  # GPUs than the device probe counted (the dry run: none, so all may skip).
  local gpus=0
  if [ "$dry" != 1 ]; then
    gpus=$(sed -n 's/^device probe: \([0-9]*\) device(s).*/\1/p' "$OUT/device_probe.txt" 2>/dev/null)
    [ "${gpus:-0}" -ge 1 ] || { figure "the device probe counted no GPU ($OUT/device_probe.txt)"; return 1; }
  fi
  python3 tests/gpu/check_gpu_skips.py "$OUT/ctest_gpu.txt" "$gpus" | tee "$OUT/gpu_skips.txt"
  local skips_rc=${PIPESTATUS[0]}
  figure "$(sed 's/^check_gpu_skips: //' "$OUT/gpu_skips.txt")"
  [ "$rc" = 0 ] && [ "$skips_rc" = 0 ]
}

step_staged_sp() {
  . "$PF_DEPS_ENV"
  # On the CPU the sequence layouts agree to rounding (1e-5 over 8 steps);
  # cuBLAS may pick other kernels for other row counts, and Adam's first
  # steps are near sign-sized, so CUDA is allowed 1e-4.
  local w="$OUT/staged" backend=cuda tol=1e-4
  [ "$dry" = 1 ] && backend=cpu tol=1e-5
  make_tiny_run "$w" "$backend" staged || return 1
  tiny_sp_losses "$w" "$tol" 1 2 3 4 || { figure "$(tail -1 "$w/compare.txt" 2>/dev/null)"; return 1; }
  figure "sp 2,3,4 vs 1 on $backend: $(tail -1 "$w/compare.txt")"
}

# Packed mode across ranks: the tiny run with whole proteins per sample
# (data.mode = "packed"; at sp = 2 the rank edge cuts proteins, so the
# segmented state combine of the scans runs on the device) trains 8 steps on
# the GPU and on the CPU, both through the staged communicator; the losses
# must agree to 1e-3 (cuBLAS and the CPU's BLAS round differently). Then
# performer-bench train reads the same file as packed and as concat samples
# of 4,096 tokens (1,024 in the dry run) and times 3 steps of each.
step_packed() {
  . "$PF_DEPS_ENV"
  local w="$OUT/packed" backend=cuda n=4096 b
  [ "$dry" = 1 ] && backend=cpu n=1024
  make_tiny_run "$w" cpu staged || return 1
  local -A on=([ref]=cpu [dev]=$backend)
  for b in ref dev; do
    mpi -n 2 "$(bin performer-train)" --config "$w/tiny.toml" --set parallel.sp=2 --set 'data.mode="packed"' \
      --set "device.backend=\"${on[$b]}\"" --set "train.metrics=\"$w/sp2_$b.jsonl\"" >"$w/sp2_$b.log" 2>&1 ||
      { tail -20 "$w/sp2_$b.log"; return 1; }
  done
  python3 tests/gpu/compare_losses.py 1e-3 "$w/sp2_ref.jsonl" "$w/sp2_dev.jsonl" | tee "$w/compare.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || { figure "sp 2 packed, $backend vs cpu: $(tail -1 "$w/compare.txt")"; return 1; }
  # The same with a local window of 16 beside FAVOR+: the halo rows of k, v
  # and their gradients between the two ranks (model/attention_window.cc).
  for b in ref dev; do
    mpi -n 2 "$(bin performer-train)" --config "$w/tiny.toml" --set parallel.sp=2 --set 'data.mode="packed"' \
      --set model.window=16 --set "device.backend=\"${on[$b]}\"" --set "train.metrics=\"$w/win_$b.jsonl\"" \
      >"$w/win_$b.log" 2>&1 || { tail -20 "$w/win_$b.log"; return 1; }
  done
  python3 tests/gpu/compare_losses.py 1e-3 "$w/win_ref.jsonl" "$w/win_dev.jsonl" | tee "$w/compare_window.txt"
  [ "${PIPESTATUS[0]}" = 0 ] ||
    { figure "sp 2 packed with a window of 16, $backend vs cpu: $(tail -1 "$w/compare_window.txt")"; return 1; }
  for b in concat packed; do
    "$(bin performer-bench)" train --preset small --data "$w/synthetic.h5" --length "$n" --steps 3 \
      --set "device.backend=\"$backend\"" --set "data.mode=\"$b\"" --csv "$w/bench_$b.csv" || return 1
    cat "$w/bench_$b.csv"
  done
  figure "sp 2 packed, $backend vs cpu: $(tail -1 "$w/compare.txt"); with a window of 16:" \
    "$(tail -1 "$w/compare_window.txt"); step time packed / concat at $n tokens:" \
    "$(python3 tests/gpu/summarize_csv.py ratio "$w/bench_packed.csv" "$w/bench_concat.csv")"
}

# The paper preset at the longest local length under a 16 GiB cap (the small
# one under 256 MiB in the dry run), activation checkpointing on.
bench_train() {
  . "$PF_DEPS_ENV"
  local csv="$OUT/$step_name.csv" preset=paper cap=16GiB
  [ "$dry" = 1 ] && preset=small cap=256MiB
  "$(bin performer-bench)" train --preset "$preset" --longest --confirm --cap "$cap" --checkpointing on "$@" \
    --csv "$csv" || return 1
  cat "$csv"
  figure "$(python3 tests/gpu/summarize_csv.py train "$csv")"
}
step_train_f32() { bench_train; }
step_train_bf16() { bench_train --set 'model.dtype="bf16"'; }

# The mission: 4 ranks on the one GPU through the staged communicator, each
# under a 16 GiB cap, train one causal sample of 4 x 262,144 = 1,048,576
# tokens (paper preset, activation checkpointing, sp = 4), in fp32 and then
# in bf16 (model.dtype). One timed step each, without a warm-up (an fp32
# step took 28.7 s on the H200 with the tile kernels: the first step's
# library start is a small part of it). mission_sp1 (--all): one rank with
# no cap trains the same length. The dry run: 4 x 1,024 tokens under a
# 1 GiB cap on the CPU.
bench_mission() {  # bench_mission CSV RANKS PERFORMER-BENCH-ARGS...
  local csv=$1 ranks=$2 n=262144 backend=cuda
  shift 2
  [ "$dry" = 1 ] && n=1024 backend=cpu
  local run=(train --preset paper --steps 1 --warmup 0 --set model.checkpoint_activations=true
             --set "device.backend=\"$backend\"" --length $((4 * n / ranks)) --csv "$csv")
  if [ "$ranks" = 1 ]; then
    "$(bin performer-bench)" "${run[@]}" --sp 1 "$@"
  else
    mpi -n "$ranks" "$(bin performer-bench)" "${run[@]}" --sp "$ranks" --set 'device.comm="staged"' "$@"
  fi
}
step_mission() {
  . "$PF_DEPS_ENV"
  local cap=16GiB
  [ "$dry" = 1 ] && cap=1GiB
  bench_mission "$OUT/mission_sp4.csv" 4 --cap "$cap" || return 1
  bench_mission "$OUT/mission_sp4_bf16.csv" 4 --cap "$cap" --set 'model.dtype="bf16"' || return 1
  cat "$OUT/mission_sp4.csv" "$OUT/mission_sp4_bf16.csv"
  figure "fp32: $(python3 tests/gpu/summarize_csv.py step "$OUT/mission_sp4.csv"); bf16:" \
    "$(python3 tests/gpu/summarize_csv.py step "$OUT/mission_sp4_bf16.csv")"
}
step_mission_sp1() {
  . "$PF_DEPS_ENV"
  bench_mission "$OUT/mission_sp1.csv" 1 || return 1
  cat "$OUT/mission_sp1.csv"
  figure "one rank: $(python3 tests/gpu/summarize_csv.py step "$OUT/mission_sp1.csv")"
}

step_reductions() {
  . "$PF_DEPS_ENV"
  local csv="$OUT/reductions.csv"
  if [ "$dry" = 1 ]; then
    "$(bin performer-bench)" reductions --device cpu --tokens 4096 --widths 64 --reps 1 --csv "$csv" || return 1
  else
    "$(bin performer-bench)" reductions --device cuda --csv "$csv" || return 1
  fi
  cat "$csv"
  figure "$(python3 tests/gpu/summarize_csv.py reductions "$csv")"
}

# The tool of the CUDA toolkit named $1: on PATH, beside nvcc, or in
# /usr/local/cuda/bin; nothing when there is none.
cuda_tool() {
  local nvcc
  command -v "$1" && return 0
  nvcc=$(find_nvcc)
  [ -n "$nvcc" ] && [ -x "$(dirname "$nvcc")/$1" ] && { echo "$(dirname "$nvcc")/$1"; return 0; }
  [ -x "/usr/local/cuda/bin/$1" ] && echo "/usr/local/cuda/bin/$1"
  true
}

# compute-sanitizer on small GPU tests (TOOL:BINARY:FILTER), each run under
# 9 s with its log in $OUT/sanitize/; the step fails when a tool reports an
# error or a run fails. The dry run checks that each binary lists the
# filter's tests (there is no sanitizer without a GPU).
step_sanitize() {
  . "$PF_DEPS_ENV"
  local dir="$BUILD_DIR/tests/kernels" w="$OUT/sanitize" run tool name filter log cs="" status summary=() bad=0
  local runs=(
    "memcheck:test_favor_attention_gpu:FavorAttentionGpu.MatchesReference"
    "memcheck:test_softmax_attention_gpu:SoftmaxAttentionGpu.TensorCoreBackwardIsDeterministic"
    "racecheck:test_softmax_attention_gpu:SoftmaxAttentionGpu.TensorCoreBackwardIsDeterministic"
    "racecheck:test_mma_gpu:*"
  )
  rm -rf "$w" && mkdir -p "$w" || return 1
  cs=$(cuda_tool compute-sanitizer) || return 1
  if [ "$dry" != 1 ]; then
    [ -n "$cs" ] || { figure "no compute-sanitizer on PATH or beside nvcc"; return 1; }
  fi
  for run in "${runs[@]}"; do
    IFS=: read -r tool name filter <<<"$run"
    log="$w/$tool-$name.log"
    if [ "$dry" = 1 ] && [ "$name" = test_mma_gpu ] && [ ! -e "$dir/$name" ]; then
      summary+=("$tool $name: not in a build without CUDA")
      continue
    fi
    [ -x "$dir/$name" ] || { echo "no $dir/$name"; return 1; }
    if [ "$dry" = 1 ]; then
      "$dir/$name" --gtest_list_tests --gtest_filter="$filter" >"$log" 2>&1 && grep -q '^  ' "$log" ||
        { echo "$name lists no test for $filter"; cat "$log"; return 1; }
      summary+=("$tool $name: listed")
      continue
    fi
    status=0
    timeout -k 2 9 "$cs" --tool "$tool" --error-exitcode 3 --print-limit 20 "$dir/$name" --gtest_filter="$filter" \
      >"$log" 2>&1 || status=$?
    tail -3 "$log"
    case "$status" in
      0) summary+=("$tool $name: clean") ;;
      3) summary+=("$tool $name: ERRORS ($(grep -c '^========= [A-Z]' "$log") lines)"); bad=1 ;;
      124|137) summary+=("$tool $name: over 9 s"); bad=1 ;;
      *) summary+=("$tool $name: exit $status"); bad=1 ;;
    esac
  done
  figure "$(IFS=';'; echo "${summary[*]}" | sed 's/;/; /g')"
  [ "$bad" = 0 ]
}

# Nsight Compute on the kernels that take most of the attention's time, from
# one performer-bench kernels run at n = 16,384 (causal; favor_tf32 and
# softmax_bf16 only; the warm-up and the timed call of each are profiled):
# the report in $OUT/profile.ncu-rep, the details in the log, and each
# kernel's duration, SM throughput and achieved occupancy as the figure. The
# dry run times the same rows on the CPU (ncu needs a GPU).
step_profile() {
  . "$PF_DEPS_ENV"
  local args=(kernels --sizes 16384 --reps 1 --only favor_tf32 softmax_bf16 --modes causal --device cuda) ncu
  rm -f "$OUT/profile.ncu-rep"
  ncu=$(cuda_tool ncu) || return 1
  if [ "$dry" = 1 ]; then
    "$(bin performer-bench)" kernels --device cpu --sizes 256 --heads 2 -m 32 --reps 1 --only favor softmax \
      --modes causal || return 1
    figure "dry run: the benchmark's rows on the CPU; ncu not run"
    return 0
  fi
  [ -n "$ncu" ] || { figure "no ncu on PATH or beside nvcc"; return 1; }
  "$ncu" --clock-control none --kernel-name regex:'k_causal_(forward|backward)|(forward|key_grad)_mma_kernel' \
    --launch-count 8 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --export "$OUT/profile" --force-overwrite \
    "$(bin performer-bench)" "${args[@]}" >"$OUT/profile.txt" 2>&1
  local rc=$?
  cat "$OUT/profile.txt"
  figure "$(awk '/Context [0-9]+, Stream/ {k = "?"; if (match($0, /[A-Za-z_0-9]+(<[^>]*>)?\(/)) k = substr($0, RSTART, RLENGTH - 1)}
    /^ *Duration / {d = $NF " " $(NF - 1)} /Compute \(SM\) Throughput/ {sm = $NF}
    /Achieved Occupancy/ {printf "%s %s, SM %s%%, occupancy %s%%; ", k, d, sm, $NF}' "$OUT/profile.txt")"
  return "$rc"
}

step_kernels() {
  . "$PF_DEPS_ENV"
  local csv="$OUT/kernels.csv"
  if [ "$dry" = 1 ]; then
    "$(bin performer-bench)" kernels --device cpu --sizes 256 512 --heads 2 -m 32 --reps 1 --csv "$csv" || return 1
  else
    # Rows to stdout, each flushed: a step stopped at its limit keeps them.
    "$(bin performer-bench)" kernels --device cuda --sizes 4096 16384 65536 --softmax-max 16384 --reps 1 >"$csv" ||
      return 1
  fi
  cat "$csv"
  figure "$(python3 tests/gpu/summarize_csv.py kernels "$csv")"
}

# The GPU peers beside our kernels: gpu_attention.py with the wheels of
# $PF_GPU_WHEELS installed into a private folder (the machine's own torch
# and Triton are used), then joined with the kernels step's CSV by
# gpu_table.py into attention_gpu.csv, with the table and the crossover
# against SDPA. The dry run: the CPU, n = 256 and 512 (the peers that do not
# import there are rows saying so).
step_peers() {
  local site="$OUT/peers-site" wheels="${PF_GPU_WHEELS:-$repo/.whl}" csv="$OUT/peers.csv"
  if ls "$wheels"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
      "$wheels"/*.whl || return 1
  fi
  # flash-linear-attention last: Triton compiles (and autotunes) its kernels
  # inside its first case, which a fresh cache makes the slowest.
  local args=(--device cuda --sizes 4096 16384 65536 131072 --budget-s 14 --peers sdpa,performer,fla)
  [ "$dry" = 1 ] && args=(--device cpu --sizes 256 512 --heads 2 -m 32 --reps 1)
  # The peers stop 10 s before the step's end, so that their rows so far
  # (each flushed) are joined and tabled even when one of them overruns.
  local rc=0
  PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 timeout -k 2 $((${step_left:-60} - 10)) \
    python3 launch/bench/peers/gpu_attention.py "${args[@]}" >"$csv" || rc=$?
  cat "$csv"
  case $rc in
    0) ;;
    124|137) echo "peers: gpu_attention.py stopped at $((${step_left:-60} - 10)) s; its rows so far are joined" ;;
    *) return 1 ;;
  esac
  python3 launch/bench/peers/gpu_table.py --self-test || return 1
  [ -f "$OUT/kernels.csv" ] || { figure "no kernels.csv from the kernels step to join"; return 1; }
  python3 launch/bench/peers/gpu_table.py "$OUT/kernels.csv" "$csv" --csv "$OUT/attention_gpu.csv" |
    tee "$OUT/peers_table.md"
  [ "${PIPESTATUS[0]}" = 0 ] || return 1
  local ok
  ok=$(grep -c ',ok$' "$csv" || true)
  figure "$(grep -h 'sdpa_flash' "$OUT/peers_table.md" | grep -v '^|' | tr '\n' ' ')" \
    "$ok peer rows ok of $(($(wc -l <"$csv") - 1))$([ "$rc" = 0 ] || echo ", stopped at its limit")"
  # On a GPU a run without one measured peer row measured nothing.
  [ "$dry" = 1 ] || [ "$ok" -gt 0 ] || return 1
  [ "$rc" = 0 ]
}

# The causal training step beside a PyTorch trainer of the same model with
# SDPA's flash backend, in $OUT/NAME.csv and NAME_table.md:
# gpu_train_step.py (bf16, then fp32) at every length, then our trainer at
# each length: softmax (up to SOFTMAX_MAX), FAVOR+, and FAVOR+ beside a
# WINDOW-key window, each in fp32 and bf16, one warm-up and 2 timed steps
# per process; joined by gpu_table.py --train. Every process runs under
# what is left of the step less 10 s, and none starts in its last 10 s, so
# that the join always runs: what did not fit is a line "not run" in the
# log and no row, and the step fails.
#   bench_train_peers NAME BACKEND PRESET SOFTMAX_MAX WINDOW LENGTH...
bench_train_peers() {
  local name=$1 backend=$2 preset=$3 soft_max=$4 win=$5
  shift 5
  local sizes=("$@") w="$OUT/$name" n cfg dt end=$((${step_left:-80} - 10)) cut=0 rc
  rm -rf "$w" && mkdir -p "$w" || return 1
  python3 launch/bench/peers/gpu_train_step.py --device "$backend" --preset "$preset" --sizes "${sizes[@]}" \
    --dtype bf16 --steps 2 --header >"$w/pytorch.csv" || return 1
  rc=124  # under 5 s left: not started (timeout 0 would mean no limit)
  if [ $((end - SECONDS)) -ge 5 ]; then
    rc=0
    timeout -k 2 $((end - SECONDS)) python3 launch/bench/peers/gpu_train_step.py --device "$backend" \
      --preset "$preset" --sizes "${sizes[@]}" --dtype fp32 --steps 2 >>"$w/pytorch.csv" || rc=$?
  fi
  case $rc in 0) ;; 124|137) echo "not run: PyTorch fp32 past the step's end"; cut=1 ;; *) return 1 ;; esac
  cat "$w/pytorch.csv"
  local -A attention=([ours_softmax]=softmax [ours_favor]=favor [ours_favor_w$win]=favor)
  local -A window=([ours_softmax]=0 [ours_favor]=0 [ours_favor_w$win]=$win)
  local -A dtype=([fp32]=f32 [bf16]=bf16)
  local specs=()
  for cfg in ours_softmax ours_favor "ours_favor_w$win"; do
    for dt in fp32 bf16; do specs+=("$cfg:$dt=$w/$cfg-$dt.csv"); done
  done
  for n in "${sizes[@]}"; do
    for cfg in ours_softmax ours_favor "ours_favor_w$win"; do
      [ "$cfg" = ours_softmax ] && [ "$n" -gt "$soft_max" ] && continue
      for dt in fp32 bf16; do
        if [ $((end - SECONDS)) -lt 10 ]; then
          echo "not run: $cfg $dt at n = $n (the step's time is spent)"
          cut=1
          continue
        fi
        rc=0
        timeout -k 2 $((end - SECONDS)) "$(bin performer-bench)" train --preset "$preset" --length "$n" --steps 2 \
          --warmup 1 --set "device.backend=\"$backend\"" --set "model.attention=\"${attention[$cfg]}\"" \
          --set "model.window=${window[$cfg]}" --set "model.dtype=\"${dtype[$dt]}\"" \
          --csv "$w/$cfg-$dt-$n.csv" >"$w/$cfg-$dt-$n.log" 2>&1 || rc=$?
        case $rc in
          0) ;;
          124|137) echo "not run: $cfg $dt at n = $n stopped at the step's end"; cut=1; continue ;;
          *) tail -5 "$w/$cfg-$dt-$n.log"; return 1 ;;
        esac
        # One CSV per configuration: the header once, then each length's rows.
        local skip=1
        [ -f "$w/$cfg-$dt.csv" ] && skip=2
        tail -n +"$skip" "$w/$cfg-$dt-$n.csv" >>"$w/$cfg-$dt.csv"
      done
    done
  done
  local present=()
  for spec in "${specs[@]}"; do [ -f "${spec#*=}" ] && present+=("$spec"); done
  python3 launch/bench/peers/gpu_table.py --train "$w/pytorch.csv" "${present[@]}" --csv "$OUT/$name.csv" |
    tee "$OUT/${name}_table.md"
  [ "${PIPESTATUS[0]}" = 0 ] || return 1
  figure "$(grep -h 'pytorch_sdpa' "$OUT/${name}_table.md" | grep -v '^|' | tr '\n' ' ')" \
    "$([ "$cut" = 0 ] || echo "(some runs did not fit the step: see its log)")"
  [ "$cut" = 0 ]
}

# The paper preset at 4k..64k (the call's step). The dry run: the small
# preset at 256 and 512 tokens on the CPU, a 64-key window.
step_train_peers() {
  . "$PF_DEPS_ENV"
  if [ "$dry" = 1 ]; then
    bench_train_peers train_peers cpu small 512 64 256 512
  else
    bench_train_peers train_peers cuda paper 16384 256 4096 16384 65536
  fi
}

# --all: the small preset at 4k..128k and the paper preset at 128k. The
# dry run: the small preset at 256 tokens.
step_train_peers_more() {
  . "$PF_DEPS_ENV"
  if [ "$dry" = 1 ]; then
    bench_train_peers train_peers_small cpu small 256 64 256
  else
    bench_train_peers train_peers_small cuda small 16384 256 4096 16384 65536 131072 &&
      bench_train_peers train_peers_paper_128k cuda paper 0 256 131072
  fi
}

run_steps "GPU script summary ($([ "$dry" = 1 ] && echo "dry run on the CPU" || echo CUDA))$(
  [ "$all" = 1 ] && echo ", all steps")" "${steps[@]}"
