#include "model/attention.h"

#include <algorithm>
#include <memory>

#include "kernels/feature_map/feature_map.h"
#include "kernels/linear_attention/linear_attention.h"
#include "kernels/residual/residual.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace pf {
namespace {

// The log-scale state combine of the linear-attention kernels as a scan
// operator: its kernels run on the stream the scan gives (the communicator's).
class StateCombine : public ScanCombine {
 public:
  StateCombine(const ExecContext& ctx, int64_t m, int64_t d) : ctx_(ctx), m_(m), d_(d) {}
  DType dtype() const override { return DType::f32; }
  Device device() const override { return ctx_.device; }
  int64_t granule() const override { return 1 + m_ * (d_ + 1); }
  const char* name() const override { return "linear_attention_state"; }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    LinAttnShape s;
    s.heads = count / granule();
    s.m = m_;
    s.d = d_;
    linear_attention_state_clear(ctx_.on(stream), s, static_cast<float*>(out));
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count,
               const Stream& stream) const override {
    linear_attention_state_combine(ctx_.on(stream), count / granule(), m_, d_, static_cast<const float*>(earlier),
                                   static_cast<const float*>(later), static_cast<float*>(out));
  }

 private:
  ExecContext ctx_;
  int64_t m_, d_;
};

// Communication of one attention layer on the sequence group's stream, ordered
// after the work already queued on the compute stream (which wrote its
// inputs); join() makes later compute work wait for it. Times come from
// events, so they mean the same on the host, on CPU streams and on CUDA.
class CommPhase {
 public:
  CommPhase(const ExecContext& ctx, const Communicator& comm)
      : ctx_(ctx), comm_stream_(comm.stream()), holds_caller_(comm.holds_caller()) {
    stream_wait_stream(comm_stream_, ctx.stream);
    start_ = record_event(comm_stream_);
  }
  const Stream& stream() const { return comm_stream_; }
  // Everything of the phase is issued.
  void issued() { end_ = record_event(comm_stream_); }
  void join(bool omit_wait = false) {
    wait_from_ = record_event(ctx_.stream);
    if (!omit_wait) wait_event(ctx_.stream, end_);
    wait_to_ = record_event(ctx_.stream);
  }
  // After the compute stream has reached the join.
  void times(AttentionTiming& t) const {
    t.comm = event_elapsed_seconds(start_, end_);
    // A communicator that holds the caller held the launching thread for all of it.
    t.comm_wait = holds_caller_ ? t.comm : event_elapsed_seconds(wait_from_, wait_to_);
  }

 private:
  const ExecContext& ctx_;
  Stream comm_stream_;
  bool holds_caller_;
  Event start_, end_, wait_from_, wait_to_;
};

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

// Features of one group of heads, kept while the same group is asked for again.
class GroupFeatures {
 public:
  GroupFeatures(const ExecContext& ctx, const FeatureMapParams& fp, int64_t group, int64_t n, int64_t d, int64_t m,
                const float* W, const float* q, const float* k)
      : ctx_(ctx), fp_(fp), group_(group), n_(n), d_(d), m_(m), W_(W), q_(q), k_(k) {
    phi_q_ = Tensor::empty({group * n, m}, DType::f32, *ctx.tracker, "attention.phi_q");
    phi_k_ = Tensor::empty({group * n, m}, DType::f32, *ctx.tracker, "attention.phi_k");
    c_k_ = Tensor::empty({group * n}, DType::f32, *ctx.tracker, "attention.c_k");
  }
  // Heads [h0, h0 + hg). Computes the key features, and the query features when asked.
  void load(int64_t h0, int64_t hg, bool want_q) {
    if (h0 != h0_ || hg != hg_) {
      feature_map_forward(ctx_, fp_, hg * n_, d_, m_, k_ + h0 * n_ * d_, W_, phi_k(), c_k());
      h0_ = h0;
      hg_ = hg;
      q_ready_ = false;
    }
    if (want_q && !q_ready_) {
      feature_map_forward(ctx_, fp_, hg * n_, d_, m_, q_ + h0 * n_ * d_, W_, phi_q(), nullptr);
      q_ready_ = true;
    }
  }
  float* phi_q() const { return phi_q_.data<float>(); }
  float* phi_k() const { return phi_k_.data<float>(); }
  float* c_k() const { return c_k_.data<float>(); }

 private:
  ExecContext ctx_;
  FeatureMapParams fp_;
  int64_t group_, n_, d_, m_;
  const float *W_, *q_, *k_;
  Tensor phi_q_, phi_k_, c_k_;
  int64_t h0_ = -1, hg_ = -1;
  bool q_ready_ = false;
};

SoftmaxAttentionParams softmax_params(const ModelConfig& cfg, int64_t heads, int64_t n) {
  SoftmaxAttentionParams p;
  p.heads = heads;
  p.n = n;
  p.d = cfg.head_dim();
  p.causal = cfg.causal();
  return p;
}

FeatureMapParams feature_params(const ModelConfig& cfg) {
  return default_feature_params(cfg.attention == AttentionKind::Favor ? FeatureKernel::Softmax : FeatureKernel::Relu,
                                cfg.head_dim());
}

}  // namespace

SequenceAttention::SequenceAttention(const ModelConfig& cfg, Communicator* sp, AttentionOptions options)
    : cfg_(cfg), sp_(sp), opt_(options) {}

void SequenceAttention::forward(const ExecContext& ctx, int64_t heads, int64_t n, const float* W, const float* q,
                                const float* k, const float* v, AttentionSaved& saved,
                                AttentionTiming* timing) const {
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "attention needs a memory tracker in its context");
  const int64_t D = cfg_.head_dim();
  const bool distributed = sp_ != nullptr && sp_->size() > 1;
  AttentionTiming t;
  const double t0 = seconds_now();
  saved.o = Tensor::empty({heads, n, D}, DType::f32, *ctx.tracker, "attention.o");

  if (cfg_.attention == AttentionKind::Softmax) {
    PF_REQUIRE(ConfigError, !distributed,
               "model.attention = softmax needs the whole sequence on one rank, but the sequence group has "
                   << sp_->size() << " ranks (use favor or relu, or sp = 1)");
    saved.lse = Tensor::empty({heads, n}, DType::f32, *ctx.tracker, "attention.lse");
    softmax_attention_forward(ctx, softmax_params(cfg_, heads, n), q, k, v, saved.o.data<float>(),
                              saved.lse.data<float>());
    t.compute = seconds_now() - t0;
    if (timing) *timing = t;
    return;
  }

  const int64_t m = cfg_.features;
  const FeatureMapParams fp = feature_params(cfg_);
  const int64_t G = opt_.head_group > 0 ? std::min(opt_.head_group, heads) : heads;
  LinAttnShape full{heads, n, m, D, cfg_.chunk};
  const int64_t ss = full.state_size();
  const StateCombine combine(ctx, m, D);
  GroupFeatures feats(ctx, fp, G, n, D, m, W, q, k);
  Tensor y = Tensor::empty({heads, n, D + 1}, DType::f32, *ctx.tracker, "attention.y");
  Tensor T = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.block_total");
  saved.den = Tensor::empty({heads, n}, DType::f32, *ctx.tracker, "attention.den");
  saved.row_scale = Tensor::empty({heads, n}, DType::f32, *ctx.tracker, "attention.row_scale");
  saved.state = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.state");
  float* yp = y.data<float>();
  float* rs = saved.row_scale.data<float>();
  float* Tp = T.data<float>();
  float* state = saved.state.data<float>();
  auto shape_of = [&](int64_t hg) { return LinAttnShape{hg, n, m, D, cfg_.chunk}; };
  auto for_groups = [&](auto&& body) {
    for (int64_t h0 = 0; h0 < heads; h0 += G) body(h0, std::min(G, heads - h0));
  };

  std::unique_ptr<CommPhase> phase;
  ScanOptions so;
  so.algorithm = opt_.scan;
  so.tracker = ctx.tracker;
  if (cfg_.causal()) {
    auto issue_scan = [&] {
      phase = std::make_unique<CommPhase>(ctx, *sp_);
      exclusive_scan(*sp_, Tp, state, heads * ss, combine, so);
      phase->issued();
    };
    if (distributed) {
      // Block totals first, so the scan runs while the local chunks are computed.
      for_groups([&](int64_t h0, int64_t hg) {
        feats.load(h0, hg, false);
        bidirectional_linear_attention_local_state(ctx, shape_of(hg), feats.phi_k(), feats.c_k(), v + h0 * n * D,
                                                   Tp + h0 * ss);
      });
      if (opt_.overlap_comm) issue_scan();
    }
    Tensor local_total = Tensor::empty({G, ss}, DType::f32, *ctx.tracker, "attention.local_total");
    for_groups([&](int64_t h0, int64_t hg) {
      feats.load(h0, hg, true);
      causal_linear_attention_forward_local(ctx, shape_of(hg), feats.phi_q(), feats.phi_k(), feats.c_k(),
                                            v + h0 * n * D, yp + h0 * n * (D + 1), rs + h0 * n,
                                            local_total.data<float>(), nullptr);
    });
    if (distributed) {
      if (!phase) issue_scan();
      phase->join(opt_.test_omit_scan_wait);
      for_groups([&](int64_t h0, int64_t hg) {
        feats.load(h0, hg, true);
        linear_attention_add_prefix(ctx, shape_of(hg), feats.phi_q(), state + h0 * ss, yp + h0 * n * (D + 1),
                                    rs + h0 * n);
      });
    } else {
      linear_attention_state_clear(ctx, full, state);
    }
  } else {
    for_groups([&](int64_t h0, int64_t hg) {
      feats.load(h0, hg, false);
      bidirectional_linear_attention_local_state(ctx, shape_of(hg), feats.phi_k(), feats.c_k(), v + h0 * n * D,
                                                 Tp + h0 * ss);
    });
    if (distributed) {
      phase = std::make_unique<CommPhase>(ctx, *sp_);
      allgather_combine(ctx, *sp_, *phase, combine, Tp, state, heads * ss);
    } else {
      copy_bytes(ctx.stream, state, ctx.device, Tp, ctx.device, heads * ss * 4);
    }
    for_groups([&](int64_t h0, int64_t hg) {
      feats.load(h0, hg, true);
      bidirectional_linear_attention_forward_finish(ctx, shape_of(hg), feats.phi_q(), state + h0 * ss,
                                                    yp + h0 * n * (D + 1), rs + h0 * n);
    });
  }
  linear_attention_normalize(ctx, full, yp, saved.o.data<float>(), saved.den.data<float>());
  synchronize(ctx.stream);
  if (phase) phase->times(t);
  t.compute = seconds_now() - t0 - t.comm_wait;
  if (timing) *timing = t;
}

void SequenceAttention::backward(const ExecContext& ctx, int64_t heads, int64_t n, const float* W, const float* q,
                                 const float* k, const float* v, const AttentionSaved& saved, const float* d_o,
                                 float* dq, float* dk, float* dv, AttentionTiming* timing) const {
  const int64_t D = cfg_.head_dim();
  const bool distributed = sp_ != nullptr && sp_->size() > 1;
  AttentionTiming t;
  const double t0 = seconds_now();
  if (cfg_.attention == AttentionKind::Softmax) {
    softmax_attention_backward(ctx, softmax_params(cfg_, heads, n), q, k, v, saved.o.data<float>(),
                               saved.lse.data<float>(), d_o, dq, dk, dv);
    t.compute = seconds_now() - t0;
    if (timing) *timing = t;
    return;
  }

  const int64_t m = cfg_.features;
  const FeatureMapParams fp = feature_params(cfg_);
  const int64_t G = opt_.head_group > 0 ? std::min(opt_.head_group, heads) : heads;
  const int64_t ss = 1 + m * (D + 1);
  const StateCombine combine(ctx, m, D);
  GroupFeatures feats(ctx, fp, G, n, D, m, W, q, k);
  std::unique_ptr<CommPhase> phase;
  ScanOptions so;
  so.algorithm = opt_.scan;
  so.tracker = ctx.tracker;
  Tensor d_phi_q = Tensor::empty({G * n, m}, DType::f32, *ctx.tracker, "attention.d_phi_q");
  Tensor d_phi_k = Tensor::empty({G * n, m}, DType::f32, *ctx.tracker, "attention.d_phi_k");
  Tensor U = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.grad_total");
  float* Up = U.data<float>();
  const float* o = saved.o.data<float>();
  const float* den = saved.den.data<float>();
  const float* rs = saved.row_scale.data<float>();
  const float* state = saved.state.data<float>();
  auto shape_of = [&](int64_t hg) { return LinAttnShape{hg, n, m, D, cfg_.chunk}; };
  auto for_groups = [&](auto&& body) {
    for (int64_t h0 = 0; h0 < heads; h0 += G) body(h0, std::min(G, heads - h0));
  };
  auto fm_back = [&](const float* x, const float* phi, const float* dphi, float* dx, int64_t hg) {
    feature_map_backward(ctx, fp, hg * n, D, m, x, W, phi, dphi, dx);
  };

  if (cfg_.causal()) {
    for_groups([&](int64_t h0, int64_t hg) {
      feats.load(h0, hg, true);
      const int64_t r = h0 * n;
      causal_linear_attention_backward_local(ctx, shape_of(hg), feats.phi_q(), feats.phi_k(), feats.c_k(), v + r * D,
                                             o + r * D, den + r, rs + r, d_o + r * D, d_phi_q.data<float>(),
                                             d_phi_k.data<float>(), dv + r * D, Up + h0 * ss,
                                             distributed ? state + h0 * ss : nullptr, nullptr);
      fm_back(q + r * D, feats.phi_q(), d_phi_q.data<float>(), dq + r * D, hg);
      fm_back(k + r * D, feats.phi_k(), d_phi_k.data<float>(), dk + r * D, hg);
    });
    if (distributed) {
      Tensor suffix = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.suffix");
      phase = std::make_unique<CommPhase>(ctx, *sp_);
      reverse_exclusive_scan(*sp_, Up, suffix.raw(), heads * ss, combine, so);
      phase->issued();
      phase->join();
      Tensor dk_extra = Tensor::empty({G * n, D}, DType::f32, *ctx.tracker, "attention.dk_suffix");
      for_groups([&](int64_t h0, int64_t hg) {
        feats.load(h0, hg, false);
        const int64_t r = h0 * n;
        fill_zero(ctx.stream, d_phi_k.raw(), ctx.device, hg * n * m * 4);
        linear_attention_backward_add_suffix(ctx, shape_of(hg), feats.phi_k(), feats.c_k(), v + r * D,
                                             suffix.data<float>() + h0 * ss, d_phi_k.data<float>(), dv + r * D);
        fm_back(k + r * D, feats.phi_k(), d_phi_k.data<float>(), dk_extra.data<float>(), hg);
        residual_add(ctx, dk + r * D, dk_extra.data<float>(), dk + r * D, hg * n * D);
      });
    }
  } else {
    for_groups([&](int64_t h0, int64_t hg) {
      feats.load(h0, hg, true);
      const int64_t r = h0 * n;
      bidirectional_linear_attention_backward_local(ctx, shape_of(hg), feats.phi_q(), o + r * D, den + r, rs + r,
                                                    d_o + r * D, state + h0 * ss, d_phi_q.data<float>(),
                                                    Up + h0 * ss);
      fm_back(q + r * D, feats.phi_q(), d_phi_q.data<float>(), dq + r * D, hg);
    });
    Tensor total = U;
    if (distributed) {
      total = Tensor::empty({heads, ss}, DType::f32, *ctx.tracker, "attention.grad_total_all");
      phase = std::make_unique<CommPhase>(ctx, *sp_);
      allgather_combine(ctx, *sp_, *phase, combine, Up, total.data<float>(), heads * ss);
    }
    for_groups([&](int64_t h0, int64_t hg) {
      feats.load(h0, hg, false);
      const int64_t r = h0 * n;
      bidirectional_linear_attention_backward_finish(ctx, shape_of(hg), feats.phi_k(), feats.c_k(), v + r * D,
                                                     total.data<float>() + h0 * ss, d_phi_k.data<float>(),
                                                     dv + r * D);
      fm_back(k + r * D, feats.phi_k(), d_phi_k.data<float>(), dk + r * D, hg);
    });
  }
  synchronize(ctx.stream);
  if (phase) phase->times(t);
  t.compute = seconds_now() - t0 - t.comm_wait;
  if (timing) *timing = t;
}

}  // namespace pf
