// CUDA feature maps against the float64 reference (forward features and
// log-scales, backward with Phi given and recomputed, large input norms).
// Skipped, and reported as skipped, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/feature_map/feature_map.h"
#include "kernels/random_features/random_features.h"
#include "runtime/device.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/support/numerics.h"
#include "tests/support/storage.h"

namespace pf {
namespace {

// A float buffer on the device, filled from / read back to the host.
class DeviceFloats {
 public:
  DeviceFloats(MemoryTracker& tracker, int64_t n) : tracker_(tracker), n_(n) {
    ptr_ = static_cast<float*>(device_allocate(tracker_, bytes(), "test"));
  }
  DeviceFloats(MemoryTracker& tracker, const std::vector<float>& host) : DeviceFloats(tracker, host.size()) {
    copy_bytes_blocking(ptr_, tracker_.device(), host.data(), Device::cpu(), bytes());
  }
  ~DeviceFloats() { device_free(tracker_, ptr_, bytes(), "test"); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return ptr_; }
  std::vector<float> host() const {
    std::vector<float> out(static_cast<size_t>(n_));
    copy_bytes_blocking(out.data(), Device::cpu(), ptr_, tracker_.device(), bytes());
    return out;
  }

 private:
  int64_t bytes() const { return n_ * static_cast<int64_t>(sizeof(float)); }
  MemoryTracker& tracker_;
  int64_t n_;
  float* ptr_ = nullptr;
};

struct Case {
  int64_t n, d, m;
  double x_scale;
};

TEST(FeatureMapGpu, CudaMatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Device dev = Device::cuda(0);
  MemoryTracker tracker(dev);
  ExecResources res(dev, tracker);
  const ExecContext& ctx = res.ctx();
  uint64_t seed = 700;
  for (const Case& c : {Case{1, 16, 16, 1}, Case{7, 32, 100, 1}, Case{64, 64, 256, 1}, Case{1000, 16, 64, 1},
                        Case{4099, 64, 100, 1}, Case{257, 64, 100, 10}})
    for (FeatureKernel k : {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Elu, FeatureKernel::Exp}) {
      ++seed;
      const auto X = test::cast_vector<float>(test::normal_vector(c.n * c.d, seed, 1, c.x_scale));
      const auto W =
          random_projection_f32({c.m, c.d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
      const auto G = test::cast_vector<float>(test::normal_vector(c.n * c.m, seed, 2));
      const std::vector<double> Xd(X.begin(), X.end()), Wd(W.begin(), W.end()), Gd(G.begin(), G.end());
      FeatureMapParams p = default_feature_params(k, c.d);
      p.half_norm = seed % 2 == 0;  // exp: both forms
      std::vector<double> phi_ref(c.n * c.m), c_ref(c.n), dx_ref(c.n * c.d), dw_ref(c.m * c.d, 0.0);
      feature_map_forward_ref(p, c.n, c.d, c.m, Xd.data(), Wd.data(), phi_ref.data(), c_ref.data());
      feature_map_backward_ref(p, c.n, c.d, c.m, Xd.data(), Wd.data(), nullptr, Gd.data(), dx_ref.data(),
                               dw_ref.data());

      DeviceFloats x(tracker, X), w(tracker, W), g(tracker, G), phi(tracker, c.n * c.m), ls(tracker, c.n),
          dx(tracker, c.n * c.d), dx_re(tracker, c.n * c.d), dw(tracker, std::vector<float>(c.m * c.d, 0.f));
      feature_map_forward(ctx, p, c.n, c.d, c.m, x.get(), w.get(), phi.get(), ls.get());
      feature_map_backward(ctx, p, c.n, c.d, c.m, x.get(), w.get(), phi.get(), g.get(), dx.get(), dw.get());
      feature_map_backward(ctx, p, c.n, c.d, c.m, x.get(), w.get(), nullptr, g.get(), dx_re.get());
      synchronize(ctx.stream);
      const std::string where = std::string(feature_kernel_name(k)) + " n=" + std::to_string(c.n) +
                                " d=" + std::to_string(c.d) + " m=" + std::to_string(c.m) +
                                " x_scale=" + std::to_string(c.x_scale);
      const auto phi_h = phi.host(), ls_h = ls.host(), dx_h = dx.host(), dx_re_h = dx_re.host();
      for (float v : phi_h) ASSERT_TRUE(std::isfinite(v)) << where;
      for (float v : dx_re_h) ASSERT_TRUE(std::isfinite(v)) << where;
      // fp32 exponents of size ~|x|^2 lose absolute accuracy at large norms.
      const double tol = c.x_scale > 1 ? 1e-3 : 1e-5;
      EXPECT_LE(test::rel_l2(phi_h, phi_ref), tol) << where;
      double max_c_err = 0;
      for (int64_t i = 0; i < c.n; ++i) max_c_err = std::max(max_c_err, std::fabs(ls_h[i] - c_ref[i]));
      EXPECT_LE(max_c_err, 1e-5 * c.x_scale * c.x_scale) << where;
      if (c.x_scale == 1) {
        EXPECT_LE(test::rel_l2(dx_h, dx_ref), 1e-5) << where << " (Phi given)";
        EXPECT_LE(test::rel_l2(dx_re_h, dx_ref), 1e-5) << where << " (Phi recomputed)";
        EXPECT_LE(test::rel_l2(dw.host(), dw_ref), 1e-5) << where << " (dW)";
      }
    }
}

using test::from_storage;
using test::to_storage;

// A 16-bit buffer on the device.
class DeviceHalves {
 public:
  DeviceHalves(MemoryTracker& tracker, int64_t n) : tracker_(tracker), n_(n) {
    ptr_ = device_allocate(tracker_, 2 * n_, "test");
  }
  DeviceHalves(MemoryTracker& tracker, const std::vector<uint16_t>& host) : DeviceHalves(tracker, host.size()) {
    copy_bytes_blocking(ptr_, tracker_.device(), host.data(), Device::cpu(), 2 * n_);
  }
  ~DeviceHalves() { device_free(tracker_, ptr_, 2 * n_, "test"); }
  DeviceHalves(const DeviceHalves&) = delete;
  DeviceHalves& operator=(const DeviceHalves&) = delete;
  void* get() const { return ptr_; }
  std::vector<uint16_t> host() const {
    std::vector<uint16_t> out(static_cast<size_t>(n_));
    copy_bytes_blocking(out.data(), Device::cpu(), ptr_, tracker_.device(), 2 * n_);
    return out;
  }

 private:
  MemoryTracker& tracker_;
  int64_t n_;
  void* ptr_ = nullptr;
};

TEST(FeatureMapGpu, ReducedPrecisionStorageMatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Device dev = Device::cuda(0);
  MemoryTracker tracker(dev);
  ExecResources res(dev, tracker);
  const ExecContext& ctx = res.ctx();
  uint64_t seed = 800;
  for (DType t : {DType::f16, DType::bf16})
    for (const Case& c : {Case{7, 32, 100, 1}, Case{4099, 64, 256, 1}})
      for (FeatureKernel k : {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Elu}) {
        ++seed;
        // Inputs rounded to the storage type; the reference sees the rounded values.
        std::vector<uint16_t> X16, G16;
        for (double v : test::normal_vector(c.n * c.d, seed, 1)) X16.push_back(to_storage(static_cast<float>(v), t));
        for (double v : test::normal_vector(c.n * c.m, seed, 2)) G16.push_back(to_storage(static_cast<float>(v), t));
        const auto W =
            random_projection_f32({c.m, c.d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
        std::vector<double> Xd, Gd, Wd(W.begin(), W.end());
        for (uint16_t b : X16) Xd.push_back(from_storage(b, t));
        for (uint16_t b : G16) Gd.push_back(from_storage(b, t));
        const FeatureMapParams p = default_feature_params(k, c.d);
        std::vector<double> phi_ref(c.n * c.m), c_ref(c.n), dx_ref(c.n * c.d);
        feature_map_forward_ref(p, c.n, c.d, c.m, Xd.data(), Wd.data(), phi_ref.data(), c_ref.data());
        feature_map_backward_ref(p, c.n, c.d, c.m, Xd.data(), Wd.data(), nullptr, Gd.data(), dx_ref.data());

        DeviceHalves x(tracker, X16), g(tracker, G16), phi(tracker, c.n * c.m), dx(tracker, c.n * c.d),
            dx_re(tracker, c.n * c.d);
        DeviceFloats w(tracker, W), ls(tracker, c.n);
        feature_map_forward(ctx, p, t, c.n, c.d, c.m, x.get(), w.get(), phi.get(), ls.get());
        feature_map_backward(ctx, p, t, c.n, c.d, c.m, x.get(), w.get(), phi.get(), g.get(), dx.get());
        feature_map_backward(ctx, p, t, c.n, c.d, c.m, x.get(), w.get(), nullptr, g.get(), dx_re.get());
        synchronize(ctx.stream);
        auto widen = [&](const std::vector<uint16_t>& v) {
          std::vector<float> out;
          for (uint16_t b : v) out.push_back(from_storage(b, t));
          return out;
        };
        const auto phi_h = widen(phi.host()), dx_h = widen(dx.host()), dx_re_h = widen(dx_re.host());
        const auto ls_h = ls.host();
        const std::string where = std::string(dtype_name(t)) + " " + feature_kernel_name(k) +
                                  " n=" + std::to_string(c.n) + " m=" + std::to_string(c.m);
        // One rounding of the outputs (2^-11 for f16, 2^-8 for bf16) plus, for
        // the backward with Phi given, the rounding of the stored Phi.
        const double unit = t == DType::f16 ? 4.9e-4 : 3.9e-3;
        EXPECT_LE(test::rel_l2(phi_h, phi_ref), unit) << where;
        double max_c_err = 0;
        for (int64_t i = 0; i < c.n; ++i) max_c_err = std::max(max_c_err, std::fabs(ls_h[i] - c_ref[i]));
        EXPECT_LE(max_c_err, 1e-5) << where;
        EXPECT_LE(test::rel_l2(dx_re_h, dx_ref), unit) << where << " (Phi recomputed)";
        EXPECT_LE(test::rel_l2(dx_h, dx_ref), 4 * unit) << where << " (Phi given)";
      }
}

}  // namespace
}  // namespace pf
