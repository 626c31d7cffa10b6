// CUDA layer norm: X [T,C] -> Y [T,C], mean/rstd [T]. One warp per row
// (two-pass statistics in fp32 with warp shuffles); the backward computes dX
// with one warp per row, then dgamma/dbeta [C] with the deterministic two-pass
// column sums of kernels/reduce/column_sums_cuda.cuh (chunks of rows spread
// over the GPU, partials summed in a fixed order).
#include "kernels/layernorm/layernorm.h"
#include "kernels/layernorm/layernorm_math.h"
#include "kernels/reduce/column_sums_cuda.cuh"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"

namespace pf {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__global__ void layernorm_forward_kernel(const float* X, const float* gamma, const float* beta, float* Y, float* mean,
                                         float* rstd, int64_t T, int64_t C, float eps) {
  const int64_t t = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.y;
  if (t >= T) return;
  const int lane = threadIdx.x;
  const float* x = X + t * C;
  float s = 0.f;
  for (int64_t c = lane; c < C; c += 32) s += x[c];
  const float m = warp_sum(s) / static_cast<float>(C);
  float ss = 0.f;
  for (int64_t c = lane; c < C; c += 32) ss += (x[c] - m) * (x[c] - m);
  const float r = layernorm_rstd(warp_sum(ss) / static_cast<float>(C), eps);
  float* y = Y + t * C;
  for (int64_t c = lane; c < C; c += 32) y[c] = layernorm_output(x[c], m, r, gamma[c], beta[c]);
  if (lane == 0) {
    mean[t] = m;
    rstd[t] = r;
  }
}

__global__ void layernorm_input_grad_kernel(const float* dY, const float* X, const float* gamma, const float* mean,
                                            const float* rstd, float* dX, int64_t T, int64_t C) {
  const int64_t t = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.y;
  if (t >= T) return;
  const int lane = threadIdx.x;
  const float* x = X + t * C;
  const float* dy = dY + t * C;
  const float m = mean[t], r = rstd[t];
  float sg = 0.f, sgx = 0.f;
  for (int64_t c = lane; c < C; c += 32) {
    const float g = dy[c] * gamma[c];
    sg += g;
    sgx += g * ((x[c] - m) * r);
  }
  const float mg = warp_sum(sg) / static_cast<float>(C), mgx = warp_sum(sgx) / static_cast<float>(C);
  float* dx = dX + t * C;
  for (int64_t c = lane; c < C; c += 32) dx[c] = layernorm_input_grad(dy[c], x[c], gamma[c], m, r, mg, mgx);
}

}  // namespace

void layernorm_forward_cuda(const ExecContext& ctx, const float* X, const float* gamma, const float* beta, float* Y,
                            float* mean, float* rstd, int64_t T, int64_t C, float eps) {
  if (T == 0) return;
  const dim3 block(32, kWarpsPerBlock);
  const unsigned grid = static_cast<unsigned>(ceil_div(T, kWarpsPerBlock));
  layernorm_forward_kernel<<<grid, block, 0, cuda_stream(ctx)>>>(X, gamma, beta, Y, mean, rstd, T, C, eps);
  PF_CUDA_CHECK_LAUNCH();
}

void layernorm_backward_cuda(const ExecContext& ctx, const float* dY, const float* X, const float* gamma,
                             const float* mean, const float* rstd, float* dX, float* dgamma, float* dbeta, int64_t T,
                             int64_t C) {
  if (T == 0 || C == 0) return;
  const cudaStream_t stream = cuda_stream(ctx);
  const dim3 block(32, kWarpsPerBlock);
  const unsigned rows = static_cast<unsigned>(ceil_div(T, kWarpsPerBlock));
  layernorm_input_grad_kernel<<<rows, block, 0, stream>>>(dY, X, gamma, mean, rstd, dX, T, C);
  PF_CUDA_CHECK_LAUNCH();
  CudaGridLaunch L(ctx, "layernorm.param_grad");
  column_sums_cuda::add_column_sums<2>(L, column_sums_cuda::LayerNormParamRows{dY, X, mean, rstd, C}, {{dgamma, dbeta}},
                                       T, C);
}

}  // namespace pf
