// FAVOR+ attention on raw queries and keys: the random features of each chunk
// of positions are made in a cache-sized tile, used at once and dropped, so no
// [N, m] feature buffer exists anywhere (ARCHITECTURE.md §2; the derivation is
// in docs/kernels/favor-attention.md).
//
// Two layers of API:
//  1. The sequence-parallel protocol (FavorShape, favor_* below): the same steps
//     as linear_attention.h, but taking q, k and the projection W instead of
//     precomputed features. The model's attention layer (model/attention.cc)
//     runs these, with the scans between them.
//  2. The one-rank composite favor_attention_forward/backward (FavorAttentionParams:
//     a FavorShape and the direction), the protocol without communication,
//     which performer-attn and the benchmarks run.
//
//   q, k, v, o, d_o, dq, dk, dv  [heads, n, d]  fp32, heads = B*H blocks of [n, d]
//   W                            [w_heads, m, d] projections: head h uses W_(h mod w_heads)
//                                               (1: one random projection shared by all heads;
//                                               H: the per-head trained projections of exp)
//   dW                           [heads, m, d]  backward only, nullptr when W is held constant:
//                                               each head's gradient of its W, accumulated (+=)
//   y                            [heads, n, d+1] unnormalised [num, den] at log-scale row_scale
//   row_scale, den               [heads, n]
//   states                       [heads, 1 + m (d+1)] packed (log-scale, S), as in linear_attention.h
//
// out_i = sum_{j in J(i)} k(q_i, k_j) v_j / sum_{j in J(i)} k(q_i, k_j) with the
// random-feature kernel k(x, y) = exp(c_x) phi(x) . exp(c_y) phi(y) (FAVOR+,
// an unbiased estimate of exp(x.y) at x = data_scale q) or relu features, and
// J(i) = {j <= i} (causal) or all j (bidirectional).
//
// Implementations (FavorShape::slab_rows):
//  - fused CPU (slab_rows = 0): one head per thread, one chunk of C positions at
//    a time: features of the chunk's q and k by one sgemm and the vectorised
//    row loops of feature_map_rows.h, the intra-chunk products and the running
//    state by sgemm, all in a per-thread tile of O(C (m + d) + m d) floats. The
//    backward sweeps the chunks forward (dq, with the forward state) and then
//    in reverse (dk, dv, with the gradient state), remaking each chunk's
//    features in both sweeps.
//  - fused CUDA (slab_rows = 0, favor_attention_cuda.cu): the same per tile of 16
//    or 32 rows in shared memory (FavorShape::chunk does not apply), a block
//    per (head, segment): each segment's own state, an exclusive scan over
//    the segments, then each segment's tiles in order (and in reverse for
//    dk, dv). Tensor cores (mma.sync, TF32 or bf16 operands) when
//    FavorShape::tile_math asks and the device is sm_80+, else fp32.
//    Where one block's tiles of all m features would not fit, the features
//    are split into slices, a block each, whose parts are combined exactly
//    (FavorShape::feature_slice). Per-head projections (w_heads) are padded
//    once per call; dW (exp's, or any kernel's a test asks for) is summed
//    per block and then per head in a fixed order (deterministic). Shapes
//    whose 16-row tiles of a 16-feature slice exceed the device's shared
//    memory run in slabs (forward and backward alike).
//  - in slabs (slab_rows > 0, on any backend): one head at a time, a slab of
//    slab_rows positions at a time, through the feature-map and
//    linear-attention kernels of that backend, with the state carried between
//    slabs; the feature buffers are [slab_rows, m], whatever n is (memory
//    blocking, not an attention window: every slab sees the state of all the
//    positions before it). The backward keeps the forward state at the start
//    of each slab, [ceil(n / slab_rows), 1 + m (d+1)] per head.
// Both give the same results as the unfused composition up to fp32 rounding.
// Temporaries are recorded in ctx.tracker (CPU: optional; CUDA: required)
// under "favor_attention". All pointers live on ctx.device.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/feature_map/feature_map.h"
#include "kernels/linear_attention/linear_attention.h"
#include "runtime/exec.h"
#include "runtime/row_spans.h"
#include "runtime/tensor.h"
#include "runtime/tile_math.h"

namespace pf {

// ---- 1. the sequence-parallel protocol --------------------------------------------
// A call over pieces of rows (packed samples, model/attention_packed.cc): head
// i of the call covers rows [row0, row0 + len) of buffers laid out as rows:
// q, k, v, o, d_o, dq, dk, dv [rows, d], y [rows, d+1], row_scale and den
// [rows]; it uses the projection W_(head mod w_heads) and adds its dW to slot
// `head` of dW [slots, m, d]. States stay one per call head [heads, ss]. A
// span of len 0 does nothing but keeps its state slot. The table:
// runtime/row_spans.h.
using FavorSpan = RowSpan;
using FavorPieces = RowSpans;

struct FavorShape {
  int64_t heads = 1;   // B*H
  int64_t n = 0;       // positions in this block
  int64_t d = 0;       // head dim
  int64_t m = 0;       // random features
  int64_t chunk = 64;  // chunk rows C (any n)
  FeatureMapParams features;
  // Memory blocking. 0: the backend's fused kernels (CUDA: slabs of
  // kFavorDefaultSlabRows when the shape's tiles do not fit in shared
  // memory); > 0: the composition of the feature-map and linear-attention
  // kernels over slabs of this many positions, on any backend. The result
  // is the same attention either way (up to fp32 rounding); this is not the
  // model's local softmax window (model.window).
  int64_t slab_rows = 0;
  // CUDA fused kernels only: the tile products may run on tensor cores
  // (sm_80 and newer; fp32 accumulation) with operands rounded to TF32 or
  // bf16 (runtime/tile_math.h); older devices and the CPU compute in fp32.
  // The model asks bf16 for bf16 models, TF32 for f16 ones, fp32 otherwise.
  TileMath tile_math = TileMath::Fp32;
  // CUDA fused kernels only: features per slice (0: the kernels' choice,
  // all m where one block's tiles of them fit, else slices; > 0: a multiple
  // of 16). A block per slice; the slices' parts are combined exactly
  // (docs/kernels/favor-attention.md). The CPU ignores it.
  int64_t feature_slice = 0;
  // CUDA fused kernels only: the segments' key and query-gradient states,
  // the causal forward and the causal backward's first sweep keep each
  // warp's part of the running state in registers where the tile math runs
  // on tensor cores and a slice has at most 256 features
  // (docs/kernels/favor-attention.md); false keeps the tile kernels, whose
  // state lives in shared or global memory (for benchmarks of the two).
  bool state_in_registers = true;
  // CUDA fused kernels only: where those kernels run and the carried
  // state's room in shared memory also holds it beside their stage, each
  // block keeps its slice of the projection there, rounded once to the
  // tensor cores' operand (docs/kernels/favor-attention.md); the results
  // are the same bits either way. false reads W from global memory at
  // every tile (for benchmarks of the two).
  bool projection_in_shared = true;
  // Projections in W: head h (of heads = B*H) uses W + (h % w_heads) m d.
  int64_t w_heads = 1;
  template <typename T>
  const T* head_w(const T* W, int64_t h) const {
    return W + (h % w_heads) * m * d;
  }
  // Not null: the call runs over these pieces; heads must be pieces->count()
  // and n pieces->longest() (favor_pieces_shape).
  const FavorPieces* pieces = nullptr;
  LinAttnShape lin() const { return LinAttnShape{heads, n, m, d, chunk}; }
  int64_t state_size() const { return 1 + m * (d + 1); }
};
constexpr int64_t kFavorDefaultSlabRows = 4096;
// s over the pieces: heads and n from them.
FavorShape favor_pieces_shape(FavorShape s, const FavorPieces& pieces);

// Throws ValueError naming the field when a size is invalid.
void favor_check(const FavorShape& s, const char* op);
// Bytes of temporaries one call may hold at once (the largest over the
// protocol's steps) with `threads` CPU threads; the planner counts it.
int64_t favor_workspace_bytes(const FavorShape& s, Device device, int threads);

// Key state of this block: total = sum_j exp(c_k[j]) phi_k[j] V'_j^T per head
// (the bidirectional local state, and the causal block total T_r).
void favor_key_state(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v, const float* W,
                     float* total);
// Causal, this block only: y, row_scale and the block total.
void favor_causal_forward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                const float* v, const float* W, float* y, float* row_scale, float* block_total);
// y_i (+)= phi_q[i] @ prefix with the row rescaled (linear_attention_add_prefix).
void favor_add_prefix(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W, const float* prefix,
                      float* y, float* row_scale);
// Bidirectional: y_i = phi_q[i] @ total, row_scale_i = its log-scale.
void favor_bidirectional_forward_finish(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                                        const float* total, float* y, float* row_scale);
// Causal backward of this block given the final o, den, row_scale: writes dq
// (including the forward prefix of earlier ranks when prefix != nullptr), dk
// and dv (this block's keys only: later ranks' part comes from
// favor_backward_add_suffix), and the block total U of the gradient state.
void favor_causal_backward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                 const float* v, const float* W, const float* o, const float* den,
                                 const float* row_scale, const float* d_o, const float* prefix, float* dq, float* dk,
                                 float* dv, float* block_total_grad, float* dW = nullptr);
// With the gradient suffix state of later ranks: dk += ..., dv += ... (accumulated).
void favor_backward_add_suffix(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                               const float* W, const float* suffix, float* dk, float* dv, float* dW = nullptr);
// Bidirectional backward: dq (written) and the local gradient total; after the
// allreduce of that total, favor_bidirectional_backward_finish writes dk, dv.
void favor_bidirectional_backward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                                        const float* o, const float* den, const float* row_scale, const float* d_o,
                                        const float* total, float* dq, float* local_grad_total, float* dW = nullptr);
void favor_bidirectional_backward_finish(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                                         const float* W, const float* grad_total, float* dk, float* dv,
                                         float* dW = nullptr);

// ---- 2. the one-rank composite ----------------------------------------------------
// The B*H heads of [N, D] rows as one FavorShape: shape.heads = B*H, shape.n =
// N, shape.d = D, shape.m the random features, shape.chunk the chunk rows
// (need not divide N), shape.features the kernel (Softmax = FAVOR+, Relu, Elu,
// Exp), shape.slab_rows and shape.tile_math as in the protocol; shape.w_heads = 1
// (one projection [m, D] for all heads) or H (exp's trained projections
// [H, m, D]: head b H + j uses the j-th). shape.pieces stays null.
struct FavorAttentionParams {
  FavorShape shape;
  bool causal = true;
  int64_t rows() const { return shape.heads * shape.n; }  // B*H*N
};

// FAVOR+ (kind Softmax) or relu parameters with the usual feature settings for d
// (data_scale = d^(-1/4), so that exp(x.y) = exp(q.k / sqrt(d))), over
// batch * heads heads with one projection.
FavorAttentionParams favor_attention_params(int64_t batch, int64_t heads, int64_t n, int64_t d, int64_t m, bool causal,
                                            FeatureKernel kernel, int64_t chunk = 64);
// Throws ValueError naming the offending field when a size is invalid.
void favor_attention_check(const FavorAttentionParams& p);
// Floats of `total` the forward writes (0 for causal: pass nullptr).
int64_t favor_attention_total_floats(const FavorAttentionParams& p);
// Bytes the forward / backward allocate as temporaries on `device`: y
// [B*H, N, D+1] (the forward), the gradient block total and favor_workspace_bytes.
int64_t favor_attention_forward_workspace_bytes(const FavorAttentionParams& p, Device device);
int64_t favor_attention_backward_workspace_bytes(const FavorAttentionParams& p, Device device);

// Forward: writes out, den, row_scale and (bidirectional) total.
void favor_attention_forward(const ExecContext& ctx, const FavorAttentionParams& p, const float* q, const float* k,
                             const float* v, const float* W, float* out, float* den, float* row_scale, float* total);
// Backward of sum(dout * out) given the forward's out, den, row_scale, total:
// writes dq, dk, dv (overwritten, not accumulated). W is held constant when dW
// is nullptr; else dW [B*H, m, D] accumulates each head's gradient of its W.
void favor_attention_backward(const ExecContext& ctx, const FavorAttentionParams& p, const float* q, const float* k,
                              const float* v, const float* W, const float* out, const float* den,
                              const float* row_scale, const float* total, const float* dout, float* dq, float* dk,
                              float* dv, float* dW = nullptr);

// float64 reference, host memory, per head: feature_map_forward_ref then
// linear_attention_forward_ref (O(N^2 (m + D)) per head, for tests); the
// backward chains linear_attention_backward_ref and feature_map_backward_ref
// (dW as in favor_attention_backward: [B*H, m, D], accumulated, when not nullptr).
void favor_attention_forward_ref(const FavorAttentionParams& p, const double* q, const double* k, const double* v,
                                 const double* W, double* out);
void favor_attention_backward_ref(const FavorAttentionParams& p, const double* q, const double* k, const double* v,
                                  const double* W, const double* dout, double* dq, double* dk, double* dv,
                                  double* dW = nullptr);

}  // namespace pf
