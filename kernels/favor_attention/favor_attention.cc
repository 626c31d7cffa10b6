// FAVOR+ attention composite, dispatching on ctx.device through the feature-map
// and linear-attention kernels (their CPU and CUDA paths); see favor_attention.h.
// Shapes: q, k, v, out [B*H, N, D]; features [B*H*N, m]; y [B*H, N, D+1].
#include "kernels/favor_attention/favor_attention.h"

#include <cmath>
#include <memory>

#include "kernels/linear_attention/linear_attention.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

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

// Where the composite's scratch tensors are recorded: ctx.tracker, or (a CPU
// context without one) a private tracker on ctx.stream, so that releases stay
// in the stream's order after the queued kernels that read the buffers.
MemoryTracker& scratch_tracker(const ExecContext& ctx, std::unique_ptr<MemoryTracker>& own) {
  if (ctx.tracker != nullptr) return *ctx.tracker;
  PF_REQUIRE(ValueError, ctx.device.is_cpu(),
             kTag << ": an ExecContext on " << ctx.device.str() << " needs a MemoryTracker for temporaries");
  own = std::make_unique<MemoryTracker>(Device::cpu());
  own->set_stream(ctx.stream);
  return *own;
}

Tensor scratch(MemoryTracker& tracker, int64_t floats) { return Tensor::empty({floats}, DType::f32, tracker, kTag); }

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
  std::unique_ptr<MemoryTracker> own;
  MemoryTracker& tr = scratch_tracker(ctx, own);
  const Tensor phi_q = scratch(tr, r * m), phi_k = scratch(tr, r * m), c_k = scratch(tr, r);
  const Tensor y = scratch(tr, r * (d + 1)), block_total = scratch(tr, s.heads * s.state_size());
  feature_map_forward(ctx, p.features, r, d, m, q, W, phi_q.data<float>(), nullptr);
  feature_map_forward(ctx, p.features, r, d, m, k, W, phi_k.data<float>(), c_k.data<float>());
  if (p.causal) {
    causal_linear_attention_forward_local(ctx, s, phi_q.data<float>(), phi_k.data<float>(), c_k.data<float>(), v,
                                          y.data<float>(), row_scale, block_total.data<float>(), nullptr);
  } else {
    bidirectional_linear_attention_local_state(ctx, s, phi_k.data<float>(), c_k.data<float>(), v, total);
    bidirectional_linear_attention_forward_finish(ctx, s, phi_q.data<float>(), total, y.data<float>(), row_scale);
  }
  linear_attention_normalize(ctx, s, y.data<float>(), out, den);
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
  std::unique_ptr<MemoryTracker> own;
  MemoryTracker& tr = scratch_tracker(ctx, own);
  const Tensor phi_q = scratch(tr, r * m), phi_k = scratch(tr, r * m), c_k = scratch(tr, r);
  const Tensor d_phi_q = scratch(tr, r * m), d_phi_k = scratch(tr, r * m);
  const Tensor grad_total = scratch(tr, s.heads * s.state_size());
  feature_map_forward(ctx, p.features, r, d, m, q, W, phi_q.data<float>(), nullptr);
  feature_map_forward(ctx, p.features, r, d, m, k, W, phi_k.data<float>(), c_k.data<float>());
  if (p.causal) {
    causal_linear_attention_backward_local(ctx, s, phi_q.data<float>(), phi_k.data<float>(), c_k.data<float>(), v, out,
                                           den, row_scale, dout, d_phi_q.data<float>(), d_phi_k.data<float>(), dv,
                                           grad_total.data<float>(), nullptr, nullptr);
  } else {
    bidirectional_linear_attention_backward_local(ctx, s, phi_q.data<float>(), out, den, row_scale, dout, total,
                                                  d_phi_q.data<float>(), grad_total.data<float>());
    bidirectional_linear_attention_backward_finish(ctx, s, phi_k.data<float>(), c_k.data<float>(), v,
                                                   grad_total.data<float>(), d_phi_k.data<float>(), dv);
  }
  feature_map_backward(ctx, p.features, r, d, m, q, W, phi_q.data<float>(), d_phi_q.data<float>(), dq);
  feature_map_backward(ctx, p.features, r, d, m, k, W, phi_k.data<float>(), d_phi_k.data<float>(), dk);
}

}  // namespace pf
