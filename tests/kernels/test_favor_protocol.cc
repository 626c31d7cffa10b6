// The FAVOR+ sequence-parallel protocol (favor_attention.h) with the sequence
// cut into P = 1, 2, 3 uneven blocks (tests/kernels/favor_protocol_driver.h),
// fused (CPU) and in slabs (slabs that divide neither n nor the blocks),
// causal and bidirectional, FAVOR+ and relu, on asynchronous CPU streams with
// random delays, against the float64 whole-sequence reference; and the fused
// kernels' memory: no buffer of n x m floats, the tracked peak within the
// workspace the planner is told.
#include <gtest/gtest.h>

#include <omp.h>

#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/random_features/random_features.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/kernels/favor_protocol_driver.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

struct Inputs {
  std::vector<float> q, k, v, g, W;
  std::vector<double> qd, kd, vd, gd, Wd;
};

Inputs make_inputs(int64_t size, int64_t m, int64_t d, uint64_t seed) {
  Inputs in;
  in.q = test::cast_vector<float>(test::normal_vector(size, seed, 1));
  in.k = test::cast_vector<float>(test::normal_vector(size, seed, 2));
  in.v = test::cast_vector<float>(test::normal_vector(size, seed, 3));
  in.g = test::cast_vector<float>(test::normal_vector(size, seed, 4));
  in.W = random_projection_f32({m, d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
  in.qd.assign(in.q.begin(), in.q.end());
  in.kd.assign(in.k.begin(), in.k.end());
  in.vd.assign(in.v.begin(), in.v.end());
  in.gd.assign(in.g.begin(), in.g.end());
  in.Wd.assign(in.W.begin(), in.W.end());
  return in;
}

TEST(FavorProtocol, BlocksMatchWholeSequenceReference) {
  const int64_t H = 2, d = 16, m = 32, chunk = 24;
  HostStreamConfig async;
  async.async = true;
  async.jitter = true;
  async.jitter_max_us = 50;
  uint64_t seed = 900;
  for (int64_t n : {7, 200, 1000}) {
    for (bool causal : {true, false}) {
      for (FeatureKernel kernel :
           {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Elu, FeatureKernel::Exp}) {
        const int64_t size = H * n * d;
        const Inputs in = make_inputs(size, m, d, ++seed);
        FavorAttentionParams p = favor_attention_params(1, H, n, d, m, causal, kernel, chunk);
        std::vector<double> ro(size), rq(size), rk(size), rv(size);
        favor_attention_forward_ref(p, in.qd.data(), in.kd.data(), in.vd.data(), in.Wd.data(), ro.data());
        favor_attention_backward_ref(p, in.qd.data(), in.kd.data(), in.vd.data(), in.Wd.data(), in.gd.data(),
                                     rq.data(), rk.data(), rv.data());
        for (int P : {1, 2, 3}) {
          for (int64_t slab_rows : {0, 50}) {
            SCOPED_TRACE(testing::Message() << "n=" << n << " causal=" << causal << " kernel="
                                            << feature_kernel_name(kernel) << " P=" << P << " slab_rows=" << slab_rows);
            FavorShape s = p.shape;
            s.slab_rows = slab_rows;
            MemoryTracker tracker(Device::cpu());
            async.jitter_seed = seed * 7 + P;
            const ExecResources res(Device::cpu(), tracker, async);
            std::vector<float> o(size), dq(size), dk(size), dv(size);
            test::run_favor_protocol(res.ctx(), s, causal, P, in.q.data(), in.k.data(), in.v.data(), in.W.data(),
                                     in.g.data(), o.data(), dq.data(), dk.data(), dv.data());
            EXPECT_LE(test::rel_l2(o, ro), 1e-5);
            EXPECT_LE(test::rel_l2(dq, rq), 1e-5);
            EXPECT_LE(test::rel_l2(dk, rk), 1e-5);
            EXPECT_LE(test::rel_l2(dv, rv), 1e-5);
          }
        }
      }
    }
  }
}

// The fused forward and backward hold per-thread tiles only: at n = 8192,
// m = 256 one head's features alone would be 8 MiB.
TEST(FavorProtocol, FusedHoldsNoFeatureBuffers) {
  const int64_t B = 1, H = 2, n = 8192, d = 32, m = 256, size = B * H * n * d;
  for (bool causal : {true, false}) {
    SCOPED_TRACE(testing::Message() << "causal=" << causal);
    const Inputs in = make_inputs(size, m, d, 77);
    const FavorAttentionParams p = favor_attention_params(B, H, n, d, m, causal, FeatureKernel::Softmax, 64);
    MemoryTracker tracker(Device::cpu());
    const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
    std::vector<float> o(size), den(B * H * n), rs(B * H * n), total(favor_attention_total_floats(p));
    std::vector<float> dq(size), dk(size), dv(size);
    float* tp = causal ? nullptr : total.data();
    favor_attention_forward(res.ctx(), p, in.q.data(), in.k.data(), in.v.data(), in.W.data(), o.data(), den.data(),
                            rs.data(), tp);
    synchronize(res.ctx().stream);
    const int64_t fwd_peak = tracker.stats().peak_bytes;
    favor_attention_backward(res.ctx(), p, in.q.data(), in.k.data(), in.v.data(), in.W.data(), o.data(), den.data(),
                             rs.data(), tp, in.g.data(), dq.data(), dk.data(), dv.data());
    synchronize(res.ctx().stream);
    const int64_t peak = tracker.stats().peak_bytes;
    EXPECT_LE(fwd_peak, favor_attention_forward_workspace_bytes(p, Device::cpu()));
    EXPECT_LE(peak, std::max(favor_attention_forward_workspace_bytes(p, Device::cpu()), favor_attention_backward_workspace_bytes(p, Device::cpu())));
    EXPECT_LT(peak - H * n * (d + 1) * 4, n * m * 4 / 4) << "a feature buffer of n x m floats was held";
    EXPECT_EQ(tracker.stats().current_bytes, 0);
  }
}

}  // namespace
}  // namespace pf
