// FAVOR+ in slabs (favor_attention.h): one head at a time, a slab of
// FavorShape::slab_rows positions at a time, through the dispatching
// feature-map and linear-attention kernels of ctx.device (CUDA's fallback from
// the fused op; on the CPU with FavorShape::slab_rows > 0 for tests). The
// feature buffers are [slab_rows, m] and the state is carried between slabs
// with the log-scale combine:
//   key state:  run (+)= local_state(slab)
//   causal forward:  the slab's y with the running state as its initial state
//   causal backward: sweep 1 keeps the forward state at each slab start
//     (starting from the rank's prefix); sweep 2, in reverse, runs the local
//     backward of each slab with that state as its prefix and the gradient
//     state of later slabs as its suffix, then the feature-map backward
//     (which also accumulates the head's dW when W is trained).
// Head h uses its own projection s.head_w(W, h).
// Everything is queued on ctx.stream; the buffers are released in its order.
#include <algorithm>
#include <memory>

#include "kernels/favor_attention/favor_attention_backend.h"
#include "kernels/residual/residual.h"
#include "runtime/check.h"
#include "runtime/memory.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

// The buffers of one slab of one head, and the loop over them.
class Slabs {
 public:
  Slabs(const ExecContext& ctx, const FavorShape& s) : ctx_(ctx), s_(s), rows_(favor_rows_per_slab(s)) {
    MemoryTracker* tracker = &favor_scratch_tracker(ctx, own_);
    auto buf = [&](int64_t floats) { return Tensor::empty({floats}, DType::f32, *tracker, kFavorScratchTag); };
    phi_q_ = buf(rows_ * s.m);
    phi_k_ = buf(rows_ * s.m);
    c_k_ = buf(rows_);
    d_phi_q_ = buf(rows_ * s.m);
    d_phi_k_ = buf(rows_ * s.m);
    dx_ = buf(rows_ * s.d);
    state_ = buf(s.state_size());
    tracker_ = tracker;
  }
  int64_t count() const { return (s_.n + rows_ - 1) / rows_; }
  int64_t start(int64_t i) const { return i * rows_; }
  int64_t rows(int64_t i) const { return std::min(rows_, s_.n - i * rows_); }
  LinAttnShape shape(int64_t i) const { return LinAttnShape{1, rows(i), s_.m, s_.d, s_.chunk}; }
  MemoryTracker& tracker() const { return *tracker_; }

  // Features of the slab's rows of head h: q (no log-scales) or k (with them).
  void q_features(const float* q, const float* W, int64_t h, int64_t i) {
    feature_map_forward(ctx_, s_.features, rows(i), s_.d, s_.m, q + row(h, i) * s_.d, s_.head_w(W, h), phi_q(),
                        nullptr);
  }
  void k_features(const float* k, const float* W, int64_t h, int64_t i) {
    feature_map_forward(ctx_, s_.features, rows(i), s_.d, s_.m, k + row(h, i) * s_.d, s_.head_w(W, h), phi_k(), c_k());
  }
  // dX rows of the slab (written) from dPhi given the slab's features;
  // head h's dW [m, d] (+)= its part when dW [heads, m, d] is not nullptr.
  void feature_backward(const float* X, const float* W, const float* phi, const float* d_phi, float* dX, int64_t h,
                        int64_t i, float* dW) {
    feature_map_backward(ctx_, s_.features, rows(i), s_.d, s_.m, X + row(h, i) * s_.d, s_.head_w(W, h), phi, d_phi,
                         dX + row(h, i) * s_.d, head_dw(dW, h));
  }
  float* head_dw(float* dW, int64_t h) const { return dW ? dW + h * s_.m * s_.d : nullptr; }
  // slab_state() = the key state of slab i of head h alone (its features in
  // phi_k, c_k).
  void key_state(const float* k, const float* v, const float* W, int64_t h, int64_t i) {
    k_features(k, W, h, i);
    bidirectional_linear_attention_local_state(ctx_, shape(i), phi_k(), c_k(), v + row(h, i) * s_.d, slab_state());
  }
  // Runs f(h, i, r) for every head h and its slabs i in order, r the slab's
  // first row.
  template <typename F>
  void each(F&& f) const {
    for (int64_t h = 0; h < s_.heads; ++h)
      for (int64_t i = 0; i < count(); ++i) f(h, i, row(h, i));
  }
  // First row of slab i of head h in [heads * n] row space.
  int64_t row(int64_t h, int64_t i) const { return h * s_.n + start(i); }

  float* phi_q() const { return phi_q_.data<float>(); }
  float* phi_k() const { return phi_k_.data<float>(); }
  float* c_k() const { return c_k_.data<float>(); }
  float* d_phi_q() const { return d_phi_q_.data<float>(); }
  float* d_phi_k() const { return d_phi_k_.data<float>(); }
  float* dx() const { return dx_.data<float>(); }
  float* slab_state() const { return state_.data<float>(); }

 private:
  const ExecContext& ctx_;
  const FavorShape& s_;
  int64_t rows_;
  std::unique_ptr<MemoryTracker> own_;
  MemoryTracker* tracker_ = nullptr;
  Tensor phi_q_, phi_k_, c_k_, d_phi_q_, d_phi_k_, dx_, state_;
};

void clear_states(const ExecContext& ctx, const FavorShape& s, int64_t heads, float* states) {
  LinAttnShape one = s.lin();
  one.heads = heads;
  linear_attention_state_clear(ctx, one, states);
}

// run = earlier (+) later for one head's states.
void combine(const ExecContext& ctx, const FavorShape& s, const float* earlier, const float* later, float* out) {
  linear_attention_state_combine(ctx, 1, s.m, s.d, earlier, later, out);
}

}  // namespace

void favor_key_state_slabs(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v, const float* W,
                           float* total) {
  Slabs slabs(ctx, s);
  clear_states(ctx, s, s.heads, total);
  slabs.each([&](int64_t h, int64_t i, int64_t) {
    float* run = total + h * s.state_size();
    slabs.key_state(k, v, W, h, i);
    combine(ctx, s, run, slabs.slab_state(), run);
  });
}

void favor_causal_forward_local_slabs(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                      const float* v, const float* W, float* y, float* row_scale, float* block_total) {
  Slabs slabs(ctx, s);
  const int64_t d = s.d;
  clear_states(ctx, s, s.heads, block_total);
  slabs.each([&](int64_t h, int64_t i, int64_t r) {
    float* run = block_total + h * s.state_size();
    slabs.q_features(q, W, h, i);
    slabs.k_features(k, W, h, i);
    causal_linear_attention_forward_local(ctx, slabs.shape(i), slabs.phi_q(), slabs.phi_k(), slabs.c_k(), v + r * d,
                                          y + r * (d + 1), row_scale + r, slabs.slab_state(), i > 0 ? run : nullptr);
    combine(ctx, s, run, slabs.slab_state(), run);
  });
}

void favor_add_prefix_slabs(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                            const float* prefix, float* y, float* row_scale) {
  Slabs slabs(ctx, s);
  slabs.each([&](int64_t h, int64_t i, int64_t r) {
    slabs.q_features(q, W, h, i);
    linear_attention_add_prefix(ctx, slabs.shape(i), slabs.phi_q(), prefix + h * s.state_size(), y + r * (s.d + 1),
                                row_scale + r);
  });
}

void favor_bidirectional_forward_finish_slabs(const ExecContext& ctx, const FavorShape& s, const float* q,
                                              const float* W, const float* total, float* y, float* row_scale) {
  Slabs slabs(ctx, s);
  slabs.each([&](int64_t h, int64_t i, int64_t r) {
    slabs.q_features(q, W, h, i);
    bidirectional_linear_attention_forward_finish(ctx, slabs.shape(i), slabs.phi_q(), total + h * s.state_size(),
                                                  y + r * (s.d + 1), row_scale + r);
  });
}

void favor_causal_backward_local_slabs(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                       const float* v, const float* W, const float* o, const float* den,
                                       const float* row_scale, const float* d_o, const float* prefix, float* dq,
                                       float* dk, float* dv, float* block_total_grad, float* dW) {
  Slabs slabs(ctx, s);
  const int64_t ss = s.state_size(), d = s.d, ns = slabs.count();
  // The forward state at the start of every slab of one head.
  const Tensor starts = Tensor::empty({std::max<int64_t>(ns, 1) * ss}, DType::f32, slabs.tracker(), kFavorScratchTag);
  float* st = starts.data<float>();
  clear_states(ctx, s, s.heads, block_total_grad);
  for (int64_t h = 0; h < s.heads; ++h) {
    if (prefix) {
      copy_bytes(ctx.stream, st, ctx.device, prefix + h * ss, ctx.device, ss * 4);
    } else {
      clear_states(ctx, s, 1, st);
    }
    for (int64_t i = 0; i + 1 < ns; ++i) {
      slabs.key_state(k, v, W, h, i);
      combine(ctx, s, st + i * ss, slabs.slab_state(), st + (i + 1) * ss);
    }
    float* R = block_total_grad + h * ss;
    for (int64_t i = ns - 1; i >= 0; --i) {
      const int64_t r = slabs.row(h, i);
      slabs.q_features(q, W, h, i);
      slabs.k_features(k, W, h, i);
      causal_linear_attention_backward_local(ctx, slabs.shape(i), slabs.phi_q(), slabs.phi_k(), slabs.c_k(), v + r * d,
                                             o + r * d, den + r, row_scale + r, d_o + r * d, slabs.d_phi_q(),
                                             slabs.d_phi_k(), dv + r * d, slabs.slab_state(),
                                             (i > 0 || prefix) ? st + i * ss : nullptr, i + 1 < ns ? R : nullptr);
      slabs.feature_backward(q, W, slabs.phi_q(), slabs.d_phi_q(), dq, h, i, dW);
      slabs.feature_backward(k, W, slabs.phi_k(), slabs.d_phi_k(), dk, h, i, dW);
      combine(ctx, s, slabs.slab_state(), R, R);
    }
  }
}

void favor_backward_add_suffix_slabs(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                                     const float* W, const float* suffix, float* dk, float* dv, float* dW) {
  Slabs slabs(ctx, s);
  const int64_t d = s.d;
  slabs.each([&](int64_t h, int64_t i, int64_t r) {
    const int64_t rows = slabs.rows(i);
    slabs.k_features(k, W, h, i);
    fill_zero(ctx.stream, slabs.d_phi_k(), ctx.device, rows * s.m * 4);
    linear_attention_backward_add_suffix(ctx, slabs.shape(i), slabs.phi_k(), slabs.c_k(), v + r * d,
                                         suffix + h * s.state_size(), slabs.d_phi_k(), dv + r * d);
    feature_map_backward(ctx, s.features, rows, d, s.m, k + r * d, s.head_w(W, h), slabs.phi_k(), slabs.d_phi_k(),
                         slabs.dx(), slabs.head_dw(dW, h));
    residual_add(ctx, dk + r * d, slabs.dx(), dk + r * d, rows * d);
  });
}

void favor_bidirectional_backward_local_slabs(const ExecContext& ctx, const FavorShape& s, const float* q,
                                              const float* W, const float* o, const float* den, const float* row_scale,
                                              const float* d_o, const float* total, float* dq, float* local_grad_total,
                                              float* dW) {
  Slabs slabs(ctx, s);
  const int64_t ss = s.state_size(), d = s.d;
  clear_states(ctx, s, s.heads, local_grad_total);
  slabs.each([&](int64_t h, int64_t i, int64_t r) {
    float* R = local_grad_total + h * ss;
    slabs.q_features(q, W, h, i);
    bidirectional_linear_attention_backward_local(ctx, slabs.shape(i), slabs.phi_q(), o + r * d, den + r, row_scale + r,
                                                  d_o + r * d, total + h * ss, slabs.d_phi_q(), slabs.slab_state());
    slabs.feature_backward(q, W, slabs.phi_q(), slabs.d_phi_q(), dq, h, i, dW);
    combine(ctx, s, R, slabs.slab_state(), R);
  });
}

void favor_bidirectional_backward_finish_slabs(const ExecContext& ctx, const FavorShape& s, const float* k,
                                               const float* v, const float* W, const float* grad_total, float* dk,
                                               float* dv, float* dW) {
  Slabs slabs(ctx, s);
  const int64_t d = s.d;
  slabs.each([&](int64_t h, int64_t i, int64_t r) {
    slabs.k_features(k, W, h, i);
    bidirectional_linear_attention_backward_finish(ctx, slabs.shape(i), slabs.phi_k(), slabs.c_k(), v + r * d,
                                                   grad_total + h * s.state_size(), slabs.d_phi_k(), dv + r * d);
    slabs.feature_backward(k, W, slabs.phi_k(), slabs.d_phi_k(), dk, h, i, dW);
  });
}

}  // namespace pf
