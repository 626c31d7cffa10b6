// Block-level tile routines of the fused CUDA FAVOR+ kernels
// (favor_attention_cuda.cu): every thread of the block calls each routine,
// which ends with __syncthreads(). Tiles live in shared memory (or, for the
// padded projection and the states, in global memory) with every dimension
// padded to a multiple of 16 and the padding kept at zero, so that one
// product routine serves all shapes:
//   block_mm   C = alpha op(A) op(B) + beta C with fp32 accumulation, in the
//              call's TileMath: tensor cores through mma.sync
//              (runtime/cuda_mma.cuh: TF32 m16n8k8 or bf16 m16n8k16, the
//              operands rounded as each lane loads its fragment; in bf16
//              also block_mm_bf16_abt, from bf16 tiles by ldmatrix) when the
//              code is compiled for sm_80 or newer (or for the block
//              emulator, PF_EMULATED_MMA); otherwise, and for TileMath::Fp32,
//              fp32 FMAs in 4x4 register blocks.
//   make_features / feature_grad / weight_grad   the feature map of a tile
//              of rows, its backward, and the gradient of the projection,
//              with the per-element math of feature_map_math.h.
// Included through favor_attention_cuda_fused.cuh (by favor_attention_cuda.cu,
// favor_attention_cuda_resident_tf32.cu and _bf16.cu, and by the emulated
// test under tests/support/cuda_block_emulator.h).
#pragma once

#if defined(__CUDACC__)
// The block's dynamic shared memory as floats (the block emulator of the
// tests defines its own).
#define PF_CUDA_SHARED_FLOATS(name) extern __shared__ __align__(32) float name[]
#endif
// The tensor-core path: on sm_80 and newer, and under the block emulator.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(PF_EMULATED_MMA)
#define PF_FAVOR_MMA_TILES 1
#endif

#include <cstdint>
#include <type_traits>

#include "kernels/feature_map/feature_map_math.h"
#include "kernels/linear_attention/linear_attention_math.h"
#include "runtime/cuda_mma_bf16_tiles.cuh"
#include "runtime/cuda_mma_tiles.cuh"
#include "runtime/tile_math.h"

namespace pf {
namespace favor_cuda {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Sizes of one call, true and padded to multiples of 16.
struct Dims {
  int n, d, D1;       // positions, head dim, d + 1
  int dp, mp, D1p;    // padded d, slice width, D1
  int ct;             // rows per tile (16 or 32)
  bool smem_state;    // the running state [mp, D1p] a block updates lives in shared memory (Tiles::S)
  bool resident;      // the kernels that carry a state keep it in registers (favor_attention_cuda_resident.cuh)
  bool smem_projection;  // and those kernels keep the slice's projection in shared memory, rounded (Tiles::proj)
  int seg_len, segs;  // rows per segment (a multiple of 32), segments per head
  int w_heads;        // projections: head h uses the (h mod w_heads)-th
  float data_scale, inv_sqrt_m, eps;
  bool softmax, half_norm, elu;  // softmax: exponential features (FAVOR+, exp); half_norm: minus |x|^2/2
  TileMath math;                 // the products' operands: fp32, or rounded to TF32 or bf16
  int m_all, ms, slices;         // all features, in slices of ms (the last may be shorter): a block per slice
  // Per slice: the state [mp, D1p] and the padded projection [mp, dp].
  __host__ __device__ int64_t state_floats() const { return int64_t(mp) * D1p; }
  __host__ __device__ int packed_size() const { return 1 + m_all * D1; }
  __host__ __device__ int64_t projection_floats() const { return int64_t(mp) * dp; }
  // Features of slice z, the first of them z * ms.
  __host__ __device__ int slice_features(int z) const { return ms < m_all - z * ms ? ms : m_all - z * ms; }
};

// The features of the block's slice (blockIdx.z), derived where they are
// used: a kernel that wrote them into its Args would work on a copy of the
// whole Args, which ptxas keeps in local memory once the strips take the
// registers (the bidirectional query segments with 32 feature tiles
// spilled 16 bytes; the tile kernels took up to 111 registers for 64).
__device__ inline int block_features(const Dims& D) { return D.slice_features(blockIdx.z); }

// Row stride of a shared tile of `cols` (a multiple of 16) columns. A
// warp's fragment load takes row g, column t (or row t, column g) of a
// step, g < 8, t < 4: with a stride that is a multiple of 32 floats those
// elements share 4 or 8 banks, so such tiles get 4 more floats a row (then
// no bank serves more than 2 of them). A stride of 16 mod 32 is left as it
// is (2 or 4 to a bank), so that the 32-row tiles with the carried state
// still fit H100's 227 KiB at d = 64, m = 256.
constexpr int kTileSkew = 4;
__host__ __device__ constexpr int tile_ld(int cols) { return cols % 32 == 0 ? cols + kTileSkew : cols; }

// The index of word u of row j of the projection's words in shared memory
// (Tiles::proj), `words` a row. Rows of a multiple of 32 words are not
// padded but swizzled: the columns of row j XOR 4 (j mod 8), so that the
// lanes' fragment loads (rows g, words 8a + t, g < 8, t < 4) meet 32
// different banks without the 4 words a row that tile_ld would add (which
// TF32 at d = 64, m = 256 has no room for).
__host__ __device__ constexpr int projection_word(int words, int j, int u) {
  return j * words + (words % 32 == 0 ? u ^ (4 * (j % 8)) : u);
}

// Shared memory of a block: the tiles of one chunk of rows, and (with
// Dims::smem_state) the state the block carries from tile to tile.
struct Tiles {
  // [ct, dp] [ct, mp] x2 [ct, D1p] x2 [ct, ct] x2 [ct, mp] [ct, D1p], rows tile_ld(cols) apart
  float *X, *Pq, *Pk, *VP, *G, *A, *B, *WK, *DX;
  float *c, *cq, *L, *w, *rowsum;                 // [ct] each: c, cq the keys' and queries' log-scales
  float* scalar;                                  // [8]
  float* S = nullptr;                             // [mp, D1p] with Dims::smem_state
  // With Dims::resident, the stage: rows of the next tile copied in while
  // the current tile runs, two [ct, dp] tiles (its k and v, or its o and
  // d_o) and two [ct] vectors (its den and raw row scales); X takes its q
  // rows. The kernels that stage rows keep their state in registers, so the
  // stage shares S's room (the causal backward's second sweep, which keeps
  // its state in S, stages nothing).
  float *stage_a = nullptr, *stage_b = nullptr, *stage_den = nullptr, *stage_L = nullptr;
  __host__ __device__ static int64_t stage_floats(const Dims& D) {
    return D.resident ? 2 * int64_t(D.ct) * tile_ld(D.dp) + 2 * D.ct : 0;
  }
  // With Dims::smem_projection, after the stage: the block's padded
  // projection [mp, dp] as the tensor cores' B words (Mma::word: TF32, or
  // bf16 pairs), projection_words(D) a row, word u of row j at
  // projection_word(words, j, u).
  uint32_t* proj = nullptr;
  __host__ __device__ static int projection_words(const Dims& D) { return D.math == TileMath::Bf16 ? D.dp / 2 : D.dp; }
  // The room after the tiles: the carried state, or the stage and the
  // projection where they take more (the resident kernels use the room for
  // those only).
  __host__ __device__ static int64_t floats(const Dims& D) {
    const int64_t ct = D.ct, state = D.smem_state ? D.state_floats() : 0;
    const int64_t staged = stage_floats(D) + (D.smem_projection ? int64_t(D.mp) * projection_words(D) : 0);
    return ct * tile_ld(D.dp) + 3 * ct * tile_ld(D.mp) + 3 * ct * tile_ld(D.D1p) + 2 * ct * tile_ld(D.ct) + 5 * ct + 8 +
           (state > staged ? state : staged);
  }
  __device__ explicit Tiles(const Dims& D, float* base) {
    const int ct = D.ct;
    float* p = base;
    auto take = [&](int64_t count) {
      float* out = p;
      p += count;
      return out;
    };
    X = take(int64_t(ct) * tile_ld(D.dp));
    Pq = take(int64_t(ct) * tile_ld(D.mp));
    Pk = take(int64_t(ct) * tile_ld(D.mp));
    WK = take(int64_t(ct) * tile_ld(D.mp));
    VP = take(int64_t(ct) * tile_ld(D.D1p));
    G = take(int64_t(ct) * tile_ld(D.D1p));
    DX = take(int64_t(ct) * tile_ld(D.D1p));
    A = take(int64_t(ct) * tile_ld(ct));
    B = take(int64_t(ct) * tile_ld(ct));
    c = take(ct);
    cq = take(ct);
    L = take(ct);
    w = take(ct);
    rowsum = take(ct);
    scalar = take(8);
    float* room = p;  // S and the stage: 16-byte aligned (every size above is a multiple of 4)
    if (D.smem_state) S = room;
    if (D.resident) {
      stage_a = room;
      stage_b = stage_a + int64_t(ct) * tile_ld(D.dp);
      stage_den = stage_b + int64_t(ct) * tile_ld(D.dp);
      stage_L = stage_den + ct;
    }
    if (D.smem_projection) proj = reinterpret_cast<uint32_t*>(room + stage_floats(D));
  }
};

// The routines from here on are each file's own (an anonymous namespace):
// a file that compiles the kernels of one TileMath only defines
// PF_FAVOR_TILE_MATH to it before including this header
// (favor_attention_cuda_resident_tf32.cu and _bf16.cu), and tile_math(D)
// is then that constant, so nvcc leaves the other precisions' branches out
// of every routine: half the compile time of those files, and fewer
// registers and spills in most of their kernels (docs/results/sass.md). Elsewhere
// (favor_attention_cuda.cu, the block emulator) it is D.math.
namespace {

#ifdef PF_FAVOR_TILE_MATH
__device__ constexpr TileMath tile_math(const Dims&) { return PF_FAVOR_TILE_MATH; }
#else
__device__ inline TileMath tile_math(const Dims& D) { return D.math; }
#endif

// ---- products -------------------------------------------------------------------
// Diagonal weights folded into a product (each null when absent):
//   rows  C's row i is scaled by rows[i] (C = alpha diag(rows) op(A) op(B) + beta C)
//   k     op(A)'s column k by k[k] before it is rounded (op(A) diag(k) op(B))
// so that no pass over a tile (and its barrier) scales it first.
struct Diag {
  const float* rows = nullptr;
  const float* k = nullptr;
};
__device__ inline Diag row_weights(const float* w) {
  Diag d;
  d.rows = w;
  return d;
}

// alpha acc, scaled by the row's weight, plus beta times the old value.
__device__ __forceinline__ float product_out(float alpha, float acc, const Diag& w, int row, float beta,
                                             const float* old) {
  float v = alpha * acc;
  if (w.rows) v *= w.rows[row];
  return beta == 0.f ? v : v + beta * *old;
}

// fp32 FMAs: each thread owns 4x4 outputs of a 64x64 block tile.
template <bool TA, bool TB>
__device__ void block_mm_fma(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
                             float beta, float* C, int ldc, const Diag& w) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i0 = 0; i0 < M; i0 += 64) {
    for (int j0 = 0; j0 < N; j0 += 64) {
      const int ib = i0 + ty * 4, jb = j0 + tx * 4;
      if (ib >= M || jb >= N) continue;  // M, N are multiples of 16: a thread's 4x4 block is all in or all out
      float acc[4][4] = {};
      for (int k = 0; k < K; ++k) {
        float a[4], b[4];
        PF_UNROLL
        for (int r = 0; r < 4; ++r) a[r] = at_a<TA>(A, lda, ib + r, k, w.k);
        PF_UNROLL
        for (int q = 0; q < 4; ++q) b[q] = at_b<TB>(B, ldb, k, jb + q);
        PF_UNROLL
        for (int r = 0; r < 4; ++r) PF_UNROLL
        for (int q = 0; q < 4; ++q) acc[r][q] = fmaf(a[r], b[q], acc[r][q]);
      }
      PF_UNROLL
      for (int r = 0; r < 4; ++r) PF_UNROLL
      for (int q = 0; q < 4; ++q) {
        float* out = C + (ib + r) * ldc + jb + q;
        *out = product_out(alpha, acc[r][q], w, ib + r, beta, out);
      }
    }
  }
}

#ifdef PF_FAVOR_MMA_TILES
// The B operand of block_mm_mma: op(B) of fp32 B, rounded as each lane
// loads its fragment (FloatB), or W^T from W's rows already rounded into
// words (WordsB, Tiles::proj), or a bf16 tile (Bf16RowsB). All give a lane
// the same bits.
template <bool TB>
struct FloatB {
  const float* B;
  int ldb;
  template <TileMath P>
  __device__ void load(int k0, int j0, int g, int t, uint32_t b[2]) const {
    Mma<P>::template load_b<TB>(B, ldb, k0, j0, g, t, b);
  }
};
struct WordsB {
  const uint32_t* w;
  int words;  // a row
  template <TileMath P>
  __device__ void load(int k0, int j0, int g, int t, uint32_t b[2]) const {
    load_b_words<P>(
        w, [&](int j, int u) { return projection_word(words, j, u); }, k0, j0, g, t, b);
  }
  // Columns j0..j0+15 at once (b[0..1], b[2..3]) by ldmatrix: a row's 4
  // words from u stay together under projection_word's swizzle (it moves
  // groups of 4 words), on 16-byte boundaries (Tiles::proj is on one, and
  // a row is dp or dp / 2 words, multiples of 8).
  template <TileMath P>
  static constexpr bool kPairs = true;
  template <TileMath P>
  __device__ void load_pair(int k0, int j0, int lane, uint32_t b[4]) const {
    ldm_b_words<P>(
        w, [&](int j, int u) { return projection_word(words, j, u); }, k0, j0, lane, b);
  }
};
// Whether a B operand loads two 8-column tiles at once in precision P
// (its kPairs<P> and load_pair<P>).
template <class B, TileMath P, class = void>
struct LoadsPairs : std::false_type {};
template <class B, TileMath P>
struct LoadsPairs<B, P, std::enable_if_t<B::template kPairs<P>>> : std::true_type {};
// op(B) = X^T from a bf16 tile X (bf16_tile_ld rows; FeaturesBf16) by
// ldmatrix: the bits FloatB<true> rounds from the fp32 X it was made from.
struct Bf16RowsB {
  const uint16_t* X;
  int ldx;
  template <TileMath P>
  __device__ void load(int k0, int j0, int g, int t, uint32_t b[2]) const {
    static_assert(P == TileMath::Bf16, "bf16 tiles feed bf16 products");
    ldm_b_rows_x2(X, ldx, j0, k0, 4 * g + t, b);
  }
};
// op(B) = W itself [mp, dp] (k the features, n the columns of d) from the
// same words: the feature backward's s T W. The same bits as FloatB<false>
// reading W: TF32's b0 (t, g), b1 (t + 4, g) are word j0 + g of rows
// k0 + t, k0 + t + 4; bf16's b0 (2t..2t+1, g) is the half g mod 2 of word
// (j0 + g) / 2 of rows k0 + 2t and k0 + 2t + 1 (b1 8 rows on), the two
// halves packed as one pair.
struct WordsBT {
  const uint32_t* w;
  int words;  // a row
  template <TileMath P>
  __device__ void load(int k0, int j0, int g, int t, uint32_t b[2]) const {
    const int c = j0 + g;
    if constexpr (P == TileMath::Bf16) {
      const int u = c / 2, shift = 16 * (c % 2);
      PF_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int f = k0 + 2 * t + 8 * r;
        const uint32_t lo = (w[projection_word(words, f, u)] >> shift) & 0xffffu;
        const uint32_t hi = (w[projection_word(words, f + 1, u)] >> shift) & 0xffffu;
        b[r] = lo | (hi << 16);
      }
    } else {
      b[0] = w[projection_word(words, k0 + t, c)];
      b[1] = w[projection_word(words, k0 + t + 4, c)];
    }
  }
  // bf16: columns j0..j0+15 at once (b[0..1], b[2..3]) by ldmatrix.trans
  // over W's rows k0..k0+15 as 16-bit elements (ldm_b_cols' matrices: a
  // row's 8 elements from j0 or j0 + 8 are 4 words that the swizzle keeps
  // together on a 16-byte boundary). TF32's 32-bit elements have no
  // transposed ldmatrix.
  template <TileMath P>
  static constexpr bool kPairs = P == TileMath::Bf16;
  template <TileMath P>
  __device__ void load_pair(int k0, int j0, int lane, uint32_t b[4]) const {
    const int i = lane / 8, r = lane % 8;
    const uint32_t* row = w + projection_word(words, k0 + r + 8 * (i % 2), (j0 + 8 * (i / 2)) / 2);
    ldmatrix<4, true>(b, row);
  }
};

// The A operand of block_mm_mma: op(A) diag(ks) of fp32 A, rounded as each
// lane loads its fragment (FloatA), or a bf16 tile by ldmatrix (Bf16A: the
// bits FloatA<false> rounds from the fp32 tile it was made from).
template <bool TA>
struct FloatA {
  const float* A;
  int lda;
  const float* ks;
  template <TileMath P>
  __device__ void load(int i0, int k0, int g, int t, uint32_t a[4]) const {
    Mma<P>::template load_a<TA>(A, lda, i0, k0, g, t, a, ks);
  }
};
struct Bf16A {
  const uint16_t* A;
  int lda;
  template <TileMath P>
  __device__ void load(int i0, int k0, int g, int t, uint32_t a[4]) const {
    static_assert(P == TileMath::Bf16, "bf16 tiles feed bf16 products");
    ldm_a(A + i0 * lda, lda, k0, 4 * g + t, a);
  }
};

// Each warp owns output strips of 16 rows and NB 8-column tiles, the A
// fragment loaded once per k-step for the NB products (B's two tiles at a
// time where it loads pairs); strips go to the warps in turn. w.rows
// scales C's rows (w.k belongs to the A operand).
template <TileMath P, int NB, class AOp, class BOp>
__device__ void block_mm_mma(int M, int N, int K, float alpha, const AOp& A, const BOp& B, float beta, float* C,
                             int ldc, const Diag& w) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int strips_n = N / (8 * NB), strips = (M / 16) * strips_n;
  for (int s = threadIdx.x / 32; s < strips; s += kWarps) {
    const int i0 = (s / strips_n) * 16, j0 = (s % strips_n) * 8 * NB;
    float acc[NB][4] = {};
    for (int k0 = 0; k0 < K; k0 += Mma<P>::kStep) {
      uint32_t a[4];
      A.template load<P>(i0, k0, g, t, a);
      if constexpr (LoadsPairs<BOp, P>::value && NB % 2 == 0) {
        PF_UNROLL
        for (int nb = 0; nb < NB; nb += 2) {
          uint32_t b[4];
          B.template load_pair<P>(k0, j0 + 8 * nb, lane, b);
          Mma<P>::mma(acc[nb], a, b);
          Mma<P>::mma(acc[nb + 1], a, b + 2);
        }
      } else {
        PF_UNROLL
        for (int nb = 0; nb < NB; ++nb) {
          uint32_t b[2];
          B.template load<P>(k0, j0 + 8 * nb, g, t, b);
          Mma<P>::mma(acc[nb], a, b);
        }
      }
    }
    PF_UNROLL
    for (int nb = 0; nb < NB; ++nb) {
      PF_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int row = i0 + mma_row(g, r);
        float* out = C + row * ldc + j0 + 8 * nb + mma_col(t, r);
        *out = product_out(alpha, acc[nb][r], w, row, beta, out);
      }
    }
  }
}

// The widest strips (16x32, 16x16, 16x8) of which there are at least as
// many as warps: the wider, the fewer loads of each A fragment (with
// 32-row tiles, a product of N = 128, 160, ... columns takes 16x32: the
// projections, U = s X W^T, at such mp); then a barrier.
template <TileMath P, bool TA, class BOp>
__device__ void block_mm_tensor(int M, int N, int K, float alpha, const float* A, int lda, const BOp& B, float beta,
                                float* C, int ldc, const Diag& w) {
  const FloatA<TA> a{A, lda, w.k};
  if ((M / 16) * (N / 32) >= kWarps && N % 32 == 0)
    block_mm_mma<P, 4>(M, N, K, alpha, a, B, beta, C, ldc, w);
  else if ((M / 16) * (N / 16) >= kWarps)
    block_mm_mma<P, 2>(M, N, K, alpha, a, B, beta, C, ldc, w);
  else
    block_mm_mma<P, 1>(M, N, K, alpha, a, B, beta, C, ldc, w);
  __syncthreads();
}

// C [M, N] = A X^T from bf16 tiles (bf16_tile_ld rows; M, N, K multiples
// of 16) by ldmatrix, in strips of 16x8: the same k order, so the same bits
// as block_mm over the fp32 tiles these were rounded from. Then a barrier.
__device__ inline void block_mm_bf16_abt(int M, int N, int K, const uint16_t* A, int lda, const uint16_t* X, int ldx,
                                         float* C, int ldc) {
  block_mm_mma<TileMath::Bf16, 1>(M, N, K, 1.f, Bf16A{A, lda}, Bf16RowsB{X, ldx}, 0.f, C, ldc, Diag{});
  __syncthreads();
}
#endif

// C[M, N] = alpha diag(w.rows) op(A) diag(w.k) op(B) + beta C (beta = 0: C
// is not read; Diag). M, N and K are multiples of 16: every tile here is.
template <bool TA, bool TB>
__device__ void block_mm(const Dims& D, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                         int ldb, float beta, float* C, int ldc, const Diag& w = Diag{}) {
#ifdef PF_FAVOR_MMA_TILES
  if (tile_math(D) == TileMath::Tf32)
    return block_mm_tensor<TileMath::Tf32, TA>(M, N, K, alpha, A, lda, FloatB<TB>{B, ldb}, beta, C, ldc, w);
  if (tile_math(D) == TileMath::Bf16)
    return block_mm_tensor<TileMath::Bf16, TA>(M, N, K, alpha, A, lda, FloatB<TB>{B, ldb}, beta, C, ldc, w);
#endif
  (void)D;  // only the tensor-core path reads it
  block_mm_fma<TA, TB>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, w);
  __syncthreads();
}

// ---- warp reductions -------------------------------------------------------------
// Sum / max of one value per lane over the 32 lanes of the warp; every lane gets it.
__device__ inline float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// ---- loads ----------------------------------------------------------------------
// dst[ct, ldd] = src rows [rows, cols] (row stride cols), zero elsewhere;
// copy_tile without a barrier, load_tile with one.
__device__ inline void copy_tile(const float* src, int rows, int cols, float* dst, int ct, int ldd) {
  for (int e = threadIdx.x; e < ct * ldd; e += kThreads) {
    const int i = e / ldd, j = e % ldd;
    dst[e] = i < rows && j < cols ? src[int64_t(i) * cols + j] : 0.f;
  }
}
__device__ inline void load_tile(const float* src, int rows, int cols, float* dst, int ct, int ldd) {
  copy_tile(src, rows, cols, dst, ct, ldd);
  __syncthreads();
}

// VP = [v 1] rows (v's row stride ldv), zero padding.
__device__ inline void load_vprime(const Dims& D, const float* v, int ldv, int rows, float* VP) {
  for (int e = threadIdx.x; e < D.ct * D.D1p; e += kThreads) {
    const int i = e / D.D1p, j = e % D.D1p;
    VP[i * tile_ld(D.D1p) + j] = i >= rows ? 0.f : j < D.d ? v[int64_t(i) * ldv + j] : j == D.d ? 1.f : 0.f;
  }
  __syncthreads();
}

#ifdef PF_FAVOR_MMA_TILES
// Starts dst [ct, dp] <- src rows [rows, cols] (row stride cols), zero
// elsewhere, as copy_tile does: by cp.async (16-byte copies that land at
// the caller's cp_async_commit and cp_async_wait) where cols is a multiple
// of 4 and src on a 16-byte boundary, else by copy_tile (done at return).
// sm_80 and newer.
__device__ inline void start_tile(const float* src, int rows, int cols, float* dst, int ct, int dp) {
  if (cols % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    const int chunks = dp / 4;  // per row
    for (int e = threadIdx.x; e < ct * chunks; e += kThreads) {
      const int i = e / chunks, j = 4 * (e % chunks);
      float* to = dst + i * dp + j;
      if (i < rows && j < cols) {
        cp_async_16(to, src + int64_t(i) * cols + j);
      } else {
        PF_UNROLL
        for (int u = 0; u < 4; ++u) to[u] = 0.f;
      }
    }
    return;
  }
  copy_tile(src, rows, cols, dst, ct, dp);
}
// Starts dst[i] <- src[i] for the first `rows` entries by 4-byte cp.async
// (landing as start_tile's copies do); the rest of dst is not written.
__device__ inline void start_vector(const float* src, int rows, float* dst) {
  for (int i = threadIdx.x; i < rows; i += kThreads) cp_async_4(dst + i, src + i);
}
// The staged rows have landed, for every thread.
__device__ inline void wait_rows() {
  cp_async_wait<0>();
  __syncthreads();
}
// Those of every group but the newest have (the causal backward's: its
// keys and row scales, while its q lands).
__device__ inline void wait_rows_but_newest() {
  cp_async_wait<1>();
  __syncthreads();
}
// VP = [v 1] from a v staged at VP's row stride by start_tile (zeros past
// column d): the ones of its rows. The caller syncs before VP is read.
__device__ inline void finish_vprime(const Dims& D, float* VP, int rows) {
  for (int i = threadIdx.x; i < rows; i += kThreads) VP[i * tile_ld(D.D1p) + D.d] = 1.f;
}
#endif

// G rows = gradient_row(o, den, d_o) (linear_attention_math.h), one warp per
// row; o and d_o rows ld floats apart (d in global memory, tile_ld(dp) staged).
// No barrier: every caller runs row_scales next, which reads none of G and
// ends with one.
__device__ inline void load_gradient(const Dims& D, const float* o, const float* den, const float* d_o, int ld,
                                     int rows, float* G) {
  const int lane = threadIdx.x % 32;
  for (int i = threadIdx.x / 32; i < D.ct; i += kWarps) {
    float* g = G + i * tile_ld(D.D1p);
    if (i >= rows) {
      for (int j = lane; j < D.D1p; j += 32) g[j] = 0.f;
      continue;
    }
    const float inv = 1.0f / guarded_denominator(den[i]);
    const float *oi = o + int64_t(i) * ld, *gi = d_o + int64_t(i) * ld;
    float dot = 0.f;
    for (int j = lane; j < D.d; j += 32) dot += gi[j] * oi[j];
    dot = warp_sum(dot);
    for (int j = lane; j < D.D1p; j += 32) g[j] = j < D.d ? gi[j] * inv : j == D.d ? -dot * inv : 0.f;
  }
}

// ---- feature map ----------------------------------------------------------------
// The block's projection: the head's padded W [mp, dp] in global memory and,
// where a kernel has made them (Tiles::proj), its words in shared memory,
// which the projection product then reads instead.
struct Projection {
  const float* W;
  const uint32_t* words = nullptr;
  __device__ Projection(const float* Wp) : W(Wp) {}  // implicit: the words are optional
  __device__ Projection(const float* Wp, const uint32_t* w) : W(Wp), words(w) {}
};

// U [ct, mp] = s X W^T of the tile's rows X [ct, dp].
__device__ inline void project_rows(const Dims& D, const Tiles& t, const Projection& W, float* U) {
  const int lx = tile_ld(D.dp), lu = tile_ld(D.mp);
#ifdef PF_FAVOR_MMA_TILES
  if (W.words) {
    const WordsB B{W.words, Tiles::projection_words(D)};
    if (tile_math(D) == TileMath::Bf16)
      return block_mm_tensor<TileMath::Bf16, false>(D.ct, D.mp, D.dp, D.data_scale, t.X, lx, B, 0.f, U, lu, Diag{});
    return block_mm_tensor<TileMath::Tf32, false>(D.ct, D.mp, D.dp, D.data_scale, t.X, lx, B, 0.f, U, lu, Diag{});
  }
#endif
  block_mm<false, true>(D, D.ct, D.mp, D.dp, D.data_scale, t.X, lx, W.W, D.dp, 0.f, U, lu);
}

// Where make_features_into puts a tile's features: row(D, i, lane, f)
// stores f(l) for the columns l < mp of row i (the lanes of one warp).
//   FeaturesF32   fp32 [ct, tile_ld(mp)], which may be the products' tile itself
//   FeaturesBf16  bf16 [ct, bf16_tile_ld(mp)], two columns a 32-bit store,
//                 rounded as the TF32/bf16 products' fragment loads round
//                 (Mma<Bf16>): the operand bits of a product read from
//                 there by ldmatrix are those read from fp32 features
struct FeaturesF32 {
  float* Phi;
  template <class F>
  __device__ void row(const Dims& D, int i, int lane, F f) const {
    float* out = Phi + i * tile_ld(D.mp);
    for (int l = lane; l < D.mp; l += 32) out[l] = f(l);
  }
};
// Row stride of a bf16 tile of `cols` (a multiple of 16) columns: rows on
// 16-byte boundaries for ldmatrix, 16 bytes apart modulo 128 (an odd
// multiple of 16 bytes), so the 8 rows of an 8x8 matrix meet 8 distinct
// groups of banks. ct rows of it take at most the bytes of an fp32 tile of
// the same columns (tile_ld), whose room it can share.
__host__ __device__ constexpr int bf16_tile_ld(int cols) { return cols + 8; }
#ifdef PF_FAVOR_MMA_TILES
struct FeaturesBf16 {
  uint16_t* Phi;
  template <class F>
  __device__ void row(const Dims& D, int i, int lane, F f) const {
    uint16_t* out = Phi + i * bf16_tile_ld(D.mp);
    for (int l = 2 * lane; l < D.mp; l += 64) *reinterpret_cast<uint32_t*>(out + l) = bf16x2_bits(f(l), f(l + 1));
  }
};
#endif

// The features of the rows of X [ct, dp] (the first `rows`; padded rows and
// columns are 0) into out, by way of U [ct, tile_ld(mp)] (the projections,
// then the exponents; out may be U itself); c[i] = row log-scale (FAVOR+,
// exp), 0 (Relu, Elu), or the empty log-scale for padded rows, when c is
// not null. W is the head's padded projection.
template <class Out>
__device__ inline void make_features_into(const Dims& D, const Tiles& t, const Projection& W, float* U, const Out& out,
                                          float* c, int rows) {
  project_rows(D, t, W, U);
  const int lane = threadIdx.x % 32, m = block_features(D);
  for (int i = threadIdx.x / 32; i < D.ct; i += kWarps) {
    float* u = U + i * tile_ld(D.mp);
    if (i >= rows) {
      out.row(D, i, lane, [](int) { return 0.f; });
      if (c && lane == 0) c[i] = kEmptyLogScale;
      continue;
    }
    float top = 0.f;
    if (D.softmax) {
      float h = 0.f;
      if (D.half_norm) {
        const float* x = t.X + i * tile_ld(D.dp);
        float sq = 0.f;
        for (int j = lane; j < D.d; j += 32) sq += x[j] * x[j];
        sq = warp_sum(sq);
        h = 0.5f * D.data_scale * D.data_scale * sq;
      }
      top = -INFINITY;
      for (int l = lane; l < m; l += 32) {
        u[l] = favor_exponent(u[l], h);
        top = fmaxf(top, u[l]);
      }
      top = warp_max(top);
#ifdef PF_FAVOR_MMA_TILES
      // On tensor cores, whose products round the features to TF32 or bf16,
      // exp2_approx (u - top exact where they are close, so the row's top
      // feature is m^(-1/2) exactly).
      if (tile_math(D) != TileMath::Fp32) {
        // FeaturesBf16 reads u[2 lane], u[2 lane + 1], which other lanes
        // wrote above: a shuffle does not order shared memory, __syncwarp does.
        __syncwarp();
        out.row(D, i, lane, [&](int l) { return l < m ? D.inv_sqrt_m * exp2_approx((u[l] - top) * kLog2e) : 0.f; });
        if (c && lane == 0) c[i] = top;
        continue;
      }
#endif
      out.row(D, i, lane, [&](int l) { return l < m ? favor_feature(u[l], top, D.inv_sqrt_m) : 0.f; });
    } else if (D.elu) {
      out.row(D, i, lane, [&](int l) { return l < m ? elu_feature(u[l]) : 0.f; });
    } else {
      out.row(D, i, lane, [&](int l) { return l < m ? relu_feature(u[l], D.eps) : 0.f; });
    }
    if (c && lane == 0) c[i] = top;
  }
  __syncthreads();
}
// Phi [ct, mp] = the features of X's rows, in place of their projections.
__device__ inline void make_features(const Dims& D, const Tiles& t, const Projection& W, float* Phi, float* c,
                                     int rows) {
  make_features_into(D, t, W, Phi, FeaturesF32{Phi}, c, rows);
}

// DX [ct, D1p, first dp columns used] = s T W with T in WK: the feature
// backward's product, from W's words where a kernel made them.
__device__ inline void projection_product(const Dims& D, const Tiles& t, const Projection& W) {
  const int lw = tile_ld(D.mp), lx = tile_ld(D.D1p);
#ifdef PF_FAVOR_MMA_TILES
  if (W.words) {
    const WordsBT B{W.words, Tiles::projection_words(D)};
    if (tile_math(D) == TileMath::Bf16)
      return block_mm_tensor<TileMath::Bf16, false>(D.ct, D.dp, D.mp, D.data_scale, t.WK, lw, B, 0.f, t.DX, lx, Diag{});
    return block_mm_tensor<TileMath::Tf32, false>(D.ct, D.dp, D.mp, D.data_scale, t.WK, lw, B, 0.f, t.DX, lx, Diag{});
  }
#endif
  block_mm<false, false>(D, D.ct, D.dp, D.mp, D.data_scale, t.WK, lw, W.W, D.dp, 0.f, t.DX, lx);
}

// DX [ct, D1p, first dp columns used] = the feature-map backward of dPhi (in
// WK, overwritten by T = dPhi . Phi, the Relu mask or elu') given Phi and X:
// dX = s T W - s^2 rowsum(T) X (the last term with half_norm only), W read
// from its words where the block has them in shared memory. T stays in WK
// for weight_grad.
__device__ inline void feature_grad(const Dims& D, const Tiles& t, const Projection& W, const float* Phi) {
  const int lane = threadIdx.x % 32, m = block_features(D);
  for (int i = threadIdx.x / 32; i < D.ct; i += kWarps) {
    float* g = t.WK + i * tile_ld(D.mp);
    const float* p = Phi + i * tile_ld(D.mp);
    float sum = 0.f;
    for (int l = lane; l < D.mp; l += 32) {
      const float v = D.softmax ? favor_grad_weight(g[l], p[l])
                      : D.elu   ? (l < m ? elu_grad_weight(g[l], p[l]) : 0.f)
                                : relu_grad_weight(g[l], l < m && p[l] > D.eps);
      g[l] = v;
      sum += v;
    }
    sum = warp_sum(sum);
    if (lane == 0) t.rowsum[i] = D.half_norm ? sum : 0.f;
  }
  __syncthreads();
  projection_product(D, t, W);
  if (D.half_norm) {
    const float s2 = D.data_scale * D.data_scale;
    for (int e = threadIdx.x; e < D.ct * D.dp; e += kThreads) {
      const int i = e / D.dp, j = e % D.dp;
      t.DX[i * tile_ld(D.D1p) + j] -= s2 * t.rowsum[i] * t.X[i * tile_ld(D.dp) + j];
    }
  }
  __syncthreads();
}

// dWp [mp, dp] += s T^T X after feature_grad (T in WK, the rows' x in X;
// padded rows and columns of both are 0): the tile's part of the gradient of
// the head's projection (phi depends on W through s W x only; the log-scale
// c cancels in the normalisation).
__device__ inline void weight_grad(const Dims& D, const Tiles& t, float* dWp) {
  block_mm<true, false>(D, D.mp, D.dp, D.ct, D.data_scale, t.WK, tile_ld(D.mp), t.X, tile_ld(D.dp), 1.f, dWp, D.dp);
}

// dst rows [rows, cols] (row stride cols) (+)= src [., lds].
__device__ inline void store_rows(const float* src, int lds, int rows, int cols, float* dst, bool accumulate) {
  for (int e = threadIdx.x; e < rows * cols; e += kThreads) {
    const int i = e / cols, j = e % cols;
    float* out = dst + int64_t(i) * cols + j;
    *out = accumulate ? *out + src[i * lds + j] : src[i * lds + j];
  }
  __syncthreads();
}

// ---- masks and row weights -------------------------------------------------------
// M[i, j] <- [j <= i] M[i, j] exp(c_j - L_i)   (ct x ct)
__device__ inline void causal_mask_tile(const Dims& D, float* M, const float* c, const float* L) {
  for (int e = threadIdx.x; e < D.ct * D.ct; e += kThreads) {
    const int i = e / D.ct, j = e % D.ct;
    float* m = M + i * tile_ld(D.ct) + j;
    *m = j <= i ? *m * log_scale_weight(c[j], L[i]) : 0.f;
  }
  __syncthreads();
}

// (a, S) (+)= rows with log-scales lg[i] (kEmptyLogScale for padded rows):
// S = exp(a - top) S + P^T diag(exp(lg_i - top)) Vals, the weights applied
// as the product reads P (P is left as it was).
// `a` lives in t.scalar[slot]. P [ct, mp], Vals [ct, D1p], S [mp, D1p].
__device__ inline void state_update(const Dims& D, const Tiles& t, int slot, const float* P, const float* lg,
                                    const float* Vals, float* S) {
  const float a = t.scalar[slot];
  float top = a;
  for (int i = 0; i < D.ct; ++i) top = max_log_scale(top, lg[i]);
  for (int i = threadIdx.x; i < D.ct; i += kThreads) t.w[i] = log_scale_weight(lg[i], top);
  __syncthreads();
  Diag rows_of_p;
  rows_of_p.k = t.w;  // P's row i (op(A) = P^T's column i) weighted by w[i]
  block_mm<true, false>(D, D.mp, D.D1p, D.ct, 1.f, P, tile_ld(D.mp), Vals, tile_ld(D.D1p), log_scale_weight(a, top), S,
                        D.D1p, rows_of_p);
  if (threadIdx.x == 0) t.scalar[slot] = top;
  __syncthreads();
}

}  // namespace
}  // namespace favor_cuda
}  // namespace pf
