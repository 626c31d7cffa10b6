// Whole-model checks on one rank: gradients against finite differences of the
// loss, causality at model level, and activation checkpointing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/model.h"
#include "runtime/comm.h"
#include "tests/model/model_fixtures.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

struct Harness {
  MemoryTracker tracker{Device::cpu()};
  ExecResources res{Device::cpu(), tracker};
};

ModelInput tiny_input(const ModelConfig& cfg, int64_t B, int64_t n) {
  return make_model_input(cfg, test::synthetic_slice(9, 0, B, n, 0, n), 0);
}

// Directional derivatives of the loss sum: (L(p + e u) - L(p - e u)) / 2e
// against g . u, for u along the gradient of each parameter tensor and along
// a random direction inside it. The model computes in fp32 with the loss
// summed in double; e is chosen so that rounding stays far below the change.
void check_gradients(AttentionKind kind, Objective obj) {
  ModelConfig cfg = test::tiny_config(kind, obj);
  Harness h;
  PerformerModel model(cfg, h.res.ctx(), nullptr);
  const ModelInput in = tiny_input(cfg, 2, 11);
  model.zero_grads();
  model.forward_backward(in, 0, 1.0);
  const std::vector<float> g(model.grads().data<float>(), model.grads().data<float>() + model.grads().numel());
  const std::vector<float> p0(model.params().data<float>(), model.params().data<float>() + model.params().numel());
  float* p = model.params().data<float>();
  const std::string what = std::string(attention_kind_name(kind)) + "/" + objective_name(obj);
  int checked = 0;
  for (size_t si = 0; si < model.layout().slices().size(); ++si) {
    const ParamSlice& s = model.layout().slices()[si];
    double gnorm = 0;
    for (int64_t i = 0; i < s.numel; ++i) gnorm += double(g[s.offset + i]) * g[s.offset + i];
    gnorm = std::sqrt(gnorm);
    if (gnorm < 1e-3) continue;  // e.g. a key bias under softmax: no signal to check
    const std::vector<double> r = test::normal_vector(s.numel, 31, si);
    for (int dir = 0; dir < 2; ++dir) {
      std::vector<double> u(s.numel);
      double un = 0;
      for (int64_t i = 0; i < s.numel; ++i) {
        u[i] = dir == 0 ? g[s.offset + i] : r[i];
        un += u[i] * u[i];
      }
      un = std::sqrt(un);
      double gu = 0;
      for (int64_t i = 0; i < s.numel; ++i) {
        u[i] /= un;
        gu += u[i] * g[s.offset + i];
      }
      const double e = 2e-2;
      auto loss_at = [&](double sign) {
        for (int64_t i = 0; i < s.numel; ++i) p[s.offset + i] = static_cast<float>(p0[s.offset + i] + sign * e * u[i]);
        const double l = model.forward(in, 0).loss_sum;
        for (int64_t i = 0; i < s.numel; ++i) p[s.offset + i] = p0[s.offset + i];
        return l;
      };
      const double fd = (loss_at(1) - loss_at(-1)) / (2 * e);
      const double tol = dir == 0 ? 2e-2 * std::abs(gu) : 2e-2 * gnorm;
      EXPECT_NEAR(fd, gu, tol) << what << " " << s.name << (dir == 0 ? " along its gradient" : " random direction");
      ++checked;
    }
  }
  EXPECT_GE(checked, 20) << what;
}

TEST(ModelGradients, FavorCausal) { check_gradients(AttentionKind::Favor, Objective::CausalLM); }
TEST(ModelGradients, FavorMasked) { check_gradients(AttentionKind::Favor, Objective::MaskedLM); }
TEST(ModelGradients, ReluCausal) { check_gradients(AttentionKind::Relu, Objective::CausalLM); }
TEST(ModelGradients, ReluMasked) { check_gradients(AttentionKind::Relu, Objective::MaskedLM); }
TEST(ModelGradients, SoftmaxCausal) { check_gradients(AttentionKind::Softmax, Objective::CausalLM); }
TEST(ModelGradients, SoftmaxMasked) { check_gradients(AttentionKind::Softmax, Objective::MaskedLM); }

// Changing tokens after position i leaves the causal model's logits at
// positions <= i unchanged (to fp32 rounding).
void check_causality(AttentionKind kind) {
  const ModelConfig cfg = test::tiny_config(kind, Objective::CausalLM);
  Harness h;
  PerformerModel model(cfg, h.res.ctx(), nullptr);
  const int64_t n = 23, i = 9;
  ModelInput a = tiny_input(cfg, 1, n);
  ModelInput b = a;
  for (int64_t t = i + 1; t < n; ++t) b.inputs[t] = 4 + (b.inputs[t] + 7) % 25;
  std::vector<float> la, lb;
  model.forward(a, 0, &la);
  model.forward(b, 0, &lb);
  const int64_t V = cfg.vocab;
  EXPECT_LT(test::rel_l2(lb.data(), la.data(), (i + 1) * V), 1e-6) << attention_kind_name(kind);
  EXPECT_GT(test::rel_l2(lb.data() + (i + 1) * V, la.data() + (i + 1) * V, (n - i - 1) * V), 1e-4)
      << "later positions must see the change";
}

TEST(ModelCausality, Favor) { check_causality(AttentionKind::Favor); }
TEST(ModelCausality, Relu) { check_causality(AttentionKind::Relu); }
TEST(ModelCausality, Softmax) { check_causality(AttentionKind::Softmax); }

// Activation checkpointing recomputes each layer in the backward: identical
// gradients, lower peak memory.
TEST(ModelCheckpointing, SameGradientsLowerPeak) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Softmax}) {
    ModelConfig cfg = test::tiny_config(kind, Objective::CausalLM);
    cfg.layers = 4;
    std::vector<float> grads[2];
    int64_t peak[2];
    for (int ck = 0; ck < 2; ++ck) {
      cfg.checkpoint_activations = ck == 1;
      Harness h;
      PerformerModel model(cfg, h.res.ctx(), nullptr);
      const ModelInput in = tiny_input(cfg, 2, 64);
      model.zero_grads();
      h.tracker.reset_peak();
      model.forward_backward(in, 0, 1.0);
      peak[ck] = h.tracker.stats().peak_bytes;
      grads[ck].assign(model.grads().data<float>(), model.grads().data<float>() + model.grads().numel());
    }
    EXPECT_EQ(grads[0], grads[1]) << attention_kind_name(kind);
    EXPECT_LT(peak[1], peak[0]) << attention_kind_name(kind);
  }
}

}  // namespace
}  // namespace pf
