#include "model/layer.h"

#include "kernels/cast/cast.h"
#include "kernels/gelu/gelu.h"
#include "kernels/heads/heads.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "kernels/residual/residual.h"
#include "runtime/clock.h"

namespace pf {
namespace {

Tensor make(const ExecContext& ctx, const Shape& shape, const char* tag) {
  return Tensor::empty(shape, DType::f32, *ctx.tracker, tag);
}

// The layer's GEMMs and kept activations in the model dtype: f32 runs the
// fp32 linear layer on the master weights and keeps fp32 activations;
// bf16/f16 keep 16-bit activations and run the 16-bit-operand linear layer
// on the weight copy.
class Precision {
 public:
  Precision(const ExecContext& ctx, DType dtype, const float* params, const void* params_lp)
      : ctx_(ctx), dtype_(dtype), p_(params), p_lp_(params_lp) {}

  // `x` as kept for the backward (rounded to the model dtype).
  Tensor keep(const Tensor& x, const char* tag) const {
    if (dtype_ == DType::f32) return x;
    Tensor t = Tensor::empty(x.shape(), dtype_, *ctx_.tracker, tag);
    cast_narrow(ctx_, dtype_, x.data<float>(), t.raw(), x.numel());
    return t;
  }
  // A kept tensor as fp32 (the tensor itself for f32, a widened copy otherwise).
  Tensor widen(const Tensor& kept, const char* tag) const {
    if (dtype_ == DType::f32) return kept;
    Tensor t = Tensor::empty(kept.shape(), DType::f32, *ctx_.tracker, tag);
    cast_widen(ctx_, dtype_, kept.raw(), t.data<float>(), kept.numel());
    return t;
  }
  // Y [T, out] = X W^T + b with X kept [T, in]; w, b offsets into the parameters.
  void forward(const Tensor& X, int64_t w, int64_t b, float* Y, int64_t T, int64_t in, int64_t out) const {
    if (dtype_ == DType::f32)
      linear_forward(ctx_, X.data<float>(), p_ + w, p_ + b, Y, T, in, out);
    else
      linear_forward_lowp(ctx_, dtype_, X.raw(), weight_lp(w), p_ + b, Y, T, in, out);
  }
  void backward(const float* dY, const Tensor& X, int64_t w, int64_t b, float* dX, float* grads, int64_t T, int64_t in,
                int64_t out) const {
    if (dtype_ == DType::f32)
      linear_backward(ctx_, dY, X.data<float>(), p_ + w, dX, grads + w, grads + b, T, in, out);
    else
      linear_backward_lowp(ctx_, dtype_, dY, X.raw(), weight_lp(w), dX, grads + w, grads + b, T, in, out);
  }

 private:
  const void* weight_lp(int64_t offset) const { return static_cast<const char*>(p_lp_) + offset * dtype_size(dtype_); }
  const ExecContext& ctx_;
  DType dtype_;
  const float* p_;
  const void* p_lp_;
};

}  // namespace

void TransformerLayer::forward(const ExecContext& ctx, int64_t B, int64_t n, const float* params, const void* params_lp,
                               const float* W, const float* x, float* out, LayerActs& a, LayerTiming* timing,
                               const PackedLayout* packed) const {
  const double t0 = seconds_now();
  const int64_t T = B * n, C = cfg_.width, F = cfg_.ffn, H = cfg_.heads, D = cfg_.head_dim();
  const float* p = params;
  const Precision pr(ctx, cfg_.dtype, params, params_lp);
  a.mean1 = make(ctx, {T}, "layer.ln_stats");
  a.rstd1 = make(ctx, {T}, "layer.ln_stats");
  {
    Tensor ln = make(ctx, {T, C}, "layer.ln1");
    layernorm_forward(ctx, x, p + off_.ln1_g, p + off_.ln1_b, ln.data<float>(), a.mean1.data<float>(),
                      a.rstd1.data<float>(), T, C);
    a.ln1 = pr.keep(ln, "layer.ln1");
  }
  {
    Tensor qkv = make(ctx, {T, 3 * C}, "layer.qkv");
    pr.forward(a.ln1, off_.qkv_w, off_.qkv_b, qkv.data<float>(), T, C, 3 * C);
    a.qkv_heads = make(ctx, {3, B * H, n, D}, "layer.qkv_heads");
    heads_split(ctx, HeadsShape{3, B, n, H, D}, qkv.data<float>(), a.qkv_heads.data<float>());
  }
  const float* q = a.qkv_heads.data<float>();
  const double ta = seconds_now();
  AttentionTiming at;
  attention_.forward(ctx, B * H, n, W, q, q + T * C, q + 2 * T * C, a.att, &at, packed,
                     off_.gate >= 0 ? p + off_.gate : nullptr);
  const double tb = seconds_now();
  {
    Tensor merged = make(ctx, {T, C}, "layer.merged");
    heads_merge(ctx, HeadsShape{1, B, n, H, D}, a.att.output().data<float>(), merged.data<float>());
    a.merged = pr.keep(merged, "layer.merged");
  }
  a.mid = make(ctx, {T, C}, "layer.mid");
  pr.forward(a.merged, off_.out_w, off_.out_b, a.mid.data<float>(), T, C, C);
  residual_add(ctx, a.mid.data<float>(), x, a.mid.data<float>(), T * C);
  a.mean2 = make(ctx, {T}, "layer.ln_stats");
  a.rstd2 = make(ctx, {T}, "layer.ln_stats");
  {
    Tensor ln = make(ctx, {T, C}, "layer.ln2");
    layernorm_forward(ctx, a.mid.data<float>(), p + off_.ln2_g, p + off_.ln2_b, ln.data<float>(), a.mean2.data<float>(),
                      a.rstd2.data<float>(), T, C);
    a.ln2 = pr.keep(ln, "layer.ln2");
  }
  {
    Tensor h1 = make(ctx, {T, F}, "layer.ffn_hidden");
    pr.forward(a.ln2, off_.ffn1_w, off_.ffn1_b, h1.data<float>(), T, C, F);
    a.h1 = pr.keep(h1, "layer.ffn_hidden");
    // GELU of the kept (rounded) pre-activation, the one its backward sees.
    const Tensor h1_kept = pr.widen(a.h1, "layer.ffn_hidden");
    Tensor g = make(ctx, {T, F}, "layer.ffn_hidden");
    gelu_forward(ctx, h1_kept.data<float>(), g.data<float>(), T * F);
    a.g = pr.keep(g, "layer.ffn_hidden");
  }
  pr.forward(a.g, off_.ffn2_w, off_.ffn2_b, out, T, F, C);
  residual_add(ctx, out, a.mid.data<float>(), out, T * C);
  synchronize(ctx.stream);
  if (timing) {
    timing->attention_fwd = at;
    timing->other += (seconds_now() - t0) - (tb - ta);
  }
}

void TransformerLayer::backward(const ExecContext& ctx, int64_t B, int64_t n, const float* params,
                                const void* params_lp, const float* W, const float* x, LayerActs& a, const float* d_out,
                                float* d_x, float* grads, LayerTiming* timing, const PackedLayout* packed) const {
  const double t0 = seconds_now();
  const int64_t T = B * n, C = cfg_.width, F = cfg_.ffn, H = cfg_.heads, D = cfg_.head_dim();
  const float* p = params;
  float* g = grads;
  const Precision pr(ctx, cfg_.dtype, params, params_lp);
  // FFN branch: d_out flows to the FFN output and, through the residual, to mid.
  Tensor d_mid = make(ctx, {T, C}, "layer.grad_mid");
  {
    Tensor d_g = make(ctx, {T, F}, "layer.grad_ffn_hidden");
    pr.backward(d_out, a.g, off_.ffn2_w, off_.ffn2_b, d_g.data<float>(), g, T, F, C);
    a.g = Tensor();
    {
      const Tensor h1 = pr.widen(a.h1, "layer.ffn_hidden");
      gelu_backward(ctx, d_g.data<float>(), h1.data<float>(), d_g.data<float>(), T * F);
    }
    a.h1 = Tensor();
    Tensor d_ln2 = make(ctx, {T, C}, "layer.grad_ln");
    pr.backward(d_g.data<float>(), a.ln2, off_.ffn1_w, off_.ffn1_b, d_ln2.data<float>(), g, T, C, F);
    a.ln2 = Tensor();
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
    pr.backward(d_mid.data<float>(), a.merged, off_.out_w, off_.out_b, d_merged.data<float>(), g, T, C, C);
    Tensor d_o = make(ctx, {B * H, n, D}, "layer.grad_attention_out");
    heads_split(ctx, HeadsShape{1, B, n, H, D}, d_merged.data<float>(), d_o.data<float>());
    const float* q = a.qkv_heads.data<float>();
    float* dq = d_qkv_heads.data<float>();
    ta = seconds_now();
    attention_.backward(ctx, B * H, n, W, q, q + T * C, q + 2 * T * C, a.att, d_o.data<float>(), dq, dq + T * C,
                        dq + 2 * T * C, off_.features_w >= 0 ? g + off_.features_w : nullptr, &at, packed,
                        off_.gate >= 0 ? p + off_.gate : nullptr, off_.gate >= 0 ? g + off_.gate : nullptr);
    tb = seconds_now();
  }
  {
    Tensor d_qkv = make(ctx, {T, 3 * C}, "layer.grad_qkv");
    heads_merge(ctx, HeadsShape{3, B, n, H, D}, d_qkv_heads.data<float>(), d_qkv.data<float>());
    d_qkv_heads = Tensor();
    Tensor d_ln1 = make(ctx, {T, C}, "layer.grad_ln");
    pr.backward(d_qkv.data<float>(), a.ln1, off_.qkv_w, off_.qkv_b, d_ln1.data<float>(), g, T, C, 3 * C);
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
