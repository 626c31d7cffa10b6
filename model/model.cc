#include "model/model.h"

#include <algorithm>
#include <cmath>

#include "kernels/cast/cast.h"
#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/embedding/embedding.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "kernels/positional/positional.h"
#include "kernels/random_features/random_features.h"
#include "kernels/reduce/reduce.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace pf {

PerformerModel::PerformerModel(const ModelConfig& cfg, const ExecContext& ctx, Communicator* sp,
                               AttentionOptions options)
    : cfg_(cfg), ctx_(ctx), layout_(cfg), attention_(cfg_, sp, options) {
  cfg_.validate();
  PF_REQUIRE(ValueError, ctx_.tracker != nullptr, "the model needs a memory tracker in its context");
  // bf16 GEMMs run on tensor cores from sm_80 (A100) on; V100 has f16 ones.
  PF_REQUIRE(ConfigError,
             cfg_.dtype != DType::bf16 || ctx_.device.is_cpu() || compute_capability(ctx_.device) >= 80,
             "model.dtype = \"bf16\" needs a GPU of compute capability 8.0 or newer, but "
                 << ctx_.device.str() << " is " << compute_capability(ctx_.device) / 10 << "."
                 << compute_capability(ctx_.device) % 10 << ": use \"f16\" (with its dynamic loss scale) or \"f32\"");
  for (int64_t l = 0; l < cfg_.layers; ++l) layers_.emplace_back(cfg_, layout_.layer(l), attention_);
  params_ = Tensor::empty({layout_.total()}, DType::f32, *ctx_.tracker, "model.params");
  grads_ = Tensor::zeros({layout_.total()}, DType::f32, *ctx_.tracker, "model.grads");
  if (cfg_.dtype != DType::f32)
    params_lp_ = Tensor::empty({layout_.total()}, cfg_.dtype, *ctx_.tracker, "model.params_lowp");
  std::vector<float> host(static_cast<size_t>(layout_.total()));
  init_parameters(cfg_, layout_, host.data());
  copy_bytes(ctx_.stream, params_.raw(), ctx_.device, host.data(), Device::cpu(), params_.nbytes());
  synchronize(ctx_.stream);  // `host` goes out of scope
}

int64_t projection_redraw_index(const ModelConfig& cfg, int64_t step) {
  return cfg.redraw_interval > 0 ? step / cfg.redraw_interval : 0;
}

std::vector<float> layer_projection(const ModelConfig& cfg, int64_t layer, int64_t redraw) {
  if (cfg.attention == AttentionKind::Elu) {  // elu(x) + 1 of the rows themselves: W = I, nothing drawn
    const int64_t d = cfg.head_dim();
    std::vector<float> eye(static_cast<size_t>(d * d), 0.f);
    for (int64_t j = 0; j < d; ++j) eye[static_cast<size_t>(j * d + j)] = 1.f;
    return eye;
  }
  const ProjectionSpec spec{cfg.features, cfg.head_dim(), cfg.projection, cfg.feature_scaling};
  return random_projection_f32(
      spec, ProjectionKey{cfg.seed, static_cast<uint64_t>(layer),
                          static_cast<uint64_t>(redraw) + (static_cast<uint64_t>(cfg.feature_draw) << 32)});
}

int64_t PerformerModel::redraw_index(int64_t step) const { return projection_redraw_index(cfg_, step); }

const float* PerformerModel::projection(int64_t layer, int64_t step) {
  if (cfg_.attention == AttentionKind::Softmax) return nullptr;
  if (cfg_.attention == AttentionKind::Exp) return params_.data<float>() + layout_.layer(layer).features_w;
  const int64_t redraw = redraw_index(step);
  if (redraw != projection_redraw_) {
    projections_.clear();
    for (int64_t l = 0; l < cfg_.layers; ++l) {
      const std::vector<float> w = layer_projection(cfg_, l, redraw);
      Tensor t = Tensor::empty({cfg_.features, cfg_.head_dim()}, DType::f32, *ctx_.tracker, "model.projection");
      copy_bytes(ctx_.stream, t.raw(), ctx_.device, w.data(), Device::cpu(), t.nbytes());
      synchronize(ctx_.stream);  // `w` goes out of scope
      projections_.push_back(t);
    }
    projection_redraw_ = redraw;
  }
  return projections_.at(static_cast<size_t>(layer)).data<float>();
}

void PerformerModel::embed(const int32_t* ids, int64_t B, int64_t n, int64_t offset, const PackedLayout& packed,
                           float* x) {
  const int64_t T = B * n, C = cfg_.width;
  embedding_forward(ctx_, ids, params_.data<float>() + layout_.embedding(), x, T, cfg_.vocab, C);
  // Token embeddings enter scaled by sqrt(C) so that they are not drowned by
  // the unit-amplitude positional encoding (the tied output head uses the
  // unscaled table).
  scale_values(ctx_, x, T * C, static_cast<float>(std::sqrt(static_cast<double>(C))));
  if (cfg_.positional != PositionalEncoding::Sinusoidal) return;
  if (packed.empty()) {
    sinusoidal_add(ctx_, x, B, n, C, offset);
    return;
  }
  // Each piece from its position inside its own sequence.
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<SequencePiece>& pieces = packed.samples[static_cast<size_t>(b)];
    for (size_t i = 0; i < pieces.size(); ++i)
      sinusoidal_add(ctx_, x + (b * n + pieces[i].begin) * C, 1, packed.piece_length(b, i, n), C,
                     pieces[i].position);
  }
}

void PerformerModel::hidden_states(const ModelInput& in, int64_t step, int64_t layer, std::vector<float>* out) {
  const int64_t B = in.batch, n = in.n, T = B * n, C = cfg_.width, L = cfg_.layers;
  PF_REQUIRE(ValueError, layer >= 0 && layer <= L + 1,
             "hidden-state layer must be in [0, " << L + 1 << "] for a " << L << "-layer model, got " << layer);
  PF_REQUIRE(ValueError, static_cast<int64_t>(in.inputs.size()) == T,
             "model input of " << B << " x " << n << " holds " << in.inputs.size() << " inputs");
  MemoryTracker& tr = *ctx_.tracker;
  const float* p = params_.data<float>();
  const bool lowp = cfg_.dtype != DType::f32;
  if (lowp) cast_narrow(ctx_, cfg_.dtype, p, params_lp_.raw(), layout_.total());
  const void* p_lp = lowp ? params_lp_.raw() : nullptr;
  Tensor ids = Tensor::empty({T}, DType::i32, tr, "model.ids");
  copy_bytes(ctx_.stream, ids.raw(), ctx_.device, in.inputs.data(), Device::cpu(), T * 4);
  Tensor x = Tensor::empty({T, C}, DType::f32, tr, "model.layer_input");
  in.packed.check(B, n);
  embed(ids.data<int32_t>(), B, n, in.offset, in.packed, x.data<float>());
  for (int64_t l = 0; l < std::min(layer, L); ++l) {
    Tensor next = Tensor::empty({T, C}, DType::f32, tr, "model.layer_input");
    LayerActs acts;
    layers_[l].forward(ctx_, B, n, p, p_lp, projection(l, step), x.data<float>(), next.data<float>(), acts, nullptr,
                       &in.packed);
    x = next;
  }
  if (layer == L + 1) {
    Tensor hf = Tensor::empty({T, C}, DType::f32, tr, "model.final_ln");
    Tensor mf = Tensor::empty({T}, DType::f32, tr, "model.ln_stats");
    Tensor rf = Tensor::empty({T}, DType::f32, tr, "model.ln_stats");
    layernorm_forward(ctx_, x.data<float>(), p + layout_.final_ln_g(), p + layout_.final_ln_b(), hf.data<float>(),
                      mf.data<float>(), rf.data<float>(), T, C);
    x = hf;
  }
  out->resize(static_cast<size_t>(T * C));
  copy_bytes(ctx_.stream, out->data(), Device::cpu(), x.raw(), ctx_.device, x.nbytes());
  synchronize(ctx_.stream);
}

ForwardResult PerformerModel::forward(const ModelInput& in, int64_t step, std::vector<float>* logits_out,
                                      ModelTiming* timing) {
  return run(in, step, false, 0.0, logits_out, timing, {});
}

ForwardResult PerformerModel::forward_backward(const ModelInput& in, int64_t step, double loss_scale,
                                               ModelTiming* timing, const GradientsReady& ready) {
  return run(in, step, true, loss_scale, nullptr, timing, ready);
}

// What one run() carries from stage to stage. Each tensor is freed where the
// stages below free it, so the memory of a step is what it was in one piece.
struct PerformerModel::RunState {
  const ModelInput& in;
  int64_t step = 0, B = 0, n = 0, T = 0;
  const float* p = nullptr;            // the fp32 parameters
  const void* p_lp = nullptr;          // their 16-bit copy (model.dtype bf16/f16), or null
  const void* embedding_lp = nullptr;  // the embedding within it, or null
  Tensor ids, targets;                 // [T] on the device
  std::vector<Tensor> xs;              // layer inputs x_0 .. x_L, each [T, C]; with checkpointing,
                                       // the only activations kept across layers
  std::vector<LayerActs> acts;         // per layer
  LayerTiming lt;
  Tensor hf, mf, rf;  // final LayerNorm output [T, C] (16-bit when lowp), its stats [T]
  Tensor logits;      // [T, V], then their gradient
  double t_start = 0;
  ModelTiming mt;
  RunState(const ModelInput& input, int64_t s) : in(input), step(s), B(input.batch), n(input.n), T(B * n) {}
  void add_attention(const AttentionTiming& a) {
    mt.attention += a.compute;
    mt.scan += a.comm;
    mt.scan_exposed += a.comm_wait;
  }
  void finish_timing(ModelTiming* timing) {
    mt.other = seconds_now() - t_start - mt.attention - mt.scan_exposed;
    if (timing) *timing = mt;
  }
};

ForwardResult PerformerModel::run(const ModelInput& in, int64_t step, bool backward, double loss_scale,
                                  std::vector<float>* logits_out, ModelTiming* timing, const GradientsReady& ready) {
  RunState r(in, step);
  r.t_start = seconds_now();
  start_run(r);
  forward_layers(r, backward);
  const ForwardResult result = forward_head(r, logits_out);
  if (!backward) {
    r.finish_timing(timing);
    return result;
  }
  backward_all(r, loss_scale, ready);
  r.finish_timing(timing);
  return result;
}

// Checks the input, rounds the parameters into their 16-bit copy (lowp) and
// puts the ids and targets on the device.
void PerformerModel::start_run(RunState& r) {
  const ModelInput& in = r.in;
  PF_REQUIRE(ValueError,
             static_cast<int64_t>(in.inputs.size()) == r.T && static_cast<int64_t>(in.targets.size()) == r.T,
             "model input of " << r.B << " x " << r.n << " holds " << in.inputs.size() << " inputs and "
                               << in.targets.size() << " targets");
  r.p = params_.data<float>();
  const bool lowp = cfg_.dtype != DType::f32;
  if (lowp) cast_narrow(ctx_, cfg_.dtype, r.p, params_lp_.raw(), layout_.total());
  r.p_lp = lowp ? params_lp_.raw() : nullptr;
  r.embedding_lp = lowp ? static_cast<const char*>(r.p_lp) + layout_.embedding() * dtype_size(cfg_.dtype) : nullptr;
  MemoryTracker& tr = *ctx_.tracker;
  r.ids = Tensor::empty({r.T}, DType::i32, tr, "model.ids");
  r.targets = Tensor::empty({r.T}, DType::i32, tr, "model.targets");
  // `in` outlives the step's work: the forward ends with the stream drained.
  copy_bytes(ctx_.stream, r.ids.raw(), ctx_.device, in.inputs.data(), Device::cpu(), r.T * 4);
  copy_bytes(ctx_.stream, r.targets.raw(), ctx_.device, in.targets.data(), Device::cpu(), r.T * 4);
}

// x_0 = the embedding, then x_1 .. x_L; the layers' activations are kept for
// the backward unless it recomputes them (checkpointing) or there is none.
void PerformerModel::forward_layers(RunState& r, bool backward) {
  const int64_t C = cfg_.width, L = cfg_.layers;
  MemoryTracker& tr = *ctx_.tracker;
  r.xs.push_back(Tensor::empty({r.T, C}, DType::f32, tr, "model.layer_input"));
  r.in.packed.check(r.B, r.n);
  embed(r.ids.data<int32_t>(), r.B, r.n, r.in.offset, r.in.packed, r.xs[0].data<float>());
  r.acts.resize(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    r.xs.push_back(Tensor::empty({r.T, C}, DType::f32, tr, "model.layer_input"));
    layers_[l].forward(ctx_, r.B, r.n, r.p, r.p_lp, projection(l, r.step), r.xs[l].data<float>(),
                       r.xs[l + 1].data<float>(), r.acts[l], &r.lt, &r.in.packed);
    r.add_attention(r.lt.attention_fwd);
    if (cfg_.checkpoint_activations || !backward) r.acts[l].clear();
    if (!backward) r.xs[l] = Tensor();  // without a backward only the top layer's output is read again
  }
}

// Head: final LayerNorm, tied projection to the vocabulary, loss sums.
ForwardResult PerformerModel::forward_head(RunState& r, std::vector<float>* logits_out) {
  const int64_t T = r.T, C = cfg_.width, V = cfg_.vocab;
  const float* p = r.p;
  MemoryTracker& tr = *ctx_.tracker;
  r.hf = Tensor::empty({T, C}, DType::f32, tr, "model.final_ln");
  r.mf = Tensor::empty({T}, DType::f32, tr, "model.ln_stats");
  r.rf = Tensor::empty({T}, DType::f32, tr, "model.ln_stats");
  layernorm_forward(ctx_, r.xs[cfg_.layers].data<float>(), p + layout_.final_ln_g(), p + layout_.final_ln_b(),
                    r.hf.data<float>(), r.mf.data<float>(), r.rf.data<float>(), T, C);
  if (r.p_lp) {
    // The head GEMM reads the 16-bit copy of the final LayerNorm output.
    Tensor h16 = Tensor::empty({T, C}, cfg_.dtype, tr, "model.final_ln");
    cast_narrow(ctx_, cfg_.dtype, r.hf.data<float>(), h16.raw(), T * C);
    r.hf = h16;
  }
  r.logits = Tensor::empty({T, V}, DType::f32, tr, "model.logits");
  if (r.p_lp)
    linear_forward_lowp(ctx_, cfg_.dtype, r.hf.raw(), r.embedding_lp, nullptr, r.logits.data<float>(), T, C, V);
  else
    linear_forward(ctx_, r.hf.data<float>(), p + layout_.embedding(), nullptr, r.logits.data<float>(), T, C, V);
  if (logits_out) {
    logits_out->resize(static_cast<size_t>(T * V));
    copy_bytes(ctx_.stream, logits_out->data(), Device::cpu(), r.logits.raw(), ctx_.device, r.logits.nbytes());
    synchronize(ctx_.stream);
  }
  Tensor token_loss = Tensor::empty({T}, DType::f32, tr, "model.token_loss");
  const CrossEntropySums ce =
      cross_entropy_forward(ctx_, r.logits.data<float>(), r.targets.data<int32_t>(), token_loss.data<float>(), T, V);
  return ForwardResult{ce.loss_sum, ce.count, ce.correct};
}

// Backward, top to bottom: the head's, each layer's (recomputing its
// activations when checkpointing) and the embedding's gradients. The layout
// ends with the final LayerNorm, then the layers from the top down: each
// block's gradients are final once its backward is done (the embedding, tied
// to the head, only at the very end), and `ready` hears of each.
void PerformerModel::backward_all(RunState& r, double loss_scale, const GradientsReady& ready) {
  const int64_t T = r.T, C = cfg_.width, V = cfg_.vocab, L = cfg_.layers;
  const float* p = r.p;
  float* g = grads_.data<float>();
  MemoryTracker& tr = *ctx_.tracker;
  auto announce = [&](int64_t from) {
    if (ready) ready(from);  // ordered after the compute stream's work by an event
  };
  // d_x holds dL/dx_l while walking down.
  cross_entropy_backward(ctx_, r.logits.data<float>(), r.targets.data<int32_t>(), r.logits.data<float>(), T, V,
                         static_cast<float>(loss_scale));
  Tensor d_h = Tensor::empty({T, C}, DType::f32, tr, "model.grad_final_ln");
  if (r.p_lp)
    linear_backward_lowp(ctx_, cfg_.dtype, r.logits.data<float>(), r.hf.raw(), r.embedding_lp, d_h.data<float>(),
                         g + layout_.embedding(), nullptr, T, C, V);
  else
    linear_backward(ctx_, r.logits.data<float>(), r.hf.data<float>(), p + layout_.embedding(), d_h.data<float>(),
                    g + layout_.embedding(), nullptr, T, C, V);
  r.logits = Tensor();
  Tensor d_x = Tensor::empty({T, C}, DType::f32, tr, "model.grad_x");
  layernorm_backward(ctx_, d_h.data<float>(), r.xs[L].data<float>(), p + layout_.final_ln_g(), r.mf.data<float>(),
                     r.rf.data<float>(), d_x.data<float>(), g + layout_.final_ln_g(), g + layout_.final_ln_b(), T, C);
  d_h = Tensor();
  r.hf = Tensor();
  announce(layout_.final_ln_g());
  for (int64_t l = L - 1; l >= 0; --l) {
    r.xs[l + 1] = Tensor();
    const float* W = projection(l, r.step);
    if (cfg_.checkpoint_activations) {
      // Recompute this layer's activations from its saved input.
      Tensor scratch = Tensor::empty({T, C}, DType::f32, tr, "model.recompute_out");
      layers_[l].forward(ctx_, r.B, r.n, p, r.p_lp, W, r.xs[l].data<float>(), scratch.data<float>(), r.acts[l], &r.lt,
                         &r.in.packed);
      r.add_attention(r.lt.attention_fwd);
    }
    layers_[l].backward(ctx_, r.B, r.n, p, r.p_lp, W, r.xs[l].data<float>(), r.acts[l], d_x.data<float>(),
                        d_x.data<float>(), g, &r.lt, &r.in.packed);
    r.acts[l].clear();
    r.add_attention(r.lt.attention_bwd);
    announce(layout_.layer(l).begin);
  }
  const float embed_scale = static_cast<float>(std::sqrt(static_cast<double>(C)));
  scale_values(ctx_, d_x.data<float>(), T * C, embed_scale);
  embedding_backward(ctx_, r.ids.data<int32_t>(), d_x.data<float>(), g + layout_.embedding(), T, V, C);
  announce(0);
  synchronize(ctx_.stream);
}

}  // namespace pf
