// Whole-model checks on one rank: the fp32 loss and logits against a float64
// reference of the whole model (tests/support/model_reference.h), every
// parameter gradient against central finite differences of that reference,
// causality at model level, and activation checkpointing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/params.h"
#include "runtime/comm.h"
#include "tests/model/model_fixtures.h"
#include "tests/support/model_reference.h"
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

// ---- The fp32 model against its float64 reference ---------------------------------

// The model's parameters as float64, for the reference.
std::vector<double> params_f64(PerformerModel& model) {
  return std::vector<double>(model.params().data<float>(), model.params().data<float>() + model.params().numel());
}

// Loss sum and logits of the fp32 model against the float64 reference at
// offset 0 and at a later global offset (the positional encoding of global
// positions). Measured: relative 3e-8 or less on the loss.
void check_loss(const ModelConfig& cfg) {
  const std::string what = std::string(attention_kind_name(cfg.attention)) + (cfg.exp_key_norm ? "+key_norm" : "") +
                           (cfg.window ? "+window" + std::to_string(cfg.window) : "") + "/" +
                           objective_name(cfg.objective);
  Harness h;
  PerformerModel model(cfg, h.res.ctx(), nullptr);
  test::perturb_trained_projections(model);
  const std::vector<double> params = params_f64(model);
  const std::vector<std::vector<double>> proj = test::reference_projections(model, 0);
  for (int64_t offset : {0, 7}) {
    const ModelInput in = make_model_input(cfg, test::synthetic_slice(9, 0, 2, 30, offset, offset + 11), 0);
    ASSERT_GT(in.predicted(), 0) << what;
    std::vector<float> logits;
    std::vector<double> want_logits;
    const double got = model.forward(in, 0, &logits).loss_sum;
    const double want = test::reference_loss_sum(cfg, params, in, proj, &want_logits);
    const double loss_err = std::abs(got - want) / std::abs(want);
    const double logits_err = test::rel_l2(logits, want_logits);
    EXPECT_LT(loss_err, 1e-6) << what << " offset " << offset;
    EXPECT_LT(logits_err, 1e-5) << what << " offset " << offset;
    std::printf("%s C=%lld offset %lld: loss %.6f, relative error %.1e; logits rel_l2 %.1e\n", what.c_str(),
                static_cast<long long>(cfg.width), static_cast<long long>(offset), want, loss_err, logits_err);
  }
}

TEST(ModelReference, LossMatchesFloat64) {
  for (AttentionKind kind :
       {AttentionKind::Favor, AttentionKind::Relu, AttentionKind::Softmax, AttentionKind::Elu, AttentionKind::Exp})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
      check_loss(test::tiny_config(kind, obj));
      check_loss(test::gradcheck_config(kind, obj));
    }
  for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
    ModelConfig cfg = test::tiny_config(AttentionKind::Exp, obj);
    cfg.exp_key_norm = true;
    check_loss(cfg);
  }
  // A local softmax window: alone (softmax), and beside each linear kind
  // with the per-head gates moved off their even start.
  for (AttentionKind kind : {AttentionKind::Softmax, AttentionKind::Favor, AttentionKind::Elu, AttentionKind::Exp})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
      ModelConfig cfg = test::tiny_config(kind, obj);
      cfg.window = 4;
      check_loss(cfg);
    }
}

// exp starts from the FAVOR+ draw in every head and draws every other
// parameter as favor does: with the key term (exp_key_norm) its step-0 model
// is FAVOR+ (the same logits, bit for bit: the same kernels on the same
// numbers); without it the keys lose their -|k|^2/2 and the logits move.
TEST(ModelReference, ExpWithKeyNormStartsAsFavor) {
  for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
    const ModelConfig favor = test::tiny_config(AttentionKind::Favor, obj);
    ModelConfig exp = test::tiny_config(AttentionKind::Exp, obj);
    std::vector<float> want, same, moved;
    {
      Harness h;
      PerformerModel model(favor, h.res.ctx(), nullptr);
      model.forward(tiny_input(favor, 2, 19), 0, &want);
    }
    for (bool key_norm : {true, false}) {
      exp.exp_key_norm = key_norm;
      Harness h;
      PerformerModel model(exp, h.res.ctx(), nullptr);
      model.forward(tiny_input(exp, 2, 19), 0, key_norm ? &same : &moved);
    }
    EXPECT_EQ(same, want) << objective_name(obj);
    EXPECT_GT(test::rel_l2(moved, want), 1e-4) << objective_name(obj);
  }
}

// Parameters carried between attention kinds (init_from and evaluation with
// another kind): every tensor both layouts hold keeps its values bit for bit,
// the ones only the target holds start from its initialisation and are
// named, the ones only the source holds are left out.
// A packed forward on a rank without rows (which a scan over the ranks
// cannot take) is refused with the reason, not run into a crash; the
// inference tools pad such a row with a filler.
TEST(ModelReference, PackedForwardRefusesARankWithoutRows) {
  const ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  Harness h;
  PerformerModel model(cfg, h.res.ctx(), nullptr);
  ModelInput in;
  in.batch = 1;
  in.n = 0;
  in.packed.samples.emplace_back();
  try {
    model.forward(in, 0);
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("this rank holds no row of the packed samples"), std::string::npos)
        << e.what();
  }
}

TEST(ModelParams, CarryKeepsSharedTensorsAndInitialisesTheRest) {
  auto values_of = [](const ModelConfig& cfg, uint64_t seed) {
    std::vector<float> v(static_cast<size_t>(ParamLayout(cfg).total()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(double(i) * 0.37 + double(seed)));
    return v;
  };
  struct Pair {
    ModelConfig from, to;
    std::vector<std::string> fresh;
  };
  ModelConfig softmax_w = test::tiny_config(AttentionKind::Softmax, Objective::CausalLM),
              favor_w = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  softmax_w.window = favor_w.window = 3;
  const ModelConfig favor = test::tiny_config(AttentionKind::Favor, Objective::CausalLM),
                    exp = test::tiny_config(AttentionKind::Exp, Objective::CausalLM);
  const std::vector<Pair> cases = {
      Pair{favor, exp, {"layer0.attn.features", "layer1.attn.features"}}, Pair{exp, favor, {}},
      Pair{softmax_w, favor_w, {"layer0.attn.gate", "layer1.attn.gate"}}, Pair{favor, favor, {}}};
  for (const Pair& c : cases) {
    const ParamLayout from(c.from), to(c.to);
    const std::vector<float> src = values_of(c.from, 5);
    std::vector<std::string> fresh;
    const std::vector<float> got = carry_parameters(c.to, to, from, src, &fresh);
    EXPECT_EQ(fresh, c.fresh);
    std::vector<float> init(static_cast<size_t>(to.total()));
    init_parameters(c.to, to, init.data());
    ASSERT_EQ(got.size(), init.size());
    for (const ParamSlice& s : to.slices()) {
      const bool carried = std::find(c.fresh.begin(), c.fresh.end(), s.name) == c.fresh.end();
      const std::vector<float>& want = carried ? src : init;
      const int64_t at = carried ? from.find(s.name).offset : s.offset;
      EXPECT_TRUE(std::equal(got.begin() + s.offset, got.begin() + s.offset + s.numel, want.begin() + at))
          << s.name << (carried ? " carried" : " initialised");
    }
  }
  EXPECT_THROW(carry_parameters(exp, ParamLayout(exp), ParamLayout(favor), std::vector<float>(3)), ValueError);
}

// Per parameter tensor s, with r the finite differences and g the model's gradient:
//   rel_l2  = |g_s - r_s| / max(|r_s|, floor * |r|)   (the floor holds tensors
//             whose true gradient is (nearly) zero, e.g. the key bias under
//             softmax, to an absolute error instead)
//   element = max_i |g_i - r_i| / (|r_i| + rms_s),   rms_s = that denominator / sqrt(numel_s)
struct GradientTolerance {
  double rel_l2 = 1e-5;
  double element = 2e-5;
  double floor = 1e-3;
};

struct GradientComparison {
  bool ok = true;
  std::string failures;  // one line per failing tensor
  double worst_rel_l2 = 0, worst_element = 0;
  std::string worst_rel_l2_at, worst_element_at;
};

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// max(|r_s|, floor * |r|) / sqrt(numel_s): the scale of one element of s.
double element_scale(const ParamSlice& s, const std::vector<double>& want, double all, const GradientTolerance& tol) {
  double den = 0;
  for (int64_t i = s.offset; i < s.offset + s.numel; ++i) den += want[i] * want[i];
  return std::max(std::sqrt(den), tol.floor * all) / std::sqrt(static_cast<double>(s.numel));
}

GradientComparison compare_gradients(const ParamLayout& layout, const std::vector<float>& got,
                                     const std::vector<double>& want, const GradientTolerance& tol) {
  GradientComparison c;
  const double all = norm(want);
  for (const ParamSlice& s : layout.slices()) {
    const double rms = element_scale(s, want, all, tol);
    double num = 0, elem = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < s.numel; ++i) {
      const double d = got[s.offset + i] - want[s.offset + i];
      num += d * d;
      const double e = std::abs(d) / (std::abs(want[s.offset + i]) + rms);
      if (e > elem) elem = e, at = i;
    }
    const double rel = std::sqrt(num) / (rms * std::sqrt(static_cast<double>(s.numel)));
    if (rel > c.worst_rel_l2) c.worst_rel_l2 = rel, c.worst_rel_l2_at = s.name;
    if (elem > c.worst_element) c.worst_element = elem, c.worst_element_at = s.name + "[" + std::to_string(at) + "]";
    if (rel > tol.rel_l2 || elem > tol.element) {
      c.ok = false;
      c.failures += s.name + ": rel_l2 " + std::to_string(rel) + ", element " + std::to_string(at) + " off by " +
                    std::to_string(elem) + " of its scale\n";
    }
  }
  return c;
}

// The comparator must reject, in every tensor, the gradient scaled by 1.01
// and a single element off by 1e-3 of its scale.
void expect_comparator_rejects(const ParamLayout& layout, const std::vector<float>& got,
                               const std::vector<double>& want, const GradientTolerance& tol) {
  const double all = norm(want);
  for (const ParamSlice& s : layout.slices()) {
    std::vector<float> bad = got;
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i) bad[i] *= 1.01f;
    const GradientComparison scaled = compare_gradients(layout, bad, want, tol);
    EXPECT_FALSE(scaled.ok) << s.name << " scaled by 1.01 passed";
    EXPECT_NE(scaled.failures.find(s.name + ":"), std::string::npos) << scaled.failures;
    bad = got;
    const int64_t i = s.offset + s.numel / 2;
    bad[i] = static_cast<float>(want[i] + 1e-3 * (std::abs(want[i]) + element_scale(s, want, all, tol)));
    const GradientComparison one = compare_gradients(layout, bad, want, tol);
    EXPECT_FALSE(one.ok) << s.name << " with one element off passed";
    EXPECT_NE(one.failures.find(s.name + ":"), std::string::npos) << one.failures;
  }
}

// Every parameter element of the fp32 model's gradient against central finite
// differences of the float64 reference loss, h = 1e-5. The loss sum (10 to
// 60 here) is accurate to ~1e-14 in float64, so rounding adds ~1e-9 to each
// quotient, and the truncation error h^2 |d3L/dp3| / 6 is ~1e-10 (quotients
// taken with 10 h agree with these to 6e-8 relative per tensor): both far
// below the fp32 error of the model's gradients (measured rel_l2 <= 4e-7,
// element <= 1.1e-6), so the tolerances leave a margin of ~20x.
void check_gradients(AttentionKind kind, Objective obj, bool exp_key_norm = false, int64_t window = 0) {
  ModelConfig cfg = test::gradcheck_config(kind, obj);
  cfg.exp_key_norm = exp_key_norm;
  cfg.window = window;
  const std::string what = std::string(attention_kind_name(kind)) + (exp_key_norm ? "+key_norm" : "") +
                           (window ? "+window" + std::to_string(window) : "") + "/" + objective_name(obj);
  Harness h;
  PerformerModel model(cfg, h.res.ctx(), nullptr);
  test::perturb_trained_projections(model);
  const ModelInput in = tiny_input(cfg, 2, 11);
  ASSERT_GT(in.predicted(), 0) << what;
  model.zero_grads();
  model.forward_backward(in, 0, 1.0);
  const std::vector<float> got(model.grads().data<float>(), model.grads().data<float>() + model.grads().numel());
  const std::vector<double> want =
      test::reference_fd_gradient(cfg, params_f64(model), in, test::reference_projections(model, 0), 1e-5);
  const GradientTolerance tol;
  const GradientComparison c = compare_gradients(model.layout(), got, want, tol);
  EXPECT_TRUE(c.ok) << what << "\n" << c.failures;
  std::printf("%s: %zu parameters; worst rel_l2 %.2e (%s), worst element %.2e (%s)\n", what.c_str(), want.size(),
              c.worst_rel_l2, c.worst_rel_l2_at.c_str(), c.worst_element, c.worst_element_at.c_str());
  expect_comparator_rejects(model.layout(), got, want, tol);
}

TEST(ModelGradients, FavorCausal) { check_gradients(AttentionKind::Favor, Objective::CausalLM); }
TEST(ModelGradients, FavorMasked) { check_gradients(AttentionKind::Favor, Objective::MaskedLM); }
TEST(ModelGradients, ReluCausal) { check_gradients(AttentionKind::Relu, Objective::CausalLM); }
TEST(ModelGradients, ReluMasked) { check_gradients(AttentionKind::Relu, Objective::MaskedLM); }
TEST(ModelGradients, EluCausal) { check_gradients(AttentionKind::Elu, Objective::CausalLM); }
TEST(ModelGradients, EluMasked) { check_gradients(AttentionKind::Elu, Objective::MaskedLM); }
TEST(ModelGradients, ExpCausal) { check_gradients(AttentionKind::Exp, Objective::CausalLM); }
TEST(ModelGradients, ExpMasked) { check_gradients(AttentionKind::Exp, Objective::MaskedLM); }
TEST(ModelGradients, ExpKeyNormCausal) { check_gradients(AttentionKind::Exp, Objective::CausalLM, true); }
TEST(ModelGradients, ExpKeyNormMasked) { check_gradients(AttentionKind::Exp, Objective::MaskedLM, true); }
TEST(ModelGradients, SoftmaxCausal) { check_gradients(AttentionKind::Softmax, Objective::CausalLM); }
TEST(ModelGradients, SoftmaxMasked) { check_gradients(AttentionKind::Softmax, Objective::MaskedLM); }
TEST(ModelGradients, SoftmaxWindowCausal) { check_gradients(AttentionKind::Softmax, Objective::CausalLM, false, 3); }
TEST(ModelGradients, FavorWindowCausal) { check_gradients(AttentionKind::Favor, Objective::CausalLM, false, 3); }
TEST(ModelGradients, FavorWindowMasked) { check_gradients(AttentionKind::Favor, Objective::MaskedLM, false, 3); }
TEST(ModelGradients, ExpWindowCausal) { check_gradients(AttentionKind::Exp, Objective::CausalLM, false, 3); }

// Changing tokens after position i leaves the causal model's logits at
// positions <= i unchanged (to fp32 rounding).
void check_causality(AttentionKind kind, int64_t window = 0) {
  ModelConfig cfg = test::tiny_config(kind, Objective::CausalLM);
  cfg.window = window;
  Harness h;
  PerformerModel model(cfg, h.res.ctx(), nullptr);
  test::perturb_trained_projections(model);
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
TEST(ModelCausality, Elu) { check_causality(AttentionKind::Elu); }
TEST(ModelCausality, Exp) { check_causality(AttentionKind::Exp); }
TEST(ModelCausality, Softmax) { check_causality(AttentionKind::Softmax); }
TEST(ModelCausality, SoftmaxWindow) { check_causality(AttentionKind::Softmax, 4); }
TEST(ModelCausality, FavorWindow) { check_causality(AttentionKind::Favor, 4); }

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
