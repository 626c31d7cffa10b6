// CUDA exact softmax attention, fp32 storage and math, per head of
// [heads, n, d] row-major (d <= 128); lse [heads, n].
// Forward: one block per (head, 32-row query tile); Q, the running output and
// the row statistics stay in shared memory while 32-row key tiles stream
// through (causal: tiles right of the diagonal are skipped, the diagonal tile
// masked); online softmax with one warp per row (lane = key column).
// Backward: D_i = dO_i . O_i (one warp per row), then one block per (head,
// 32-row key tile) accumulating dK, dV in shared memory over 16-row query
// tiles, P rebuilt from lse; dQ is accumulated across key tiles with atomics.
// Uses only sm_70-level features (no cp.async, no tensor-core intrinsics).
#include <cuda_runtime.h>

#include "kernels/softmax_attention/softmax_attention.h"
#include "kernels/softmax_attention/softmax_attention_math.h"
#include "runtime/check.h"
#include "runtime/cuda_check.cuh"

namespace pf {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kFwdQ = 32;     // forward query-tile rows
constexpr int kKeyTile = 32;  // key-tile rows (= warp size: one lane per key)
constexpr int kBwdQ = 16;     // backward query-tile rows
constexpr int kMaxD = 128;
static_assert(kKeyTile == 32, "the row softmax maps one key per lane");

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

__global__ void __launch_bounds__(kThreads)
    forward_kernel(int64_t n, int d, bool causal, float scale, int64_t q_tiles, const float* __restrict__ Q,
                   const float* __restrict__ K, const float* __restrict__ V, float* __restrict__ O,
                   float* __restrict__ lse) {
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
    sQ[e] = r < rows ? Q[base + (i0 + r) * d + e % d] * scale : 0.f;
    sO[e] = 0.f;
  }
  if (tid < kFwdQ) {
    sM[tid] = -INFINITY;
    sL[tid] = 0.f;
  }
  const int64_t kend = causal ? min64(n, i0 + rows) : n;
  for (int64_t j0 = 0; j0 < kend; j0 += kKeyTile) {
    const int cols = static_cast<int>(min64(kKeyTile, kend - j0));
    __syncthreads();  // the previous tile's K, V and S are no longer read
    for (int e = tid; e < kKeyTile * d; e += kThreads) {
      const int c = e / d, k = e % d;
      const bool in = c < cols;
      sK[c * ld + k] = in ? K[base + (j0 + c) * d + k] : 0.f;
      sV[c * ld + k] = in ? V[base + (j0 + c) * d + k] : 0.f;
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
      const int64_t vis = softmax_visible_count(causal, i0 + r, j0, cols);
      const float s = lane < vis ? sS[r * lds + lane] : -INFINITY;
      const float m_old = sM[r];
      const float m_new = fmaxf(m_old, warp_max(s));
      const float p = lane < vis ? softmax_exp(s - m_new) : 0.f;
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
  for (int e = tid; e < rows * d; e += kThreads) O[base + i0 * d + e] = sO[e] / sL[e / d];
  if (tid < rows) lse[head * n + i0 + tid] = softmax_lse(sM[tid], sL[tid]);
}

// D [heads*n] = rowwise dO . O, one warp per row.
__global__ void __launch_bounds__(kThreads) row_dot_kernel(int64_t rows, int d, const float* __restrict__ dO,
                                                           const float* __restrict__ O, float* __restrict__ D) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  float acc = 0.f;
  for (int k = lane; k < d; k += 32) acc += dO[row * d + k] * O[row * d + k];
  acc = warp_sum(acc);
  if (lane == 0) D[row] = acc;
}

// Shared floats of the backward: K, V [kKeyTile][d+1]; dK, dV [kKeyTile][d];
// Q, dO [kBwdQ][d]; P, dS [kBwdQ][kKeyTile+1]; lse, D [kBwdQ].
int64_t backward_smem_floats(int d) {
  return 2 * kKeyTile * (d + 1) + 2 * kKeyTile * d + 2 * kBwdQ * d + 2 * kBwdQ * (kKeyTile + 1) + 2 * kBwdQ;
}

__global__ void __launch_bounds__(kThreads)
    backward_kernel(int64_t n, int d, bool causal, float scale, int64_t k_tiles, const float* __restrict__ Q,
                    const float* __restrict__ K, const float* __restrict__ V, const float* __restrict__ lse,
                    const float* __restrict__ D, const float* __restrict__ dO, float* __restrict__ dQ,
                    float* __restrict__ dK, float* __restrict__ dV) {
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
    sK[c * ld + k] = in ? K[base + (j0 + c) * d + k] : 0.f;
    sV[c * ld + k] = in ? V[base + (j0 + c) * d + k] : 0.f;
    sdK[e] = 0.f;
    sdV[e] = 0.f;
  }
  // Causal: queries before j0 see no key of this tile.
  for (int64_t i0 = causal ? j0 : 0; i0 < n; i0 += kBwdQ) {
    const int rows = static_cast<int>(min64(kBwdQ, n - i0));
    __syncthreads();  // the previous query tile is no longer read
    for (int e = tid; e < kBwdQ * d; e += kThreads) {
      const bool in = e / d < rows;
      sQ[e] = in ? Q[base + i0 * d + e] : 0.f;
      sdO[e] = in ? dO[base + i0 * d + e] : 0.f;
    }
    if (tid < kBwdQ) {
      sLse[tid] = tid < rows ? lse[head * n + i0 + tid] : 0.f;
      sD[tid] = tid < rows ? D[head * n + i0 + tid] : 0.f;
    }
    __syncthreads();
    for (int e = tid; e < kBwdQ * kKeyTile; e += kThreads) {
      const int r = e / kKeyTile, c = e % kKeyTile;
      float p = 0.f, ds = 0.f;
      if (r < rows && c < cols && softmax_visible(causal, i0 + r, j0 + c)) {
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
    dK[base + j0 * d + e] = sdK[e];
    dV[base + j0 * d + e] = sdV[e];
  }
}

void check_cuda_params(const ExecContext& ctx, const SoftmaxAttentionParams& p) {
  PF_REQUIRE(CudaError, ctx.device.is_cuda(), "softmax attention CUDA path called on " << ctx.device.str());
  PF_REQUIRE(ValueError, p.d <= kMaxD, "softmax attention on CUDA supports d <= " << kMaxD << ", got d=" << p.d);
  PF_REQUIRE(ValueError, p.heads * ((p.n + kBwdQ - 1) / kBwdQ) < (int64_t{1} << 31),
             "softmax attention on CUDA: too many tiles for one grid (heads=" << p.heads << " n=" << p.n << ")");
}

}  // namespace

void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                    const float* K, const float* V, float* O, float* lse) {
  const float scale = softmax_attention_scale(p);
  check_cuda_params(ctx, p);
  if (p.heads == 0 || p.n == 0) return;
  auto stream = static_cast<cudaStream_t>(ctx.stream.handle);
  const int d = static_cast<int>(p.d);
  const size_t smem = static_cast<size_t>(forward_smem_floats(d)) * sizeof(float);
  PF_CUDA_CHECK(
      cudaFuncSetAttribute(forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int64_t q_tiles = (p.n + kFwdQ - 1) / kFwdQ;
  forward_kernel<<<static_cast<unsigned>(p.heads * q_tiles), kThreads, smem, stream>>>(p.n, d, p.causal, scale, q_tiles,
                                                                                       Q, K, V, O, lse);
  PF_CUDA_CHECK_LAUNCH();
}

void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                     const float* K, const float* V, const float* O, const float* lse, const float* dO,
                                     float* dQ, float* dK, float* dV) {
  const float scale = softmax_attention_scale(p);
  check_cuda_params(ctx, p);
  if (p.heads == 0 || p.n == 0) return;
  auto stream = static_cast<cudaStream_t>(ctx.stream.handle);
  const int d = static_cast<int>(p.d);
  const int64_t rows = p.heads * p.n;
  // D lives for the duration of the call: allocated through the tracker so
  // that it counts against the device cap (O(n) per head).
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "softmax attention backward on CUDA needs ctx.tracker for D");
  float* D = static_cast<float*>(device_allocate(*ctx.tracker, rows * 4, "softmax_attention"));
  try {
    row_dot_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, stream>>>(rows, d, dO, O, D);
    PF_CUDA_CHECK_LAUNCH();
    PF_CUDA_CHECK(cudaMemsetAsync(dQ, 0, static_cast<size_t>(rows * d) * sizeof(float), stream));
    const size_t smem = static_cast<size_t>(backward_smem_floats(d)) * sizeof(float);
    PF_CUDA_CHECK(
        cudaFuncSetAttribute(backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const int64_t k_tiles = (p.n + kKeyTile - 1) / kKeyTile;
    backward_kernel<<<static_cast<unsigned>(p.heads * k_tiles), kThreads, smem, stream>>>(
        p.n, d, p.causal, scale, k_tiles, Q, K, V, lse, D, dO, dQ, dK, dV);
    PF_CUDA_CHECK_LAUNCH();
    // D must outlive the kernels before it is returned to the allocator.
    PF_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    device_free(*ctx.tracker, D, rows * 4, "softmax_attention");
    throw;
  }
  device_free(*ctx.tracker, D, rows * 4, "softmax_attention");
}

}  // namespace pf
