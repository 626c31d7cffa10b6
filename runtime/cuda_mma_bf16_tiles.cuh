// Fragments of mma.sync m16n8k16 bf16 (runtime/cuda_mma.cuh) from tiles of
// bf16 in shared memory, by ldmatrix: for kernels that round their operands
// once, as they store a tile, instead of at every fragment load
// (runtime/cuda_mma_tiles.cuh). A tile is row-major with a leading dimension
// of `ld` 16-bit elements; every row starts on a 16-byte boundary (the tile
// and ld * 2 multiples of 16 bytes) and the column offsets are multiples of
// 8. With lane = threadIdx.x % 32:
//   ldm_a(A, lda, k0, lane, a)        rows 0..15, columns k0..k0+15 of A
//                                     (the A fragment)
//   ldm_b_rows(X, ldx, n0, k0, lane, b)   B = X^T, X's rows n0..n0+15 and
//                                     columns k0..k0+15: b[0..1] the B
//                                     fragment of columns n0..n0+7 of B,
//                                     b[2..3] of n0+8..n0+15
//   ldm_b_cols(Y, ldy, k0, n0, lane, b)   B = Y, Y's rows k0..k0+15 and
//                                     columns n0..n0+15 (ldmatrix .trans):
//                                     b[0..1] columns n0.., b[2..3] n0+8..
//   ldm_b_rows_x2(X, ldx, n0, k0, lane, b)   b[0..1] of ldm_b_rows alone
//                                     (ldmatrix.x2: columns n0..n0+7 of B)
//   warp_mm_bf16<NJ>(A, lda, X, ldx, K, lane, acc)   acc[j] += A X^T over k
//                                     in [0, K), columns 8j..8j+7, j < NJ
//   warp_mm_from_acc_bf16<NJ, KT>(a, Y, ldy, lane, acc)   acc[j] += A Y with
//                                     A the warp's accumulators a of KT
//                                     8-column tiles (its 16 x 8 KT block)
//   warp_mm_from_acc_bf16_rows<NJ, KT>(a, X, ldx, lane, acc, kt, nj)
//                                     acc[j] += A X^T, the same A, for the
//                                     first kt tiles of a and j < nj
// NJ and KT even. Lanes 8i..8i+7 give the row addresses of the 8x8 tile
// that lands in register i of every lane (ldmatrix.x4).
#pragma once

#include <cstdint>

#include "runtime/cuda_mma_tiles.cuh"

namespace pf {

// Rows 0..15, columns k0..k0+15: a0 (rows 0-7, columns 0-7), a1 (rows 8-15),
// a2 (rows 0-7, columns 8-15), a3 (rows 8-15, columns 8-15).
__device__ __forceinline__ void ldm_a(const uint16_t* A, int lda, int k0, int lane, uint32_t a[4]) {
  const int i = lane / 8, r = lane % 8;
  ldmatrix<4, false>(a, A + (r + 8 * (i % 2)) * lda + k0 + 8 * (i / 2));
}

// B = X^T: lane (g, t) needs X[n0 + g][k0 + 2t..] (b0) and X[n0 + g][k0 + 8 + 2t..] (b1),
// ldmatrix's plain layout over X's rows.
__device__ __forceinline__ void ldm_b_rows(const uint16_t* X, int ldx, int n0, int k0, int lane, uint32_t b[4]) {
  const int i = lane / 8, r = lane % 8;
  ldmatrix<4, false>(b, X + (n0 + r + 8 * (i / 2)) * ldx + k0 + 8 * (i % 2));
}

// Columns n0..n0+7 of B = X^T only: lanes 0..15 give the rows (lanes 16..31
// repeat them; ldmatrix.x2 reads the first 16 addresses).
__device__ __forceinline__ void ldm_b_rows_x2(const uint16_t* X, int ldx, int n0, int k0, int lane, uint32_t b[2]) {
  const int i = lane / 8 % 2, r = lane % 8;
  ldmatrix<2, false>(b, X + (n0 + r) * ldx + k0 + 8 * i);
}

// B = Y: lane (g, t) needs Y[k0 + 2t..][n0 + g] (b0) and Y[k0 + 8 + 2t..][n0 + g] (b1),
// two rows of one column: ldmatrix's transposed layout.
__device__ __forceinline__ void ldm_b_cols(const uint16_t* Y, int ldy, int k0, int n0, int lane, uint32_t b[4]) {
  const int i = lane / 8, r = lane % 8;
  ldmatrix<4, true>(b, Y + (k0 + r + 8 * (i % 2)) * ldy + n0 + 8 * (i / 2));
}

template <int NJ>
__device__ __forceinline__ void warp_mm_bf16(const uint16_t* A, int lda, const uint16_t* X, int ldx, int K, int lane,
                                             float (*acc)[4]) {
  static_assert(NJ % 2 == 0, "B fragments come in pairs of 8-column tiles");
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a[4];
    ldm_a(A, lda, k0, lane, a);
    PF_UNROLL
    for (int j = 0; j < NJ; j += 2) {
      uint32_t b[4];
      ldm_b_rows(X, ldx, 8 * j, k0, lane, b);
      mma_m16n8k16_bf16(acc[j], a, b, acc[j]);
      mma_m16n8k16_bf16(acc[j + 1], a, b + 2, acc[j + 1]);
    }
  }
}

// The A fragments from the accumulators (bf16_a_from_acc). All of A is
// rounded first: half the registers of the fp32 accumulators,
// which the caller can then drop.
template <int NJ, int KT>
__device__ __forceinline__ void warp_mm_from_acc_bf16(const float (*a)[4], const uint16_t* Y, int ldy, int lane,
                                                      float (*acc)[4]) {
  static_assert(NJ % 2 == 0 && KT % 2 == 0, "16-column steps and pairs of 8-column tiles");
  uint32_t f[KT / 2][4];
  PF_UNROLL
  for (int kk = 0; kk < KT / 2; ++kk) bf16_a_from_acc(a, kk, f[kk]);
  PF_UNROLL
  for (int kk = 0; kk < KT / 2; ++kk) PF_UNROLL
  for (int j = 0; j < NJ; j += 2) {
    uint32_t b[4];
    ldm_b_cols(Y, ldy, 16 * kk, 8 * j, lane, b);
    mma_m16n8k16_bf16(acc[j], f[kk], b, acc[j]);
    mma_m16n8k16_bf16(acc[j + 1], f[kk], b + 2, acc[j + 1]);
  }
}

// acc[j] += A X^T for j < nj, A the first kt (even) of the warp's KT
// accumulator tiles a (bf16_mm_from_acc: its fragments made as each step
// runs, so the accumulators stay live for the caller), B's fragments from
// X's rows, two 8-column tiles an ldmatrix.
template <int NJ, int KT>
__device__ __forceinline__ void warp_mm_from_acc_bf16_rows(const float (*a)[4], const uint16_t* X, int ldx, int lane,
                                                           float (*acc)[4], int kt = KT, int nj = NJ) {
  static_assert(NJ % 2 == 0, "pairs of 8-column tiles");
  bf16_mm_from_acc<NJ, KT, 2>(a, acc, kt, nj,
                              [&](int kk, int j, uint32_t b[4]) { ldm_b_rows(X, ldx, 8 * j, 16 * kk, lane, b); });
}

}  // namespace pf
