// The whole model on CUDA against the CPU model: the same parameters and
// tokens, for FAVOR+, ReLU and exact softmax attention, causal and masked
// objectives, fp32 and bf16; the loss and every parameter gradient must agree.
// Then a short training run (30 steps of the quickstart's model size) on CUDA
// follows the CPU run's losses; a packed batch on CUDA as on the CPU; and a
// windowed model's recurrent form on CUDA as on the CPU.
// Skipped without a GPU.
//
// Tolerances, from the CPU mixed-precision tests (test_mixed_precision.cc:
// bf16 against fp32 within 2e-3 relative loss and 1e-2 relative L2 gradient):
//   fp32  loss 1e-5, gradients 1e-4: the same arithmetic in another order
//         (cuBLAS and the CUDA reductions sum differently), no 16-bit rounding,
//         with model.attention_math = "fp32" (exact attention products);
//   fp32 with the default attention_math (TF32 tile products in attention on
//         sm_80+): loss 2e-3, gradients 1e-2, as the kernels' TF32 tests allow;
//   bf16  loss 4e-3, gradients 2e-2: each side rounds its GEMM operands to
//         bf16 and may lie one mixed-precision bound from the fp32 result;
//   training  every loss of 30 fp32 steps within 1e-3 relative (Adam turns
//         the fp32 differences of each step into slightly different updates).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "model/model.h"
#include "model/recurrent.h"
#include "model/trainer.h"
#include "runtime/comm.h"
#include "runtime/grid.h"
#include "tests/model/model_fixtures.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

std::vector<float> download(const Tensor& t, const Stream& stream) {
  synchronize(stream);
  std::vector<float> host(static_cast<size_t>(t.numel()));
  copy_bytes_blocking(host.data(), Device::cpu(), t.raw(), t.device(), t.nbytes());
  return host;
}

void upload(Tensor& t, const std::vector<float>& host) {
  ASSERT_EQ(static_cast<int64_t>(host.size()), t.numel());
  copy_bytes_blocking(t.raw(), t.device(), host.data(), Device::cpu(), t.nbytes());
}

struct Pass {
  double loss = 0;
  std::vector<float> grads;
};

// One forward and backward on `device` with the given parameters.
Pass run_pass(const ModelConfig& cfg, Device device, const std::vector<float>& params, const ModelInput& in) {
  MemoryTracker tracker(device);
  ExecResources res(device, tracker);
  PerformerModel model(cfg, res.ctx(), nullptr);
  upload(model.params(), params);
  model.zero_grads();
  Pass p;
  p.loss = model.forward_backward(in, 0, 1.0).loss_sum;
  p.grads = download(model.grads(), res.ctx().stream);
  return p;
}

std::vector<float> initial_params(const ModelConfig& cfg) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  PerformerModel model(cfg, res.ctx(), nullptr);
  return download(model.params(), res.ctx().stream);
}

// The tiny model with exact fp32 attention on the GPU (model.attention_math):
// the comparisons with the CPU below are of the same arithmetic in another
// order, not of the tensor cores' operand rounding.
ModelConfig exact_config(AttentionKind kind, Objective obj) {
  ModelConfig cfg = test::tiny_config(kind, obj);
  cfg.attention_math = AttentionMath::Fp32;
  return cfg;
}

class ModelGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
};

TEST_F(ModelGpu, LossAndEveryGradientMatchTheCpuModel) {
  for (AttentionKind kind :
       {AttentionKind::Favor, AttentionKind::Relu, AttentionKind::Softmax, AttentionKind::Elu, AttentionKind::Exp})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM})
      for (auto [dtype, math, loss_tol, grad_tol] :
           {std::tuple<DType, AttentionMath, double, double>{DType::f32, AttentionMath::Fp32, 1e-5, 1e-4},
            {DType::f32, AttentionMath::Auto, 2e-3, 1e-2},
            {DType::bf16, AttentionMath::Auto, 4e-3, 2e-2}}) {
        ModelConfig cfg = test::tiny_config(kind, obj);
        cfg.dtype = dtype;
        cfg.attention_math = math;
        SCOPED_TRACE(testing::Message() << attention_kind_name(kind) << "/" << objective_name(obj) << " "
                                        << dtype_name(dtype) << " attention_math " << attention_math_name(math));
        const std::vector<float> params = initial_params(cfg);
        const ModelInput in = make_model_input(cfg, test::synthetic_slice(9, 0, 2, 40, 0, 40), 0);
        const Pass cpu = run_pass(cfg, Device::cpu(), params, in);
        const Pass gpu = run_pass(cfg, Device::cuda(0), params, in);
        const double dl = std::abs(gpu.loss - cpu.loss) / std::abs(cpu.loss);
        const double dg = test::rel_l2(gpu.grads, cpu.grads);
        EXPECT_TRUE(std::isfinite(gpu.loss));
        EXPECT_LT(dl, loss_tol);
        EXPECT_LT(dg, grad_tol);
        // Every parameter block, not only the whole vector: a wrong small
        // block (a bias, a norm) would hide in the global L2.
        // Exact softmax is invariant to the key bias, whose gradient is zero
        // up to rounding: its blocks are left to the global comparison.
        const ParamLayout layout(cfg);
        for (const ParamSlice& e : layout.slices()) {
          const std::vector<float> a(cpu.grads.begin() + e.offset, cpu.grads.begin() + e.offset + e.numel);
          const std::vector<float> b(gpu.grads.begin() + e.offset, gpu.grads.begin() + e.offset + e.numel);
          double norm = 0;
          for (float x : a) norm += static_cast<double>(x) * x;
          if (std::sqrt(norm) < 1e-6 * std::sqrt(static_cast<double>(e.numel))) continue;
          EXPECT_LT(test::rel_l2(b, a), 4 * grad_tol) << e.name;
        }
        std::printf("[ model    ] %s/%s %s, attention %s: loss rel %.2e, gradient rel L2 %.2e\n",
                    attention_kind_name(kind), objective_name(obj), dtype_name(dtype), attention_math_name(math), dl,
                    dg);
      }
}

// Loss within 1e-5 and gradients within 1e-4 (relative L2) of the CPU model,
// fp32, on a batch of two 40-token samples, packed (several proteins a
// sample, each attending to itself) or not.
void expect_batch_matches_cpu(const ModelConfig& cfg, const std::vector<float>& params, bool packed,
                              const std::string& what) {
  TokenBatch batch = test::synthetic_slice(9, 0, 2, 40, 0, 40);
  if (packed) batch.packed.samples = {{{0, 0, 1}, {7, 0, 2}, {8, 0, 3}, {30, 0, 4}}, {{0, 0, 5}, {20, 0, 6}}};
  const ModelInput in = make_model_input(cfg, batch, 0);
  const Pass cpu = run_pass(cfg, Device::cpu(), params, in);
  const Pass gpu = run_pass(cfg, Device::cuda(0), params, in);
  const double dl = std::abs(gpu.loss - cpu.loss) / std::abs(cpu.loss);
  const double dg = test::rel_l2(gpu.grads, cpu.grads);
  EXPECT_LT(dl, 1e-5);
  EXPECT_LT(dg, 1e-4);
  std::printf("[ model    ] %s%s/%s f32: loss rel %.2e, gradient rel L2 %.2e\n", what.c_str(),
              attention_kind_name(cfg.attention), objective_name(cfg.objective), dl, dg);
}

// A local softmax window, alone and beside FAVOR+ with distinct per-head
// gates, unpacked and packed, fp32: the windowed softmax kernels and the
// gated mix on CUDA against the CPU.
TEST_F(ModelGpu, WindowMatchesTheCpuModel) {
  for (AttentionKind kind : {AttentionKind::Softmax, AttentionKind::Favor})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM})
      for (bool packed : {false, true}) {
        ModelConfig cfg = exact_config(kind, obj);
        cfg.window = 6;
        SCOPED_TRACE(testing::Message() << "window " << attention_kind_name(kind) << "/" << objective_name(obj)
                                        << (packed ? " packed" : ""));
        std::vector<float> params = initial_params(cfg);
        const ParamLayout layout(cfg);
        if (cfg.hybrid())
          for (int64_t l = 0; l < cfg.layers; ++l)
            for (int64_t h = 0; h < cfg.heads; ++h)
              params[layout.layer(l).gate + h] = 0.8f * static_cast<float>(h + 1) * (l % 2 ? -1.f : 1.f);
        expect_batch_matches_cpu(cfg, params, packed, std::string("window ") + (packed ? "packed " : ""));
      }
}

// The recurrent form of a windowed model (the window's last keys and values
// carried per layer, model/recurrent.h) on CUDA against the CPU: 20 tokens
// of 3 streams, the logits of every step within 1e-4 of their scale, beside
// FAVOR+ (gates away from 0) and the window alone.
TEST_F(ModelGpu, RecurrentWindowMatchesTheCpu) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Softmax}) {
    ModelConfig cfg = exact_config(kind, Objective::CausalLM);
    cfg.window = 6;
    std::vector<float> params = initial_params(cfg);
    const ParamLayout layout(cfg);
    if (cfg.hybrid())
      for (int64_t l = 0; l < cfg.layers; ++l)
        for (int64_t h = 0; h < cfg.heads; ++h) params[layout.layer(l).gate + h] = 0.5f * static_cast<float>(h - 1);
    const int64_t B = 3, V = cfg.vocab, steps = 20;
    auto run = [&](Device device) {
      MemoryTracker tracker(device);
      ExecResources res(device, tracker);
      PerformerModel model(cfg, res.ctx(), nullptr);
      upload(model.params(), params);
      RecurrentPerformer rec(model, res.ctx(), B);
      std::vector<float> out(static_cast<size_t>(steps * B * V));
      for (int64_t p = 0; p < steps; ++p) {
        int32_t tokens[B];
        for (int64_t b = 0; b < B; ++b) tokens[b] = static_cast<int32_t>(4 + (7 * p + 5 * b) % 20);
        rec.step(tokens, out.data() + p * B * V);
      }
      return out;
    };
    const std::vector<float> gpu = run(Device::cuda(0)), cpu = run(Device::cpu());
    double scale = 1, worst = 0;
    for (float v : cpu) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (size_t i = 0; i < cpu.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(gpu[i]) - cpu[i]));
    EXPECT_LE(worst / scale, 1e-4) << attention_kind_name(kind) << " with a window of 6";
    std::printf("recurrent window, %s: largest |cuda - cpu| / scale = %.3g\n", attention_kind_name(kind),
                worst / scale);
  }
}

// A packed batch (model/packed_layout.h: several proteins per sample, each
// attending to itself) on CUDA against the CPU: the per-piece copies (2-D
// copies on CUDA) and the unchanged kernels on each piece, fp32.
TEST_F(ModelGpu, PackedBatchMatchesTheCpuModel) {
  for (AttentionKind kind :
       {AttentionKind::Favor, AttentionKind::Relu, AttentionKind::Softmax, AttentionKind::Elu, AttentionKind::Exp})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
      const ModelConfig cfg = exact_config(kind, obj);
      SCOPED_TRACE(testing::Message() << "packed " << attention_kind_name(kind) << "/" << objective_name(obj));
      expect_batch_matches_cpu(cfg, initial_params(cfg), true, "packed ");
    }
}

std::vector<double> train_losses(const ModelConfig& cfg, Device device, const std::vector<float>& params, int steps) {
  MemoryTracker tracker(device);
  const HostStreamConfig streams = host_streams_from_env();
  ExecResources res(device, tracker, streams);
  ParallelGrid grid(make_local_comm(device), 1);
  OptimizerConfig opt;
  opt.schedule = LrSchedule{3e-3, 2e-4, 5, steps};
  opt.adamw.weight_decay = 0.01f;
  opt.clip_norm = 1.0;
  Trainer trainer(cfg, opt, grid, res.ctx());
  upload(trainer.model().params(), params);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s)
    losses.push_back(trainer.train_step(test::synthetic_slice(100 + s, 0, 4, 512, 0, 512)).loss);
  return losses;
}

TEST_F(ModelGpu, ThirtyTrainingStepsFollowTheCpuRun) {
  ModelConfig cfg = exact_config(AttentionKind::Favor, Objective::CausalLM);
  cfg.width = 128;  // the quickstart model (launch/configs/small.toml)
  cfg.heads = 4;
  cfg.ffn = 512;
  cfg.features = 64;
  cfg.chunk = 64;
  const std::vector<float> params = initial_params(cfg);
  const std::vector<double> cpu = train_losses(cfg, Device::cpu(), params, 30);
  const std::vector<double> gpu = train_losses(cfg, Device::cuda(0), params, 30);
  double worst = 0;
  for (size_t s = 0; s < cpu.size(); ++s) {
    const double rel = std::abs(gpu[s] - cpu[s]) / std::abs(cpu[s]);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 1e-3) << "step " << s << ": cpu " << cpu[s] << ", gpu " << gpu[s];
  }
  EXPECT_LT(cpu.back(), cpu.front()) << "the run must learn for the comparison to mean something";
  std::printf("[ training ] 30 steps: loss %.4f -> %.4f on the CPU, %.4f -> %.4f on CUDA; largest rel diff %.2e\n",
              cpu.front(), cpu.back(), gpu.front(), gpu.back(), worst);
}

}  // namespace
}  // namespace pf
