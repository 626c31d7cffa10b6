// CUDA GELU over a flat buffer of n floats (grid-stride loop):
// Y = gelu(X), dX = dY * gelu'(X).
#include "kernels/gelu/gelu.h"
#include "kernels/gelu/gelu_math.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"

namespace pf {
namespace {

__global__ void gelu_forward_kernel(const float* X, float* Y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    Y[i] = gelu_value(X[i]);
}

__global__ void gelu_backward_kernel(const float* dY, const float* X, float* dX, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dX[i] = dY[i] * gelu_derivative(X[i]);
}

}  // namespace

void gelu_forward_cuda(const ExecContext& ctx, const float* X, float* Y, int64_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_size(n, 256, 65536), 256, 0, cuda_stream(ctx)>>>(X, Y, n);
  PF_CUDA_CHECK_LAUNCH();
}

void gelu_backward_cuda(const ExecContext& ctx, const float* dY, const float* X, float* dX, int64_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_size(n, 256, 65536), 256, 0, cuda_stream(ctx)>>>(dY, X, dX, n);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace pf
