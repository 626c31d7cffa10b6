// Tiny models and synthetic protein-like batches for the model tests. Tokens
// are keyed by (seed, sample, position), so every rank can build the same
// global batch and cut its own slice.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/model.h"
#include "model/objective.h"
#include "model/trainer.h"
#include "runtime/random.h"
#include "tests/support/numerics.h"

namespace pf::test {

inline ModelConfig tiny_config(AttentionKind attention, Objective objective) {
  ModelConfig c;
  c.vocab = 29;
  c.layers = 2;
  c.width = 32;
  c.heads = 2;
  c.ffn = 64;
  c.features = 16;
  c.chunk = 5;
  c.attention = attention;
  c.objective = objective;
  c.seed = 77;
  c.init_std = 0.1;
  if (attention == AttentionKind::Elu) c.features = c.width / c.heads;  // elu: m = d
  return c;
}

// A model whose activations are large enough for the memory plan to matter
// (the planner tests).
inline ModelConfig planner_config(AttentionKind kind, Objective obj, bool checkpointing) {
  ModelConfig cfg = tiny_config(kind, obj);
  cfg.width = 64;
  cfg.heads = 4;
  cfg.ffn = 256;
  cfg.features = 32;
  cfg.layers = 3;
  cfg.chunk = 64;
  cfg.checkpoint_activations = checkpointing;
  return cfg;
}

// Smaller still, for the float64 finite-difference check of every parameter
// element (4944 parameters): D = 8, and m = 12 is not a multiple of D (a
// partial orthogonal block).
inline ModelConfig gradcheck_config(AttentionKind attention, Objective objective) {
  ModelConfig c = tiny_config(attention, objective);
  c.width = 16;
  c.ffn = 32;
  c.features = attention == AttentionKind::Elu ? c.width / c.heads : 12;
  return c;
}

// exp: every head's trained projection moved by its own noise (std 0.3), the
// same on every rank and for every model of one config, so that a test sees
// a head that used another head's W (at initialisation all heads hold the
// same draw). The parameters are host memory (CPU).
// A hybrid's gates (model.window with a linear kind) are set to distinct
// values per layer and head (they start at 0, an even mix).
inline void perturb_trained_projections(PerformerModel& model) {
  const ModelConfig& cfg = model.config();
  if (cfg.hybrid()) {
    float* p = model.params().data<float>();
    for (int64_t l = 0; l < cfg.layers; ++l)
      for (int64_t h = 0; h < cfg.heads; ++h)
        p[model.layout().layer(l).gate + h] = 0.8f * static_cast<float>(h + 1) * (l % 2 ? -1.f : 1.f);
  }
  if (cfg.attention != AttentionKind::Exp) return;
  const int64_t count = cfg.heads * cfg.features * cfg.head_dim();
  float* p = model.params().data<float>();
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::vector<double> noise = normal_vector(count, cfg.seed + 1000 + static_cast<uint64_t>(l), 9, 0.3);
    float* w = p + model.layout().layer(l).features_w;
    for (int64_t e = 0; e < count; ++e) w[e] += static_cast<float>(noise[e]);
  }
}

// Global sample s, position p: a residue token (ids 4..28), with a padding
// tail on odd samples so the ignore path is exercised.
inline int32_t synthetic_token(uint64_t seed, int64_t s, int64_t p, int64_t L) {
  if (s % 2 == 1 && p >= L - 3) return 0;
  const KeyedRandom r(seed, 0x70c3, static_cast<uint64_t>(s));
  return 4 + static_cast<int32_t>(r.draw(static_cast<uint64_t>(p)).v[0] % 25);
}

// Samples [first, first + count) of length L, positions [begin, end).
inline TokenBatch synthetic_slice(uint64_t seed, int64_t first, int64_t count, int64_t L, int64_t begin, int64_t end) {
  TokenBatch b;
  b.batch = count;
  b.n = end - begin;
  b.offset = begin;
  for (int64_t s = first; s < first + count; ++s) {
    for (int64_t p = begin; p < end; ++p) b.tokens.push_back(synthetic_token(seed, s, p, L));
    b.lookahead.push_back(end < L ? synthetic_token(seed, s, end, L) : -1);
    b.sample_ids.push_back(static_cast<uint64_t>(s));
  }
  return b;
}

// The optimizer of the multi-step equivalence tests: weight decay, a short
// warmup and decay, and clipping that acts, so every part of the update runs.
// Adam's step g / (|g| + eps) turns the rounding of a gradient entry near eps
// into a change of up to the learning rate; the tiny models have entries near
// 1e-8 whose layouts differ by 7% (3.5e-9 absolute), which the default eps
// = 1e-8 made a 1e-4 parameter difference. eps = 1e-6 keeps the step linear
// in such entries, so the parameters compare like the gradients.
inline OptimizerConfig equivalence_optimizer() {
  OptimizerConfig o;
  o.adamw.eps = 1e-6f;
  o.adamw.weight_decay = 0.01f;
  o.schedule = LrSchedule{1e-2, 1e-3, 1, 10};
  o.clip_norm = 0.5;
  return o;
}

}  // namespace pf::test
