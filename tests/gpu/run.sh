#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build with CUDA for the local GPU, run the
# GPU tests (each CUDA kernel against its float64 reference, NCCL
# communicators), the whole suite, and the training-step benchmark of the
# paper's speed-study model at 65,536 tokens under a 16 GiB cap, in fp32 and
# in bf16 mixed precision (the trainer picks the GPU by itself); print a short
# table.
#   BUILD_DIR (default build-gpu), OUT (default out/gpu)
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPF_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native > "$OUT/cmake.log" 2>&1 \
  && cmake --build "$BUILD_DIR" -j "$(nproc)" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
(cd "$BUILD_DIR" && ctest -L gpu --output-on-failure > "../$OUT/ctest_gpu.log" 2>&1); gpu_rc=$?
(cd "$BUILD_DIR" && ctest -LE slow -j 4 > "../$OUT/ctest_all.log" 2>&1); all_rc=$?
bench=$BUILD_DIR/launch/performer-bench
timeout 300 "$bench" train --preset paper --length 65536 --steps 2 --cap 16GiB --csv "$OUT/train_gpu.csv" \
  > "$OUT/train_gpu.log" 2>&1; t_rc=$?
timeout 300 "$bench" train --preset paper --length 65536 --steps 2 --cap 16GiB --set 'model.dtype="bf16"' \
  --csv "$OUT/train_gpu_bf16.csv" > "$OUT/train_gpu_bf16.log" 2>&1; b_rc=$?
echo
echo "== summary"
printf '%-28s %s\n' "gpu tests (ctest -L gpu)" "$(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -1) rc=$gpu_rc"
printf '%-28s %s\n' "whole suite" "$(grep -E 'tests passed|tests failed' "$OUT/ctest_all.log" | tail -1) rc=$all_rc"
printf '%-28s %s\n' "bench train paper 64k f32" "rc=$t_rc $(tail -1 "$OUT/train_gpu.csv" 2>/dev/null)"
printf '%-28s %s\n' "bench train paper 64k bf16" "rc=$b_rc $(tail -1 "$OUT/train_gpu_bf16.csv" 2>/dev/null)"
