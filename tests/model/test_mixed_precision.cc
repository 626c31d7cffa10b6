// Mixed precision on one rank: the loss scaler's rules, the bf16/f16 model
// against the fp32 model with the same parameters (loss and gradients within
// the rounding of 16-bit operands), the lower peak memory of 16-bit
// activations with the planner's prediction, and a trainer step with
// overflowing gradients that is skipped without touching the parameters or
// the moments; likewise a masked-LM step whose batch drew no mask.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "model/loss_scaler.h"
#include "model/planner.h"
#include "model/trainer.h"
#include "runtime/comm.h"
#include "tests/model/model_fixtures.h"
#include "tests/model/plan_checks.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

TEST(LossScaler, DynamicHalvesOnOverflowAndDoublesAfterAWindow) {
  LossScaleConfig c;
  c.init = 1024;
  c.window = 3;
  LossScaler s(c, DType::f16);  // auto -> dynamic for f16
  EXPECT_TRUE(s.dynamic());
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.update(false));  // an overflow resets the count
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_EQ(s.scale(), 512);
  s.restore(64, 2);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 128);
}

TEST(LossScaler, AutoIsFixedAtOneForBf16AndF32AndSkipsStillCount) {
  LossScaleConfig c;
  c.max_skips = 3;
  for (DType t : {DType::f32, DType::bf16}) {
    LossScaler s(c, t);
    EXPECT_FALSE(s.dynamic());
    EXPECT_EQ(s.scale(), 1.0);
    EXPECT_FALSE(s.update(false));
    EXPECT_EQ(s.scale(), 1.0);
    EXPECT_FALSE(s.update(false));
    EXPECT_THROW(s.update(false), TrainingError);  // the third skip in a row
  }
  c.mode = LossScaleMode::Fixed;
  c.init = 8;
  LossScaler fixed(c, DType::f16);
  EXPECT_EQ(fixed.scale(), 8.0);
  EXPECT_EQ(parse_loss_scale_mode("dynamic"), LossScaleMode::Dynamic);
  EXPECT_THROW(parse_loss_scale_mode("sometimes"), ConfigError);
  c.window = 0;
  EXPECT_THROW(LossScaler(c, DType::f16), ConfigError);
}

struct Harness {
  MemoryTracker tracker{Device::cpu()};
  ExecResources res{Device::cpu(), tracker};
};

struct Pass {
  double loss = 0;
  std::vector<float> grads;
  int64_t peak = 0;
};

// One forward and backward of `cfg` with the parameters of the fp32 model.
Pass run_pass(ModelConfig cfg, DType dtype, int64_t B, int64_t n) {
  Harness h;
  cfg.dtype = dtype;
  PerformerModel model(cfg, h.res.ctx(), nullptr);
  const ModelInput in = make_model_input(cfg, test::synthetic_slice(9, 0, B, n, 0, n), 0);
  model.zero_grads();
  h.tracker.reset_peak();
  Pass p;
  p.loss = model.forward_backward(in, 0, 1.0).loss_sum;
  p.peak = h.tracker.stats().peak_bytes;
  p.grads.assign(model.grads().data<float>(), model.grads().data<float>() + model.grads().numel());
  return p;
}

TEST(MixedPrecision, LossAndGradientsFollowTheFp32Model) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Softmax, AttentionKind::Exp})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
      const ModelConfig cfg = test::tiny_config(kind, obj);
      const Pass ref = run_pass(cfg, DType::f32, 2, 24);
      // Relative rounding of one 16-bit value: 2^-8 (bf16), 2^-11 (f16).
      for (auto [t, loss_tol, grad_tol] : {std::tuple<DType, double, double>{DType::bf16, 2e-3, 1e-2},
                                           {DType::f16, 2e-4, 2e-3}}) {
        SCOPED_TRACE(testing::Message() << attention_kind_name(kind) << "/" << objective_name(obj) << " "
                                        << dtype_name(t));
        const Pass got = run_pass(cfg, t, 2, 24);
        const double dl = std::abs(got.loss - ref.loss) / std::abs(ref.loss);
        const double dg = test::rel_l2(got.grads, ref.grads);
        EXPECT_LT(dl, loss_tol);
        EXPECT_LT(dg, grad_tol);
        // Rounding does change the result (the 16-bit path is really taken).
        EXPECT_GT(dl + dg, 1e-7);
        std::printf("[ mixed    ] %s/%s %s: loss rel %.2e, gradient rel L2 %.2e\n", attention_kind_name(kind),
                    objective_name(obj), dtype_name(t), dl, dg);
      }
    }
}

TEST(MixedPrecision, SixteenBitActivationsLowerThePeakAsPlanned) {
  ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  cfg.width = 64;
  cfg.heads = 4;
  cfg.ffn = 256;
  cfg.layers = 3;
  const int64_t B = 2, n = 512;
  const Pass f32 = run_pass(cfg, DType::f32, B, n);
  const Pass bf16 = run_pass(cfg, DType::bf16, B, n);
  ModelConfig planned = cfg;
  planned.dtype = DType::bf16;
  MemoryPlan plan = plan_memory(planned, B, n);
  // At these sizes the kept activations are most of the peak: 16-bit copies
  // of them save more than a tenth of it (13% measured).
  const double saving = static_cast<double>(f32.peak - bf16.peak);
  EXPECT_GT(saving, 0.1 * f32.peak) << "f32 peak " << f32.peak << ", bf16 peak " << bf16.peak;
  // Only the model's own bytes were measured (no optimizer moments here).
  const int64_t moments = 8 * ParamLayout(planned).total();
  plan.persistent -= moments;
  plan.peak -= moments;
  test::expect_plan_bounds(plan, bf16.peak, 0.05, "bf16 (without moments)");
  std::printf("[ mixed    ] peak f32 %lld, bf16 %lld\n", static_cast<long long>(f32.peak),
              static_cast<long long>(bf16.peak));
}

std::vector<float> values_of(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// A Trainer of `cfg` on one rank's CPU, the parameters it starts from, and
// the batch of these tests.
struct OneRankTrainer {
  MemoryTracker tracker{Device::cpu()};
  ExecResources res{Device::cpu(), tracker};
  ParallelGrid grid{make_local_comm(), 1};
  Trainer trainer;
  std::vector<float> before;
  TokenBatch batch = test::synthetic_slice(3, 0, 2, 24, 0, 24);
  OneRankTrainer(const ModelConfig& cfg, const OptimizerConfig& opt)
      : trainer(cfg, opt, grid, res.ctx()), before(values_of(trainer.model().params())) {}
};

TEST(MixedPrecision, OverflowingStepIsSkippedAndTheScaleLowered) {
  const ModelConfig base = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  ModelConfig cfg = base;
  cfg.dtype = DType::f16;
  OptimizerConfig opt;
  opt.schedule = LrSchedule{1e-2, 1e-3, 0, 10};
  opt.loss_scale.mode = LossScaleMode::Dynamic;
  opt.loss_scale.init = 1e30;  // any gradient rounded to f16 overflows
  OneRankTrainer one(cfg, opt);
  Trainer& trainer = one.trainer;
  const Tensor& p = trainer.model().params();
  const std::vector<float>& before = one.before;
  const TokenBatch& batch = one.batch;
  const StepStats st = trainer.train_step(batch);
  EXPECT_TRUE(st.skipped);
  EXPECT_TRUE(std::isfinite(st.loss));
  EXPECT_EQ(st.loss_scale, 1e30);
  EXPECT_EQ(trainer.loss_scaler().scale(), 5e29);
  EXPECT_EQ(trainer.step(), 1);
  const std::vector<float> after = values_of(p);
  EXPECT_EQ(after, before);
  for (int64_t i = 0; i < trainer.moment1().numel(); ++i) ASSERT_EQ(trainer.moment1().data<float>()[i], 0.f);
  // A usable scale trains: the update is applied and finite.
  trainer.loss_scaler().restore(1024, 0);
  const StepStats ok = trainer.train_step(batch);
  EXPECT_FALSE(ok.skipped);
  EXPECT_TRUE(std::isfinite(ok.grad_norm));
  const std::vector<float> moved = values_of(p);
  EXPECT_NE(moved, before);
  for (float x : moved) ASSERT_TRUE(std::isfinite(x));
}

// A masked-LM batch that drew no mask has nothing to predict: the step
// passes without a forward or an update (it used to end the run, and a
// resume met the same batch again); a batch of padding alone is an error.
TEST(MixedPrecision, MaskedStepWithoutAMaskPassesWithoutAnUpdate) {
  ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::MaskedLM);
  cfg.mlm_probability = 1e-9;  // a threshold of 4 in 2^32: no residue of 48 is masked
  OptimizerConfig opt;
  opt.schedule = LrSchedule{1e-2, 1e-3, 0, 10};
  OneRankTrainer one(cfg, opt);
  const StepStats st = one.trainer.train_step(one.batch);
  EXPECT_TRUE(st.no_targets);
  EXPECT_FALSE(st.skipped);
  EXPECT_EQ(st.tokens, 0);
  EXPECT_TRUE(std::isnan(st.loss));
  EXPECT_EQ(st.lr, learning_rate_at(opt.schedule, 0));
  EXPECT_EQ(one.trainer.step(), 1);
  EXPECT_EQ(values_of(one.trainer.model().params()), one.before);
  for (int64_t i = 0; i < one.trainer.moment1().numel(); ++i) ASSERT_EQ(one.trainer.moment1().data<float>()[i], 0.f);

  // The same batch with masks trains.
  ModelConfig masked = cfg;
  masked.mlm_probability = 0.5;
  OneRankTrainer trains(masked, opt);
  const StepStats ok = trains.trainer.train_step(trains.batch);
  EXPECT_FALSE(ok.no_targets);
  EXPECT_GT(ok.tokens, 0);
  EXPECT_TRUE(std::isfinite(ok.loss));

  // Padding alone: an error naming the step, counted from 1.
  ModelConfig causal = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  OneRankTrainer padded(causal, opt);
  TokenBatch pads = padded.batch;
  for (int32_t& t : pads.tokens) t = causal.tokens.pad;
  for (int32_t& t : pads.lookahead) t = -1;
  try {
    padded.trainer.train_step(pads);
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("step 1: the global batch has no token to predict"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pf
