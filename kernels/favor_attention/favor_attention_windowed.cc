// Windowed FAVOR+ (favor_attention.h): one head at a time, `window` positions
// at a time, through the dispatching feature-map and linear-attention kernels
// of ctx.device (CUDA's implementation of the fused op; on the CPU with
// FavorShape::window > 0 for tests). The feature buffers are [window, m] and
// the state is carried between windows with the log-scale combine:
//   key state:  run (+)= local_state(window)
//   causal forward:  window's y with the running state as its initial state
//   causal backward: sweep 1 keeps the forward state at each window start
//     (starting from the rank's prefix); sweep 2, in reverse, runs the local
//     backward of each window with that state as its prefix and the gradient
//     state of later windows as its suffix, then the feature-map backward
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

constexpr const char* kTag = "favor_attention";

int64_t window_rows(const FavorShape& s) {
  return std::min(s.window > 0 ? s.window : kFavorDefaultWindow, std::max<int64_t>(s.n, 1));
}

// The buffers of one window of one head, and the loop over them.
class Windows {
 public:
  Windows(const ExecContext& ctx, const FavorShape& s) : ctx_(ctx), s_(s), w_(window_rows(s)) {
    MemoryTracker* tracker = &favor_scratch_tracker(ctx, own_);
    auto buf = [&](int64_t floats) { return Tensor::empty({floats}, DType::f32, *tracker, kTag); };
    phi_q_ = buf(w_ * s.m);
    phi_k_ = buf(w_ * s.m);
    c_k_ = buf(w_);
    d_phi_q_ = buf(w_ * s.m);
    d_phi_k_ = buf(w_ * s.m);
    dx_ = buf(w_ * s.d);
    state_ = buf(s.state_size());
    tracker_ = tracker;
  }
  int64_t count() const { return (s_.n + w_ - 1) / w_; }
  int64_t start(int64_t w) const { return w * w_; }
  int64_t rows(int64_t w) const { return std::min(w_, s_.n - w * w_); }
  LinAttnShape shape(int64_t w) const { return LinAttnShape{1, rows(w), s_.m, s_.d, s_.chunk}; }
  MemoryTracker& tracker() const { return *tracker_; }

  // Features of the window's rows of head h: q (no log-scales) or k (with them).
  void q_features(const float* q, const float* W, int64_t h, int64_t w) {
    feature_map_forward(ctx_, s_.features, rows(w), s_.d, s_.m, q + row(h, w) * s_.d, s_.head_w(W, h), phi_q(),
                        nullptr);
  }
  void k_features(const float* k, const float* W, int64_t h, int64_t w) {
    feature_map_forward(ctx_, s_.features, rows(w), s_.d, s_.m, k + row(h, w) * s_.d, s_.head_w(W, h), phi_k(), c_k());
  }
  // dX rows of the window (written) from dPhi given the window's features;
  // head h's dW [m, d] (+)= its part when dW [heads, m, d] is not nullptr.
  void feature_backward(const float* X, const float* W, const float* phi, const float* d_phi, float* dX, int64_t h,
                        int64_t w, float* dW) {
    feature_map_backward(ctx_, s_.features, rows(w), s_.d, s_.m, X + row(h, w) * s_.d, s_.head_w(W, h), phi, d_phi,
                         dX + row(h, w) * s_.d, head_dw(dW, h));
  }
  float* head_dw(float* dW, int64_t h) const { return dW ? dW + h * s_.m * s_.d : nullptr; }
  // First row of window w of head h in [heads * n] row space.
  int64_t row(int64_t h, int64_t w) const { return h * s_.n + start(w); }

  float* phi_q() const { return phi_q_.data<float>(); }
  float* phi_k() const { return phi_k_.data<float>(); }
  float* c_k() const { return c_k_.data<float>(); }
  float* d_phi_q() const { return d_phi_q_.data<float>(); }
  float* d_phi_k() const { return d_phi_k_.data<float>(); }
  float* dx() const { return dx_.data<float>(); }
  float* window_state() const { return state_.data<float>(); }

 private:
  const ExecContext& ctx_;
  const FavorShape& s_;
  int64_t w_;
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

void favor_key_state_windowed(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                              const float* W, float* total) {
  Windows win(ctx, s);
  const int64_t ss = s.state_size(), d = s.d;
  clear_states(ctx, s, s.heads, total);
  for (int64_t h = 0; h < s.heads; ++h) {
    float* run = total + h * ss;
    for (int64_t w = 0; w < win.count(); ++w) {
      win.k_features(k, W, h, w);
      bidirectional_linear_attention_local_state(ctx, win.shape(w), win.phi_k(), win.c_k(), v + win.row(h, w) * d,
                                                 win.window_state());
      combine(ctx, s, run, win.window_state(), run);
    }
  }
}

void favor_causal_forward_local_windowed(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                         const float* v, const float* W, float* y, float* row_scale,
                                         float* block_total) {
  Windows win(ctx, s);
  const int64_t ss = s.state_size(), d = s.d;
  clear_states(ctx, s, s.heads, block_total);
  for (int64_t h = 0; h < s.heads; ++h) {
    float* run = block_total + h * ss;
    for (int64_t w = 0; w < win.count(); ++w) {
      const int64_t r = win.row(h, w);
      win.q_features(q, W, h, w);
      win.k_features(k, W, h, w);
      causal_linear_attention_forward_local(ctx, win.shape(w), win.phi_q(), win.phi_k(), win.c_k(), v + r * d,
                                            y + r * (d + 1), row_scale + r, win.window_state(), w > 0 ? run : nullptr);
      combine(ctx, s, run, win.window_state(), run);
    }
  }
}

void favor_add_prefix_windowed(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                               const float* prefix, float* y, float* row_scale) {
  Windows win(ctx, s);
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t w = 0; w < win.count(); ++w) {
      const int64_t r = win.row(h, w);
      win.q_features(q, W, h, w);
      linear_attention_add_prefix(ctx, win.shape(w), win.phi_q(), prefix + h * s.state_size(), y + r * (s.d + 1),
                                  row_scale + r);
    }
  }
}

void favor_bidirectional_forward_finish_windowed(const ExecContext& ctx, const FavorShape& s, const float* q,
                                                 const float* W, const float* total, float* y, float* row_scale) {
  Windows win(ctx, s);
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t w = 0; w < win.count(); ++w) {
      const int64_t r = win.row(h, w);
      win.q_features(q, W, h, w);
      bidirectional_linear_attention_forward_finish(ctx, win.shape(w), win.phi_q(), total + h * s.state_size(),
                                                    y + r * (s.d + 1), row_scale + r);
    }
  }
}

void favor_causal_backward_local_windowed(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                          const float* v, const float* W, const float* o, const float* den,
                                          const float* row_scale, const float* d_o, const float* prefix, float* dq,
                                          float* dk, float* dv, float* block_total_grad, float* dW) {
  Windows win(ctx, s);
  const int64_t ss = s.state_size(), d = s.d, nw = win.count();
  // The forward state at the start of every window of one head.
  const Tensor starts = Tensor::empty({std::max<int64_t>(nw, 1) * ss}, DType::f32, win.tracker(), kTag);
  float* st = starts.data<float>();
  clear_states(ctx, s, s.heads, block_total_grad);
  for (int64_t h = 0; h < s.heads; ++h) {
    if (prefix) {
      copy_bytes(ctx.stream, st, ctx.device, prefix + h * ss, ctx.device, ss * 4);
    } else {
      clear_states(ctx, s, 1, st);
    }
    for (int64_t w = 0; w + 1 < nw; ++w) {
      win.k_features(k, W, h, w);
      bidirectional_linear_attention_local_state(ctx, win.shape(w), win.phi_k(), win.c_k(), v + win.row(h, w) * d,
                                                 win.window_state());
      combine(ctx, s, st + w * ss, win.window_state(), st + (w + 1) * ss);
    }
    float* R = block_total_grad + h * ss;
    for (int64_t w = nw - 1; w >= 0; --w) {
      const int64_t r = win.row(h, w);
      win.q_features(q, W, h, w);
      win.k_features(k, W, h, w);
      causal_linear_attention_backward_local(ctx, win.shape(w), win.phi_q(), win.phi_k(), win.c_k(), v + r * d,
                                             o + r * d, den + r, row_scale + r, d_o + r * d, win.d_phi_q(),
                                             win.d_phi_k(), dv + r * d, win.window_state(),
                                             (w > 0 || prefix) ? st + w * ss : nullptr, w + 1 < nw ? R : nullptr);
      win.feature_backward(q, W, win.phi_q(), win.d_phi_q(), dq, h, w, dW);
      win.feature_backward(k, W, win.phi_k(), win.d_phi_k(), dk, h, w, dW);
      combine(ctx, s, win.window_state(), R, R);
    }
  }
}

void favor_backward_add_suffix_windowed(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                                        const float* W, const float* suffix, float* dk, float* dv, float* dW) {
  Windows win(ctx, s);
  const int64_t d = s.d;
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t w = 0; w < win.count(); ++w) {
      const int64_t r = win.row(h, w), rows = win.rows(w);
      win.k_features(k, W, h, w);
      fill_zero(ctx.stream, win.d_phi_k(), ctx.device, rows * s.m * 4);
      linear_attention_backward_add_suffix(ctx, win.shape(w), win.phi_k(), win.c_k(), v + r * d,
                                           suffix + h * s.state_size(), win.d_phi_k(), dv + r * d);
      feature_map_backward(ctx, s.features, rows, d, s.m, k + r * d, s.head_w(W, h), win.phi_k(), win.d_phi_k(),
                           win.dx(), win.head_dw(dW, h));
      residual_add(ctx, dk + r * d, win.dx(), dk + r * d, rows * d);
    }
  }
}

void favor_bidirectional_backward_local_windowed(const ExecContext& ctx, const FavorShape& s, const float* q,
                                                 const float* W, const float* o, const float* den,
                                                 const float* row_scale, const float* d_o, const float* total,
                                                 float* dq, float* local_grad_total, float* dW) {
  Windows win(ctx, s);
  const int64_t ss = s.state_size(), d = s.d;
  clear_states(ctx, s, s.heads, local_grad_total);
  for (int64_t h = 0; h < s.heads; ++h) {
    float* R = local_grad_total + h * ss;
    for (int64_t w = 0; w < win.count(); ++w) {
      const int64_t r = win.row(h, w);
      win.q_features(q, W, h, w);
      bidirectional_linear_attention_backward_local(ctx, win.shape(w), win.phi_q(), o + r * d, den + r, row_scale + r,
                                                    d_o + r * d, total + h * ss, win.d_phi_q(), win.window_state());
      win.feature_backward(q, W, win.phi_q(), win.d_phi_q(), dq, h, w, dW);
      combine(ctx, s, R, win.window_state(), R);
    }
  }
}

void favor_bidirectional_backward_finish_windowed(const ExecContext& ctx, const FavorShape& s, const float* k,
                                                  const float* v, const float* W, const float* grad_total, float* dk,
                                                  float* dv, float* dW) {
  Windows win(ctx, s);
  const int64_t d = s.d;
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t w = 0; w < win.count(); ++w) {
      const int64_t r = win.row(h, w);
      win.k_features(k, W, h, w);
      bidirectional_linear_attention_backward_finish(ctx, win.shape(w), win.phi_k(), win.c_k(), v + r * d,
                                                     grad_total + h * s.state_size(), win.d_phi_k(), dv + r * d);
      win.feature_backward(k, W, win.phi_k(), win.d_phi_k(), dk, h, w, dW);
    }
  }
}

}  // namespace pf
