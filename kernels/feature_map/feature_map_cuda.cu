// CUDA backend of the feature maps (feature_map.h), on ctx.stream:
//   forward:  U = s X W^T by cuBLAS (gemm_f32_cuda), then one block per row:
//             |x|^2, the exponents, the row max c_i (block reduction) and the
//             features; Relu is elementwise.
//   backward: one block per row writes T = G . Phi (or the Relu mask) [n, m]
//             and its row sum, dX = s T W [n, d] by cuBLAS, then
//             dX_i -= s^2 (sum_l T_il) X_i elementwise (the |x|^2/2 term);
//             fp32 storage: dW += s T^T X by cuBLAS when dW is given.
// fp32 storage: U is computed in place in Phi. fp16/bf16 storage (X, Phi,
// dPhi, dX): rows are processed in chunks; each chunk's X is widened to fp32
// scratch, U, T and dX live in fp32 scratch, and only the results are rounded
// to the storage type, so GEMMs, exponentials and sums all run in fp32.
// Per-element math comes from feature_map_math.h, shared with the CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/feature_map/feature_map.h"
#include "kernels/feature_map/feature_map_math.h"
#include "kernels/gemm/gemm.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int kRowThreads = 128;
constexpr int kElemThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;             // grid cap of every launch (all kernels loop grid-stride)
constexpr int64_t kChunkFloats = int64_t{1} << 24;  // fp32 scratch per chunk (64 MiB) for fp16/bf16 storage

// An fp32 temporary of `count` floats recorded in ctx.tracker (required on CUDA).
Tensor scratch_f32(const ExecContext& ctx, int64_t count, const char* tag) {
  PF_REQUIRE(ValueError, ctx.tracker != nullptr,
             tag << ": an ExecContext on " << ctx.device.str() << " needs a MemoryTracker for temporaries");
  return Tensor::empty({count}, DType::f32, *ctx.tracker, tag);
}

__device__ __forceinline__ float load_f32(const float* p) { return *p; }
__device__ __forceinline__ float load_f32(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load_f32(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f32(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_f32(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_f32(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

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

// U [n, m] = s X W^T (fp32, may alias Phi when Out = float), X fp32 [n, d].
// Phi = m^(-1/2) exp(U - |x|^2/2 - c) (exp without half_norm: exp(U - c)), log_scale = c.
template <typename Out>
__global__ void favor_rows_kernel(int64_t n, int64_t d, int64_t m, float s, float inv_sqrt_m, bool half_norm,
                                  const float* X, const float* U, Out* Phi, float* log_scale) {
  __shared__ float shared[32];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const float* row = X + i * d;
    float sq = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sq += row[j] * row[j];
    const float h = half_norm ? 0.5f * s * s * block_reduce<false>(sq, shared) : 0.f;
    float c = -INFINITY;
    for (int64_t l = threadIdx.x; l < m; l += blockDim.x) c = fmaxf(c, favor_exponent(U[i * m + l], h));
    c = block_reduce<true>(c, shared);
    for (int64_t l = threadIdx.x; l < m; l += blockDim.x)
      store_f32(Phi + i * m + l, favor_feature(favor_exponent(U[i * m + l], h), c, inv_sqrt_m));
    if (log_scale != nullptr && threadIdx.x == 0) log_scale[i] = c;
  }
}

template <typename Out>
__global__ void relu_kernel(int64_t count, float eps, const float* U, Out* Phi) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_f32(Phi + k, relu_feature(U[k], eps));
}

template <typename Out>
__global__ void elu_kernel(int64_t count, const float* U, Out* Phi) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_f32(Phi + k, elu_feature(U[k]));
}

// Widens a storage-type buffer to fp32.
template <typename In>
__global__ void widen_kernel(int64_t count, const In* in, float* out) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[k] = load_f32(in + k);
}

// T = G . Phi per row (Phi may alias T) and rowsum = sum_l T_l.
template <typename GT, typename PT>
__global__ void favor_weights_kernel(int64_t n, int64_t m, const GT* G, const PT* Phi, float* T, float* rowsum) {
  __shared__ float shared[32];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    float sum = 0.f;
    for (int64_t l = threadIdx.x; l < m; l += blockDim.x) {
      const float t = favor_grad_weight(load_f32(G + i * m + l), load_f32(Phi + i * m + l));
      T[i * m + l] = t;
      sum += t;
    }
    sum = block_reduce<false>(sum, shared);
    if (threadIdx.x == 0) rowsum[i] = sum;
  }
}

// v as the storage type T holds it (rounded to nearest).
template <typename T>
__device__ __forceinline__ float as_stored(float v);
template <>
__device__ __forceinline__ float as_stored<float>(float v) { return v; }
template <>
__device__ __forceinline__ float as_stored<__half>(float v) { return __half2float(__float2half_rn(v)); }
template <>
__device__ __forceinline__ float as_stored<__nv_bfloat16>(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// T = G where active: src > threshold (Phi > eps given Phi, U > 0 when
// recomputed). The threshold is compared as src's type holds it: an inactive
// feature stores eps rounded (f16 rounds 1e-3 up to 1.0004e-3, which would
// pass "> eps" and mark every feature active). src may alias T.
template <typename GT, typename PT>
__global__ void relu_weights_kernel(int64_t count, float threshold, const GT* G, const PT* src, float* T) {
  const float stored = as_stored<PT>(threshold);
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    T[k] = relu_grad_weight(load_f32(G + k), load_f32(src + k) > stored);
}

// T = G . elu'(u), from the features (given Phi) or from U (recomputed). src may alias T.
template <typename GT, typename PT>
__global__ void elu_weights_kernel(int64_t count, bool src_is_features, const GT* G, const PT* src, float* T) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = load_f32(src + k);
    T[k] = elu_grad_weight(load_f32(G + k), src_is_features ? v : elu_feature(v));
  }
}

// dX = dXs - s^2 rowsum_i X_i (the |x|^2/2 term) or dXs; dXs may alias dX when Out = float.
template <typename Out>
__global__ void dx_finish_kernel(int64_t n, int64_t d, float s2, bool half_norm, const float* dXs, const float* X,
                                 const float* rowsum, Out* dX) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n * d;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_f32(dX + k, half_norm ? dXs[k] - s2 * rowsum[k / d] * X[k] : dXs[k]);
}

// Features of n rows from U (fp32) and fp32 X.
template <typename Out>
void finish_rows(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const float* X,
                 const float* U, Out* Phi, float* log_scale) {
  cudaStream_t st = cuda_stream(ctx);
  if (feature_is_exponential(p)) {
    const float inv_sqrt_m = static_cast<float>(1.0 / std::sqrt(static_cast<double>(m)));
    favor_rows_kernel<Out><<<grid_size(n, 1, kMaxBlocks), kRowThreads, 0, st>>>(
        n, d, m, static_cast<float>(p.data_scale), inv_sqrt_m, feature_subtracts_half_norm(p), X, U, Phi, log_scale);
  } else {
    if (p.kernel == FeatureKernel::Elu)
      elu_kernel<Out><<<grid_size(n * m, kElemThreads, kMaxBlocks), kElemThreads, 0, st>>>(n * m, U, Phi);
    else
      relu_kernel<Out><<<grid_size(n * m, kElemThreads, kMaxBlocks), kElemThreads, 0, st>>>(
          n * m, static_cast<float>(p.relu_eps), U, Phi);
    if (log_scale != nullptr) PF_CUDA_CHECK(cudaMemsetAsync(log_scale, 0, static_cast<size_t>(n) * sizeof(float), st));
  }
  PF_CUDA_CHECK_LAUNCH();
}

// Backward of n rows given fp32 X, fp32 scratch T [n, m] (holding U = s X W^T
// when Phi is nullptr), fp32 scratch rowsum [n] and dXs [n, d] (may be dX for
// fp32); dW [m, d] += s T^T X when not nullptr.
template <typename St>
void backward_rows(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const float* Xf,
                   const float* W, const St* Phi, const St* dPhi, float* T, float* rowsum, float* dXs, St* dX,
                   float* dW) {
  const float s = static_cast<float>(p.data_scale);
  const bool softmax = feature_is_exponential(p);
  cudaStream_t st = cuda_stream(ctx);
  if (Phi == nullptr) {
    gemm_f32_cuda(ctx, false, true, n, m, d, s, Xf, d, W, d, 0.f, T, m);
    if (softmax) finish_rows<float>(ctx, p, n, d, m, Xf, T, T, nullptr);
  }
  if (softmax) {
    if (Phi)
      favor_weights_kernel<St, St><<<grid_size(n, 1, kMaxBlocks), kRowThreads, 0, st>>>(n, m, dPhi, Phi, T, rowsum);
    else
      favor_weights_kernel<St, float><<<grid_size(n, 1, kMaxBlocks), kRowThreads, 0, st>>>(n, m, dPhi, T, T, rowsum);
  } else if (p.kernel == FeatureKernel::Elu) {
    if (Phi)
      elu_weights_kernel<St, St>
          <<<grid_size(n * m, kElemThreads, kMaxBlocks), kElemThreads, 0, st>>>(n * m, true, dPhi, Phi, T);
    else
      elu_weights_kernel<St, float>
          <<<grid_size(n * m, kElemThreads, kMaxBlocks), kElemThreads, 0, st>>>(n * m, false, dPhi, T, T);
  } else if (Phi) {
    relu_weights_kernel<St, St><<<grid_size(n * m, kElemThreads, kMaxBlocks), kElemThreads, 0, st>>>(
        n * m, static_cast<float>(p.relu_eps), dPhi, Phi, T);
  } else {
    relu_weights_kernel<St, float>
        <<<grid_size(n * m, kElemThreads, kMaxBlocks), kElemThreads, 0, st>>>(n * m, 0.f, dPhi, T, T);
  }
  PF_CUDA_CHECK_LAUNCH();
  gemm_f32_cuda(ctx, false, false, n, d, m, s, T, m, W, d, 0.f, dXs, d);
  if (dW) gemm_f32_cuda(ctx, true, false, m, d, n, s, T, m, Xf, d, 1.f, dW, d);
  dx_finish_kernel<St><<<grid_size(n * d, kElemThreads, kMaxBlocks), kElemThreads, 0, st>>>(
      n, d, s * s, feature_subtracts_half_norm(p), dXs, Xf, rowsum, dX);
  PF_CUDA_CHECK_LAUNCH();
}

// Rows per chunk for reduced-precision storage: the fp32 scratch (X, U or T,
// dX, row sums) stays near kChunkFloats.
int64_t chunk_rows(int64_t n, int64_t d, int64_t m) {
  return std::max<int64_t>(1, std::min<int64_t>(n, kChunkFloats / (2 * d + m + 1)));
}

template <typename St>
void forward_reduced(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const St* X,
                     const float* W, St* Phi, float* log_scale) {
  const int64_t rows = chunk_rows(n, d, m);
  const Tensor x_buf = scratch_f32(ctx, rows * d, "feature_map_forward.x_f32");
  const Tensor u_buf = scratch_f32(ctx, rows * m, "feature_map_forward.u");
  float* Xf = x_buf.data<float>();
  float* U = u_buf.data<float>();
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t nr = std::min(rows, n - r0);
    widen_kernel<St>
        <<<grid_size(nr * d, kElemThreads, kMaxBlocks), kElemThreads, 0, cuda_stream(ctx)>>>(nr * d, X + r0 * d, Xf);
    PF_CUDA_CHECK_LAUNCH();
    gemm_f32_cuda(ctx, false, true, nr, m, d, static_cast<float>(p.data_scale), Xf, d, W, d, 0.f, U, m);
    finish_rows<St>(ctx, p, nr, d, m, Xf, U, Phi + r0 * m, log_scale ? log_scale + r0 : nullptr);
  }
  PF_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(ctx)));  // the scratch is freed on return
}

template <typename St>
void backward_reduced(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const St* X,
                      const float* W, const St* Phi, const St* dPhi, St* dX) {
  const int64_t rows = chunk_rows(n, d, m);
  const Tensor buf = scratch_f32(ctx, rows * (2 * d + m + 1), "feature_map_backward.f32");
  float* Xf = buf.data<float>();
  float* dXs = Xf + rows * d;
  float* T = dXs + rows * d;
  float* rowsum = T + rows * m;
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t nr = std::min(rows, n - r0);
    widen_kernel<St>
        <<<grid_size(nr * d, kElemThreads, kMaxBlocks), kElemThreads, 0, cuda_stream(ctx)>>>(nr * d, X + r0 * d, Xf);
    PF_CUDA_CHECK_LAUNCH();
    backward_rows<St>(ctx, p, nr, d, m, Xf, W, Phi ? Phi + r0 * m : nullptr, dPhi + r0 * m, T, rowsum, dXs,
                      dX + r0 * d, nullptr);
  }
  PF_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(ctx)));  // the scratch is freed on return
}

void check_cuda_args(const char* op, const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d,
                     int64_t m) {
  check_feature_map_args(op, p, n, d, m);
  PF_REQUIRE(ValueError, ctx.device.is_cuda(), op << " on " << ctx.device.str());
}

}  // namespace

void feature_map_forward_cuda(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m,
                              const float* X, const float* W, float* Phi, float* log_scale) {
  check_cuda_args("feature_map_forward_cuda", ctx, p, n, d, m);
  if (n == 0) return;
  gemm_f32_cuda(ctx, false, true, n, m, d, static_cast<float>(p.data_scale), X, d, W, d, 0.f, Phi, m);
  finish_rows<float>(ctx, p, n, d, m, X, Phi, Phi, log_scale);
}

void feature_map_backward_cuda(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m,
                               const float* X, const float* W, const float* Phi, const float* dPhi, float* dX,
                               float* dW) {
  check_cuda_args("feature_map_backward_cuda", ctx, p, n, d, m);
  if (n == 0) return;
  const Tensor t_buf = scratch_f32(ctx, n * m, "feature_map_backward.t");
  const Tensor sum_buf = scratch_f32(ctx, n, "feature_map_backward.rowsum");
  backward_rows<float>(ctx, p, n, d, m, X, W, Phi, dPhi, t_buf.data<float>(), sum_buf.data<float>(), dX, dX, dW);
  PF_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(ctx)));  // the scratch is freed on return
}

void feature_map_forward_cuda(const ExecContext& ctx, const FeatureMapParams& p, DType storage, int64_t n, int64_t d,
                              int64_t m, const void* X, const float* W, void* Phi, float* log_scale) {
  check_cuda_args("feature_map_forward_cuda", ctx, p, n, d, m);
  if (n == 0) return;
  switch (storage) {
    case DType::f32:
      return feature_map_forward_cuda(ctx, p, n, d, m, static_cast<const float*>(X), W, static_cast<float*>(Phi),
                                      log_scale);
    case DType::f16:
      return forward_reduced(ctx, p, n, d, m, static_cast<const __half*>(X), W, static_cast<__half*>(Phi), log_scale);
    case DType::bf16:
      return forward_reduced(ctx, p, n, d, m, static_cast<const __nv_bfloat16*>(X), W, static_cast<__nv_bfloat16*>(Phi),
                             log_scale);
    default:
      PF_REQUIRE(ValueError, false,
                 "feature_map_forward_cuda: storage must be f32, f16 or bf16, got " << dtype_name(storage));
  }
}

void feature_map_backward_cuda(const ExecContext& ctx, const FeatureMapParams& p, DType storage, int64_t n, int64_t d,
                               int64_t m, const void* X, const float* W, const void* Phi, const void* dPhi, void* dX) {
  check_cuda_args("feature_map_backward_cuda", ctx, p, n, d, m);
  if (n == 0) return;
  switch (storage) {
    case DType::f32:
      return feature_map_backward_cuda(ctx, p, n, d, m, static_cast<const float*>(X), W, static_cast<const float*>(Phi),
                                       static_cast<const float*>(dPhi), static_cast<float*>(dX));
    case DType::f16:
      return backward_reduced(ctx, p, n, d, m, static_cast<const __half*>(X), W, static_cast<const __half*>(Phi),
                              static_cast<const __half*>(dPhi), static_cast<__half*>(dX));
    case DType::bf16:
      return backward_reduced(ctx, p, n, d, m, static_cast<const __nv_bfloat16*>(X), W,
                              static_cast<const __nv_bfloat16*>(Phi), static_cast<const __nv_bfloat16*>(dPhi),
                              static_cast<__nv_bfloat16*>(dX));
    default:
      PF_REQUIRE(ValueError, false,
                 "feature_map_backward_cuda: storage must be f32, f16 or bf16, got " << dtype_name(storage));
  }
}

}  // namespace pf
