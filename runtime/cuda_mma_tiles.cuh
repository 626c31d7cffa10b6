// Fragments of mma.sync (runtime/cuda_mma.cuh) gathered from fp32 tiles in
// shared or global memory, for the CUDA kernels that keep their tiles in
// fp32 and round the operands as each lane loads its part: Mma<P> for
// P = TileMath::Tf32 (m16n8k8) and TileMath::Bf16 (m16n8k16), with
//   Mma<P>::kStep                 the k of one instruction
//   Mma<P>::load_a<TA>(A, lda, i0, k0, g, t, a[, ks])   rows i0..i0+15, k0..k0+kStep-1 of op(A)
//                                 (of op(A) diag(ks) when ks is given)
//   Mma<P>::load_b<TB>(B, ldb, k0, j0, g, t, b)   k0.., columns j0..j0+7 of op(B)
//   Mma<P>::mma(d, a, b)          d += A B in fp32
//   Mma<P>::word(row, u) / load_b_words<P>(w, at, k0, j0, g, t, b)   B = W^T
//                                 from W's rows rounded once into 32-bit
//                                 words (kPerWord elements each; word u of
//                                 row j at w[at(j, u)]), the same bits
//                                 load_b<true> gives from W itself;
//                                 ldm_b_words<P>: two 8-column tiles at
//                                 once by ldmatrix
//   warp_mm_from_acc<P, NJ, KT, TB>(a, B, ...)   a product whose A is the warp's accumulators
//                                 (in bf16 by bf16_mm_from_acc, which takes
//                                 B's fragments from a callable)
// where g = lane / 4, t = lane % 4, op(A)[i, k] = TA ? A[k lda + i] : A[i lda + k]
// and op(B)[k, j] = TB ? B[j ldb + k] : B[k ldb + j]. The accumulator's
// element r (0..3) of a lane is row g + 8 (r / 2), column 2 t + r % 2 of its
// 16x8 tile (mma_row, mma_col).
// Included by CUDA translation units and, under the block emulator
// (tests/support/cuda_block_emulator.h, which defines PF_EMULATED_MMA), by tests.
#pragma once

#include <cstdint>

#include "runtime/cuda_mma.cuh"
#include "runtime/tile_math.h"

// A loop the compiler should unroll (nvcc), or keep rolled: one copy of a
// large body (nvcc unrolled a loop over tiles four times, and then would not
// inline the body); nothing on the host compilers.
#if defined(__CUDACC__)
#define PF_UNROLL _Pragma("unroll")
#define PF_NO_UNROLL _Pragma("unroll 1")
#else
#define PF_UNROLL
#define PF_NO_UNROLL
#endif
// After a lambda's parameters: inline its body into the caller however large
// it is. A lambda nvcc calls instead receives its captures by reference,
// which puts them, and what they refer to (a kernel's arguments, its tiles'
// pointers), in local memory.
#define PF_INLINE_LAMBDA __attribute__((always_inline))

namespace pf {

// op(A)[i, k] = TA ? A[k lda + i] : A[i lda + k];  op(B)[k, j] = TB ? B[j ldb + k] : B[k ldb + j].
template <bool TA>
__device__ __forceinline__ float at_a(const float* A, int lda, int i, int k) {
  return TA ? A[k * lda + i] : A[i * lda + k];
}
// op(A)[i, k] times ks[k] when ks is not null: op(A) diag(ks).
template <bool TA>
__device__ __forceinline__ float at_a(const float* A, int lda, int i, int k, const float* ks) {
  const float v = at_a<TA>(A, lda, i, k);
  return ks ? v * ks[k] : v;
}
template <bool TB>
__device__ __forceinline__ float at_b(const float* B, int ldb, int k, int j) {
  return TB ? B[j * ldb + k] : B[k * ldb + j];
}

// The row and column, in its 16x8 tile, of element r of a lane's accumulator.
__device__ __forceinline__ int mma_row(int g, int r) { return g + 8 * (r / 2); }
__device__ __forceinline__ int mma_col(int t, int r) { return 2 * t + r % 2; }

// Tensor cores through mma.sync (layouts: runtime/cuda_mma.cuh, g = lane / 4,
// t = lane % 4). Each lane rounds the elements its fragment holds as it
// loads them from the tiles; accumulation is fp32 in the C fragments.
template <TileMath P>
struct Mma;

template <>
struct Mma<TileMath::Tf32> {
  static constexpr int kStep = 8;
  template <bool TA>
  __device__ static void load_a(const float* A, int lda, int i0, int k0, int g, int t, uint32_t a[4],
                                const float* ks = nullptr) {
    a[0] = tf32_bits(at_a<TA>(A, lda, i0 + g, k0 + t, ks));
    a[1] = tf32_bits(at_a<TA>(A, lda, i0 + g + 8, k0 + t, ks));
    a[2] = tf32_bits(at_a<TA>(A, lda, i0 + g, k0 + t + 4, ks));
    a[3] = tf32_bits(at_a<TA>(A, lda, i0 + g + 8, k0 + t + 4, ks));
  }
  template <bool TB>
  __device__ static void load_b(const float* B, int ldb, int k0, int j0, int g, int t, uint32_t b[2]) {
    b[0] = tf32_bits(at_b<TB>(B, ldb, k0 + t, j0 + g));
    b[1] = tf32_bits(at_b<TB>(B, ldb, k0 + t + 4, j0 + g));
  }
  // The A fragment of k-step over the columns of one 16x8 accumulator tile
  // c, with the step's k taken in the order 0, 2, 4, 6, 1, 3, 5, 7: the
  // fragment's (g, t) and (g, t + 4) are then the lane's own accumulators
  // (g, 2t) and (g, 2t + 1), so no lane needs another's. B's rows must come
  // in the same order (load_b_pairs).
  __device__ static void a_from_acc(const float c[4], uint32_t a[4]) {
    a[0] = tf32_bits(c[0]);
    a[1] = tf32_bits(c[2]);
    a[2] = tf32_bits(c[1]);
    a[3] = tf32_bits(c[3]);
  }
  // load_b<TB> with the rows of the step in a_from_acc's order.
  template <bool TB = false>
  __device__ static void load_b_pairs(const float* B, int ldb, int k0, int j0, int g, int t, uint32_t b[2]) {
    b[0] = tf32_bits(at_b<TB>(B, ldb, k0 + 2 * t, j0 + g));
    b[1] = tf32_bits(at_b<TB>(B, ldb, k0 + 2 * t + 1, j0 + g));
  }
  // Word u of a row of W: its element u, rounded.
  static constexpr int kPerWord = 1;
  __device__ static uint32_t word(const float* row, int u) { return tf32_bits(row[u]); }
  __device__ static void mma(float d[4], const uint32_t a[4], const uint32_t b[2]) { mma_m16n8k8_tf32(d, a, b, d); }
};

template <>
struct Mma<TileMath::Bf16> {
  static constexpr int kStep = 16;
  // Two consecutive k of a row (A) or of a column (B) per register, the lower k in the low half.
  template <bool TA>
  __device__ static uint32_t a_pair(const float* A, int lda, int i, int k, const float* ks) {
    return bf16x2_bits(at_a<TA>(A, lda, i, k, ks), at_a<TA>(A, lda, i, k + 1, ks));
  }
  template <bool TA>
  __device__ static void load_a(const float* A, int lda, int i0, int k0, int g, int t, uint32_t a[4],
                                const float* ks = nullptr) {
    a[0] = a_pair<TA>(A, lda, i0 + g, k0 + 2 * t, ks);
    a[1] = a_pair<TA>(A, lda, i0 + g + 8, k0 + 2 * t, ks);
    a[2] = a_pair<TA>(A, lda, i0 + g, k0 + 2 * t + 8, ks);
    a[3] = a_pair<TA>(A, lda, i0 + g + 8, k0 + 2 * t + 8, ks);
  }
  template <bool TB>
  __device__ static void load_b(const float* B, int ldb, int k0, int j0, int g, int t, uint32_t b[2]) {
    b[0] = bf16x2_bits(at_b<TB>(B, ldb, k0 + 2 * t, j0 + g), at_b<TB>(B, ldb, k0 + 2 * t + 1, j0 + g));
    b[1] = bf16x2_bits(at_b<TB>(B, ldb, k0 + 2 * t + 8, j0 + g), at_b<TB>(B, ldb, k0 + 2 * t + 9, j0 + g));
  }
  // Word u of a row of W: its elements 2u and 2u + 1, rounded, the lower in the low half.
  static constexpr int kPerWord = 2;
  __device__ static uint32_t word(const float* row, int u) { return bf16x2_bits(row[2 * u], row[2 * u + 1]); }
  __device__ static void mma(float d[4], const uint32_t a[4], const uint32_t b[2]) { mma_m16n8k16_bf16(d, a, b, d); }
};

// The B fragment of op(B) = W^T (k0.., columns j0..j0+7) from W's words
// (Mma<P>::word), word u of row j at w[at(j, u)]: TF32's b0 (t, g) and b1
// (t + 4, g) are words k0 + t and k0 + t + 4 of row j0 + g; bf16's b0
// (2t..2t+1, g) and b1 (2t+8.., g) are words k0 / 2 + t and k0 / 2 + t + 4.
template <TileMath P, class At>
__device__ __forceinline__ void load_b_words(const uint32_t* w, const At& at, int k0, int j0, int g, int t,
                                             uint32_t b[2]) {
  const int u = k0 / Mma<P>::kPerWord + t;
  b[0] = w[at(j0 + g, u)];
  b[1] = w[at(j0 + g, u + 4)];
}
// load_b_words of two 8-column tiles (columns j0..j0+7 in b[0..1],
// j0+8..j0+15 in b[2..3]) by one ldmatrix.x4: an 8x8 matrix of 16-bit
// elements is 8 rows of 4 words, and lane (g, t) receives word t of row g,
// which is b0 (or, 4 words on, b1) of both precisions. Each row's 4 words
// at(j, u..u+3) contiguous and on a 16-byte boundary (u a multiple of 4).
template <TileMath P, class At>
__device__ __forceinline__ void ldm_b_words(const uint32_t* w, const At& at, int k0, int j0, int lane, uint32_t b[4]) {
  const int i = lane / 8, r = lane % 8;
  ldmatrix<4, false>(b, w + at(j0 + r + 8 * (i / 2), k0 / Mma<P>::kPerWord + 4 * (i % 2)));
}

// The bf16 A fragment of the 16-column step kk of A [16, 8 KT] held as the
// warp's accumulators a: lane by lane, the accumulators of tiles 2 kk and
// 2 kk + 1 rounded (a0, a1: rows g, g + 8 at columns 2t, 2t + 1 of the
// first; a2, a3: the same of the second).
__device__ __forceinline__ void bf16_a_from_acc(const float (*a)[4], int kk, uint32_t f[4]) {
  f[0] = bf16x2_bits(a[2 * kk][0], a[2 * kk][1]);
  f[1] = bf16x2_bits(a[2 * kk][2], a[2 * kk][3]);
  f[2] = bf16x2_bits(a[2 * kk + 1][0], a[2 * kk + 1][1]);
  f[3] = bf16x2_bits(a[2 * kk + 1][2], a[2 * kk + 1][3]);
}

// acc[j] += A B in bf16 for j < nj, A the first kt (even) of the warp's KT
// accumulator tiles a, its fragment for each 16-column step kk made as
// the step runs (bf16_a_from_acc); b_of(kk, j, b) gives B's fragments of
// step kk for the S (1 or 2) 8-column tiles from j, two registers each.
// kt and nj below their capacities leave the rest of the unrolled loops
// predicated off.
template <int NJ, int KT, int S, class BOf>
__device__ __forceinline__ void bf16_mm_from_acc(const float (*a)[4], float (*acc)[4], int kt, int nj,
                                                 const BOf& b_of) {
  static_assert(KT % 2 == 0 && NJ % S == 0, "16-column steps, whole groups of B tiles");
  PF_UNROLL
  for (int kk = 0; kk < KT / 2; ++kk) {
    if (2 * kk >= kt) break;
    uint32_t f[4];
    bf16_a_from_acc(a, kk, f);
    PF_UNROLL
    for (int j = 0; j < NJ; j += S) {
      if (j >= nj) break;
      uint32_t b[2 * S];
      b_of(kk, j, b);
      PF_UNROLL
      for (int s = 0; s < S; ++s) mma_m16n8k16_bf16(acc[j + s], f, b + 2 * s, acc[j + s]);
    }
  }
}

// acc[j] += A op(B)[:, 8 j .. 8 j + 8) for j < nj (NJ at most), with A
// [16, 8 kt] the warp's accumulators a of kt (KT at most; even in bf16)
// 8-column tiles, and op(B) [8 kt, .] (TB: B holds its transpose) in
// shared or global memory. A never leaves the registers. In bf16 the A
// fragment of the 16-column step kk is, lane by lane, the accumulators of
// tiles 2 kk and 2 kk + 1 (a0, a1: rows g, g + 8 at columns 2t, 2t + 1; a2,
// a3: the same 8 columns on). In TF32 each 8-column tile is one step whose
// k runs in the order the lane holds its accumulators (Mma::a_from_acc),
// and B's rows are read in that order (Mma::load_b_pairs). kt and nj below
// their capacities leave the rest of the unrolled loops predicated off.
template <TileMath P, int NJ, int KT, bool TB = false>
__device__ __forceinline__ void warp_mm_from_acc(const float (*a)[4], const float* B, int ldb, int g, int t,
                                                 float (*acc)[4], int kt = KT, int nj = NJ) {
  if constexpr (P == TileMath::Bf16) {
    bf16_mm_from_acc<NJ, KT, 1>(a, acc, kt, nj, [&](int kk, int j, uint32_t b[2]) {
      Mma<TileMath::Bf16>::load_b<TB>(B, ldb, 16 * kk, 8 * j, g, t, b);
    });
  } else {
    using M = Mma<TileMath::Tf32>;
    PF_UNROLL
    for (int kk = 0; kk < KT; ++kk) {
      if (kk >= kt) break;
      uint32_t f[4];
      M::a_from_acc(a[kk], f);
      PF_UNROLL
      for (int j = 0; j < NJ; ++j) {
        if (j >= nj) break;
        uint32_t b[2];
        M::load_b_pairs<TB>(B, ldb, 8 * kk, 8 * j, g, t, b);
        M::mma(acc[j], f, b);
      }
    }
  }
}

}  // namespace pf
