// The CUDA exact softmax attention (softmax_attention_cuda.cu): kernels and
// the order of their launches, written against a launch policy so that the
// same code runs on a GPU and, for the tests, on the CPU under the block
// emulator of tests/support/cuda_block_emulator.h (fp32 storage there; the
// f16/bf16 loads and stores exist only under nvcc).
//
// Forward: one block per (head, 32-row query tile); Q, the running output and
// the row statistics stay in shared memory while 32-row key tiles stream
// through from the tile's first visible key to its last (causal: none right
// of the diagonal; window: none before the first row's window), each row
// masked to its visible span; online softmax with one warp per row (lane =
// key column).
// Decode (one query per head against its keys): one block per head, the
// scores of kThreads keys a tile, the online softmax over tiles, a thread
// per column of o.
// Backward: D_i = dO_i . O_i (one warp per row), then one block per (head,
// 32-row key tile) accumulating dK, dV in shared memory over 16-row query
// tiles, and one block per (head, 16-row query tile) accumulating dQ over
// 32-row key tiles, each rebuilding P and dS from lse and D: every sum in a
// fixed order, no atomics, so the same bits on every run.
//
// The same on tensor cores (SoftmaxAttentionParams::tile_math TF32 or bf16):
// forward_mma and backward_mma, softmax_attention_cuda_mma.cuh, included at
// the end.
//
// Launch policy L:
//   L.blocks(kernel, blocks, smem_bytes, args...)   kThreads per block
// Included by exactly one translation unit per binary (its kernels have
// internal linkage).
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#ifndef PF_CUDA_SHARED_FLOATS
// The block's dynamic shared memory as floats (the block emulator of the
// tests defines its own).
#define PF_CUDA_SHARED_FLOATS(name) extern __shared__ __align__(32) float name[]
#endif
#endif

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/softmax_attention/softmax_attention.h"
#include "kernels/softmax_attention/softmax_attention_math.h"
#include "runtime/int_math.h"
#include "runtime/row_spans.h"

namespace pf {
namespace softmax_cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kFwdQ = 32;     // forward query-tile rows
constexpr int kKeyTile = 32;  // key-tile rows (= warp size: one lane per key)
constexpr int kBwdQ = 16;     // backward query-tile rows
constexpr int kMaxD = 128;
static_assert(kKeyTile == 32, "the row softmax maps one key per lane");

__device__ __forceinline__ float load_f32(const float* p) { return *p; }
__device__ __forceinline__ void store_f32(float* p, float v) { *p = v; }
// bf16 storage: T = __nv_bfloat16 (IsBf16Storage), under nvcc and under the
// block emulator, which has the type too.
template <typename T>
struct IsBf16Storage : std::false_type {};
#if defined(__CUDACC__) || defined(PF_EMULATED_BF16)
template <>
struct IsBf16Storage<__nv_bfloat16> : std::true_type {};
__device__ __forceinline__ float load_f32(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f32(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
#endif
#if defined(__CUDACC__)
__device__ __forceinline__ float load_f32(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ void store_f32(__half* p, float v) { *p = __float2half_rn(v); }
#endif

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The rows of call head `head`: [row0, row0 + n) of the buffers; without
// pieces (spans null) head * n on, with them the piece's row0 and len.
struct HeadRows {
  int64_t row0, n;
};
__device__ __forceinline__ HeadRows head_rows(const int64_t* spans, int64_t head, int64_t n) {
  const RowSpan x = span_of(spans, head, n);
  return HeadRows{x.row0, x.len};
}

// The key tile from key j0 of the head at base: sK, sV [kKeyTile][d+1] hold
// its `cols` keys and values in fp32, zero rows after them.
template <typename T>
__device__ __forceinline__ void load_key_tile(const T* __restrict__ K, const T* __restrict__ V, int64_t base,
                                              int64_t j0, int cols, int d, float* sK, float* sV) {
  const int ld = d + 1;
  for (int e = threadIdx.x; e < kKeyTile * d; e += kThreads) {
    const int c = e / d, k = e % d;
    const bool in = c < cols;
    sK[c * ld + k] = in ? load_f32(K + base + (j0 + c) * d + k) : 0.f;
    sV[c * ld + k] = in ? load_f32(V + base + (j0 + c) * d + k) : 0.f;
  }
}

// Shared floats of the forward: Q, O [kFwdQ][d]; K, V [kKeyTile][d+1];
// S [kFwdQ][kKeyTile+1]; m, l, alpha [kFwdQ].
inline int64_t forward_smem_floats(int d) {
  return 2 * kFwdQ * d + 2 * kKeyTile * (d + 1) + kFwdQ * (kKeyTile + 1) + 3 * kFwdQ;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(int64_t n_max, int d, SoftmaxMask mask, float scale, int64_t q_tiles,
                   const int64_t* __restrict__ spans, const T* __restrict__ Q, const T* __restrict__ K,
                   const T* __restrict__ V, T* __restrict__ O, float* __restrict__ lse) {
  PF_CUDA_SHARED_FLOATS(smem);
  const int ld = d + 1, lds = kKeyTile + 1;
  float* sQ = smem;
  float* sO = sQ + kFwdQ * d;
  float* sK = sO + kFwdQ * d;
  float* sV = sK + kKeyTile * ld;
  float* sS = sV + kKeyTile * ld;
  float* sM = sS + kFwdQ * lds;
  float* sL = sM + kFwdQ;
  float* sA = sL + kFwdQ;

  const HeadRows hr = head_rows(spans, blockIdx.x / q_tiles, n_max);
  const int64_t n = hr.n, i0 = (blockIdx.x % q_tiles) * kFwdQ;
  if (i0 >= n) return;  // past a shorter piece's end (uniform over the block)
  const int rows = static_cast<int>(min64(kFwdQ, n - i0));
  const int64_t base = hr.row0 * d;
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
    load_key_tile(K, V, base, j0, cols, d, sK, sV);
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
  if (tid < rows) lse[hr.row0 + i0 + tid] = softmax_lse(sM[tid], sL[tid]);
}

// D [row] = dO . O of each row of the call's heads (heads of at most n rows,
// spans as head_rows), one warp per row.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    row_dot_kernel(int64_t heads, int64_t n, const int64_t* spans, int d, const T* __restrict__ dO,
                   const T* __restrict__ O, float* __restrict__ D) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (r >= heads * n) return;
  const HeadRows h = head_rows(spans, r / n, n);
  if (r % n >= h.n) return;
  const int64_t row = h.row0 + r % n;
  const int lane = threadIdx.x & 31;
  float acc = 0.f;
  for (int k = lane; k < d; k += 32) acc += load_f32(dO + row * d + k) * load_f32(O + row * d + k);
  acc = warp_sum(acc);
  if (lane == 0) D[row] = acc;
}

// Shared floats of the key-gradient kernel: K, V [kKeyTile][d+1]; dK, dV
// [kKeyTile][d]; Q, dO [kBwdQ][d]; P, dS [kBwdQ][kKeyTile+1]; lse, D [kBwdQ].
inline int64_t key_grad_smem_floats(int d) {
  return 2 * kKeyTile * (d + 1) + 2 * kKeyTile * d + 2 * kBwdQ * d + 2 * kBwdQ * (kKeyTile + 1) + 2 * kBwdQ;
}

// P and dS of query row r (of `rows` from i0) and key c (of `cols` from
// j0) from the tiles in shared memory: Q, dO [..][d], K, V [..][d+1]; zero
// where the key is not visible. The key and query kernels both make them
// here, so they agree to the bit.
__device__ __forceinline__ void score_and_grad(const SoftmaxMask& mask, float scale, int d, int64_t i0, int r,
                                               int rows, int64_t j0, int c, int cols, const float* sQ,
                                               const float* sdO, const float* sK, const float* sV, float lse_r,
                                               float D_r, float* p, float* ds) {
  *p = 0.f;
  *ds = 0.f;
  if (r < rows && c < cols && mask.visible(i0 + r, j0 + c)) {
    const int ld = d + 1;
    float s = 0.f, dp = 0.f;
    for (int k = 0; k < d; ++k) {
      s += sQ[r * d + k] * sK[c * ld + k];
      dp += sdO[r * d + k] * sV[c * ld + k];
    }
    *p = softmax_exp(scale * s - lse_r);
    *ds = softmax_score_grad(*p, dp, D_r, scale);
  }
}

// The query tile from row i0 of the head at hr: sQ, sdO [kBwdQ][d] hold
// its `rows` rows of Q and dO in fp32, sLse, sD [kBwdQ] their lse and D,
// zeros after them. No barrier.
template <typename T>
__device__ __forceinline__ void load_query_tile(const T* __restrict__ Q, const T* __restrict__ dO,
                                                const float* __restrict__ lse, const float* __restrict__ D,
                                                const HeadRows& hr, int64_t i0, int rows, int d, float* sQ,
                                                float* sdO, float* sLse, float* sD) {
  const int64_t base = hr.row0 * d;
  for (int e = threadIdx.x; e < kBwdQ * d; e += kThreads) {
    const bool in = e / d < rows;
    sQ[e] = in ? load_f32(Q + base + i0 * d + e) : 0.f;
    sdO[e] = in ? load_f32(dO + base + i0 * d + e) : 0.f;
  }
  if (threadIdx.x < kBwdQ) {
    const int r = threadIdx.x;
    sLse[r] = r < rows ? lse[hr.row0 + i0 + r] : 0.f;
    sD[r] = r < rows ? D[hr.row0 + i0 + r] : 0.f;
  }
}

// dK, dV of a 32-key tile over the 16-row query tiles that see it.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    key_grad_kernel(int64_t n_max, int d, SoftmaxMask mask, float scale, int64_t k_tiles,
                    const int64_t* __restrict__ spans, const T* __restrict__ Q, const T* __restrict__ K,
                    const T* __restrict__ V, const float* __restrict__ lse, const float* __restrict__ D,
                    const T* __restrict__ dO, T* __restrict__ dK, T* __restrict__ dV) {
  PF_CUDA_SHARED_FLOATS(smem);
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

  const HeadRows hr = head_rows(spans, blockIdx.x / k_tiles, n_max);
  const int64_t n = hr.n, j0 = (blockIdx.x % k_tiles) * kKeyTile;
  if (j0 >= n) return;  // past a shorter piece's end (uniform over the block)
  const int cols = static_cast<int>(min64(kKeyTile, n - j0));
  const int64_t base = hr.row0 * d;
  const int tid = threadIdx.x;

  load_key_tile(K, V, base, j0, cols, d, sK, sV);
  for (int e = tid; e < kKeyTile * d; e += kThreads) {
    sdK[e] = 0.f;
    sdV[e] = 0.f;
  }
  // Only the queries that see a key of this tile (causal: none before j0;
  // window: none more than window - 1 away).
  const int64_t i_end = mask.end_query(j0 + cols - 1, n);
  for (int64_t i0 = mask.first_query(j0); i0 < i_end; i0 += kBwdQ) {
    const int rows = static_cast<int>(min64(kBwdQ, i_end - i0));
    __syncthreads();  // the previous query tile is no longer read
    load_query_tile(Q, dO, lse, D, hr, i0, rows, d, sQ, sdO, sLse, sD);
    __syncthreads();
    for (int e = tid; e < kBwdQ * kKeyTile; e += kThreads) {
      const int r = e / kKeyTile, c = e % kKeyTile;
      score_and_grad(mask, scale, d, i0, r, rows, j0, c, cols, sQ, sdO, sK, sV, sLse[r], sD[r], &sP[r * lds + c],
                     &sdS[r * lds + c]);
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
  }
  __syncthreads();
  for (int e = tid; e < cols * d; e += kThreads) {
    store_f32(dK + base + j0 * d + e, sdK[e]);
    store_f32(dV + base + j0 * d + e, sdV[e]);
  }
}

// Shared floats of the query-gradient kernel: Q, dO, dQ [kBwdQ][d]; K, V
// [kKeyTile][d+1]; dS [kBwdQ][kKeyTile+1]; lse, D [kBwdQ].
inline int64_t query_grad_smem_floats(int d) {
  return 3 * kBwdQ * d + 2 * kKeyTile * (d + 1) + kBwdQ * (kKeyTile + 1) + 2 * kBwdQ;
}

// dQ of a 16-row query tile over the 32-key tiles it sees, in key order
// (dQ += dS K a tile at a time, each thread owning its elements of dQ).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    query_grad_kernel(int64_t n_max, int d, SoftmaxMask mask, float scale, int64_t q_tiles,
                      const int64_t* __restrict__ spans, const T* __restrict__ Q, const T* __restrict__ K,
                      const T* __restrict__ V, const float* __restrict__ lse, const float* __restrict__ D,
                      const T* __restrict__ dO, T* __restrict__ dQ) {
  PF_CUDA_SHARED_FLOATS(smem);
  const int ld = d + 1, lds = kKeyTile + 1;
  float* sQ = smem;
  float* sdO = sQ + kBwdQ * d;
  float* sdQ = sdO + kBwdQ * d;
  float* sK = sdQ + kBwdQ * d;
  float* sV = sK + kKeyTile * ld;
  float* sdS = sV + kKeyTile * ld;
  float* sLse = sdS + kBwdQ * lds;
  float* sD = sLse + kBwdQ;

  const HeadRows hr = head_rows(spans, blockIdx.x / q_tiles, n_max);
  const int64_t n = hr.n, i0 = (blockIdx.x % q_tiles) * kBwdQ;
  if (i0 >= n) return;  // past a shorter piece's end (uniform over the block)
  const int rows = static_cast<int>(min64(kBwdQ, n - i0));
  const int64_t base = hr.row0 * d;
  const int tid = threadIdx.x;

  load_query_tile(Q, dO, lse, D, hr, i0, rows, d, sQ, sdO, sLse, sD);
  for (int e = tid; e < kBwdQ * d; e += kThreads) sdQ[e] = 0.f;
  // Only the keys some query of the tile sees.
  const int64_t kend = mask.end_key(i0 + rows - 1, n);
  for (int64_t j0 = mask.first_key(i0); j0 < kend; j0 += kKeyTile) {
    const int cols = static_cast<int>(min64(kKeyTile, kend - j0));
    __syncthreads();  // the previous key tile and its dS are no longer read
    load_key_tile(K, V, base, j0, cols, d, sK, sV);
    __syncthreads();
    for (int e = tid; e < kBwdQ * kKeyTile; e += kThreads) {
      const int r = e / kKeyTile, c = e % kKeyTile;
      float p = 0.f;
      score_and_grad(mask, scale, d, i0, r, rows, j0, c, cols, sQ, sdO, sK, sV, sLse[r], sD[r], &p,
                     &sdS[r * lds + c]);
    }
    __syncthreads();
    for (int e = tid; e < rows * d; e += kThreads) {
      const int r = e / d, k = e % d;
      float acc = sdQ[e];
      for (int c = 0; c < cols; ++c) acc += sdS[r * lds + c] * sK[c * ld + k];
      sdQ[e] = acc;
    }
  }
  // Each thread stores the elements it summed (the same e as above).
  for (int e = tid; e < rows * d; e += kThreads) store_f32(dQ + base + i0 * d + e, sdQ[e]);
}

// Shared floats of the decode: q, o [d]; the tile's weights [kThreads];
// the warps' partial maxima and sums [kWarps].
inline int64_t decode_smem_floats(int d) { return 2 * d + kThreads + kWarps; }

// A value of every thread reduced over the block (max or sum); every thread
// gets the result. sRed holds kWarps floats; the last barrier lets the
// caller reuse it.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* sRed) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) sRed[warp] = v;
  __syncthreads();
  float r = sRed[0];
  for (int w = 1; w < kWarps; ++w) r = kMax ? fmaxf(r, sRed[w]) : r + sRed[w];
  __syncthreads();
  return r;
}

// One block per head: kThreads keys a tile (a thread per key's score), the
// online softmax over the tiles, and a thread per column of o.
__global__ void __launch_bounds__(kThreads)
    decode_kernel(int64_t n, int d, int64_t kv_stride, float scale, const float* __restrict__ q,
                  const float* __restrict__ K, const float* __restrict__ V, float* __restrict__ o) {
  PF_CUDA_SHARED_FLOATS(smem);
  float* sQ = smem;
  float* sO = sQ + d;
  float* sP = sO + d;
  float* sRed = sP + kThreads;
  const int64_t head = blockIdx.x;
  const float* Kh = K + head * kv_stride;
  const float* Vh = V + head * kv_stride;
  const int tid = threadIdx.x;
  for (int k = tid; k < d; k += kThreads) {
    sQ[k] = q[head * d + k] * scale;
    sO[k] = 0.f;
  }
  __syncthreads();
  float m = -INFINITY, l = 0.f;  // the same in every thread
  for (int64_t j0 = 0; j0 < n; j0 += kThreads) {
    const int cols = static_cast<int>(min64(kThreads, n - j0));
    float s = -INFINITY;
    if (tid < cols) {
      s = 0.f;
      for (int k = 0; k < d; ++k) s += sQ[k] * Kh[(j0 + tid) * d + k];
    }
    const float m_new = fmaxf(m, block_reduce<true>(s, sRed));
    const float p = tid < cols ? softmax_exp(s - m_new) : 0.f;
    sP[tid] = p;
    const float alpha = softmax_rescale(m, m_new);
    l = l * alpha + block_reduce<false>(p, sRed);  // its barriers also publish sP
    m = m_new;
    for (int k = tid; k < d; k += kThreads) {
      float acc = sO[k] * alpha;
      for (int c = 0; c < cols; ++c) acc += sP[c] * Vh[(j0 + c) * d + k];
      sO[k] = acc;
    }
    __syncthreads();  // sP is rewritten by the next tile
  }
  for (int k = tid; k < d; k += kThreads) o[head * d + k] = sO[k] / l;
}

// The pieces' table of the call on its device (runtime/row_spans.h), or null.
inline const int64_t* spans_of(const SoftmaxAttentionParams& p) { return p.pieces ? p.pieces->table() : nullptr; }

// O, lse of the call (all heads, or all pieces, in one launch); scale from
// softmax_attention_scale.
template <typename L, typename T>
void forward(L& launch, const SoftmaxAttentionParams& p, float scale, const T* Q, const T* K, const T* V, T* O,
             float* lse) {
  const int d = static_cast<int>(p.d);
  const int64_t q_tiles = ceil_div(p.n, kFwdQ);
  launch.blocks(forward_kernel<T>, p.heads * q_tiles, forward_smem_floats(d) * int64_t{sizeof(float)}, p.n, d,
                SoftmaxMask{p.causal, p.window}, scale, q_tiles, spans_of(p), Q, K, V, O, lse);
}

// dQ, dK, dV of the call; D [softmax_attention_rows] is scratch.
template <typename L, typename T>
void backward(L& launch, const SoftmaxAttentionParams& p, float scale, const T* Q, const T* K, const T* V, const T* O,
              const float* lse, const T* dO, float* D, T* dQ, T* dK, T* dV) {
  const int d = static_cast<int>(p.d);
  const SoftmaxMask mask{p.causal, p.window};
  launch.blocks(row_dot_kernel<T>, ceil_div(p.heads * p.n, kWarps), 0, p.heads, p.n, spans_of(p), d, dO, O, D);
  const int64_t k_tiles = ceil_div(p.n, kKeyTile), q_tiles = ceil_div(p.n, kBwdQ);
  launch.blocks(key_grad_kernel<T>, p.heads * k_tiles, key_grad_smem_floats(d) * int64_t{sizeof(float)}, p.n, d,
                mask, scale, k_tiles, spans_of(p), Q, K, V, lse, static_cast<const float*>(D), dO, dK, dV);
  launch.blocks(query_grad_kernel<T>, p.heads * q_tiles, query_grad_smem_floats(d) * int64_t{sizeof(float)}, p.n,
                d, mask, scale, q_tiles, spans_of(p), Q, K, V, lse, static_cast<const float*>(D), dO, dQ);
}

// o [heads, d] of one query per head against n keys at kv_stride.
template <typename L>
void decode(L& launch, const SoftmaxAttentionParams& p, float scale, int64_t kv_stride, const float* q, const float* K,
            const float* V, float* o) {
  const int d = static_cast<int>(p.d);
  launch.blocks(decode_kernel, p.heads, decode_smem_floats(d) * int64_t{sizeof(float)}, p.n, d, kv_stride, scale, q, K,
                V, o);
}

}  // namespace
}  // namespace softmax_cuda
}  // namespace pf

#include "kernels/softmax_attention/softmax_attention_cuda_mma.cuh"
