// CUDA linear layer: X [T,in], W [out,in], b [out], Y [T,out]. GEMMs through
// cuBLAS (gemm_f32_cuda on ctx.stream); the bias broadcast is a grid-stride
// kernel; the bias gradient db[o] += sum_t dY[t,o] is computed by blocks of
// 32 columns x 32 row lanes that sum rows in a fixed order (deterministic, no
// atomics, no scratch memory).
#include "kernels/gemm/gemm.h"
#include "kernels/linear/linear.h"
#include "runtime/cuda_check.cuh"

namespace pf {
namespace {

__global__ void bias_rows_kernel(const float* b, float* Y, int64_t T, int64_t out) {
  const int64_t n = T * out;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    Y[i] = b[i % out];
}

constexpr int kRowLanes = 32;

// blockDim = (32, kRowLanes); grid.x covers columns in tiles of 32.
__global__ void bias_grad_kernel(const float* dY, float* db, int64_t T, int64_t out) {
  __shared__ float partial[kRowLanes][33];
  const int64_t o = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  if (o < out)
    for (int64_t t = threadIdx.y; t < T; t += kRowLanes) acc += dY[t * out + o];
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && o < out) {
    float s = 0.f;
    for (int r = 0; r < kRowLanes; ++r) s += partial[r][threadIdx.x];
    db[o] += s;
  }
}

}  // namespace

void linear_forward_cuda(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                         int64_t in, int64_t out) {
  if (T == 0 || out == 0) return;
  if (b) {
    const int64_t n = T * out;
    const int blocks = static_cast<int>(n / 256 + 1 < 65536 ? n / 256 + 1 : 65536);
    bias_rows_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(ctx.stream.handle)>>>(b, Y, T, out);
    PF_CUDA_CHECK_LAUNCH();
  }
  gemm_f32_cuda(ctx, false, true, T, out, in, 1.0f, X, in, W, in, b ? 1.0f : 0.0f, Y, out);
}

void linear_backward_cuda(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX,
                          float* dW, float* db, int64_t T, int64_t in, int64_t out) {
  if (T == 0) return;
  if (dX) gemm_f32_cuda(ctx, false, false, T, in, out, 1.0f, dY, out, W, in, 0.0f, dX, in);
  gemm_f32_cuda(ctx, true, false, out, in, T, 1.0f, dY, out, X, in, 1.0f, dW, in);
  if (db && out > 0) {
    const dim3 block(32, kRowLanes);
    const unsigned grid = static_cast<unsigned>((out + 31) / 32);
    bias_grad_kernel<<<grid, block, 0, static_cast<cudaStream_t>(ctx.stream.handle)>>>(dY, db, T, out);
    PF_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace pf
