#include "model/attention.h"

#include <algorithm>
#include <memory>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/gated_mix/gated_mix.h"
#include "kernels/linear_attention/linear_attention.h"
#include "kernels/residual/residual.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "model/attention_comm.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace pf {
namespace {

// out = T_0 (+) T_1 (+) ... (+) T_{P-1} over the group, identical bits on every
// rank, on the phase's stream; joined to the compute stream before the
// gathered blocks are released there.
void allgather_combine(const ExecContext& ctx, Communicator& comm, CommPhase& phase, const StateCombine& combine,
                       const float* local, float* out, int64_t count) {
  const int P = comm.size();
  Tensor all = Tensor::empty({P, count}, DType::f32, *ctx.tracker, "attention.allgather");
  stream_wait_stream(phase.stream(), ctx.stream);  // the allocation is in the compute stream's order
  comm.allgather(local, all.raw(), count, DType::f32);
  const float* a = all.data<float>();
  copy_bytes(phase.stream(), out, ctx.device, a, ctx.device, count * 4);
  for (int r = 1; r < P; ++r) combine.combine(out, a + r * count, out, count, phase.stream());
  phase.issued();
  phase.join();
}

}  // namespace

FeatureKernel attention_feature_kernel(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::Favor: return FeatureKernel::Softmax;
    case AttentionKind::Relu: return FeatureKernel::Relu;
    case AttentionKind::Elu: return FeatureKernel::Elu;
    case AttentionKind::Exp: return FeatureKernel::Exp;
    case AttentionKind::Softmax: break;
  }
  PF_REQUIRE(ValueError, false, "model.attention = " << attention_kind_name(kind) << " has no feature map");
  return FeatureKernel::Softmax;
}

FavorShape attention_favor_shape(const ModelConfig& cfg, int64_t heads, int64_t n) {
  FavorShape s;
  s.heads = heads;
  s.n = n;
  s.d = cfg.head_dim();
  s.m = cfg.features;
  s.chunk = cfg.chunk;
  // Softmax attention has no feature map; its shape still sizes the planner's buffers.
  if (cfg.attention != AttentionKind::Softmax) {
    s.features = default_feature_params(attention_feature_kernel(cfg.attention), cfg.head_dim());
    s.features.half_norm = cfg.exp_key_norm;
  }
  // exp: every head has its own trained projection.
  if (cfg.attention == AttentionKind::Exp) s.w_heads = cfg.heads;
  s.tile_math = attention_tile_math(cfg);
  return s;
}

SequenceAttention::SequenceAttention(const ModelConfig& cfg, Communicator* sp, AttentionOptions options)
    : cfg_(cfg), sp_(sp), opt_(options) {}

void SequenceAttention::forward_kind(const ModelConfig& cfg, const ExecContext& ctx, int64_t heads, int64_t n,
                                     const float* W, const float* q, const float* k, const float* v,
                                     AttentionSaved& saved, AttentionTiming* timing, const PackedLayout* packed) const {
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "attention needs a memory tracker in its context");
  if (window_across_ranks(cfg)) {
    window_attention_forward(cfg, *sp_, ctx, heads, n, packed ? packed->state_segments() : PackedLayout(), q, k, v,
                             saved, timing);
    return;
  }
  if (packed && !packed->empty()) {
    packed_attention_forward(cfg, sp_, opt_, ctx, heads, n, packed->state_segments(), W, q, k, v, saved, timing);
    return;
  }
  const int64_t D = cfg.head_dim();
  const bool distributed = sp_ != nullptr && sp_->size() > 1;
  AttentionTiming t;
  const double t0 = seconds_now();
  saved.o = Tensor::empty({heads, n, D}, DType::f32, *ctx.tracker, "attention.o");

  if (cfg.attention == AttentionKind::Softmax) {
    PF_REQUIRE(ConfigError, !distributed,
               "model.attention = softmax needs the whole sequence on one rank, but the sequence group has "
                   << sp_->size() << " ranks (use favor, relu or elu, or sp = 1)");
    saved.lse = Tensor::empty({heads, n}, DType::f32, *ctx.tracker, "attention.lse");
    softmax_attention_forward(ctx, attention_softmax_params(cfg, heads, n), q, k, v, saved.o.data<float>(),
                              saved.lse.data<float>());
    end_local_attention_timing(t0, timing);
    return;
  }

  const FavorShape fs = attention_favor_shape(cfg, heads, n);
  const int64_t ss = fs.state_size();
  const StateCombine combine(ctx, fs.m, D);
  Tensor y = Tensor::empty({heads, n, D + 1}, DType::f32, *ctx.tracker, "attention.y");
  Tensor T = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.block_total");
  saved.den = Tensor::empty({heads, n}, DType::f32, *ctx.tracker, "attention.den");
  saved.row_scale = Tensor::empty({heads, n}, DType::f32, *ctx.tracker, "attention.row_scale");
  saved.state = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.state");
  float* yp = y.data<float>();
  float* rs = saved.row_scale.data<float>();
  float* Tp = T.data<float>();
  float* state = saved.state.data<float>();

  std::unique_ptr<CommPhase> phase;
  const ScanOptions so = attention_scan_options(opt_, ctx);
  if (cfg.causal()) {
    auto issue_scan = [&] {
      phase = std::make_unique<CommPhase>(ctx, *sp_);
      exclusive_scan(*sp_, Tp, state, heads * ss, combine, so);
      phase->issued();
    };
    // With overlap, the block totals first, so that the scan runs while the
    // local chunks are computed; without, the local pass writes them.
    const bool early = distributed && opt_.overlap_comm;
    if (early) {
      favor_key_state(ctx, fs, k, v, W, Tp);
      issue_scan();
    }
    Tensor local_total;
    if (early) local_total = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.local_total");
    favor_causal_forward_local(ctx, fs, q, k, v, W, yp, rs, early ? local_total.data<float>() : Tp);
    if (distributed) {
      if (!phase) issue_scan();
      phase->join(opt_.test_omit_scan_wait);
      favor_add_prefix(ctx, fs, q, W, state, yp, rs);
    } else {
      linear_attention_state_clear(ctx, fs.lin(), state);
    }
  } else {
    favor_key_state(ctx, fs, k, v, W, Tp);
    if (distributed) {
      phase = std::make_unique<CommPhase>(ctx, *sp_);
      allgather_combine(ctx, *sp_, *phase, combine, Tp, state, heads * ss);
    } else {
      copy_bytes(ctx.stream, state, ctx.device, Tp, ctx.device, heads * ss * 4);
    }
    favor_bidirectional_forward_finish(ctx, fs, q, W, state, yp, rs);
  }
  linear_attention_normalize(ctx, fs.lin(), yp, saved.o.data<float>(), saved.den.data<float>());
  synchronize(ctx.stream);
  if (phase) phase->times(t);
  t.compute = seconds_now() - t0 - t.comm_wait;
  if (timing) *timing = t;
}

void SequenceAttention::backward_kind(const ModelConfig& cfg, const ExecContext& ctx, int64_t heads, int64_t n,
                                      const float* W, const float* q, const float* k, const float* v,
                                      const AttentionSaved& saved, const float* d_o, float* dq, float* dk, float* dv,
                                      float* dW, AttentionTiming* timing, const PackedLayout* packed) const {
  PF_REQUIRE(ValueError, (dW != nullptr) == (cfg.attention == AttentionKind::Exp),
             "attention backward: model.attention = " << attention_kind_name(cfg.attention)
                                                      << (dW ? " has no trained projection, but got its gradient"
                                                             : " needs the gradient of its trained projection"));
  if (window_across_ranks(cfg)) {
    window_attention_backward(cfg, *sp_, ctx, heads, n, packed ? packed->state_segments() : PackedLayout(), q, k, v,
                              saved, d_o, dq, dk, dv, timing);
    return;
  }
  if (packed && !packed->empty()) {
    packed_attention_backward(cfg, sp_, opt_, ctx, heads, n, packed->state_segments(), W, q, k, v, saved, d_o, dq, dk,
                              dv, dW, timing);
    return;
  }
  const int64_t D = cfg.head_dim();
  const bool distributed = sp_ != nullptr && sp_->size() > 1;
  AttentionTiming t;
  const double t0 = seconds_now();
  if (cfg.attention == AttentionKind::Softmax) {
    softmax_attention_backward(ctx, attention_softmax_params(cfg, heads, n), q, k, v, saved.o.data<float>(),
                               saved.lse.data<float>(), d_o, dq, dk, dv);
    end_local_attention_timing(t0, timing);
    return;
  }

  const int64_t m = cfg.features;
  const FavorShape fs = attention_favor_shape(cfg, heads, n);
  const int64_t ss = fs.state_size();
  const StateCombine combine(ctx, m, D);
  std::unique_ptr<CommPhase> phase;
  const ScanOptions so = attention_scan_options(opt_, ctx);
  Tensor U = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.grad_total");
  // exp: the kernels accumulate each of the B*H heads' dW; summed over the batch below.
  Tensor dW_heads;
  if (dW) dW_heads = Tensor::zeros({heads, m, D}, DType::f32, *ctx.tracker, "attention.grad_projection");
  float* dWp = dW ? dW_heads.data<float>() : nullptr;
  float* Up = U.data<float>();
  const float* o = saved.o.data<float>();
  const float* den = saved.den.data<float>();
  const float* rs = saved.row_scale.data<float>();
  const float* state = saved.state.data<float>();

  if (cfg.causal()) {
    favor_causal_backward_local(ctx, fs, q, k, v, W, o, den, rs, d_o, distributed ? state : nullptr, dq, dk, dv, Up,
                                dWp);
    if (distributed) {
      Tensor suffix = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.suffix");
      phase = std::make_unique<CommPhase>(ctx, *sp_);
      reverse_exclusive_scan(*sp_, Up, suffix.raw(), heads * ss, combine, so);
      phase->issued();
      phase->join();
      favor_backward_add_suffix(ctx, fs, k, v, W, suffix.data<float>(), dk, dv, dWp);
    }
  } else {
    favor_bidirectional_backward_local(ctx, fs, q, W, o, den, rs, d_o, state, dq, Up, dWp);
    Tensor total = U;
    if (distributed) {
      total = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.grad_total_all");
      phase = std::make_unique<CommPhase>(ctx, *sp_);
      allgather_combine(ctx, *sp_, *phase, combine, Up, total.data<float>(), heads * ss);
    }
    favor_bidirectional_backward_finish(ctx, fs, k, v, W, total.data<float>(), dk, dv, dWp);
  }
  if (dW) {
    const int64_t per_sample = cfg.heads * m * D;
    for (int64_t b = 0; b < heads / cfg.heads; ++b) residual_add(ctx, dW, dWp + b * per_sample, dW, per_sample);
  }
  synchronize(ctx.stream);
  if (phase) phase->times(t);
  t.compute = seconds_now() - t0 - t.comm_wait;
  if (timing) *timing = t;
}

namespace {

// A hybrid's two parts: the linear kind over the whole context, and the
// window's exact softmax.
ModelConfig linear_part(ModelConfig cfg) {
  cfg.window = 0;
  return cfg;
}
ModelConfig window_part(ModelConfig cfg) {
  cfg.attention = AttentionKind::Softmax;
  return cfg;
}

void add_timing(AttentionTiming& sum, const AttentionTiming& t) {
  sum.compute += t.compute;
  sum.comm += t.comm;
  sum.comm_wait += t.comm_wait;
}

}  // namespace

void SequenceAttention::forward(const ExecContext& ctx, int64_t heads, int64_t n, const float* W, const float* q,
                                const float* k, const float* v, AttentionSaved& saved, AttentionTiming* timing,
                                const PackedLayout* packed, const float* gate) const {
  PF_REQUIRE(ValueError, (gate != nullptr) == cfg_.hybrid(),
             "attention forward: the gate is for model.window with a linear kind (window "
                 << cfg_.window << ", " << attention_kind_name(cfg_.attention) << ")");
  if (!cfg_.hybrid()) return forward_kind(cfg_, ctx, heads, n, W, q, k, v, saved, timing, packed);
  AttentionTiming lin, win;
  forward_kind(linear_part(cfg_), ctx, heads, n, W, q, k, v, saved, &lin, packed);
  saved.local = std::make_shared<AttentionSaved>();
  forward_kind(window_part(cfg_), ctx, heads, n, nullptr, q, k, v, *saved.local, &win, packed);
  const double t0 = seconds_now();
  const int64_t H = cfg_.heads, D = cfg_.head_dim();
  saved.mixed = Tensor::empty({heads, n, D}, DType::f32, *ctx.tracker, "attention.mixed");
  gated_mix_forward(ctx, GatedMixShape{heads / H, H, n, D}, gate, saved.o.data<float>(), saved.local->o.data<float>(),
                    saved.mixed.data<float>());
  synchronize(ctx.stream);
  if (timing) {
    *timing = lin;
    add_timing(*timing, win);
    timing->compute += seconds_now() - t0;
  }
}

void SequenceAttention::backward(const ExecContext& ctx, int64_t heads, int64_t n, const float* W, const float* q,
                                 const float* k, const float* v, const AttentionSaved& saved, const float* d_o,
                                 float* dq, float* dk, float* dv, float* dW, AttentionTiming* timing,
                                 const PackedLayout* packed, const float* gate, float* dgate) const {
  PF_REQUIRE(ValueError, (gate != nullptr) == cfg_.hybrid() && (dgate != nullptr) == cfg_.hybrid(),
             "attention backward: the gate and its gradient are for model.window with a linear kind (window "
                 << cfg_.window << ", " << attention_kind_name(cfg_.attention) << ")");
  if (!cfg_.hybrid()) return backward_kind(cfg_, ctx, heads, n, W, q, k, v, saved, d_o, dq, dk, dv, dW, timing, packed);
  PF_REQUIRE(ValueError, saved.local != nullptr, "attention backward: the hybrid forward's window part is missing");
  const int64_t H = cfg_.heads, D = cfg_.head_dim(), size = heads * n * D;
  double t0 = seconds_now();
  Tensor d_lin = Tensor::empty({heads, n, D}, DType::f32, *ctx.tracker, "attention.grad_mixed");
  Tensor d_win = Tensor::empty({heads, n, D}, DType::f32, *ctx.tracker, "attention.grad_mixed");
  gated_mix_backward(ctx, GatedMixShape{heads / H, H, n, D}, gate, saved.o.data<float>(), saved.local->o.data<float>(),
                     d_o, d_lin.data<float>(), d_win.data<float>(), dgate);
  double own = seconds_now() - t0;
  AttentionTiming lin, win;
  backward_kind(linear_part(cfg_), ctx, heads, n, W, q, k, v, saved, d_lin.data<float>(), dq, dk, dv, dW, &lin, packed);
  d_lin = Tensor();
  Tensor dqkv = Tensor::empty({3, heads, n, D}, DType::f32, *ctx.tracker, "attention.grad_window");
  float* g = dqkv.data<float>();
  backward_kind(window_part(cfg_), ctx, heads, n, nullptr, q, k, v, *saved.local, d_win.data<float>(), g, g + size,
                g + 2 * size, nullptr, &win, packed);
  t0 = seconds_now();
  residual_add(ctx, dq, g, dq, size);
  residual_add(ctx, dk, g + size, dk, size);
  residual_add(ctx, dv, g + 2 * size, dv, size);
  synchronize(ctx.stream);
  own += seconds_now() - t0;
  if (timing) {
    *timing = lin;
    add_timing(*timing, win);
    timing->compute += own;
  }
}

}  // namespace pf
