// CUDA exact softmax attention per head of [heads, n, d] row-major (d <= 128);
// lse [heads, n]. Q, K, V, O, dO, dQ, dK, dV are stored as f32, f16 or bf16
// (the kernels are templated on the storage type); tiles are widened to fp32
// in shared memory on load, so scores, exponentials, row statistics and all
// accumulations run in fp32 and results are rounded once on store. lse stays
// fp32. With f16/bf16 storage dQ is accumulated (atomics) in an fp32 scratch
// buffer recorded in ctx.tracker and rounded to the storage type at the end.
// Forward: one block per (head, 32-row query tile); Q, the running output and
// the row statistics stay in shared memory while 32-row key tiles stream
// through from the tile's first visible key to its last (causal: none right
// of the diagonal; window: none before the first row's window), each row
// masked to its visible span; online softmax with one warp per row (lane =
// key column).
// Backward: D_i = dO_i . O_i (one warp per row), then one block per (head,
// 32-row key tile) accumulating dK, dV in shared memory over 16-row query
// tiles, P rebuilt from lse; dQ is accumulated across key tiles with atomics.
// Uses only sm_70-level features (no cp.async, no tensor-core intrinsics).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/softmax_attention/softmax_attention.h"
#include "kernels/softmax_attention/softmax_attention_math.h"
#include "runtime/check.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kFwdQ = 32;     // forward query-tile rows
constexpr int kKeyTile = 32;  // key-tile rows (= warp size: one lane per key)
constexpr int kBwdQ = 16;     // backward query-tile rows
constexpr int kMaxD = 128;
static_assert(kKeyTile == 32, "the row softmax maps one key per lane");

__device__ __forceinline__ float load_f32(const float* p) { return *p; }
__device__ __forceinline__ float load_f32(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load_f32(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f32(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_f32(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_f32(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Shared floats of the forward: Q, O [kFwdQ][d]; K, V [kKeyTile][d+1];
// S [kFwdQ][kKeyTile+1]; m, l, alpha [kFwdQ].
int64_t forward_smem_floats(int d) {
  return 2 * kFwdQ * d + 2 * kKeyTile * (d + 1) + kFwdQ * (kKeyTile + 1) + 3 * kFwdQ;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(int64_t n, int d, SoftmaxMask mask, float scale, int64_t q_tiles, const T* __restrict__ Q,
                   const T* __restrict__ K, const T* __restrict__ V, T* __restrict__ O, float* __restrict__ lse) {
  extern __shared__ float smem[];
  const int ld = d + 1, lds = kKeyTile + 1;
  float* sQ = smem;
  float* sO = sQ + kFwdQ * d;
  float* sK = sO + kFwdQ * d;
  float* sV = sK + kKeyTile * ld;
  float* sS = sV + kKeyTile * ld;
  float* sM = sS + kFwdQ * lds;
  float* sL = sM + kFwdQ;
  float* sA = sL + kFwdQ;

  const int64_t head = blockIdx.x / q_tiles;
  const int64_t i0 = (blockIdx.x % q_tiles) * kFwdQ;
  const int rows = static_cast<int>(min64(kFwdQ, n - i0));
  const int64_t base = head * n * d;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int e = tid; e < kFwdQ * d; e += kThreads) {
    const int r = e / d;
    sQ[e] = r < rows ? load_f32(Q + base + (i0 + r) * d + e % d) * scale : 0.f;
    sO[e] = 0.f;
  }
  if (tid < kFwdQ) {
    sM[tid] = -INFINITY;
    sL[tid] = 0.f;
  }
  const int64_t kend = mask.end_key(i0 + rows - 1, n);
  for (int64_t j0 = mask.first_key(i0); j0 < kend; j0 += kKeyTile) {
    const int cols = static_cast<int>(min64(kKeyTile, kend - j0));
    __syncthreads();  // the previous tile's K, V and S are no longer read
    for (int e = tid; e < kKeyTile * d; e += kThreads) {
      const int c = e / d, k = e % d;
      const bool in = c < cols;
      sK[c * ld + k] = in ? load_f32(K + base + (j0 + c) * d + k) : 0.f;
      sV[c * ld + k] = in ? load_f32(V + base + (j0 + c) * d + k) : 0.f;
    }
    __syncthreads();
    for (int e = tid; e < kFwdQ * kKeyTile; e += kThreads) {
      const int r = e / kKeyTile, c = e % kKeyTile;
      float acc = 0.f;
      for (int k = 0; k < d; ++k) acc += sQ[r * d + k] * sK[c * ld + k];
      sS[r * lds + c] = acc;
    }
    __syncthreads();
    for (int r = warp; r < rows; r += kWarps) {
      int64_t c0 = 0, c1 = 0;
      mask.tile_span(i0 + r, j0, cols, n, &c0, &c1);
      const bool vis = lane >= c0 && lane < c1;
      const float s = vis ? sS[r * lds + lane] : -INFINITY;
      const float m_old = sM[r];
      const float m_new = fmaxf(m_old, warp_max(s));
      const float p = vis ? softmax_exp(s - m_new) : 0.f;
      const float sum = warp_sum(p);
      sS[r * lds + lane] = p;
      if (lane == 0) {
        const float alpha = softmax_rescale(m_old, m_new);
        sA[r] = alpha;
        sL[r] = sL[r] * alpha + sum;
        sM[r] = m_new;
      }
    }
    __syncthreads();
    for (int e = tid; e < rows * d; e += kThreads) {
      const int r = e / d, k = e % d;
      float acc = sO[e] * sA[r];
      for (int c = 0; c < cols; ++c) acc += sS[r * lds + c] * sV[c * ld + k];
      sO[e] = acc;
    }
  }
  __syncthreads();
  for (int e = tid; e < rows * d; e += kThreads) store_f32(O + base + i0 * d + e, sO[e] / sL[e / d]);
  if (tid < rows) lse[head * n + i0 + tid] = softmax_lse(sM[tid], sL[tid]);
}

// D [heads*n] = rowwise dO . O, one warp per row.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    row_dot_kernel(int64_t rows, int d, const T* __restrict__ dO, const T* __restrict__ O, float* __restrict__ D) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  float acc = 0.f;
  for (int k = lane; k < d; k += 32) acc += load_f32(dO + row * d + k) * load_f32(O + row * d + k);
  acc = warp_sum(acc);
  if (lane == 0) D[row] = acc;
}

// Shared floats of the backward: K, V [kKeyTile][d+1]; dK, dV [kKeyTile][d];
// Q, dO [kBwdQ][d]; P, dS [kBwdQ][kKeyTile+1]; lse, D [kBwdQ].
int64_t backward_smem_floats(int d) {
  return 2 * kKeyTile * (d + 1) + 2 * kKeyTile * d + 2 * kBwdQ * d + 2 * kBwdQ * (kKeyTile + 1) + 2 * kBwdQ;
}

// dQ is fp32 whatever the storage: it is accumulated across key tiles.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(int64_t n, int d, SoftmaxMask mask, float scale, int64_t k_tiles, const T* __restrict__ Q,
                    const T* __restrict__ K, const T* __restrict__ V, const float* __restrict__ lse,
                    const float* __restrict__ D, const T* __restrict__ dO, float* __restrict__ dQ, T* __restrict__ dK,
                    T* __restrict__ dV) {
  extern __shared__ float smem[];
  const int ld = d + 1, lds = kKeyTile + 1;
  float* sK = smem;
  float* sV = sK + kKeyTile * ld;
  float* sdK = sV + kKeyTile * ld;
  float* sdV = sdK + kKeyTile * d;
  float* sQ = sdV + kKeyTile * d;
  float* sdO = sQ + kBwdQ * d;
  float* sP = sdO + kBwdQ * d;
  float* sdS = sP + kBwdQ * lds;
  float* sLse = sdS + kBwdQ * lds;
  float* sD = sLse + kBwdQ;

  const int64_t head = blockIdx.x / k_tiles;
  const int64_t j0 = (blockIdx.x % k_tiles) * kKeyTile;
  const int cols = static_cast<int>(min64(kKeyTile, n - j0));
  const int64_t base = head * n * d;
  const int tid = threadIdx.x;

  for (int e = tid; e < kKeyTile * d; e += kThreads) {
    const int c = e / d, k = e % d;
    const bool in = c < cols;
    sK[c * ld + k] = in ? load_f32(K + base + (j0 + c) * d + k) : 0.f;
    sV[c * ld + k] = in ? load_f32(V + base + (j0 + c) * d + k) : 0.f;
    sdK[e] = 0.f;
    sdV[e] = 0.f;
  }
  // Only the queries that see a key of this tile (causal: none before j0;
  // window: none more than window - 1 away).
  const int64_t i_end = mask.end_query(j0 + cols - 1, n);
  for (int64_t i0 = mask.first_query(j0); i0 < i_end; i0 += kBwdQ) {
    const int rows = static_cast<int>(min64(kBwdQ, i_end - i0));
    __syncthreads();  // the previous query tile is no longer read
    for (int e = tid; e < kBwdQ * d; e += kThreads) {
      const bool in = e / d < rows;
      sQ[e] = in ? load_f32(Q + base + i0 * d + e) : 0.f;
      sdO[e] = in ? load_f32(dO + base + i0 * d + e) : 0.f;
    }
    if (tid < kBwdQ) {
      sLse[tid] = tid < rows ? lse[head * n + i0 + tid] : 0.f;
      sD[tid] = tid < rows ? D[head * n + i0 + tid] : 0.f;
    }
    __syncthreads();
    for (int e = tid; e < kBwdQ * kKeyTile; e += kThreads) {
      const int r = e / kKeyTile, c = e % kKeyTile;
      float p = 0.f, ds = 0.f;
      if (r < rows && c < cols && mask.visible(i0 + r, j0 + c)) {
        float s = 0.f, dp = 0.f;
        for (int k = 0; k < d; ++k) {
          s += sQ[r * d + k] * sK[c * ld + k];
          dp += sdO[r * d + k] * sV[c * ld + k];
        }
        p = softmax_exp(scale * s - sLse[r]);
        ds = softmax_score_grad(p, dp, sD[r], scale);
      }
      sP[r * lds + c] = p;
      sdS[r * lds + c] = ds;
    }
    __syncthreads();
    for (int e = tid; e < kKeyTile * d; e += kThreads) {
      const int c = e / d, k = e % d;
      float acc_v = 0.f, acc_k = 0.f;
      for (int r = 0; r < rows; ++r) {
        acc_v += sP[r * lds + c] * sdO[r * d + k];
        acc_k += sdS[r * lds + c] * sQ[r * d + k];
      }
      sdV[e] += acc_v;
      sdK[e] += acc_k;
    }
    for (int e = tid; e < rows * d; e += kThreads) {
      const int r = e / d, k = e % d;
      float acc = 0.f;
      for (int c = 0; c < cols; ++c) acc += sdS[r * lds + c] * sK[c * ld + k];
      atomicAdd(&dQ[base + (i0 + r) * d + k], acc);
    }
  }
  __syncthreads();
  for (int e = tid; e < cols * d; e += kThreads) {
    store_f32(dK + base + j0 * d + e, sdK[e]);
    store_f32(dV + base + j0 * d + e, sdV[e]);
  }
}

// Rounds the fp32 dQ accumulator to the storage type.
template <typename T>
__global__ void narrow_kernel(int64_t count, const float* __restrict__ in, T* __restrict__ out) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_f32(out + k, in[k]);
}

void check_cuda_params(const ExecContext& ctx, const SoftmaxAttentionParams& p) {
  PF_REQUIRE(CudaError, ctx.device.is_cuda(), "softmax attention CUDA path called on " << ctx.device.str());
  PF_REQUIRE(ValueError, p.d <= kMaxD, "softmax attention on CUDA supports d <= " << kMaxD << ", got d=" << p.d);
  PF_REQUIRE(ValueError, p.heads * ceil_div(p.n, kBwdQ) < (int64_t{1} << 31),
             "softmax attention on CUDA: too many tiles for one grid (heads=" << p.heads << " n=" << p.n << ")");
}

template <typename T>
void forward_impl(const ExecContext& ctx, const SoftmaxAttentionParams& p, const T* Q, const T* K, const T* V, T* O,
                  float* lse) {
  const float scale = softmax_attention_scale(p);
  check_cuda_params(ctx, p);
  if (p.heads == 0 || p.n == 0) return;
  const cudaStream_t stream = cuda_stream(ctx);
  const int d = static_cast<int>(p.d);
  const size_t smem = static_cast<size_t>(forward_smem_floats(d)) * sizeof(float);
  PF_CUDA_CHECK(
      cudaFuncSetAttribute(forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int64_t q_tiles = ceil_div(p.n, kFwdQ);
  forward_kernel<T><<<static_cast<unsigned>(p.heads * q_tiles), kThreads, smem, stream>>>(
      p.n, d, SoftmaxMask{p.causal, p.window}, scale, q_tiles, Q, K, V, O, lse);
  PF_CUDA_CHECK_LAUNCH();
}

// Scratch of the backward, recorded in ctx.tracker: D [heads*n] and, for
// f16/bf16 storage, the fp32 dQ accumulator [heads*n*d]. The stream is
// synchronised before the scratch is freed.
template <typename T>
void backward_impl(const ExecContext& ctx, const SoftmaxAttentionParams& p, const T* Q, const T* K, const T* V,
                   const T* O, const float* lse, const T* dO, T* dQ, T* dK, T* dV) {
  const float scale = softmax_attention_scale(p);
  check_cuda_params(ctx, p);
  if (p.heads == 0 || p.n == 0) return;
  const cudaStream_t stream = cuda_stream(ctx);
  const int d = static_cast<int>(p.d);
  const int64_t rows = p.heads * p.n;
  constexpr bool kNarrow = !std::is_same<T, float>::value;
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "softmax attention backward on CUDA needs ctx.tracker for scratch");
  const Tensor scratch =
      Tensor::empty({rows + (kNarrow ? rows * d : 0)}, DType::f32, *ctx.tracker, "softmax_attention");
  float* D = scratch.data<float>();
  float* dQ32 = kNarrow ? D + rows : reinterpret_cast<float*>(dQ);
  row_dot_kernel<T><<<static_cast<unsigned>(ceil_div(rows, kWarps)), kThreads, 0, stream>>>(rows, d, dO, O, D);
  PF_CUDA_CHECK_LAUNCH();
  PF_CUDA_CHECK(cudaMemsetAsync(dQ32, 0, static_cast<size_t>(rows * d) * sizeof(float), stream));
  const size_t smem = static_cast<size_t>(backward_smem_floats(d)) * sizeof(float);
  PF_CUDA_CHECK(
      cudaFuncSetAttribute(backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int64_t k_tiles = ceil_div(p.n, kKeyTile);
  backward_kernel<T><<<static_cast<unsigned>(p.heads * k_tiles), kThreads, smem, stream>>>(
      p.n, d, SoftmaxMask{p.causal, p.window}, scale, k_tiles, Q, K, V, lse, D, dO, dQ32, dK, dV);
  PF_CUDA_CHECK_LAUNCH();
  if (kNarrow) {
    const int64_t count = rows * d;
    narrow_kernel<T><<<grid_size(count, 256, 1 << 20), 256, 0, stream>>>(count, dQ32, dQ);
    PF_CUDA_CHECK_LAUNCH();
  }
  // The scratch must outlive the kernels before it is returned to the allocator.
  PF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                    const float* K, const float* V, float* O, float* lse) {
  forward_impl<float>(ctx, p, Q, K, V, O, lse);
}

void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                     const float* K, const float* V, const float* O, const float* lse, const float* dO,
                                     float* dQ, float* dK, float* dV) {
  backward_impl<float>(ctx, p, Q, K, V, O, lse, dO, dQ, dK, dV);
}

void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage,
                                    const void* Q, const void* K, const void* V, void* O, float* lse) {
  switch (storage) {
    case DType::f32:
      return forward_impl(ctx, p, static_cast<const float*>(Q), static_cast<const float*>(K),
                          static_cast<const float*>(V), static_cast<float*>(O), lse);
    case DType::f16:
      return forward_impl(ctx, p, static_cast<const __half*>(Q), static_cast<const __half*>(K),
                          static_cast<const __half*>(V), static_cast<__half*>(O), lse);
    case DType::bf16:
      return forward_impl(ctx, p, static_cast<const __nv_bfloat16*>(Q), static_cast<const __nv_bfloat16*>(K),
                          static_cast<const __nv_bfloat16*>(V), static_cast<__nv_bfloat16*>(O), lse);
    default: break;
  }
  PF_REQUIRE(ValueError, false,
             "softmax_attention_forward on CUDA: unsupported storage " << dtype_name(storage) << " (f32, f16 or bf16)");
}

void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage,
                                     const void* Q, const void* K, const void* V, const void* O, const float* lse,
                                     const void* dO, void* dQ, void* dK, void* dV) {
  switch (storage) {
    case DType::f32:
      return backward_impl(ctx, p, static_cast<const float*>(Q), static_cast<const float*>(K),
                           static_cast<const float*>(V), static_cast<const float*>(O), lse,
                           static_cast<const float*>(dO), static_cast<float*>(dQ), static_cast<float*>(dK),
                           static_cast<float*>(dV));
    case DType::f16:
      return backward_impl(ctx, p, static_cast<const __half*>(Q), static_cast<const __half*>(K),
                           static_cast<const __half*>(V), static_cast<const __half*>(O), lse,
                           static_cast<const __half*>(dO), static_cast<__half*>(dQ), static_cast<__half*>(dK),
                           static_cast<__half*>(dV));
    case DType::bf16:
      return backward_impl(ctx, p, static_cast<const __nv_bfloat16*>(Q), static_cast<const __nv_bfloat16*>(K),
                           static_cast<const __nv_bfloat16*>(V), static_cast<const __nv_bfloat16*>(O), lse,
                           static_cast<const __nv_bfloat16*>(dO), static_cast<__nv_bfloat16*>(dQ),
                           static_cast<__nv_bfloat16*>(dK), static_cast<__nv_bfloat16*>(dV));
    default: break;
  }
  PF_REQUIRE(
      ValueError, false,
      "softmax_attention_backward on CUDA: unsupported storage " << dtype_name(storage) << " (f32, f16 or bf16)");
}

}  // namespace pf
