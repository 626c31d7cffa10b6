// The fused CUDA FAVOR+ algorithm (favor_attention_cuda.cu): sizes, the
// per-block helpers and the tile kernels' bodies (their __global__ entry
// points: favor_attention_cuda_tile_kernels.cuh), written so that the same code runs
// on a GPU and, for the tests, on the CPU under the block emulator of
// tests/support/cuda_block_emulator.h. The order of their launches is in
// favor_attention_cuda_launch.cuh; the kernels that keep the state in
// registers, in favor_attention_cuda_resident.cuh.
//
// Parallel layout: a block per (head, segment, feature slice), segments of
// seg_len rows (enough of them for about kTargetBlocks blocks). The running
// state a block starts from comes from a pass that makes every segment's own
// state and an exclusive scan over the segments with the log-scale combine, so
//   causal forward:  key states -> scan -> each segment's tiles in order;
//   causal backward: key states -> scan from the rank's prefix (dq sweep, in
//                    order) and query-gradient states -> reverse scan (dk, dv
//                    sweep, in reverse), both in one kernel per segment;
//   bidirectional and the prefix/suffix steps: independent tiles.
// The states between segments are [heads, segs, slices, mp D1p] floats
// (about 256 blocks' worth, whatever n is), padded like the tiles.
//
// Feature slices (Dims::slices, feature_slice_width): where one block's tiles
// of all m features would not fit, the features are split into slices of
// Dims::ms (a multiple of 16; the last may be shorter), a block per slice.
// Each slice has its own log-scales: a key's c and a query's cq are the
// largest exponents among the slice's features, and its state carries its
// own log-scale. The slices' parts of a row's y (each at its own row
// log-scale), of dq, dk and dv, of the projection gradient and of the packed
// states are combined exactly: y at the largest of the parts' log-scales
// with each part weighted by exp(its log-scale - that), the states likewise
// (k_merge_states), the gradients summed in slice order (k_sum_parts).
// The row log-scale row_scale includes the query's log-scale cq (so that
// y_i exp(row_scale_i) is the row's true [num, den]); the backward of slice z
// takes row_scale_i - cq_i(z) as the row's log-scale L_i in its formulas. One
// slice (the usual case) writes y, row_scale and the gradients directly.
//
// Projections: W holds w_heads of them (FavorShape::w_heads), padded once per
// call to [w_heads, mp, dp]; head h uses the (h mod w_heads)-th. The exp
// kernel trains them: its backward calls take dW [heads, m, d], and each
// block adds its rows' s T^T X (weight_grad) to its own padded slot of
// [heads, segs, mp, dp]; a last kernel adds the slots of each head to dW in
// segment order, so dW does not depend on the scheduling of the blocks.
//
// Pieces (FavorShape::pieces): the call's heads are spans of rows of the
// buffers, read from a device table [heads][3] (row0, len, head); Dims::n is
// the longest span, so a segment past a shorter span's end has no rows and
// keeps the empty state, which the scans pass over. The projection gradients
// of the spans that share a head add into its dW slot, spans in order.
//
// The per-element kernels over projections, states and slices' parts are in
// favor_attention_cuda_states.cuh.
// It holds no __global__ function, so a file that includes it compiles only
// the kernels it defines or includes besides (favor_attention_cuda.cu: the
// tile kernels, the per-element ones and the launches;
// favor_attention_cuda_resident_tf32.cu and _bf16.cu: the resident kernels).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/favor_attention/favor_attention_cuda_tiles.cuh"
#include "kernels/feature_map/feature_map_rows.h"
#include "runtime/int_math.h"
#include "runtime/row_spans.h"

namespace pf {
namespace favor_cuda {
namespace {

constexpr int64_t kTargetBlocks = 256;
constexpr int kSegmentMultiple = 32;

inline int pad16(int64_t x) { return static_cast<int>((x + 15) / 16 * 16); }

// Segments per head: about kTargetBlocks blocks in all (over heads and
// slices), none shorter than kSegmentMultiple rows. Independent of the
// device, so results are too (up to the tile rows).
inline void set_segments(const FavorShape& s, Dims& D) {
  const int64_t n = std::max<int64_t>(s.n, 1);
  const int64_t want = std::max<int64_t>(1, ceil_div(kTargetBlocks, std::max<int64_t>(s.heads, 1) * D.slices));
  const int64_t segs = std::min(want, ceil_div(n, kSegmentMultiple));
  D.seg_len = static_cast<int>(ceil_div(ceil_div(n, segs), kSegmentMultiple) * kSegmentMultiple);
  D.segs = static_cast<int>(ceil_div(n, D.seg_len));
}

// The widest padded slice whose state strip a lane holds in registers (32
// tiles: 128 floats; favor_attention_cuda_resident.cuh).
constexpr int kResidentFeatures = 256;

// Whether the resident kernels take a call of sizes D: tensor-core tile
// math, a slice of at most kResidentFeatures, a strip of d + 1 per warp at
// most, tiles of at most 32 rows.
inline bool resident_fits(const Dims& D) {
  return D.math != TileMath::Fp32 && D.mp <= kResidentFeatures && D.D1p <= 16 * kWarps && D.ct <= 32;
}

// The sizes of a call with tiles of ct rows and feature slices of `width`
// features (all m: one slice).
inline Dims dims_for(const FavorShape& s, int ct, TileMath math, bool smem_state, int width) {
  Dims D;
  D.n = static_cast<int>(s.n);
  D.d = static_cast<int>(s.d);
  D.m_all = static_cast<int>(s.m);
  D.ms = static_cast<int>(std::min<int64_t>(width, s.m));
  D.slices = static_cast<int>(ceil_div(s.m, D.ms));
  D.D1 = D.d + 1;
  D.dp = pad16(s.d);
  D.mp = pad16(D.ms);
  D.D1p = pad16(s.d + 1);
  D.ct = ct;
  set_segments(s, D);
  const FeatureRowParams r(s.features, s.m);
  D.data_scale = r.data_scale;
  D.inv_sqrt_m = r.inv_sqrt_m;
  D.eps = r.eps;
  D.softmax = r.softmax;
  D.half_norm = r.half_norm;
  D.elu = r.elu;
  D.w_heads = static_cast<int>(s.w_heads);
  D.math = math;
  D.smem_state = smem_state;
  D.resident = s.state_in_registers && resident_fits(D);
  D.smem_projection = s.projection_in_shared && D.resident && D.smem_state;
  return D;
}

inline int64_t smem_bytes(const Dims& D) { return Tiles::floats(D) * static_cast<int64_t>(sizeof(float)); }

// Shared memory that a block of one feature slice may take with 16-row fp32
// tiles: what every device from sm_70 on allows a block.
constexpr int64_t kSliceSmemBytes = 96 * 1024;

// Features per slice: FavorShape::feature_slice when given, else all m when
// one block's 16-row fp32 tiles of them fit in kSliceSmemBytes, else the
// widest multiple of 16 below m whose tiles do (16 at least). Independent of
// the device, so that the workspace the planner counts holds on any.
inline int feature_slice_width(const FavorShape& s) {
  const int m = static_cast<int>(std::max<int64_t>(s.m, 1));
  if (s.feature_slice > 0) return static_cast<int>(std::min<int64_t>(s.feature_slice, m));
  auto fits = [&](int w) { return smem_bytes(dims_for(s, 16, TileMath::Fp32, false, w)) <= kSliceSmemBytes; };
  if (fits(m)) return m;
  int w = (m - 1) / 16 * 16;
  while (w > 16 && !fits(w)) w -= 16;
  return std::max(w, 16);
}

inline Dims dims_for(const FavorShape& s, int ct, TileMath math, bool smem_state = false) {
  return dims_for(s, ct, math, smem_state, feature_slice_width(s));
}

// The least shared memory a block of the fused kernels takes for shape s:
// 16-row tiles without the carried state (the tile kernels'). A device
// whose blocks may have that much runs the fused kernels (favor_cuda_fits).
inline int64_t favor_min_smem_bytes(const FavorShape& s) { return smem_bytes(dims_for(s, 16, TileMath::Fp32)); }

// The call's sizes on a device of compute capability `major` (tensor cores
// from 8 on) whose blocks may have `limit` bytes of shared memory: the
// first of these that fits: 32-row tiles with the carried state in shared
// memory and (where the resident kernels run and
// FavorShape::projection_in_shared) the projection beside their stage
// (H100, H200 at d = 64, m = 256: 226.9 KiB in TF32, 225.7 in bf16), the
// same without the projection, 32-row tiles, 16-row tiles with the state
// (and the projection, then without), 16-row tiles, and last 16-row tiles
// on the tile kernels (no stage: favor_min_smem_bytes). The order is a
// guess that no GPU has timed yet. False where none fits (limit below
// favor_min_smem_bytes).
inline bool plan_dims(const FavorShape& s, int major, int64_t limit, Dims* out) {
  const TileMath math = major >= 8 ? s.tile_math : TileMath::Fp32;
  FavorShape global_w = s, tiles = s;
  global_w.projection_in_shared = false;
  tiles.state_in_registers = false;
  for (const Dims& D : {dims_for(s, 32, math, true), dims_for(global_w, 32, math, true), dims_for(s, 32, math, false),
                        dims_for(s, 16, math, true), dims_for(global_w, 16, math, true), dims_for(s, 16, math, false),
                        dims_for(tiles, 16, math, false)})
    if (smem_bytes(D) <= limit) {
      *out = D;
      return true;
    }
  return false;
}

}  // namespace

// ---- arguments and per-block helpers --------------------------------------------
// The kernels' arguments. Outside the anonymous namespace: the resident
// kernels' files hand their kernels (void (*)(Args)) to this one's
// (favor_attention_cuda_resident.cuh).
struct Args {
  Dims D;
  int64_t extent;                               // rows of the buffers the call reaches
  const float *q, *k, *v, *Wp, *o, *den, *d_o;  // Wp: the padded projections [w_heads][slices][mp dp]
  // Outputs: the call's buffers, or with several slices each slice's parts
  // (out_rows); L is the forward's output and the backward's input row_scale.
  float *y, *L, *dq, *dk, *dv;
  float* fS;  // forward states [heads][segs][slices][mp D1p]
  float* fa;  // their log-scales [heads][segs][slices]
  float* gS;  // gradient states, likewise
  float* ga;
  const float* Sp;       // one padded state per head and slice [heads][slices][mp D1p] (prefix, total or suffix)
  const float* sa;       // its log-scale, packed: sa[h * packed_size]
  float* dWp;            // null, or the blocks' projection gradients [heads][segs][slices][mp dp]
  bool accumulate;       // add to the outputs (one slice only: parts are always written)
  const int64_t* spans;  // null (head h is rows [h n, (h + 1) n)), or the pieces' table [heads][3]
};

namespace {

// The rows and the projection of call head h.
struct HeadRows {
  int64_t row0;  // its first row in the buffers
  int len;       // its rows
  int w;         // its projection (mod w_heads) and dW slot
};
__host__ __device__ inline HeadRows head_rows(const Dims& D, const int64_t* spans, int h) {
  const RowSpan x = span_of(spans, h, D.n);
  return HeadRows{x.row0, static_cast<int>(x.len), static_cast<int>(x.head)};
}

struct Block {
  int h, seg, z, r0, r1, w;  // head, segment, feature slice, rows [r0, r1) of the head, its projection
  int64_t row0;              // the head's first row in the buffers
  __device__ Block(const Args& a) {
    const Dims& D = a.D;
    h = blockIdx.x;  // heads on x, whose grid limit is 2^31 - 1
    seg = blockIdx.y;
    z = blockIdx.z;
    const HeadRows x = head_rows(D, a.spans, h);
    row0 = x.row0;
    w = x.w;
    r0 = seg * D.seg_len;
    const int end = min(x.len, r0 + D.seg_len);
    r1 = end > r0 ? end : r0;  // a segment past the span's end has no rows
  }
  __device__ int64_t row(const Dims&, int t0) const { return row0 + t0; }  // row index in the buffers
  // Index of this block among all [heads][segs][slices] ones.
  __device__ int64_t slot(const Dims& D) const { return (int64_t(h) * D.segs + seg) * D.slices + z; }
};

// Where a block writes rows [t0, t0 + rows) of its head's output of `width`
// columns: the call's buffer `out` at the head's rows (one slice), or the
// same rows of its slice's part in `out` [slices][extent][width], which a
// combine kernel adds up (k_combine_rows, k_sum_parts).
__device__ inline float* out_rows(const Args& a, const Block& b, float* out, int width, int t0) {
  return out + (int64_t(b.z) * a.extent + b.row0 + t0) * width;
}

// The block's padded projection [mp, dp]: its head's, its slice's rows.
__device__ inline const float* head_projection(const Args& a, const Block& b) {
  return a.Wp + (int64_t(b.w % a.D.w_heads) * a.D.slices + b.z) * a.D.projection_floats();
}

// The block's slot of the projection gradient, zeroed (null when W is held
// constant); weight_grad adds to it after each feature_grad.
__device__ inline float* zeroed_weight_grad(const Args& a, const Block& b) {
  if (!a.dWp) return nullptr;
  float* dW = a.dWp + b.slot(a.D) * a.D.projection_floats();
  for (int64_t e = threadIdx.x; e < a.D.projection_floats(); e += kThreads) dW[e] = 0.f;
  __syncthreads();
  return dW;
}

// feature_grad for the block's head by its projection W, then (when dW is
// not null) its weight_grad.
__device__ inline void feature_and_weight_grad(const Dims& D, const Tiles& t, const Projection& W, const float* Phi,
                                               float* dW) {
  feature_grad(D, t, W, Phi);
  if (dW) weight_grad(D, t, dW);
}

__device__ inline Tiles shared_tiles(const Dims& D) {
  PF_CUDA_SHARED_FLOATS(smem);
  return Tiles(D, smem);
}

// X <- rows of x (q or k), then their features by W in Phi (and log-scales
// in c); W the block's projection unless given.
__device__ inline void features_of(const Dims& D, const Tiles& t, const Projection& W, const float* x, int64_t row,
                                   int rows, float* Phi, float* c) {
  load_tile(x + row * D.d, rows, D.d, t.X, D.ct, tile_ld(D.dp));
  make_features(D, t, W, Phi, c, rows);
}
__device__ inline void features_of(const Args& a, const Block& b, const Tiles& t, const float* x, int64_t row, int rows,
                                   float* Phi, float* c) {
  features_of(a.D, t, head_projection(a, b), x, row, rows, Phi, c);
}

// t.L[i] = the row log-scale L_i of the tile's rows for this slice: the
// row_scale raw[i] (global, or staged) less the query's log-scale t.cq[i]
// in the slice (set by the query features first); padded rows get
// -kEmptyLogScale, so that every weight exp(x - L_i) of theirs is 0. Its
// barrier also publishes the G rows of load_gradient, which runs just before.
__device__ inline void row_scales(const Dims& D, const Tiles& t, const float* raw, int rows) {
  for (int i = threadIdx.x; i < D.ct; i += kThreads) t.L[i] = i < rows ? raw[i] - t.cq[i] : -kEmptyLogScale;
  __syncthreads();
}

// t.c[i] = -L_i: the log-scales of the tile's queries as the rows of the
// gradient state; padded rows empty.
__device__ inline void query_log_scales(const Dims& D, const Tiles& t, int rows) {
  for (int i = threadIdx.x; i < D.ct; i += kThreads) t.c[i] = i < rows ? -t.L[i] : kEmptyLogScale;
  __syncthreads();
}

// The keys of a tile: features Pk with log-scales c, and V' = [v 1].
__device__ inline void load_keys(const Args& a, const Block& b, const Tiles& t, int64_t row, int rows) {
  features_of(a, b, t, a.k, row, rows, t.Pk, t.c);
  load_vprime(a.D, a.v + row * a.D.d, a.D.d, rows, t.VP);
}

// The queries' side of a tile's backward: its q loaded into X, features Pq
// by the block's projection (log-scales cq), the gradient rows G from o,
// d_o and den, and the row log-scales L from a.L's rows.
__device__ inline void load_query_grads(const Args& a, const Block& b, const Tiles& t, int64_t row, int rows) {
  const Dims& D = a.D;
  load_tile(a.q + row * D.d, rows, D.d, t.X, D.ct, tile_ld(D.dp));
  make_features(D, t, head_projection(a, b), t.Pq, t.cq, rows);
  load_gradient(D, a.o + row * D.d, a.den + row, a.d_o + row * D.d, D.d, rows, t.G);
  row_scales(D, t, a.L + row, rows);
}

// Calls tile(t0, rows, row) for every tile of the block's rows, in order or
// from the last: t0 its first row in the head, rows its rows (ct, or fewer
// for the last), row its first row in the buffers.
template <class Body>
__device__ __forceinline__ void for_each_tile(const Dims& D, const Block& b, bool reverse, Body&& tile) {
  const int tiles = (b.r1 - b.r0 + D.ct - 1) / D.ct;
  PF_NO_UNROLL
  for (int i = 0; i < tiles; ++i) {
    const int t0 = b.r0 + (reverse ? tiles - 1 - i : i) * D.ct;
    tile(t0, min(D.ct, b.r1 - t0), b.row(D, t0));
  }
}

// The state a block carries from tile to tile: the global `src` itself or,
// with Dims::smem_state, a copy of it in t.S. Ends with a barrier.
__device__ inline float* carried_state(const Dims& D, const Tiles& t, const float* src) {
  if (!D.smem_state) {
    __syncthreads();
    return const_cast<float*>(src);  // the kernels that only read it take it const
  }
  for (int64_t e = threadIdx.x; e < D.state_floats(); e += kThreads) t.S[e] = src[e];
  __syncthreads();
  return t.S;
}
// A zero state to sum into: the global `dst` or, with Dims::smem_state, t.S
// (store_carried_state writes it to dst). Ends with a barrier.
__device__ inline float* zeroed_carried_state(const Dims& D, const Tiles& t, float* dst) {
  float* S = D.smem_state ? t.S : dst;
  for (int64_t e = threadIdx.x; e < D.state_floats(); e += kThreads) S[e] = 0.f;
  __syncthreads();
  return S;
}
// The carried state S back to global dst (a no-op when S is dst).
__device__ inline void store_carried_state(const Dims& D, const float* S, float* dst) {
  if (S != dst)
    for (int64_t e = threadIdx.x; e < D.state_floats(); e += kThreads) dst[e] = S[e];
  __syncthreads();
}

// The block's segment's state in `states` [heads][segs][mp D1p], zeroed, with
// its log-scale t.scalar[slot] empty: the start of a sum over the segment,
// carried as zeroed_carried_state says (store_segment_state writes it back).
__device__ inline float* zeroed_segment_state(const Args& a, const Block& b, const Tiles& t, float* states, int slot) {
  if (threadIdx.x == 0) t.scalar[slot] = kEmptyLogScale;
  return zeroed_carried_state(a.D, t, states + b.slot(a.D) * a.D.state_floats());
}
__device__ inline void store_segment_state(const Args& a, const Block& b, const float* S, float* states) {
  store_carried_state(a.D, S, states + b.slot(a.D) * a.D.state_floats());
}

// The padded state of the block's head and slice given to the call (Sp) and
// its log-scale (sa, one for all slices): the prefix, total or suffix.
__device__ inline const float* head_state(const Args& a, const Block& b) {
  return a.Sp + (int64_t(b.h) * a.D.slices + b.z) * a.D.state_floats();
}
__device__ inline float head_log_scale(const Args& a, const Block& b) { return a.sa[int64_t(b.h) * a.D.packed_size()]; }

// (rho, R) (+)= the tile's queries: Pq with log-scales -L_i and values G
// (t.scalar[1] holds rho).
__device__ inline void add_queries_to_gradient_state(const Dims& D, const Tiles& t, int rows, float* R) {
  query_log_scales(D, t, rows);
  state_update(D, t, 1, t.Pq, t.c, t.G, R);
}

// The feature backward of the dPhi in WK for features Phi (and the block's
// dW part) by the projection W, stored to the tile's rows of out [rows, d]
// (+)=; W the block's in global memory unless given.
__device__ inline void store_feature_grad(const Args& a, const Tiles& t, const Projection& W, const float* Phi,
                                          float* dW, int rows, float* out, bool accumulate) {
  feature_and_weight_grad(a.D, t, W, Phi, dW);
  store_rows(t.DX, tile_ld(a.D.D1p), rows, a.D.d, out, accumulate);
}
__device__ inline void store_feature_grad(const Args& a, const Block& b, const Tiles& t, const float* Phi, float* dW,
                                          int rows, float* out, bool accumulate) {
  store_feature_grad(a, t, head_projection(a, b), Phi, dW, rows, out, accumulate);
}

// out [ct, N] = diag(t.w) X op(S) + mask(X Y^T) Z: a causal tile's product
// with the state S [mp, D1p] of the rows before it (op(S) = S, or S^T when
// TS) plus the masked one with its own rows (causal_mask_tile with t.c, t.L;
// the mask in M [ct, ct]); X, Y [ct, K], Z [ct, N]. The forward's y
// (X = Pq, Y = Pk, Z = V') and the backward's dPq (X = G, Y = V', Z = Pk).
template <bool TS>
__device__ inline void causal_tile_product(const Dims& D, const Tiles& t, int N, int K, const float* X, const float* S,
                                           const float* Y, const float* Z, float* M, float* out) {
  const int lk = tile_ld(K), ln = tile_ld(N), lc = tile_ld(D.ct);
  block_mm<false, TS>(D, D.ct, N, K, 1.f, X, lk, S, D.D1p, 0.f, out, ln, row_weights(t.w));
  block_mm<false, true>(D, D.ct, D.ct, K, 1.f, X, lk, Y, lk, 0.f, M, lc);
  causal_mask_tile(D, M, t.c, t.L);
  block_mm<false, false>(D, D.ct, N, D.ct, 1.f, M, lc, Z, ln, 1.f, out, ln);
}

// The key gradients of a tile at row t0 of the head: dv from DX, then dk
// from the dPk in WK.
__device__ inline void store_key_grads(const Args& a, const Block& b, const Tiles& t, float* dW, int t0, int rows,
                                       bool accumulate) {
  store_rows(t.DX, tile_ld(a.D.D1p), rows, a.D.d, out_rows(a, b, a.dv, a.D.d, t0), accumulate);
  store_feature_grad(a, b, t, t.Pk, dW, rows, out_rows(a, b, a.dk, a.D.d, t0), accumulate);
}

// A causal tile's row log-scales (a thread per row): t.L[i] = L_i, the
// largest of the carried state's `ls` and of keys 0..i; t.w[i] = exp(ls -
// L_i), the weight of the state's part; the row_scale output L_i + cq_i. The
// caller syncs before reading them.
__device__ inline void causal_row_scales(const Args& a, const Block& b, const Tiles& t, float ls, int t0, int rows) {
  float* L = out_rows(a, b, a.L, 1, t0);
  for (int i = threadIdx.x; i < a.D.ct; i += kThreads) {
    float run = ls;
    for (int j = 0; j <= i; ++j) run = max_log_scale(run, t.c[j]);
    t.L[i] = run;
    t.w[i] = log_scale_weight(ls, run);
    if (i < rows) L[i] = run + t.cq[i];
  }
}

// ---- tile kernels' bodies (entry points: favor_attention_cuda_tile_kernels.cuh) ------
// Every segment's own key state: (fa, fS)[h][seg] = sum over its rows.
__device__ __forceinline__ void key_segments_tiles(const Args& a) {
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  float* S = zeroed_segment_state(a, b, t, a.fS, 0);
  for_each_tile(D, b, false, [&](int, int rows, int64_t row) {
    load_keys(a, b, t, row, rows);
    state_update(D, t, 0, t.Pk, t.c, t.VP, S);
  });
  store_segment_state(a, b, S, a.fS);
  if (threadIdx.x == 0) a.fa[b.slot(D)] = t.scalar[0];
}

// The bidirectional dq of a tile at row t0 of the head (its Pq, G and L
// made): dPq = diag(exp(a - L_i)) G S^T with (a, S) the head's total state
// (total_a its log-scale), read from global memory; then the feature
// backward (by the projection W) to the tile's rows of dq and the block's
// dW part. Ends with a barrier.
__device__ inline void store_total_query_grad(const Args& a, const Block& b, const Tiles& t, const Projection& W,
                                              float total_a, float* dW, int t0, int rows) {
  const Dims& D = a.D;
  for (int i = threadIdx.x; i < D.ct; i += kThreads)
    t.w[i] = i < rows && !is_empty_log_scale(total_a) ? log_scale_weight(total_a, t.L[i]) : 0.f;
  __syncthreads();
  block_mm<false, true>(D, D.ct, D.mp, D.D1p, 1.f, t.G, tile_ld(D.D1p), head_state(a, b), D.D1p, 0.f, t.WK,
                        tile_ld(D.mp), row_weights(t.w));
  store_feature_grad(a, t, W, t.Pq, dW, rows, out_rows(a, b, a.dq, D.d, t0), false);
}

// Every segment's own query-gradient state: (ga, gS)[h][seg] = sum over its
// rows of exp(-L_i) phi_q[i] G_i^T; with dq != null (bidirectional), also
// dq = the feature backward of exp(b - L_i) G_i Tot^T for the total (sa, Sp).
__device__ __forceinline__ void query_segments_tiles(const Args& a) {
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  float* R = zeroed_segment_state(a, b, t, a.gS, 1);
  float* dW = a.dq ? zeroed_weight_grad(a, b) : nullptr;
  const float tot_a = a.dq ? head_log_scale(a, b) : 0.f;
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t row) {
    load_query_grads(a, b, t, row, rows);
    if (a.dq) store_total_query_grad(a, b, t, head_projection(a, b), tot_a, dW, t0, rows);
    add_queries_to_gradient_state(D, t, rows, R);
  });
  store_segment_state(a, b, R, a.gS);
  if (threadIdx.x == 0) a.ga[b.slot(D)] = t.scalar[1];
}

// Causal forward of each segment from its scanned state (fa, fS):
//   Y = diag(exp(a - L_i)) Pq S + mask(Pq Pk^T) V';  (a, S) (+)= the tile's keys.
__device__ __forceinline__ void causal_forward_tiles(const Args& a) {
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  if (threadIdx.x == 0) t.scalar[0] = a.fa[b.slot(D)];
  float* S = carried_state(D, t, a.fS + b.slot(D) * D.state_floats());
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t row) {
    features_of(a, b, t, a.q, row, rows, t.Pq, t.cq);
    load_keys(a, b, t, row, rows);
    causal_row_scales(a, b, t, t.scalar[0], t0, rows);
    __syncthreads();
    causal_tile_product<false>(D, t, D.D1p, D.mp, t.Pq, S, t.Pk, t.VP, t.A, t.DX);
    store_rows(t.DX, tile_ld(D.D1p), rows, D.D1, out_rows(a, b, a.y, D.D1, t0), false);
    state_update(D, t, 0, t.Pk, t.c, t.VP, S);
  });
}

// The prefix's or total's part of a tile's rows of y: with the state (pa,
// P) of the head and L'_i = max(L_i, pa + cq_i),
//   y_i = exp(L_i - L'_i) y_i + exp(pa + cq_i - L'_i) phi_q[i] P,
// or (overwrite: y and L start empty) y_i = phi_q[i] P at L'_i = pa + cq_i.
// prefix_row_weights sets t.L[i] = L'_i, t.rowsum[i] the old row's weight
// and t.w[i] the state's (a thread per row; the caller syncs before reading
// them); store_prefix_rows adds the old rows to the state's part in DX
// [ct, D1p] and writes y and the row log-scales.
__device__ inline void prefix_row_weights(const Args& a, const Block& b, const Tiles& t, float pa, int t0, int rows) {
  const float* L = out_rows(a, b, a.L, 1, t0);
  for (int i = threadIdx.x; i < a.D.ct; i += kThreads) {
    const float old = i < rows && a.accumulate ? L[i] : kEmptyLogScale;
    const float part = pa + t.cq[i];  // empty with pa
    const float top = max_log_scale(old, part);
    t.L[i] = top;
    t.rowsum[i] = log_scale_weight(old, top);  // weight of the old y row
    t.w[i] = log_scale_weight(part, top);      // weight of the state's part
  }
}
__device__ inline void store_prefix_rows(const Args& a, const Block& b, const Tiles& t, int t0, int rows) {
  const Dims& D = a.D;
  float* y = out_rows(a, b, a.y, D.D1, t0);
  float* L = out_rows(a, b, a.L, 1, t0);
  for (int e = threadIdx.x; e < rows * D.D1; e += kThreads) {
    const int i = e / D.D1, x = e % D.D1;
    float* out = y + int64_t(i) * D.D1 + x;
    *out = (a.accumulate ? t.rowsum[i] * *out : 0.f) + t.DX[i * tile_ld(D.D1p) + x];
  }
  for (int i = threadIdx.x; i < rows; i += kThreads) L[i] = t.L[i];
}

// The prefix's or total's part of y for the state (sa, Sp) of each head
// (prefix_row_weights): a product of each tile's query features with the
// state, read from the carried copy.
__device__ __forceinline__ void add_prefix_tiles(const Args& a) {
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  const float pa = head_log_scale(a, b);
  if (is_empty_log_scale(pa) && a.accumulate) return;  // uniform over the block
  const float* P = carried_state(D, t, head_state(a, b));
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t row) {
    features_of(a, b, t, a.q, row, rows, t.Pq, t.cq);
    prefix_row_weights(a, b, t, pa, t0, rows);
    __syncthreads();
    block_mm<false, false>(D, D.ct, D.D1p, D.mp, 1.f, t.Pq, tile_ld(D.mp), P, D.D1p, 0.f, t.DX, tile_ld(D.D1p),
                           row_weights(t.w));
    store_prefix_rows(a, b, t, t0, rows);
    __syncthreads();
  });
}

// Sweep 2 of the causal backward (k_causal_backward), in reverse from the
// gradient state (ga, gS) of later rows, its dW parts added to dW:
//   dPk = diag(exp(c_j + rho)) V' R^T + mask(G V'^T)^T Pq -> dk
//   dV  = diag(exp(c_j + rho)) Pk R[:, :d] + mask(Pq Pk^T)^T G[:, :d]
//   (rho, R) (+)= the tile's queries with log-scales -L_i.
// A tile's products, once Pq, G, L, Pk, c and V' are made: dPk in WK and
// dV in DX (rho in t.scalar[1]). Reads R, writes w, A and B too.
__device__ __forceinline__ void key_sweep_products(const Dims& D, const Tiles& t, const float* R) {
  for (int i = threadIdx.x; i < D.ct; i += kThreads) t.w[i] = log_scale_weight(t.c[i], -t.scalar[1]);
  __syncthreads();
  const int lm = tile_ld(D.mp), l1 = tile_ld(D.D1p), lc = tile_ld(D.ct);
  block_mm<false, true>(D, D.ct, D.mp, D.D1p, 1.f, t.VP, l1, R, D.D1p, 0.f, t.WK, lm, row_weights(t.w));
  block_mm<false, false>(D, D.ct, D.D1p, D.mp, 1.f, t.Pk, lm, R, D.D1p, 0.f, t.DX, l1, row_weights(t.w));
  block_mm<false, true>(D, D.ct, D.ct, D.mp, 1.f, t.Pq, lm, t.Pk, lm, 0.f, t.A, lc);
  causal_mask_tile(D, t.A, t.c, t.L);
  block_mm<false, true>(D, D.ct, D.ct, D.D1p, 1.f, t.G, l1, t.VP, l1, 0.f, t.B, lc);
  causal_mask_tile(D, t.B, t.c, t.L);
  block_mm<true, false>(D, D.ct, D.mp, D.ct, 1.f, t.B, lc, t.Pq, lm, 1.f, t.WK, lm);
  block_mm<true, false>(D, D.ct, D.D1p, D.ct, 1.f, t.A, lc, t.G, l1, 1.f, t.DX, l1);
}
// The sweep, every row loaded when its tile starts (the resident kernel's
// stages them: key_sweep_staged).
__device__ __forceinline__ void causal_backward_key_sweep(const Args& a, const Block& b, const Tiles& t, float* dW) {
  const Dims& D = a.D;
  const int64_t slot = b.slot(D);
  if (threadIdx.x == 0) t.scalar[1] = a.ga[slot];
  float* R = carried_state(D, t, a.gS + slot * D.state_floats());
  for_each_tile(D, b, true, [&](int t0, int rows, int64_t row) PF_INLINE_LAMBDA {
    load_query_grads(a, b, t, row, rows);
    load_keys(a, b, t, row, rows);  // k last, so that X holds k
    key_sweep_products(D, t, R);
    store_key_grads(a, b, t, dW, t0, rows, false);
    add_queries_to_gradient_state(D, t, rows, R);
  });
}

#ifdef PF_FAVOR_MMA_TILES
// The tiles of k_key_grad_from_state where the resident kernels run
// (Dims::resident) and the state R (log-scale rho) is not empty: the same
// products, with each tile's rows copied in during the tile before. Its k
// goes to X or, every other tile, to G (which this step leaves alone) as
// soon as the tile before starts; its v to VP (at VP's row stride; the
// ones follow: finish_vprime) once the tile before's dPk product has read VP.
__device__ __forceinline__ void key_grads_from_state_staged(const Args& a, const Block& b, const Tiles& t,
                                                            const float* R, float rho, float* dW) {
  const Dims& D = a.D;
  const int lm = tile_ld(D.mp), l1 = tile_ld(D.D1p);
  // The copies of the tile at head row t0 (k into `dst`, or v): one group,
  // empty past the block's rows.
  auto stage = [&](int t0, const float* x, float* dst, int ld) {
    if (t0 < b.r1) start_tile(x + b.row(D, t0) * D.d, min(D.ct, b.r1 - t0), D.d, dst, D.ct, ld);
    cp_async_commit();
  };
  stage(b.r0, a.k, t.X, tile_ld(D.dp));
  stage(b.r0, a.v, t.VP, l1);
  bool in_g = false;  // this tile's k is in G rather than X
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t) {
    Tiles keys = t;
    keys.X = in_g ? t.G : t.X;
    wait_rows();  // and the tile before's key gradients are stored: its k is read
    stage(t0 + D.ct, a.k, in_g ? t.X : t.G, tile_ld(D.dp));
    finish_vprime(D, t.VP, rows);
    make_features(D, keys, head_projection(a, b), t.Pk, t.c, rows);
    for (int i = threadIdx.x; i < D.ct; i += kThreads) t.w[i] = log_scale_weight(t.c[i], -rho);
    __syncthreads();
    block_mm<false, true>(D, D.ct, D.mp, D.D1p, 1.f, t.VP, l1, R, D.D1p, 0.f, t.WK, lm, row_weights(t.w));
    stage(t0 + D.ct, a.v, t.VP, l1);  // the product ends with a barrier: VP is read
    block_mm<false, false>(D, D.ct, D.D1p, D.mp, 1.f, t.Pk, lm, R, D.D1p, 0.f, t.DX, l1, row_weights(t.w));
    store_key_grads(a, b, keys, dW, t0, rows, a.accumulate);
    in_g = !in_g;
  });
}
#endif

// Causal backward of each segment. Sweep 1, in order, from the forward state
// (fa, fS) at the segment's start (the rank's prefix included):
//   dPq = diag(exp(a - L_i)) G S^T + mask(G V'^T) Pk -> dq;  (a, S) (+)= keys.
// Sweep 2: causal_backward_key_sweep.
__device__ __forceinline__ void causal_backward_tiles(const Args& a) {
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  const int64_t slot = b.slot(D);
  if (threadIdx.x == 0) t.scalar[0] = a.fa[slot];
  // One sweep's state at a time: with Dims::smem_state both use t.S.
  float* S = carried_state(D, t, a.fS + slot * D.state_floats());
  float* dW = zeroed_weight_grad(a, b);
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t row) {
    load_keys(a, b, t, row, rows);
    load_query_grads(a, b, t, row, rows);  // q last, so that X holds q
    for (int i = threadIdx.x; i < D.ct; i += kThreads) t.w[i] = log_scale_weight(t.scalar[0], t.L[i]);
    __syncthreads();
    causal_tile_product<true>(D, t, D.mp, D.D1p, t.G, S, t.VP, t.Pk, t.B, t.WK);
    store_feature_grad(a, b, t, t.Pq, dW, rows, out_rows(a, b, a.dq, D.d, t0), false);
    state_update(D, t, 0, t.Pk, t.c, t.VP, S);
  });
  causal_backward_key_sweep(a, b, t, dW);
}

}  // namespace
}  // namespace favor_cuda
}  // namespace pf
