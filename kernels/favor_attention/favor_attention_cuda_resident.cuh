// Fused CUDA FAVOR+ kernels that keep the running state in registers
// (favor_attention_cuda_launch.cuh chooses them): every segment's own key
// state, the causal backward's query-gradient states, and the causal
// forward from the scanned state. Same blocks, tiles,
// shared memory and log-scale conventions as the tile kernels of
// favor_attention_cuda_fused.cuh; only the state moves.
//
// The state of a block's feature slice, transposed, S^T [D1p, mp], is split
// into strips of 16 of its rows (16 value columns of [v 1]): warp s holds
// strip s, all mp features, as mma.sync accumulators (NT 8-feature tiles of
// 4 floats a lane; D1p / 16 warps hold strips, the others only make
// features and masks). Per tile of ct rows:
//   state update  S^T = exp(a - top) S^T + V'^T diag(exp(c_j - top)) Pk:
//                 the strip's rows of V'^T (A, from shared memory) by the
//                 tile's key features (B), added to the accumulators in place
//                 (the query-gradient state likewise with G, Pq and -L_i);
//   outputs       Y^T = diag-columns(exp(a - L_i)) S^T Pq^T + V'^T mask^T:
//                 the strip is the A operand straight from the accumulators
//                 (warp_mm_from_acc, runtime/cuda_mma_tiles.cuh), reduced over
//                 the features within the warp, so no warp needs another's.
// The state is read from global memory once per segment (forward) and
// written once (key states), never per tile. The strips' outputs go through
// the tile DX in shared memory to coalesced rows of y.
// With TileMath::Fp32, a slice wider than kResidentFeatures, d + 1 beyond
// 16 kWarps, or FavorShape::state_in_registers false, the launch sequences
// keep the tile kernels (Dims::resident, resident_fits). Code compiled for targets without tensor cores runs the
// tile kernels' bodies here too.
#pragma once

#include <cstdint>

#include "kernels/favor_attention/favor_attention_cuda_fused.cuh"

namespace pf {
namespace favor_cuda {
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
// Warp s's strip of S^T: value columns [16 s, 16 s + 16) of the padded state
// [mp, D1p], the slice's mp features in NT (at least mp / 8) accumulator
// tiles; element r of tile nt is value column 16 s + mma_row(g, r), feature
// 8 nt + mma_col(t, r).
template <int NT>
struct StateStrip {
  float acc[NT][4];
  int s, g, t, tiles;  // strip, the lane's g and t, 8-feature tiles in use (mp / 8)
  __device__ StateStrip(const Dims& D, int strip)
      : s(strip), g(threadIdx.x % 32 / 4), t(threadIdx.x % 4), tiles(D.mp / 8) {
    PF_UNROLL
    for (int nt = 0; nt < NT; ++nt) PF_UNROLL
    for (int r = 0; r < 4; ++r) acc[nt][r] = 0.f;
  }
  __device__ int64_t at(const Dims& D, int nt, int r) const {
    return int64_t(8 * nt + mma_col(t, r)) * D.D1p + 16 * s + mma_row(g, r);
  }
  __device__ void load(const Dims& D, const float* S) {
    PF_UNROLL
    for (int nt = 0; nt < NT; ++nt) {
      if (nt >= tiles) break;
      PF_UNROLL
      for (int r = 0; r < 4; ++r) acc[nt][r] = S[at(D, nt, r)];
    }
  }
  __device__ void store(const Dims& D, float* S) const {
    PF_UNROLL
    for (int nt = 0; nt < NT; ++nt) {
      if (nt >= tiles) break;
      PF_UNROLL
      for (int r = 0; r < 4; ++r) S[at(D, nt, r)] = acc[nt][r];
    }
  }
  __device__ void scale(float x) {
    PF_UNROLL
    for (int nt = 0; nt < NT; ++nt) PF_UNROLL
    for (int r = 0; r < 4; ++r) acc[nt][r] *= x;
  }
  // S^T += V'^T diag(w) Pk over the tile's ct rows: the strip's columns of
  // VP [ct, D1p] (A = VP^T, row j weighted by w[j]) by Pk [ct, mp] (B).
  template <TileMath P>
  __device__ void add_rows(const Dims& D, const float* VP, const float* w, const float* Pk) {
    using M = Mma<P>;
    for (int k0 = 0; k0 < D.ct; k0 += M::kStep) {
      uint32_t a[4];
      M::template load_a<true>(VP, D.D1p, 16 * s, k0, g, t, a, w);
      PF_UNROLL
      for (int nt = 0; nt < NT; ++nt) {
        if (nt >= tiles) break;
        uint32_t b[2];
        M::template load_b<false>(Pk, D.mp, k0, 8 * nt, g, t, b);
        M::mma(acc[nt], a, b);
      }
    }
  }
};

// The strip's columns of the tile's outputs, into t.DX [ct, D1p]:
//   Y = diag(t.w) Pq S + M V'  (M = t.A, the masked Pq Pk^T),
// made as Y^T = S^T Pq^T diag(t.w) + V'^T M^T with the strip as A.
template <TileMath P, int NT>
__device__ void strip_outputs(const Dims& D, const Tiles& t, const StateStrip<NT>& S) {
  constexpr int CJ = 4;  // 8-row tiles of the tile's rows (ct <= 32)
  const int nj = D.ct / 8;
  float y[CJ][4] = {};
  warp_mm_from_acc<P, CJ, NT, true>(S.acc, t.Pq, D.mp, S.g, S.t, y, S.tiles, nj);
  PF_UNROLL
  for (int j = 0; j < CJ; ++j) PF_UNROLL
  for (int r = 0; r < 4; ++r) y[j][r] *= j < nj ? t.w[8 * j + mma_col(S.t, r)] : 0.f;
  using M = Mma<P>;
  for (int k0 = 0; k0 < D.ct; k0 += M::kStep) {
    uint32_t a[4];
    M::template load_a<true>(t.VP, D.D1p, 16 * S.s, k0, S.g, S.t, a);
    PF_UNROLL
    for (int j = 0; j < CJ; ++j) {
      if (j >= nj) break;
      uint32_t b[2];
      M::template load_b<true>(t.A, D.ct, k0, 8 * j, S.g, S.t, b);
      M::mma(y[j], a, b);
    }
  }
  PF_UNROLL
  for (int j = 0; j < CJ; ++j) {
    if (j >= nj) break;
    PF_UNROLL
    for (int r = 0; r < 4; ++r) t.DX[(8 * j + mma_col(S.t, r)) * D.D1p + 16 * S.s + mma_row(S.g, r)] = y[j][r];
  }
}
#endif

// Every segment's own state, the strips in registers: the key state
// (k_key_segments: keys Pk with log-scales c, values V') or, with Queries,
// the causal backward's query-gradient state (k_query_segments without dq:
// queries Pq with log-scales -L_i, values G).
template <TileMath P, int NT, bool Queries>
__global__ void __launch_bounds__(kThreads, 1) k_segments_resident(Args a) {
  enter_slice(a);
#ifdef PF_FAVOR_MMA_TILES
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  const int strip = threadIdx.x / 32;
  const bool holder = strip < D.D1p / 16;  // uniform over the warp
  StateStrip<NT> S(D, strip);
  float ls = kEmptyLogScale;  // the state's log-scale, the same in every thread
  for_each_tile(D, b, false, [&](int, int rows, int64_t row) {
    if (Queries) {
      load_query_grads(a, b, t, row, rows);
      for (int i = threadIdx.x; i < D.ct; i += kThreads) t.c[i] = i < rows ? -t.L[i] : kEmptyLogScale;
      __syncthreads();
    } else {
      load_keys(a, b, t, row, rows);
    }
    const float top = key_weights(D, t, ls);
    __syncthreads();
    if (holder) {
      S.scale(log_scale_weight(ls, top));
      S.template add_rows<P>(D, Queries ? t.G : t.VP, t.rowsum, Queries ? t.Pq : t.Pk);
    }
    ls = top;
    // No barrier: the next tile first writes X (load_tile, ending with one),
    // which the strips do not read.
  });
  if (holder) S.store(D, (Queries ? a.gS : a.fS) + b.slot(D) * D.state_floats());
  if (threadIdx.x == 0) (Queries ? a.ga : a.fa)[b.slot(D)] = ls;
#else
  if (Queries)
    query_segments_tiles(a);
  else
    key_segments_tiles(a);
#endif
}

// The causal forward of each segment from its scanned state (k_causal_forward),
// the strips in registers.
template <TileMath P, int NT>
__global__ void __launch_bounds__(kThreads, 1) k_causal_forward_resident(Args a) {
  enter_slice(a);
#ifdef PF_FAVOR_MMA_TILES
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  const int strip = threadIdx.x / 32;
  const bool holder = strip < D.D1p / 16;
  StateStrip<NT> S(D, strip);
  if (holder) S.load(D, a.fS + b.slot(D) * D.state_floats());
  float ls = a.fa[b.slot(D)];
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t row) {
    features_of(a, b, t, a.q, row, rows, t.Pq, t.cq);
    load_keys(a, b, t, row, rows);
    causal_row_scales(a, b, t, ls, t0, rows);
    const float top = key_weights(D, t, ls);
    __syncthreads();
    block_mm<false, true>(D, D.ct, D.ct, D.mp, 1.f, t.Pq, D.mp, t.Pk, D.mp, 0.f, t.A, D.ct);
    causal_mask_tile(D, t.A, t.c, t.L);
    if (holder) {
      strip_outputs<P>(D, t, S);
      S.scale(log_scale_weight(ls, top));
      S.template add_rows<P>(D, t.VP, t.rowsum, t.Pk);
    }
    ls = top;
    __syncthreads();
    store_rows(t.DX, D.D1p, rows, D.D1, out_rows(a, b, a.y, D.D1, t0), false);
  });
#else
  causal_forward_tiles(a);
#endif
}

using TileKernel = void (*)(Args);

// The resident kernels for a slice of D.mp features: strips of 8, 16 or 32 tiles.
enum class Resident { KeySegments, QuerySegments, CausalForward };
template <TileMath P, int NT>
TileKernel resident_kernel(Resident which) {
  switch (which) {
    case Resident::KeySegments: return k_segments_resident<P, NT, false>;
    case Resident::QuerySegments: return k_segments_resident<P, NT, true>;
    default: return k_causal_forward_resident<P, NT>;
  }
}
template <TileMath P>
TileKernel resident_kernel(const Dims& D, Resident which) {
  if (D.mp <= 64) return resident_kernel<P, 8>(which);
  if (D.mp <= 128) return resident_kernel<P, 16>(which);
  return resident_kernel<P, 32>(which);
}
inline TileKernel resident_or(const Dims& D, Resident which, TileKernel tiles) {
  if (!D.resident) return tiles;
  return D.math == TileMath::Bf16 ? resident_kernel<TileMath::Bf16>(D, which)
                                  : resident_kernel<TileMath::Tf32>(D, which);
}
// The kernels the launch sequences run for the segments' key states, the
// causal backward's query-gradient states (no dq) and the causal forward.
inline TileKernel key_segments_kernel(const Dims& D) { return resident_or(D, Resident::KeySegments, k_key_segments); }
inline TileKernel causal_query_segments_kernel(const Dims& D) {
  return resident_or(D, Resident::QuerySegments, k_query_segments);
}
inline TileKernel causal_forward_kernel(const Dims& D) {
  return resident_or(D, Resident::CausalForward, k_causal_forward);
}

}  // namespace
}  // namespace favor_cuda
}  // namespace pf
