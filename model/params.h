// Parameters of the Performer as one flat fp32 buffer (so the optimizer, the
// gradient allreduce and checkpoints each see one contiguous array), with a
// named slice per tensor. Layout, in order:
//   embedding            [V, C]   (also the output head: tied)
//   per layer l:  ln1.gamma [C], ln1.beta [C], qkv.weight [3C, C], qkv.bias [3C],
//                 attn.features [H, m, D] (model.attention = exp only: the trained projections),
//                 attn.gate [H] (model.window with a linear kind only: the per-head gates of the local window),
//                 out.weight [C, C], out.bias [C], ln2.gamma [C], ln2.beta [C],
//                 ffn1.weight [F, C], ffn1.bias [F], ffn2.weight [C, F], ffn2.bias [C]
//   final_ln.gamma [C], final_ln.beta [C]
// The slices of one layer are contiguous, so a layer's gradients can be
// reduced as soon as its backward is done.
//
// Initialisation (keyed by (seed, slice index, element): identical for any
// layout of ranks): weights ~ N(0, init_std^2); the two projections that feed
// the residual stream (out, ffn2) ~ N(0, (init_std / sqrt(2 layers))^2);
// biases 0; layer-norm gains 1; attn.gate 0 (an even mix); attn.features: every head the layer's
// FAVOR+ draw at redraw index 0 (layer_projection), so that at step 0 exp
// with model.exp_key_norm is FAVOR+. Weight decay applies to weights and the
// embedding, not to biases, layer-norm parameters and attn.features (whose
// norms set the kernel's sharpness, as the chi norms of the FAVOR+ draw do).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "runtime/tensor.h"

namespace pf {

struct ParamSlice {
  std::string name;  // "layer3.qkv.weight"
  Shape shape;
  int64_t offset = 0;  // in elements, into the flat buffer
  int64_t numel = 0;
  bool decay = false;
};

// Offsets of one layer's tensors inside the flat buffer.
struct LayerOffsets {
  int64_t ln1_g, ln1_b, qkv_w, qkv_b, out_w, out_b, ln2_g, ln2_b, ffn1_w, ffn1_b, ffn2_w, ffn2_b;
  int64_t features_w = -1;  // attn.features (exp only), -1 otherwise
  int64_t gate = -1;        // attn.gate (model.window with a linear kind), -1 otherwise
  int64_t begin, end;       // the layer's contiguous range
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& cfg);
  const std::vector<ParamSlice>& slices() const { return slices_; }
  int64_t total() const { return total_; }
  int64_t embedding() const { return embedding_; }
  const LayerOffsets& layer(int64_t l) const { return layers_.at(static_cast<size_t>(l)); }
  int64_t final_ln_g() const { return final_g_; }
  int64_t final_ln_b() const { return final_b_; }
  const ParamSlice& find(const std::string& name) const;  // ValueError naming it

 private:
  int64_t add(const std::string& name, Shape shape, bool decay);
  std::vector<ParamSlice> slices_;
  std::vector<LayerOffsets> layers_;
  int64_t total_ = 0, embedding_ = 0, final_g_ = 0, final_b_ = 0;
};

// Fills host memory `params` [layout.total()] with the initial values.
void init_parameters(const ModelConfig& cfg, const ParamLayout& layout, float* params);

// `values`, laid out by `from` (the same model with another attention kind,
// such as a checkpoint of softmax or FAVOR+ loaded into exp, or of softmax
// with a window loaded into a linear kind with one), in the layout `to` of
// `cfg`: every tensor of `to` that `from` holds is copied by name; the
// others (exp's attn.features, a window's attn.gate) keep their initial
// values under `cfg` (FAVOR+'s draw, an even mix) and are named in `fresh`.
// Tensors of `from` that `to` lacks are left out. ValueError on a tensor of
// both with other sizes.
std::vector<float> carry_parameters(const ModelConfig& cfg, const ParamLayout& to, const ParamLayout& from,
                                    const std::vector<float>& values, std::vector<std::string>* fresh = nullptr);
// The names carry_parameters gives in `fresh` for a log line:
// "attn.features of layer(s) 0, 1".
std::string fresh_parameters_text(const std::vector<std::string>& fresh);

}  // namespace pf
