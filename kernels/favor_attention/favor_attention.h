// FAVOR+ attention of full multi-head inputs on one rank: random features of
// queries and keys (kernels/feature_map) followed by causal or bidirectional
// linear attention over them (kernels/linear_attention), forward and backward.
//
//   q, k, v, out, dout, dq, dk, dv   [B, H, N, D]  fp32, contiguous: heads = B*H blocks of [N, D]
//   W                                [m, D]        random projection shared by all heads
//   den, row_scale                   [B*H, N]      saved by the forward for the backward
//   total                            [B*H, 1 + m (D+1)]  bidirectional only: the key state
//                                                  (log-scale, S); nullptr for causal
//
// out_i = sum_{j in J(i)} k(q_i, k_j) v_j / sum_{j in J(i)} k(q_i, k_j) with the
// random-feature kernel k(x, y) = exp(c_x) phi(x) . exp(c_y) phi(y) (FAVOR+,
// an unbiased estimate of exp(x.y) at x = data_scale q) or relu features, and
// J(i) = {j <= i} (causal) or all j (bidirectional).
//
// Memory: the forward allocates features of q and k and y, [B*H, N, m] x2 and
// [B*H, N, D+1]; the backward recomputes the features and allocates their
// gradients as well, [B*H, N, m] x4 in all. That is O(N (D + m)) per head; no
// N x N matrix. Temporaries live on ctx.device and are recorded in ctx.tracker
// under "favor_attention" (a CPU context without a tracker gets a private one;
// CUDA needs one). All pointers live on ctx.device.
#pragma once

#include <cstdint>

#include "kernels/feature_map/feature_map.h"
#include "runtime/exec.h"

namespace pf {

struct FavorAttentionParams {
  int64_t batch = 1;  // B
  int64_t heads = 1;  // H
  int64_t n = 0;      // N, positions
  int64_t d = 0;      // D, head dim
  int64_t m = 0;      // random features (rows of W)
  int64_t chunk = 64;  // chunk of the causal linear-attention kernels (need not divide N)
  bool causal = true;
  FeatureMapParams features;  // kernel (Softmax = FAVOR+, Relu), data_scale, relu_eps
};

// FAVOR+ (kind Softmax) or relu parameters with the usual feature settings for d
// (data_scale = d^(-1/4), so that exp(x.y) = exp(q.k / sqrt(d))).
FavorAttentionParams favor_attention_params(int64_t batch, int64_t heads, int64_t n, int64_t d, int64_t m,
                                            bool causal, FeatureKernel kernel, int64_t chunk = 64);
// Throws ValueError naming the offending field when a size is invalid.
void favor_attention_check(const FavorAttentionParams& p);
// Floats of `total` the forward writes (0 for causal: pass nullptr).
int64_t favor_attention_total_floats(const FavorAttentionParams& p);
// Bytes the forward / backward allocate as temporaries.
int64_t favor_attention_forward_workspace_bytes(const FavorAttentionParams& p);
int64_t favor_attention_backward_workspace_bytes(const FavorAttentionParams& p);

// Forward: writes out, den, row_scale and (bidirectional) total.
void favor_attention_forward(const ExecContext& ctx, const FavorAttentionParams& p, const float* q, const float* k,
                             const float* v, const float* W, float* out, float* den, float* row_scale, float* total);
// Backward of sum(dout * out) given the forward's out, den, row_scale, total:
// writes dq, dk, dv (overwritten, not accumulated). W is held constant.
void favor_attention_backward(const ExecContext& ctx, const FavorAttentionParams& p, const float* q, const float* k,
                              const float* v, const float* W, const float* out, const float* den,
                              const float* row_scale, const float* total, const float* dout, float* dq, float* dk,
                              float* dv);

// float64 reference, host memory, per head: feature_map_forward_ref then
// linear_attention_forward_ref (O(N^2 (m + D)) per head, for tests); the
// backward chains linear_attention_backward_ref and feature_map_backward_ref.
void favor_attention_forward_ref(const FavorAttentionParams& p, const double* q, const double* k, const double* v,
                                 const double* W, double* out);
void favor_attention_backward_ref(const FavorAttentionParams& p, const double* q, const double* k, const double* v,
                                  const double* W, const double* dout, double* dq, double* dk, double* dv);

}  // namespace pf
