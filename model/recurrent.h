// The causal Performer run as a recurrent network: one token per call, with
// the linear-attention state of every layer and head carried between calls.
// It computes the function of PerformerModel's causal forward (fp32 weights),
// position by position, in O(1) time and memory per token:
//   tokens [B] at absolute position p (B independent streams, same p)
//   x [B, C] = sqrt(C) E[token] + pe(p)                 (the parallel form's embedding)
//   per layer l:
//     qkv [B, 3C] = W_qkv LN1(x) + b  -> q, k, v [B*H, 1, D]
//     phi(q), phi(k), c_k  [B*H, m]   the layer's random projection W_l (exp:
//                                     head h's trained W_l,h), the model's
//                                     feature map (FAVOR+, ReLU, elu + 1, exp)
//     y [B*H, D+1]  = phi(q)^T (state_l (+) exp(c_k) phi(k) [v 1]^T)
//     state_l       <- state_l (+) exp(c_k) phi(k) [v 1]^T
//     o = y[:D] / y[D];  x <- x + W_o merge(o) + b;  x <- x + W_2 gelu(W_1 LN2(x) + b_1) + b_2
//   logits [B, V] = LN_f(x) E^T
// state_l [B*H][1 + m (D+1)] is the packed (log-scale a, S [m, D+1]) of
// kernels/linear_attention, meaning exp(a) S, combined with the same
// log-scale operator as training (linear_attention_state_combine), so no
// exponent is positive at any position. The per-token attention is
// causal_linear_attention_forward_local on a block of one position whose
// initial state is the carried state.
// Memory: the states (layers * B * H * (1 + m (D+1)) floats) and fixed
// scratch of O(B (3C + F + V + H m)) floats, allocated once: nothing grows
// with the position.
// Precision: fp32 weights and activations whatever model.dtype says (the
// parallel form with bf16/f16 rounds GEMM operands to 16 bits).
//
// A local window (model.window = w > 0) adds, per layer, the keys and values
// of the last w - 1 positions of every stream ([B*H, R, D] each, the current
// position in the last row, shifted by one row per token) and how many are
// valid (per stream: a stream loaded with another context's state keeps its
// own). R, the rows held, starts at 1 and doubles when a stream needs more,
// up to w: R <= min(w, 2 (t + 1)) for t the most valid rows any stream has
// held, so the memory follows the tokens run, never the window alone (a
// checkpoint's window may be far longer than any protein). The window's output of this position is the exact softmax of its
// query over those keys and its own (softmax_attention_decode), mixed with
// the linear output by the layer's gate as in the parallel form; with
// model.attention = softmax it is the whole attention and no linear state
// is kept. It runs across family members like the linear state
// (set_position keeps it). Memory: 2 R D floats per layer, stream and head
// more, fixed once R = w. Cost per token and head O(R D), plus the shift of
// the window by one row.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "runtime/exec.h"
#include "runtime/tensor.h"

namespace pf {

class RecurrentPerformer {
 public:
  // The parameters and random projections (those of `step`, as in
  // PerformerModel::projection) are `model`'s, which must outlive this.
  // ConfigError for a masked-LM model (its attention is bidirectional: there
  // is no recurrent form) or exact softmax attention without a window.
  RecurrentPerformer(PerformerModel& model, const ExecContext& ctx, int64_t batch, int64_t step = 0);

  // Empties every state; the next token is at absolute position `position`.
  void reset(int64_t position = 0);
  // Keeps the states; the next token is at position `position` (a new member
  // of a family context: positions restart per member, the state runs on).
  void set_position(int64_t position);
  // The carried states of stream b, every layer's [H, 1 + m (D+1)] (host
  // copies; with a window, then the count of valid window rows and those
  // rows' keys and values [2, H, valid, D], oldest first), and back into any
  // stream: a
  // context's state, made once and started from by every query
  // (launch/infer/context_scoring.h).
  std::vector<std::vector<float>> save_stream(int64_t b) const;
  void load_stream(int64_t b, const std::vector<std::vector<float>>& state);
  // Feeds tokens [batch] (host) at position(), advances the position and,
  // when `logits` is not null, writes the logits [batch, vocab] (host) that
  // predict the next token.
  void step(const int32_t* tokens, float* logits);

  int64_t position() const { return position_; }
  int64_t batch() const { return B_; }
  // Bytes of the carried states (all layers, with the windows' keys and
  // values): the only per-sequence memory.
  int64_t state_bytes() const;

 private:
  void attention(int64_t layer, const float* heads_qkv, float* o);
  // The window's output [B*H, D] of this position; the window takes in its key and value.
  void window_attention(int64_t layer, const float* heads_qkv, float* o);
  int64_t linear_floats() const;  // per stream and layer: H (1 + m (D+1)), 0 without a linear kind
  int64_t window_floats(int64_t valid) const;  // per stream and layer: 1 + 2 H valid D, 0 without a window
  void reserve_window_rows(int64_t need);

  const ModelConfig& cfg_;
  ExecContext ctx_;
  const ParamLayout& layout_;
  const float* params_;
  std::vector<const float*> projections_;
  int64_t B_;
  int64_t position_ = 0;
  bool linear_;                        // a linear kind (its state is carried)
  int64_t w_;                          // model.window, 0: none
  std::vector<Tensor> states_;         // per layer [B*H, 1 + m (D+1)] (linear kinds)
  int64_t rows_ = 0;                   // window rows held per stream and head, <= w_
  std::vector<Tensor> keys_, values_;  // per layer [B*H, rows_, D] (window): the last rows, the current one last
  std::vector<int64_t> valid_;         // per stream: valid rows before the current one (<= w - 1)
  Tensor win_out_, shift_, mixed_;     // window scratch
  // Scratch, one token per stream.
  Tensor ids_, x_, ln_, mean_, rstd_, qkv_, heads_, phi_q_, phi_k_, c_k_, y_, row_scale_, own_, o_, den_, merged_, mid_,
      h1_, g_, logits_;
};

}  // namespace pf
