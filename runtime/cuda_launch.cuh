// Kernel launch helpers shared by the .cu files (included only by them): the
// CUDA stream behind a Stream or an ExecContext, and grid sizes.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda_check.cuh"
#include "runtime/device.h"
#include "runtime/exec.h"
#include "runtime/int_math.h"
#include "runtime/memory.h"

namespace pf {

// The cudaStream_t behind a CUDA Stream.
inline cudaStream_t cuda_stream(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle); }
// The cudaStream_t the context's work runs on (ctx.stream).
inline cudaStream_t cuda_stream(const ExecContext& ctx) { return cuda_stream(ctx.stream); }

// Largest grid.x a launch accepts (2^31 - 1): the default cap of grid_size.
constexpr int64_t kMaxGridX = 2147483647;

// Blocks of `threads` threads covering `n` elements: at least 1, at most `max_blocks` (grid-stride loops do the rest).
inline unsigned grid_size(int64_t n, int64_t threads, int64_t max_blocks = kMaxGridX) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(1, ceil_div(n, threads)), max_blocks));
}

// The launch policy of kernels that are also run under the block emulator
// (kernels/reduce/column_sums_cuda.cuh): launches on ctx.stream, and
// temporaries from ctx.tracker that are released on ctx.stream, in stream
// order, when the policy goes out of scope.
class CudaGridLaunch {
 public:
  CudaGridLaunch(const ExecContext& ctx, std::string tag) : ctx_(ctx), tag_(std::move(tag)) {
    PF_REQUIRE(ValueError, ctx.tracker != nullptr, tag_ << " on " << ctx.device.str() << " needs ctx.tracker");
  }
  CudaGridLaunch(const CudaGridLaunch&) = delete;
  CudaGridLaunch& operator=(const CudaGridLaunch&) = delete;
  ~CudaGridLaunch() {
    for (const auto& [ptr, bytes] : buffers_) device_free(*ctx_.tracker, ptr, bytes, tag_, &ctx_.stream);
  }
  float* buffer(int64_t floats) {
    const int64_t bytes = 4 * std::max<int64_t>(floats, 1);
    void* p = device_allocate(*ctx_.tracker, bytes, tag_);
    buffers_.emplace_back(p, bytes);
    // Allocated in the order of the tracker's stream: used on ctx.stream after it.
    const Stream owner = ctx_.tracker->stream();
    if (owner.handle != ctx_.stream.handle) stream_wait_stream(ctx_.stream, owner);
    return static_cast<float*>(p);
  }
  template <typename... P, typename... A>
  void grid(void (*kernel)(P...), unsigned gx, unsigned gy, int threads, A... args) {
    if (gx == 0 || gy == 0) return;
    PF_REQUIRE(ValueError, gy <= 65535u, tag_ << ": grid.y " << gy << " exceeds 65535");
    kernel<<<dim3(gx, gy), threads, 0, cuda_stream(ctx_)>>>(args...);
    PF_CUDA_CHECK(cudaGetLastError());
  }

 private:
  const ExecContext& ctx_;
  std::string tag_;
  std::vector<std::pair<void*, int64_t>> buffers_;
};

}  // namespace pf
