// Fused CUDA FAVOR+ kernels that keep the running state in registers
// (favor_attention_cuda_launch.cuh chooses them): every segment's own key
// state, the causal backward's query-gradient states, the causal forward
// from the scanned state, the causal backward's first sweep (dq; its
// second keeps the tile kernel's state but stages its rows), the
// bidirectional backward's query segments (dq and the query-gradient
// states), and the prefix's or total's part of y (a state read only). Same
// blocks, tiles, shared memory and log-scale conventions as the tile
// kernels of favor_attention_cuda_fused.cuh; only the state moves (and,
// in bf16, the forward kernels' features: bf16 tiles read by ldmatrix,
// ForwardFeatures).
//
// A warp holds 16 rows of the block's state as mma.sync accumulators
// (Strip: 8-column tiles of 4 floats a lane), in one of two orientations:
//   value strips    S^T [D1p, mp] in strips of 16 value columns of [v 1],
//                   warp s holding strip s with all mp features (D1p / 16
//                   warps hold one; the others only make features and
//                   masks). State update S^T = exp(a - top) S^T +
//                   V'^T diag(exp(c_j - top)) Pk: the strip's rows of V'^T
//                   (A, from shared memory) by the key features (B), added
//                   in place (the query-gradient state likewise with G, Pq
//                   and -L_i). Outputs Y^T = S^T Pq^T diag(exp(a - L_i)) +
//                   V'^T mask^T: the strip is the A operand straight from
//                   the accumulators (warp_mm_from_acc), so the sum over the
//                   features stays within the warp.
//   feature strips  S [mp, D1p] in strips of 16 features, warp w holding
//                   strips w and w + kWarps: the backward's dPq^T = S G^T
//                   diag(exp(a - L_i)) + Pk^T mask(G V'^T)^T sums over the
//                   value columns within the warp.
// The state is read from global memory once per segment or written once,
// never per tile. The strips' outputs go through a work tile in shared
// memory (DX, WK) to the coalesced passes that follow. The room the tile
// kernels keep the state in holds instead the stage (the next tile's rows,
// copied in with cp.async while a tile runs: stage_rows) and, with
// Dims::smem_projection, the block's projection as the tensor cores'
// words (write_projection).
// With TileMath::Fp32, a slice wider than kResidentFeatures, d + 1 beyond
// 16 kWarps, or FavorShape::state_in_registers false, the launch sequences
// keep the tile kernels (Dims::resident, resident_fits). Code compiled for
// targets without tensor cores runs the tile kernels' bodies here too.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/favor_attention/favor_attention_cuda_fused.cuh"

namespace pf {
namespace favor_cuda {

// A kernel of the op, and the six that have a resident form.
using TileKernel = void (*)(Args);
enum class Resident { KeySegments, QuerySegments, QuerySegmentsDq, CausalForward, CausalBackward, AddPrefix };

namespace {

// t.rowsum[j] = exp(c_j - top), the weight of the tile's key j in a state
// of log-scale `a` that takes the tile's keys: top, the largest of a and
// the keys' c (every thread returns it). The caller syncs before reading.
__device__ inline float key_weights(const Dims& D, const Tiles& t, float a) {
  float top = a;
  for (int j = 0; j < D.ct; ++j) top = max_log_scale(top, t.c[j]);
  for (int j = threadIdx.x; j < D.ct; j += kThreads) t.rowsum[j] = log_scale_weight(t.c[j], top);
  return top;
}

#ifdef PF_FAVOR_MMA_TILES
// Sixteen rows of a state-shaped matrix M [rows, cols] held by one warp as
// mma.sync accumulators: rows row0..row0 + 15, all cols in NT (at least
// cols / 8) 8-column tiles; element r of tile nt is row row0 + mma_row(g, r),
// column 8 nt + mma_col(t, r). M is S^T (value strips: rows the d + 1 value
// columns, cols the features) or S itself (feature strips).
template <int NT>
struct Strip {
  float acc[NT][4];
  int row0, g, t, tiles;  // first row, the lane's g and t, 8-column tiles in use
  __device__ Strip(int first_row, int cols)
      : row0(first_row), g(threadIdx.x % 32 / 4), t(threadIdx.x % 4), tiles(cols / 8) {
    PF_UNROLL
    for (int nt = 0; nt < NT; ++nt) PF_UNROLL
    for (int r = 0; r < 4; ++r) acc[nt][r] = 0.f;
  }
  // M's element (row, col) at src[row rs + col cs] of a padded state [mp, D1p]:
  // (1, D1p) for S^T, (D1p, 1) for S.
  __device__ int64_t at(int nt, int r, int rs, int cs) const {
    return int64_t(row0 + mma_row(g, r)) * rs + int64_t(8 * nt + mma_col(t, r)) * cs;
  }
  __device__ void load(const float* src, int rs, int cs) {
    PF_UNROLL
    for (int nt = 0; nt < NT; ++nt) {
      if (nt >= tiles) break;
      PF_UNROLL
      for (int r = 0; r < 4; ++r) acc[nt][r] = src[at(nt, r, rs, cs)];
    }
  }
  __device__ void store(float* dst, int rs, int cs) const {
    PF_UNROLL
    for (int nt = 0; nt < NT; ++nt) {
      if (nt >= tiles) break;
      PF_UNROLL
      for (int r = 0; r < 4; ++r) dst[at(nt, r, rs, cs)] = acc[nt][r];
    }
  }
  // M = decay M + A^T diag(w) B over K rows: M[row][col] = decay M[row][col]
  // + sum_j A[j][row] w[j] B[j][col] with A [K, lda] (the strip's rows are
  // its columns) and B [K, ldb]. The state taking a tile's rows. B is fp32
  // (each lane rounds its fragments) or, with P = Bf16, a bf16 tile
  // (FeaturesBf16) read two 8-column tiles at a time by ldmatrix.trans.
  template <TileMath P, class E>
  __device__ void absorb(float decay, int K, const float* A, int lda, const float* w, const E* B, int ldb) {
    PF_UNROLL
    for (int nt = 0; nt < NT; ++nt) PF_UNROLL
    for (int r = 0; r < 4; ++r) acc[nt][r] *= decay;
    using M = Mma<P>;
    for (int k0 = 0; k0 < K; k0 += M::kStep) {
      uint32_t a[4];
      M::template load_a<true>(A, lda, row0, k0, g, t, a, w);
      if constexpr (std::is_same_v<E, uint16_t>) {
        static_assert(P == TileMath::Bf16 && NT % 2 == 0, "bf16 tiles feed bf16 products, tiles in pairs");
        PF_UNROLL
        for (int nt = 0; nt < NT; nt += 2) {
          if (nt >= tiles) break;  // tiles is even: mp is a multiple of 16
          uint32_t b[4];
          ldm_b_cols(B, ldb, k0, 8 * nt, 4 * g + t, b);
          M::mma(acc[nt], a, b);
          M::mma(acc[nt + 1], a, b + 2);
        }
      } else {
        PF_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          if (nt >= tiles) break;
          uint32_t b[2];
          M::template load_b<false>(B, ldb, k0, 8 * nt, g, t, b);
          M::mma(acc[nt], a, b);
        }
      }
    }
  }
  // out[i ld + row] = w[i] sum_col M[row][col] X[i][col] + sum_j Z[j][row] Mask[i][j]
  // for the ct (at most 32) rows i of a tile: M X^T with its columns
  // weighted, plus Z^T Mask^T (X [ct, ldx], Z [ct, ldz], Mask [ct, ct]; no
  // such term where Z is null). The strip is the A operand straight from
  // the accumulators, so the sum over M's columns stays within the warp.
  // X is fp32 or, with P = Bf16, a bf16 tile (FeaturesBf16) read by ldmatrix.
  template <TileMath P, class E>
  __device__ void outputs(int ct, const E* X, int ldx, const float* w, const float* Z, int ldz, const float* Mask,
                          float* out, int ld) const {
    constexpr int CJ = 4;  // 8-row tiles of the tile's rows
    const int nj = ct / 8;
    float y[CJ][4] = {};
    if constexpr (std::is_same_v<E, uint16_t>) {
      static_assert(P == TileMath::Bf16, "bf16 tiles feed bf16 products");
      warp_mm_from_acc_bf16_rows<CJ, NT>(acc, X, ldx, 4 * g + t, y, tiles, nj);
    } else {
      warp_mm_from_acc<P, CJ, NT, true>(acc, X, ldx, g, t, y, tiles, nj);
    }
    PF_UNROLL
    for (int j = 0; j < CJ; ++j) PF_UNROLL
    for (int r = 0; r < 4; ++r) y[j][r] *= j < nj ? w[8 * j + mma_col(t, r)] : 0.f;
    using M = Mma<P>;
    for (int k0 = 0; Z && k0 < ct; k0 += M::kStep) {
      uint32_t a[4];
      M::template load_a<true>(Z, ldz, row0, k0, g, t, a);
      PF_UNROLL
      for (int j = 0; j < CJ; ++j) {
        if (j >= nj) break;
        uint32_t b[2];
        M::template load_b<true>(Mask, tile_ld(ct), k0, 8 * j, g, t, b);
        M::mma(y[j], a, b);
      }
    }
    PF_UNROLL
    for (int j = 0; j < CJ; ++j) {
      if (j >= nj) break;
      PF_UNROLL
      for (int r = 0; r < 4; ++r) out[(8 * j + mma_col(t, r)) * ld + row0 + mma_row(g, r)] = y[j][r];
    }
  }
};

// What stage_rows copies of a tile: its q (into X), its k and v (stage_a,
// stage_b), its o, d_o and den (stage_a, stage_b, stage_den: not with
// kStageKeys), its raw row scales (stage_L).
enum : unsigned { kStageQ = 1, kStageKeys = 2, kStageGrads = 4, kStageRowScales = 8 };

// Starts the copies of the rows `what` of the block's tile at head row t0
// and commits them as one group, empty past the block's rows. No barrier:
// the caller has passed the last reads of those tiles.
__device__ inline void stage_rows(const Args& a, const Block& b, const Tiles& t, int t0, unsigned what) {
  const Dims& D = a.D;
  if (t0 < b.r1) {
    const int rows = min(D.ct, b.r1 - t0);
    const int64_t row = b.row(D, t0), at = row * D.d;
    const int lx = tile_ld(D.dp);
    if (what & kStageQ) start_tile(a.q + at, rows, D.d, t.X, D.ct, lx);
    if (what & kStageKeys) {
      start_tile(a.k + at, rows, D.d, t.stage_a, D.ct, lx);
      start_tile(a.v + at, rows, D.d, t.stage_b, D.ct, lx);
    }
    if (what & kStageGrads) {
      start_tile(a.o + at, rows, D.d, t.stage_a, D.ct, lx);
      start_tile(a.d_o + at, rows, D.d, t.stage_b, D.ct, lx);
      start_vector(a.den + row, rows, t.stage_den);
    }
    if (what & kStageRowScales) start_vector(a.L + row, rows, t.stage_L);
  }
  cp_async_commit();
}
// The keys of a tile from its staged rows: features with log-scales c into
// out by way of U (make_features_into), and V' = [v 1]; by default the
// features Pk made in place.
template <class Out>
__device__ inline void keys_from_stage(const Dims& D, const Tiles& t, const Projection& W, int rows, float* U,
                                       const Out& out) {
  Tiles keys = t;
  keys.X = t.stage_a;
  make_features_into(D, keys, W, U, out, t.c, rows);
  load_vprime(D, t.stage_b, tile_ld(D.dp), rows, t.VP);
}
__device__ inline void keys_from_stage(const Dims& D, const Tiles& t, const Projection& W, int rows) {
  keys_from_stage(D, t, W, rows, t.Pk, FeaturesF32{t.Pk});
}

// The query and key features of the kernels whose products read them only
// as tensor-core operands: the key states, the causal forward, the prefix's
// part of y, and the causal backward's query-gradient states. TF32: the
// fp32 tiles Pq and Pk, the features made in place. bf16: bf16 tiles
// (FeaturesBf16), rounded once as they are made and read by ldmatrix, the same bits the products' fragment loads round
// from fp32 features: the queries' in WK's room (these kernels make no
// WK), the keys' in Pk's, both by way of Pq's fp32 room (their projections
// and exponents). The kernels that make dq, dk or dv keep fp32 features:
// their feature backward reads them elementwise.
template <TileMath P>
struct ForwardFeatures {
  static constexpr bool kBf16 = P == TileMath::Bf16;
  using E = std::conditional_t<kBf16, uint16_t, float>;
  E *q, *k;
  int ld;          // their rows' stride
  float *uq, *uk;  // the fp32 tiles make_features_into works in
  __device__ ForwardFeatures(const Dims& D, const Tiles& t)
      : q(kBf16 ? reinterpret_cast<E*>(t.WK) : reinterpret_cast<E*>(t.Pq)),
        k(reinterpret_cast<E*>(t.Pk)),
        ld(kBf16 ? bf16_tile_ld(D.mp) : tile_ld(D.mp)),
        uq(t.Pq),
        uk(kBf16 ? t.Pq : t.Pk) {}
  __device__ auto out(E* p) const {
    if constexpr (kBf16)
      return FeaturesBf16{p};
    else
      return FeaturesF32{p};
  }
  // The queries' features (X holds q) with their log-scales cq.
  __device__ void make_queries(const Dims& D, const Tiles& t, const Projection& W, int rows) const {
    make_features_into(D, t, W, uq, out(q), t.cq, rows);
  }
  // The keys of a tile from its staged rows (keys_from_stage): features
  // with log-scales c, and V' = [v 1].
  __device__ void make_keys(const Dims& D, const Tiles& t, const Projection& W, int rows) const {
    keys_from_stage(D, t, W, rows, uk, out(k));
  }
  // A [ct, ct] = Pq Pk^T, then a barrier.
  __device__ void scores(const Dims& D, const Tiles& t) const {
    if constexpr (kBf16)
      block_mm_bf16_abt(D.ct, D.ct, D.mp, q, ld, k, ld, t.A, tile_ld(D.ct));
    else
      block_mm<false, true>(D, D.ct, D.ct, D.mp, 1.f, q, ld, k, ld, 0.f, t.A, tile_ld(D.ct));
  }
};

// The gradient rows G and the row log-scales L of a tile from its staged
// o, d_o, den and raw row scales, after its query features (cq).
__device__ inline void gradient_from_stage(const Dims& D, const Tiles& t, int rows) {
  load_gradient(D, t.stage_a, t.stage_den, t.stage_b, tile_ld(D.dp), rows, t.G);
  row_scales(D, t, t.stage_L, rows);
}
// The queries' side of a tile from its staged rows: features Pq (X holds
// the staged q), the gradient rows G and the row log-scales L.
__device__ inline void query_grads_from_stage(const Dims& D, const Tiles& t, const Projection& W, int rows) {
  make_features(D, t, W, t.Pq, t.cq, rows);
  gradient_from_stage(D, t, rows);
}

// With Dims::smem_projection, writes the words (Mma<P>::word) of the
// block's projection once into Tiles::proj, beside the stage in the carried
// state's room, which these kernels do not use; the tiles' projection
// products then read them there (projection_of: the same bits as from W).
// No barrier: the callers' first tile starts with wait_rows.
template <TileMath P>
__device__ inline void write_projection(const Args& a, const Block& b, const Tiles& t) {
  const Dims& D = a.D;
  if (!D.smem_projection) return;
  const float* W = head_projection(a, b);
  const int words = Tiles::projection_words(D);
  for (int e = threadIdx.x; e < D.mp * words; e += kThreads) {
    const int j = e / words, u = e % words;
    t.proj[projection_word(words, j, u)] = Mma<P>::word(W + int64_t(j) * D.dp, u);
  }
}
// The block's projection after write_projection. Made where it is used
// rather than held across the tiles: its pointers come from the kernel's
// arguments, and the strips need the registers.
__device__ inline Projection projection_of(const Args& a, const Block& b, const Tiles& t) {
  return Projection(head_projection(a, b), a.D.smem_projection ? t.proj : nullptr);
}

// The value strip of warp `warp` (S^T's rows 16 warp.., all mp features) and
// whether the warp holds one (uniform over the warp).
template <int NT>
struct ValueStrip : Strip<NT> {
  bool held;
  __device__ ValueStrip(const Dims& D, int warp) : Strip<NT>(16 * warp, D.mp), held(warp < D.D1p / 16) {}
};
#endif

// Every segment's own state, the strips in registers: the key state
// (k_key_segments: keys Pk with log-scales c, values V') or, with Queries,
// the causal backward's query-gradient state (k_query_segments without dq:
// queries Pq with log-scales -L_i, values G). It never makes dq: the
// bidirectional backward's query segments, which do, are
// k_query_segments_dq_resident.
template <TileMath P, int NT, bool Queries>
__global__ void __launch_bounds__(kThreads, 1) k_segments_resident(const Args a) {
#ifdef PF_FAVOR_MMA_TILES
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  ValueStrip<NT> S(D, threadIdx.x / 32);
  const ForwardFeatures<P> F(D, t);  // the keys' (the queries' with Queries)
  float ls = kEmptyLogScale;  // the state's log-scale, the same in every thread
  write_projection<P>(a, b, t);
  const unsigned staged = Queries ? kStageQ | kStageGrads | kStageRowScales : kStageKeys;
  stage_rows(a, b, t, b.r0, staged);
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t) {
    wait_rows();
    if (Queries) {
      F.make_queries(D, t, projection_of(a, b, t), rows);  // X holds the staged q
      gradient_from_stage(D, t, rows);
    } else {
      F.make_keys(D, t, projection_of(a, b, t), rows);
    }
    stage_rows(a, b, t, t0 + D.ct, staged);  // the next tile's rows land while this one runs
    if (Queries) query_log_scales(D, t, rows);
    const float top = key_weights(D, t, ls);
    __syncthreads();
    if (S.held) {
      if constexpr (Queries)
        S.template absorb<P>(log_scale_weight(ls, top), D.ct, t.G, tile_ld(D.D1p), t.rowsum, F.q, F.ld);
      else
        S.template absorb<P>(log_scale_weight(ls, top), D.ct, t.VP, tile_ld(D.D1p), t.rowsum, F.k, F.ld);
    }
    ls = top;
    // No barrier: what the strips read is next written after the next
    // tile's wait_rows, and the staged rows already in flight land in tiles
    // they do not read.
  });
  if (S.held) S.store((Queries ? a.gS : a.fS) + b.slot(D) * D.state_floats(), 1, D.D1p);
  if (threadIdx.x == 0) (Queries ? a.ga : a.fa)[b.slot(D)] = ls;
#else
  if (Queries)
    query_segments_tiles(a);
  else
    key_segments_tiles(a);
#endif
}

// The bidirectional backward's query segments (k_query_segments with dq):
// the segment's query-gradient state in registers as value strips, as in
// k_segments_resident, and per tile first
//   dPq = diag(exp(a - L_i)) G S^T  -> dq (and the block's dW part)
// with S the head's total, read from global memory as the tile kernel
// reads it (the strips take the registers, the stage and the projection
// the room). X holds the tile's q until its feature backward, so the next
// tile's q is staged after that; its o, d_o, den and row scales as soon
// as this tile's are read.
template <TileMath P, int NT>
__global__ void __launch_bounds__(kThreads, 1) k_query_segments_dq_resident(const Args a) {
#ifdef PF_FAVOR_MMA_TILES
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  ValueStrip<NT> R(D, threadIdx.x / 32);
  float ls = kEmptyLogScale;  // the gradient state's log-scale, the same in every thread
  float* dW = zeroed_weight_grad(a, b);
  const float total_a = head_log_scale(a, b);
  write_projection<P>(a, b, t);
  stage_rows(a, b, t, b.r0, kStageQ | kStageGrads | kStageRowScales);
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t) {
    wait_rows();
    query_grads_from_stage(D, t, projection_of(a, b, t), rows);
    stage_rows(a, b, t, t0 + D.ct, kStageGrads | kStageRowScales);  // their stage is free now
    store_total_query_grad(a, b, t, projection_of(a, b, t), total_a, dW, t0, rows);
    stage_rows(a, b, t, t0 + D.ct, kStageQ);  // X is free (store_total_query_grad ends with a barrier)
    query_log_scales(D, t, rows);
    const float top = key_weights(D, t, ls);
    __syncthreads();
    if (R.held)
      R.template absorb<P>(log_scale_weight(ls, top), D.ct, t.G, tile_ld(D.D1p), t.rowsum, t.Pq, tile_ld(D.mp));
    ls = top;
    // No barrier: what the strips read is next written after the next
    // tile's wait_rows.
  });
  if (R.held) R.store(a.gS + b.slot(D) * D.state_floats(), 1, D.D1p);
  if (threadIdx.x == 0) a.ga[b.slot(D)] = ls;
#else
  query_segments_tiles(a);
#endif
}

// The causal forward of each segment from its scanned state (k_causal_forward),
// the strips in registers.
template <TileMath P, int NT>
__global__ void __launch_bounds__(kThreads, 1) k_causal_forward_resident(const Args a) {
#ifdef PF_FAVOR_MMA_TILES
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  ValueStrip<NT> S(D, threadIdx.x / 32);
  if (S.held) S.load(a.fS + b.slot(D) * D.state_floats(), 1, D.D1p);
  const ForwardFeatures<P> F(D, t);
  float ls = a.fa[b.slot(D)];
  write_projection<P>(a, b, t);
  stage_rows(a, b, t, b.r0, kStageQ | kStageKeys);
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t) {
    wait_rows();
    F.make_queries(D, t, projection_of(a, b, t), rows);  // X holds the staged q
    F.make_keys(D, t, projection_of(a, b, t), rows);
    stage_rows(a, b, t, t0 + D.ct, kStageQ | kStageKeys);  // the next tile's rows land while this one runs
    // L, w and rowsum: read after the product below, whose closing barrier
    // publishes them (the product reads none of them).
    causal_row_scales(a, b, t, ls, t0, rows);
    const float top = key_weights(D, t, ls);
    const int l1 = tile_ld(D.D1p);
    F.scores(D, t);
    causal_mask_tile(D, t.A, t.c, t.L);
    if (S.held) {
      S.template outputs<P>(D.ct, F.q, F.ld, t.w, t.VP, l1, t.A, t.DX, l1);
      S.template absorb<P>(log_scale_weight(ls, top), D.ct, t.VP, l1, t.rowsum, F.k, F.ld);
    }
    ls = top;
    __syncthreads();
    store_rows(t.DX, l1, rows, D.D1, out_rows(a, b, a.y, D.D1, t0), false);
  });
#else
  causal_forward_tiles(a);
#endif
}

// The prefix's or total's part of y (k_add_prefix, prefix_row_weights),
// the head's state in registers as value strips, loaded once: per tile
//   Y^T = S^T Pq^T diag(w),
// the sum over the features within each warp, the tile's q staged while
// the previous tile runs.
template <TileMath P, int NT>
__global__ void __launch_bounds__(kThreads, 1) k_add_prefix_resident(const Args a) {
#ifdef PF_FAVOR_MMA_TILES
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  const float pa = head_log_scale(a, b);
  if (is_empty_log_scale(pa) && a.accumulate) return;  // uniform over the block
  ValueStrip<NT> S(D, threadIdx.x / 32);
  if (S.held) S.load(head_state(a, b), 1, D.D1p);
  const ForwardFeatures<P> F(D, t);
  write_projection<P>(a, b, t);
  stage_rows(a, b, t, b.r0, kStageQ);
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t) {
    wait_rows();  // and every thread is past the previous tile's stores, which read DX, L, rowsum
    F.make_queries(D, t, projection_of(a, b, t), rows);  // X holds the staged q
    // The next tile's q lands while this one runs.
    stage_rows(a, b, t, t0 + D.ct, kStageQ);
    prefix_row_weights(a, b, t, pa, t0, rows);
    __syncthreads();
    if (S.held) S.template outputs<P>(D.ct, F.q, F.ld, t.w, nullptr, 0, nullptr, t.DX, tile_ld(D.D1p));
    __syncthreads();
    store_prefix_rows(a, b, t, t0, rows);
  });
#else
  add_prefix_tiles(a);
#endif
}

#ifdef PF_FAVOR_MMA_TILES
// Where sweep 2 of the resident causal backward stages a tile's rows: the
// stage's room holds the gradient state there (Dims::smem_state), so the
// rows go into the tiles that the previous tile's state update does not
// read: q into DX (read by the query features before the products write
// DX), k into X (where dk's feature backward reads it), v into VP at VP's
// row stride (finish_vprime adds the ones), o and d_o into Pk and WK where
// a [ct, mp] tile holds a [ct, dp] one (mp >= dp; else they are read from
// global memory when the tile starts), den and the raw row scales into A.
struct KeySweepStage {
  float *q, *o, *d_o, *den, *L;
  bool grads;  // o, d_o and den staged
  __device__ KeySweepStage(const Dims& D, const Tiles& t)
      : q(t.DX), o(t.Pk), d_o(t.WK), den(t.A), L(t.A + D.ct), grads(D.mp >= D.dp) {}
};

// Starts the copies of the block's tile at head row t0 into the places of
// s and commits them as one group, empty where t0 is outside the block's
// rows. No barrier: the caller has passed the last reads of those tiles.
__device__ inline void stage_key_sweep_rows(const Args& a, const Block& b, const Tiles& t, const KeySweepStage& s,
                                            int t0) {
  const Dims& D = a.D;
  if (t0 >= b.r0 && t0 < b.r1) {
    const int rows = min(D.ct, b.r1 - t0);
    const int64_t row = b.row(D, t0), at = row * D.d;
    const int lx = tile_ld(D.dp);
    start_tile(a.q + at, rows, D.d, s.q, D.ct, lx);
    start_tile(a.k + at, rows, D.d, t.X, D.ct, lx);
    start_tile(a.v + at, rows, D.d, t.VP, D.ct, tile_ld(D.D1p));
    if (s.grads) {
      start_tile(a.o + at, rows, D.d, s.o, D.ct, lx);
      start_tile(a.d_o + at, rows, D.d, s.d_o, D.ct, lx);
      start_vector(a.den + row, rows, s.den);
    }
    start_vector(a.L + row, rows, s.L);
  }
  cp_async_commit();
}

// Sweep 2 of the resident causal backward: causal_backward_key_sweep's
// products (key_sweep_products) with the rows of each tile staged
// (KeySweepStage) while the later tile's gradient state update runs, and
// the sweep's first tile while the state is read in. The projection is
// read from global memory: with Dims::smem_state the state takes the room
// of its words.
__device__ __forceinline__ void key_sweep_staged(const Args& a, const Block& b, const Tiles& t, float* dW) {
  const Dims& D = a.D;
  const int64_t slot = b.slot(D);
  const KeySweepStage s(D, t);
  const int tiles = (b.r1 - b.r0 + D.ct - 1) / D.ct;
  stage_key_sweep_rows(a, b, t, s, b.r0 + (tiles - 1) * D.ct);  // the sweep runs from the last tile
  if (threadIdx.x == 0) t.scalar[1] = a.ga[slot];
  float* R = carried_state(D, t, a.gS + slot * D.state_floats());
  for_each_tile(D, b, true, [&](int t0, int rows, int64_t row) PF_INLINE_LAMBDA {
    wait_rows();
    finish_vprime(D, t.VP, rows);
    Tiles queries = t;
    queries.X = s.q;
    make_features(D, queries, head_projection(a, b), t.Pq, t.cq, rows);
    if (s.grads) {
      load_gradient(D, s.o, s.den, s.d_o, tile_ld(D.dp), rows, t.G);
    } else {
      load_gradient(D, a.o + row * D.d, a.den + row, a.d_o + row * D.d, D.d, rows, t.G);
    }
    row_scales(D, t, s.L, rows);
    make_features(D, t, head_projection(a, b), t.Pk, t.c, rows);  // X holds k; o in Pk is read
    key_sweep_products(D, t, R);
    store_key_grads(a, b, t, dW, t0, rows, false);
    query_log_scales(D, t, rows);
    stage_key_sweep_rows(a, b, t, s, t0 - D.ct);  // the update reads Pq, G, c, w and R only
    state_update(D, t, 1, t.Pq, t.c, t.G, R);
  });
}
#endif

// The causal backward of each segment (k_causal_backward) with sweep 1's
// forward state S in registers as feature strips (warp w holds S's rows
// 16 w.. and 16 (w + kWarps).., all d + 1 value columns, in NV 8-column
// tiles): per tile
//   dPq^T = S G^T diag(exp(a - L_i)) + Pk^T mask(G V'^T)^T  -> dq
//   S = exp(a - top) S + Pk^T diag(exp(c_j - top)) V',
// the sum over the value columns within each warp. Sweep 2 (dk, dv) reads
// its gradient state as the tile kernel does, since its products sum over
// both the features and the value columns, but stages its rows
// (key_sweep_staged).
template <TileMath P, int NV>
__global__ void __launch_bounds__(kThreads, 1) k_causal_backward_resident(const Args a) {
#ifdef PF_FAVOR_MMA_TILES
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  const int64_t slot = b.slot(D);
  const int warp = threadIdx.x / 32;
  Strip<NV> S[2] = {Strip<NV>(16 * warp, D.D1p), Strip<NV>(16 * (warp + kWarps), D.D1p)};
  const float* start = a.fS + slot * D.state_floats();
  PF_UNROLL
  for (int u = 0; u < 2; ++u)
    if (S[u].row0 < D.mp) S[u].load(start, D.D1p, 1);
  float ls = a.fa[slot];
  float* dW = zeroed_weight_grad(a, b);
  // Three groups of rows a tile, each staged as soon as its room is free:
  // the keys and the row scales (in the stage) once the previous tile's o
  // and d_o are read; q (in X) after the previous tile's feature backward,
  // as the newest group; and the tile's own o, d_o and den (in the stage)
  // once its key features are made, landing while its query features are.
  // Sweep 1 keeps the projection beside the stage; sweep 2's gradient
  // state takes the room (with Dims::smem_state), so it reads W itself.
  write_projection<P>(a, b, t);
  stage_rows(a, b, t, b.r0, kStageKeys | kStageRowScales);
  stage_rows(a, b, t, b.r0, kStageQ);
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t) {
    wait_rows_but_newest();  // the keys and row scales; q may be in flight
    keys_from_stage(D, t, projection_of(a, b, t), rows);
    stage_rows(a, b, t, t0, kStageGrads);  // keys_from_stage ends with a barrier: k and v are read
    wait_rows_but_newest();                // q
    make_features(D, t, projection_of(a, b, t), t.Pq, t.cq, rows);
    wait_rows();  // o, d_o, den
    gradient_from_stage(D, t, rows);
    stage_rows(a, b, t, t0 + D.ct, kStageKeys | kStageRowScales);  // the next tile's rows land while this one runs
    // w and rowsum: read after the product below, whose closing barrier
    // publishes them (the product reads neither).
    for (int i = threadIdx.x; i < D.ct; i += kThreads) t.w[i] = log_scale_weight(ls, t.L[i]);
    const float top = key_weights(D, t, ls);
    const int lm = tile_ld(D.mp), l1 = tile_ld(D.D1p);
    block_mm<false, true>(D, D.ct, D.ct, D.D1p, 1.f, t.G, l1, t.VP, l1, 0.f, t.B, tile_ld(D.ct));
    causal_mask_tile(D, t.B, t.c, t.L);
    PF_UNROLL
    for (int u = 0; u < 2; ++u) {
      if (S[u].row0 >= D.mp) continue;  // uniform over the warp
      S[u].template outputs<P>(D.ct, t.G, l1, t.w, t.Pk, lm, t.B, t.WK, lm);
      S[u].template absorb<P>(log_scale_weight(ls, top), D.ct, t.Pk, lm, t.rowsum, t.VP, l1);
    }
    ls = top;
    __syncthreads();  // dPq in WK; the strips are done with rowsum, which feature_grad overwrites
    store_feature_grad(a, t, projection_of(a, b, t), t.Pq, dW, rows, out_rows(a, b, a.dq, D.d, t0), false);
    stage_rows(a, b, t, t0 + D.ct, kStageQ);  // X is free (store_feature_grad ends with a barrier)
  });
  // The last tile staged nothing (its next tile is past the block's rows);
  // should that change, this keeps every copy landed before sweep 2's
  // gradient state (Dims::smem_state) takes the stage's room and its own
  // copies the tiles.
  wait_rows();
  key_sweep_staged(a, b, t, dW);
#else
  causal_backward_tiles(a);
#endif
}

// The value-strip kernels (all but the causal backward) with NT feature tiles.
template <TileMath P, int NT>
TileKernel value_strip_kernel(Resident which) {
  if (which == Resident::KeySegments) return k_segments_resident<P, NT, false>;
  if (which == Resident::QuerySegments) return k_segments_resident<P, NT, true>;
  if (which == Resident::QuerySegmentsDq) return k_query_segments_dq_resident<P, NT>;
  if (which == Resident::AddPrefix) return k_add_prefix_resident<P, NT>;
  return k_causal_forward_resident<P, NT>;
}
// The resident kernel `which` for the sizes D with operands of type P:
// value strips of 8, 16 or 32 feature tiles (by the slice's padded
// features), feature strips of 8 or 16 value tiles (by d + 1).
// A file that defines PF_FAVOR_TILE_MATH holds that precision's kernels
// only; the launches pick them by D.math (favor_attention_cuda_launch.cuh).
template <TileMath P>
TileKernel resident_kernel(const Dims& D, Resident which) {
#ifdef PF_FAVOR_TILE_MATH
  static_assert(P == PF_FAVOR_TILE_MATH, "this file's block routines take their products in PF_FAVOR_TILE_MATH");
#endif
  if (which == Resident::CausalBackward)
    return D.D1p <= 64 ? k_causal_backward_resident<P, 8> : k_causal_backward_resident<P, 16>;
  if (D.mp <= 64) return value_strip_kernel<P, 8>(which);
  if (D.mp <= 128) return value_strip_kernel<P, 16>(which);
  return value_strip_kernel<P, 32>(which);
}

}  // namespace

#if defined(__CUDACC__)
// nvcc builds compile the resident kernels of each operand type in a file of
// their own (favor_attention_cuda_resident_tf32.cu, _bf16.cu), which
// defines one of these, beside the tile kernels and the launches
// (favor_attention_cuda.cu): all of them in one file took 135 s of nvcc
// for sm_90 on one core, the build's critical path. The block emulator's
// test compiles them where the launches pick them (favor_attention_cuda_launch.cuh).
TileKernel resident_kernel_tf32(const Dims& D, Resident which);
TileKernel resident_kernel_bf16(const Dims& D, Resident which);
#endif

}  // namespace favor_cuda
}  // namespace pf
