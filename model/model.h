// The Performer protein language model on one rank of a sequence group:
//   ids [B, n] -> sqrt(C) * embedding [T, C] (+ sinusoidal encoding of GLOBAL positions,
//   or of the positions inside each sequence of a packed batch)
//   -> layers -> final LayerNorm -> logits [T, V] = h E^T (head tied to the
//   embedding) -> cross-entropy against targets (sums; the caller divides by
//   the global count through `loss_scale`).
// Parameters and gradients are flat fp32 buffers (model/params.h) on the
// model's device; with model.dtype bf16/f16 every forward first rounds the
// parameters into a 16-bit copy for the GEMMs (the fp32 buffer stays the
// master copy the optimizer updates). Random projections are regenerated from (seed, layer, redraw index)
// when the step crosses a redraw boundary, identically on every rank
// (model.feature_draw selects another independent draw, for evaluation).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/attention.h"
#include "model/config.h"
#include "model/layer.h"
#include "model/objective.h"
#include "model/params.h"
#include "runtime/exec.h"
#include "runtime/tensor.h"

namespace pf {

struct ForwardResult {
  double loss_sum = 0;   // over this rank's predicted tokens
  int64_t count = 0;     // predicted tokens on this rank
  int64_t correct = 0;   // top-1 hits
};

struct ModelTiming {
  double attention = 0;    // attention compute (features, chunks, prefix)
  double scan = 0;         // scan / state allreduce time (may overlap compute)
  double scan_exposed = 0; // part of `scan` the compute waited for
  double other = 0;        // embedding, projections, FFN, norms, loss
};

// Called during the backward, from the last parameters to the first: every
// gradient element in [from, layout().total()) is final (and its device work
// finished). The trainer starts the gradient allreduce of that range.
using GradientsReady = std::function<void(int64_t from)>;

// The redraw index of the random features at `step` (0 without redraws).
int64_t projection_redraw_index(const ModelConfig& cfg, int64_t step);
// The random projection [m, D] (row-major) of `layer` at redraw index
// `redraw`: keyed (seed, layer, redraw + feature_draw * 2^32), the same on
// every rank and in every program (the model, the checkpoints that store it).
// For model.attention = elu it is the identity [D, D] (no random features);
// for exp, the draw its trained projections start from (model/params.h).
std::vector<float> layer_projection(const ModelConfig& cfg, int64_t layer, int64_t redraw);

class PerformerModel {
 public:
  // `sp` may be nullptr (the whole sequence on this rank).
  PerformerModel(const ModelConfig& cfg, const ExecContext& ctx, Communicator* sp, AttentionOptions options = {});

  const ModelConfig& config() const { return cfg_; }
  // The device, stream and memory tracker the model runs on.
  const ExecContext& context() const { return ctx_; }
  const ParamLayout& layout() const { return layout_; }
  Tensor& params() { return params_; }
  Tensor& grads() { return grads_; }
  void zero_grads() { grads_.zero_(); }

  // `timing`, when given, is overwritten with this call's breakdown.
  // Forward only (evaluation). When `logits_out` is given it receives the
  // logits [B, n, V] on the host.
  ForwardResult forward(const ModelInput& in, int64_t step, std::vector<float>* logits_out = nullptr,
                        ModelTiming* timing = nullptr);
  // Forward and backward; accumulates dL/dparams into grads() for the loss
  // sum(token losses) * loss_scale. `ready`, when set, hears of each final
  // range of gradients as the backward walks down the layers.
  ForwardResult forward_backward(const ModelInput& in, int64_t step, double loss_scale, ModelTiming* timing = nullptr,
                                 const GradientsReady& ready = {});

  // Forward only, without targets: the hidden states [B, n, C] (host) after
  // `layer` layers: 0 is the scaled embedding plus positions, l in [1, L] the
  // output of layer l, and L + 1 the final LayerNorm of layer L's output (the
  // rows the tied head reads). in.targets is not read.
  void hidden_states(const ModelInput& in, int64_t step, int64_t layer, std::vector<float>* out);

  // The random projection of `layer` used at `step` ([m, D] on the device);
  // exp: the layer's trained projections [H, m, D] in the parameters.
  const float* projection(int64_t layer, int64_t step);
  int64_t redraw_index(int64_t step) const;

 private:
  // forward and forward_backward: the stages below, in this order.
  ForwardResult run(const ModelInput& in, int64_t step, bool backward, double loss_scale,
                    std::vector<float>* logits_out, ModelTiming* timing, const GradientsReady& ready);
  struct RunState;  // what one run carries from stage to stage (model.cc)
  void start_run(RunState& r);
  void forward_layers(RunState& r, bool backward);
  ForwardResult forward_head(RunState& r, std::vector<float>* logits_out);
  void backward_all(RunState& r, double loss_scale, const GradientsReady& ready);
  // x [T, C] = sqrt(C) E[ids] (+ the encoding of positions offset .. offset + n - 1, or of each
  // packed piece's positions inside its sequence); ids on the device.
  void embed(const int32_t* ids, int64_t B, int64_t n, int64_t offset, const PackedLayout& packed, float* x);

  ModelConfig cfg_;
  ExecContext ctx_;
  ParamLayout layout_;
  SequenceAttention attention_;
  std::vector<TransformerLayer> layers_;
  Tensor params_, grads_;
  Tensor params_lp_;  // model.dtype bf16/f16: the 16-bit copy of params_ the GEMMs read
  std::vector<Tensor> projections_;
  int64_t projection_redraw_ = -1;
};

}  // namespace pf
