#!/usr/bin/env bash
# What one GPU cannot prove: NCCL across 2-8 GPUs of one node. Run it on a
# node with several GPUs (for example inside a Slurm allocation:
# `srun -N1 --gpus=4 --exclusive tests/gpu/run_multi.sh`); it builds like
# tests/gpu/run.sh, then:
#   nccl_tests  the NCCL communicator tests (collectives, grouped exchange,
#               split, every scan algorithm) at 2, 4, ... up to G ranks, one
#               GPU per rank
#   nccl_sp     performer-train with device.comm = nccl at sp = 1, 2, 4, 8
#               (up to G): the losses of 8 steps must agree with sp = 1 to
#               a relative 1e-4 (as in run.sh's staged_sp on CUDA)
#   staged_vs_nccl  the same run at sp = G with the staged communicator: the
#               losses must agree with NCCL's
#   comm_bench  scan, allreduce and allgather latency and bandwidth over NCCL
#               at G ranks (performer-bench comm)
# and prints a table last, as run.sh does.
#   tests/gpu/run_multi.sh [G]     G: GPUs to use (default: all of the node's)
# Environment: OUT (default out/gpu-multi), BUILD_DIR (default build-gpu; an
# existing CUDA build there is reused), JOBS, PF_GPU_DEPS.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
. tests/gpu/lib.sh
gpu_init out/gpu-multi
G=${1:-$(nvidia-smi -L 2>/dev/null | wc -l)}
if ! [[ "$G" =~ ^[0-9]+$ ]] || [ "$G" -lt 2 ] || [ "$G" -gt 8 ]; then
  echo "run_multi.sh needs 2-8 GPUs (got '$G'); with one GPU use tests/gpu/run.sh" >&2
  exit 2
fi
export G

step_build_or_reuse() {
  if [ -x "$BUILD_DIR/launch/performer-train" ] && grep -q '^PF_HAVE_CUDA.*ON' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
    figure "reused the CUDA build in $BUILD_DIR"
    return 0
  fi
  step_build
}

step_nccl_tests() {
  . "$PF_DEPS_ENV"
  local np ok=0 runs=0
  for np in 2 4 8; do
    [ "$np" -le "$G" ] || continue
    runs=$((runs + 1))
    mpi -n "$np" "$BUILD_DIR/tests/comm/test_comm_nccl" 2>&1 |
      tee "$OUT/nccl_np$np.txt" | tail -3
    [ "${PIPESTATUS[0]}" = 0 ] && ! grep -q SKIPPED "$OUT/nccl_np$np.txt" && ok=$((ok + 1))
  done
  figure "$ok of $runs rank counts passed (2..$G ranks, one GPU each)"
  [ "$ok" = "$runs" ]
}

step_nccl_sp() {
  . "$PF_DEPS_ENV"
  local w="$OUT/nccl" sps=(1) sp
  for sp in 2 4 8; do [ "$sp" -le "$G" ] && sps+=("$sp"); done
  make_tiny_run "$w" cuda nccl || return 1
  tiny_sp_losses "$w" 1e-4 "${sps[@]}" || return 1
  figure "sp ${sps[*]:1} vs 1: $(tail -1 "$w/compare.txt")"
}

step_staged_vs_nccl() {
  . "$PF_DEPS_ENV"
  local w="$OUT/staged"
  make_tiny_run "$w" cuda staged || return 1
  mpi -n "$G" "$(bin performer-train)" --config "$w/tiny.toml" --set parallel.sp="$G" \
    --set "train.metrics=\"$w/sp$G.jsonl\"" >"$w/sp$G.log" 2>&1 || { tail -20 "$w/sp$G.log"; return 1; }
  python3 tests/gpu/compare_losses.py 1e-4 "$OUT/nccl/sp1.jsonl" "$w/sp$G.jsonl" | tee "$w/compare.txt"
  local rc=${PIPESTATUS[0]}
  figure "staged sp=$G vs nccl sp=1: $(tail -1 "$w/compare.txt")"
  return "$rc"
}

step_comm_bench() {
  . "$PF_DEPS_ENV"
  mpi -n "$G" "$(bin performer-bench)" comm --backend nccl --csv "$OUT/comm.csv" || return 1
  cat "$OUT/comm.csv"
  figure "$(wc -l <"$OUT/comm.csv") rows in comm.csv"
}

run_steps "multi-GPU summary ($G GPUs)" deps:60 build_or_reuse:900 nccl_tests:600 nccl_sp:300 staged_vs_nccl:300 \
  comm_bench:600
