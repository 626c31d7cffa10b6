// FAVOR+ attention composite, dispatching on ctx.device through the feature-map
// and linear-attention kernels (their CPU and CUDA paths); see favor_attention.h.
// Shapes: q, k, v, out [B*H, N, D]; features [B*H*N, m]; y [B*H, N, D+1].
#include "kernels/favor_attention/favor_attention.h"

#include <cmath>

#include "kernels/feature_map/feature_map_scratch.h"
#include "kernels/linear_attention/linear_attention.h"
#include "runtime/check.h"
#include "runtime/device.h"

namespace pf {
namespace {

constexpr const char* kTag = "favor_attention";

LinAttnShape lin_shape(const FavorAttentionParams& p) {
  return LinAttnShape{p.batch * p.heads, p.n, p.m, p.d, p.chunk};
}

int64_t rows(const FavorAttentionParams& p) { return p.batch * p.heads * p.n; }

void check_ptrs(bool ok, const char* op, const char* what) {
  PF_REQUIRE(ValueError, ok, op << ": null pointer among " << what);
}

// Declared after the scratch buffers, so it is destroyed first: CUDA work queued
// on the stream finishes before the buffers it reads are freed.
struct SyncBeforeFree {
  const ExecContext& ctx;
  ~SyncBeforeFree() {
    if (ctx.device.is_cuda()) synchronize(ctx.stream);
  }
};

}  // namespace

FavorAttentionParams favor_attention_params(int64_t batch, int64_t heads, int64_t n, int64_t d, int64_t m,
                                            bool causal, FeatureKernel kernel, int64_t chunk) {
  FavorAttentionParams p;
  p.batch = batch;
  p.heads = heads;
  p.n = n;
  p.d = d;
  p.m = m;
  p.chunk = chunk;
  p.causal = causal;
  p.features = default_feature_params(kernel, d);
  return p;
}

void favor_attention_check(const FavorAttentionParams& p) {
  PF_REQUIRE(ValueError, p.batch >= 0 && p.heads >= 0 && p.n >= 0,
             "favor_attention: need B, H, N >= 0, got B=" << p.batch << " H=" << p.heads << " N=" << p.n);
  PF_REQUIRE(ValueError, p.d >= 1 && p.m >= 1,
             "favor_attention: need D >= 1 and m >= 1, got D=" << p.d << " m=" << p.m);
  PF_REQUIRE(ValueError, p.chunk >= 1, "favor_attention: chunk must be >= 1, got " << p.chunk);
  check_feature_map_args("favor_attention", p.features, rows(p), p.d, p.m);
}

int64_t favor_attention_total_floats(const FavorAttentionParams& p) {
  return p.causal ? 0 : p.batch * p.heads * lin_shape(p).state_size();
}

int64_t favor_attention_forward_workspace_bytes(const FavorAttentionParams& p) {
  const int64_t r = rows(p), bh = p.batch * p.heads;
  // features of q and k, key log-scales, y, and the causal block total (unused on one rank)
  const int64_t floats = 2 * r * p.m + r + r * (p.d + 1) + bh * lin_shape(p).state_size();
  return floats * static_cast<int64_t>(sizeof(float));
}

int64_t favor_attention_backward_workspace_bytes(const FavorAttentionParams& p) {
  const int64_t r = rows(p), bh = p.batch * p.heads;
  const int64_t floats = 4 * r * p.m + r + bh * lin_shape(p).state_size();
  return floats * static_cast<int64_t>(sizeof(float));
}

void favor_attention_forward(const ExecContext& ctx, const FavorAttentionParams& p, const float* q, const float* k,
                             const float* v, const float* W, float* out, float* den, float* row_scale, float* total) {
  favor_attention_check(p);
  const int64_t r = rows(p), m = p.m, d = p.d;
  if (r == 0) return;
  check_ptrs(q && k && v && W && out && den && row_scale, __func__, "q, k, v, W, out, den, row_scale");
  check_ptrs(p.causal || total, __func__, "total (bidirectional)");
  const LinAttnShape s = lin_shape(p);
  FeatureScratch phi_q(ctx, r * m * 4, kTag), phi_k(ctx, r * m * 4, kTag), c_k(ctx, r * 4, kTag);
  FeatureScratch y(ctx, r * (d + 1) * 4, kTag), block_total(ctx, s.heads * s.state_size() * 4, kTag);
  const SyncBeforeFree sync{ctx};
  feature_map_forward(ctx, p.features, r, d, m, q, W, phi_q.as<float>(), nullptr);
  feature_map_forward(ctx, p.features, r, d, m, k, W, phi_k.as<float>(), c_k.as<float>());
  if (p.causal) {
    causal_linear_attention_forward_local(ctx, s, phi_q.as<float>(), phi_k.as<float>(), c_k.as<float>(), v,
                                          y.as<float>(), row_scale, block_total.as<float>(), nullptr);
  } else {
    bidirectional_linear_attention_local_state(ctx, s, phi_k.as<float>(), c_k.as<float>(), v, total);
    bidirectional_linear_attention_forward_finish(ctx, s, phi_q.as<float>(), total, y.as<float>(), row_scale);
  }
  linear_attention_normalize(ctx, s, y.as<float>(), out, den);
}

void favor_attention_backward(const ExecContext& ctx, const FavorAttentionParams& p, const float* q, const float* k,
                              const float* v, const float* W, const float* out, const float* den,
                              const float* row_scale, const float* total, const float* dout, float* dq, float* dk,
                              float* dv) {
  favor_attention_check(p);
  const int64_t r = rows(p), m = p.m, d = p.d;
  if (r == 0) return;
  check_ptrs(q && k && v && W && out && den && row_scale && dout && dq && dk && dv, __func__,
             "q, k, v, W, out, den, row_scale, dout, dq, dk, dv");
  check_ptrs(p.causal || total, __func__, "total (bidirectional)");
  const LinAttnShape s = lin_shape(p);
  FeatureScratch phi_q(ctx, r * m * 4, kTag), phi_k(ctx, r * m * 4, kTag), c_k(ctx, r * 4, kTag);
  FeatureScratch d_phi_q(ctx, r * m * 4, kTag), d_phi_k(ctx, r * m * 4, kTag);
  FeatureScratch grad_total(ctx, s.heads * s.state_size() * 4, kTag);
  const SyncBeforeFree sync{ctx};
  feature_map_forward(ctx, p.features, r, d, m, q, W, phi_q.as<float>(), nullptr);
  feature_map_forward(ctx, p.features, r, d, m, k, W, phi_k.as<float>(), c_k.as<float>());
  if (p.causal) {
    causal_linear_attention_backward_local(ctx, s, phi_q.as<float>(), phi_k.as<float>(), c_k.as<float>(), v, out,
                                           den, row_scale, dout, d_phi_q.as<float>(), d_phi_k.as<float>(), dv,
                                           grad_total.as<float>(), nullptr, nullptr);
  } else {
    bidirectional_linear_attention_backward_local(ctx, s, phi_q.as<float>(), out, den, row_scale, dout, total,
                                                  d_phi_q.as<float>(), grad_total.as<float>());
    bidirectional_linear_attention_backward_finish(ctx, s, phi_k.as<float>(), c_k.as<float>(), v,
                                                   grad_total.as<float>(), d_phi_k.as<float>(), dv);
  }
  feature_map_backward(ctx, p.features, r, d, m, q, W, phi_q.as<float>(), d_phi_q.as<float>(), dq);
  feature_map_backward(ctx, p.features, r, d, m, k, W, phi_k.as<float>(), d_phi_k.as<float>(), dk);
}

}  // namespace pf
