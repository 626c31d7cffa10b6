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
  // is no recurrent form) or exact softmax attention.
  RecurrentPerformer(PerformerModel& model, const ExecContext& ctx, int64_t batch, int64_t step = 0);

  // Empties every state; the next token is at absolute position `position`.
  void reset(int64_t position = 0);
  // Keeps the states; the next token is at position `position` (a new member
  // of a family context: positions restart per member, the state runs on).
  void set_position(int64_t position);
  // The carried states of stream b, every layer's [H, 1 + m (D+1)] (host
  // copies), and back into any stream: a context's state, made once and
  // started from by every query (launch/infer/context_scoring.h).
  std::vector<std::vector<float>> save_stream(int64_t b) const;
  void load_stream(int64_t b, const std::vector<std::vector<float>>& state);
  // Feeds tokens [batch] (host) at position(), advances the position and,
  // when `logits` is not null, writes the logits [batch, vocab] (host) that
  // predict the next token.
  void step(const int32_t* tokens, float* logits);

  int64_t position() const { return position_; }
  int64_t batch() const { return B_; }
  // Bytes of the carried states (all layers): the only per-sequence memory.
  int64_t state_bytes() const;

 private:
  void attention(int64_t layer, const float* heads_qkv, float* o);

  const ModelConfig& cfg_;
  ExecContext ctx_;
  const ParamLayout& layout_;
  const float* params_;
  std::vector<const float*> projections_;
  int64_t B_;
  int64_t position_ = 0;
  std::vector<Tensor> states_;  // per layer [B*H, 1 + m (D+1)]
  // Scratch, one token per stream.
  Tensor ids_, x_, ln_, mean_, rstd_, qkv_, heads_, phi_q_, phi_k_, c_k_, y_, row_scale_, own_, o_, den_, merged_, mid_,
      h1_, g_, logits_;
};

}  // namespace pf
