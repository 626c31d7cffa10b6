// float64 forward of the whole PerformerModel, composed of the kernels'
// float64 references (see model_reference.h). Shapes, with T = B*n:
//   x [T, C] -> ln [T, C] -> qkv [T, 3C] -> q|k|v [B, H, n, D] each -> o [B, H, n, D]
//   -> merged [T, C] -> mid [T, C] -> ffn hidden [T, F] -> x' [T, C]
//   final LN [T, C] -> logits [T, V] -> loss sum.
#include "tests/support/model_reference.h"

#include <cmath>

#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/embedding/embedding.h"
#include "kernels/favor_attention/favor_attention.h"
#include "kernels/gated_mix/gated_mix.h"
#include "kernels/gelu/gelu.h"
#include "kernels/heads/heads_math.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "kernels/positional/positional_math.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "model/attention.h"
#include "runtime/check.h"

namespace pf::test {
namespace {

struct Dims {
  int64_t B, n, T, C, H, D, F, V, m;
};

// Y = LN(X) with the model's epsilon (the fp32 constant, widened).
void layernorm(const Dims& s, const double* X, const double* gamma, const double* beta, double* Y) {
  std::vector<double> mean(s.T), rstd(s.T);
  layernorm_forward_ref(X, gamma, beta, Y, mean.data(), rstd.data(), s.T, s.C, static_cast<double>(kLayerNormEps));
}

// o [B, H, n, D] = attention(q, k, v) of the layer's kind; W [m, D] (exp: [H, m, D]);
// gate [H] (model.window with a linear kind: the mix of the linear kind's
// output and the window's softmax, else nullptr).
void attention(const ModelConfig& cfg, const Dims& s, const double* W, const double* gate, const double* q,
               const double* k, const double* v, double* o) {
  if (cfg.attention == AttentionKind::Softmax) {
    const SoftmaxAttentionParams p = softmax_attention_params(s.B * s.H, s.n, s.D, cfg.causal(), cfg.window);
    std::vector<double> lse(s.B * s.H * s.n);
    softmax_attention_forward_ref(p, q, k, v, o, lse.data());
    return;
  }
  if (cfg.hybrid()) {
    ModelConfig linear = cfg, window = cfg;
    linear.window = 0;
    window.attention = AttentionKind::Softmax;
    std::vector<double> a(s.T * s.C), b(s.T * s.C);
    attention(linear, s, W, nullptr, q, k, v, a.data());
    attention(window, s, nullptr, nullptr, q, k, v, b.data());
    gated_mix_forward_ref(GatedMixShape{s.B, s.H, s.n, s.D}, gate, a.data(), b.data(), o);
    return;
  }
  const FeatureKernel kernel = attention_feature_kernel(cfg.attention);
  FavorAttentionParams p = favor_attention_params(s.B, s.H, s.n, s.D, s.m, cfg.causal(), kernel, cfg.chunk);
  p.shape.features.half_norm = cfg.exp_key_norm;
  if (cfg.attention == AttentionKind::Exp) p.shape.w_heads = s.H;
  favor_attention_forward_ref(p, q, k, v, W, o);
}

// x [T, C] -> out [T, C]: one pre-LN block with the parameters of layer l
// and its random projection W (exp: the trained projections in p).
void block(const ModelConfig& cfg, const Dims& s, const double* p, const LayerOffsets& off,
           const std::vector<double>& W, const double* x, double* out) {
  const int64_t T = s.T, C = s.C, F = s.F;
  const bool trained = cfg.attention == AttentionKind::Exp;
  PF_REQUIRE(ValueError,
             cfg.attention == AttentionKind::Softmax || trained || static_cast<int64_t>(W.size()) == s.m * s.D,
             "reference attention: projection of " << W.size() << " values, want m x D = " << s.m << " x " << s.D);
  std::vector<double> ln(T * C), qkv(T * 3 * C), heads(3 * T * C), o(T * C), merged(T * C), mid(T * C);
  layernorm(s, x, p + off.ln1_g, p + off.ln1_b, ln.data());
  linear_forward_ref(ln.data(), p + off.qkv_w, p + off.qkv_b, qkv.data(), T, C, 3 * C);
  for (int64_t e = 0; e < 3 * T * C; ++e) heads[e] = qkv[heads_row_index(e, 3, s.B, s.H, s.n, s.D)];
  attention(cfg, s, trained ? p + off.features_w : W.data(), off.gate >= 0 ? p + off.gate : nullptr, heads.data(),
            heads.data() + T * C, heads.data() + 2 * T * C, o.data());
  for (int64_t e = 0; e < T * C; ++e) merged[heads_row_index(e, 1, s.B, s.H, s.n, s.D)] = o[e];
  linear_forward_ref(merged.data(), p + off.out_w, p + off.out_b, mid.data(), T, C, C);
  for (int64_t i = 0; i < T * C; ++i) mid[i] += x[i];
  std::vector<double> h1(T * F), g(T * F);
  layernorm(s, mid.data(), p + off.ln2_g, p + off.ln2_b, ln.data());
  linear_forward_ref(ln.data(), p + off.ffn1_w, p + off.ffn1_b, h1.data(), T, C, F);
  gelu_forward_ref(h1.data(), g.data(), T * F);
  linear_forward_ref(g.data(), p + off.ffn2_w, p + off.ffn2_b, out, T, F, C);
  for (int64_t i = 0; i < T * C; ++i) out[i] += mid[i];
}

}  // namespace

double reference_loss_sum(const ModelConfig& cfg, const std::vector<double>& params, const ModelInput& in,
                          const std::vector<std::vector<double>>& projections, std::vector<double>* logits) {
  const ParamLayout layout(cfg);
  Dims s{in.batch, in.n, in.batch * in.n, cfg.width, cfg.heads, cfg.head_dim(), cfg.ffn, cfg.vocab, cfg.features};
  PF_REQUIRE(ValueError, static_cast<int64_t>(params.size()) == layout.total(),
             "reference model: " << params.size() << " parameters, the layout holds " << layout.total());
  PF_REQUIRE(ValueError,
             static_cast<int64_t>(in.inputs.size()) == s.T && static_cast<int64_t>(in.targets.size()) == s.T,
             "reference model: input of " << s.B << " x " << s.n << " holds " << in.inputs.size() << " inputs and "
                                          << in.targets.size() << " targets");
  PF_REQUIRE(ValueError, static_cast<int64_t>(projections.size()) == cfg.layers,
             "reference model: " << projections.size() << " projections for " << cfg.layers << " layers");
  const double* p = params.data();
  const int64_t T = s.T, C = s.C, V = s.V;

  // Embedding scaled by sqrt(C), plus the encoding of global positions.
  std::vector<double> x(T * C), next(T * C);
  embedding_forward_ref(in.inputs.data(), p + layout.embedding(), x.data(), T, V, C);
  const double embed_scale = std::sqrt(static_cast<double>(C));
  for (double& value : x) value *= embed_scale;
  if (cfg.positional == PositionalEncoding::Sinusoidal)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t i = 0; i < s.n; ++i)
        for (int64_t c = 0; c < C; ++c) x[(b * s.n + i) * C + c] += sinusoidal_value(in.offset + i, c, C);

  for (int64_t l = 0; l < cfg.layers; ++l) {
    block(cfg, s, p, layout.layer(l), projections[static_cast<size_t>(l)], x.data(), next.data());
    x.swap(next);
  }

  // Final LN, tied head (the unscaled embedding table), cross-entropy sum.
  std::vector<double> hf(T * C), out(T * V), losses(T);
  layernorm(s, x.data(), p + layout.final_ln_g(), p + layout.final_ln_b(), hf.data());
  linear_forward_ref(hf.data(), p + layout.embedding(), nullptr, out.data(), T, C, V);
  const CrossEntropySums ce = cross_entropy_forward_ref(out.data(), in.targets.data(), losses.data(), T, V);
  if (logits) *logits = std::move(out);
  return ce.loss_sum;
}

std::vector<double> reference_fd_gradient(const ModelConfig& cfg, const std::vector<double>& params,
                                          const ModelInput& in, const std::vector<std::vector<double>>& projections,
                                          double h) {
  std::vector<double> p = params, g(params.size());
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = params[i] + h;
    const double up = reference_loss_sum(cfg, p, in, projections);
    p[i] = params[i] - h;
    const double down = reference_loss_sum(cfg, p, in, projections);
    p[i] = params[i];
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

std::vector<std::vector<double>> reference_projections(PerformerModel& model, int64_t step) {
  const ModelConfig& cfg = model.config();
  std::vector<std::vector<double>> out(static_cast<size_t>(cfg.layers));
  // softmax has none; exp's are parameters.
  if (cfg.attention == AttentionKind::Softmax || cfg.attention == AttentionKind::Exp) return out;
  const int64_t count = cfg.features * cfg.head_dim();
  std::vector<float> host(static_cast<size_t>(count));
  for (int64_t l = 0; l < cfg.layers; ++l) {
    copy_bytes_blocking(host.data(), Device::cpu(), model.projection(l, step), model.params().device(), count * 4);
    out[static_cast<size_t>(l)].assign(host.begin(), host.end());
  }
  return out;
}

}  // namespace pf::test
