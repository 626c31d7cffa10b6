// Feature maps (FAVOR+ softmax, ReLU, elu + 1 and exp kernels): the CPU
// backend against the float64 reference on fresh random inputs over the shape
// grid (features, dX and the accumulated dW), finite-difference checks of the
// reference backward with respect to X and W (true features and held scale),
// invariants of the log-scale form, large input norms, the analysis-only
// trigonometric features, argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/feature_map/feature_map.h"
#include "kernels/feature_map/feature_map_math.h"
#include "kernels/random_features/random_features.h"
#include "runtime/errors.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

struct Shape3 {
  int64_t n, d, m;
};

// Covers every n in {1, 7, 64, 1000, 4099}, d in {16, 32, 64}, m in {16, 64, 100, 256}.
const Shape3 kShapes[] = {{1, 16, 16},  {7, 32, 100}, {64, 64, 256},   {1000, 16, 64}, {4099, 64, 100},
                          {64, 32, 16}, {7, 64, 64},  {1000, 32, 256}, {1, 64, 100}};

const FeatureKernel kKernels[] = {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Elu,
                                  FeatureKernel::Exp};

struct Inputs {
  std::vector<float> X, W, G;
  std::vector<double> Xd, Wd, Gd;
};

Inputs make_inputs(const Shape3& s, uint64_t seed, double x_scale = 1.0) {
  Inputs in;
  in.X = test::cast_vector<float>(test::normal_vector(s.n * s.d, seed, 1, x_scale));
  in.W = random_projection_f32({s.m, s.d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
  in.G = test::cast_vector<float>(test::normal_vector(s.n * s.m, seed, 2));
  in.Xd.assign(in.X.begin(), in.X.end());
  in.Wd.assign(in.W.begin(), in.W.end());
  in.Gd.assign(in.G.begin(), in.G.end());
  return in;
}

TEST(FeatureMap, CpuForwardMatchesReference) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  uint64_t seed = 100;
  for (const Shape3& s : kShapes)
    for (FeatureKernel k : kKernels) {
      const Inputs in = make_inputs(s, ++seed);
      const FeatureMapParams p = default_feature_params(k, s.d);
      std::vector<float> phi(s.n * s.m), c(s.n);
      std::vector<double> phi_ref(s.n * s.m), c_ref(s.n);
      feature_map_forward_cpu(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi.data(), c.data());
      feature_map_forward_ref(p, s.n, s.d, s.m, in.Xd.data(), in.Wd.data(), phi_ref.data(), c_ref.data());
      synchronize(ctx.stream);
      const std::string where = std::string(feature_kernel_name(k)) + " n=" + std::to_string(s.n) +
                                " d=" + std::to_string(s.d) + " m=" + std::to_string(s.m);
      EXPECT_LE(test::rel_l2(phi, phi_ref), 1e-5) << where;
      double max_c_err = 0;
      for (int64_t i = 0; i < s.n; ++i) max_c_err = std::max(max_c_err, std::fabs(c[i] - c_ref[i]));
      EXPECT_LE(max_c_err, 1e-5) << where;
      // The dispatcher reaches the same CPU code.
      std::vector<float> phi2(s.n * s.m), c2(s.n);
      feature_map_forward(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi2.data(), c2.data());
      synchronize(ctx.stream);
      EXPECT_EQ(phi, phi2) << where;
      EXPECT_EQ(c, c2) << where;
    }
}

TEST(FeatureMap, CpuBackwardMatchesReferenceWithAndWithoutPhi) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  uint64_t seed = 200;
  for (const Shape3& s : kShapes)
    for (FeatureKernel k : kKernels) {
      const Inputs in = make_inputs(s, ++seed);
      FeatureMapParams p = default_feature_params(k, s.d);
      p.half_norm = seed % 2 == 0;  // exp: both forms over the grid
      std::vector<float> phi(s.n * s.m), dx(s.n * s.d), dx_re(s.n * s.d);
      std::vector<double> dx_ref(s.n * s.d);
      // dW accumulates: both start from the same non-zero values.
      const std::vector<double> dw0 = test::normal_vector(s.m * s.d, seed, 5);
      std::vector<float> dw = test::cast_vector<float>(dw0), dw_re = dw;
      std::vector<double> dw_ref = dw0;
      feature_map_forward_cpu(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi.data(), nullptr);
      feature_map_backward_cpu(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi.data(), in.G.data(), dx.data(),
                               dw.data());
      feature_map_backward(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), nullptr, in.G.data(), dx_re.data(),
                           dw_re.data());
      feature_map_backward_ref(p, s.n, s.d, s.m, in.Xd.data(), in.Wd.data(), nullptr, in.Gd.data(), dx_ref.data(),
                               dw_ref.data());
      synchronize(ctx.stream);
      const std::string where = std::string(feature_kernel_name(k)) + " n=" + std::to_string(s.n) +
                                " d=" + std::to_string(s.d) + " m=" + std::to_string(s.m) +
                                (p.half_norm ? " half_norm" : "");
      EXPECT_LE(test::rel_l2(dx, dx_ref), 1e-5) << where << " (Phi given)";
      EXPECT_LE(test::rel_l2(dx_re, dx_ref), 1e-5) << where << " (Phi recomputed)";
      // The accumulated part alone, against its own size.
      std::vector<double> got(s.m * s.d), got_re(s.m * s.d), want(s.m * s.d);
      for (int64_t e = 0; e < s.m * s.d; ++e) {
        got[e] = dw[e] - static_cast<float>(dw0[e]);
        got_re[e] = dw_re[e] - static_cast<float>(dw0[e]);
        want[e] = dw_ref[e] - dw0[e];
      }
      const double tol = 1e-5 + 1e-6 * test::l2_norm(dw0) / std::max(test::l2_norm(want), 1e-30);
      EXPECT_LE(test::rel_l2(got, want), tol) << where << " dW (Phi given)";
      EXPECT_LE(test::rel_l2(got_re, want), tol) << where << " dW (Phi recomputed)";
    }
}

TEST(FeatureMap, SoftmaxFeaturesAreBoundedWithRowMaxAttained) {
  const Shape3 s{64, 32, 100};
  const Inputs in = make_inputs(s, 7);
  const FeatureMapParams p = default_feature_params(FeatureKernel::Softmax, s.d);
  std::vector<float> phi(s.n * s.m), c(s.n);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  feature_map_forward_cpu(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi.data(), c.data());
  synchronize(ctx.stream);
  const float top = static_cast<float>(1.0 / std::sqrt(100.0));
  for (int64_t i = 0; i < s.n; ++i) {
    float mx = 0;
    for (int64_t l = 0; l < s.m; ++l) {
      ASSERT_GE(phi[i * s.m + l], 0.f);
      ASSERT_LE(phi[i * s.m + l], top);
      mx = std::max(mx, phi[i * s.m + l]);
    }
    EXPECT_EQ(mx, top) << "row " << i;
  }
}

// With W = I and the default data_scale 1 (how the model runs it), the Elu
// features are elu(x) + 1 of the rows themselves, from the definition
// (x + 1 for x > 0, exp(x) otherwise), in the reference and on the CPU.
TEST(FeatureMap, EluIsEluPlusOneOfTheRows) {
  const Shape3 s{50, 16, 16};
  const Inputs in = make_inputs(s, 11, 2.0);
  std::vector<double> eye(s.d * s.d, 0.0);
  for (int64_t j = 0; j < s.d; ++j) eye[j * s.d + j] = 1.0;
  const std::vector<float> eye_f(eye.begin(), eye.end());
  const FeatureMapParams p = default_feature_params(FeatureKernel::Elu, s.d);
  EXPECT_EQ(p.data_scale, 1.0);
  std::vector<double> phi(s.n * s.m), c(s.n);
  feature_map_forward_ref(p, s.n, s.d, s.m, in.Xd.data(), eye.data(), phi.data(), c.data());
  std::vector<float> phi_cpu(s.n * s.m), c_cpu(s.n);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  feature_map_forward_cpu(res.ctx(), p, s.n, s.d, s.m, in.X.data(), eye_f.data(), phi_cpu.data(), c_cpu.data());
  synchronize(res.ctx().stream);
  int negative = 0;
  for (int64_t i = 0; i < s.n * s.d; ++i) {
    const double x = in.Xd[i], want = x > 0 ? x + 1 : std::exp(x);
    negative += x < 0;
    EXPECT_NEAR(phi[i], want, 1e-15 * (1 + std::abs(want))) << "element " << i;
    EXPECT_NEAR(phi_cpu[i], want, 3e-7 * (1 + std::abs(want))) << "element " << i;
  }
  EXPECT_GT(negative, s.n * s.d / 4);  // both branches were taken
  for (int64_t i = 0; i < s.n; ++i) EXPECT_EQ(c[i], 0.0) << "Elu rows carry no log-scale";
}

// Exp is m^(-1/2) exp(u - max_l u_l) with u = s W x, from the definition; with
// half_norm it is the FAVOR+ (Softmax) map, bit for bit on the CPU.
TEST(FeatureMap, ExpIsExpOfTheProjection) {
  const Shape3 s{40, 16, 48};
  const Inputs in = make_inputs(s, 13, 1.5);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  FeatureMapParams p = default_feature_params(FeatureKernel::Exp, s.d);
  ASSERT_FALSE(p.half_norm) << "exp drops the key term by default";
  std::vector<double> phi(s.n * s.m), c(s.n);
  std::vector<float> phi_cpu(s.n * s.m), c_cpu(s.n);
  feature_map_forward_ref(p, s.n, s.d, s.m, in.Xd.data(), in.Wd.data(), phi.data(), c.data());
  feature_map_forward_cpu(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi_cpu.data(), c_cpu.data());
  synchronize(ctx.stream);
  for (int64_t i = 0; i < s.n; ++i) {
    std::vector<double> u(s.m);
    double top = -INFINITY;
    for (int64_t l = 0; l < s.m; ++l) {
      for (int64_t j = 0; j < s.d; ++j) u[l] += in.Wd[l * s.d + j] * p.data_scale * in.Xd[i * s.d + j];
      top = std::max(top, u[l]);
    }
    EXPECT_NEAR(c[i], top, 1e-12) << "row " << i;
    for (int64_t l = 0; l < s.m; ++l) {
      const double want = std::exp(u[l] - top) / std::sqrt(static_cast<double>(s.m));
      EXPECT_NEAR(phi[i * s.m + l], want, 1e-14) << "row " << i << " feature " << l;
      EXPECT_NEAR(phi_cpu[i * s.m + l], want, 1e-6) << "row " << i << " feature " << l;
    }
  }
  p.half_norm = true;
  std::vector<float> favor(s.n * s.m), favor_c(s.n);
  feature_map_forward_cpu(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi_cpu.data(), c_cpu.data());
  feature_map_forward_cpu(ctx, default_feature_params(FeatureKernel::Softmax, s.d), s.n, s.d, s.m, in.X.data(),
                          in.W.data(), favor.data(), favor_c.data());
  synchronize(ctx.stream);
  EXPECT_EQ(phi_cpu, favor);
  EXPECT_EQ(c_cpu, favor_c);
}

// Loss L(X) = sum_il R_il F_il(X) for the features F the loss is taken of:
// the true features exp(c) Phi, or Phi with the scale held at c0.
enum class Target { TrueFeatures, HeldScale };

std::vector<double> fd_target(const FeatureMapParams& p, const Shape3& s, const std::vector<double>& X,
                              const std::vector<double>& W, const std::vector<double>& c0, Target t) {
  std::vector<double> phi(s.n * s.m), c(s.n);
  feature_map_forward_ref(p, s.n, s.d, s.m, X.data(), W.data(), phi.data(), c.data());
  for (int64_t i = 0; i < s.n; ++i) {
    const double f = t == Target::TrueFeatures ? std::exp(c[i]) : std::exp(c[i] - c0[i]);
    for (int64_t l = 0; l < s.m; ++l) phi[i * s.m + l] *= f;
  }
  return phi;
}

// Central differences in X and in W against the reference's dX and dW.
void check_fd(FeatureKernel k, const Shape3& s, Target target, bool give_phi, uint64_t seed, bool half_norm = false) {
  const Inputs in = make_inputs(s, seed, 1.5);
  FeatureMapParams p = default_feature_params(k, s.d);
  p.half_norm = half_norm;
  const std::vector<double>& R = in.Gd;
  std::vector<double> phi(s.n * s.m), c0(s.n), dx(s.n * s.d), dw(s.m * s.d, 0.0);
  feature_map_forward_ref(p, s.n, s.d, s.m, in.Xd.data(), in.Wd.data(), phi.data(), c0.data());
  // dL/dPhi with the scale held: R exp(c) for the true features, R for the held scale.
  std::vector<double> G(R);
  if (target == Target::TrueFeatures)
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t l = 0; l < s.m; ++l) G[i * s.m + l] *= std::exp(c0[i]);
  feature_map_backward_ref(p, s.n, s.d, s.m, in.Xd.data(), in.Wd.data(), give_phi ? phi.data() : nullptr, G.data(),
                           dx.data(), dw.data());
  const double h = 1e-6;
  // dL/dV[e] for V = X or W, by central differences.
  auto fd_of = [&](bool of_w) {
    const std::vector<double>& base = of_w ? in.Wd : in.Xd;
    std::vector<double> fd(base.size());
    for (size_t e = 0; e < base.size(); ++e) {
      std::vector<double> up(base), down(base);
      up[e] += h;
      down[e] -= h;
      const auto fp = of_w ? fd_target(p, s, in.Xd, up, c0, target) : fd_target(p, s, up, in.Wd, c0, target);
      const auto fm = of_w ? fd_target(p, s, in.Xd, down, c0, target) : fd_target(p, s, down, in.Wd, c0, target);
      double acc = 0;
      for (int64_t q = 0; q < s.n * s.m; ++q) acc += R[q] * (fp[q] - fm[q]);
      fd[e] = acc / (2 * h);
    }
    return fd;
  };
  const std::string what = std::string(feature_kernel_name(k)) + (half_norm ? " half_norm" : "") +
                           " d=" + std::to_string(s.d) + " m=" + std::to_string(s.m) +
                           (target == Target::TrueFeatures ? " true features" : " held scale") +
                           (give_phi ? " Phi given" : " Phi recomputed");
  EXPECT_LE(test::rel_l2(dx, fd_of(false)), 1e-6) << what << ": dX";
  EXPECT_LE(test::rel_l2(dw, fd_of(true)), 1e-6) << what << ": dW";
}

TEST(FeatureMap, ReferenceBackwardMatchesFiniteDifferences) {
  uint64_t seed = 300;
  for (const Shape3& s : {Shape3{3, 8, 16}, Shape3{4, 8, 12}, Shape3{2, 16, 40}})
    for (bool give_phi : {true, false}) {
      check_fd(FeatureKernel::Softmax, s, Target::TrueFeatures, give_phi, ++seed);
      check_fd(FeatureKernel::Softmax, s, Target::HeldScale, give_phi, ++seed);
      check_fd(FeatureKernel::Relu, s, Target::TrueFeatures, give_phi, ++seed);
      check_fd(FeatureKernel::Elu, s, Target::TrueFeatures, give_phi, ++seed);
      for (bool half_norm : {false, true}) {
        check_fd(FeatureKernel::Exp, s, Target::TrueFeatures, give_phi, ++seed, half_norm);
        check_fd(FeatureKernel::Exp, s, Target::HeldScale, give_phi, ++seed, half_norm);
      }
    }
}

TEST(FeatureMap, LargeInputNormsStayFinite) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  for (double scale : {3.0, 10.0})
    for (FeatureKernel k : kKernels) {
      const Shape3 s{257, 64, 100};
      const Inputs in = make_inputs(s, 400 + static_cast<uint64_t>(scale), scale);
      const FeatureMapParams p = default_feature_params(k, s.d);
      std::vector<float> phi(s.n * s.m), c(s.n), dx(s.n * s.d);
      std::vector<double> phi_ref(s.n * s.m), c_ref(s.n), dx_ref(s.n * s.d);
      feature_map_forward_cpu(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi.data(), c.data());
      feature_map_backward_cpu(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), nullptr, in.G.data(), dx.data());
      feature_map_forward_ref(p, s.n, s.d, s.m, in.Xd.data(), in.Wd.data(), phi_ref.data(), c_ref.data());
      feature_map_backward_ref(p, s.n, s.d, s.m, in.Xd.data(), in.Wd.data(), nullptr, in.Gd.data(), dx_ref.data());
      synchronize(ctx.stream);
      for (float v : phi) ASSERT_TRUE(std::isfinite(v)) << "scale " << scale;
      for (float v : c) ASSERT_TRUE(std::isfinite(v)) << "scale " << scale;
      for (float v : dx) ASSERT_TRUE(std::isfinite(v)) << "scale " << scale;
      for (double v : phi_ref) ASSERT_TRUE(std::isfinite(v)) << "scale " << scale;
      for (double v : dx_ref) ASSERT_TRUE(std::isfinite(v)) << "scale " << scale;
      // fp32 exponents of size ~|x|^2 lose absolute accuracy, so the bound is looser here.
      EXPECT_LE(test::rel_l2(phi, phi_ref), 1e-3) << feature_kernel_name(k) << " scale " << scale;
    }
}

TEST(FeatureMap, TrigFeaturesCpuMatchesReference) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  for (const Shape3& s : {Shape3{7, 16, 16}, Shape3{1000, 64, 100}}) {
    const Inputs in = make_inputs(s, 500 + s.n);
    const double scale = std::pow(static_cast<double>(s.d), -0.25);
    std::vector<float> phi(s.n * 2 * s.m), c(s.n);
    std::vector<double> phi_ref(s.n * 2 * s.m), c_ref(s.n);
    trig_features_forward(ctx, scale, s.n, s.d, s.m, in.X.data(), in.W.data(), phi.data(), c.data());
    trig_features_forward_ref(scale, s.n, s.d, s.m, in.Xd.data(), in.Wd.data(), phi_ref.data(), c_ref.data());
    synchronize(ctx.stream);
    EXPECT_LE(test::rel_l2(phi, phi_ref), 1e-5) << "n=" << s.n;
    EXPECT_LE(test::rel_l2(c, c_ref), 1e-6) << "n=" << s.n;
  }
}

TEST(FeatureMap, Fp32ExponentialOfNonPositiveArguments) {
  double worst = 0;
  for (int k = 0; k <= 2000000; ++k) {
    const float v = -87.3f * static_cast<float>(k) / 2000000.f;
    const double want = std::exp(static_cast<double>(v));
    worst = std::max(worst, std::fabs(fm_exp_nonpos(v) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(fm_exp_nonpos(0.f), 1.f);
  EXPECT_EQ(fm_exp_nonpos(-88.f), 0.f);
  EXPECT_EQ(fm_exp_nonpos(-1e30f), 0.f);
  EXPECT_EQ(fm_exp_nonpos(-INFINITY), 0.f);
  EXPECT_TRUE(std::isnan(fm_exp_nonpos(NAN)));
}

TEST(FeatureMap, StorageDispatchOnCpu) {
  const ExecContext ctx;
  const Shape3 s{7, 16, 16};
  const Inputs in = make_inputs(s, 600);
  const FeatureMapParams p = default_feature_params(FeatureKernel::Softmax, s.d);
  std::vector<float> phi(s.n * s.m), phi2(s.n * s.m), dx(s.n * s.d), dx2(s.n * s.d);
  feature_map_forward(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), phi.data(), nullptr);
  feature_map_forward(ctx, p, DType::f32, s.n, s.d, s.m, in.X.data(), in.W.data(), phi2.data(), nullptr);
  EXPECT_EQ(phi, phi2);
  feature_map_backward(ctx, p, s.n, s.d, s.m, in.X.data(), in.W.data(), nullptr, in.G.data(), dx.data());
  feature_map_backward(ctx, p, DType::f32, s.n, s.d, s.m, in.X.data(), in.W.data(), nullptr, in.G.data(), dx2.data());
  EXPECT_EQ(dx, dx2);
  for (DType t : {DType::f16, DType::bf16}) {
    EXPECT_THROW(feature_map_forward(ctx, p, t, s.n, s.d, s.m, in.X.data(), in.W.data(), phi2.data(), nullptr),
                 ValueError);
    EXPECT_THROW(
        feature_map_backward(ctx, p, t, s.n, s.d, s.m, in.X.data(), in.W.data(), nullptr, in.G.data(), dx2.data()),
        ValueError);
  }
}

TEST(FeatureMap, RejectsBadArguments) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  const FeatureMapParams p = default_feature_params(FeatureKernel::Softmax, 4);
  float buf[64] = {};
  EXPECT_THROW(feature_map_forward_cpu(ctx, p, -1, 4, 4, buf, buf, buf, buf), ValueError);
  EXPECT_THROW(feature_map_forward_cpu(ctx, p, 2, 0, 4, buf, buf, buf, buf), ValueError);
  EXPECT_THROW(feature_map_backward_cpu(ctx, p, 2, 4, 0, buf, buf, buf, buf, buf), ValueError);
  FeatureMapParams bad = p;
  bad.relu_eps = -1;
  EXPECT_THROW(feature_map_forward_cpu(ctx, bad, 2, 4, 4, buf, buf, buf, buf), ValueError);
  EXPECT_THROW(default_feature_params(FeatureKernel::Relu, 0), ValueError);
  ExecContext gpu_ctx;
  gpu_ctx.device = Device::cuda(0);
  EXPECT_THROW(trig_features_forward(gpu_ctx, 1.0, 2, 4, 4, buf, buf, buf, buf), ValueError);
}

}  // namespace
}  // namespace pf
