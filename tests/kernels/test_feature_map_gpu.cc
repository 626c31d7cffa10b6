// CUDA feature maps against the float64 reference (forward features and
// log-scales, backward with Phi given and recomputed, large input norms).
// Skipped, and reported as skipped, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/feature_map/feature_map.h"
#include "kernels/random_features/random_features.h"
#include "runtime/device.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

// A float buffer on the device, filled from / read back to the host.
class DeviceFloats {
 public:
  DeviceFloats(MemoryTracker& tracker, int64_t n) : tracker_(tracker), n_(n) {
    ptr_ = static_cast<float*>(device_allocate(tracker_, bytes(), "test"));
  }
  DeviceFloats(MemoryTracker& tracker, const std::vector<float>& host) : DeviceFloats(tracker, host.size()) {
    copy_bytes(ptr_, tracker_.device(), host.data(), Device::cpu(), bytes());
  }
  ~DeviceFloats() { device_free(tracker_, ptr_, bytes(), "test"); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return ptr_; }
  std::vector<float> host() const {
    std::vector<float> out(static_cast<size_t>(n_));
    copy_bytes(out.data(), Device::cpu(), ptr_, tracker_.device(), bytes());
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
    for (FeatureKernel k : {FeatureKernel::Softmax, FeatureKernel::Relu}) {
      ++seed;
      const auto X = test::cast_vector<float>(test::normal_vector(c.n * c.d, seed, 1, c.x_scale));
      const auto W = random_projection_f32({c.m, c.d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
      const auto G = test::cast_vector<float>(test::normal_vector(c.n * c.m, seed, 2));
      const std::vector<double> Xd(X.begin(), X.end()), Wd(W.begin(), W.end()), Gd(G.begin(), G.end());
      const FeatureMapParams p = default_feature_params(k, c.d);
      std::vector<double> phi_ref(c.n * c.m), c_ref(c.n), dx_ref(c.n * c.d);
      feature_map_forward_ref(p, c.n, c.d, c.m, Xd.data(), Wd.data(), phi_ref.data(), c_ref.data());
      feature_map_backward_ref(p, c.n, c.d, c.m, Xd.data(), Wd.data(), nullptr, Gd.data(), dx_ref.data());

      DeviceFloats x(tracker, X), w(tracker, W), g(tracker, G), phi(tracker, c.n * c.m), ls(tracker, c.n),
          dx(tracker, c.n * c.d), dx_re(tracker, c.n * c.d);
      feature_map_forward(ctx, p, c.n, c.d, c.m, x.get(), w.get(), phi.get(), ls.get());
      feature_map_backward(ctx, p, c.n, c.d, c.m, x.get(), w.get(), phi.get(), g.get(), dx.get());
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
      }
    }
}

}  // namespace
}  // namespace pf
