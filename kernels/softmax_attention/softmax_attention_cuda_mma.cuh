// Exact softmax attention on tensor cores (mma.sync through
// runtime/cuda_mma_tiles.cuh and runtime/cuda_mma_bf16_tiles.cuh, TF32 or
// bf16 operands, fp32 accumulation), in the FlashAttention-2 arrangement;
// included by softmax_attention_cuda.cuh, whose launch policy and mask they
// share. Tiles of 64 rows, four warps of 16 rows each, head sizes padded to
// DP = 64 or 128. The shared tiles (MmaTile<P>): in TF32, fp32 rows of DP + 4
// floats, each lane rounding the operands its fragments hold as it loads
// them; in bf16, rows of DP + 8 bf16 rounded once as the tile is stored, the
// fragments loaded by ldmatrix (half the shared memory and a fraction of the
// load instructions; the same rounded values, so the same bits).
//
// Forward: a block per (head, 64-query tile). Each warp keeps its 16 rows'
// output [16, DP], running max and sum in registers while 64-key tiles of K
// and V stream through shared memory, from the first key any of the tile's
// rows sees to the last (a window skips the tiles outside it; causal, those
// right of the diagonal). Per key tile: S = scale Q K^T (the product of the
// rounded operands, scaled in fp32, as the backward remakes it), the mask,
// the online softmax (row max and sum over the four lanes of a row), O += P V.
// Backward, without atomics, so dQ, dK and dV are the same from run to run:
// D = rowsum(dO o O) (row_dot_kernel), then
//   a block per (head, 64-key tile): each warp keeps dK, dV of its 16 keys in
//     registers over the 64-query tiles that see them, remaking
//     P^T = exp(scale K Q^T - lse) and dS^T = P^T o (V dO^T - D) scale;
//     dV += P^T dO, dK += dS^T Q;
//   a block per (head, 64-query tile): each warp keeps dQ of its 16 rows over
//     the key tiles they see, remaking P and dS; dQ += dS K.
// P and dS (and their transposes) stay in registers as the A operand of the
// products that take them: in bf16 the accumulator and A layouts of m16n8k16
// line up; in TF32 each 8-key step takes its k in the order the lanes hold
// their accumulators, and B's rows are read in that order
// (warp_mm_from_acc). The streamed
// tiles (K and V, or Q and dO) are double buffered where shared memory
// allows (`stages` 2): the next tile's copies run during the current tile's
// products, by cp.async for rows of 64 or 128 columns on 16-byte boundaries
// stored as the tiles hold them (fp32 rows into TF32 tiles: the fp32 model's
// case; bf16 rows into bf16 tiles: the bf16 model's), by loads otherwise.
// The exponentials are exp2_approx (runtime/cuda_mma.cuh, one instruction
// where softmax_exp's polynomial takes about 15), e^x = 2^(x log2 e) with the
// log2 e folded into the FMA that shifts the score: the operands are rounded
// to TF32 or bf16, 11 or 8 significant bits, so its last bits do not show;
// the fp32 kernels keep softmax_exp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/cuda_mma_bf16_tiles.cuh"
#include "runtime/cuda_mma_tiles.cuh"

namespace pf {
namespace softmax_cuda {
namespace {

constexpr int kMmaRows = 64;  // query and key tile rows: four warps of 16
static_assert(kMmaRows == 16 * kWarps, "one 16-row mma strip per warp");

// Head sizes are padded to one of these (zeros beyond d).
inline int mma_padded_d(int d) { return d <= 64 ? 64 : 128; }
// The shared tiles of TileMath P: their element (fp32, or bf16 bits) and
// the padding of their rows (DP + 4 floats; DP + 8 bf16, so that every row
// starts on a 16-byte boundary for ldmatrix and the eight rows of an 8x8
// tile fall in distinct banks).
template <TileMath P>
struct MmaTile {
  using E = float;
  static constexpr int kPad = 4;
};
template <>
struct MmaTile<TileMath::Bf16> {
  using E = uint16_t;
  static constexpr int kPad = 8;
};
template <TileMath P>
using TileElem = typename MmaTile<P>::E;
template <TileMath P>
__host__ __device__ constexpr int mma_ld(int DP) {
  return DP + MmaTile<P>::kPad;
}
// Bytes of one [kMmaRows, mma_ld] tile.
template <TileMath P>
int64_t mma_tile_bytes(int DP) {
  return int64_t{kMmaRows} * mma_ld<P>(DP) * int64_t{sizeof(TileElem<P>)};
}
inline int64_t mma_tile_bytes(TileMath math, int DP) {
  return math == TileMath::Bf16 ? mma_tile_bytes<TileMath::Bf16>(DP) : mma_tile_bytes<TileMath::Tf32>(DP);
}

// Shared bytes with `stages` buffers of each streamed tile: the forward's Q
// tile, K and V tiles; the backward's two resident tiles and two streamed
// tiles (P and dS stay in registers).
inline int64_t forward_mma_smem_bytes(TileMath math, int DP, int stages) {
  return (1 + 2 * stages) * mma_tile_bytes(math, DP);
}
inline int64_t backward_mma_smem_bytes(TileMath math, int DP, int stages) {
  return (2 + 2 * stages) * mma_tile_bytes(math, DP);
}
// The buffers each of the forward and the backward can have for head size d
// within `limit` bytes of shared memory per block: 2, 1, or 0 (the kernels do
// not fit). TF32: at d <= 64, 85 and 102 KiB with 2; at 64 < d <= 128, 165
// and 198 KiB with 2, 99 and 132 KiB with 1 (H100, H200: 2 and 2; A100: 1
// and 1). bf16: half of those (2 and 2 on all three).
struct MmaStages {
  int forward = 0, backward = 0;
};
inline MmaStages mma_stages(TileMath math, int d, int64_t limit) {
  const int DP = mma_padded_d(d);
  auto most = [&](auto bytes) {
    for (int stages : {2, 1})
      if (bytes(math, DP, stages) <= limit) return stages;
    return 0;
  };
  return MmaStages{most(forward_mma_smem_bytes), most(backward_mma_smem_bytes)};
}

// dst [kMmaRows, ld] = src rows [rows, d] (row stride d), zero after them up
// to DP columns and kMmaRows rows; bf16 tiles take the rounded values, two
// columns a 32-bit store.
template <TileMath P, typename T, int DP>
__device__ __forceinline__ void load_rows_padded(const T* __restrict__ src, int rows, int d, TileElem<P>* dst) {
  constexpr int ld = mma_ld<P>(DP);
  auto at = [&](int r, int c) { return r < rows && c < d ? load_f32(src + int64_t(r) * d + c) : 0.f; };
  if constexpr (P == TileMath::Bf16) {
    for (int e = threadIdx.x; e < kMmaRows * DP / 2; e += kThreads) {
      const int r = e / (DP / 2), c = 2 * (e % (DP / 2));
      *reinterpret_cast<uint32_t*>(dst + r * ld + c) = bf16x2_bits(at(r, c), at(r, c + 1));
    }
  } else {
    for (int e = threadIdx.x; e < kMmaRows * DP; e += kThreads) {
      const int r = e / DP, c = e % DP;
      dst[r * ld + c] = at(r, c);
    }
  }
}

// Starts dst [kMmaRows, ld] <- src rows [rows, d] (row stride d), zeros
// after them up to DP columns and kMmaRows rows: by cp.async when the rows
// are stored as the tile holds them (fp32 rows into TF32 tiles, bf16 rows
// into bf16 tiles), of exactly DP columns on a 16-byte boundary (the caller
// commits the group and waits for it), else by loads (done at return).
template <TileMath P, typename T, int DP>
__device__ __forceinline__ void start_rows(const T* __restrict__ src, int rows, int d, TileElem<P>* dst) {
  constexpr bool same = P == TileMath::Tf32 ? std::is_same<T, float>::value : IsBf16Storage<T>::value;
  if constexpr (same) {
    constexpr int per_copy = 16 / sizeof(T);  // elements in 16 bytes
    if (d == DP && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
      for (int e = threadIdx.x; e < kMmaRows * (DP / per_copy); e += kThreads) {
        const int r = e / (DP / per_copy), c = per_copy * (e % (DP / per_copy));
        TileElem<P>* to = dst + r * mma_ld<P>(DP) + c;
        if (r < rows) {
          cp_async_16(to, src + int64_t(r) * d + c);
        } else {
          for (int i = 0; i < 4; ++i) reinterpret_cast<uint32_t*>(to)[i] = 0u;
        }
      }
      return;
    }
  }
  load_rows_padded<P, T, DP>(src, rows, d, dst);
}

// body(j0, cols, a, b) for each 64-row tile [j0, j0 + cols) of [first, end)
// in order, with a, b its rows of A and B (row stride d) in shared memory.
// bufA and bufB hold `stages` tiles each; with 2 the next tile's copies run
// during body. Every thread calls it; body is called between two barriers.
template <TileMath P, typename T, int DP, typename Body>
__device__ __forceinline__ void stream_tiles(const T* __restrict__ A, const T* __restrict__ B, int d, int64_t first,
                                             int64_t end, int stages, TileElem<P>* bufA, TileElem<P>* bufB,
                                             Body&& body) {
  constexpr int tile = kMmaRows * mma_ld<P>(DP);
  auto start = [&](int64_t j0, int slot) {
    const int cols = static_cast<int>(min64(kMmaRows, end - j0));
    start_rows<P, T, DP>(A + j0 * d, cols, d, bufA + slot * tile);
    start_rows<P, T, DP>(B + j0 * d, cols, d, bufB + slot * tile);
    cp_async_commit();
  };
  if (first < end) start(first, 0);
  int slot = 0;
  for (int64_t j0 = first; j0 < end; j0 += kMmaRows) {
    const int64_t next = j0 + kMmaRows;
    if (stages == 2 && next < end)
      start(next, slot ^ 1);
    else
      cp_async_commit();  // an empty group: the wait below completes this tile's either way
    cp_async_wait<1>();
    __syncthreads();  // every thread's copies of this tile have landed
    body(j0, static_cast<int>(min64(kMmaRows, end - j0)), bufA + slot * tile, bufB + slot * tile);
    __syncthreads();  // the tile is read before its buffer is refilled
    if (stages == 2) {
      slot ^= 1;
    } else if (next < end) {
      start(next, 0);
    }
  }
}

// acc[j] += A rows [16] x B^T columns [8 j, 8 j + 8) over k in [0, K), for
// j < NJ, A and B row-major tiles: in TF32 one A fragment per k-step for the
// NJ products; in bf16 by ldmatrix (warp_mm_bf16).
template <TileMath P, int NJ>
__device__ __forceinline__ void warp_mm_abt(const TileElem<P>* A, int lda, const TileElem<P>* B, int ldb, int K,
                                            int lane, float (*acc)[4]) {
  if constexpr (P == TileMath::Bf16) {
    warp_mm_bf16<NJ>(A, lda, B, ldb, K, lane, acc);
  } else {
    const int g = lane / 4, t = lane % 4;
    for (int k0 = 0; k0 < K; k0 += Mma<P>::kStep) {
      uint32_t a[4];
      Mma<P>::template load_a<false>(A, lda, 0, k0, g, t, a);
      PF_UNROLL
      for (int j = 0; j < NJ; ++j) {
        uint32_t b[2];
        Mma<P>::template load_b<true>(B, ldb, k0, 8 * j, g, t, b);
        Mma<P>::mma(acc[j], a, b);
      }
    }
  }
}

// acc[j] += A B[:, 8 j .. 8 j + 8) for j < NJ, A the warp's accumulators of
// KT 8-column tiles, B a row-major tile (warp_mm_from_acc; in bf16 by
// ldmatrix, warp_mm_from_acc_bf16).
template <TileMath P, int NJ, int KT>
__device__ __forceinline__ void warp_mm_acc_b(const float (*a)[4], const TileElem<P>* B, int ldb, int lane,
                                              float (*acc)[4]) {
  if constexpr (P == TileMath::Bf16) {
    warp_mm_from_acc_bf16<NJ, KT>(a, B, ldb, lane, acc);
  } else {
    warp_mm_from_acc<P, NJ, KT>(a, B, ldb, lane / 4, lane % 4, acc);
  }
}

// The 8-row tiles of a streamed 64-row tile that the backward kernels take
// in one pass: all `tiles` (8), or half of them at DP = 128, where a lane's
// gradient accumulators take 64 (dQ) or 128 (dK, dV) floats, so that the
// scores and their gradients take 32 floats rather than 64 (nvcc spilled
// the bf16 key-gradient kernel and the TF32 query-gradient one at d = 128
// with whole tiles). The products over the passes keep their order (the
// passes cut the sum over the tile's rows between two of its 16-row
// steps), so the same bits.
__host__ __device__ constexpr int rows_a_pass(int DP, int tiles) { return DP > 64 ? tiles / 2 : tiles; }

// Max and sum over the four lanes that hold one accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <TileMath P, int DP, typename T>
__global__ void __launch_bounds__(kThreads)
    forward_mma_kernel(int64_t n_max, int d, SoftmaxMask mask, float scale, int64_t q_tiles, int stages,
                       const int64_t* __restrict__ spans, const T* __restrict__ Q, const T* __restrict__ K,
                       const T* __restrict__ V, T* __restrict__ O, float* __restrict__ lse) {
  PF_CUDA_SHARED_FLOATS(smem);
  using E = TileElem<P>;
  constexpr int ld = mma_ld<P>(DP), NT = DP / 8, KT = kMmaRows / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  E* sQ = reinterpret_cast<E*>(smem);
  E* bufK = sQ + kMmaRows * ld;
  E* bufV = bufK + stages * kMmaRows * ld;
  const HeadRows hr = head_rows(spans, blockIdx.x / q_tiles, n_max);
  const int64_t n = hr.n, i0 = (blockIdx.x % q_tiles) * kMmaRows;
  if (i0 >= n) return;  // past a shorter piece's end (uniform over the block)
  const int rows = static_cast<int>(min64(kMmaRows, n - i0));
  const int64_t base = hr.row0 * d;
  load_rows_padded<P, T, DP>(Q + base + i0 * d, rows, d, sQ);

  float o[NT][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows g and g + 8 of the warp's strip
  const int64_t kend = mask.end_key(i0 + rows - 1, n);
  stream_tiles<P, T, DP>(K + base, V + base, d, mask.first_key(i0), kend, stages, bufK, bufV,
                         [&](int64_t j0, int cols, const E* sK, const E* sV) {
                           float s[KT][4] = {};
                           warp_mm_abt<P, KT>(sQ + 16 * warp * ld, ld, sK, ld, DP, lane, s);
                           // The scores scaled in fp32, from the same rounded q and k the
                           // backward's products take.
                           PF_UNROLL
                           for (int j = 0; j < KT; ++j) PF_UNROLL
                           for (int r = 0; r < 4; ++r) s[j][r] *= scale;
                           // The mask per element only where some key of the tile is hidden
                           // from some row of the warp (a causal diagonal, a window's edges,
                           // the sequence's end): the same for the whole warp.
                           const int64_t r0 = i0 + 16 * warp;
                           if (!(cols == kMmaRows && r0 + 15 < n &&
                                 mask.all_visible(r0, r0 + 15, j0, j0 + kMmaRows - 1))) {
                             PF_UNROLL
                             for (int j = 0; j < KT; ++j) PF_UNROLL
                             for (int r = 0; r < 4; ++r) {
                               const int64_t i = r0 + mma_row(g, r);
                               const int c = 8 * j + mma_col(t, r);
                               if (c >= cols || i >= n || !mask.visible(i, j0 + c)) s[j][r] = -INFINITY;
                             }
                           }
                           float top[2] = {-INFINITY, -INFINITY};
                           PF_UNROLL
                           for (int j = 0; j < KT; ++j) PF_UNROLL
                           for (int r = 0; r < 4; ++r) top[r / 2] = fmaxf(top[r / 2], s[j][r]);
                           float alpha[2], shift[2], sum[2] = {0.f, 0.f};
                           PF_UNROLL
                           for (int h = 0; h < 2; ++h) {
                             const float m_new = fmaxf(m[h], quad_max(top[h]));
                             alpha[h] = m[h] == m_new ? 1.f : exp2_approx((m[h] - m_new) * kLog2e);
                             // In units of log2: a row with nothing visible yet keeps p = 0.
                             shift[h] = m_new == -INFINITY ? 0.f : m_new * kLog2e;
                             m[h] = m_new;
                           }
                           PF_UNROLL
                           for (int j = 0; j < KT; ++j) PF_UNROLL
                           for (int r = 0; r < 4; ++r) {
                             s[j][r] = exp2_approx(fmaf(s[j][r], kLog2e, -shift[r / 2]));  // P
                             sum[r / 2] += s[j][r];
                           }
                           PF_UNROLL
                           for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + quad_sum(sum[h]);
                           PF_UNROLL
                           for (int j = 0; j < NT; ++j) PF_UNROLL
                           for (int r = 0; r < 4; ++r) o[j][r] *= alpha[r / 2];
                           warp_mm_acc_b<P, NT, KT>(s, sV, ld, lane, o);  // O += P V
                         });
  PF_UNROLL
  for (int j = 0; j < NT; ++j) PF_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int row = 16 * warp + mma_row(g, r), c = 8 * j + mma_col(t, r);
    if (row < rows && c < d) store_f32(O + base + (i0 + row) * d + c, o[j][r] / l[r / 2]);
  }
  if (t == 0) PF_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = 16 * warp + g + 8 * h;
    if (row < rows) lse[hr.row0 + i0 + row] = softmax_lse(m[h], l[h]);
  }
}

// dK, dV of a 64-key tile over the query tiles that see it.
template <TileMath P, int DP, typename T>
__global__ void __launch_bounds__(kThreads)
    key_grad_mma_kernel(int64_t n_max, int d, SoftmaxMask mask, float scale, int64_t k_tiles, int stages,
                        const int64_t* __restrict__ spans, const T* __restrict__ Q, const T* __restrict__ K,
                        const T* __restrict__ V, const float* __restrict__ lse, const float* __restrict__ D,
                        const T* __restrict__ dO, T* __restrict__ dK, T* __restrict__ dV) {
  PF_CUDA_SHARED_FLOATS(smem);
  using E = TileElem<P>;
  constexpr int ld = mma_ld<P>(DP), NT = DP / 8, QT = kMmaRows / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  E* sK = reinterpret_cast<E*>(smem);
  E* sV = sK + kMmaRows * ld;
  E* bufQ = sV + kMmaRows * ld;
  E* bufdO = bufQ + stages * kMmaRows * ld;
  const HeadRows hr = head_rows(spans, blockIdx.x / k_tiles, n_max);
  const int64_t n = hr.n, j0 = (blockIdx.x % k_tiles) * kMmaRows;
  if (j0 >= n) return;  // past a shorter piece's end (uniform over the block)
  const int cols = static_cast<int>(min64(kMmaRows, n - j0));
  const int64_t base = hr.row0 * d;
  load_rows_padded<P, T, DP>(K + base + j0 * d, cols, d, sK);
  load_rows_padded<P, T, DP>(V + base + j0 * d, cols, d, sV);

  float dk[NT][4] = {}, dv[NT][4] = {};
  constexpr int QP = rows_a_pass(DP, QT);  // 8-query tiles a pass over a streamed tile
  const int64_t i_end = mask.end_query(j0 + cols - 1, n);
  stream_tiles<P, T, DP>(Q + base, dO + base, d, mask.first_query(j0), i_end, stages, bufQ, bufdO,
                         [&](int64_t i0, int rows, const E* sQ, const E* sdO) {
                           for (int q0 = 0; q0 < kMmaRows; q0 += 8 * QP) {
                             if (q0 >= rows) break;                  // uniform over the block
                             float st[QP][4] = {}, dpt[QP][4] = {};  // S^T = K Q^T and dP^T = V dO^T of the warp's keys
                             warp_mm_abt<P, QP>(sK + 16 * warp * ld, ld, sQ + q0 * ld, ld, DP, lane, st);
                             warp_mm_abt<P, QP>(sV + 16 * warp * ld, ld, sdO + q0 * ld, ld, DP, lane, dpt);
                             // P^T and dS^T where the key is seen (the mask per element only where
                             // some query of the pass does not see some key of the warp's).
                             const bool whole =
                                 q0 + 8 * QP <= rows && 16 * warp + 15 < cols &&
                                 mask.all_visible(i0 + q0, i0 + q0 + 8 * QP - 1, j0 + 16 * warp, j0 + 16 * warp + 15);
                             PF_UNROLL
                             for (int j = 0; j < QP; ++j) PF_UNROLL
                             for (int r = 0; r < 4; ++r) {
                               const int key = 16 * warp + mma_row(g, r), q = q0 + 8 * j + mma_col(t, r);
                               float p = 0.f, ds = 0.f;
                               if (whole || (key < cols && q < rows && mask.visible(i0 + q, j0 + key))) {
                                 p = exp2_approx(fmaf(st[j][r], scale * kLog2e, -lse[hr.row0 + i0 + q] * kLog2e));
                                 ds = softmax_score_grad(p, dpt[j][r], D[hr.row0 + i0 + q], scale);
                               }
                               st[j][r] = p;    // P^T
                               dpt[j][r] = ds;  // dS^T
                             }
                             warp_mm_acc_b<P, NT, QP>(st, sdO + q0 * ld, ld, lane, dv);  // dV += P^T dO
                             warp_mm_acc_b<P, NT, QP>(dpt, sQ + q0 * ld, ld, lane, dk);  // dK += dS^T Q
                           }
                         });
  PF_UNROLL
  for (int j = 0; j < NT; ++j) PF_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int key = 16 * warp + mma_row(g, r), c = 8 * j + mma_col(t, r);
    if (key < cols && c < d) {
      store_f32(dK + base + (j0 + key) * d + c, dk[j][r]);
      store_f32(dV + base + (j0 + key) * d + c, dv[j][r]);
    }
  }
}

// dQ of a 64-query tile over the key tiles it sees.
template <TileMath P, int DP, typename T>
__global__ void __launch_bounds__(kThreads)
    query_grad_mma_kernel(int64_t n_max, int d, SoftmaxMask mask, float scale, int64_t q_tiles, int stages,
                          const int64_t* __restrict__ spans, const T* __restrict__ Q, const T* __restrict__ K,
                          const T* __restrict__ V, const float* __restrict__ lse, const float* __restrict__ D,
                          const T* __restrict__ dO, T* __restrict__ dQ) {
  PF_CUDA_SHARED_FLOATS(smem);
  using E = TileElem<P>;
  constexpr int ld = mma_ld<P>(DP), NT = DP / 8, KT = kMmaRows / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  E* sQ = reinterpret_cast<E*>(smem);
  E* sdO = sQ + kMmaRows * ld;
  E* bufK = sdO + kMmaRows * ld;
  E* bufV = bufK + stages * kMmaRows * ld;
  const HeadRows hr = head_rows(spans, blockIdx.x / q_tiles, n_max);
  const int64_t n = hr.n, i0 = (blockIdx.x % q_tiles) * kMmaRows;
  if (i0 >= n) return;  // past a shorter piece's end (uniform over the block)
  const int rows = static_cast<int>(min64(kMmaRows, n - i0));
  const int64_t base = hr.row0 * d;
  load_rows_padded<P, T, DP>(Q + base + i0 * d, rows, d, sQ);
  load_rows_padded<P, T, DP>(dO + base + i0 * d, rows, d, sdO);
  float row_lse[2], row_D[2];  // rows g and g + 8 of the warp's strip
  PF_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = 16 * warp + g + 8 * h;
    row_lse[h] = row < rows ? lse[hr.row0 + i0 + row] * kLog2e : 0.f;  // in units of log2
    row_D[h] = row < rows ? D[hr.row0 + i0 + row] : 0.f;
  }

  float dq[NT][4] = {};
  constexpr int KP = rows_a_pass(DP, KT);  // 8-key tiles a pass over a streamed tile
  const int64_t kend = mask.end_key(i0 + rows - 1, n);
  stream_tiles<P, T, DP>(K + base, V + base, d, mask.first_key(i0), kend, stages, bufK, bufV,
                         [&](int64_t j0, int cols, const E* sK, const E* sV) {
                           for (int c0 = 0; c0 < kMmaRows; c0 += 8 * KP) {
                             if (c0 >= cols) break;                // uniform over the block
                             float s[KP][4] = {}, dp[KP][4] = {};  // S = Q K^T and dP = dO V^T of the warp's rows
                             warp_mm_abt<P, KP>(sQ + 16 * warp * ld, ld, sK + c0 * ld, ld, DP, lane, s);
                             warp_mm_abt<P, KP>(sdO + 16 * warp * ld, ld, sV + c0 * ld, ld, DP, lane, dp);
                             // dS where the key is seen (the mask per element only where some key
                             // of the pass is hidden from some row of the warp).
                             const bool whole =
                                 c0 + 8 * KP <= cols && 16 * warp + 15 < rows &&
                                 mask.all_visible(i0 + 16 * warp, i0 + 16 * warp + 15, j0 + c0, j0 + c0 + 8 * KP - 1);
                             PF_UNROLL
                             for (int j = 0; j < KP; ++j) PF_UNROLL
                             for (int r = 0; r < 4; ++r) {
                               const int row = 16 * warp + mma_row(g, r), c = c0 + 8 * j + mma_col(t, r);
                               float ds = 0.f;
                               if (whole || (c < cols && row < rows && mask.visible(i0 + row, j0 + c))) {
                                 const float p = exp2_approx(fmaf(s[j][r], scale * kLog2e, -row_lse[r / 2]));
                                 ds = softmax_score_grad(p, dp[j][r], row_D[r / 2], scale);
                               }
                               s[j][r] = ds;
                             }
                             warp_mm_acc_b<P, NT, KP>(s, sK + c0 * ld, ld, lane, dq);  // dQ += dS K
                           }
                         });
  PF_UNROLL
  for (int j = 0; j < NT; ++j) PF_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int row = 16 * warp + mma_row(g, r), c = 8 * j + mma_col(t, r);
    if (row < rows && c < d) store_f32(dQ + base + (i0 + row) * d + c, dq[j][r]);
  }
}

// The kernels for P, DP and the storage T: f(kernel, DP).
template <template <TileMath, int, typename> class K, typename T, typename F>
void with_mma_kernel(TileMath math, int d, F f) {
  const int DP = mma_padded_d(d);
  if (math == TileMath::Bf16) {
    if (DP == 64) return f(K<TileMath::Bf16, 64, T>::get(), DP);
    return f(K<TileMath::Bf16, 128, T>::get(), DP);
  }
  if (DP == 64) return f(K<TileMath::Tf32, 64, T>::get(), DP);
  f(K<TileMath::Tf32, 128, T>::get(), DP);
}
template <TileMath P, int DP, typename T>
struct ForwardMma {
  static auto get() { return forward_mma_kernel<P, DP, T>; }
};
template <TileMath P, int DP, typename T>
struct KeyGradMma {
  static auto get() { return key_grad_mma_kernel<P, DP, T>; }
};
template <TileMath P, int DP, typename T>
struct QueryGradMma {
  static auto get() { return query_grad_mma_kernel<P, DP, T>; }
};

// O, lse of the call on tensor cores (p.tile_math: Tf32 or Bf16), with
// `stages` buffers of the K and V tiles (mma_stages); one launch over all
// heads, or all pieces.
template <typename L, typename T>
void forward_mma(L& launch, const SoftmaxAttentionParams& p, float scale, int stages, const T* Q, const T* K,
                 const T* V, T* O, float* lse) {
  const int d = static_cast<int>(p.d);
  const int64_t q_tiles = ceil_div(p.n, kMmaRows);
  with_mma_kernel<ForwardMma, T>(p.tile_math, d, [&](auto kernel, int DP) {
    launch.blocks(kernel, p.heads * q_tiles, forward_mma_smem_bytes(p.tile_math, DP, stages), p.n, d,
                  SoftmaxMask{p.causal, p.window}, scale, q_tiles, stages, spans_of(p), Q, K, V, O, lse);
  });
}

// dQ, dK, dV of the call on tensor cores, each written once (no atomics),
// with `stages` buffers of the streamed tiles; D [rows of the buffers] is
// scratch (softmax_attention_rows).
template <typename L, typename T>
void backward_mma(L& launch, const SoftmaxAttentionParams& p, float scale, int stages, const T* Q, const T* K,
                  const T* V, const T* O, const float* lse, const T* dO, float* D, T* dQ, T* dK, T* dV) {
  const int d = static_cast<int>(p.d);
  const int64_t rows = p.heads * p.n, tiles = ceil_div(p.n, kMmaRows);
  const SoftmaxMask mask{p.causal, p.window};
  launch.blocks(row_dot_kernel<T>, ceil_div(rows, kWarps), 0, p.heads, p.n, spans_of(p), d, dO, O, D);
  with_mma_kernel<KeyGradMma, T>(p.tile_math, d, [&](auto kernel, int DP) {
    launch.blocks(kernel, p.heads * tiles, backward_mma_smem_bytes(p.tile_math, DP, stages), p.n, d, mask, scale, tiles,
                  stages, spans_of(p), Q, K, V, lse, static_cast<const float*>(D), dO, dK, dV);
  });
  with_mma_kernel<QueryGradMma, T>(p.tile_math, d, [&](auto kernel, int DP) {
    launch.blocks(kernel, p.heads * tiles, backward_mma_smem_bytes(p.tile_math, DP, stages), p.n, d, mask, scale, tiles,
                  stages, spans_of(p), Q, K, V, lse, static_cast<const float*>(D), dO, dQ);
  });
}

}  // namespace
}  // namespace softmax_cuda
}  // namespace pf
