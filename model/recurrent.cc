#include "model/recurrent.h"

#include <algorithm>
#include <cmath>

#include "kernels/embedding/embedding.h"
#include "kernels/feature_map/feature_map.h"
#include "kernels/gated_mix/gated_mix.h"
#include "kernels/gelu/gelu.h"
#include "kernels/heads/heads.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "kernels/linear_attention/linear_attention.h"
#include "kernels/positional/positional.h"
#include "kernels/reduce/reduce.h"
#include "kernels/residual/residual.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "model/attention.h"
#include "model/attention_comm.h"
#include "runtime/check.h"

namespace pf {
namespace {

Tensor scratch(const ExecContext& ctx, const Shape& shape, const char* tag, DType dtype = DType::f32) {
  return Tensor::empty(shape, dtype, *ctx.tracker, tag);
}

// The feature map of the parallel form: the one model/attention.cc uses.
FeatureMapParams recurrent_feature_params(const ModelConfig& cfg) { return attention_favor_shape(cfg, 1, 1).features; }

}  // namespace

RecurrentPerformer::RecurrentPerformer(PerformerModel& model, const ExecContext& ctx, int64_t batch, int64_t step)
    : cfg_(model.config()),
      ctx_(ctx),
      layout_(model.layout()),
      params_(model.params().data<float>()),
      B_(batch),
      linear_(model.config().attention != AttentionKind::Softmax),
      w_(model.config().window) {
  PF_REQUIRE(ConfigError, cfg_.causal(),
             "a masked-LM model (model.objective = \"" << objective_name(cfg_.objective)
                                                       << "\") attends in both directions and has no recurrent "
                                                          "form: generation needs a causal model (objective clm)");
  PF_REQUIRE(ConfigError, linear_ || w_ > 0,
             "model.attention = softmax has no fixed-size recurrent state: run the parameters with random features "
             "(model.attention = favor, relu or elu), or train with a local window (model.window)");
  PF_REQUIRE(ValueError, batch >= 1, "recurrent batch must be >= 1, got " << batch);
  PF_REQUIRE(ValueError, ctx_.tracker != nullptr, "the recurrent model needs a memory tracker in its context");
  const int64_t C = cfg_.width, F = cfg_.ffn, V = cfg_.vocab, H = cfg_.heads, D = cfg_.head_dim(), m = cfg_.features,
                BH = B_ * H;
  const LinAttnShape s{BH, 1, m, D, 1};
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    if (linear_) {
      projections_.push_back(model.projection(l, step));
      states_.push_back(scratch(ctx_, {BH, s.state_size()}, "recurrent.state"));
    }
  }
  if (w_ > 0) {
    win_out_ = scratch(ctx_, {BH, D}, "recurrent.window_out");
    mixed_ = scratch(ctx_, {BH, D}, "recurrent.linear_out");
    keys_.resize(static_cast<size_t>(cfg_.layers));
    values_.resize(static_cast<size_t>(cfg_.layers));
    reserve_window_rows(1);
  }
  ids_ = scratch(ctx_, {B_}, "recurrent.ids", DType::i32);
  x_ = scratch(ctx_, {B_, C}, "recurrent.x");
  ln_ = scratch(ctx_, {B_, C}, "recurrent.ln");
  mean_ = scratch(ctx_, {B_}, "recurrent.ln_stats");
  rstd_ = scratch(ctx_, {B_}, "recurrent.ln_stats");
  qkv_ = scratch(ctx_, {B_, 3 * C}, "recurrent.qkv");
  heads_ = scratch(ctx_, {3, BH, D}, "recurrent.qkv_heads");
  phi_q_ = scratch(ctx_, {BH, m}, "recurrent.phi_q");
  phi_k_ = scratch(ctx_, {BH, m}, "recurrent.phi_k");
  c_k_ = scratch(ctx_, {BH}, "recurrent.c_k");
  y_ = scratch(ctx_, {BH, D + 1}, "recurrent.y");
  row_scale_ = scratch(ctx_, {BH}, "recurrent.row_scale");
  own_ = scratch(ctx_, {BH, s.state_size()}, "recurrent.own_state");
  o_ = scratch(ctx_, {BH, D}, "recurrent.o");
  den_ = scratch(ctx_, {BH}, "recurrent.den");
  merged_ = scratch(ctx_, {B_, C}, "recurrent.merged");
  mid_ = scratch(ctx_, {B_, C}, "recurrent.mid");
  h1_ = scratch(ctx_, {B_, F}, "recurrent.ffn_hidden");
  g_ = scratch(ctx_, {B_, F}, "recurrent.ffn_hidden");
  logits_ = scratch(ctx_, {B_, V}, "recurrent.logits");
  reset(0);
}

int64_t RecurrentPerformer::state_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& t : states_) bytes += t.nbytes();
  for (const Tensor& t : keys_) bytes += t.nbytes();
  for (const Tensor& t : values_) bytes += t.nbytes();
  return bytes;
}

int64_t RecurrentPerformer::linear_floats() const {
  return linear_ ? cfg_.heads * (1 + cfg_.features * (cfg_.head_dim() + 1)) : 0;
}

int64_t RecurrentPerformer::window_floats(int64_t valid) const {
  return w_ > 0 ? 1 + 2 * cfg_.heads * valid * cfg_.head_dim() : 0;
}

// Grows every layer's window to at least `need` rows per stream and head
// (at most w): twice the rows held, so a stream of n tokens costs log2(n)
// growths. Each stream keeps its newest rows last; rows above them are
// never read (a stream reads its valid + 1 newest rows).
void RecurrentPerformer::reserve_window_rows(int64_t need) {
  if (need <= rows_) return;
  const int64_t D = cfg_.head_dim(), BH = B_ * cfg_.heads;
  const int64_t rows = std::min(w_, std::max(need, 2 * rows_));
  for (std::vector<Tensor>* side : {&keys_, &values_}) {
    for (Tensor& old : *side) {
      Tensor grown = scratch(ctx_, {BH, rows, D}, side == &keys_ ? "recurrent.window_keys" : "recurrent.window_values");
      fill_zero(ctx_.stream, grown.raw(), ctx_.device, grown.nbytes());
      if (rows_ > 0)
        copy_rows(ctx_.stream, grown.data<float>() + (rows - rows_) * D, rows * D * 4, old.data<float>(), rows_ * D * 4,
                  rows_ * D * 4, BH, ctx_.device);
      synchronize(ctx_.stream);  // the old rows are read before they are freed
      old = std::move(grown);
    }
  }
  shift_ = scratch(ctx_, {BH, std::max<int64_t>(rows - 1, 1), D}, "recurrent.window_shift");
  rows_ = rows;
}

void RecurrentPerformer::reset(int64_t position) {
  PF_REQUIRE(ValueError, position >= 0, "recurrent position must be >= 0, got " << position);
  const LinAttnShape s{B_ * cfg_.heads, 1, cfg_.features, cfg_.head_dim(), 1};
  for (Tensor& t : states_) linear_attention_state_clear(ctx_, s, t.data<float>());
  for (Tensor& t : keys_) fill_zero(ctx_.stream, t.raw(), ctx_.device, t.nbytes());
  for (Tensor& t : values_) fill_zero(ctx_.stream, t.raw(), ctx_.device, t.nbytes());
  valid_.assign(static_cast<size_t>(B_), 0);
  synchronize(ctx_.stream);
  position_ = position;
}

void RecurrentPerformer::set_position(int64_t position) {
  PF_REQUIRE(ValueError, position >= 0, "recurrent position must be >= 0, got " << position);
  position_ = position;
}

std::vector<std::vector<float>> RecurrentPerformer::save_stream(int64_t b) const {
  PF_REQUIRE(ValueError, b >= 0 && b < B_, "recurrent stream " << b << " outside [0, " << B_ << ")");
  const int64_t lin = linear_floats(), H = cfg_.heads, D = cfg_.head_dim();
  const int64_t valid = w_ > 0 ? valid_[static_cast<size_t>(b)] : 0;
  std::vector<std::vector<float>> out;
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    std::vector<float> host(static_cast<size_t>(lin + window_floats(valid)));
    const size_t L = static_cast<size_t>(l);
    if (linear_)
      copy_bytes(ctx_.stream, host.data(), Device::cpu(), states_[L].data<float>() + b * lin, ctx_.device, lin * 4);
    if (w_ > 0) {
      PF_REQUIRE(ValueError, valid <= (int64_t{1} << 24),
                 "recurrent stream " << b << " holds " << valid << " window rows, more than a saved state counts "
                                     << "exactly (2^24)");
      host[static_cast<size_t>(lin)] = static_cast<float>(valid);
      // Head h's valid rows end one row above its last (the next token's row).
      for (int64_t h = 0; h < H; ++h) {
        const int64_t first = ((b * H + h) * rows_ + rows_ - 1 - valid) * D;
        copy_bytes(ctx_.stream, host.data() + lin + 1 + h * valid * D, Device::cpu(), keys_[L].data<float>() + first,
                   ctx_.device, valid * D * 4);
        copy_bytes(ctx_.stream, host.data() + lin + 1 + (H + h) * valid * D, Device::cpu(),
                   values_[L].data<float>() + first, ctx_.device, valid * D * 4);
      }
    }
    out.push_back(std::move(host));
  }
  synchronize(ctx_.stream);
  return out;
}

void RecurrentPerformer::load_stream(int64_t b, const std::vector<std::vector<float>>& state) {
  PF_REQUIRE(ValueError, b >= 0 && b < B_, "recurrent stream " << b << " outside [0, " << B_ << ")");
  const int64_t lin = linear_floats(), H = cfg_.heads, D = cfg_.head_dim();
  PF_REQUIRE(ValueError, static_cast<int64_t>(state.size()) == cfg_.layers,
             "recurrent state of " << state.size() << " layers for a model of " << cfg_.layers);
  // Every layer holds the stream's count of valid window rows (one count:
  // the rows are the same positions), then those rows.
  int64_t valid = 0;
  for (size_t l = 0; l < state.size(); ++l) {
    if (w_ > 0) {
      PF_REQUIRE(ValueError, static_cast<int64_t>(state[l].size()) > lin,
                 "recurrent state of layer " << l << " holds " << state[l].size() << " values, no window row count");
      const float count = state[l][static_cast<size_t>(lin)];
      PF_REQUIRE(ValueError, count >= 0 && count <= static_cast<float>(w_ - 1) && count == std::floor(count),
                 "recurrent state of layer " << l << " counts " << count << " window rows; a window of " << w_
                                             << " keeps 0 to " << w_ - 1);
      PF_REQUIRE(ValueError, l == 0 || static_cast<int64_t>(count) == valid,
                 "recurrent state of layer " << l << " counts " << count << " window rows, layer 0 " << valid);
      valid = static_cast<int64_t>(count);
    }
    PF_REQUIRE(ValueError, static_cast<int64_t>(state[l].size()) == lin + window_floats(valid),
               "recurrent state of layer " << l << " holds " << state[l].size() << " values, not "
                                           << lin + window_floats(valid));
  }
  if (w_ > 0) reserve_window_rows(valid + 1);
  for (size_t l = 0; l < state.size(); ++l) {
    if (linear_)
      copy_bytes(ctx_.stream, states_[l].data<float>() + b * lin, ctx_.device, state[l].data(), Device::cpu(), lin * 4);
    for (int64_t h = 0; w_ > 0 && h < H; ++h) {
      const int64_t first = ((b * H + h) * rows_ + rows_ - 1 - valid) * D;
      copy_bytes(ctx_.stream, keys_[l].data<float>() + first, ctx_.device, state[l].data() + lin + 1 + h * valid * D,
                 Device::cpu(), valid * D * 4);
      copy_bytes(ctx_.stream, values_[l].data<float>() + first, ctx_.device,
                 state[l].data() + lin + 1 + (H + h) * valid * D, Device::cpu(), valid * D * 4);
    }
  }
  if (w_ > 0) valid_[static_cast<size_t>(b)] = valid;
  synchronize(ctx_.stream);
}

// o [B*H, D] for this position: the linear kind's, the window's, or their
// gated mix; the layer's state and window take in this position's key.
void RecurrentPerformer::attention(int64_t layer, const float* heads_qkv, float* o) {
  const int64_t H = cfg_.heads, D = cfg_.head_dim(), m = cfg_.features, BH = B_ * H;
  if (w_ > 0) {
    if (!linear_) return window_attention(layer, heads_qkv, o);
    window_attention(layer, heads_qkv, win_out_.data<float>());
  }
  float* lin = w_ > 0 ? mixed_.data<float>() : o;
  const FeatureMapParams fp = recurrent_feature_params(cfg_);
  const float* W = projections_[static_cast<size_t>(layer)];
  const float* q = heads_qkv;
  const float* k = heads_qkv + BH * D;
  const float* v = heads_qkv + 2 * BH * D;
  // Features of the BH rows [B*H, D]; exp: row b H + h with head h's own projection.
  const FavorShape fs = attention_favor_shape(cfg_, BH, 1);
  const int64_t groups = fs.w_heads == 1 ? 1 : BH, rows = BH / groups;
  for (int64_t r = 0; r < BH; r += rows) {
    feature_map_forward(ctx_, fp, rows, D, m, q + r * D, fs.head_w(W, r), phi_q_.data<float>() + r * m, nullptr);
    feature_map_forward(ctx_, fp, rows, D, m, k + r * D, fs.head_w(W, r), phi_k_.data<float>() + r * m,
                        c_k_.data<float>() + r);
  }
  // A block of one position per head, started from the carried state: y
  // holds the carried prefix and this position's own term, own_ the block
  // total of this position alone.
  const LinAttnShape s{BH, 1, m, D, 1};
  float* state = states_[static_cast<size_t>(layer)].data<float>();
  causal_linear_attention_forward_local(ctx_, s, phi_q_.data<float>(), phi_k_.data<float>(), c_k_.data<float>(), v,
                                        y_.data<float>(), row_scale_.data<float>(), own_.data<float>(), state);
  linear_attention_state_combine(ctx_, BH, m, D, state, own_.data<float>(), state);
  linear_attention_normalize(ctx_, s, y_.data<float>(), lin, den_.data<float>());
  if (w_ > 0)
    gated_mix_forward(ctx_, GatedMixShape{B_, H, 1, D}, params_ + layout_.layer(layer).gate, lin,
                      win_out_.data<float>(), o);
}

void RecurrentPerformer::window_attention(int64_t layer, const float* heads_qkv, float* o) {
  // w: the rows held per stream and head (step() grew them to every
  // stream's valid + 1), not model.window.
  const int64_t H = cfg_.heads, D = cfg_.head_dim(), BH = B_ * H, w = rows_;
  const float* q = heads_qkv;
  const float* k = heads_qkv + BH * D;
  const float* v = heads_qkv + 2 * BH * D;
  float* K = keys_[static_cast<size_t>(layer)].data<float>();
  float* Vs = values_[static_cast<size_t>(layer)].data<float>();
  const Stream& st = ctx_.stream;
  const Device dev = ctx_.device;
  // This position's key and value in the last row.
  copy_rows(st, K + (w - 1) * D, w * D * 4, k, D * 4, D * 4, BH, dev);
  copy_rows(st, Vs + (w - 1) * D, w * D * 4, v, D * 4, D * 4, BH, dev);
  // Streams with as many valid rows run as one call: each head's query
  // against its L = valid + 1 newest keys, the last L rows of its window.
  for (int64_t b0 = 0; b0 < B_;) {
    int64_t b1 = b0 + 1;
    while (b1 < B_ && valid_[static_cast<size_t>(b1)] == valid_[static_cast<size_t>(b0)]) ++b1;
    const int64_t L = valid_[static_cast<size_t>(b0)] + 1, heads = (b1 - b0) * H, h0 = b0 * H;
    const int64_t first = (h0 * w + w - L) * D;
    softmax_attention_decode(ctx_, attention_softmax_params(cfg_, heads, L), w * D, q + h0 * D, K + first, Vs + first,
                             o + h0 * D);
    b0 = b1;
  }
  // One row older: rows 1..w-1 move to 0..w-2.
  if (w > 1) {
    for (float* X : {K, Vs}) {
      copy_rows(st, shift_.raw(), (w - 1) * D * 4, X + D, w * D * 4, (w - 1) * D * 4, BH, dev);
      copy_rows(st, X, w * D * 4, shift_.raw(), (w - 1) * D * 4, (w - 1) * D * 4, BH, dev);
    }
  }
}

void RecurrentPerformer::step(const int32_t* tokens, float* logits) {
  const int64_t C = cfg_.width, F = cfg_.ffn, V = cfg_.vocab, H = cfg_.heads, D = cfg_.head_dim();
  const float* p = params_;
  for (int64_t b = 0; b < B_; ++b)
    PF_REQUIRE(ValueError, tokens[b] >= 0 && tokens[b] < V,
               "token " << tokens[b] << " of stream " << b << " at position " << position_ << " is outside the " << V
                        << "-token vocabulary");
  // This token reads valid + 1 rows, and the shift after it keeps up to
  // valid + 1 rows above the next token's row: valid + 2 (at most w).
  if (w_ > 0) reserve_window_rows(std::min(w_, *std::max_element(valid_.begin(), valid_.end()) + 2));
  copy_bytes(ctx_.stream, ids_.raw(), ctx_.device, tokens, Device::cpu(), B_ * 4);
  float* x = x_.data<float>();
  embedding_forward(ctx_, ids_.data<int32_t>(), p + layout_.embedding(), x, B_, V, C);
  scale_values(ctx_, x, B_ * C, static_cast<float>(std::sqrt(static_cast<double>(C))));
  if (cfg_.positional == PositionalEncoding::Sinusoidal) sinusoidal_add(ctx_, x, B_, 1, C, position_);

  for (int64_t l = 0; l < cfg_.layers; ++l) {
    const LayerOffsets& off = layout_.layer(l);
    layernorm_forward(ctx_, x, p + off.ln1_g, p + off.ln1_b, ln_.data<float>(), mean_.data<float>(),
                      rstd_.data<float>(), B_, C);
    linear_forward(ctx_, ln_.data<float>(), p + off.qkv_w, p + off.qkv_b, qkv_.data<float>(), B_, C, 3 * C);
    heads_split(ctx_, HeadsShape{3, B_, 1, H, D}, qkv_.data<float>(), heads_.data<float>());
    attention(l, heads_.data<float>(), o_.data<float>());
    heads_merge(ctx_, HeadsShape{1, B_, 1, H, D}, o_.data<float>(), merged_.data<float>());
    float* mid = mid_.data<float>();
    linear_forward(ctx_, merged_.data<float>(), p + off.out_w, p + off.out_b, mid, B_, C, C);
    residual_add(ctx_, mid, x, mid, B_ * C);
    layernorm_forward(ctx_, mid, p + off.ln2_g, p + off.ln2_b, ln_.data<float>(), mean_.data<float>(),
                      rstd_.data<float>(), B_, C);
    linear_forward(ctx_, ln_.data<float>(), p + off.ffn1_w, p + off.ffn1_b, h1_.data<float>(), B_, C, F);
    gelu_forward(ctx_, h1_.data<float>(), g_.data<float>(), B_ * F);
    linear_forward(ctx_, g_.data<float>(), p + off.ffn2_w, p + off.ffn2_b, x, B_, F, C);
    residual_add(ctx_, x, mid, x, B_ * C);
  }
  ++position_;
  if (w_ > 0)
    for (int64_t& valid : valid_) valid = std::min(valid + 1, w_ - 1);
  if (logits) {
    layernorm_forward(ctx_, x, p + layout_.final_ln_g(), p + layout_.final_ln_b(), ln_.data<float>(),
                      mean_.data<float>(), rstd_.data<float>(), B_, C);
    linear_forward(ctx_, ln_.data<float>(), p + layout_.embedding(), nullptr, logits_.data<float>(), B_, C, V);
    copy_bytes(ctx_.stream, logits, Device::cpu(), logits_.raw(), ctx_.device, B_ * V * 4);
  }
  synchronize(ctx_.stream);  // `tokens` and `logits` belong to the caller
}

}  // namespace pf
