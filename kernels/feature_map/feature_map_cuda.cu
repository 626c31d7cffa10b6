// CUDA backend of the feature maps (feature_map.h), fp32, on ctx.stream:
//   forward:  U = s X W^T by cuBLAS (gemm_f32_cuda) straight into Phi [n, m],
//             then one block per row: |x|^2, the exponents, the row max c_i
//             (block reduction) and the features in place; Relu is elementwise.
//   backward: one block per row writes T = G . Phi (or the Relu mask) [n, m]
//             and its row sum, dX = s T W [n, d] by cuBLAS, then
//             dX_i -= s^2 (sum_l T_il) X_i elementwise.
// Per-element math comes from feature_map_math.h, shared with the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/feature_map/feature_map.h"
#include "kernels/feature_map/feature_map_math.h"
#include "kernels/feature_map/feature_map_scratch.h"
#include "kernels/gemm/gemm.h"
#include "runtime/cuda_check.cuh"

namespace pf {
namespace {

constexpr int kRowThreads = 128;
constexpr int kElemThreads = 256;

cudaStream_t stream_of(const ExecContext& ctx) { return static_cast<cudaStream_t>(ctx.stream.handle); }

unsigned row_blocks(int64_t n) { return static_cast<unsigned>(std::min<int64_t>(n, 1 << 20)); }
unsigned elem_blocks(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kElemThreads - 1) / kElemThreads, 1 << 20));
}

// Block-wide sum or max of one value per thread; every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v, float* shared /* [32] */) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();  // `shared` may still be read from a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : (kMax ? -INFINITY : 0.f);
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  return v;
}

// In: Phi holds U = s X W^T. Out: Phi = m^(-1/2) exp(U - |x|^2/2 - c), log_scale = c.
__global__ void favor_rows_kernel(int64_t n, int64_t d, int64_t m, float s, float inv_sqrt_m, const float* X,
                                  float* Phi, float* log_scale) {
  __shared__ float shared[32];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const float* row = X + i * d;
    float sq = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sq += row[j] * row[j];
    const float h = 0.5f * s * s * block_reduce<false>(sq, shared);
    float* out = Phi + i * m;
    float c = -INFINITY;
    for (int64_t l = threadIdx.x; l < m; l += blockDim.x) {
      const float e = favor_exponent(out[l], h);
      out[l] = e;
      c = fmaxf(c, e);
    }
    c = block_reduce<true>(c, shared);
    for (int64_t l = threadIdx.x; l < m; l += blockDim.x) out[l] = favor_feature(out[l], c, inv_sqrt_m);
    if (log_scale != nullptr && threadIdx.x == 0) log_scale[i] = c;
  }
}

__global__ void relu_kernel(int64_t count, float eps, float* Phi) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    Phi[k] = relu_feature(Phi[k], eps);
}

// T = G . Phi per row (Phi may alias T) and rowsum = sum_l T_l.
__global__ void favor_weights_kernel(int64_t n, int64_t m, const float* G, const float* Phi, float* T,
                                     float* rowsum) {
  __shared__ float shared[32];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    float sum = 0.f;
    for (int64_t l = threadIdx.x; l < m; l += blockDim.x) {
      const float t = favor_grad_weight(G[i * m + l], Phi[i * m + l]);
      T[i * m + l] = t;
      sum += t;
    }
    sum = block_reduce<false>(sum, shared);
    if (threadIdx.x == 0) rowsum[i] = sum;
  }
}

// T = G where active: src > threshold (Phi > eps given Phi, U > 0 when recomputed). src may alias T.
__global__ void relu_weights_kernel(int64_t count, float threshold, const float* G, const float* src, float* T) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    T[k] = relu_grad_weight(G[k], src[k] > threshold);
}

// dX_i -= s^2 rowsum_i X_i.
__global__ void favor_dx_fixup_kernel(int64_t n, int64_t d, float s2, const float* X, const float* rowsum, float* dX) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n * d;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dX[k] -= s2 * rowsum[k / d] * X[k];
}

// Turns U (in Phi) into features and log-scales.
void finish_rows(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const float* X,
                 float* Phi, float* log_scale) {
  cudaStream_t st = stream_of(ctx);
  if (p.kernel == FeatureKernel::Softmax) {
    const float inv_sqrt_m = static_cast<float>(1.0 / std::sqrt(static_cast<double>(m)));
    favor_rows_kernel<<<row_blocks(n), kRowThreads, 0, st>>>(n, d, m, static_cast<float>(p.data_scale), inv_sqrt_m,
                                                            X, Phi, log_scale);
  } else {
    relu_kernel<<<elem_blocks(n * m), kElemThreads, 0, st>>>(n * m, static_cast<float>(p.relu_eps), Phi);
    if (log_scale != nullptr)
      PF_CUDA_CHECK(cudaMemsetAsync(log_scale, 0, static_cast<size_t>(n) * sizeof(float), st));
  }
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void feature_map_forward_cuda(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m,
                              const float* X, const float* W, float* Phi, float* log_scale) {
  check_feature_map_args("feature_map_forward_cuda", p, n, d, m);
  PF_REQUIRE(ValueError, ctx.device.is_cuda(), "feature_map_forward_cuda on " << ctx.device.str());
  if (n == 0) return;
  gemm_f32_cuda(ctx, false, true, n, m, d, static_cast<float>(p.data_scale), X, d, W, d, 0.f, Phi, m);
  finish_rows(ctx, p, n, d, m, X, Phi, log_scale);
}

void feature_map_backward_cuda(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m,
                               const float* X, const float* W, const float* Phi, const float* dPhi, float* dX) {
  check_feature_map_args("feature_map_backward_cuda", p, n, d, m);
  PF_REQUIRE(ValueError, ctx.device.is_cuda(), "feature_map_backward_cuda on " << ctx.device.str());
  if (n == 0) return;
  const float s = static_cast<float>(p.data_scale);
  const bool softmax = p.kernel == FeatureKernel::Softmax;
  cudaStream_t st = stream_of(ctx);
  FeatureScratch t_buf(ctx, n * m * static_cast<int64_t>(sizeof(float)), "feature_map_backward.t");
  FeatureScratch sum_buf(ctx, n * static_cast<int64_t>(sizeof(float)), "feature_map_backward.rowsum");
  float* T = t_buf.as<float>();
  float* rowsum = sum_buf.as<float>();
  // Without Phi: T holds the recomputed features (Softmax) or U = s X W^T (Relu mask u > 0).
  if (!Phi) {
    gemm_f32_cuda(ctx, false, true, n, m, d, s, X, d, W, d, 0.f, T, m);
    if (softmax) finish_rows(ctx, p, n, d, m, X, T, nullptr);
  }
  const float* src = Phi ? Phi : T;
  if (softmax) {
    favor_weights_kernel<<<row_blocks(n), kRowThreads, 0, st>>>(n, m, dPhi, src, T, rowsum);
  } else {
    const float threshold = Phi ? static_cast<float>(p.relu_eps) : 0.f;
    relu_weights_kernel<<<elem_blocks(n * m), kElemThreads, 0, st>>>(n * m, threshold, dPhi, src, T);
  }
  PF_CUDA_CHECK_LAUNCH();
  gemm_f32_cuda(ctx, false, false, n, d, m, s, T, m, W, d, 0.f, dX, d);
  if (softmax) {
    favor_dx_fixup_kernel<<<elem_blocks(n * d), kElemThreads, 0, st>>>(n, d, s * s, X, rowsum, dX);
    PF_CUDA_CHECK_LAUNCH();
  }
  // The scratch buffers are freed on return: wait for the work that reads them.
  PF_CUDA_CHECK(cudaStreamSynchronize(st));
}

}  // namespace pf
