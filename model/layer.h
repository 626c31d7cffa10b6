// One pre-LayerNorm Performer block with explicit forward and backward:
//   x [T = B*n, C] -> a = x + Wo(attn(LN1(x)) ) -> y = a + W2 gelu(W1 LN2(a))
// Shapes: qkv [T, 3C] -> heads [3, B, H, n, D]; attention output [B, H, n, D]
// -> merged [T, C]; FFN hidden [T, F].
// The activations the backward needs are kept in LayerActs; with activation
// checkpointing the model keeps only the layer input and calls forward again
// inside the backward (recompute), trading compute for memory.
// Mixed precision (model.dtype bf16/f16): the four GEMMs take the 16-bit copy
// of the weights and 16-bit activations; ln1, merged, ln2, h1 and g are kept
// in 16 bits (the GEMM inputs, and the GELU input), everything else in fp32.
#pragma once

#include <cstdint>

#include "model/attention.h"
#include "model/config.h"
#include "model/params.h"
#include "runtime/exec.h"
#include "runtime/tensor.h"

namespace pf {

struct LayerActs {
  Tensor ln1, mean1, rstd1;  // [T, C] (model dtype), [T], [T]
  Tensor qkv_heads;          // [3, B, H, n, D]
  AttentionSaved att;        // attention output [B*H, n, D] and statistics
  Tensor merged;             // [T, C] (model dtype)
  Tensor mid;                // [T, C]   x + attention branch
  Tensor ln2, mean2, rstd2;  // [T, C] (model dtype), [T], [T]
  Tensor h1, g;              // [T, F]   pre- and post-GELU (model dtype)
  void clear() { *this = LayerActs{}; }
};

struct LayerTiming {
  AttentionTiming attention_fwd, attention_bwd;
  double other = 0;  // everything else in the layer
};

class TransformerLayer {
 public:
  TransformerLayer(const ModelConfig& cfg, const LayerOffsets& offsets, const SequenceAttention& attention)
      : cfg_(cfg), off_(offsets), attention_(attention) {}

  // out [T, C] = block(x). `params` is the model's flat parameter buffer (and
  // `params_lp` its copy in the model dtype, nullptr for f32); W the layer's
  // random projection [m, D] (unused for softmax); `packed` the sequences of
  // a packed batch (model/packed_layout.h), nullptr or empty otherwise.
  void forward(const ExecContext& ctx, int64_t B, int64_t n, const float* params, const void* params_lp,
               const float* W, const float* x, float* out, LayerActs& acts, LayerTiming* timing,
               const PackedLayout* packed = nullptr) const;
  // Given d_out, writes d_x (may alias d_out) and accumulates parameter
  // gradients into `grads` (same layout as params). Consumes `acts`: the FFN
  // activations (g, h1, ln2) are released as soon as their last use is
  // queued, so the attention backward runs without them (the planner counts
  // this).
  void backward(const ExecContext& ctx, int64_t B, int64_t n, const float* params, const void* params_lp,
                const float* W, const float* x, LayerActs& acts, const float* d_out, float* d_x, float* grads,
                LayerTiming* timing, const PackedLayout* packed = nullptr) const;

 private:
  const ModelConfig& cfg_;
  LayerOffsets off_;
  const SequenceAttention& attention_;
};

}  // namespace pf
