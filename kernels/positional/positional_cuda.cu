#include "kernels/positional/positional.h"
#include "kernels/positional/positional_math.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"

namespace pf {
namespace {

__global__ void sinusoidal_add_kernel(float* x, int64_t B, int64_t n, int64_t C, int64_t offset) {
  const int64_t total = B * n * C;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = e % C, i = (e / C) % n;
    x[e] += sinusoidal_value(offset + i, c, C);
  }
}

}  // namespace

void sinusoidal_add_cuda(const ExecContext& ctx, float* x, int64_t B, int64_t n, int64_t C, int64_t offset) {
  const int64_t total = B * n * C;
  if (total == 0) return;
  sinusoidal_add_kernel<<<grid_size(total, 256, 65535), 256, 0, cuda_stream(ctx)>>>(x, B, n, C, offset);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace pf
