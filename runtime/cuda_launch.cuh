// Kernel launch helpers shared by the .cu files (included only by them): the
// CUDA stream behind a Stream or an ExecContext, and grid sizes.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "runtime/cuda_check.cuh"
#include "runtime/device.h"
#include "runtime/exec.h"

namespace pf {

// The cudaStream_t behind a CUDA Stream.
inline cudaStream_t cuda_stream(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle); }
// The cudaStream_t the context's work runs on (ctx.stream).
inline cudaStream_t cuda_stream(const ExecContext& ctx) { return cuda_stream(ctx.stream); }

// ceil(a / b) for a >= 0, b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Largest grid.x a launch accepts (2^31 - 1): the default cap of grid_size.
constexpr int64_t kMaxGridX = 2147483647;

// Blocks of `threads` threads covering `n` elements: at least 1, at most `max_blocks` (grid-stride loops do the rest).
inline unsigned grid_size(int64_t n, int64_t threads, int64_t max_blocks = kMaxGridX) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(1, ceil_div(n, threads)), max_blocks));
}

}  // namespace pf
