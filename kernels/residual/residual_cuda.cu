// CUDA residual add: out[n] = a + b (grid-stride; aliasing allowed).
#include "kernels/residual/residual.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"

namespace pf {
namespace {

__global__ void residual_add_kernel(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

}  // namespace

void residual_add_cuda(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n) {
  if (n == 0) return;
  residual_add_kernel<<<grid_size(n, 256, 65536), 256, 0, cuda_stream(ctx)>>>(a, b, out, n);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace pf
