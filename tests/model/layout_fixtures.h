// What the packed and family model tests share: one model's pass over a
// batch (loss, logits, gradients), the name of a configuration, and three
// AdamW steps of a batch on a grid compared with one rank.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/trainer.h"
#include "runtime/comm.h"
#include "tests/model/model_fixtures.h"
#include "tests/support/numerics.h"

namespace pf::test {

struct Pass {
  double loss = 0;
  std::vector<float> grads;
  std::vector<float> logits;  // [B, n, V] of this rank's slice
};

// A fresh model of `cfg` (exp: heads moved apart) over `batch`: the loss and
// logits of its forward, the gradients of its backward.
inline Pass run_model(const ModelConfig& cfg, Communicator* sp, const TokenBatch& batch, MemoryTracker& tracker,
                      int64_t step = 0) {
  ExecResources res(Device::cpu(), tracker, host_streams_from_env());
  PerformerModel model(cfg, res.ctx(), sp);
  perturb_trained_projections(model);
  const ModelInput in = make_model_input(cfg, batch, step);
  Pass r;
  r.loss = model.forward(in, step, &r.logits).loss_sum;
  model.zero_grads();
  model.forward_backward(in, step, 1.0);
  const Tensor& g = model.grads();
  r.grads.assign(g.data<float>(), g.data<float>() + g.numel());
  return r;
}

inline std::string what(const ModelConfig& cfg, int sp) {
  return std::string(attention_kind_name(cfg.attention)) + "/" + objective_name(cfg.objective) +
         " sp=" + std::to_string(sp);
}

// Independent runs of parts of a batch (each protein or family alone),
// summed to compare with one pass over the whole batch.
struct AloneSum {
  double loss = 0, logit_err = 0, logit_norm = 0;
  std::vector<float> grads;
  // `alone` ran the rows [x, x + len) of sample s on its own; `got` holds
  // this rank's rows [r n, (r + 1) n) of every sample (vocabulary V).
  void add(const Pass& alone, const Pass& got, int64_t s, int64_t x, int64_t len, int64_t r, int64_t n, int64_t V) {
    loss += alone.loss;
    if (grads.empty()) grads.assign(alone.grads.size(), 0.f);
    for (size_t i = 0; i < grads.size(); ++i) grads[i] += alone.grads[i];
    for (int64_t i = std::max(x, r * n); i < std::min(x + len, (r + 1) * n); ++i)
      for (int64_t v = 0; v < V; ++v) {
        const double w = alone.logits[static_cast<size_t>((i - x) * V + v)];
        const double g = got.logits[static_cast<size_t>((s * n + i - r * n) * V + v)];
        logit_err += (g - w) * (g - w);
        logit_norm += w * w;
      }
  }
  // The whole batch's loss and gradients summed over the ranks: relative 1e-6
  // for the loss and this rank's logits, 1e-5 L2 for the gradients.
  void expect_matches(double total_loss, const std::vector<float>& total_grads, const std::string& w) const {
    EXPECT_NEAR(total_loss, loss, 1e-6 * std::abs(loss)) << w;
    EXPECT_LT(rel_l2(total_grads, grads), 1e-5) << w;
    EXPECT_LT(std::sqrt(logit_err / logit_norm), 1e-6) << w << " logits";
  }
};

struct TrainResult {
  std::vector<double> losses;
  std::vector<float> first_grads, final_params;
};

// Three AdamW steps of this rank's `local` batch on `grid`.
inline TrainResult train_three_steps(const ModelConfig& cfg, ParallelGrid& grid, MemoryTracker& tracker,
                                     const TokenBatch& local) {
  ExecResources res(Device::cpu(), tracker, host_streams_from_env());
  Trainer trainer(cfg, equivalence_optimizer(), grid, res.ctx());
  TrainResult t;
  for (int s = 0; s < 3; ++s) {
    t.losses.push_back(trainer.train_step(local).loss);
    if (s == 0) {
      const Tensor& g = trainer.model().grads();
      t.first_grads.assign(g.data<float>(), g.data<float>() + g.numel());
    }
  }
  const Tensor& p = trainer.model().params();
  t.final_params.assign(p.data<float>(), p.data<float>() + p.numel());
  return t;
}

// The same losses (relative 1e-6), first gradients and final parameters (1e-5 L2).
inline void expect_same_training(const TrainResult& got, const TrainResult& want, const std::string& w) {
  for (size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_NEAR(got.losses[s], want.losses[s], 1e-6 * std::abs(want.losses[s])) << w << " step " << s;
  EXPECT_LT(rel_l2(got.first_grads, want.first_grads), 1e-5) << w;
  EXPECT_LT(rel_l2(got.final_params, want.final_params), 1e-5) << w;
}

}  // namespace pf::test
