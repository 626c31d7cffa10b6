// The memory planner predicts the measured peak of a training step within 15%
// at three lengths, with and without activation checkpointing.
#include <gtest/gtest.h>

#include "model/model.h"
#include "model/planner.h"
#include "model/trainer.h"
#include "runtime/comm.h"
#include "tests/model/model_fixtures.h"

namespace pf {
namespace {

int64_t measured_peak(const ModelConfig& cfg, int64_t B, int64_t n) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  ParallelGrid grid(make_local_comm(), 1);
  Trainer trainer(cfg, OptimizerConfig{}, grid, res.ctx());
  const TokenBatch batch = test::synthetic_slice(3, 0, B, n, 0, n);
  return trainer.train_step(batch).peak_bytes;
}

TEST(Planner, PredictsMeasuredPeakWithin15Percent) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Softmax})
    for (bool ckpt : {false, true}) {
      ModelConfig cfg = test::tiny_config(kind, Objective::CausalLM);
      cfg.width = 64;
      cfg.heads = 4;
      cfg.ffn = 256;
      cfg.features = 32;
      cfg.layers = 3;
      cfg.chunk = 64;
      cfg.checkpoint_activations = ckpt;
      for (int64_t n : {128, 512, 1536}) {
        const int64_t want = measured_peak(cfg, 1, n);
        const MemoryPlan plan = plan_memory(cfg, 1, n);
        std::printf("planner %s ckpt=%d n=%ld: measured %ld planned %ld (%.3f)\n", attention_kind_name(kind), ckpt,
                    static_cast<long>(n), static_cast<long>(want), static_cast<long>(plan.peak),
                    static_cast<double>(plan.peak) / static_cast<double>(want));
        EXPECT_NEAR(static_cast<double>(plan.peak), static_cast<double>(want), 0.15 * want)
            << attention_kind_name(kind) << " checkpointing=" << ckpt << " n=" << n << ": " << plan.summary();
      }
    }
}

TEST(Planner, LongestLengthFitsTheCap) {
  ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  const int64_t cap = int64_t{64} << 20;
  const int64_t n = longest_local_length(cfg, 1, cap, 256);
  ASSERT_GT(n, 0);
  EXPECT_LE(plan_memory(cfg, 1, n).peak, 0.97 * cap);
  EXPECT_GT(plan_memory(cfg, 1, n + 256).peak, 0.97 * cap);
}

}  // namespace
}  // namespace pf
