// FAVOR+ attention on CUDA (the windowed composition over the feature-map and
// linear-attention CUDA kernels) against the float64 reference: causal and
// bidirectional, FAVOR+ and relu, n not a multiple of the chunk, one window
// and windows of 100 positions, forward and backward, temporaries recorded in
// the context's tracker and all released; and the sequence-parallel protocol
// with the sequence in 3 blocks. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/random_features/random_features.h"
#include "runtime/device.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/support/numerics.h"
#include "tests/support/gpu_harness.h"
#include "tests/kernels/favor_protocol_driver.h"

namespace pf {
namespace {

using test::Gpu;

// out, dq, dk, dv (device) against the float64 reference on the same inputs,
// rel L2 <= 1e-4 (fp32 CUDA math).
void expect_matches_reference(Gpu& gpu, const FavorAttentionParams& p, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& W,
                              const std::vector<float>& g, const float* o, const float* gq, const float* gk,
                              const float* gv) {
  const int64_t size = static_cast<int64_t>(q.size());
  const std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end()),
      gd(g.begin(), g.end()), Wd(W.begin(), W.end());
  std::vector<double> ro(size), rq(size), rk(size), rv(size);
  favor_attention_forward_ref(p, qd.data(), kd.data(), vd.data(), Wd.data(), ro.data());
  favor_attention_backward_ref(p, qd.data(), kd.data(), vd.data(), Wd.data(), gd.data(), rq.data(), rk.data(),
                               rv.data());
  EXPECT_LE(test::rel_l2(gpu.download(o, size), ro), 1e-4);
  EXPECT_LE(test::rel_l2(gpu.download(gq, size), rq), 1e-4);
  EXPECT_LE(test::rel_l2(gpu.download(gk, size), rk), 1e-4);
  EXPECT_LE(test::rel_l2(gpu.download(gv, size), rv), 1e-4);
}

TEST(FavorAttentionGpu, MatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const int64_t B = 2, H = 3, n = 333, d = 32, m = 64, chunk = 48, size = B * H * n * d;
  uint64_t seed = 700;
  for (int64_t window : {0, 100}) {
  for (bool causal : {true, false}) {
    for (FeatureKernel kernel : {FeatureKernel::Softmax, FeatureKernel::Relu}) {
      SCOPED_TRACE(testing::Message() << "causal=" << causal << " kernel=" << feature_kernel_name(kernel)
                                      << " window=" << window);
      ++seed;
      FavorAttentionParams p = favor_attention_params(B, H, n, d, m, causal, kernel, chunk);
      p.window = window;
      const auto q = test::cast_vector<float>(test::normal_vector(size, seed, 1));
      const auto k = test::cast_vector<float>(test::normal_vector(size, seed, 2));
      const auto v = test::cast_vector<float>(test::normal_vector(size, seed, 3));
      const auto g = test::cast_vector<float>(test::normal_vector(size, seed, 4));
      const auto W = random_projection_f32({m, d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
      Gpu gpu;
      const int64_t live_before = gpu.tracker().stats().current_bytes;
      float *dq_ = gpu.upload(q), *dk_ = gpu.upload(k), *dv_ = gpu.upload(v), *dg = gpu.upload(g), *dW = gpu.upload(W);
      float *o = gpu.alloc(size), *den = gpu.alloc(B * H * n), *rs = gpu.alloc(B * H * n),
            *total = gpu.alloc(favor_attention_total_floats(p));
      float *gq = gpu.alloc(size), *gk = gpu.alloc(size), *gv = gpu.alloc(size);
      const int64_t live_inputs = gpu.tracker().stats().current_bytes;
      float* tp = causal ? nullptr : total;
      favor_attention_forward(gpu.ctx(), p, dq_, dk_, dv_, dW, o, den, rs, tp);
      favor_attention_backward(gpu.ctx(), p, dq_, dk_, dv_, dW, o, den, rs, tp, dg, gq, gk, gv);
      EXPECT_EQ(gpu.tracker().stats().current_bytes, live_inputs) << "temporaries not released";
      EXPECT_GT(live_inputs, live_before);

      expect_matches_reference(gpu, p, q, k, v, W, g, o, gq, gk, gv);
    }
  }
  }
}

TEST(FavorAttentionGpu, ProtocolBlocksMatchReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const int64_t H = 2, n = 500, d = 32, m = 64, chunk = 48, size = H * n * d;
  uint64_t seed = 800;
  for (bool causal : {true, false}) {
    SCOPED_TRACE(testing::Message() << "causal=" << causal);
    ++seed;
    FavorAttentionParams p = favor_attention_params(1, H, n, d, m, causal, FeatureKernel::Softmax, chunk);
    p.window = 64;
    const auto q = test::cast_vector<float>(test::normal_vector(size, seed, 1));
    const auto k = test::cast_vector<float>(test::normal_vector(size, seed, 2));
    const auto v = test::cast_vector<float>(test::normal_vector(size, seed, 3));
    const auto g = test::cast_vector<float>(test::normal_vector(size, seed, 4));
    const auto W = random_projection_f32({m, d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
    Gpu gpu;
    float *o = gpu.alloc(size), *gq = gpu.alloc(size), *gk = gpu.alloc(size), *gv = gpu.alloc(size);
    test::run_favor_protocol(gpu.ctx(), p.shape(), causal, 3, gpu.upload(q), gpu.upload(k), gpu.upload(v),
                             gpu.upload(W), gpu.upload(g), o, gq, gk, gv);
    expect_matches_reference(gpu, p, q, k, v, W, g, o, gq, gk, gv);
  }
}

}  // namespace
}  // namespace pf
