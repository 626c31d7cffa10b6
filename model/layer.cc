#include "model/layer.h"

#include <chrono>

#include "kernels/gelu/gelu.h"
#include "kernels/heads/heads.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "kernels/residual/residual.h"

namespace pf {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Tensor make(const ExecContext& ctx, const Shape& shape, const char* tag) {
  return Tensor::empty(shape, DType::f32, *ctx.tracker, tag);
}

}  // namespace

void TransformerLayer::forward(const ExecContext& ctx, int64_t B, int64_t n, const float* params, const float* W,
                               const float* x, float* out, LayerActs& a, LayerTiming* timing) const {
  const double t0 = seconds_now();
  const int64_t T = B * n, C = cfg_.width, F = cfg_.ffn, H = cfg_.heads, D = cfg_.head_dim();
  const float* p = params;
  a.ln1 = make(ctx, {T, C}, "layer.ln1");
  a.mean1 = make(ctx, {T}, "layer.ln_stats");
  a.rstd1 = make(ctx, {T}, "layer.ln_stats");
  layernorm_forward(ctx, x, p + off_.ln1_g, p + off_.ln1_b, a.ln1.data<float>(), a.mean1.data<float>(),
                    a.rstd1.data<float>(), T, C);
  {
    Tensor qkv = make(ctx, {T, 3 * C}, "layer.qkv");
    linear_forward(ctx, a.ln1.data<float>(), p + off_.qkv_w, p + off_.qkv_b, qkv.data<float>(), T, C, 3 * C);
    a.qkv_heads = make(ctx, {3, B * H, n, D}, "layer.qkv_heads");
    heads_split(ctx, HeadsShape{3, B, n, H, D}, qkv.data<float>(), a.qkv_heads.data<float>());
  }
  const float* q = a.qkv_heads.data<float>();
  const double ta = seconds_now();
  AttentionTiming at;
  attention_.forward(ctx, B * H, n, W, q, q + T * C, q + 2 * T * C, a.att, &at);
  const double tb = seconds_now();
  a.merged = make(ctx, {T, C}, "layer.merged");
  heads_merge(ctx, HeadsShape{1, B, n, H, D}, a.att.o.data<float>(), a.merged.data<float>());
  a.mid = make(ctx, {T, C}, "layer.mid");
  linear_forward(ctx, a.merged.data<float>(), p + off_.out_w, p + off_.out_b, a.mid.data<float>(), T, C, C);
  residual_add(ctx, a.mid.data<float>(), x, a.mid.data<float>(), T * C);
  a.ln2 = make(ctx, {T, C}, "layer.ln2");
  a.mean2 = make(ctx, {T}, "layer.ln_stats");
  a.rstd2 = make(ctx, {T}, "layer.ln_stats");
  layernorm_forward(ctx, a.mid.data<float>(), p + off_.ln2_g, p + off_.ln2_b, a.ln2.data<float>(),
                    a.mean2.data<float>(), a.rstd2.data<float>(), T, C);
  a.h1 = make(ctx, {T, F}, "layer.ffn_hidden");
  linear_forward(ctx, a.ln2.data<float>(), p + off_.ffn1_w, p + off_.ffn1_b, a.h1.data<float>(), T, C, F);
  a.g = make(ctx, {T, F}, "layer.ffn_hidden");
  gelu_forward(ctx, a.h1.data<float>(), a.g.data<float>(), T * F);
  linear_forward(ctx, a.g.data<float>(), p + off_.ffn2_w, p + off_.ffn2_b, out, T, F, C);
  residual_add(ctx, out, a.mid.data<float>(), out, T * C);
  synchronize(ctx.stream);
  if (timing) {
    timing->attention_fwd = at;
    timing->other += (seconds_now() - t0) - (tb - ta);
  }
}

void TransformerLayer::backward(const ExecContext& ctx, int64_t B, int64_t n, const float* params, const float* W,
                                const float* x, const LayerActs& a, const float* d_out, float* d_x, float* grads,
                                LayerTiming* timing) const {
  const double t0 = seconds_now();
  const int64_t T = B * n, C = cfg_.width, F = cfg_.ffn, H = cfg_.heads, D = cfg_.head_dim();
  const float* p = params;
  float* g = grads;
  // FFN branch: d_out flows to the FFN output and, through the residual, to mid.
  Tensor d_mid = make(ctx, {T, C}, "layer.grad_mid");
  {
    Tensor d_g = make(ctx, {T, F}, "layer.grad_ffn_hidden");
    linear_backward(ctx, d_out, a.g.data<float>(), p + off_.ffn2_w, d_g.data<float>(), g + off_.ffn2_w,
                    g + off_.ffn2_b, T, F, C);
    gelu_backward(ctx, d_g.data<float>(), a.h1.data<float>(), d_g.data<float>(), T * F);
    Tensor d_ln2 = make(ctx, {T, C}, "layer.grad_ln");
    linear_backward(ctx, d_g.data<float>(), a.ln2.data<float>(), p + off_.ffn1_w, d_ln2.data<float>(),
                    g + off_.ffn1_w, g + off_.ffn1_b, T, C, F);
    layernorm_backward(ctx, d_ln2.data<float>(), a.mid.data<float>(), p + off_.ln2_g, a.mean2.data<float>(),
                       a.rstd2.data<float>(), d_mid.data<float>(), g + off_.ln2_g, g + off_.ln2_b, T, C);
    residual_add(ctx, d_mid.data<float>(), d_out, d_mid.data<float>(), T * C);
  }
  // Attention branch.
  Tensor d_qkv_heads = make(ctx, {3, B * H, n, D}, "layer.grad_qkv_heads");
  AttentionTiming at;
  double ta = 0, tb = 0;
  {
    Tensor d_merged = make(ctx, {T, C}, "layer.grad_merged");
    linear_backward(ctx, d_mid.data<float>(), a.merged.data<float>(), p + off_.out_w, d_merged.data<float>(),
                    g + off_.out_w, g + off_.out_b, T, C, C);
    Tensor d_o = make(ctx, {B * H, n, D}, "layer.grad_attention_out");
    heads_split(ctx, HeadsShape{1, B, n, H, D}, d_merged.data<float>(), d_o.data<float>());
    const float* q = a.qkv_heads.data<float>();
    float* dq = d_qkv_heads.data<float>();
    ta = seconds_now();
    attention_.backward(ctx, B * H, n, W, q, q + T * C, q + 2 * T * C, a.att, d_o.data<float>(), dq, dq + T * C,
                        dq + 2 * T * C, &at);
    tb = seconds_now();
  }
  {
    Tensor d_qkv = make(ctx, {T, 3 * C}, "layer.grad_qkv");
    heads_merge(ctx, HeadsShape{3, B, n, H, D}, d_qkv_heads.data<float>(), d_qkv.data<float>());
    d_qkv_heads = Tensor();
    Tensor d_ln1 = make(ctx, {T, C}, "layer.grad_ln");
    linear_backward(ctx, d_qkv.data<float>(), a.ln1.data<float>(), p + off_.qkv_w, d_ln1.data<float>(),
                    g + off_.qkv_w, g + off_.qkv_b, T, C, 3 * C);
    d_qkv = Tensor();
    Tensor d_x_ln = make(ctx, {T, C}, "layer.grad_ln_in");
    layernorm_backward(ctx, d_ln1.data<float>(), x, p + off_.ln1_g, a.mean1.data<float>(), a.rstd1.data<float>(),
                       d_x_ln.data<float>(), g + off_.ln1_g, g + off_.ln1_b, T, C);
    residual_add(ctx, d_x_ln.data<float>(), d_mid.data<float>(), d_x, T * C);
  }
  synchronize(ctx.stream);
  if (timing) {
    timing->attention_bwd = at;
    timing->other += (seconds_now() - t0) - (tb - ta);
  }
}

}  // namespace pf
