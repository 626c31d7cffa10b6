// Dispatch of exact softmax attention by ctx.device, and the shared parameter
// checks. Shapes: Q, K, V, O, dO, dQ, dK, dV [heads, n, d]; lse [heads, n]; f16/bf16
// storage is CUDA-only (ValueError on the CPU).
#include "kernels/softmax_attention/softmax_attention.h"

#include <cmath>

#include "runtime/check.h"

namespace pf {

SoftmaxAttentionParams softmax_attention_params(int64_t heads, int64_t n, int64_t d, bool causal, int64_t window) {
  SoftmaxAttentionParams p;
  p.heads = heads;
  p.n = n;
  p.d = d;
  p.causal = causal;
  p.window = window;
  return p;
}

SoftmaxAttentionParams softmax_attention_tiled_params(int64_t heads, int64_t n, int64_t d, bool causal, int64_t q_tile,
                                                      int64_t k_tile) {
  SoftmaxAttentionParams p = softmax_attention_params(heads, n, d, causal);
  p.q_tile = q_tile;
  p.k_tile = k_tile;
  return p;
}

SoftmaxAttentionParams softmax_attention_decode_params(int64_t heads, int64_t n, int64_t d) {
  return softmax_attention_params(heads, n, d, false);
}

SoftmaxAttentionParams softmax_pieces_params(SoftmaxAttentionParams p, const RowSpans& pieces) {
  p.pieces = &pieces;
  p.heads = pieces.count();
  p.n = pieces.longest();
  return p;
}

void softmax_attention_check(const SoftmaxAttentionParams& p) {
  PF_REQUIRE(ValueError, p.heads >= 0 && p.n >= 0 && p.d >= 1,
             "softmax attention: bad shape heads=" << p.heads << " n=" << p.n << " d=" << p.d);
  PF_REQUIRE(ValueError, p.q_tile >= 1 && p.k_tile >= 1,
             "softmax attention: tiles must be positive, got q_tile=" << p.q_tile << " k_tile=" << p.k_tile);
  PF_REQUIRE(ValueError, p.window >= 0, "softmax attention: window must be >= 0 (0: none), got " << p.window);
  PF_REQUIRE(ValueError, std::isfinite(p.scale), "softmax attention: scale must be finite, got " << p.scale);
  if (p.pieces)
    PF_REQUIRE(ValueError, p.heads == p.pieces->count() && p.n == p.pieces->longest(),
               "softmax attention over " << p.pieces->count() << " pieces (the longest " << p.pieces->longest()
                                         << " rows) needs heads=" << p.pieces->count() << " and n="
                                         << p.pieces->longest() << ", got heads=" << p.heads << " n=" << p.n);
}

float softmax_attention_scale(const SoftmaxAttentionParams& p) {
  softmax_attention_check(p);
  return p.scale == 0.f ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.d))) : p.scale;
}

int64_t softmax_attention_rows(const SoftmaxAttentionParams& p) { return p.pieces ? p.pieces->end() : p.heads * p.n; }

int64_t softmax_attention_forward_workspace_bytes(const SoftmaxAttentionParams& p, Device device, int threads) {
  if (device.is_cuda()) {
    softmax_attention_check(p);
    return 0;
  }
  return softmax_attention_cpu_forward_workspace_bytes(p, threads);
}

int64_t softmax_attention_backward_workspace_bytes(const SoftmaxAttentionParams& p, Device device, int threads) {
  if (device.is_cuda()) {
    softmax_attention_check(p);
    return int64_t{4} * softmax_attention_rows(p);
  }
  return softmax_attention_cpu_backward_workspace_bytes(p, threads);
}

void softmax_attention_forward(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q, const float* K,
                               const float* V, float* O, float* lse) {
  if (ctx.device.is_cuda())
    softmax_attention_forward_cuda(ctx, p, Q, K, V, O, lse);
  else
    softmax_attention_forward_cpu(ctx, p, Q, K, V, O, lse);
}

void softmax_attention_backward(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q, const float* K,
                                const float* V, const float* O, const float* lse, const float* dO, float* dQ, float* dK,
                                float* dV) {
  if (ctx.device.is_cuda())
    softmax_attention_backward_cuda(ctx, p, Q, K, V, O, lse, dO, dQ, dK, dV);
  else
    softmax_attention_backward_cpu(ctx, p, Q, K, V, O, lse, dO, dQ, dK, dV);
}

void softmax_attention_forward(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage, const void* Q,
                               const void* K, const void* V, void* O, float* lse) {
  if (ctx.device.is_cuda()) return softmax_attention_forward_cuda(ctx, p, storage, Q, K, V, O, lse);
  PF_REQUIRE(ValueError, storage == DType::f32,
             "softmax_attention_forward on " << ctx.device.str() << ": storage " << dtype_name(storage)
                                             << " is supported on CUDA only (the CPU backend stores f32)");
  softmax_attention_forward(ctx, p, static_cast<const float*>(Q), static_cast<const float*>(K),
                            static_cast<const float*>(V), static_cast<float*>(O), lse);
}

void softmax_attention_backward(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage, const void* Q,
                                const void* K, const void* V, const void* O, const float* lse, const void* dO, void* dQ,
                                void* dK, void* dV) {
  if (ctx.device.is_cuda()) return softmax_attention_backward_cuda(ctx, p, storage, Q, K, V, O, lse, dO, dQ, dK, dV);
  PF_REQUIRE(ValueError, storage == DType::f32,
             "softmax_attention_backward on " << ctx.device.str() << ": storage " << dtype_name(storage)
                                              << " is supported on CUDA only (the CPU backend stores f32)");
  softmax_attention_backward(ctx, p, static_cast<const float*>(Q), static_cast<const float*>(K),
                             static_cast<const float*>(V), static_cast<const float*>(O), lse,
                             static_cast<const float*>(dO), static_cast<float*>(dQ), static_cast<float*>(dK),
                             static_cast<float*>(dV));
}

}  // namespace pf
